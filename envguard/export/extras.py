"""Which extras of a pip dist were installed (``pip install -e '.[test]'``, ``pip install 'foo[cli]'``).

pip records no extras: neither ``REQUESTED`` nor ``direct_url.json`` names them. What the prefix does say is
which requirements are there. An extra counts as installed when every requirement it adds (its
``Requires-Dist`` lines whose marker holds with ``extra == NAME`` and not without it, evaluated for the
environment's own Python) is installed in a version the requirement accepts; an extra that asks for the
dist's own other extras (``foo[all]`` requiring ``foo[test,docs]``) adds theirs. An extra of which some
requirements are installed and some are not is *partly* installed: its requirements are not kept, and
export says which are missing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from envguard.export.pipdists import PipDist
from envguard.model import pep503

_EXTRA_IN_MARKER = re.compile(r"""extra\s*==\s*['"]([^'"]+)['"]""")


@dataclass
class Extras:
    installed: list[str] = field(default_factory=list)  # extra names, as the dist spells them
    requires: list[str] = field(default_factory=list)  # pep503 names those extras add
    adds: dict[str, list[str]] = field(default_factory=dict)  # installed extra -> the pep503 names it adds
    partly: dict[str, list[str]] = field(default_factory=dict)  # extra -> the requirements not installed


def marker_environment(python_version: str | None) -> dict[str, str]:
    """packaging's marker environment with the target's Python in place of envguard's own."""
    from packaging.markers import default_environment

    env = {k: str(v) for k, v in default_environment().items()}
    if python_version:
        parts = python_version.split(".")
        env["python_full_version"] = python_version
        env["python_version"] = ".".join(parts[:2])
    return env


def _parsed(d: PipDist) -> list[Any]:
    from packaging.requirements import InvalidRequirement, Requirement

    out = []
    for line in d.requires:
        try:
            out.append(Requirement(line))
        except InvalidRequirement:
            continue
    return out


def _extra_names(d: PipDist, reqs: list[Any]) -> list[str]:
    names = list(d.provides_extra)
    for r in reqs:
        if r.marker is not None:
            names += [m for m in _EXTRA_IN_MARKER.findall(str(r.marker)) if m not in names]
    seen: set[str] = set()
    out = []
    for n in names:
        if pep503(n) not in seen:
            seen.add(pep503(n))
            out.append(n)
    return out


def _adds(reqs: list[Any], extra: str, env: Mapping[str, str]) -> list[Any]:
    """The requirements ``extra`` adds: its marker holds with the extra and not without it."""
    from packaging.markers import InvalidMarker, UndefinedComparison, UndefinedEnvironmentName

    out = []
    for r in reqs:
        if r.marker is None:
            continue
        try:
            if r.marker.evaluate({**env, "extra": extra}) and not r.marker.evaluate({**env, "extra": ""}):
                out.append(r)
        except (InvalidMarker, UndefinedComparison, UndefinedEnvironmentName):
            continue
    return out


def _satisfied(req: Any, by_key: Mapping[str, PipDist]) -> bool:
    dist = by_key.get(pep503(req.name))
    if dist is None:
        return False
    try:
        return req.specifier.contains(dist.version, prereleases=True)
    except Exception:  # noqa: BLE001 - an invalid installed version: packaging's InvalidVersion and kin
        return not str(req.specifier)


def installed_extras(d: PipDist, by_key: Mapping[str, PipDist], env: Mapping[str, str]) -> Extras:
    """The extras of ``d`` whose requirements are all installed, and those only partly installed."""
    reqs = _parsed(d)
    names = _extra_names(d, reqs)
    if not names:
        return Extras()

    def closure(extra: str, seen: set[str]) -> list[Any]:
        seen.add(pep503(extra))
        out = []
        for r in _adds(reqs, extra, env):
            if pep503(r.name) == d.key:  # the dist's own other extras
                for inner in sorted(r.extras):
                    if pep503(inner) not in seen:
                        out += closure(inner, seen)
            else:
                out.append(r)
        return out

    result = Extras()
    for extra in names:
        adds = closure(extra, set())
        if not adds:
            continue
        missing = [str(r) for r in adds if not _satisfied(r, by_key)]
        if not missing:
            result.installed.append(extra)
            result.adds[extra] = [pep503(r.name) for r in adds]
            result.requires += [pep503(r.name) for r in adds if pep503(r.name) not in result.requires]
        elif len(missing) < len(adds):
            result.partly[extra] = missing
    return result
