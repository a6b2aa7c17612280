"""Facts about one package that the change classes rest on: how core it is (python, torch, CUDA, numpy
first), the CUDA line its version or build names, whether its build is a CPU or a CUDA one; and two
version helpers the change classes and speccheck share: :func:`minor_line` (``3.11.4`` -> ``3.11``) and
:func:`lines_compatible` (``12`` from ``cuda12*`` meets ``12.6``)."""

from __future__ import annotations

import re

from envguard.model import Package
from envguard.versions import major_minor

# Packages whose version *is* the CUDA line.
CUDA_LINE_PACKAGES = frozenset({"cuda-version", "cudatoolkit", "pytorch-cuda", "cuda-toolkit"})
_CUDA_IN_BUILD = re.compile(r"(?:^|[_.+-])cuda_?(?P<v>\d+(?:\.\d+)?)")
_CU_IN_BUILD = re.compile(r"(?:^|[_.+-])cu(?P<v>\d{2,3})(?=$|[_.-])")
_TOKENS = re.compile(r"[_.+-]")


def core_rank(key: str) -> int:
    """0 python, 1 torch, 2 CUDA, 3 numpy; 99 for everything else."""
    if key == "python":
        return 0
    if key == "torch":
        return 1
    if key in CUDA_LINE_PACKAGES or key.startswith(("cuda-", "nvidia-")) or key in ("cudnn", "nccl", "cutensor"):
        return 2
    if key == "numpy":
        return 3
    return 99


def _cuda_digits(v: str) -> str:
    if "." in v:
        return ".".join(v.split(".")[:2])
    if len(v) == 2:
        return v if v.startswith("1") else f"{v[0]}.{v[1]}"  # cuda12 = 12.x; cuda92 = 9.2
    if len(v) == 3:
        return f"{v[:2]}.{v[2]}"  # cuda118 = 11.8
    return f"{v[:2]}.{v[2:]}"


def cuda_line(pkg: Package) -> str | None:
    """The CUDA line a package is built for or pins: ``12.6``, ``11.8``, ``12`` (major only), or None."""
    if pkg.key in CUDA_LINE_PACKAGES and pkg.version:
        return major_minor(pkg.version) or pkg.version  # cuda-version 12: the major line
    for text in (pkg.build or "", pkg.version.partition("+")[2]):
        if not text:
            continue
        m = _CUDA_IN_BUILD.search(text) or _CU_IN_BUILD.search(text)
        if m:
            return _cuda_digits(m.group("v"))
    return None


def variant(pkg: Package) -> str | None:
    """``cuda`` or ``cpu`` when the build says so (``cuda120_...``, ``cpu_mkl_...``, ``+cu121``, ``gpu_0``)."""
    if pkg.key in CUDA_LINE_PACKAGES:
        return None  # their "variant" is the CUDA line itself
    if cuda_line(pkg) is not None:
        return "cuda"
    for text in (pkg.build or "", pkg.version.partition("+")[2]):
        tokens = _TOKENS.split(text.lower())
        if "cpu" in tokens:
            return "cpu"
        if "gpu" in tokens or "cuda" in tokens:
            return "cuda"
    return None


def minor_line(version: str) -> str:
    return major_minor(version) or version


def lines_compatible(a: str, b: str) -> bool:
    """``12`` (major only, from ``cuda12*``) is compatible with ``12.6``."""
    if "." not in a or "." not in b:
        return a.split(".", maxsplit=1)[0] == b.split(".", maxsplit=1)[0]
    return a == b
