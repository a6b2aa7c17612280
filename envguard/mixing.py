"""Mixing rules: one environment that takes its packages from two worlds that do not fit together.

Pure, over :class:`envguard.model.Package` lists, so that every kind envguard reads is judged by the same
rules: an environment file or pixi manifest (its requested specs, as records), a conda-lock.yml, an
explicit file, an export, a pixi.lock and a live prefix (``envguard check``). Each finding names the
records involved and, where two copies compete, which one ``import`` loads.

* **channels**: anaconda's defaults (repo.anaconda.com ``pkgs/main``, ``pkgs/r``, ..., ``main``,
  ``anaconda``) with conda-forge. Their binaries are built against different compilers and libraries;
  the sharpest case is **openmp**: mkl from one and the OpenMP runtime from the other (``OMP: Error #15``,
  or one runtime's symbols resolved from the other's library).
* **cuda-lines**: CUDA packages of two major lines in one environment: pip ``nvidia-*-cu12`` wheels beside
  conda ``cudatoolkit``/``cuda-version``/``pytorch-cuda`` 11.x, or conda ``cuda-cccl`` 12.x beside 11.8
  CUDA libraries.
* **torch-twice**: torch from conda and from pip. Both install ``torch/`` into the same site-packages; pip
  runs after conda, so pip's files win and ``import torch`` loads pip's copy, while conda still records its
  own (and conda packages built against it break).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

from envguard.channels import normalise_channel
from envguard.model import Package
from envguard.versions import release

Rule = Literal["channels", "openmp", "cuda-lines", "torch-twice", "cuda-twice"]
Context = Literal["spec", "lock", "prefix"]  # requested, locked or installed records
RULES: tuple[Rule, ...] = ("channels", "openmp", "cuda-lines", "torch-twice")

# anaconda's own channels: `defaults` expands to pkgs/main, pkgs/r (and pkgs/msys2 on Windows).
_DEFAULTS_NAMES = frozenset({"defaults", "main", "anaconda", "free", "r", "msys2", "pro"})
_OPENMP_RUNTIMES = frozenset({"intel-openmp", "llvm-openmp", "openmp"})
# conda packages whose version is the CUDA line itself (cuda-* from the nvidia and conda-forge channels
# carry the CUDA release in their version: cuda-cccl 12.4.127, cuda-cudart 11.8.89).
_CUDA_LINE_NAMES = frozenset({"cudatoolkit", "cuda-version", "pytorch-cuda", "cuda-toolkit"})
_PIP_CU = re.compile(r"-cu(\d{2,3})$")  # nvidia-cublas-cu12, nvidia-nccl-cu11
_PIP_CUPY = re.compile(r"^cupy-cuda(\d{2,3})x?$")  # cupy-cuda12x, cupy-cuda118
_LOCAL_CU = re.compile(r"\+cu(\d{2,3})\b")  # torch 2.1.0+cu118
_BUILD_CUDA = re.compile(r"cuda_?(\d{1,2})\.(\d)|cuda(\d{2,3})(?!\d)")  # py3.10_cuda11.8_..., cuda120_py311


@dataclass(frozen=True)
class Mix:
    """One mixing finding, before a command gives it its own code."""

    rule: Rule
    severity: Literal["error", "warning"]
    message: str
    fix: str
    records: tuple[Package, ...]  # the records involved, the one a reader should look at first
    package: str | None = None


def channel_family(channel: str | None) -> str | None:
    """``defaults`` for anaconda's channels, ``conda-forge`` for conda-forge, None for any other."""
    n = (normalise_channel(channel) or "").strip().rstrip("/").lower()
    if not n:
        return None
    if n == "conda-forge" or n.endswith("/conda-forge"):
        return "conda-forge"
    if n in _DEFAULTS_NAMES or n.startswith("pkgs/") or "repo.anaconda.com/pkgs/" in n:
        return "defaults"
    return None


def _record(p: Package) -> str:
    return f"{p.name} {p.version}".strip()


