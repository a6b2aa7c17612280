"""Rules on pip over conda: a pip dist that shadows or replaces a conda package (EG521), a conda dist-info
pip overwrote (EG522), pip in conda's torch stack and the pip-only torch stack (EG520), a core package by an
unknown installer (EG524), and where ``import torch`` really resolves (EG523)."""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence

from envguard.check.facts import CheckInput, is_core
from envguard.check.fixes import E, I, W, catalog_fix
from envguard.findings import Finding
from envguard.model import canonical_name, pep503
from envguard.prefix import CondaRecord, Dist, PrefixInfo


def _import_key(dist: Dist) -> set[str]:
    return set(dist.import_names) | {dist.key.replace("-", "_")}


# What a pip torch stack brings: torch and the packages built for it, their CUDA wheels, numpy.
_PIP_STACK = ("torch", "torchvision", "torchaudio", "triton", "pytorch-triton", "numpy", "nvidia-*", "cuda-*")


def _matches(name: str, patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def rule_pip_over_conda(inp: CheckInput) -> list[Finding]:
    """pip over conda, as errors only where it breaks something conda installed.

    Errors: a pip dist that shadows or replaces a conda package (EG521: two dist-infos for one import name, or
    two managers claiming one package), a conda dist-info pip overwrote (EG522), and a torch, torchvision,
    torchaudio or numpy from pip mixed into conda's torch stack (EG520). A torch stack that comes from pip
    alone, on conda's Python, is PyTorch's own recommended install since the pytorch channel ended: one info
    line (EG520) names it, a warning when conda also installed CUDA libraries beside the wheels' own."""
    info = inp.info
    if not info.is_conda:
        return []
    out: list[Finding] = []
    fix = catalog_fix("pip-over-conda")
    conda_by_key: dict[str, CondaRecord] = {canonical_name(r.name): r for r in info.conda}
    conda_stack = sorted(r.name for r in info.conda
                         if canonical_name(r.name) in ("torch", "torchvision", "torchaudio") or r.name == "libtorch")
    # conda-owned dists by project name and by import name (namespace packages are already left out
    # of import_names by envguard.prefix, so nvidia-* or google-* siblings do not collide).
    conda_by_dist: dict[str, Dist] = {}
    conda_by_import: dict[str, Dist] = {}
    for c in info.dists:
        if c.owner == "conda":
            conda_by_dist.setdefault(c.key, c)
            for n in _import_key(c):
                conda_by_import.setdefault(n, c)
    flagged: set[str] = set()
    layout: list[Dist] = []
    for d in info.dists:
        if d.owner == "conda":
            continue
        who = "pip" if d.owner == "pip" else f"an unknown installer ({d.installer or 'no INSTALLER file'})"
        rec = conda_by_key.get(d.key)
        twin = conda_by_dist.get(d.key) or next(
            (conda_by_import[n] for n in d.import_names if n in conda_by_import), None)
        if twin is not None:
            out.append(Finding("EG521", E, f"{d.name} {d.version} installed by {who} shadows conda package "
                               f"{twin.conda_record} {twin.version}: two dist-infos for one import name "
                               f"({twin.path})", fix, file=d.path, package=d.name))
            flagged.add(d.path)
        elif rec is not None:
            out.append(Finding("EG521", E, f"{d.name} {d.version} installed by {who} replaces conda package "
                               f"{rec.name} {rec.version}, which conda-meta still records: two managers claim "
                               f"{d.key}", fix, file=d.path, package=d.name))
            flagged.add(d.path)
        if d.path in flagged or not is_core(d.name, inp.core, "pip"):
            continue
        if d.owner != "pip":
            out.append(Finding("EG524", W, f"core package {d.name} {d.version} was installed by {who}, not by conda "
                               "or pip: nothing records which files it owns", fix, file=d.path, package=d.name))
        elif conda_stack and d.key in ("torch", "torchvision", "torchaudio", "numpy"):
            out.append(Finding("EG520", E, f"{d.name} {d.version} was installed by pip into conda's torch stack "
                               f"({', '.join(conda_stack)}): two managers' binaries built against different "
                               "torch and numpy ABIs", fix, file=d.path, package=d.name))
        elif not conda_stack and _matches(d.key, _PIP_STACK):
            layout.append(d)
        else:
            out.append(Finding("EG520", W, f"core package {d.name} {d.version} was installed by pip into a conda "
                               "environment" + (f" beside conda's torch stack ({', '.join(conda_stack)})"
                                                if conda_stack else ""), fix, file=d.path, package=d.name))
    said = _pip_stack_layout(info, layout) if layout else None
    if said is not None:
        out.append(said)
    for ow in info.overwritten:
        out.append(Finding("EG522", E, f"conda package {ow.package}'s dist-info was overwritten: {ow.reason}",
                           fix, file=ow.metadata_path, package=ow.package))
    return out


def _pip_stack_layout(info: PrefixInfo, layout: list[Dist]) -> Finding | None:
    """One line for a torch stack from pip on conda's Python; a warning when conda brings CUDA libraries too,
    unless they are of another CUDA line than the wheels': the mixing rule (EG572) then names both lines."""
    torch = next((d for d in layout if d.key == "torch"), layout[0])
    cuda_wheels = [d for d in layout if d.key.startswith(("nvidia-", "cuda-"))]
    shown = ", ".join(f"{d.name} {d.version}" for d in layout if not d.key.startswith(("nvidia-", "cuda-")))
    if cuda_wheels:
        shown += f" and {len(cuda_wheels)} CUDA wheel{'s' * (len(cuda_wheels) != 1)}"
    from envguard.mixing import conda_cuda_library, cuda_line_mix

    conda_cuda = sorted(f"{r.name} {r.version}" for r in info.conda if conda_cuda_library(r.name))
    if cuda_wheels and conda_cuda:

        if any({r.manager for r in m.records} == {"conda", "pip"} for m in cuda_line_mix(info.packages())):
            return None  # EG572: the same two runtimes, with their lines
        return Finding("EG520", W, f"the torch stack comes from pip ({shown}) while conda installed CUDA libraries "
                       f"too ({', '.join(conda_cuda[:3])}{' ...' if len(conda_cuda) > 3 else ''}): two CUDA "
                       "runtimes in one environment, and what loads first decides which one a library gets",
                       "keep CUDA in one manager: remove the conda CUDA packages (the wheels bring their own), or "
                       "install the whole torch stack from conda-forge", file=torch.path, package=torch.name)
    py = info.record("python")
    return Finding("EG520", I, f"the torch stack comes from pip ({shown}) on conda's Python"
                   f"{' ' + py.version if py else ''}: a supported layout (PyTorch's own install since the pytorch "
                   "channel ended): nothing pip installed shadows a conda package", "",
                   file=torch.path, package=torch.name)


def _origin_owner(inp: CheckInput, module: str, origin: str) -> tuple[str, str]:
    """(owner, label) of the file ``import module`` resolves to."""
    info = inp.info
    prefix = str(info.prefix).rstrip("/") + "/"
    if origin.startswith(prefix):
        rel = origin[len(prefix):]
        for r in info.conda:
            if rel in r.files:
                return "conda", f"conda package {r.name} {r.version}"
        for sp in info.site_packages:
            if rel.startswith(sp + "/"):
                cands = [d for d in info.dists if d.path.startswith(sp + "/") and d.owner != "conda"
                         and (module in d.import_names or d.key.replace("-", "_") == module)]
                if cands:
                    d = cands[0]
                    return d.owner, f"{d.owner} dist {d.name} {d.version}"
        return "unknown", "a file no installer recorded"
    for pth, owner_pkg, pth_dir in info.pth_dirs:
        if origin.startswith(pth_dir.rstrip("/") + "/"):
            if owner_pkg is not None:
                rec = info.record(owner_pkg)
                return "conda", f"conda package {owner_pkg} {rec.version if rec else ''}, through {pth}".replace(
                    "  ", " ")
            return "unknown", f"a path outside the prefix, through {pth}"
    return "outside", "a path outside the prefix"


def rule_import_origins(inp: CheckInput) -> list[Finding]:
    if not inp.import_origins:
        return []
    out: list[Finding] = []
    conda_keys = {canonical_name(r.name): r for r in inp.info.conda}
    for module, data in sorted(inp.import_origins.items()):
        if module.startswith("_") or not isinstance(data, Mapping):
            continue
        origin = data.get("origin")
        if not origin:
            continue
        owner, label = _origin_owner(inp, module, str(origin))
        rec = conda_keys.get(pep503(module))
        if inp.info.is_conda and rec is not None and owner in ("pip", "unknown"):
            out.append(Finding("EG523", E, f"`import {module}` resolves to {origin} ({label}), not to conda's "
                               f"{rec.name} {rec.version}", catalog_fix("pip-over-conda"), file=str(origin),
                               package=module))
        else:
            out.append(Finding("EG523", I, f"`import {module}` resolves to {origin} ({label})", "",
                               package=module))
    return out
