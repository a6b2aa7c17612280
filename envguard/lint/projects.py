"""Lint rules about what real projects' files declare, beside the per-spec rules of ``lint/__init__``.

Kept apart so that the environment-file linter stays about one file's structure and specs; these rules
read the same gathered facts.
"""

from __future__ import annotations

import re
from typing import Any

# pip's NVIDIA wheels and the conda packages that hold the same library: one table, envguard.mixing's
from envguard.mixing import PIP_CUDA_LIBRARY as _PIP_CUDA_LIBRARY
from envguard.mixing import PIP_NVIDIA as _PIP_NVIDIA
from envguard.sources.pixi_manifest import satisfied_by_pixi

__all__ = ["RULES", "declares_nothing", "is_nightly_channel", "is_nvidia_channel", "nightly_fix", "project_rules",
           "raw_by_line", "raw_for", "satisfied_by_pixi", "unused_channel"]


def declares_nothing(data: Any) -> bool:
    """An environment file with no ``dependencies`` (absent or empty): conda and mamba create an empty
    environment from it, so it is valid, just empty."""
    return isinstance(data, dict) and not data.get("dependencies") and not isinstance(data.get("dependencies"),
                                                                                     (str, dict))


def raw_by_line(deps: list[Any], pos: Any) -> dict[tuple[int | None, str], str]:
    """Every conda dependency string as written, by its line and the name it gives: a flow list
    (``[python=3.11, numpy]``) puts several on one line, so a line alone does not say which item is meant.
    Each string is split once here (a lookup per requirement stays constant however long the line)."""
    from envguard.redact import redact
    from envguard.sources.envfile import split_conda_spec

    out: dict[tuple[int | None, str], str] = {}
    for i, dep in enumerate(deps):
        if not isinstance(dep, str):
            continue
        raw = redact(dep.strip())
        try:
            _, name, _ = split_conda_spec(raw)
        except ValueError:
            continue
        out.setdefault((pos.line("dependencies", i), name), raw)  # the first one that names it
    return out


def raw_for(raw_at: dict[tuple[int | None, str], str], req: Any) -> str | None:
    """The dependency string ``req`` was read from: the one on its line that names it."""
    return raw_at.get((req.line, req.name))


# ------------------------------------------------------------------ rules (registered in lint/__init__.py)

# (code, name, severity, summary, applies_to): lint/__init__.py turns them into its Rule entries
RULES = (
    ("EG131", "dependency-listed-twice", "warning", "one package listed twice among the conda or the pip dependencies",
     "environment"),
    ("EG132", "git-requirement-without-commit", "warning", "a pip `git+` requirement that names no commit",
     "environment"),
    ("EG133", "cuda-library-twice", "error",
     "the same CUDA library from pip's nvidia-* wheels (or a pip package built for a CUDA line) and from conda",
     "any"),
    ("EG134", "torch-build-unchosen", "warning", "a CUDA line pinned while torch only arrives as a dependency",
     "environment"),
)

# conda channels that publish nightly builds and delete them (beside compat.yaml's list): pytorch-nightly,
# rapidsai-nightly, dask/label/dev ...
_NIGHTLY = re.compile(r"(?:^|[-_/])(?:nightly|nightlies)(?:$|[-_/])|/label/dev$")

_TORCH_NAMES = frozenset({"pytorch", "pytorch-gpu", "pytorch-cpu"})
# conda packages that depend on pytorch: asked for alone, the solver picks a torch build for them
_NEEDS_TORCH = frozenset({
    "torchvision", "torchaudio", "pytorch_geometric", "pytorch-geometric", "pyg", "dgl", "lightning",
    "pytorch-lightning", "torchmetrics", "pytorch_scatter", "pytorch_sparse", "pytorch_cluster", "torchdata",
    "transformers", "accelerate", "timm", "cugraph-pyg", "cugraph-dgl", "pylibwholegraph", "torch-geometric",
    "wholegraph", "botorch", "gpytorch", "monai", "kornia", "pytorch3d",
})
_COMMIT = re.compile(r"@[0-9a-fA-F]{7,40}(?:$|[#&])")


def is_nightly_channel(name: str, known: Any) -> bool:
    n = name.lower().rstrip("/")
    return n in known or bool(_NIGHTLY.search(n.rsplit("/", 3)[-1] if "://" in n else n))


def nightly_fix(name: str) -> str:
    """EG120's fix: pytorch-nightly's torch has a released counterpart on conda-forge; another nightly
    channel has its released channel."""
    if name.lower() == "pytorch-nightly":
        return "use a released torch from conda-forge"
    released = re.sub(r"[-_/]?(?:nightly|nightlies)$|/label/dev$", "", name.lower())
    return f"use released builds (the `{released}` channel, or conda-forge) and pin them"


