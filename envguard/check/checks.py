"""The rules of ``envguard check``. Pure: facts in, findings out; no I/O, no processes.

:mod:`envguard.check` gathers the facts (prefix inspection, lock, driver, probe
results) into a :class:`CheckInput`; :func:`evaluate` applies every rule. Each
rule has a stable code (EG5xx, documented in docs/check-schema.md), a
severity, a message and a fix.
"""

from __future__ import annotations

import fnmatch
import re
import shlex
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from envguard.redact import shorten
from envguard.findings import Finding, Severity
from envguard.model import Package, canonical_name, pep503
from envguard.prefix import CondaRecord, Dist, FileProblem, PrefixInfo
from envguard.versions import conda_key, line_key, major_minor, release

E, W, I = Severity.ERROR, Severity.WARNING, Severity.INFO

DEFAULT_CORE: tuple[str, ...] = (
    "python", "torch", "pytorch", "torchvision", "torchaudio", "triton", "numpy", "nvidia-*",
    "cudatoolkit", "cuda-*", "mkl", "intel-openmp", "llvm-openmp", "nccl",
)

# Codes whose findings mean the prefix no longer matches its own records:
# exit code 3 instead of 1 (README, exit codes).
INTEGRITY_CODES = frozenset({"EG514", "EG530", "EG531", "EG532", "EG533", "EG534", "EG535", "EG536"})
MAX_FILES_PER_FINDING = 5


def _fix(case_id: str) -> str:
    """The failure catalogue's fix text (envguard/data/failures.yaml): smoke and check word a problem alike.
    :func:`evaluate` aims its envguard commands at the checked environment (envguard.catalog.aim)."""
    from envguard import catalog  # lazily: most checks find nothing that needs a fix text

    return catalog.get(case_id).fix


def create_command(prefix: object, lockfile: str | None = None, *, force: bool = False) -> str:
    """``envguard create -p PREFIX [--lockfile LOCK] [--force]``, shell-quoted: the command that makes the
    checked environment exactly its lock again (create rebuilds an environment that drifted; ``force`` for a
    change its sync cannot see: a file's content changed with its size kept)."""
    parts = ["envguard", "create", "-p", str(prefix)] + (["--lockfile", lockfile] if lockfile else [])
    return shlex.join(parts + (["--force"] if force else []))


# --------------------------------------------------------------------------- facts


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


# --------------------------------------------------------------------------- helpers


def is_core(name: str, core: Sequence[str] = DEFAULT_CORE, manager: str = "conda") -> bool:
    keys = {pep503(name), canonical_name(name, manager)}  # type: ignore[arg-type]
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


# --------------------------------------------------------------------------- rules


def rule_integrity(inp: CheckInput) -> list[Finding]:
    out: list[Finding] = []
    if inp.half_built:
        out.append(Finding("EG534", E, f"the prefix is half-built: {inp.half_built}",
                           f"run `{create_command(inp.info.prefix, inp.lock_file)}` again: it removes what an "
                           "interrupted run left and rebuilds from the lock",
                           file=str(inp.info.prefix)))
    for name, why in inp.info.bad_records:
        out.append(Finding("EG533", E, f"unreadable conda-meta record: {why}",
                           f"rebuild the environment: `{create_command(inp.info.prefix, inp.lock_file)}`; the "
                           "record cannot be trusted", file=f"conda-meta/{name}"))
    return out


def rule_files(inp: CheckInput) -> list[Finding]:
    if not inp.file_problems:
        return []
    code = {"missing": "EG530", "size": "EG531", "sha256": "EG532", "unreadable": "EG535", "outside": "EG536"}
    what = {"missing": "missing", "size": "changed size", "sha256": "changed content (sha256)",
            "unreadable": "unreadable", "outside": "outside the prefix (a path leaving it, or a symlink out)"}
    grouped: dict[tuple[str, str], list[FileProblem]] = {}
    for p in inp.file_problems:
        grouped.setdefault((p.package, p.problem), []).append(p)
    out: list[Finding] = []
    for (pkg, problem), items in sorted(grouped.items()):
        if problem == "outside":
            shown = ", ".join(f"{shorten(p.path, 120)} ({p.actual})" for p in items[:MAX_FILES_PER_FINDING])
            fix = (f"{pkg} puts or points files outside the environment: remove it, or rebuild the environment "
                   f"with `{create_command(inp.info.prefix, inp.lock_file)}`, which refuses such packages unless "
                   "ENVGUARD_SYMLINK_ALLOW names a trusted symlink")
        else:
            shown = ", ".join(shorten(p.path, 120) for p in items[:MAX_FILES_PER_FINDING])
            force = problem == "sha256"  # the size is the same: a sync, which compares sizes, would keep it
            fix = (f"another installer (often pip) or a manual edit changed {pkg}'s files; rebuild the environment "
                   f"from the lock (`{create_command(inp.info.prefix, inp.lock_file, force=force)}`) and install "
                   "leaves with `pip install --no-deps`")
        more = f" and {len(items) - MAX_FILES_PER_FINDING} more" if len(items) > MAX_FILES_PER_FINDING else ""
        n = len(items)
        out.append(Finding(
            code[problem], E,
            f"{n} file{'s' * (n != 1)} of conda package {pkg} {what[problem]}: {shown}{more}", fix,
            file=items[0].path, package=pkg))
    return out