def _names(pkgs: list[Package], limit: int = 4) -> str:
    shown = ", ".join(_record(p) for p in pkgs[:limit])
    return shown + (f" and {len(pkgs) - limit} more" if len(pkgs) > limit else "")


_FIRST = ("python", "pytorch", "numpy", "mkl", "intel-openmp", "llvm-openmp", "libstdcxx-ng", "libgcc-ng")


def _salient(pkgs: list[Package]) -> list[Package]:
    """The records a reader recognises first (python, pytorch, numpy, mkl, ...), then the rest by name."""
    return sorted(pkgs, key=lambda p: (_FIRST.index(p.name) if p.name in _FIRST else len(_FIRST), p.name))


def channel_mix(packages: Iterable[Package]) -> list[Mix]:
    conda = [p for p in packages if p.manager == "conda" and p.channel]
    fam: dict[str, list[Package]] = {}
    for p in conda:
        f = channel_family(p.channel)
        if f:
            fam.setdefault(f, []).append(p)
    if "defaults" not in fam or "conda-forge" not in fam:
        return []
    d, cf = _salient(fam["defaults"]), _salient(fam["conda-forge"])
    chans = ", ".join(sorted({str(normalise_channel(p.channel)) for p in d}))
    out = [Mix("channels", "error",
               f"{len(d)} package{'s' * (len(d) != 1)} from anaconda's defaults ({chans}: {_names(d)}) and "
               f"{len(cf)} from conda-forge ({_names(cf)}): their binaries are built against different "
               "compilers and libraries and break each other",
               "take every package from conda-forge: `channels: [conda-forge, nodefaults]`, then re-lock",
               (d[0], cf[0]), d[0].name)]
    mkl = next((p for p in conda if p.name == "mkl"), None)
    mkl_family = channel_family(mkl.channel) if mkl else None
    if mkl is not None and mkl_family:
        other = [p for p in conda if p.name in _OPENMP_RUNTIMES and channel_family(p.channel) not in (None, mkl_family)]
        if other:
            omp = other[0]
            out.append(Mix("openmp", "error",
                           f"mkl {mkl.version} comes from {normalise_channel(mkl.channel)} but {omp.name} "
                           f"{omp.version} from {normalise_channel(omp.channel)}: two OpenMP runtimes in one "
                           "process (`OMP: Error #15: Initializing libiomp5`, or a crash in a parallel region)",
                           "take mkl and its OpenMP runtime from one channel (conda-forge), then re-lock",
                           (mkl, omp), "mkl"))
    return out


# Conda packages that bring CUDA libraries of their own (cuda-version is a pin and installs none): what sits
# beside a pip torch's own CUDA runtime (lint's EG107 warning, check's EG520).
_CONDA_CUDA_LIBRARIES = ("cudatoolkit", "pytorch-cuda", "cuda-*", "libcublas*", "libcudnn*", "cudnn", "libnccl*",
                         "nccl", "libcufft*", "libcusparse*", "libcurand*", "libcusolver*")


def conda_cuda_library(name: str) -> bool:
    """Whether the conda package ``name`` installs CUDA libraries (``cuda-cudart``, ``cudatoolkit``, ...)."""
    import fnmatch

    n = name.lower()
    return n != "cuda-version" and any(fnmatch.fnmatchcase(n, p) for p in _CONDA_CUDA_LIBRARIES)


def _major_of_version(version: str) -> int | None:
    rel = release(version or "")
    if len(rel) < 2:  # a bare ``12`` is no version of a CUDA package
        return None
    return rel[0] if 9 <= rel[0] <= 20 else None  # CUDA lines; cuda-core 0.3 or cuda-pathfinder 1.1 are not


def _digits_major(digits: str) -> int:
    """``12`` -> 12, ``118`` -> 11, ``102`` -> 10, ``92`` -> 9: the major of a CUDA line written without a dot."""
    if len(digits) == 3:
        return int(digits[:2])
    return int(digits) if digits.startswith("1") else int(digits[0])


