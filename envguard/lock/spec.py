"""Read and validate ``environment.yml`` files.

Our own validation runs first and is fast (PyYAML + rattler's matchspec
parser, no conda-lock import): it names file:line:col, the key and the fix,
and lists every problem at once. conda-lock's parser (the authority on what
its content hash covers) runs only when a lock is made:
:meth:`EnvSpec.lock_spec`.

``validate`` and ``KNOWN_KEYS`` are public so that ``envguard lint`` reuses
exactly the same rules.
"""

from __future__ import annotations

import contextlib
import io
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envguard.errors import UserError, with_fix
from envguard.platforms import LOCKABLE_PLATFORMS, SELECTOR_PLATFORMS, command_platforms, line_selector
from envguard.redact import has_credentials, redact
from envguard.variables import problems as variable_problems
from envguard.yamlio import Positions, load_with_lines, read_text


def _close_matches(word: str, candidates: Any, **kwargs: Any) -> list[str]:
    """difflib.get_close_matches, imported only for a message (the lock freshness test imports this module)."""
    import difflib

    return difflib.get_close_matches(word, candidates, **kwargs)

# conda's own keys plus conda-lock's extensions (platforms, category,
# pip-repositories, allow-pypi-requests). conda silently drops anything else.
KNOWN_KEYS: tuple[str, ...] = (
    "name",
    "channels",
    "dependencies",
    "platforms",
    "prefix",
    "variables",
    "category",
    "pip-repositories",
    "allow-pypi-requests",
)


# Platform selectors (``# [linux]``) understood by conda-lock, per platform.
SELECTORS: dict[str, frozenset[str]] = {
    p: frozenset(sel for sel, plats in SELECTOR_PLATFORMS.items() if p in plats) for p in LOCKABLE_PLATFORMS
}
_ALL_SELECTORS = frozenset().union(*SELECTORS.values())

_REQUIREMENT_SUFFIXES = (".txt", ".in")


@dataclass(frozen=True)
class SpecIssue:
    """One problem in a spec file, precise enough for a one-line message or a lint finding.

    ``code`` is the lint rule the problem belongs to (docs/commands/lint.md's table): set where the problem is found, so
    that ``envguard lint`` reports it without guessing from the message.
    """

    file: str
    line: int | None
    column: int | None
    key: str
    message: str
    fix: str
    severity: str = "error"  # "error" | "warning"
    code: str = "EG100"

    @property
    def where(self) -> str:
        w = self.file
        if self.line is not None:
            w += f":{self.line}"
            if self.column is not None:
                w += f":{self.column}"
        return w

    def format(self) -> str:
        return redact(with_fix(f"{self.where}: {self.key}: {self.message}", self.fix))


@dataclass
class EnvSpec:
    """What one or more environment files declare (secrets redacted, ``${VAR}`` kept)."""

    files: list[Path]
    name: str | None
    channels: list[str]
    conda_dependencies: list[str]
    pip_dependencies: list[str]
    platforms: list[str]  # the platforms to lock: argument, else the files', else the default
    platforms_from_files: list[str]
    warnings: list[str] = field(default_factory=list)
    pip_repositories: list[str] = field(default_factory=list)
    allow_pypi_requests: bool = True
    # per dependency string: the selector written after it (``linux`` for ``# [linux]``)
    selectors: dict[tuple[str, str], str] = field(default_factory=dict)
    # per dependency string (keyed as ``selectors``): the file and line it is written on, for the change report
    origins: dict[tuple[str, str], tuple[str, int | None]] = field(default_factory=dict)
    _lock_spec: Any = field(default=None, repr=False)

    def dependencies_for(self, platform: str) -> tuple[list[str], list[str]]:
        """(conda, pip) dependencies after applying ``# [selector]`` comments for ``platform``, merged as
        conda-lock's aggregate_lock_specs merges them: one line per (manager, package), the LAST file's line
        wins, at the place of the first (``-f environment.yml -f variants/cuda-12.6.yml``: the overlay's
        pytorch line, not both)."""
        allowed = SELECTORS.get(platform, frozenset())

        def keep(kind: str, dep: str) -> bool:
            sel = self.selectors.get((kind, dep))
            return sel is None or sel in allowed

        def merged(kind: str, deps: list[str]) -> list[str]:
            if len(self.files) < 2:  # one file: as written (lint reports a package written twice)
                return [d for d in deps if keep(kind, d)]
            from envguard.lock.changes import name_of

            out: dict[str, str] = {}
            for d in deps:
                if keep(kind, d):
                    out[name_of(kind, d) or d] = d  # a dict keeps the first key's place, takes the last value
            return list(out.values())

        return merged("conda", self.conda_dependencies), merged("pip", self.pip_dependencies)

    def lock_spec(self, mapping_url: str | None = None) -> Any:
        """conda-lock's ``LockSpecification`` for these files and platforms (imports conda-lock)."""
        if self._lock_spec is None:
            self._lock_spec = conda_lock_spec(self.files, self.platforms, mapping_url)
        return self._lock_spec


