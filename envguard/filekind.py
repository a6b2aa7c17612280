"""What kind of file a command was handed, before it reads it as the kind it wants.

A command that takes a lock (``check``, ``fleet``, ``create``, ``lock --check``) and is given an
environment file, a report or ``/etc/passwd`` must say what the file is and what to pass instead; read as
a lock, an environment file is a lock with no packages, and every comparison with it is a false verdict.
The kind of a file is decided here, once, for every command: :func:`detect_kind` (from the text and, when
parsed, the document) and :func:`read_kind` (the text parsed the way its kind wants, then judged) are what
diff's reader (envguard.sources), lint and :func:`kind_of` call, so that a new format is taught in one place.
The kinds are envguard.sources.KINDS.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Any

from envguard.errors import UserError

LOCK_KINDS = frozenset({"conda-lock", "pixi", "explicit"})
# Not YAML (or JSON) at all: left to the command's own reader, which names the line and column (and a lock
# that no longer parses is a stale lock to `lock --check`, exit 4)
MALFORMED = "malformed"

# What a kind is, in the words of a message ("<file>: an environment file, not a lock").
_WHAT = {
    "environment": "an environment file (a spec, what to solve), not a lock",
    "export": "an environment export (`conda env export`), not a lock",
    "pixi-manifest": "a pixi manifest, not a lock",
    "report": "an `envguard check` report, not a lock",
    "pixi": "a pixi.lock, not a conda-lock.yml",
    "explicit": "an @EXPLICIT lock, not a conda-lock.yml",
}

# conda-lock.yml and pixi.lock are told apart by their top-level keys: a text scan, no YAML parse (a lock of
# a few thousand packages takes a noticeable part of check's time to parse, and it is parsed later anyway)
_TOP_KEY = re.compile(r"^([A-Za-z_]+):", re.MULTILINE)
_VERSION = re.compile(r"^version:[ \t]*(\d+)[ \t]*(?:#.*)?$", re.MULTILINE)


def _kind_by_keys(text: str) -> str | None:
    """A lock's kind from its top-level keys alone, where they leave no doubt (the same verdict the parsed
    document gets below); None where only the parsed document can tell."""
    keys = set(_TOP_KEY.findall(text))
    if {"metadata", "package"} <= keys:
        from envguard.sources.pixi import LEGACY

        version = _VERSION.search(text)
        if "version" not in keys or (version is not None and int(version.group(1)) not in LEGACY):
            return "conda-lock"  # conda-lock's own `version: 1`; pixi's legacy v3 has the same layout
        return None
    if {"version", "environments", "packages"} <= keys:
        return "pixi"
    return None


def detect_kind(text: str, data: Any = None) -> str | None:
    """The kind of a file from its content, never its name: ``data`` is the parsed YAML/JSON/TOML document
    when known; without it only what the text alone shows (an @EXPLICIT file, a conda-lock or pixi lock by
    its top-level keys), else None."""
    head = text.lstrip("\ufeff")
    for line in head.splitlines():
        if line.strip() == "@EXPLICIT":
            return "explicit"
    if data is None:
        return _kind_by_keys(text)
    if isinstance(data, dict):
        from envguard.sources.pixi_manifest import is_manifest

        if is_manifest(data):
            return "pixi-manifest"
        if isinstance(data.get("package"), list) and ("metadata" in data or "version" in data):
            from envguard.sources.pixi import LEGACY

            return "pixi" if data.get("version") in LEGACY else "conda-lock"
        if "environments" in data and "version" in data:  # "packages" missing: the reader says so
            return "pixi"
        if isinstance(data.get("packages"), list) and ("schema" in data or "version" in data):
            return "report"
        if "package" in data and "metadata" in data:  # conda-lock's keys, the list missing: the reader says so
            return "conda-lock"
        if "dependencies" in data:
            from envguard.sources.export import looks_like_export

            return "export" if looks_like_export(data) else "environment"
        from envguard.sources import ENVIRONMENT_KEYS

        if "channels" in data and set(data) <= ENVIRONMENT_KEYS:  # conda reads it: an environment of nothing
            return "environment"
    return None


def read_kind(path: str | Path, text: str, parse: Callable[[str, str], Any]) -> tuple[str | None, Any]:
    """The kind of a file's ``text`` and its parsed document, for a reader that goes on to read it: an
    @EXPLICIT file by its marker (not parsed: None); a conda-lock file by its keys, parsed by the one
    conda-lock reader (envguard.sources.lockscan: fast on conda-lock's own layout, else ``parse``); a TOML
    file (pixi.toml, a pyproject.toml with [tool.pixi]) parsed as TOML, and refused in one line when it
    holds none of pixi's tables; anything else parsed by ``parse(path, text)`` (YAML or JSON: the caller's
    loader), then :func:`detect_kind`. A document that does not parse raises the loader's UserError."""
    known = detect_kind(text)
    if known == "explicit":
        return "explicit", None
    if known == "conda-lock":
        from envguard.sources.lockscan import load_lock

        data = load_lock(path, text, fallback=parse)
        return detect_kind(text, data), data
    from envguard.sources.toml_text import looks_like_toml

    if looks_like_toml(text):  # `[workspace]` is a flow sequence to YAML, and then a syntax error
        from envguard.sources.toml_text import parse_toml

        data = parse_toml(text, str(path))
        if detect_kind(text, data) != "pixi-manifest":
            raise UserError("a TOML file without pixi's tables: no [workspace] (or [project]) with channels, and "
                            "no [tool.pixi]", file=str(path), fix="pass a pixi.toml, or a pyproject.toml with "
                                                                   "[tool.pixi]")
        return "pixi-manifest", data
    data = parse(str(path), text)
    return detect_kind(text, data), data


