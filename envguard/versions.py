"""Version order and version parts, in one place, for every command.

Two orders exist because envguard reads packages of two managers, and each follows its own:

- **conda's order** (:func:`conda_key`) is rattler's ``Version``, the order the solver itself uses. It reads
  every conda version (``9e``, ``1.0_1``) and puts a local label *before* the plain release
  (``2.13.0+cpu < 2.13.0``), as conda does.
- **PyPI's order** (:func:`pypi_version`, :func:`is_prerelease`) is packaging's ``Version`` (PEP 440), the order pip
  uses; there a local label sorts *after* the plain release (``2.13.0 < 2.13.0+cpu``).

Release lines and other numeric versions (torch, CUDA and Python lines, NVIDIA driver versions, GPU compute
capabilities) are compared with :func:`line_key`: packaging's order on the version without its local label
or ``.*``. On such versions both managers agree (``2.13 == 2.13.0``, ``2.13.0rc1 < 2.13.0 < 2.13.1``), and
packaging is already loaded when a command starts while importing rattler costs about 0.1 s, which
``envguard smoke`` and the compatibility data's start-up reading should not pay.

Everything here is pure and total: a text no parser reads sorts first instead of raising.
"""

from __future__ import annotations

import re
from typing import Any

from packaging.version import InvalidVersion, Version

_LEADING_RELEASE = re.compile(r"\d+(?:\.\d+)*")
# a pre-release marker in a version PEP 440 cannot read (conda's ``1.0dev``, ``2.0b1_1``)
_PRERELEASE = re.compile(r"\d(dev|a|b|rc|alpha|beta|pre)\d*", re.IGNORECASE)
_NOT_A_VERSION = Version("0")


def _public(text: str) -> str:
    """The version without its local label and without a trailing ``.*`` (a match-spec wildcard)."""
    return text.strip().split("+", 1)[0].removesuffix(".*")


def pypi_version(text: str) -> Version | None:
    """``text`` as PEP 440 reads it; None when it is not a PEP 440 version."""
    try:
        return Version(text.strip())
    except InvalidVersion:
        return None


def conda_key(text: str) -> tuple[int, Any]:
    """Sort key in conda's order (rattler's ``Version``, what the solver uses). Unreadable texts sort first."""
    from rattler import Version as CondaVersion
    from rattler.exceptions import InvalidVersionError

    try:
        return (1, CondaVersion(text.strip()))
    except InvalidVersionError:  # an empty text, a stray character
        return (0, text)


def release(text: str) -> tuple[int, ...]:
    """The numeric release segments: ``2.13.0rc1``, ``2.13.0+cpu`` -> (2, 13, 0); ``2.13.*`` -> (2, 13);
    a conda version PEP 440 cannot read (``12.6_0``) -> its leading numbers (12, 6); () when there are none."""
    public = _public(text)
    v = pypi_version(public)
    if v is not None and v.epoch == 0:
        return tuple(v.release)
    m = _LEADING_RELEASE.match(public.split("!", 1)[-1])
    return tuple(int(p) for p in m.group(0).split(".")) if m else ()


def line_key(text: str) -> Version:
    """Sort key for release lines and numeric versions (torch/CUDA/Python lines, drivers, compute capabilities):
    packaging's order on the version without local label and ``.*``, so ``2.13 == 2.13.0`` and
    ``2.13.0rc1 < 2.13.0 < 2.13.1``. A text without a PEP 440 reading counts as its leading numbers."""
    public = _public(text)
    v = pypi_version(public)
    if v is not None:
        return v
    rel = release(public)
    return Version(".".join(map(str, rel))) if rel else _NOT_A_VERSION


def major_minor(text: str | None) -> str | None:
    """``X.Y`` of a version that writes both (``3.11.9``, ``12.6.77``, ``2.13.0rc1``); None otherwise (``12``)."""
    rel = release(text or "")
    return f"{rel[0]}.{rel[1]}" if len(rel) >= 2 else None


def release_line(text: str) -> str | None:
    """The torch-style release line: ``2.13.0+cpu``, ``2.13.0a0``, ``2.13`` -> ``2.13``; ``2`` -> ``2.0``;
    None when it is not a version."""
    rel = release(text)
    return f"{rel[0]}.{rel[1] if len(rel) > 1 else 0}" if rel else None


def is_prerelease(text: str) -> bool:
    """A pre-release or development release, by PEP 440 where it reads the text, else by its written marker."""
    v = pypi_version(text)
    if v is not None:
        return v.is_prerelease
    return bool(_PRERELEASE.search(text.split("+", 1)[0]))


def compare_versions(a: str, b: str) -> int | None:
    """-1/0/1 for two versions of one package whose manager is not known (a diff of two sides): PEP 440 first
    (pip's order, which also reads nearly every conda version of a Python package), conda's order (rattler)
    for what PEP 440 cannot read (``9b`` < ``9e``); None when neither reads both."""
    if a == b:
        return 0
    if not a or not b:
        return None
    va, vb = pypi_version(a), pypi_version(b)
    if va is not None and vb is not None:
        return (va > vb) - (va < vb)
    ka, kb = conda_key(a), conda_key(b)
    if ka[0] and kb[0]:
        return (ka > kb) - (ka < kb)
    return None
