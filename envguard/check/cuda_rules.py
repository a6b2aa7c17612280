"""Rules on torch's CUDA build against the machine: a CPU build where CUDA is wanted (EG550), a driver too
old for the CUDA runtime (EG551), a GPU the build has no kernels for (EG552), no driver found (EG553), which
variant of a shared build string is installed (EG554), a locked build the channel does not build for this
platform (EG555, the answer init and lint give)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from envguard.check.facts import CheckInput, TorchBuild, torch_build
from envguard.check.fixes import E, I, catalog_fix
from envguard.findings import Finding
from envguard.versions import line_key, release


def rule_cuda(inp: CheckInput) -> list[Finding]:
    from envguard import compat

    out: list[Finding] = _lock_cuda_line(inp)
    build = torch_build(inp.info, inp.probe)
    if build.source == "none":
        return out
    if inp.wants_cuda and build.cpu:
        out.append(Finding("EG550", E, f"torch is a CPU build ({build.evidence}) but {inp.wants_cuda_source} "
                           f"wants CUDA {inp.wants_cuda if inp.wants_cuda != 'any' else ''}".rstrip(),
                           catalog_fix("cpu-build"), package="torch"))
    if not build.cuda:
        return out
    variant = _variant(inp, build)
    if variant is not None:
        out.append(Finding("EG554", I, f"torch is the {variant.name} variant of {_build_label(build)} "
                           f"({variant.describe()}); {_and_list(variant.siblings)} share its build string",
                           "", package="torch"))
    if inp.gpu is None:
        if inp.driver_checked:
            out.append(Finding("EG553", I, f"torch is a CUDA {build.cuda} build but no NVIDIA driver was found; "
                               "driver and GPU architecture checks skipped", ""))
        return out
    c = compat.load()
    minimum = c.min_driver(build.cuda, inp.platform)
    if minimum and not compat.driver_satisfies(inp.gpu.driver_version, minimum):
        out.append(Finding("EG551", E, f"NVIDIA driver {inp.gpu.driver_version} is older than {minimum}, the "
                           f"minimum for the CUDA {build.cuda} runtime of torch ({build.evidence})",
                           catalog_fix("driver-old"), package="torch"))
    arch_range = c.arch(build.route, build.cuda, build.version, inp.platform) if build.route else None
    label = _build_label(build)
    if variant is not None:  # a tegra build is not a server GPU build: its own architectures decide
        arch_range, label = variant.arch or arch_range, f"{label} ({variant.name} variant)"
    for name, cap in inp.gpu.gpus:
        ok, why = arch_supported(cap, build.arch_list, c.min_arch(build.cuda), arch_range, label)
        if not ok:
            out.append(Finding("EG552", E, f"GPU {name} (compute capability {cap}) is not covered by this torch "
                               f"build: {why}", catalog_fix("arch"), package="torch"))
    return out


def _lock_cuda_line(inp: CheckInput) -> list[Finding]:
    """EG555: the lock holds a conda-forge pytorch build whose CUDA line the channel does not build for this
    platform: the answer init and lint give (envguard.channelfacts.unbuilt_cuda_line)."""
    from envguard import channelfacts

    rec = next((p for p in inp.lock_packages or () if p.name == "pytorch" and p.manager == "conda"
                and (p.channel or "").rstrip("/").rsplit("/", 1)[-1] == "conda-forge"), None)
    found = channelfacts.unbuilt_cuda_line(rec.version, rec.build or "", inp.platform) if rec else None
    if rec is None or found is None:
        return []
    rel, lines = found
    exist = f"only for CUDA {_and_list(lines)}" if lines else "no CUDA build"
    return [Finding("EG555", E, f"the lock's pytorch {rec.version} {rec.build}: conda-forge builds torch "
                    f"{rel.version} {exist} on {inp.platform}",
                    f"re-lock: set `cuda-version={lines[-1]}` in environment.yml, then `envguard lock`" if lines
                    else "re-lock for a CPU build (`pytorch=*=cpu*`), then `envguard lock`", package="pytorch")]


def _variant(inp: CheckInput, build: TorchBuild) -> Any:
    """Which variant of a build string is installed (envguard.channelfacts.installed_variant), or None."""
    from envguard import channelfacts

    rec = next((r for r in inp.info.conda if r.name == "pytorch"), None)
    if rec is None or not build.cuda or not build.version or build.route != "conda-forge":
        return None
    return channelfacts.installed_variant(build.route, inp.platform, build.version, build.cuda, rec.depends)


def _and_list(values: Sequence[str]) -> str:
    values = list(values)
    return values[0] if len(values) == 1 else ", ".join(values[:-1]) + " and " + values[-1]


def _build_label(build: TorchBuild) -> str:
    where = {"conda-forge": "conda-forge's", "pypi": "PyPI's", "pytorch": "the pytorch channel's"}.get(build.route, "")
    return f"{where} CUDA {build.cuda} build of torch {build.version}".strip()


def arch_supported(capability: str, arch_list: Sequence[str], min_arch: str | None,
                   arch_range: Any = None, label: str = "this build") -> tuple[bool, str]:
    """Whether a GPU of ``capability`` ("8.6") runs this build, and why not.

    The build's own arch list decides when the probe read it (envguard.compat.arch_covers); otherwise the
    compatibility data's architectures for that route, CUDA line and release (``arch_range``, an
    envguard.compat.ArchRange); otherwise the CUDA line's oldest architecture ``min_arch``. A GPU exactly at a
    build's oldest architecture is covered."""
    from envguard.compat import arch_covers

    rel = release(capability)
    if len(rel) < 2:
        return True, ""
    major, minor = rel[0], rel[1]
    if arch_list:
        if arch_covers((major, minor), arch_list):
            return True, ""
        return False, f"arch list {' '.join(arch_list)} has no sm_{major}{minor}"
    if arch_range is not None:
        if arch_range.covers((major, minor)):
            return True, ""
        return False, f"{label} covers {arch_range.describe()} ({arch_range.source})"
    if min_arch and line_key(capability) < line_key(min_arch):
        return False, f"this CUDA line builds for sm_{min_arch.replace('.', '')} and newer"
    return True, ""