def _line_text(text_lines: list[str], line: int | None) -> str:
    if line is None or not 1 <= line <= len(text_lines):
        return ""
    return text_lines[line - 1]


def _column(text_lines: list[str], line: int | None, value: Any) -> int | None:
    src = _line_text(text_lines, line)
    if not src:
        return None
    if isinstance(value, str) and value:
        i = src.find(value)
        if i >= 0:
            return i + 1
    stripped = src.lstrip(" -")
    return len(src) - len(stripped) + 1


def _selector(text_lines: list[str], line: int | None) -> str | None:
    """The ``# [selector]`` on a line, found the way conda-lock finds it (envguard.platforms)."""
    return line_selector(_line_text(text_lines, line))


def _conda_spec_error(spec: str) -> str | None:
    """conda's grammar first (what conda and conda-lock read), then rattler's own parser (what we solve with)."""
    from rattler import MatchSpec

    from envguard.lock.matchspec import match_spec_problem, rattler_form

    problem = match_spec_problem(spec)
    if problem:
        return problem
    try:
        MatchSpec(rattler_form(spec), strict=False)  # what conda's grammar allows and rattler writes otherwise
    except Exception as e:  # noqa: BLE001 - rattler raises its own InvalidMatchSpecError family
        return str(e).splitlines()[0] or type(e).__name__
    return None


def _folded(text_lines: list[str], line: int | None, value: str) -> str | None:
    """The text YAML folded into ``value`` from the lines below its own (a mis-indented ``- item``), else None.

    A plain scalar that continues on a more indented line is joined with a space, so ``- python=3.11``
    followed by ``   - bad`` is read as the one item ``python=3.11 - bad``.
    """
    if " - " not in value:
        return None
    src = _line_text(text_lines, line).split(" #", 1)[0].strip()
    own = src[1:].strip() if src.startswith("-") else src
    own = own.strip("'\"")
    if not own or own == value or not value.startswith(own):
        return None
    rest = value[len(own):].strip()
    return rest if rest.startswith("- ") else None


# The channels conda-lock would solve against for a file whose `channels:` names none (it drops nodefaults).
_NO_CHANNEL_FIX = "name them, e.g. `channels: [conda-forge, nodefaults]`"


def _pip_spec_problem(spec: str) -> tuple[str, str, str] | None:
    """(severity, message, fix) for a pip line conda-lock cannot lock, else None."""
    s = spec.strip()
    if re.match(r"^-e ", s):  # conda-lock skips exactly these lines
        return ("warning", "editable pip requirement is skipped by the lock",
                "install it separately after `envguard create`")
    if s.startswith(("-r ", "-r\t", "--requirement", "-c ", "--constraint")):
        return ("error", f"'{s}' includes another requirements file, which conda-lock cannot follow",
                "list those requirements directly in the pip: section")
    if s.startswith("-"):
        return ("error", f"pip option '{s}' cannot be locked",
                "declare extra package indexes under `pip-repositories:` instead of pip options")
    if s.startswith("git+"):
        return None  # conda-lock names bare git URLs itself
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        Requirement(s)
    except InvalidRequirement as e:
        if s in (".", "..") or s.startswith(("./", "../", "/", "~")):
            return ("error", f"local path '{s}' cannot be locked",
                    "name the package: `mypkg @ file:///abs/path`, or install it after `envguard create`")
        return ("error", f"invalid pip requirement '{s}': {str(e).splitlines()[0]}",
                "write a PEP 508 requirement such as `name>=1.0`")
    return None