def _cuda_major(version: str | None) -> str | None:
    m = re.match(r"^[=<>~!]*\s*(\d{2})", version or "")
    return m.group(1) if m else None


def project_rules(lint: Any) -> None:
    """The rules above over one environment's gathered dependencies (an environment file, an export or one
    pixi environment): ``lint`` is the environment-file linter after its gather step."""
    _listed_twice(lint)
    _git_without_commit(lint)
    _cuda_library_twice(lint)
    _torch_build_unchosen(lint)
    _unused_nvidia_channel(lint)


def _overlap(a: Any, b: Any) -> bool:
    return a is None or b is None or bool(set(a) & set(b))


def _listed_twice(lint: Any) -> None:
    """Two lines for one package. conda names are compared as written (``xxhash`` is the C library,
    ``python-xxhash`` its binding; ``matplotlib`` holds ``matplotlib-base``), PyPI names normalised. Not
    for a pixi manifest: TOML refuses a key twice in one table, and features listing the same package
    for their own environments is how pixi composes them."""
    from envguard.model import pep503

    if hasattr(lint, "manifest"):
        return
    for deps, what in ((lint.conda, "conda"), (lint.pip, "pip")):
        seen: dict[str, Any] = {}
        for d in deps:
            key = d.name.lower() if what == "conda" else pep503(d.name)
            first = seen.get(key)
            if first is not None and _overlap(first.platforms, d.platforms) and first.line != d.line \
                    and getattr(first, "via", None) == getattr(d, "via", None):
                lint.add("EG131", f"{d.name} is listed twice among the {what} dependencies (`{first.spec}` on line "
                         f"{first.line}, `{d.spec}` here): the solver applies both constraints, a reader of the "
                         "file sees one",
                         "keep one line with the constraint you mean", d.line, package=key)
            elif first is None:
                seen[key] = d


def _git_without_commit(lint: Any) -> None:
    for d in lint.pip:
        spec = d.spec
        if "git+" in spec and not _COMMIT.search(spec.split(" #", 1)[0]):
            lint.add("EG132", f"`{spec}` names no commit: pip installs whatever the branch or tag points to when the "
                     "environment is built, so two builds of one file differ", "pin a commit: `...@<full commit "
                     "hash>` (or a released version from an index)", d.line, package=lint.dist_key(d))


def _cuda_library_twice(lint: Any) -> None:
    """pip's ``nvidia-<lib>-cuNN`` beside conda's package of the same library, on the same CUDA line."""
    conda = {d.name: d for d in lint.conda}
    line = next((_cuda_major(d.version) for d in lint.conda if d.name in ("cuda-version", "pytorch-cuda")), None)
    for d in lint.pip:
        m = _PIP_NVIDIA.match(d.name.replace("_", "-"))
        if not m:
            continue
        twins = [conda[n] for n in _PIP_CUDA_LIBRARY.get(m["lib"], ()) if n in conda and
                 _overlap(conda[n].platforms, d.platforms)]
        if not twins or (line is not None and line != m["major"]):
            continue  # another line is EG157's to say
        lint.add("EG133", f"`{d.spec}` (pip) and `{twins[0].spec}` (conda) are two copies of one CUDA library on "
                 f"CUDA {m['major']}: torch loads one, other libraries may load the other, and a fix to one copy "
                 "does not reach the code using the other", f"keep conda's `{twins[0].name}` and delete the pip "
                 "wheel (or take the whole CUDA stack from pip)", d.line, package=d.name)
        return
    _cuda_wheels_beside_conda_cuda(lint, line)


