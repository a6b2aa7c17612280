"""Helpers shared by the readers: artifact file names, channel names, coercion.

Every reader turns URLs into the same (name, version, build, channel) so that
the same package read from a conda-lock.yml, its explicit rendering and a
pixi.lock compares equal.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote, urlsplit

from envguard.platforms import KNOWN_PLATFORMS
from envguard.redact import redact

CONDA_EXTENSIONS = (".conda", ".tar.bz2")
_SUBDIRS = frozenset(KNOWN_PLATFORMS) | {"noarch", "linux-32", "linux-armv6l", "linux-armv7l", "linux-s390x",
                                          "osx-32", "win-32", "zos-z", "emscripten-wasm32", "wasi-wasm32"}
_HEX = re.compile(r"^[0-9a-fA-F]+$")
_WHEEL_EXT = ".whl"
_SDIST_EXTENSIONS = (".tar.gz", ".zip", ".tar.bz2", ".tgz", ".tar.xz")


def basename(url: str) -> str:
    path = urlsplit(url).path if "://" in url else url
    return unquote(path.rstrip("/").rsplit("/", 1)[-1])


def parse_conda_filename(url: str) -> tuple[str, str, str] | None:
    """``.../pytorch-2.1.2-cuda120_py311h2667f23_304.conda`` -> (name, version, build)."""
    fn = basename(url)
    for ext in CONDA_EXTENSIONS:
        if fn.endswith(ext):
            stem = fn[: -len(ext)]
            parts = stem.rsplit("-", 2)
            if len(parts) == 3 and all(parts):
                return parts[0], parts[1], parts[2]
            return None
    return None


def parse_pypi_filename(url: str) -> tuple[str, str] | None:
    """A wheel or sdist file name -> (distribution name, version); None for anything else."""
    fn = basename(url.split("#", 1)[0])
    if fn.endswith(_WHEEL_EXT):
        parts = fn[: -len(_WHEEL_EXT)].split("-")
        if len(parts) >= 5:
            return parts[0], parts[1]
        return None
    for ext in _SDIST_EXTENSIONS:
        if fn.endswith(ext):
            parts = fn[: -len(ext)].rsplit("-", 1)
            if len(parts) == 2 and parts[1][:1].isdigit():
                return parts[0], parts[1]
            return None
    return None


def channel_from_url(url: str | None) -> str | None:
    """The channel a package URL came from, short and comparable.

    ``https://conda.anaconda.org/conda-forge/linux-64/x.conda`` -> ``conda-forge``;
    ``https://repo.anaconda.com/pkgs/main/noarch/x.conda`` -> ``pkgs/main``;
    anything else -> the channel base URL (redacted).
    """
    if not url:
        return None
    base = url.split("#", 1)[0].rstrip("/")
    if base.endswith(CONDA_EXTENSIONS):
        base = base.rsplit("/", 1)[0]
    if base.rsplit("/", 1)[-1] in _SUBDIRS:
        base = base.rsplit("/", 1)[0]
    return normalise_channel(base)


def normalise_channel(channel: str | None) -> str | None:
    """Channel names and URLs in one form: ``https://conda.anaconda.org/pytorch/`` -> ``pytorch``."""
    if channel is None:
        return None
    c = str(channel).strip().rstrip("/")
    if not c:
        return None
    if "://" not in c:
        # "conda-forge/linux-64::numpy" (conda env export --channel-subdir): the channel without its subdir
        head, _, last = c.rpartition("/")
        return head if head and last in _SUBDIRS else c
    parts = urlsplit(c)
    path = parts.path.strip("/")
    # anaconda.org token paths: /t/<token>/<channel>
    path = re.sub(r"^t/[^/]+/", "", path)
    host = parts.hostname or ""
    if host in ("conda.anaconda.org", "anaconda.org", "conda.anaconda.com") and path:
        return path
    if host == "repo.anaconda.com" and path:
        return path
    return redact(c)


def hash_kind(value: str) -> str | None:
    """``md5`` or ``sha256`` for a bare hex digest, by its length."""
    v = value.strip()
    if not _HEX.match(v):
        return None
    return {32: "md5", 64: "sha256"}.get(len(v))


def as_str(value: Any) -> str:
    """YAML may turn ``version: 1.10`` into a float; versions are strings."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def redact_opt(url: str | None) -> str | None:
    if not url:
        return None
    # Fast path: without these characters no redaction rule can apply.
    if "@" not in url and "/t/" not in url and "=" not in url:
        return url
    return redact(url)