def validate(data: Any, positions: Positions, path: str | Path,  # noqa: C901, PLR0912, PLR0915 - every key of environment.yml in one pass, so every problem is listed at once
             text: str | None = None) -> tuple[list[SpecIssue], list[SpecIssue]]:
    """Check a parsed environment file; return (errors, warnings), each a list of :class:`SpecIssue`.

    ``text`` (the raw file) lets the checks see ``# [selector]`` comments and columns.
    """
    file = str(path)
    lines = (text or "").splitlines()
    errors: list[SpecIssue] = []
    warnings: list[SpecIssue] = []

    def issue(where: tuple[Any, ...], key: str, message: str, fix: str, severity: str = "error",
              value: Any = None, code: str = "EG100") -> None:
        line = positions.line(*where)
        item = SpecIssue(file, line, _column(lines, line, value), key, message, fix, severity, code)
        (errors if severity == "error" else warnings).append(item)

    if data is None:
        issue((), "(file)", "the file is empty", "add `channels:` and `dependencies:`")
        return errors, warnings
    if not isinstance(data, dict):
        issue((), "(file)", f"expected a mapping of keys, found {type(data).__name__}",
              "add `channels:` and `dependencies:`")
        return errors, warnings

    misspelt: set[str] = set()  # known keys an unknown key is a typo of ("chanels"): not reported missing too
    for key in data:
        if key in KNOWN_KEYS:
            continue
        close = _close_matches(str(key), KNOWN_KEYS, n=1, cutoff=0.6)
        misspelt.update(close)
        fix = f"did you mean '{close[0]}'?" if close else f"remove it; known keys: {', '.join(KNOWN_KEYS)}"
        issue((key,), str(key), "unknown top-level key (conda would silently ignore it)", fix, value=str(key),
              code="EG117")

    name = data.get("name")
    if name is not None and not isinstance(name, str):
        issue(("name",), "name", f"expected a string, found {type(name).__name__}", "write `name: myenv`")

    if data.get("prefix") is not None:
        issue(("prefix",), "prefix", "ignored by the lock", "remove it; `envguard create` chooses the prefix",
              severity="warning", code="EG126")

    channels = data.get("channels")
    if channels is None:
        channels = []
    if not isinstance(channels, list):
        issue(("channels",), "channels", "expected a list of channel names or URLs",
              "write `channels:` followed by `- conda-forge` lines")
    else:
        for i, ch in enumerate(channels):
            if not isinstance(ch, str) or not ch.strip():
                issue(("channels", i), f"channels[{i}]", f"expected a channel name or URL, found {_found(ch)}",
                      "write a channel such as `conda-forge`")
            elif has_credentials(ch):
                issue(("channels", i), f"channels[{i}]",
                      f"channel URL {redact(ch)} carries a literal credential; it is never written to the lock",
                      "use ${VAR} placeholders, e.g. https://${USER}:${PASSWORD}@host/channel",
                      severity="warning", value=ch, code="EG115")
    if isinstance(channels, list) and all(isinstance(c, str) and c.strip() == "nodefaults" for c in channels) \
            and "channels" not in misspelt:
        what = "`channels:` names only nodefaults" if channels else "no `channels:`"
        issue(("channels",) if "channels" in data else (), "channels",
              f"{what}: `conda env create` would use the channels of your .condarc (`defaults`, i.e. "
              "repo.anaconda.com pkgs/main and pkgs/r, unless configured), but conda-lock and `envguard lock` "
              "use only the channels the file names, so a lock finds no packages", _NO_CHANNEL_FIX, code="EG129")

    platforms = data.get("platforms")
    if platforms is not None:
        if not isinstance(platforms, list):
            issue(("platforms",), "platforms", "expected a list of platforms",
                  f"list some of: {', '.join(LOCKABLE_PLATFORMS)}")
        else:
            for i, p in enumerate(platforms):
                if p not in LOCKABLE_PLATFORMS:
                    close = _close_matches(str(p), LOCKABLE_PLATFORMS, n=1)
                    issue(("platforms", i), f"platforms[{i}]", f"unsupported platform {p!r}",
                          f"did you mean '{close[0]}'?" if close else f"use one of {', '.join(LOCKABLE_PLATFORMS)}",
                          value=p if isinstance(p, str) else None, code="EG127")

    for key in ("pip-repositories",):
        v = data.get(key)
        if v is not None and not (isinstance(v, list) and all(isinstance(x, str) for x in v)):
            issue((key,), key, "expected a list of index URLs", "write `- https://host/simple` lines")
    v = data.get("allow-pypi-requests")
    if v is not None and not isinstance(v, bool):
        issue(("allow-pypi-requests",), "allow-pypi-requests", f"expected true or false, found {v!r}",
              "write `allow-pypi-requests: false`")
    v = data.get("category")
    if v is not None and not isinstance(v, str):
        issue(("category",), "category", "expected a string", "write `category: main`")
    for vp in variable_problems(data.get("variables")):  # CEP 24: names a shell exports, string values
        at: tuple[Any, ...] = ("variables",) if vp.name is None else ("variables", vp.name)
        issue(at, "variables" if vp.name is None else f"variables.{vp.name}", vp.message, vp.fix,
              severity=vp.severity, value=vp.name, code="EG140")

    deps = data.get("dependencies")
    if deps is None:
        issue(("dependencies",) if "dependencies" in data else (), "dependencies",
              "no dependencies declared", "add `dependencies:` with at least one package, e.g. `- python=3.11`")
        return errors, warnings
    if not isinstance(deps, list):
        issue(("dependencies",), "dependencies", "expected a list", "write one `- package` per line")
        return errors, warnings

    def selector_issue(where: tuple[Any, ...], key: str, value: str, section: bool = False) -> None:
        sel = _selector(lines, positions.line(*where))
        if sel is None:
            return
        if section:  # "- pip:  # [linux]": conda-lock drops this one line, not the items under it
            issue(where, key, f"selector [{sel}] on the `pip:` line: conda-lock drops only that line on the other "
                  "platforms, and YAML then folds the pip items into the previous dependency",
                  "put the selector on each pip item instead", value="pip", code="EG125")
        elif sel not in _ALL_SELECTORS:
            issue(where, key, f"selector [{sel}] matches no platform, so this line is always dropped "
                  "(conda-lock reads one platform selector, without `not`, `and` or `or`)",
                  f"use one of {', '.join(sorted(_ALL_SELECTORS))}", severity="warning", value=value, code="EG125")

    conda_names: set[str] = set()
    pip_sections: list[int] = []
    for i, dep in enumerate(deps):
        where = ("dependencies", i)
        key = f"dependencies[{i}]"
        if isinstance(dep, str):
            spec = dep.strip()
            if not spec:
                issue(where, key, "empty dependency", "remove the empty `-` line")
                continue
            folded = _folded(lines, positions.line(*where), spec)
            err = None if folded else _conda_spec_error(spec)
            if folded:
                issue(where, key, f"'{spec}' is one item: YAML folded the next line (`{folded}`) into it, "
                      "because that line is indented deeper than this one",
                      "indent every `- ` item of the list by the same amount", value=spec, code="EG128")
            elif err:
                issue(where, key, f"invalid conda spec '{spec}': {err}",
                      "write `name`, `name=1.2`, `name>=1.2,<2` or `channel::name=1.2=build*`", value=spec,
                      code="EG121")
            else:
                conda_names.add(re.split(r"[\s=<>!~\[]", spec.split("::")[-1], maxsplit=1)[0].lower())
            selector_issue(where, key, spec)
        elif isinstance(dep, dict):
            for k in dep:
                if k != "pip":
                    issue(where + (k,), f"{key}.{k}", "only a `pip:` sub-list may appear among dependencies",
                          "move this entry or remove it", value=str(k))
            pip = dep.get("pip")
            if "pip" not in dep:
                continue
            pip_sections.append(i)
            selector_issue(where, f"{key}.pip", "pip", section=True)
            if pip is None:
                continue
            if not isinstance(pip, list):
                issue(where + ("pip",), f"{key}.pip", "expected a list of pip requirements",
                      "write one `- requirement` per line under `pip:`")
                continue
            for j, req in enumerate(pip):
                pwhere = where + ("pip", j)
                pkey = f"{key}.pip[{j}]"
                if not isinstance(req, str) or not req.strip():
                    issue(pwhere, pkey, f"expected a requirement string, found {_found(req)}",
                          "write a requirement such as `name>=1.0`", code="EG124")
                    continue
                folded = _folded(lines, positions.line(*pwhere), req.strip())
                problem = None if folded else _pip_spec_problem(req)
                if folded:
                    issue(pwhere, pkey, f"'{req.strip()}' is one item: YAML folded the next line (`{folded}`) "
                          "into it, because that line is indented deeper than this one",
                          "indent every `- ` item of the list by the same amount", value=req.strip(), code="EG128")
                elif problem:
                    sev, msg, fix = problem
                    issue(pwhere, pkey, msg, fix, severity=sev, value=req.strip(), code="EG124")
                selector_issue(pwhere, pkey, req.strip())
        else:
            issue(where, key, f"expected a package spec, found {type(dep).__name__}",
                  "write `- name=version`", value=None)

    if pip_sections and "pip" not in conda_names:
        i = pip_sections[0]
        issue(("dependencies", i), f"dependencies[{i}].pip",
              "a pip: section without `pip` among the conda dependencies", "add `- pip` to dependencies",
              severity="warning", code="EG116")
    def order(x: SpecIssue) -> tuple[int, int]:
        return (x.line or 0, x.column or 0)

    return sorted(errors, key=order), sorted(warnings, key=order)


