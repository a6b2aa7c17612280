"""Metadata-only conda channels built from the package records of real lock files.

A real lock records, for every package it solved, the same metadata a channel's repodata.json holds: name,
version, build, depends, hashes, and (pixi.lock) constrains. The union of many real locks is therefore a
small, real slice of a channel's dependency graph. Solving against it asks "does this solve on conda-forge"
of conda-forge's own records instead of a synthetic channel that encodes our assumptions.

Plain functions, no pytest (tests/support/channel_fixtures.py has the fixture). Only py-rattler, PyYAML and the
standard library.

``records_from_lock(path)``          every conda record of a lock: pixi.lock v5–v7 and conda-lock.yml read by
                                     ``rattler.LockFile`` (pixi entries carry depends *and* constrains; conda-lock
                                     entries carry only ``dependencies``); conda-lock files rattler cannot read (old
                                     v1 layouts) are read from their YAML ``package:`` list.
``sampled_environments(locks)``     every (environment, platform) solution the locks hold: which combinations
                                     the sample covers in full (their records are all in the channel).
``build_metadata_channel(locks, root, channel="conda-forge")``
                                     one ``repodata.json`` per subdir (repodata v2, ``base_url`` pointing at the real
                                     channel, so locked URLs are the real ones), no package files: enough to solve
                                     and to lock, not to install. Returns a :class:`MetadataChannel`.

Mind the sampling: such a channel holds only what those solves picked (only the ``cuda-version`` lines and
CUDA library builds they chose, only the Python versions they used). "Does not solve here" therefore means
"not in the sample" unless other evidence (envguard's compatibility data) says the channel lacks it.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

_ARCHIVE = re.compile(r"\.(conda|tar\.bz2)$")
# Fields of a rattler RepoDataRecord's JSON that describe where it was found, not the package itself.
_NOT_REPODATA = ("url", "channel", "fn", "file_name")


@dataclasses.dataclass(frozen=True)
class LockRecord:
    """One conda package record found in a lock file."""

    subdir: str
    filename: str
    channel: str  # channel name ("conda-forge") or the channel URL when it is not anaconda.org's
    entry: dict[str, Any]  # the repodata.json entry
    constrains_known: bool  # False for conda-lock entries: that format does not record constrains
    source: str  # the lock file it came from

    @property
    def name(self) -> str:
        return str(self.entry["name"])

    @property
    def version(self) -> str:
        return str(self.entry["version"])

    @property
    def build(self) -> str:
        return str(self.entry["build"])


# Hosts that serve channels by name (anaconda.org and prefix.dev's mirrors of it).
_CHANNEL_HOSTS = ("conda.anaconda.org", "anaconda.org", "repo.anaconda.com", "prefix.dev", "repo.prefix.dev",
                  "fast.prefix.dev")


def _channel_name(channel_url: str) -> str:
    """``https://conda.anaconda.org/conda-forge`` and ``https://prefix.dev/conda-forge`` -> ``conda-forge``."""
    url = channel_url.rstrip("/")
    m = re.match(r"^https?://([^/]+)/(.+)$", url)
    if m and m.group(1) in _CHANNEL_HOSTS:
        return m.group(2)
    return url


def _from_url(url: str) -> tuple[str, str, str]:
    """(channel, subdir, filename) of a package URL."""
    base, subdir, filename = url.rsplit("/", 2)
    return _channel_name(base), subdir, filename


def _records_by_rattler(path: Path) -> list[LockRecord]:
    import rattler

    lock = rattler.LockFile.from_path(path)
    pixi = not path.name.endswith((".yml", ".yaml"))
    out: list[LockRecord] = []
    seen: set[str] = set()  # environments of one lock share most records: convert each once
    for _env_name, env in lock.environments():
        for platform in env.platforms():
            for rec in env.conda_repodata_records_for_platform(platform) or []:
                url = str(rec.url)
                if url in seen:
                    continue
                seen.add(url)
                data = json.loads(rec.to_json())
                channel, subdir, filename = _from_url(url)
                entry = {k: v for k, v in data.items() if k not in _NOT_REPODATA}
                entry["subdir"] = subdir
                entry.setdefault("depends", [])
                entry.setdefault("constrains", [])
                out.append(LockRecord(subdir, filename, channel, entry, pixi, str(path)))
    return out


