"""``envguard create --offline``: what this machine can install without a network, decided before anything is
built, and one line naming every package it cannot.

A conda package is at hand when rattler's package cache holds it extracted for the locked sha256 (the entry
envguard.create.prelink checks before linking) or when its ``file://`` archive exists (a local channel). A
pip package is at hand only as a ``file://`` wheel or sdist: pip fetches over the network. Everything else
is missing, and the error (exit 6, as for ``lock --offline``) names each one with where the lock fetches it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from envguard.create.integrity import Artifact, cache_entry_sha256, file_url_path, is_file_url
from envguard.errors import BackendError
from envguard.redact import redact

FIX = ("run `envguard create` once with a network on this machine (it fills the package cache, "
       "ENVGUARD_PKGS_DIR), or lock against a local channel holding them (docs/offline.md)")


def at_hand(art: Artifact, cache_dir: Path, *, use_cache: bool) -> bool:
    """Whether ``art`` installs without a network: its verified cache entry, or its local archive."""
    if use_cache and (cache_dir / art.stem).is_dir():
        recorded = cache_entry_sha256(cache_dir, art.stem)
        # the entry rattler extracted for the locked sha256 (prelink checks its files before linking)
        if not art.sha256 or (recorded is not None and recorded == art.sha256.lower()):
            return True
    if is_file_url(art.url):
        path = file_url_path(art.url)
        return path is not None and path.is_file()
    return False


def missing(conda: Sequence[Artifact], pip: Sequence[Any], cache_dir: Path, *, use_cache: bool) -> list[str]:
    """``name version (URL)`` of every package that needs the network, in lock order."""
    out = [f"{a.name} {a.version} ({redact(a.locked_url or a.url)})" for a in conda
           if not at_hand(a, cache_dir, use_cache=use_cache)]
    for p in pip:
        path = file_url_path(p.url) if is_file_url(p.url) else None
        if path is None or not path.exists():
            out.append(f"{p.name} {p.version} (pip: {redact(p.locked_url or p.url)})")
    return out


def missing_error(names: Sequence[str], cache_dir: Path) -> BackendError:
    """The one-line refusal naming what is missing (exit 6)."""
    return BackendError(f"offline: {len(names)} package{'s' if len(names) != 1 else ''} neither in the package "
                        f"cache ({cache_dir}) nor in a local channel: {', '.join(names)}", fix=FIX)


def require(conda: Sequence[Artifact], pip: Sequence[Any], cache_dir: Path, *, use_cache: bool) -> None:
    """Refuse, naming them all, when some package needs the network."""
    names = missing(conda, pip, cache_dir, use_cache=use_cache)
    if names:
        raise missing_error(names, cache_dir)
