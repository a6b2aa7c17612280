"""Which release lines (X.Y) a version constraint allows, in conda's grammar or pip's, learnt by probing
a few versions of every line, and the small helpers that name or pick lines.

For the rule families: :func:`release_lines`; the probe sets ``TORCH_UNIVERSE``, ``PYTHON_UNIVERSE`` and
``CUDA_UNIVERSE`` (and :func:`version_probes` for another package's); :func:`lines_text` (lines listed in
version order), :func:`nearest_line` and :func:`exact_version` (a pin to one version, or None)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from envguard.versions import line_key, release


def version_probes(majors: Iterable[int], minors: int) -> list[tuple[str, str]]:
    """(line, version) probes: X.Y with a few patch levels, to learn what a spec allows."""
    out = []
    for x in majors:
        for y in range(minors):
            for v in (f"{x}.{y}.0", f"{x}.{y}.1", f"{x}.{y}.12"):
                out.append((f"{x}.{y}", v))
    return out


TORCH_UNIVERSE = version_probes((1, 2, 3), 40)
PYTHON_UNIVERSE = version_probes((2, 3), 30)
CUDA_UNIVERSE = version_probes(range(9, 15), 10)


def _conda_matcher(version: str) -> Callable[[str], bool] | None:
    from rattler import Version, VersionSpec

    try:
        vs = VersionSpec(version, strict=False)
    except Exception:  # noqa: BLE001 - rattler's own error family: an unparseable constraint
        return None

    def match(v: str) -> bool:
        return bool(vs.matches(Version(v)))

    return match


def _pip_matcher(specifier: str) -> Callable[[str], bool] | None:
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        ss = SpecifierSet(specifier)
    except InvalidSpecifier:
        return None
    return lambda v: ss.contains(v, prereleases=True)


def release_lines(constraint: str | None, manager: str, universe: list[tuple[str, str]]) -> frozenset[str] | None:
    """The X.Y release lines a version constraint allows; None when it allows everything."""
    if not constraint or constraint.strip() in ("*", ""):
        return None
    matcher = (_conda_matcher if manager == "conda" else _pip_matcher)(constraint.strip())
    if matcher is None:
        return frozenset()
    lines = frozenset(line for line, v in universe if matcher(v))
    if not lines:
        # outside the probes (torch 9.1, a local version label): take the written X.Y of an exact pin
        m = re.match(r"^\s*(?:==|=)?\s*(\d+)\.(\d+)", constraint)
        if m and not re.search(r"[<>!~,|]", constraint):
            return frozenset({f"{m.group(1)}.{m.group(2)}"})
    return lines


def lines_text(lines: Iterable[str]) -> str:
    return ", ".join(sorted(lines, key=line_key))


def nearest_line(line: str, choices: list[str]) -> str:
    """The choice closest to ``line`` in version order (ties to the newer)."""
    def flat(v: str) -> int:
        k = release(v) + (0, 0)
        return k[0] * 1000 + k[1]

    return min(choices, key=lambda c: (abs(flat(c) - flat(line)), -flat(c)))


def exact_version(constraint: str | None) -> str | None:
    """``==2.1.0`` -> 2.1.0 (a pin to one version); None for ranges and wildcards."""
    if not constraint:
        return None
    m = re.match(r"^\s*(?:==|===)?\s*([0-9][0-9A-Za-z._+!-]*)\s*$", constraint)
    return m.group(1) if m and "*" not in constraint else None