def kind_of(path: Path, key: str | None = None, *, text: str | None = None) -> str | None:
    """The kind of the file at ``path`` (a kind of envguard.sources.KINDS, or :data:`MALFORMED`), or None when
    it is none of them. ``text``: the file's, when the caller read it already (it is not read again).
    Raises UserError when it cannot be read at all (missing, a directory, a device)."""
    from envguard.yamlio import load_fast

    if text is None:
        text = _lock_text(path, key)
    known = detect_kind(text)  # a lock told by its keys is not parsed here: its reader parses it once
    if known is not None:
        return known
    try:
        return read_kind(path, text, load_fast)[0]
    except UserError:
        return MALFORMED


def _lock_text(path: Path, key: str | None) -> str:
    """The text of a file handed over as a lock; one line that says why when it cannot be one."""
    from envguard.yamlio import read_text, special_file

    if path.is_dir():
        raise UserError("is a directory, expected a lock file", file=str(path), key=key,
                        fix="pass the lock file inside it")
    if not path.is_file():
        special = special_file(path)  # a FIFO or a device: "run envguard lock first" would not help
        import shlex

        make = shlex.join(["envguard", "lock", "--lockfile", str(path)])  # that path, not conda-lock.yml
        error = UserError(special or "lock file not found", file=str(path), key=key,
                          fix="pass the path of a regular conda-lock.yml (envguard reads no pipes or devices)"
                          if special else f"check the path, or make that lock on purpose with `{make}`")
        error.command = None if special else make
        raise error
    return read_text(path)


def require_lock(path: Path, *, accept: Collection[str] = LOCK_KINDS, key: str = "--lockfile",
                 unknown_ok: bool = False, text: str | None = None) -> str | None:
    """The kind of ``path`` when it is one of ``accept``; else a UserError (exit 2) that says what the file
    is and what to pass instead. ``unknown_ok``: a file of no known kind is left to the caller's reader
    (`lock --check` calls a lock it cannot read stale, exit 4). ``text``: the file's, already read."""
    kind = kind_of(path, key, text=text)
    if kind == MALFORMED or (kind in accept if kind is not None else unknown_ok):
        return kind
    import shlex

    shown = str(path)
    command = None
    if kind in ("environment", "export"):
        command = shlex.join(["envguard", "lock", "-f", shown])  # it writes the conda-lock.yml beside it
    if kind == "environment":
        fix = f"lock it first (`{command}`) and pass the conda-lock.yml it writes"
    elif kind == "pixi-manifest":
        fix = "pass the pixi.lock beside it"
    elif kind == "report":
        fix = ("pass the conda-lock.yml the environment was built from (reports are what envguard fleet takes as "
               "its arguments)")
    elif kind == "export":
        fix = f"adopt it with `{command}` and pass the conda-lock.yml it writes"
    else:
        fix = "pass a conda-lock.yml" + (", a pixi.lock or an @EXPLICIT file" if len(accept) > 1 else "")
    what = _WHAT.get(kind or "", "not a lock file (neither a conda-lock.yml, a pixi.lock nor an @EXPLICIT file)")
    if kind in LOCK_KINDS:  # a lock, only not the kind this command installs
        what = _WHAT[kind] if kind != "conda-lock" else "a conda-lock.yml"
    error = UserError(what, file=shown, key=key, fix=fix)
    error.command = command  # the fix as data, ready to run (envguard.errors.EnvguardError.command)
    raise error


