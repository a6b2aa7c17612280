"""Which ``__cuda`` a lock assumes, and why.

conda-lock solves (and hashes) every platform with one CUDA driver assumption: the ``__cuda`` virtual package
on linux-* and win-64. A conda-forge ``cudaXYZ`` pytorch depends on ``__cuda``, and ``cuda-version X.Y``
constrains ``__cuda >=X`` (the major line only), so conda-lock's default ``__cuda=11.4`` makes every CUDA 12
build unsolvable. The assumption therefore comes, in this order, from:

1. ``--cuda X.Y`` / ``--no-cuda``;
2. an explicit ``--cuda``/``--no-cuda`` recorded in the existing lock (the user's statement about the driver);
3. the spec: ``cuda-version X.Y``, a build that names a line (``pytorch=*=cuda129*``, ``cuda12*`` -> 12.0),
   ``pytorch-cuda``/``cudatoolkit X.Y``, a CUDA build without a line (``pytorch-gpu``, ``*cuda*``: the data's
   ``lock_cuda_unnamed``); a CPU build guard (``=cpu*``, ``pytorch-cpu``, ``cpuonly``) and nothing that asks
   for CUDA means no ``__cuda`` at all;
4. the assumption recorded in the existing lock;
5. conda-lock's default.

Pure: dependencies in, an assumption out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from envguard.versions import line_key

# Platforms where conda-lock's virtual packages include __cuda.
CUDA_PLATFORM_PREFIXES = ("linux-", "win-")
TORCH_BUILDS = ("pytorch", "pytorch-gpu", "libtorch", "torchvision", "torchaudio")
CPU_GUARDS = ("pytorch-cpu", "cpuonly")
LINE_PACKAGES = ("cuda-version", "pytorch-cuda", "cudatoolkit")
FROM_FLAG = "flag"


@dataclass(frozen=True)
class CudaAssumption:
    value: str | bool | None  # "12.9"; False: no __cuda; None: conda-lock's default
    source: str  # "flag" | "spec" | "lock" | "default"
    why: str  # for people: "cuda-version=12.9 in environment.yml"


def _line_of(version: str | None) -> str | None:
    """The oldest X.Y a conda version constraint allows (``12.9``, ``12.9.*``, ``>=12.6,<13`` -> 12.6)."""
    if not version or version.strip() in ("", "*"):
        return None
    from rattler import Version, VersionSpec

    try:
        spec = VersionSpec(version.strip(), strict=False)
    except Exception:  # noqa: BLE001 - rattler's parse errors: the spec reader reports them
        return None
    for major in range(9, 20):
        for minor in range(0, 10):
            for patch in ("", ".0", ".9999"):
                if spec.matches(Version(f"{major}.{minor}{patch}")):
                    return f"{major}.{minor}"
    return None


def from_spec(dependencies: Mapping[str, Iterable[Any]], where: str) -> tuple[str | bool | None, str]:
    """The assumption a spec's conda dependencies ask for (per platform, conda-lock's VersionedDependency or any
    object with ``name``, ``version``, ``build``, ``manager``), and why. None when the spec says nothing."""
    from envguard import compat

    named: list[tuple[str, str]] = []  # (line, reason)
    unnamed: list[str] = []
    cpu: list[str] = []
    for platform, deps in dependencies.items():
        cuda_platform = platform.startswith(CUDA_PLATFORM_PREFIXES)
        for d in deps:
            if getattr(d, "manager", "conda") != "conda":
                continue
            name = str(d.name).lower()
            version = getattr(d, "version", None)
            build = str(getattr(d, "build", None) or "")
            shown = (version or "").removesuffix(".*")
            written = f"{name}{'=' + shown if shown and shown != '*' else ''}{'=' + build if build else ''}"
            if not cuda_platform:  # no __cuda there: only a CPU guard counts
                if name in CPU_GUARDS or (name in TORCH_BUILDS and "cpu" in build.lower()):
                    cpu.append(written)
                continue
            if name in LINE_PACKAGES:
                line = _line_of(version)
                if line:
                    named.append((line, written))
                elif name != "cudatoolkit":
                    unnamed.append(written)
            elif name == "pytorch-gpu":
                unnamed.append(written)
            elif name in CPU_GUARDS:
                cpu.append(written)
            elif name in TORCH_BUILDS and build:
                line = compat.cuda_in_build(build)
                if line == "any":
                    unnamed.append(written)
                elif line and "." not in line:
                    named.append((f"{line}.0", written))
                elif line:
                    named.append((line, written))
                elif "cpu" in build.lower():
                    cpu.append(written)
    if named:
        line, reason = max(named, key=lambda t: line_key(t[0]))
        return line, f"from {reason} in {where}"
    if unnamed:
        return compat.load().lock_cuda_unnamed, (f"{unnamed[0]} in {where} asks for a CUDA build without naming "
                                                 "a line")
    if cpu:
        return False, f"{cpu[0]} in {where}: a CPU build needs no driver"
    return None, ""


def resolve(flag: str | bool | None, recorded: str | None, recorded_from: str | None,
            spec: tuple[str | bool | None, str], lockfile: str) -> CudaAssumption:
    """The assumption to solve with (see the module docstring for the order)."""
    if flag is not None:
        return CudaAssumption(flag, FROM_FLAG, "from --no-cuda" if flag is False else f"from --cuda {flag}")
    if recorded is not None and recorded_from == FROM_FLAG:
        value: str | bool = False if recorded == "none" else recorded
        return CudaAssumption(value, FROM_FLAG, f"from --{'no-cuda' if value is False else 'cuda'} given "
                                                f"earlier, kept in {lockfile}")
    if spec[0] is not None:
        return CudaAssumption(spec[0], "spec", spec[1])
    if recorded is not None:
        return CudaAssumption(False if recorded == "none" else recorded, "lock", f"kept from {lockfile}")
    return CudaAssumption(None, "default", "conda-lock's default: the spec names no CUDA line and no CPU build "
                                           "guard; pass --cuda X.Y or --no-cuda to choose")
