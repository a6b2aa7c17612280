"""The lock as ``envguard create`` installs it: the host platform's conda artifacts and pip packages
(LockPlan), with ``${VAR}`` credentials filled in and every URL and hash checked before anything runs."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envguard import __version__
from envguard.create.backends.pip_step import PipArtifact
from envguard.create.integrity import Artifact, strip_archive_suffix, url_filename
from envguard.errors import IntegrityError, StaleLockError, UserError
from envguard.fingerprint import Fingerprint
from envguard.model import pep503
from envguard.redact import MASK, redact, shorten


@dataclass
class LockPlan:
    lockfile: Path
    platform: str
    content_hash: str | None
    conda: list[Artifact]
    pip: list[PipArtifact]
    sources: list[Path]
    #: the spec the lock was checked against, for conda-meta/history (envguard.create.history.Request)
    request: Any = None
    lock_sha256: str | None = None  # of the lock file's bytes as read
    #: the lock's variables: (envguard.variables), for conda-meta/state
    variables: dict[str, str] | None = None
    #: conda-meta/state variables of the environment replaced that envguard did not write: carried over
    kept_variables: dict[str, str] | None = None
    #: the declared variant the lock was locked for (its custom_metadata, envguard.variants), for the fingerprint
    variant: str | None = None
    #: the lock's text as parsed: its freshness is judged from it (envguard.create.freshness), not a second read
    text: str | None = field(default=None, repr=False, compare=False)

    def fingerprint(self, backend: str) -> Fingerprint:
        return Fingerprint(
            platform=self.platform,
            content_hash=self.content_hash,
            conda={a.name: (a.sha256 or f"md5:{a.md5}") for a in self.conda},
            pip={pep503(p.name): (p.sha256 or "") for p in self.pip},
            lockfile=redact(os.path.abspath(self.lockfile)),  # which lock built it: check -p judges it by that
            backend=backend,
            envguard_version=__version__,
            lock_sha256=self.lock_sha256,
            variables=tuple(sorted(self.variables or {})),
            variant=self.variant,
        )


_PLACEHOLDER = re.compile(r"\$\{(?P<var>[A-Za-z_][A-Za-z0-9_]*)\}")


def expand_url(url: str, lockfile: Path, package: str) -> str:
    """conda-lock writes credentials as ``${VAR}`` placeholders; fill them from the environment. A credential
    the lock holds masked (``***``: it was written literally in the spec) can only fail: say so up front."""
    if MASK in url:
        from envguard.auth import split_credentials

        parts = split_credentials(url)
        if MASK in (parts.user, parts.password, parts.token):
            from envguard.auth import fill_masked

            filled = fill_masked(url)  # the credential of this machine's channel configuration or rattler's
            if filled is None:
                raise UserError(f"{package}: the lock holds this URL's credential masked ({redact(url)}), and no "
                                "channel configuration here supplies it: envguard never writes a credential",
                                file=str(lockfile), key="url",
                                fix="configure the URL with its credential here (.condarc channel_alias or "
                                    "custom_channels, CONDA_CHANNEL_ALIAS, or rattler's RATTLER_AUTH_FILE), or "
                                    "write it as ${VAR} placeholders in the environment file (https://${USER}:"
                                    "${PASS}@host/..., /t/${TOKEN}/), run `envguard lock`, and export the variables")
            url = filled

    def sub(m: re.Match[str]) -> str:
        value = os.environ.get(m["var"])
        if value is None:
            raise UserError(f"{package}: the URL needs ${{{m['var']}}}, which is not set", file=str(lockfile),
                            fix=f"export {m['var']}=... (the credential for that channel)")
        return value

    return _PLACEHOLDER.sub(sub, url) if "${" in url else url


def _checked_url(url: str, locked: str, lockfile: Path, package: str) -> str:
    """``url`` when it parses (host, port): a damaged lock is bad input, not an installer crash."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port out of range or not a number
    except ValueError as e:
        raise UserError(f"{package}: not a valid URL ({e}): {redact(locked)}", file=str(lockfile), key="url",
                        fix="restore the lock from version control, or re-lock with `envguard lock`") from None
    return url


_HEX = {"sha256": re.compile(r"^[0-9a-fA-F]{64}$"), "md5": re.compile(r"^[0-9a-fA-F]{32}$")}


def _hash_field(entry: Any, algorithm: str, lockfile: Path) -> str | None:
    value = getattr(entry, algorithm)
    if value is None or value == "":
        return None
    # YAML turns an all-digit "hash" into a number: that, like any non-hex value, is a damaged lock
    if not isinstance(value, str) or not _HEX[algorithm].match(value):
        raise IntegrityError(f"{lockfile}: {entry.name}: hash.{algorithm} is not a {algorithm} ({value!r})",
                             fix="restore the lock from version control, or re-lock with `envguard lock`",
                             command="envguard lock")
    return value.lower()


