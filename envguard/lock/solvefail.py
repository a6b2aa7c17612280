"""What a failed solve says about the spec: the line that asked for a package no channel holds.

rattler's explanation of an unsatisfiable request names a package and a match spec (``No candidates were
found for nunpy *.``), never the file and line that asked for it nor what the channels hold instead. This
module runs only after a solve failed (the normal path pays nothing): it asks the same gateway, through the
same repodata cache, for the package names the channels hold for that platform and for the records of the
requested names, and sorts each requested spec into one of three cases:

* no channel has the name: the spec is at fault (a typo, a PyPI name, another channel's package), exit 2,
  naming ``file:line``, the nearest names the channels hold (difflib) and conda's name for a PyPI one;
* the name is there but no record matches the spec (a version, or a build, the channels do not have for
  that platform): exit 2, naming ``file:line`` and the nearest versions (builds) the channels do have;
* every requested spec has records: the specs conflict with each other or with the virtual packages;
  rattler's explanation is kept (exit 6, as before) and the spec lines it names are added.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from envguard.errors import BackendError, EnvguardError, UserError, with_fix
from envguard.platforms import SELECTOR_PLATFORMS
from envguard.redact import redact
from envguard.versions import conda_key

Origin = tuple[str, int | None, str]  # (file, line, the spec as written)

_VERSION = re.compile(r"\d+(?:\.[0-9A-Za-z_]+)*")
_SHOWN = 5  # nearest names, versions or builds named in a message


def spec_name(text: str) -> str:
    """The package a conda spec line names, as rattler reads it (``conda-forge::PyTorch>=2`` -> ``pytorch``);
    the spec reader has parsed every line already, so rattler's answer is at hand for every one of them."""
    from rattler import MatchSpec

    from envguard.lock.matchspec import rattler_form

    try:
        name = MatchSpec(rattler_form(text), strict=False).name
    except Exception:  # noqa: BLE001 - rattler's parse error types; the spec reader named the line already
        return text.strip().lower()
    return name.normalized if name is not None else text.strip().lower()


class SpecLines:
    """Where each requested conda package is written, per platform (``# [selector]`` lines apply)."""

    def __init__(self, spec: Any) -> None:
        self._spec = spec  # envguard.lock.spec.EnvSpec

    def of(self, platform: str) -> dict[str, list[Origin]]:
        out: dict[str, list[Origin]] = {}
        conda, _pip = self._spec.dependencies_for(platform)
        for text in conda:
            file, line = self._spec.origins.get(("conda", text), (None, None))
            if file is not None:
                out.setdefault(spec_name(text), []).append((file, line, text))
        return out

    @property
    def files(self) -> str:
        return ", ".join(str(f) for f in self._spec.files)


@dataclass(frozen=True)
class Missing:
    """A requested spec no record of the channels satisfies on one platform."""

    name: str
    spec: str  # the match spec solved (rattler's form)
    kind: str  # "name" | "version" | "build"
    near: tuple[str, ...]  # nearest names, versions or builds the channels have
    elsewhere: tuple[str, ...] = ()  # kind "name": the lock's other platforms that have it
    conda_name: str | None = None  # kind "name": conda's name for a PyPI name (torch -> pytorch)
    asked: str = ""  # kind "version"/"build": the version (and build) the spec asks for, as rattler reads it
    best: str = ""  # kind "version": the one nearest version, for the fix