def _records_by_yaml(path: Path) -> list[LockRecord]:
    """conda-lock files rattler refuses (v1 layouts): name, version, url, hash and dependencies per entry."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    data = yaml.load(path.read_text(encoding="utf-8"), Loader=loader)
    out: list[LockRecord] = []
    for pkg in (data or {}).get("package") or []:
        if not isinstance(pkg, dict) or pkg.get("manager", "conda") != "conda" or not pkg.get("url"):
            continue
        channel, subdir, filename = _from_url(str(pkg["url"]).split("#", 1)[0])
        stem = _ARCHIVE.sub("", filename)
        prefix = f"{pkg['name']}-{pkg['version']}-"
        build = stem[len(prefix):] if stem.startswith(prefix) else stem.rsplit("-", 1)[-1]
        m = re.search(r"_(\d+)$", build)
        deps = pkg.get("dependencies") or {}
        entry: dict[str, Any] = {
            "name": str(pkg["name"]), "version": str(pkg["version"]), "build": build,
            "build_number": int(m.group(1)) if m else 0, "subdir": subdir,
            "depends": [f"{k} {v}".strip() for k, v in deps.items()] if isinstance(deps, dict) else [],
            "constrains": [],
        }
        for key in ("md5", "sha256"):
            value = (pkg.get("hash") or {}).get(key)
            if value:
                entry[key] = str(value)
        out.append(LockRecord(subdir, filename, channel, entry, False, str(path)))
    return out


def records_from_lock(path: str | os.PathLike[str]) -> list[LockRecord]:
    """Every conda package record of a pixi.lock or conda-lock.yml (any version, any platform)."""
    path = Path(path)
    try:
        return _records_by_rattler(path)
    except Exception:  # rattler's parse errors have no common base class in 0.28
        if path.name.endswith((".yml", ".yaml")):
            return _records_by_yaml(path)
        raise


@dataclasses.dataclass
class MetadataChannel:
    path: Path
    name: str  # the real channel the records come from
    records: dict[tuple[str, str], LockRecord]  # (subdir, filename) -> record
    sources: list[str]

    @property
    def url(self) -> str:
        return self.path.resolve().as_uri()

    @property
    def subdirs(self) -> list[str]:
        return sorted({s for s, _ in self.records} | {"noarch"})

    def find(self, name: str, *, version: str = "*", build: str = "*", subdir: str = "*") -> list[LockRecord]:
        """Records whose name is ``name`` and whose version, build and subdir match the given globs."""
        return sorted(
            (r for r in self.records.values() if r.name == name and fnmatch.fnmatchcase(r.version, version)
             and fnmatch.fnmatchcase(r.build, build) and fnmatch.fnmatchcase(r.subdir, subdir)),
            key=lambda r: (r.subdir, r.filename))


def build_metadata_channel(locks: Iterable[str | os.PathLike[str]], root: str | os.PathLike[str], *,
                           channel: str = "conda-forge") -> MetadataChannel:
    """Union the ``channel`` records of ``locks`` into a metadata-only channel at ``root``.

    One file name in one subdir is one package: where several locks hold it, a record that knows its
    constrains (pixi.lock) wins over one that cannot (conda-lock.yml), since a missing ``constrains`` would
    let the channel solve what the real channel refuses.
    """
    root = Path(root)
    merged: dict[tuple[str, str], LockRecord] = {}
    sources: list[str] = []
    for lock in locks:
        sources.append(str(lock))
        for rec in records_from_lock(lock):
            if rec.channel != channel:
                continue
            key = (rec.subdir, rec.filename)
            old = merged.get(key)
            if old is None or (rec.constrains_known and not old.constrains_known):
                merged[key] = rec
    by_subdir: dict[str, dict[str, dict[str, Any]]] = {"noarch": {}}
    for (subdir, filename), rec in merged.items():
        by_subdir.setdefault(subdir, {})[filename] = rec.entry
    for subdir, entries in by_subdir.items():
        (root / subdir).mkdir(parents=True, exist_ok=True)
        doc = {
            # repodata v2 base_url: a lock written from this channel names the real download URLs
            "info": {"subdir": subdir, "base_url": f"https://conda.anaconda.org/{channel}/{subdir}/"},
            "repodata_version": 2,
            "packages": {fn: e for fn, e in sorted(entries.items()) if fn.endswith(".tar.bz2")},
            "packages.conda": {fn: e for fn, e in sorted(entries.items()) if fn.endswith(".conda")},
        }
        (root / subdir / "repodata.json").write_text(json.dumps(doc), encoding="utf-8")
    return MetadataChannel(root, channel, merged, sources)


@dataclasses.dataclass(frozen=True)
class SampledEnvironment:
    """One environment and platform of a real lock: what its solve picked (name -> (version, build, channel))."""

    source: str
    environment: str
    platform: str
    packages: dict[str, tuple[str, str, str]]

    def get(self, name: str, channel: str | None = None) -> tuple[str, str] | None:
        got = self.packages.get(name)
        if got is None or (channel is not None and got[2] != channel):
            return None
        return got[0], got[1]


def sampled_environments(locks: Iterable[str | os.PathLike[str]]) -> list[SampledEnvironment]:
    """Every (environment, platform) of the locks rattler reads: the solutions the sample was drawn from. A spec
    that one of them satisfies solves against a channel built from these locks, because that solution's
    records are all there."""
    import rattler

    out: list[SampledEnvironment] = []
    for lock in locks:
        try:
            lf = rattler.LockFile.from_path(lock)
        except Exception:  # old conda-lock layouts: records only, no environments to learn from
            continue
        for env_name, env in lf.environments():
            for platform in env.platforms():
                pkgs = {}
                for rec in env.conda_repodata_records_for_platform(platform) or []:
                    channel, _subdir, _fn = _from_url(str(rec.url))
                    pkgs[rec.name.normalized] = (str(rec.version), str(rec.build), channel)
                # pixi.lock v7 names platforms freely ("p1"); the conda subdir is what matters
                subdir = str(getattr(platform, "subdir", None) or platform.name)
                out.append(SampledEnvironment(str(lock), env_name, subdir, pkgs))
    return out


def realworld_locks(realworld: str | os.PathLike[str]) -> list[Path]:
    """Every pixi.lock and conda-lock.yml of the real-world corpus."""
    base = Path(realworld)
    return sorted(base.glob("pixi/*.lock")) + sorted(base.glob("conda-lock/*.yml"))


__all__ = [
    "LockRecord",
    "MetadataChannel",
    "SampledEnvironment",
    "build_metadata_channel",
    "realworld_locks",
    "records_from_lock",
    "sampled_environments",
]