def _entry_fields(entry: Any, lockfile: Path) -> dict[str, Any]:
    """The fields of an envguard.lock.lockfile.LockEntry that installing needs."""
    return {
        "name": entry.name,
        "version": str(entry.version),
        "url": entry.url,
        "sha256": _hash_field(entry, "sha256", lockfile),
        "md5": _hash_field(entry, "md5", lockfile),
        "build": None,  # conda: from the file name, in _conda_artifact
        "depends": tuple(entry.depends),
        "platform": entry.platform,
    }


def _conda_artifact(f: dict[str, Any], url: str, lockfile: Path) -> Artifact:
    path = url.split("?", 1)[0].split("#", 1)[0]
    filename = url_filename(url)
    stem = strip_archive_suffix(filename)
    if stem == filename:
        raise UserError(f"{f['name']}: the URL is not a conda package (.conda or .tar.bz2): {redact(url)}",
                        file=str(lockfile), fix="re-lock with `envguard lock`")
    # The archive is <name>-<version>-<build>: the name of the package cache directory that envguard verifies
    # and that the installer links from (rattler's cache key is the record's name, version and build). An
    # entry whose URL names another package would be verified in one directory and linked from another.
    head = f"{f['name']}-{f['version']}-"
    build = stem[len(head):] if stem.startswith(head) else ""
    if not build:
        raise UserError(f"{f['name']} {f['version']}: the URL's file {shorten(filename, 120)} is not "
                        f"{f['name']}-{f['version']}-<build>.conda (or .tar.bz2): the entry and its URL disagree",
                        file=str(lockfile), key="url", fix="restore the lock from version control, or re-lock with "
                        "`envguard lock`")
    subdir = path.rsplit("/", 2)[-2] if path.count("/") >= 2 else (f["platform"] or "noarch")
    return Artifact(name=f["name"], version=f["version"], build=build, url=url,
                    sha256=(f["sha256"] or "").lower() or None, md5=(f["md5"] or "").lower() or None,
                    subdir=subdir, depends=f["depends"], locked_url=f["url"] if f["url"] != url else None)


def read_plan(lockfile: Path, platform: str, *, data: bytes | None = None) -> LockPlan:
    """The host platform's conda artifacts and pip packages from a conda-lock file; ``data``: its bytes, when
    the caller read them already (create's ensure_lock, which checked their kind)."""
    import hashlib

    from envguard.lock import host_records, pip_records, read_lock, require_whole
    from envguard.yamlio import decode_text, read_bytes

    if data is None:
        data = read_bytes(lockfile)  # size-limited, regular files only
    text = decode_text(data, lockfile)
    lock = read_lock(lockfile, text=text)
    require_whole(lock)  # every platform's records need only what the lock holds: else exit 3, nothing fetched
    digest = hashlib.sha256(data).hexdigest()  # the lock's identity, for the fingerprint: the bytes parsed
    if platform not in lock.platforms:
        raise StaleLockError(f"{lockfile}: the lock has no packages for this machine's platform {platform} "
                             f"(it covers {', '.join(lock.platforms) or 'none'})",
                             fix=f"`envguard lock` with {platform} among the platforms")
    conda: list[Artifact] = []
    pip: list[PipArtifact] = []
    for entry in host_records(lock, platform):
        f = _entry_fields(entry, lockfile)
        if not f["name"].startswith("__"):  # virtual packages are never installed
            url = _checked_url(expand_url(f["url"], lockfile, f["name"]), f["url"], lockfile, f["name"])
            conda.append(_conda_artifact(f, url, lockfile))
    for entry in pip_records(lock, platform):
        f = _entry_fields(entry, lockfile)
        url = _checked_url(expand_url(f["url"], lockfile, f["name"]), f["url"], lockfile, f["name"])
        pip.append(PipArtifact(f["name"], f["version"], url, (f["sha256"] or "").lower() or None,
                               locked_url=f["url"] if url != f["url"] else None))
    sources = [lockfile.parent / s for s in lock.sources]
    from envguard.variables import from_metadata
    from envguard.variants import lock_variant

    return LockPlan(lockfile, platform, lock.content_hash.get(platform), conda, pip, sources,
                    lock_sha256=digest, variables=from_metadata(lock.custom_metadata), text=text,
                    variant=lock_variant(lock.custom_metadata))