def require_spec(path: Path, *, key: str = "-f/--file") -> None:
    """Refuse a lock or a report given where an environment file is read (``lock -f``, ``create -f``): read
    as a spec it is one with no dependencies. Other files are left to the spec reader, which names the line
    and column of what it cannot read."""
    if not path.is_file():
        return  # the reader says it is missing, with the fix for that
    kind = kind_of(path, key)
    if kind in LOCK_KINDS:
        named = {"conda-lock": "conda-lock.yml", "pixi": "pixi.lock", "explicit": "@EXPLICIT"}[kind or ""]
        raise UserError(f"a lock ({named}), not an environment file",
                        file=str(path), key=key,
                        fix="pass the environment.yml it was made from with -f, and the lock with --lockfile")
    if kind == "report":
        raise UserError("an `envguard check` report, not an environment file", file=str(path), key=key,
                        fix="pass an environment.yml with -f")


# conda-lock's writer opens every file with this line: a file cut short before its `package:` key is still
# recognisably a conda-lock file, so replacing it loses nothing anyone wrote by hand
_CONDA_LOCK_HEADER = "# This lock file was generated by conda-lock"
# A pip requirements line: a name (extras, a version or marker may follow), an option (-r, --hash) or a URL
_REQUIREMENT = re.compile(r"^(?:-{1,2}[a-z]|[A-Za-z0-9][A-Za-z0-9._-]*\s*(?:\[[^\]]*\])?\s*(?:[<>=!~;@]|$)|"
                          r"(?:git\+)?https?://)")
# What a file is, when it is not a lock: said when a lock is refused over it ("<file>: a Markdown document, ...")
_TARGET_WHAT = {
    "environment": "an environment file (a spec, what to solve)",
    "export": "an environment export (`conda env export`)",
    "pixi-manifest": "a pixi manifest",
    "report": "an `envguard check` report",
    "pixi": "a pixi.lock",
    "explicit": "an @EXPLICIT lock",
    "conda-lock": "a conda-lock file",
}


def _binary(path: Path) -> bool:
    """Whether the file's first 64 KiB hold a NUL byte or are not UTF-8 (a cut multi-byte character at the
    end of the sample aside): no lock, no spec, nothing envguard would write, is binary."""
    with open(path, "rb") as fh:
        head = fh.read(65536)
    if b"\0" in head:
        return True
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as e:
        return e.start < len(head) - 3 or len(head) < 65536
    return False


def _what_else(path: Path, text: str) -> str:
    """What a file of no lock kind is, for the line that refuses to write a lock over it: names a user
    recognises (a Markdown document, a TOML file, a pip requirements file), not a parser's verdict."""
    from envguard.sources.toml_text import looks_like_toml, parse_toml

    if looks_like_toml(text):  # `numpy==1.26` looks like TOML's `key =` too: only what parses is TOML
        try:
            data = parse_toml(text, str(path))
        except UserError:
            data = None
        if data is not None:
            kind = detect_kind(text, data)
            if kind in _TARGET_WHAT:
                return _TARGET_WHAT[kind]
            return "a pyproject.toml" if path.name == "pyproject.toml" else "a TOML file"
    suffix = path.suffix.lower()
    if suffix in (".md", ".markdown"):
        return "a Markdown document"
    if suffix == ".rst":
        return "a reStructuredText document"
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    if (path.name.startswith("requirements") and suffix in (".txt", ".in")) or (
            lines and all(_REQUIREMENT.match(ln) for ln in lines) and not any(":" in ln.split("#")[0]
                                                                             and "://" not in ln for ln in lines)):
        return "a pip requirements file"
    return "a text file" if text.strip() else "a file of blank lines"