def _raise_all(errors: list[SpecIssue]) -> None:
    if len(errors) == 1:
        e = errors[0]
        raise UserError(e.message, file=e.file, key=e.key, line=e.line, column=e.column, fix=e.fix)
    msg = f"{len(errors)} problems: " + "; ".join(e.format() for e in errors)
    err = UserError(msg)
    first = errors[0]
    err.file, err.key, err.line, err.column, err.fix = first.file, first.key, first.line, first.column, first.fix
    raise err


def _load(path: Path) -> tuple[Any, Positions, str]:
    if path.suffix.lower() in _REQUIREMENT_SUFFIXES:
        raise UserError("a pip requirements file, not a conda environment file", file=str(path),
                        fix="pass an environment.yml and list these requirements under `dependencies: - pip:`")
    if path.name in ("pyproject.toml", "meta.yaml"):
        raise UserError("envguard reads environment.yml-style files only", file=str(path),
                        fix="write the dependencies into an environment.yml")
    text = read_text(path)
    if re.search(r"^@EXPLICIT\s*$", text, re.M):
        raise UserError("an explicit lock file (@EXPLICIT), not an environment file", file=str(path),
                        fix="pass the environment.yml it was made from")
    data, pos = load_with_lines(path, text)
    return data, pos, text


def read_spec(files: list[Path], platforms: list[str] | None = None) -> EnvSpec:
    """Read, validate and merge environment files; raise one :class:`UserError` listing every error."""
    if not files:
        raise UserError("no environment file given", fix="pass -f environment.yml")
    paths = [Path(f) for f in files]
    errors: list[SpecIssue] = []
    warnings: list[SpecIssue] = []
    parsed: list[tuple[Path, dict[str, Any], Positions, str]] = []
    named_somewhere = False
    for path in paths:
        data, pos, text = _load(path)
        errs, warns = validate(data, pos, path, text)
        named_somewhere |= not any(e.code == "EG129" for e in errs)
        errors += errs
        warnings += warns
        if not errs or all(e.code == "EG129" for e in errs):
            parsed.append((path, data, pos, text))
    if named_somewhere:  # `-f base.yml -f extra.yml`: one file naming the channels is enough
        errors = [e for e in errors if e.code != "EG129"]
    if platforms:
        bad = [p for p in platforms if p not in LOCKABLE_PLATFORMS]
        for p in bad:
            close = _close_matches(p, LOCKABLE_PLATFORMS, n=1)
            errors.append(SpecIssue("--platform", None, None, "platform", f"unsupported platform {p!r}",
                                    f"did you mean '{close[0]}'?" if close else
                                    f"use one of {', '.join(LOCKABLE_PLATFORMS)}"))
    if errors:
        _raise_all(errors)

    name: str | None = None
    channels: list[str] = []
    conda: list[str] = []
    pip: list[str] = []
    file_platforms: list[str] = []
    pip_repos: list[str] = []
    allow_pypi = True
    selectors: dict[tuple[str, str], str] = {}
    origins: dict[tuple[str, str], tuple[str, int | None]] = {}
    for path, data, pos, text in parsed:
        lines = text.splitlines()
        name = name or data.get("name")
        for ch in data.get("channels") or []:
            if ch not in channels:
                channels.append(ch)
        for p in data.get("platforms") or []:
            if p not in file_platforms:
                file_platforms.append(p)
        for r in data.get("pip-repositories") or []:
            if r not in pip_repos:
                pip_repos.append(r)
        if data.get("allow-pypi-requests") is False:
            allow_pypi = False
        for i, dep in enumerate(data["dependencies"]):
            if isinstance(dep, str):
                conda.append(dep.strip())
                origins.setdefault(("conda", dep.strip()), (str(path), pos.line("dependencies", i)))
                sel = _selector(lines, pos.line("dependencies", i))
                if sel:
                    selectors[("conda", dep.strip())] = sel
            elif isinstance(dep, dict):
                for j, req in enumerate(dep.get("pip") or []):
                    pip.append(req.strip())
                    origins.setdefault(("pip", redact(req.strip())), (str(path), pos.line("dependencies", i, "pip", j)))
                    sel = _selector(lines, pos.line("dependencies", i, "pip", j))
                    if sel:  # keyed as dependencies_for sees it: pip_dependencies are redacted
                        selectors[("pip", redact(req.strip()))] = sel
    chosen = command_platforms(platforms, file_platforms)
    for path, data, pos, text in parsed:
        # conda-lock crashes on a file whose every dependency a selector drops for some platform
        lines = text.splitlines()
        sels = [_selector(lines, pos.line("dependencies", i)) for i in range(len(data["dependencies"]))]
        for p in chosen:
            if not any(sel is None or sel in SELECTORS.get(p, ()) for sel in sels):
                errors.append(SpecIssue(str(path), pos.line("dependencies"), 1, "dependencies",
                                        f"every dependency is dropped by a selector on {p}",
                                        f"add a dependency without a selector, or do not lock {p}"))
    if errors:
        _raise_all(errors)
    return EnvSpec(
        files=paths,
        name=name,
        channels=[redact(c) for c in channels],
        conda_dependencies=conda,
        pip_dependencies=[redact(p) for p in pip],
        platforms=chosen,
        platforms_from_files=file_platforms,
        warnings=[w.format() for w in warnings],
        pip_repositories=[redact(r) for r in pip_repos],
        allow_pypi_requests=allow_pypi,
        selectors=selectors,
        origins=origins,
    )


