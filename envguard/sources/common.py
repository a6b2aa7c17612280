"""Helpers shared by the readers: artifact file names (:func:`parse_conda_filename`,
:func:`parse_pypi_filename`), coercion (:func:`as_str`), hashes as the file wrote them (:func:`digest`,
:func:`hash_kind`; :func:`refused_number` and :func:`number_digests_note` for digests YAML made numbers
of), and URLs redacted (:func:`redact_opt`).

Every reader turns URLs into the same (name, version, build, channel) so that
the same package read from a conda-lock.yml, its explicit rendering and a
pixi.lock compares equal; channel names come from :mod:`envguard.channels`.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote, urlsplit

from envguard.channels import CONDA_EXTENSIONS
from envguard.redact import redact

_HEX = re.compile(r"^[0-9a-fA-F]+$")
_WHEEL_EXT = ".whl"
_SDIST_EXTENSIONS = (".tar.gz", ".zip", ".tar.bz2", ".tgz", ".tar.xz")


def basename(url: str) -> str:
    try:
        path = urlsplit(url).path if "://" in url else url
    except ValueError:  # a malformed host ("https://[x") in a hostile file: the name is still the last part
        path = url.split("?", 1)[0]
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


def hash_kind(value: str) -> str | None:
    """``md5`` or ``sha256`` for a bare hex digest, by its length."""
    v = value.strip()
    if not _HEX.match(v):
        return None
    return {32: "md5", 64: "sha256"}.get(len(v))


_DIGEST_LENGTH = {"md5": 32, "sha256": 64}


def digest(value: Any, kind: str) -> str | None:
    """A hash as the file wrote it, whatever YAML 1.1 made of it; None when absent.

    An all-digit digest is a YAML integer: ``1111...`` a decimal one, and one with a leading zero and only
    the digits 0-7 (``0000...``, ``0123...``) an octal one. The text comes back exactly: a decimal digest
    has no leading zero and as many digits as the digest, an octal one is written back in base 8 and
    padded to the digest's length (its leading zeros are what YAML dropped). ``0`` is a digest, not
    "no hash".
    """
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        size = _DIGEST_LENGTH.get(kind, 0)
        text = str(value)
        if len(text) == size and not text.startswith("-"):
            return text
        return format(value, "o").zfill(size) if value >= 0 else text
    return str(value)


def refused_number(value: Any, kind: str, tool: str) -> bool:
    """Whether ``tool``'s own reader refuses this digest because YAML made a number of it.

    conda-lock reads with PyYAML into string fields: every number is refused. pixi reads with serde_yaml,
    where an all-digit scalar with a leading zero stays a string: only a decimal number is refused.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    if tool == "pixi":
        return isinstance(value, int) and len(str(value)) == _DIGEST_LENGTH.get(kind, -1)
    return True


def number_digests_note(keys: list[str], tool: str) -> str:
    """The note for digests YAML read as numbers: read as the text written, which the tool refuses."""
    shown = ", ".join(keys[:3]) + (f" and {len(keys) - 3} more" if len(keys) > 3 else "")
    return (f"{shown}: an all-digit hash that YAML reads as a number; read as the digits written, but {tool}'s "
            "own reader refuses it: quote it")


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
