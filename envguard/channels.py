"""Channel names in one comparable form, from a channel name, a channel URL or a package URL.

Every reader (envguard.sources), the prefix inspection and lint use these, so that
the same package read from a conda-lock.yml, its explicit rendering, a pixi.lock
and an installed prefix compares equal. Pure: no I/O.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from envguard.platforms import KNOWN_PLATFORMS
from envguard.redact import redact

CONDA_EXTENSIONS = (".conda", ".tar.bz2")
SUBDIRS = frozenset(KNOWN_PLATFORMS) | {"noarch", "linux-32", "linux-armv6l", "linux-armv7l", "linux-s390x",
                                        "osx-32", "win-32", "zos-z", "emscripten-wasm32", "wasi-wasm32"}


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
    if base.rsplit("/", 1)[-1] in SUBDIRS:
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
        return head if head and last in SUBDIRS else c
    try:
        parts = urlsplit(c)
        host = parts.hostname or ""
    except ValueError:  # a malformed host ("https://[x") in a hostile file
        return redact(c)
    path = parts.path.strip("/")
    # anaconda.org token paths: /t/<token>/<channel>
    path = re.sub(r"^t/[^/]+/", "", path)
    if host in ("conda.anaconda.org", "anaconda.org", "conda.anaconda.com") and path:
        return path
    if host == "repo.anaconda.com" and path:
        return path
    return redact(c)