def quiet_conda_lock() -> None:
    """conda-lock logs selector filtering and token hints as warnings; envguard reports its own."""
    logging.getLogger("conda_lock").setLevel(logging.ERROR)


def conda_lock_spec(files: list[Path], platforms: list[str], mapping_url: str | None = None) -> Any:
    """Run conda-lock's own parser; its failures become one-line :class:`UserError`s."""
    from envguard.lock.pypi import mapping_path

    try:
        from conda_lock.src_parser import make_lock_spec
    except ImportError as e:  # pragma: no cover - conda-lock is a hard dependency
        raise UserError(f"conda-lock is not installed ({e})", fix="pip install conda-lock==4.0.3") from None
    quiet_conda_lock()
    try:
        # conda-lock prints its own warnings (editable pip lines) to stderr; ours come from validate().
        with contextlib.redirect_stderr(io.StringIO()):
            return make_lock_spec(src_files=[Path(f) for f in files], platform_overrides=list(platforms),
                                  mapping_url=mapping_url or str(mapping_path()))
    except UserError:
        raise
    except Exception as e:  # noqa: BLE001 - conda-lock raises bare ValueError/RuntimeError/KeyError on bad specs
        detail = " ".join(str(e).split()) or type(e).__name__
        cause = e.__cause__
        if cause is not None and str(cause):
            detail += f": {' '.join(str(cause).split())}"
        raise UserError(f"conda-lock cannot parse the spec: {detail}",
                        file=", ".join(str(f) for f in files),
                        fix="correct the entry named above") from None


def _found(value: object) -> str:
    """What a field holds instead of text: an empty string quoted, anything else by its YAML-ish type
    (``date`` for an unquoted 2024-01-01, never a Python repr such as ``datetime.date(2024, 1, 1)``)."""
    return repr(value) if isinstance(value, str) else "null" if value is None else type(value).__name__