def cuda_major(p: Package) -> int | None:
    """The CUDA major line a record belongs to, when the record says so (None for anything else)."""
    name = p.name.lower()
    if p.manager == "pip":
        m = _PIP_CU.search(name) or _PIP_CUPY.match(name) or _LOCAL_CU.search(p.version or "")
        return _digits_major(m.group(1)) if m else None
    if name.startswith("__"):
        return None
    if name in _CUDA_LINE_NAMES or name.startswith("cuda-"):
        return _major_of_version(p.version)
    return None


def build_cuda_major(p: Package) -> int | None:
    """The CUDA major a conda build is for: ``cuda118_py311`` -> 11, ``py3.10_cuda11.8_...`` -> 11."""
    m = _BUILD_CUDA.search(p.build or "")
    if not m:
        return None
    return int(m.group(1)) if m.group(1) else _digits_major(m.group(3))


def _by_major(pkgs: Iterable[Package], major_of: Callable[[Package], int | None]) -> dict[int, list[Package]]:
    out: dict[int, list[Package]] = {}
    for p in pkgs:
        m = major_of(p)
        if m is not None:
            out.setdefault(m, []).append(p)
    return out


def _lines_text(groups: dict[int, list[Package]]) -> str:
    return "; ".join(f"CUDA {m}: {_names(sorted(ps, key=lambda p: p.name), 3)}" for m, ps in sorted(groups.items()))


def cuda_line_mix(packages: Iterable[Package]) -> list[Mix]:
    pkgs = list(packages)
    conda = _by_major((p for p in pkgs if p.manager == "conda"), cuda_major)
    pip = _by_major((p for p in pkgs if p.manager == "pip"), cuda_major)
    out: list[Mix] = []
    if len(conda) > 1:
        majors = sorted(conda)
        first = sorted(conda[majors[-1]], key=lambda p: p.name)[0]
        out.append(Mix("cuda-lines", "error",
                       f"conda CUDA packages of {len(majors)} lines ({_lines_text(conda)}): libraries of one CUDA "
                       "line load beside the runtime of another (undefined symbols, or kernels for the wrong line)",
                       f"pin one line, e.g. `cuda-version={majors[0]}.*` or `={majors[-1]}.*`, and re-lock",
                       (first, *(ps[0] for m, ps in sorted(conda.items()) if m != majors[-1])), first.name))
    torch_conda = next((p for p in pkgs if p.manager == "conda" and p.name == "pytorch"), None)
    torch_pip = next((p for p in pkgs if p.manager == "pip" and p.key == "torch"), None)
    conda_all = dict(conda)
    if torch_conda is not None and build_cuda_major(torch_conda) is not None:
        conda_all.setdefault(build_cuda_major(torch_conda) or 0, []).append(torch_conda)
    if pip and conda_all and set(pip) - set(conda_all):
        foreign = {m: ps for m, ps in pip.items() if m not in conda_all}
        pip_first = sorted(next(iter(foreign.values())), key=lambda p: p.name)[0]
        conda_first = sorted(next(iter(conda_all.values())), key=lambda p: p.name)[0]
        if torch_pip is not None:
            who = ("`import torch` loads pip's torch " + torch_pip.version + " and the CUDA libraries of its pip "
                   "wheels; conda's CUDA libraries are used by conda packages in the same process")
        elif torch_conda is not None:
            who = (f"`import torch` loads conda's pytorch {torch_conda.version} with conda's CUDA libraries; the "
                   "pip wheels bring a second CUDA runtime into the same process")
        else:
            who = "two CUDA runtimes load into one process"
        out.append(Mix("cuda-lines", "error",
                       f"CUDA lines mixed across conda and pip: pip {_lines_text(foreign)} beside conda "
                       f"{_lines_text(conda_all)}: {who}",
                       "take CUDA from one manager and one line: drop the pip nvidia-* wheels (or the pip package "
                       "that pulls them in) or move the conda CUDA packages to the same line, then re-lock",
                       (pip_first, conda_first), pip_first.name))
    return out