def require_lock_target(path: Path, sources: Sequence[Path] = (), *, key: str | None = "--lockfile",
                        accept: str = "conda-lock") -> str | None:
    """Refuse to write a lock of kind ``accept`` (``conda-lock``, or ``explicit`` for an @EXPLICIT file) at
    ``path`` unless nothing is there (or an empty file) or a lock of that kind already is: a mistyped
    ``--lockfile README.md`` must not replace README.md. Called before any solve. The refusal (UserError,
    exit 2) names what the file is; no flag overrides it, since a flag meant for the environment
    (``--force``) would be the wrong way to say "destroy this file".

    Returns a note when ``path`` is a conda-lock file made from other spec files than ``sources`` (or one
    whose sources are not recorded, or a damaged one): it is replaced, and whoever replaces it should be
    told whose it was. None when it is absent, empty, or the lock of ``sources`` (the normal re-lock)."""
    from envguard.yamlio import special_file

    shown = str(path)
    if path.is_dir() or special_file(path):
        raise UserError("is a directory, expected a lock file" if path.is_dir() else str(special_file(path)),
                        file=shown, key=key, fix="pass the path of the lock file to write")
    if not path.is_file() or path.stat().st_size == 0:
        return None  # nothing there to lose
    lock_name = "conda-lock file" if accept == "conda-lock" else "@EXPLICIT lock"
    move = f"pass the path of the {lock_name} to write; move {shown} away first if it really is to be replaced"
    if _binary(path):
        raise UserError(f"a binary file, not a {lock_name}; a lock is written only where there is none or over "
                        f"a {lock_name}", file=shown, key=key, fix=move)
    from envguard.yamlio import read_text

    text = read_text(path)
    kind = kind_of(path, key)
    if accept == "conda-lock" and kind != "conda-lock" and text.lstrip("\ufeff").startswith(_CONDA_LOCK_HEADER):
        kind = "conda-lock"  # written by conda-lock and cut short: nothing of anyone's is in it
    if kind != accept:
        what = _TARGET_WHAT.get(kind or "") or _what_else(path, text)
        raise UserError(f"{what}, not a {lock_name}; a lock is written only where there is none or over a "
                        f"{lock_name}", file=shown, key=key, fix=move)
    if accept != "conda-lock":
        return None
    return _other_spec_note(path, text, sources)


def _other_spec_note(path: Path, text: str, sources: Sequence[Path]) -> str | None:
    """None when the conda-lock file at ``path`` records ``sources`` as what it was made from; else the line
    that says whose lock is being replaced."""
    from envguard.sources.lockscan import load_subset, metadata_block

    new = ", ".join(str(s) for s in sources) or "the spec"
    block = metadata_block(text)  # the one conda-lock reader's: a lock's package list is not parsed here
    try:
        data = load_subset(path, block) if block is not None else None
    except UserError:
        return f"replaced {path}, a damaged conda-lock file (it no longer parses), with the lock of {new}"
    meta = data.get("metadata") if isinstance(data, dict) else None
    recorded = meta.get("sources") if isinstance(meta, dict) else None
    if block is None:
        return f"replaced {path}, a damaged conda-lock file (it has no `metadata:`), with the lock of {new}"
    if not isinstance(recorded, list) or not recorded:
        return f"replaced {path}, a conda-lock file that records no spec it was made from, with the lock of {new}"
    base = path.resolve().parent
    if {(base / str(s)).resolve() for s in recorded} == {Path(s).resolve() for s in sources}:
        return None
    old = ", ".join(str(s) for s in recorded)
    return f"replaced {path}, a conda-lock file of {old} (another spec), with the lock of {new}"