def _cuda_wheels_beside_conda_cuda(lint: Any, line: str | None) -> None:
    """CUDA from PyPI beside a conda CUDA stack. pixi: ``nvidia-*`` wheels, or torch's wheels, which depend on
    them on Linux (in an environment file EG107 says it for a pip torch; a manifest's PyPI torch is a documented
    route there, so this names the second CUDA copy it brings). Both kinds: a PyPI package built for one CUDA
    line under its own name (``cupy-cuda12x``, ``*-cu12``), whose wheels bring NVIDIA's CUDA libraries (or its
    own copy of them): a warning, since what it pulls in is its metadata's to say and a lock's to show."""
    from envguard.findings import Severity
    from envguard.mixing import conda_cuda_library, pip_brings_cuda
    from envguard.model import Package

    stack = [d for d in lint.conda if conda_cuda_library(d.name) and d.name != "cuda-version"]
    if not stack:
        return
    also = f"`{stack[0].spec}`{' and more' if len(stack) > 1 else ''}"
    wheels = []
    if hasattr(lint, "manifest"):
        wheels = [d for d in lint.pip if _PIP_NVIDIA.match(d.name.replace("_", "-")) and
                  (line is None or _PIP_NVIDIA.match(d.name.replace("_", "-"))["major"] == line)]  # type: ignore
        wheels += [d for d in lint.pip if lint.dist_key(d) == "torch"]
    if wheels:
        lint.add("EG133", f"CUDA from both managers: PyPI's `{wheels[0].spec}` brings NVIDIA's CUDA wheels, and "
                 f"conda installs {also}: two copies of the CUDA libraries in one environment, and which one a "
                 "library loads depends on load order",
                 "take CUDA from one manager: drop the conda CUDA packages, or move torch (and the wheels) to "
                 "[dependencies]", wheels[0].line, package=wheels[0].name)
        return
    for d in lint.pip:
        why = pip_brings_cuda(Package(d.name, "", "pip"))
        major = re.search(r"CUDA (\d+)", why or "")
        if why is None or (major and line is not None and major[1] != line):
            continue  # another line than conda's is EG157's to say
        lint.add("EG133", f"`{d.spec}` (pip) {why} beside conda's CUDA stack ({also}): two copies of CUDA "
                 "libraries in one environment, and which one a library loads depends on load order",
                 "take CUDA from one manager: the conda build of the package where there is one (conda-forge's "
                 "`cupy`), or drop the conda CUDA packages; a lock shows which wheels it pulls in",
                 d.line, Severity.WARNING, package=d.name)
        return


def _torch_build_unchosen(lint: Any) -> None:
    torch_wheel = any(lint.dist_key(d) == "torch" for d in lint.pip)
    if any(d.name in _TORCH_NAMES for d in lint.conda) or torch_wheel:
        return
    cuda = next((d for d in lint.conda if d.name == "cuda-version"), None)
    needs = [d for d in lint.conda if d.name in _NEEDS_TORCH]
    if cuda is None or not needs:
        return
    lint.add("EG134", f"`{cuda.spec}` is pinned but torch is not requested: it arrives as a dependency of "
             f"{', '.join(f'`{d.name}`' for d in needs[:3])}, and nothing in the file says whether its build is the "
             "CUDA or the CPU one",
             f"request it with a build guard, e.g. `pytorch=*=cuda{_cuda_major(cuda.version) or '12'}*`"
             " (or `pytorch-gpu`)", needs[0].line, package="pytorch")


def is_nvidia_channel(channel: str) -> bool:
    """The nvidia channel, or one of its labels (``nvidia/label/cuda-12.1.0``), by name or URL."""
    from envguard.channels import normalise_channel

    n = (normalise_channel(str(channel).strip()) or "").lower().rstrip("/")
    return n == "nvidia" or n.startswith("nvidia/")


def unused_channel(channel: str, *, locked: bool, why: str = "") -> tuple[str, str]:
    """EG130's message and fix, one wording for a spec, a manifest and a lock: the channel as written, and for
    the nvidia channel (or a label of it) what it carries."""
    if not why and is_nvidia_channel(channel):
        why = "the nvidia channel carries CUDA packages only, and " + (
            "none is locked from it" if locked else "none is requested")
    what = "is locked from it" if locked else "in this file comes from it"
    return (f"channel `{channel}` is listed but nothing {what}" + (f" ({why})" if why else ""),
            f"remove `{channel}` from channels" + (" and re-lock" if locked else ""))


def _unused_nvidia_channel(lint: Any) -> None:
    """The `nvidia` channel (or a label of it) holds CUDA packages only: listed with no CUDA package requested,
    nothing comes from it. The `pytorch` channel's CUDA builds pull their CUDA packages from it, so it is used
    when torch comes from that channel; a `pytorch` channel listed and unused itself is EG130 on its own line."""
    from envguard.mixing import conda_cuda_library

    listed = [(str(ch), line) for ch, line in lint.channels if is_nvidia_channel(str(ch))]
    if not listed:
        return
    if any(conda_cuda_library(d.name) or is_nvidia_channel(d.channel or "") for d in lint.conda):
        return
    pytorch_listed = any(str(ch).strip().lower() == "pytorch" for ch, _ in lint.channels)
    if pytorch_listed and any(d.name in _TORCH_NAMES | {"torchvision", "torchaudio", "pytorch-cuda"}
                              and (d.channel or "pytorch").lower() == "pytorch" for d in lint.conda):
        return  # the pytorch channel's CUDA builds take their CUDA packages from nvidia
    for ch, line in listed:
        message, fix = unused_channel(ch, locked=False)
        lint.add("EG130", message, fix, line)
