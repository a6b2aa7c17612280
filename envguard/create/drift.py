"""How an existing environment differs from the lock `envguard create` is about to install.

``create`` is a sync: an environment that matches the lock is left alone, one that drifted (a package
added, removed or replaced by hand, pip installed over conda, a file of a conda package changed) is rebuilt.
A fingerprint cannot tell: it records what create built, not what happened since. So the prefix itself is
read (conda-meta records, Python dists, every recorded file's size) and compared with the lock.
Read-only; the comparison itself (:func:`differences`) is pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from envguard.create.backends.pip_step import PipArtifact
from envguard.create.integrity import Artifact
from envguard.fingerprint import Fingerprint
from envguard.model import pep503
from envguard.prefix import FileProblem, PrefixInfo, inspect_prefix, verify_files

MAX_SHOWN = 6


def differences(conda: Sequence[Artifact], pip: Sequence[PipArtifact], info: PrefixInfo,
                file_problems: Sequence[FileProblem] = ()) -> list[str]:
    """What differs between the lock (``conda``, ``pip``) and the prefix, one short phrase each; empty when
    the prefix is exactly the lock."""
    out: list[str] = []
    records = {r.name: r for r in info.conda}
    wanted = {a.name: a for a in conda}
    for name, a in sorted(wanted.items()):
        r = records.get(name)
        if r is None:
            out.append(f"{name} {a.version} missing")
        elif (r.version, r.build) != (a.version, a.build):
            out.append(f"{name} {a.version} {a.build} in the lock, {r.version} {r.build} installed")
        elif (a.sha256 and r.sha256 and a.sha256 != r.sha256.lower()) or (a.md5 and r.md5 and a.md5 != r.md5.lower()):
            out.append(f"{name} {r.version} {r.build} replaced (another hash than the lock's)")
    out += [f"{name} {records[name].version} added" for name in sorted(set(records) - set(wanted))]
    out += [f"unreadable record conda-meta/{name}" for name, _why in info.bad_records]

    locked_pip = {pep503(p.name): p for p in pip}
    installed_pip = {d.key: d for d in info.dists if d.owner != "conda"}
    for key, p in sorted(locked_pip.items()):
        d = installed_pip.get(key)
        if d is None:
            out.append(f"pip {p.name} {p.version} missing")
        elif d.version != p.version:
            out.append(f"pip {p.name} {p.version} in the lock, {d.version} installed")
    for key in sorted(set(installed_pip) - set(locked_pip)):
        d = installed_pip[key]
        over = " over conda's" if pep503(d.name) in {pep503(n) for n in records} else ""
        out.append(f"pip {d.name} {d.version} added{over}")
    out += [f"{ow.package}: {ow.reason}" for ow in info.overwritten]

    grouped: dict[tuple[str, str], int] = {}
    for fp in file_problems:
        grouped[(fp.package, fp.problem)] = grouped.get((fp.package, fp.problem), 0) + 1
    what = {"missing": "missing", "size": "changed size", "sha256": "changed", "unreadable": "unreadable"}
    out += [f"{n} file{'s' * (n != 1)} of {pkg} {what.get(problem, problem)}"
            for (pkg, problem), n in sorted(grouped.items())]
    return out


def find_drift(conda: Sequence[Artifact], pip: Sequence[PipArtifact], prefix: Path,
               built: Fingerprint | None = None, wanted: Fingerprint | None = None) -> tuple[list[str], str]:
    """:func:`differences` for the environment at ``prefix`` (read-only: records, dists, file sizes), and
    what moved (:func:`cause`) when ``built`` (its fingerprint) and ``wanted`` (the lock's) are given."""
    info = inspect_prefix(prefix)
    problems = verify_files(info) if info.is_conda else []
    drift = differences(conda, pip, info, problems)
    return drift, cause(info, problems, built, wanted) if drift and wanted is not None else ""


def cause(info: PrefixInfo, problems: Sequence[FileProblem], built: Fingerprint | None,
          wanted: Fingerprint) -> str:
    """Why an environment differs from the lock, from the fingerprint of what create built there:
    ``"drifted"`` (the lock holds what was built; the environment changed since), ``"lock"`` (the lock
    moved since the environment was built: another lock, or this one re-locked; the environment is still
    what was built), ``"both"``, or ``"unknown"`` (no fingerprint to tell)."""
    if built is None:
        return "unknown"
    if (built.conda, built.pip) == (wanted.conda, wanted.pip):
        return "drifted"
    return "both" if problems or not _as_built(info, built) else "lock"


def _as_built(info: PrefixInfo, built: Fingerprint) -> bool:
    """Whether the prefix still holds exactly the packages its fingerprint recorded (names and hashes)."""
    records = {r.name: r for r in info.conda}
    if set(records) != set(built.conda) or info.bad_records or info.overwritten:
        return False
    for name, digest in built.conda.items():
        r = records[name]
        have = (f"md5:{r.md5.lower()}" if r.md5 else None) if digest.startswith("md5:") else (r.sha256 or "").lower()
        if have != digest.lower():
            return False
    return {d.key for d in info.dists if d.owner != "conda"} == set(built.pip)


def summarise(drift: Sequence[str], limit: int = MAX_SHOWN) -> str:
    shown = "; ".join(drift[:limit])
    return shown + (f"; and {len(drift) - limit} more" if len(drift) > limit else "")