def rule_lock(inp: CheckInput) -> list[Finding]:
    """Lock (old) against installed (new), classified by envguard.diff.diff_packages."""
    if inp.lock_changes is None:
        return []
    out: list[Finding] = []
    fix_sync = f"rebuild the environment from the lock: `{create_command(inp.info.prefix, inp.lock_file)}`"
    for ch in inp.lock_changes:
        kinds = tuple(getattr(ch, "kinds", ()) or ())
        old, new = getattr(ch, "old", None), getattr(ch, "new", None)
        detail = str(getattr(ch, "detail", "") or "")
        if "removed" in kinds and old is not None:
            out.append(Finding("EG510", E, f"{old.manager} package {old.name} {old.version} is in the lock but "
                               "not installed", fix_sync, file=inp.lock_file, package=old.name))
        elif "added" in kinds and new is not None:
            out.append(Finding("EG511", W, f"{new.manager} package {new.name} {new.version} is installed but "
                               "not in the lock", f"add it to the spec and relock, or remove it; {fix_sync}",
                               file=inp.lock_file, package=new.name))
        elif old is not None and new is not None:
            code = "EG514" if "hash-changed" in kinds else "EG512"
            out.append(Finding(code, E, f"{_desc(old)} in the lock, {_desc(new)} installed "
                               f"({', '.join(kinds)}{': ' + detail if detail else ''})",
                               fix_sync, file=inp.lock_file, package=new.name))
    return out


def _desc(p: Package) -> str:
    return " ".join(x for x in (p.manager, p.name, p.version, p.build or "") if x)


def rule_fingerprint(inp: CheckInput) -> list[Finding]:
    """Without a lock, compare with what `envguard create` recorded when it built the prefix."""
    if inp.fingerprint_conda is None or inp.lock_changes is not None:
        return []
    recs = {r.name: r for r in inp.info.conda}
    problems: list[str] = []
    for name, digest in sorted(inp.fingerprint_conda.items()):
        r = recs.get(name)
        if r is None:
            problems.append(f"{name} missing")
        elif digest.startswith("md5:"):
            if r.md5 and r.md5 != digest[4:]:
                problems.append(f"{name} replaced")
        elif r.sha256 and r.sha256 != digest:
            problems.append(f"{name} replaced")
    problems += [f"{n} added" for n in sorted(set(recs) - set(inp.fingerprint_conda))]
    pip_now = {d.key for d in inp.info.dists if d.owner != "conda"}
    want_pip = set(inp.fingerprint_pip or ())
    problems += [f"pip {n} missing" for n in sorted(want_pip - pip_now)]
    problems += [f"pip {n} added" for n in sorted(pip_now - want_pip)]
    if not problems:
        return []
    shown = ", ".join(problems[:8]) + (f" and {len(problems) - 8} more" if len(problems) > 8 else "")
    sev = W if all(p.endswith(" added") for p in problems) else E
    if inp.fingerprint_lockfile:
        fix = (f"compare with its lock (`envguard check -p {shlex.quote(str(inp.info.prefix))} --lockfile "
               f"{shlex.quote(inp.fingerprint_lockfile)}`) and rebuild it "
               f"(`{create_command(inp.info.prefix, inp.fingerprint_lockfile)}`)")
    else:
        fix = "rebuild it from its lock with `envguard create -p PREFIX --lockfile LOCK`"
    return [Finding("EG515", sev, f"the environment changed since `envguard create` built it: {shown}", fix,
                    file=f"{inp.info.prefix}/conda-meta/envguard-fingerprint.json")]


def rule_stale_lock(inp: CheckInput) -> list[Finding]:
    """The lock no longer says what the environment file asks for: the environment matches a stale lock."""
    if not inp.stale_lock:
        return []
    return [Finding("EG516", E, f"{inp.stale_lock}: the environment may match its lock, but the lock no longer "
                    "matches the environment file", inp.stale_lock_fix, file=inp.lock_file)]


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
    fix = _fix("pip-over-conda")
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
    for pth, owner_pkg, d in info.pth_dirs:
        if origin.startswith(d.rstrip("/") + "/"):
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
                               f"{rec.name} {rec.version}", _fix("pip-over-conda"), file=str(origin),
                               package=module))
        else:
            out.append(Finding("EG523", I, f"`import {module}` resolves to {origin} ({label})", "",
                               package=module))
    return out


