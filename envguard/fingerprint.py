"""A small record of what `envguard create` installed, kept in ``<prefix>/conda-meta/``.

It holds the lock's content hash for the platform and the sha256 of every package (conda and pip), so that
`envguard check` and a second, concurrent `envguard create` can tell quickly whether an environment is the
one a lock describes, without reading every ``conda-meta/*.json``; and which lock it was built from (its
absolute path and the sha256 of the file as it was then), so that `envguard check -p ENV` judges the
environment by that lock, and says so when it has changed or is gone (envguard.envs.lock_for).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envguard.safeio import read_small_text

FINGERPRINT_NAME = "envguard-fingerprint.json"
FORMAT_VERSION = 1
#: a fingerprint lists every package's sha256: a few hundred KiB for the largest environments
MAX_FINGERPRINT_BYTES = 64 << 20


@dataclass(frozen=True)
class Fingerprint:
    platform: str
    content_hash: str | None  # the lock's metadata.content_hash[platform]
    conda: dict[str, str] = field(default_factory=dict)  # package name -> sha256 (or "md5:<hex>")
    pip: dict[str, str] = field(default_factory=dict)  # PEP 503 name -> sha256
    lockfile: str | None = None  # absolute path of the lock it was built from (older envguards: as given)
    backend: str | None = None
    envguard_version: str | None = None
    lock_sha256: str | None = None  # sha256 of that lock file's bytes when the environment was built
    #: the names of conda-meta/state's variables create wrote from the lock (envguard.variables): the next
    #: create replaces these, and keeps the ones someone else set there
    variables: tuple[str, ...] = ()
    #: the declared variant it was built from (#37, docs/variants.md), None in a single-variant project; not
    #: part of the digest: the packages say what the environment is, the variant names the lock it came from
    variant: str | None = None

    def recorded_lock(self) -> Path | None:
        """The lock this environment was built from, when this fingerprint records it as an absolute path
        with its file's hash (fingerprints written before it was recorded name the lock as it was given)."""
        if self.lockfile and self.lock_sha256 and os.path.isabs(self.lockfile):
            return Path(self.lockfile)
        return None

    @property
    def digest(self) -> str:
        """A hash of what matters for identity: platform, content hash and every package hash.

        The lock path and its file's hash, backend and envguard version are left out: the same packages
        built by another backend or from a copy of the lock are the same environment.
        """
        payload = json.dumps(
            {"platform": self.platform, "content_hash": self.content_hash, "conda": self.conda, "pip": self.pip},
            sort_keys=True, separators=(",", ":"),
        )
        return hashlib.sha256(payload.encode()).hexdigest()

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT_VERSION,
            "digest": self.digest,
            "platform": self.platform,
            "content_hash": self.content_hash,
            "lockfile": self.lockfile,
            "lock_sha256": self.lock_sha256,
            "backend": self.backend,
            "envguard_version": self.envguard_version,
            "packages": {"conda": dict(sorted(self.conda.items())), "pip": dict(sorted(self.pip.items()))},
            **({"variables": list(self.variables)} if self.variables else {}),
            **({"variant": self.variant} if self.variant else {}),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Fingerprint:
        pkgs = data.get("packages") or {}
        return cls(
            platform=str(data.get("platform", "")),
            content_hash=data.get("content_hash"),
            conda={str(k): str(v) for k, v in (pkgs.get("conda") or {}).items()},
            pip={str(k): str(v) for k, v in (pkgs.get("pip") or {}).items()},
            lockfile=data.get("lockfile"),
            lock_sha256=data.get("lock_sha256") if isinstance(data.get("lock_sha256"), str) else None,
            backend=data.get("backend"),
            envguard_version=data.get("envguard_version"),
            variables=tuple(v for v in data["variables"] if isinstance(v, str))
            if isinstance(data.get("variables"), list) else (),
            variant=data["variant"] if isinstance(data.get("variant"), str) else None,
        )


def fingerprint_path(prefix: str | os.PathLike[str]) -> Path:
    return Path(prefix) / "conda-meta" / FINGERPRINT_NAME


def write_fingerprint(prefix: str | os.PathLike[str], fp: Fingerprint) -> Path:
    """Write atomically (temp file + rename) so a reader never sees half a fingerprint."""
    path = fingerprint_path(prefix)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(fp.to_dict(), indent=1, sort_keys=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def read_fingerprint(prefix: str | os.PathLike[str]) -> Fingerprint | None:
    """The fingerprint of an environment created by envguard; None if absent or unreadable.

    A fingerprint whose stored digest does not match its content (edited by hand, or truncated) is
    treated as absent: it can no longer vouch for the environment.
    """
    text = read_small_text(fingerprint_path(prefix), MAX_FINGERPRINT_BYTES)  # a FIFO there must not block
    try:
        data = json.loads(text) if text is not None else None
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or data.get("format") != FORMAT_VERSION:
        return None
    try:
        fp = Fingerprint.from_dict(data)
    except (AttributeError, TypeError):
        return None
    if data.get("digest") != fp.digest:
        return None
    return fp


def foreign_env(prefix: str | os.PathLike[str]) -> str | None:
    """What stands at ``prefix`` when it is a conda environment `envguard create` did not build (conda's,
    mamba's, pixi's, one a user assembled), in words; None when it is no conda environment or one envguard
    built: it carries create's fingerprint, or create's block in ``conda-meta/history`` (a fingerprint edited
    by hand no longer vouches for the packages, but the environment is still one envguard made). create
    replaces such an environment only with --force: a sync is right for what envguard built, not for
    someone else's."""
    meta = Path(prefix) / "conda-meta"
    if not meta.is_dir() or read_fingerprint(prefix) is not None:
        return None
    from envguard.history import HISTORY, read_built

    if read_built(Path(prefix)) is not None:
        return None
    what = "conda-meta/history" if (meta / HISTORY).is_file() else "conda-meta/"
    return f"a conda environment envguard did not build ({what} without envguard's record)"