# pip's NVIDIA wheels (nvidia-<library>-cuNN) and the conda packages that hold the same library (conda-forge's
# and the nvidia channel's names): one library from both managers is two copies of it in one process
PIP_CUDA_LIBRARY: dict[str, tuple[str, ...]] = {
    "cublas": ("libcublas",), "cudnn": ("cudnn", "libcudnn"), "nccl": ("nccl", "libnccl"),
    "cufft": ("libcufft",), "curand": ("libcurand",), "cusolver": ("libcusolver",), "cusparse": ("libcusparse",),
    "nvjitlink": ("libnvjitlink",), "cuda-runtime": ("cuda-cudart",), "cuda-nvrtc": ("cuda-nvrtc",),
    "cuda-cupti": ("cuda-cupti",), "nvtx": ("cuda-nvtx",), "cusparselt": ("cusparselt", "libcusparselt"),
    "cufile": ("libcufile",),
}
PIP_NVIDIA = re.compile(r"^nvidia-(?P<lib>[a-z-]+?)-cu(?P<major>\d{2})$")
# a PyPI package built for one CUDA line that is not NVIDIA's own wheel: `cupy-cuda12x`, `cupy-cuda118`,
# `*-cu12` extension packages (`flash-attn-cu12`, `jax-cuda12-plugin`'s kin): they depend on nvidia-* wheels
_PIP_CUDA_BUILT = re.compile(r"(?:-cu|-cuda)(?P<major>\d{2,3})x?(?:-[a-z]+)?$")


def pip_cuda_wheel(name: str) -> tuple[str, int] | None:
    """(library, CUDA major) of NVIDIA's pip wheel ``nvidia-<library>-cuNN``; None for any other name."""
    m = PIP_NVIDIA.match(name.lower().replace("_", "-"))
    return (m["lib"], int(m["major"])) if m else None


def pip_brings_cuda(p: Package) -> str | None:
    """Why the pip record ``p`` brings NVIDIA's CUDA wheels into the environment, or None: the nvidia-* wheels
    its metadata requires (a lock records them), else the CUDA line its name says it is built for."""
    if p.manager != "pip" or pip_cuda_wheel(p.name):
        return None
    wheels = sorted({n for d in p.depends
                     if (n := re.split(r"[\s<>=!~;\[(]", d.strip(), maxsplit=1)[0].lower()) and pip_cuda_wheel(n)})
    if wheels:
        return f"requires {', '.join(wheels[:3])}{' and more' if len(wheels) > 3 else ''}"
    name = p.name.lower().replace("_", "-")
    m = _PIP_CUDA_BUILT.search(name)
    if m and p.key != "torch":
        return (f"is built for CUDA {_digits_major(m['major'])} (its name ends in `{m.group(0)}`): its wheels come "
                "with, or pull in, CUDA libraries from PyPI")
    return None


def cuda_library_twice(packages: Iterable[Package]) -> list[Mix]:
    """One CUDA library from conda and from pip's NVIDIA wheel on the same line (conda ``libcusolver`` and pip
    ``nvidia-cusolver-cu12``): two copies load into one process. A pip wheel of another line than conda's is
    cuda_line_mix's to say."""
    pkgs = list(packages)
    conda = {p.name.lower(): p for p in pkgs if p.manager == "conda"}
    lines = set(_by_major((p for p in pkgs if p.manager == "conda"), cuda_major))
    pulled = {n: p for p in pkgs for d in p.depends if p.manager == "pip"
              if (n := re.split(r"[\s<>=!~;\[(]", d.strip(), maxsplit=1)[0].lower().replace("_", "-"))}
    for p in sorted((p for p in pkgs if p.manager == "pip"), key=lambda p: p.name):
        wheel = pip_cuda_wheel(p.name)
        if wheel is None or (lines and wheel[1] not in lines):
            continue
        twin = next((conda[n] for n in PIP_CUDA_LIBRARY.get(wheel[0], ()) if n in conda), None)
        if twin is None:
            continue
        via = pulled.get(p.name.lower().replace("_", "-"))
        why = f" (pulled in by pip's {via.name} {via.version})" if via is not None else ""
        return [Mix("cuda-twice", "error",
                    f"one CUDA library twice: conda {_record(twin)} and pip {_record(p)}{why} on CUDA {wheel[1]}: "
                    "two copies of it load into one process, which one a library gets depends on load order, and "
                    "a fix to one copy does not reach the code using the other",
                    f"take CUDA from one manager: drop the pip wheel {p.name} (or the pip package that pulls it in) "
                    f"and keep conda's {twin.name}, or take the whole CUDA stack from pip; then re-lock",
                    (p, twin), p.name)]
    return []