def rule_python(inp: CheckInput) -> list[Finding]:
    from envguard import compat

    ver = inp.info.python_version
    mm = major_minor(ver)
    if not mm:
        return []
    c = compat.load()
    if mm in c.supported_python:
        legacy = c.python_legacy(mm)
        if legacy:
            return [Finding("EG541", W, f"Python {ver}: {legacy.get('note') or 'legacy'} "
                            f"(end of life {legacy.get('end_of_life')}, last torch {legacy.get('last_torch')})",
                            f"move to Python {c.default_python}: set `python={c.default_python}` in "
                            f"environment.yml, then `{create_command(inp.info.prefix)}` (it re-locks first)")]
        return []
    managed = inp.info.is_conda or inp.lock_packages is not None
    sev = E if managed else W
    why = "" if managed else " (a plain virtualenv: advisory)"
    return [Finding("EG540", sev, f"Python {ver} is outside envguard's policy "
                    f"({', '.join(c.supported_python)}){why}",
                    f"use Python {c.default_python}: set `python={c.default_python}` in environment.yml, then "
                    f"`{create_command(inp.info.prefix)}` (it re-locks first)")]


def rule_channels(inp: CheckInput) -> list[Finding]:
    from envguard import compat

    c = compat.load()
    out: list[Finding] = []
    rec = next((r for r in inp.info.conda if r.name == "pytorch"), None)
    if rec is not None and rec.channel_name == "pytorch":
        mkl = inp.info.record("mkl")
        if mkl is not None and conda_key(mkl.version) >= conda_key(c.pytorch_mkl_max):
            out.append(Finding("EG543", E, f"pytorch {rec.version} from the frozen `pytorch` channel with mkl "
                               f"{mkl.version} (>= {c.pytorch_mkl_max}): `import torch` fails with "
                               "\"undefined symbol: iJIT_NotifyEvent\"", _fix("mkl-symbol"), package="pytorch"))
        else:
            out.append(Finding("EG542", W, f"pytorch {rec.version} comes from the `pytorch` channel, frozen at "
                               f"PyTorch {c.pytorch_channel_frozen_at}", "move to conda-forge's pytorch "
                               "(`pytorch=*=cuda*` or `cpu*` with cuda-version)", package="pytorch"))
    legacy = c.legacy_packages
    for r in inp.info.conda:
        if r.name in legacy:
            out.append(Finding("EG545", I, f"{r.name} {r.version} is a legacy package: {legacy[r.name]}", "",
                               package=r.name))
    return out


def rule_cuda(inp: CheckInput) -> list[Finding]:
    from envguard import compat

    out: list[Finding] = []
    build = torch_build(inp.info, inp.probe)
    if build.source == "none":
        return out
    if inp.wants_cuda and build.cpu:
        out.append(Finding("EG550", E, f"torch is a CPU build ({build.evidence}) but {inp.wants_cuda_source} "
                           f"wants CUDA {inp.wants_cuda if inp.wants_cuda != 'any' else ''}".rstrip(),
                           _fix("cpu-build"), package="torch"))
    if not build.cuda:
        return out
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
                           _fix("driver-old"), package="torch"))
    arch_range = c.arch(build.route, build.cuda, build.version) if build.route else None
    for name, cap in inp.gpu.gpus:
        ok, why = arch_supported(cap, build.arch_list, c.min_arch(build.cuda), arch_range,
                                 _build_label(build))
        if not ok:
            out.append(Finding("EG552", E, f"GPU {name} (compute capability {cap}) is not covered by this torch "
                               f"build: {why}", _fix("arch"), package="torch"))
    return out


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


def rule_environment(inp: CheckInput) -> list[Finding]:
    out: list[Finding] = []
    for d, libs in inp.library_path_libs:
        if libs:
            out.append(Finding("EG560", W, f"LD_LIBRARY_PATH puts {', '.join(libs)} from {d} ahead of the "
                               "environment's own libraries", _fix("cudnn")))
    if "KMP_DUPLICATE_LIB_OK" in inp.env:
        out.append(Finding("EG561", W, f"KMP_DUPLICATE_LIB_OK={inp.env['KMP_DUPLICATE_LIB_OK']} hides two OpenMP "
                           "runtimes loaded at once (wrong results or crashes)", _fix("omp-dup")))
    return out


def rule_skipped(inp: CheckInput) -> list[Finding]:
    out: list[Finding] = []
    if not inp.info.is_conda:
        kind = "a virtualenv" if inp.info.is_venv else "not a conda prefix"
        out.append(Finding("EG501", I, f"{inp.info.prefix} is {kind} (no conda-meta): conda record, file and "
                           "pip-over-conda checks skipped", ""))
    if inp.lock_packages is None:
        out.append(Finding("EG502", I, "no lock file: lock comparison skipped",
                           "pass --lockfile, or run check where conda-lock.yml sits beside environment.yml"))
    return out


RULES = (rule_integrity, rule_files, rule_lock, rule_stale_lock, rule_fingerprint, rule_pip_over_conda, rule_import_origins, rule_python,
         rule_channels, rule_cuda, rule_environment, rule_skipped)


def evaluate(inp: CheckInput) -> list[Finding]:
    out: list[Finding] = []
    for rule in RULES:
        out.extend(rule(inp))
    from envguard.catalog import aim_findings  # every envguard command in a fix names the checked environment

    return aim_findings(out, inp.info.prefix)


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
