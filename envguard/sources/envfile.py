"""environment.yml: what was asked for, not what was installed.

For a diff the requested specs are read as written (with their version and
build constraints, ``channel::`` prefixes and ``# [linux]`` selectors); nothing
is solved. The ``pip:`` section is read as PEP 508 requirements, following
``-r other.txt`` includes that exist next to the file.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from envguard.channels import normalise_channel
from envguard.errors import UserError
from envguard.platforms import line_selector, selector_platforms
from envguard.redact import redact
from envguard.sources import Description, RequestedSpec
from envguard.sources.common import as_str

# the channel before `::` may be a name (`conda-forge`, `conda-forge/linux-64`) or a URL
# (`https://conda.anaconda.org/conda-forge::python=3.11`), as conda and rattler read it: everything up to the
# first `::`, which no URL, name or subdir holds
_CONDA_NAME = re.compile(r"^\s*(?:(?P<chan>[^\s\[\]=<>!~,|]+?)::)?"
                         r"(?P<name>[A-Za-z0-9_][A-Za-z0-9_.+-]*)(?P<rest>.*)$")
_EGG = re.compile(r"[#&]egg=(?P<name>[A-Za-z0-9_.-]+)")


def split_conda_spec(text: str) -> tuple[str | None, str, str]:
    """``pytorch::pytorch >=2.1 *cuda*`` -> (channel, name, constraint with spaces normalised)."""
    m = _CONDA_NAME.match(text)
    if not m:
        raise ValueError(text)
    rest = " ".join(m.group("rest").split())
    # "pangeo-dask =2024.03.18" and "pip>= 21.3.1": the constraint starts right after the name
    rest = re.sub(r"^([<>=!~]+)\s+", r"\1", rest)
    return m.group("chan"), m.group("name"), rest


def _without_subdir(channel: str | None) -> str | None:
    """A channel written with its subdir (``https://repo.anaconda.com/pkgs/main/linux-64::numpy``) is the
    channel, as rattler's MatchSpec reads it: the subdir narrows where the package comes from, not which
    channel it is."""
    from envguard.channels import SUBDIRS

    if channel and "://" in channel:
        head, _, last = channel.rstrip("/").rpartition("/")
        if last in SUBDIRS and "://" in head and head.split("://", 1)[1]:
            return head
    return channel


def package_file_spec(entry: str) -> tuple[str, str, str | None] | None:
    """(name, ``name ==version build``, channel) of a dependency that is a package file or its URL
    (``./pkgs/foo-1.0-0.tar.bz2``, ``https://.../linux-64/foo-1.0-0.conda``), as conda reads it; else None."""
    from envguard.channels import CONDA_EXTENSIONS, channel_from_url
    from envguard.sources.common import parse_conda_filename

    text = entry.split(" #", 1)[0].strip().split("#", 1)[0]
    if not text.endswith(CONDA_EXTENSIONS):
        return None
    parsed = parse_conda_filename(text)
    if parsed is None:
        return None
    name, version, build = parsed
    return name, f"{name} =={version} {build}", channel_from_url(text) if "://" in text else None


def _pip_spec(item: str, selector: tuple[str, ...] | None, line: int | None, base_dir: Path,
              notes: list[str], seen_files: set[Path]) -> list[RequestedSpec]:
    from packaging.requirements import InvalidRequirement, Requirement

    item = item.split(" #", 1)[0].strip()
    if not item or item.startswith("#"):
        return []
    if item.startswith(("-r ", "--requirement ", "-r\t")) or item.startswith("--requirement="):
        target = re.split(r"[\s=]+", item, maxsplit=1)[1].strip()
        return _requirements_file(base_dir / target, selector, notes, seen_files)
    if item.startswith("-e ") or item in (".", "-e."):
        notes.append(f"skipped editable/local pip entry {redact(item)!r}")
        return []
    if item.startswith("-"):
        return []  # pip options such as --extra-index-url: no package
    try:
        req = Requirement(item)
        return [RequestedSpec(name=req.name, spec=redact(item), manager="pip", platforms=selector, line=line)]
    except InvalidRequirement:
        egg = _EGG.search(item)
        # git+https://host/org/repo(.git)(@ref): the repository name is the best guess at the package
        repo = re.match(r"^(?:git|hg|svn|bzr)\+\S+?/(?P<name>[A-Za-z0-9_.-]+?)(?:\.git)?(?:@[^/#]*)?(?:#.*)?$", item)
        name = egg.group("name") if egg else (repo.group("name") if repo else None)
        if name:
            return [RequestedSpec(name=name, spec=redact(item), manager="pip", platforms=selector, line=line)]
        notes.append(f"skipped pip entry {redact(item)!r} (no package name)")
        return []


def _requirements_file(path: Path, selector: tuple[str, ...] | None, notes: list[str],
                       seen_files: set[Path]) -> list[RequestedSpec]:
    resolved = path.resolve()
    if resolved in seen_files:
        return []
    seen_files.add(resolved)
    from envguard.errors import UserError, with_fix
    from envguard.yamlio import read_text

    try:
        text = read_text(path)  # regular files only, size-limited: `-r /dev/zero` must not hang
    except UserError as e:
        notes.append(f"pip -r {redact(str(path))} not read ({with_fix(e.problem, e.fix)}): its requirements "
                     "are not compared")
        return []
    out: list[RequestedSpec] = []
    for line in text.splitlines():
        out += _pip_spec(line, selector, None, path.parent, notes, seen_files)
    return out


def _narrow(outer: tuple[str, ...] | None, inner: tuple[str, ...] | None) -> tuple[str, ...] | None:
    if outer is None or inner is None:
        return inner if outer is None else outer
    return tuple(p for p in inner if p in outer)


def read_environment(text: str, data: Any, shown: str, *, base_dir: Path | None = None) -> Description:
    from envguard.yamlio import load_with_lines

    if not isinstance(data, dict):
        raise UserError("an environment file must be a mapping", file=shown,
                        fix="give it channels: and dependencies: keys")
    _, pos = load_with_lines(shown, text)
    lines = text.splitlines()

    def column(line: int | None) -> int | None:  # where the entry starts on its line, past "- "
        if line is None or not 1 <= line <= len(lines):
            return None
        src = lines[line - 1]
        return len(src) - len(src.lstrip(" -")) + 1

    def where(*key: Any) -> dict[str, int | None]:
        line = pos.line(*key)
        return {"line": line, "column": column(line)}

    deps = data.get("dependencies")
    if deps is None:
        deps = []
    if not isinstance(deps, list):
        raise UserError(f"expected a list, found {type(deps).__name__}", file=shown, key="dependencies",
                        fix="write one `- package` per line", **where("dependencies"))
    base = base_dir or Path(".")
    notes: list[str] = []
    seen_files: set[Path] = set()

    def selector_at(line: int | None, key: str) -> tuple[str, ...] | None:
        """The platforms a ``# [selector]`` keeps the entry on, as conda-lock reads it (None: all)."""
        if line is None or line > len(lines):
            return None
        sel = line_selector(lines[line - 1])
        if sel is None:
            return None
        plats = selector_platforms(sel)
        if not plats:
            notes.append(f"{key}: conda-lock drops the entry on every platform (selector [{sel}] is not one "
                         "platform of its table)")
        return tuple(sorted(plats))

    requested: list[RequestedSpec] = []
    for i, dep in enumerate(deps):
        line = pos.line("dependencies", i)
        if isinstance(dep, dict):
            pip_items = dep.get("pip")
            if pip_items is None:
                continue
            if not isinstance(pip_items, list):
                raise UserError(f"expected a list, found {type(pip_items).__name__}", file=shown,
                                key=f"dependencies[{i}].pip", fix="write one `- requirement` per line under `pip:`",
                                **where("dependencies", i, "pip"))
            section = selector_at(line, "pip")  # "- pip:  # [linux]": meant for every item below it
            for j, item in enumerate(pip_items):
                pline = pos.line("dependencies", i, "pip", j)
                own = selector_at(pline, as_str(item).strip() or "pip")
                requested += _pip_spec(as_str(item), _narrow(section, own), pline, base, notes, seen_files)
            continue
        entry = as_str(dep).strip()
        if not entry:
            continue
        artifact = package_file_spec(entry)
        if artifact is not None:  # a package file or URL: conda reads name, version and build from its name
            name, spec, chan = artifact
            requested.append(RequestedSpec(name=name, spec=redact(spec), manager="conda", channel=chan,
                                           platforms=selector_at(line, name), line=line))
            continue
        try:
            chan, name, rest = split_conda_spec(entry)
        except ValueError:
            raise UserError(f"cannot read dependency {entry!r}", file=shown, line=line, column=column(line),
                            key=f"dependencies[{i}]",
                            fix="write it as NAME, NAME=VERSION or NAME>=VERSION") from None
        spec = f"{name} {rest}".strip() if rest else name
        requested.append(RequestedSpec(name=name, spec=redact(spec), manager="conda",
                                       channel=normalise_channel(_without_subdir(chan)),
                                       platforms=selector_at(line, name),
                                       line=line))
    platforms = data.get("platforms") or []
    if not isinstance(platforms, list):
        raise UserError(f"expected a list, found {type(platforms).__name__}", file=shown, key="platforms",
                        fix="write one `- platform` (such as linux-64) per line", **where("platforms"))
    return Description(kind="environment", path=shown, requested=requested,
                       declared_platforms=tuple(str(p) for p in platforms), notes=notes)