def _pypi_to_conda(name: str) -> str | None:
    """conda's name for a PyPI project whose names differ (torch -> pytorch), from the lock's own mapping."""
    from envguard.lock.pypi import mapping_path

    try:
        data = json.loads(mapping_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    entry = data.get(name) if isinstance(data, dict) else None
    conda = entry.get("conda_name") if isinstance(entry, dict) else None
    return str(conda) if conda and conda != name else None


def nearest_versions(wanted: str, have: Sequence[str]) -> tuple[list[str], str]:
    """The versions in ``have`` nearest ``wanted`` in conda's order (up to three below it and two above,
    oldest first; the newest ones when ``wanted`` names no version: ``>=3``'s 3 is one, ``*`` none), and the
    one nearest: the newest below it, else the oldest above."""
    ordered = sorted(set(have), key=conda_key)
    if not ordered:
        return [], ""
    m = _VERSION.search(wanted)
    if not m:
        return ordered[-_SHOWN:], ordered[-1]
    key = conda_key(m.group(0))
    at = next((i for i, v in enumerate(ordered) if conda_key(v) >= key), len(ordered))
    lo = max(0, min(at - 3, len(ordered) - _SHOWN))
    return ordered[lo:lo + _SHOWN], ordered[at - 1] if at else ordered[0]


async def _names(gateway: Any, chans: list[Any], platform: str) -> set[str]:
    from rattler import Subdir

    return {n.normalized for n in await gateway.names(chans, [Subdir(platform), Subdir("noarch")])}


async def diagnose(gateway: Any, chans: list[Any], platform: str, specs: Sequence[Any],
                   other_platforms: Sequence[str] = ()) -> list[Missing]:
    """The requested ``specs`` (rattler MatchSpecs) that no record of ``chans`` satisfies on ``platform``."""
    from rattler import MatchSpec, Subdir

    wanted = [(s.name.normalized, s) for s in specs if not s.name.normalized.startswith("__")]
    if not wanted:
        return []
    names = await _names(gateway, chans, platform)
    present = sorted({n for n, _ in wanted if n in names})
    records: dict[str, list[Any]] = {}
    if present:
        for recs in await gateway.query(chans, [Subdir(platform), Subdir("noarch")], present, recursive=False):
            for r in recs:
                records.setdefault(r.name.normalized, []).append(r)
    out: list[Missing] = []
    elsewhere_names: dict[str, set[str]] | None = None
    for name, ms in wanted:
        text = str(ms)
        if name not in names:
            if elsewhere_names is None:  # only for a name this platform lacks: the lock's other platforms
                elsewhere_names = {p: await _names(gateway, chans, p) for p in other_platforms if p != platform}
            conda = _pypi_to_conda(name)
            near = ([conda] if conda and conda in names else []) + [
                n for n in difflib.get_close_matches(name, names, n=_SHOWN, cutoff=0.6) if n != conda]
            out.append(Missing(name, text, "name", tuple(near[:_SHOWN]),
                               elsewhere=tuple(p for p, have in elsewhere_names.items() if name in have),
                               conda_name=conda if conda and conda in names else None))
            continue
        recs = records.get(name, [])
        if any(ms.matches(r) for r in recs):
            continue
        version = str(ms.version) if ms.version is not None else ""
        same_version = [r for r in recs if not version or MatchSpec(f"{name} {version}", strict=False).matches(r)]
        if same_version and ms.build is not None:
            builds = sorted({f"{r.version}={r.build}" for r in same_version}, key=lambda b: conda_key(b.split("=")[0]))
            out.append(Missing(name, text, "build", tuple(builds[-_SHOWN:]),
                               asked=f"{version or '*'} with build {ms.build}"))
        else:
            near, best = nearest_versions(version, [str(r.version) for r in recs])
            out.append(Missing(name, text, "version", tuple(near), asked=version or text, best=best))
    return out


def _selector_for(have: Sequence[str], lacking: str) -> str | None:
    """The narrowest ``# [selector]`` that keeps a line on ``have`` and drops it on ``lacking``."""
    fits = [(len(p), s) for s, p in SELECTOR_PLATFORMS.items() if set(have) <= p and lacking not in p]
    return min(fits)[1] if fits else None


def _where(origin: Origin | None, files: str) -> tuple[str, int | None, str]:
    return (origin[0], origin[1], origin[2]) if origin else (files, None, "")


def _problem(m: Missing, platform: str, channels: str) -> tuple[str, str]:
    """(message, fix) for one missing spec."""
    if m.kind == "name":
        if m.elsewhere:
            sel = _selector_for(m.elsewhere, platform)
            how = f"limit the line to them with `  # [{sel}]` after it" if sel else "limit the line with a selector"
            return (f"no package named {m.name} for {platform} in {channels} (there is one for "
                    f"{', '.join(m.elsewhere)})", f"{how}, or do not lock {platform}")
        if m.conda_name:
            return (f"no package named {m.name} in {channels} ({m.name} is its PyPI name; conda's is "
                    f"{m.conda_name})", f"write `{m.conda_name}` on this line, or move `{m.name}` under `pip:`")
        fix = f"did you mean {_or(m.near)}? If not, add" if m.near else "correct the name, or add"
        return (f"no package named {m.name} for {platform} in {channels}", f"{fix} the channel that has {m.name}")
    if m.kind == "build":
        return (f"no {m.name} {m.asked} for {platform} in {channels}; the builds there: {', '.join(m.near)}",
                "ask for a build the channels have, or limit the line to other platforms with a selector")
    if not m.near:  # records of the name, none of which the spec's other fields (channel, subdir...) allow
        return (f"no record of {m.name} matches `{m.spec}` for {platform} in {channels}", "correct the line")
    return (f"no {m.name} {m.asked} for {platform} in {channels}; the nearest versions there: {', '.join(m.near)}",
            f"ask for a version the channels have, e.g. `{m.name}={m.best}`")


def _or(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def missing_error(missing: Sequence[Missing], platform: str, channels: Sequence[str],
                  lines: dict[str, list[Origin]], files: str) -> UserError:
    """One exit-2 line naming every spec line that asks for what the channels do not hold."""
    chans = ", ".join(redact(c) for c in channels[:3]) + (f" and {len(channels) - 3} more" if len(channels) > 3 else "")
    parts: list[tuple[str, int | None, str, str, str]] = []
    for m in missing:
        origins = lines.get(m.name)
        file, line, text = _where(origins[0] if origins else None, files)
        message, fix = _problem(m, platform, chans)
        parts.append((file, line, f"`{text or m.spec}`", message, fix))
    parts.sort(key=lambda p: (p[0], p[1] or 0))
    file, line, key, message, fix = parts[0]
    if len(parts) == 1:
        return UserError(message, file=file, key=key, line=line, fix=fix)
    text = f"{len(parts)} problems: " + "; ".join(
        with_fix(f"{f}{f':{n}' if n is not None else ''}: {k}: {msg}", fx) for f, n, k, msg, fx in parts)
    err = UserError(text)
    err.file, err.key, err.line, err.fix = file, key, line, fix
    return err


def named_lines(explanation: str, lines: dict[str, list[Origin]]) -> list[str]:
    """``file:line: spec`` of each requested package rattler's explanation names, in file order."""
    found: list[tuple[str, int, str]] = []
    for name, origins in lines.items():
        if re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w-])", explanation):
            found += [(f, n or 0, t) for f, n, t in origins]
    return [f"{f}:{n}: {t}" if n else f"{f}: {t}" for f, n, t in sorted(found)]


async def solve_failure(error: BaseException, *, gateway: Any, chans: list[Any], channels: Sequence[str],
                        platform: str, specs: Sequence[Any], platforms: Sequence[str], where: SpecLines | None,
                        hint: str = "") -> EnvguardError:
    """The error a failed solve of ``platform`` becomes: exit 2 naming the spec line when a requested spec has
    no record in the channels, else rattler's explanation (exit 6) with the spec lines it names."""
    explanation = redact(str(error).strip() or type(error).__name__)
    lines = where.of(platform) if where is not None else {}
    try:
        missing = await diagnose(gateway, chans, platform, specs, platforms)
    except Exception:  # noqa: BLE001 - the diagnosis is a bonus: the solver's own explanation still stands
        missing = []
    if missing:
        return missing_error(missing, platform, channels, lines, where.files if where else "the spec")
    named = named_lines(explanation, lines)
    tail = ("\nthe spec lines it names:\n" + "\n".join(f"  {n}" for n in named)) if named else ""
    return BackendError(f"cannot solve for {platform}{hint}:\n{explanation}{tail}", lines=True)
