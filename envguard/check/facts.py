"""The facts the rules judge: :class:`CheckInput` (what envguard.check gathered), the GPU and the torch
build the environment holds, which packages are core, and the CUDA line a lock or an environment file asks for."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from envguard.model import Manager, Package, canonical_name, pep503
from envguard.prefix import FileProblem, PrefixInfo
from envguard.versions import major_minor

DEFAULT_CORE: tuple[str, ...] = (
    "python", "torch", "pytorch", "torchvision", "torchaudio", "triton", "numpy", "nvidia-*",
    "cudatoolkit", "cuda-*", "mkl", "intel-openmp", "llvm-openmp", "nccl",
)


@dataclass(frozen=True)
class TorchBuild:
    """What torch build the environment holds, from records, dists and (if run) the probe."""

    source: str  # "conda", "pip", "probe" or "none"
    version: str | None = None
    cuda: str | None = None  # CUDA runtime line ("12.6"); None when CPU or unknown
    cpu: bool = False  # known to be a CPU-only build
    arch_list: tuple[str, ...] = ()
    evidence: str = ""
    route: str = ""  # compat route of the build: "conda-forge", "pytorch" (legacy channel) or "pypi"

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "version": self.version, "cuda": self.cuda, "cpu": self.cpu,
                "arch_list": list(self.arch_list), "evidence": self.evidence}


@dataclass(frozen=True)
class GpuFacts:
    driver_version: str
    gpus: tuple[tuple[str, str], ...]  # (name, compute capability "8.6")
    source: str = ""


@dataclass
class CheckInput:
    info: PrefixInfo
    platform: str
    lock_file: str | None = None
    lock_packages: list[Package] | None = None  # the lock's packages for ``platform``
    lock_changes: list[Any] | None = None  # envguard.diff.Change, old = lock, new = installed
    wants_cuda: str | None = None  # "12.6", "12" or "any" when the lock or spec asks for CUDA
    wants_cuda_source: str = ""
    gpu: GpuFacts | None = None
    driver_checked: bool = True
    env: Mapping[str, str] = field(default_factory=dict)
    # (directory on LD_LIBRARY_PATH outside the prefix, libcudnn*/libnccl* names it holds)
    library_path_libs: list[tuple[str, list[str]]] = field(default_factory=list)
    import_origins: Mapping[str, Any] | None = None
    probe: Mapping[str, Any] | None = None  # torch facts from the smoke probe
    file_problems: list[FileProblem] | None = None
    files_mode: str = "none"  # none | size | sha256
    half_built: str | None = None  # why the prefix looks half-built
    # What `envguard create` recorded (envguard.fingerprint): conda name -> sha256 ("md5:<hex>" when
    # the lock had no sha256), and the pip names. Used when no lock is given.
    fingerprint_conda: Mapping[str, str] | None = None
    fingerprint_pip: Sequence[str] | None = None
    fingerprint_lockfile: str | None = None  # the lock create built the prefix from, when it still exists
    core: tuple[str, ...] = DEFAULT_CORE
    # The environment file the lock was made from and whether the lock is stale for it (envguard lock --check's
    # verdict for this platform); None when no spec was found.
    stale_lock: str | None = None
    stale_lock_fix: str = ""
    # the lock is not stale but another spec's: the environment was built from it with --frozen
    lock_not_from_spec: bool = False
    installed: list[Package] | None = None  # info.packages(platform), read once (None: read when needed)
    # The lock envguard built the environment from changed since or is gone (envguard.envs.LockChoice.problem,
    # EG517): that lock, and whether it still judges the environment.
    recorded_lock_problem: str = ""
    recorded_lock: str | None = None
    recorded_lock_kept: bool = False
    lock_not_for_platform: str | None = None  # the lock has no records for this platform (EG513), and the fix
    lock_relock_fix: str = ""
    lock_holes: str | None = None  # the lock is not whole (envguard.lockwhole.summary, EG518)
    no_interpreter: str | None = None  # the probes were asked for but the prefix has no interpreter here (EG504)
    variant: Any = None  # the declared variant it was built from (envguard.check.variant_rules.VariantFacts)


def gpu_facts(driver_info: Any) -> GpuFacts | None:
    """Normalise envguard.driver.DriverInfo (or any object with the same fields)."""
    if driver_info is None:
        return None
    version = getattr(driver_info, "driver_version", None)
    if not version:
        return None
    gpus = []
    for g in getattr(driver_info, "gpus", None) or ():
        if isinstance(g, (tuple, list)) and len(g) >= 2:
            gpus.append((str(g[0]), str(g[1])))
        else:
            gpus.append((str(getattr(g, "name", "GPU")), str(getattr(g, "capability", ""))))
    return GpuFacts(str(version), tuple(gpus), str(getattr(driver_info, "source", "") or ""))


def is_core(name: str, core: Sequence[str] = DEFAULT_CORE, manager: Manager = "conda") -> bool:
    keys = {pep503(name), canonical_name(name, manager)}
    return any(fnmatch.fnmatchcase(k, pat) for k in keys for pat in core)


def cuda_from_build(build: str) -> str | None:
    """``cuda126_...`` -> 12.6; pytorch-channel ``py3.11_cuda12.1_cudnn...`` -> 12.1; ``cuda12*`` -> 12;
    ``cuda_...`` -> any (envguard.compat.cuda_in_build)."""
    from envguard.compat import cuda_in_build

    return cuda_in_build(build)


# conda packages that are a torch build (their build string says CPU or CUDA) or select one
_TORCH_BUILDS = ("pytorch", "pytorch-gpu", "libtorch")


def cuda_from_packages(pkgs: Iterable[Package]) -> tuple[str | None, str]:
    """The CUDA line a package list (a lock) asks for, and why.

    "Wants CUDA" comes from the torch build itself (a ``cudaXYZ`` conda build, ``pytorch-gpu``, a ``+cuXYZ``
    wheel) or the legacy channel's selector ``pytorch-cuda``, never from ``cuda-version`` or ``cudatoolkit``
    alone: CUDA libraries beside a CPU torch are a choice (cupy, numba), not a wish for a CUDA torch."""
    pkgs = list(pkgs)
    builds = [(c, f"{p.name} {p.version} build {p.build}") for p in pkgs
              if p.manager == "conda" and p.name in _TORCH_BUILDS and p.build and (c := cuda_from_build(p.build))]
    if builds:  # a build that names its line over one that only says "cuda"
        return next((b for b in builds if b[0] != "any"), builds[0])
    for p in pkgs:
        if p.manager == "pip" and p.key == "torch" and "+cu" in p.version:
            d = p.version.split("+cu", 1)[1]
            if d.isdigit():
                return f"{d[:-1]}.{d[-1]}", f"torch {p.version}"
    for p in pkgs:
        if p.manager == "conda" and p.name in ("pytorch-gpu", "pytorch-cuda") and any(q.key == "torch" for q in pkgs):
            return (major_minor(p.version) if p.name == "pytorch-cuda" else None) or "any", f"{p.name} {p.version}"
    return None, ""


_SPEC_NAME = re.compile(r"^\s*(?:[\w.-]+::)?([A-Za-z0-9_.-]+)")
_SPEC_VERSION = re.compile(r"(\d+(?:\.\d+)?)")


def cuda_from_spec(conda_deps: Iterable[str], pip_deps: Iterable[str], where: str) -> tuple[str | None, str]:
    """The CUDA line an environment file asks for: a ``pytorch=*=cuda*`` build guard, ``pytorch-gpu``, the legacy
    ``pytorch-cuda``, a ``+cuXYZ`` wheel. ``cuda-version`` alone is not a wish for a CUDA torch."""
    for dep in conda_deps:
        m = _SPEC_NAME.match(dep)
        if not m:
            continue
        name, rest = m.group(1).lower(), dep[m.end():]
        if name in _TORCH_BUILDS and ("cuda" in rest.lower() or name == "pytorch-gpu"):
            c = cuda_from_build(rest)
            return (c if c and c != "any" else "any"), f"{where} ({dep.strip()})"
        if name == "pytorch-cuda":
            v = _SPEC_VERSION.search(rest)
            return (v.group(1) if v else "any"), f"{where} ({dep.strip()})"
    for dep in pip_deps:
        low = dep.lower()
        if low.startswith("torch") and "+cu" in low:
            d = re.search(r"\+cu(\d{3})", low)
            return (f"{d.group(1)[:-1]}.{d.group(1)[-1]}" if d else "any"), f"{where} ({dep.strip()})"
    return None, ""


def torch_build(info: PrefixInfo, probe: Mapping[str, Any] | None = None) -> TorchBuild:
    """The installed torch build, from the probe when it ran, else from records and dists."""
    if probe and probe.get("version"):
        cuda = probe.get("cuda")
        arch = probe.get("arch_list") or probe.get("arch_flags") or ()
        return TorchBuild("probe", str(probe["version"]), str(cuda) if cuda else None,
                          cpu=not cuda and not probe.get("hip"), arch_list=tuple(arch),
                          evidence=f"torch.version.cuda = {cuda!r} in the environment's interpreter",
                          route=torch_build(info).route)
    rec = next((r for r in info.conda if canonical_name(r.name) == "torch" and r.name != "torch"), None) \
        or next((r for r in info.conda if r.name == "torch"), None)
    if rec is not None:
        c = cuda_from_build(rec.build)
        if c == "any":
            cv = info.record("cuda-version") or info.record("pytorch-cuda")
            c = major_minor(cv.version) if cv else "any"
        cpu = c is None and ("cpu" in rec.build.lower() or not rec.build.startswith(("cuda", "py")))
        route = "pytorch" if rec.channel_name == "pytorch" or rec.build.startswith("py3") else "conda-forge"
        return TorchBuild("conda", rec.version, c if c != "any" else None, cpu=cpu and c is None,
                          evidence=f"conda record {rec.name} {rec.version} {rec.build}", route=route)
    dist = next((d for d in info.dists if d.key == "torch"), None)
    if dist is not None:
        v = dist.version
        if "+cpu" in v:
            return TorchBuild("pip", v, None, cpu=True, evidence=f"pip dist torch {v}", route="pypi")
        if "+cu" in v:
            d = v.split("+cu", 1)[1]
            return TorchBuild("pip", v, f"{d[:-1]}.{d[-1]}" if d.isdigit() else None, evidence=f"pip dist torch {v}",
                              route="pypi")
        rt = next((x for x in info.dists if re.fullmatch(r"nvidia-cuda-runtime(-cu\d+)?", x.key)), None)
        if rt is not None:
            return TorchBuild("pip", v, major_minor(rt.version),
                              evidence=f"pip dist torch {v} with {rt.name} {rt.version}", route="pypi")
        return TorchBuild("pip", v, None, evidence=f"pip dist torch {v} (build not recorded)", route="pypi")
    return TorchBuild("none")
