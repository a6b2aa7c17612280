"""A conda-lock.yml for packages that are already installed: no solve.

``envguard export`` hands over what a prefix holds (conda records with their URLs and hashes, pip dists
with theirs) and the environment file it wrote for them. The lock is built exactly as ``envguard lock``
builds one: conda-lock's ``LockedDependency``/``Lockfile`` models, its writer, its content hash of that
environment file and conda-lock's virtual packages for the CUDA assumption, plus envguard's input
fingerprint so that ``envguard lock --check`` answers for the pair without conda-lock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from envguard.errors import os_error


@dataclass(frozen=True)
class AdoptedPackage:
    """One installed package as the lock records it."""

    name: str
    version: str
    manager: str  # "conda" | "pip"
    url: str
    md5: str | None = None
    sha256: str | None = None
    depends: tuple[str, ...] = ()  # conda: match specs as the record lists them
    dependencies: Mapping[str, str] = field(default_factory=dict)  # pip: name -> constraint
    source_url: str | None = None  # pip VCS/directory sources, as conda-lock records them


@dataclass
class AdoptedLock:
    lockfile: Path
    platform: str
    packages: int
    cuda: str  # the recorded assumption
    content_hash: str
    changed: bool


def write_adopted(spec_file: Path, packages: Sequence[AdoptedPackage], *, lockfile: Path, platform: str,
                  cuda: str | bool | None = None, custom: Mapping[str, str] | None = None) -> AdoptedLock:
    """Write ``lockfile`` for ``packages`` on ``platform``, hashed from ``spec_file``, atomically."""
    from conda_lock.lockfile.v2prelim.models import DependencySource, HashModel, LockedDependency
    from conda_lock.models.channel import normalize_url_with_placeholders

    from envguard.lock import cuda_record_text, lock_metadata
    from envguard.lock.lockfile import (
        build_lockfile,
        cuda_arg,
        merged_dependencies,
        redacted_channels,
        relative_source,
        write_lock_atomic,
    )
    from envguard.lock.pypi import mapping_path
    from envguard.lock.solver import virtual_package_repo
    from envguard.lock.spec import read_spec
    from envguard.redact import redact

    lock_spec = read_spec([spec_file], [platform]).lock_spec(str(mapping_path()))
    if cuda is None:  # what `envguard lock` would assume for this spec (envguard.lock.cuda), so both agree
        from envguard.lock import cuda as cuda_assumption

        cuda = cuda_assumption.resolve(None, None, None, cuda_assumption.from_spec(lock_spec.dependencies,
                                                                                   spec_file.name),
                                       str(lockfile)).value
    vpr = virtual_package_repo(cuda)
    cuda_rec = cuda_record_text(cuda_arg(cuda), vpr, platform)
    content_hash, meta = lock_metadata([spec_file], lock_spec, vpr, cuda_rec)
    entries = []
    for p in packages:
        if p.manager == "conda":
            url = redact(normalize_url_with_placeholders(p.url, channels=lock_spec.channels))
            entries.append(LockedDependency(
                name=p.name, version=p.version, manager="conda", platform=platform,
                dependencies=merged_dependencies(list(p.depends)), url=url,
                hash=HashModel(md5=p.md5 or "", sha256=p.sha256 or None), categories={"main"}))
        else:
            entries.append(LockedDependency(
                name=p.name, version=p.version, manager="pip", platform=platform,
                dependencies=dict(p.dependencies), url=redact(p.url), hash=HashModel(sha256=p.sha256 or None),
                source=DependencySource(type="url", url=redact(p.source_url)) if p.source_url else None,
                categories={"main"}))
    lf = build_lockfile(packages=entries, lock_spec=lock_spec, channels=redacted_channels(lock_spec.channels),
                        platforms=[platform], content_hash=content_hash,
                        sources=[relative_source(lockfile, spec_file)], custom={**meta, **(custom or {})})
    try:
        changed = write_lock_atomic(lf, lockfile)
    except OSError as e:
        raise os_error(e, "cannot write", lockfile) from e  # the cause: export names its own target
    return AdoptedLock(lockfile=lockfile, platform=platform, packages=len(entries), cuda=cuda_rec,
                       content_hash=content_hash[platform], changed=changed)