def _depends_on(p: Package, key: str) -> bool:
    from envguard.model import canonical_name

    for d in p.depends:
        name = re.split(r"[\s<>=!~;\[(]", d.strip(), maxsplit=1)[0]
        if name and canonical_name(name, "pip") == key:
            return True
    return False


_VERB = {"spec": "requested", "lock": "locked", "prefix": "installed"}
_TWICE_FIX = {
    "spec": "keep one: delete the pip torch line (conda's pytorch then serves every conda package), or the conda one",
    "lock": "remove torch from the pip: section (and the pip package that pulls it in), or drop the conda pytorch; "
            "then re-lock",
    "prefix": "recreate the environment from its lock (`envguard create --force`); do not pip-install torch into it",
}


def torch_twice(packages: Iterable[Package], *, context: Context = "lock") -> list[Mix]:
    pkgs = list(packages)
    conda = next((p for p in pkgs if p.manager == "conda" and p.name == "pytorch"), None)
    pip = next((p for p in pkgs if p.manager == "pip" and p.key == "torch"), None)
    if conda is None or pip is None:
        return []
    pulled = [p.name for p in pkgs if p.manager == "pip" and p is not pip and _depends_on(p, "torch")]
    why = f" (pulled in by pip's {', '.join(sorted(pulled)[:4])})" if pulled else ""
    differ = bool(conda.version and pip.version) and conda.version.split("+")[0] != pip.version.split("+")[0]
    build = f" {conda.build}" if conda.build else ""
    pv = f" {pip.version}" if pip.version else ""
    message = (f"torch is {_VERB[context]} twice: conda pytorch {conda.version}{build} and pip torch{pv}{why}; "
               f"`import torch` loads pip's copy{pv}: pip installs after conda into the same site-packages and "
               "writes torch/ over conda's files, while conda still records its pytorch"
               + (", so conda packages built against it break" if differ else ""))
    return [Mix("torch-twice", "error", message.replace("  ", " "), _TWICE_FIX[context], (pip, conda), "torch")]


def mixing(packages: Iterable[Package], *, context: Context = "lock") -> list[Mix]:
    """Every mixing finding for one platform's records (requested, locked or installed: ``context``)."""
    pkgs = list(packages)
    # cuda-twice on requested specs is lint's EG133 (projects.py, which knows the lines as written); a prefix's
    # pip rules (check) name the CUDA wheels beside conda's
    twice = cuda_library_twice(pkgs) if context == "lock" else []
    return channel_mix(pkgs) + cuda_line_mix(pkgs) + twice + torch_twice(pkgs, context=context)


__all__ = [
    "PIP_CUDA_LIBRARY",
    "PIP_NVIDIA",
    "RULES",
    "Context",
    "Mix",
    "build_cuda_major",
    "channel_family",
    "channel_mix",
    "conda_cuda_library",
    "cuda_library_twice",
    "cuda_line_mix",
    "cuda_major",
    "mixing",
    "pip_brings_cuda",
    "pip_cuda_wheel",
    "torch_twice",
]
