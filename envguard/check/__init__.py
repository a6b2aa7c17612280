"""``envguard check``: verify an installed environment against its lock, its policy and its hardware.

Orchestration only: gather facts (prefix inspection, lock, spec, driver, the
smoke probe, import origins), hand them to the pure rules in
:mod:`envguard.check.checks`, and return a :class:`CheckReport`. Nothing is written
into the checked prefix. Imports stay lazy: check is the command people run
first and most often (bench/check.py measures its start-up).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envguard.check.checks import DEFAULT_CORE, INTEGRITY_CODES, CheckInput, GpuFacts, TorchBuild
from envguard.check.hook import watched_changed as watched_changed  # public: the envguard-check git hook's trigger
from envguard.check.node import node_identity
from envguard.check.options import CheckOptions
from envguard.errors import ExitCode, PlatformNotLocked, UserError
from envguard.findings import Finding, Severity, sort_findings
from envguard.fingerprint import read_fingerprint
from envguard.leftovers import OLD_TAG, interruption
from envguard.model import Package
from envguard.prefix import FileProblem, PrefixInfo

SCHEMA = "envguard.check/1"
FilesMode = str  # "none" | "size" | "sha256"


@dataclass
class CheckReport:
    prefix: Path
    platform: str
    kind: str  # "conda", "venv" or "other"
    python_version: str | None
    lock_file: str | None
    findings: list[Finding]
    packages: list[Package]
    files_mode: FilesMode = "none"
    file_problems: list[FileProblem] = field(default_factory=list)
    torch: TorchBuild | None = None
    gpu: GpuFacts | None = None
    import_origins: dict[str, Any] | None = None
    smoke: dict[str, Any] | None = None  # {"exit_code", "timed_out", "findings": n}
    smoke_exit: int = 0
    strict: bool = False
    target_why: str = ""  # why this environment was checked (envguard.envs.Target.why)
    host: str = ""  # the machine that ran the check: fleet's node name
    lock_sha256: str | None = None  # of the lock file's bytes: fleet tells nodes on different locks apart
    distributed: dict[str, Any] | None = None  # this rank's multi-node smoke result (check --distributed)
    lock_why: str = ""  # why this lock judges this environment (envguard.envs.lock_for)
    node: dict[str, Any] | None = None  # Slurm node, job and rank (envguard.check.node); with host: fleet's identity

    @property
    def exit_code(self) -> int:
        """3 integrity > the smoke test itself failed (7) or timed out (124) > 1 findings > 0. Info notes never
        fail; what the smoke test found out (a CPU build where CUDA is wanted) is a finding like any other."""
        if any(f.code in INTEGRITY_CODES for f in self.findings):
            return int(ExitCode.INTEGRITY)
        if self.smoke_exit:
            return int(self.smoke_exit)
        if any(f.severity is Severity.ERROR for f in self.findings):
            return int(ExitCode.PROBLEMS)
        if self.strict and any(f.severity is Severity.WARNING for f in self.findings):
            return int(ExitCode.PROBLEMS)
        return int(ExitCode.OK)

    def to_json(self) -> dict[str, Any]:
        """The versioned report (docs/check-schema.md). URLs are redacted."""
        from envguard import __version__
        from envguard.redact import redact
        from envguard.report import findings_to_json

        fs = sort_findings(self.findings)
        return {
            "schema": SCHEMA,
            "envguard_version": __version__,
            "prefix": redact(str(self.prefix)),
            "target": self.target_why or None,
            "platform": self.platform,
            "kind": self.kind,
            "python": self.python_version,
            "lockfile": redact(self.lock_file) if self.lock_file else None,
            "exit_code": self.exit_code,
            "summary": {
                "errors": sum(f.severity is Severity.ERROR for f in fs),
                "warnings": sum(f.severity is Severity.WARNING for f in fs),
                "info": sum(f.severity is Severity.INFO for f in fs),
            },
            "counts": {"errors": sum(f.severity is Severity.ERROR for f in fs),
                       "warnings": sum(f.severity is Severity.WARNING for f in fs),
                       "info": sum(f.severity is Severity.INFO for f in fs),
                       "packages": len(self.packages), "file_problems": len(self.file_problems),
                       "smoke_checks_passed": sum(c.get("status") == "pass"
                                                  for c in (self.smoke or {}).get("checks", []))},
            "findings": findings_to_json(fs),
            "files": {
                "mode": self.files_mode,
                "problems": [{"path": p.path, "package": p.package, "problem": p.problem,
                              "expected": p.expected or None, "actual": p.actual or None}
                             for p in self.file_problems],
            },
            "torch": self.torch.to_dict() if self.torch and self.torch.source != "none" else None,
            "gpu": ({"driver_version": self.gpu.driver_version,
                     "gpus": [{"name": n, "capability": c} for n, c in self.gpu.gpus]} if self.gpu else None),
            "import_origins": {k: v for k, v in (self.import_origins or {}).items() if not k.startswith("_")}
            or None,
            "smoke": self.smoke,
            "host": self.host,
            "lock_sha256": self.lock_sha256,
            "distributed": self.distributed,
            "node": self.node,
            "packages": [_redacted(p.to_dict()) for p in self.packages],
        }


def _redacted(d: dict[str, Any]) -> dict[str, Any]:
    from envguard.redact import redact

    return {k: (redact(v) if isinstance(v, str) and k in ("url", "channel") else v) for k, v in d.items()}


# --------------------------------------------------------------------------- facts


def half_built_reason(prefix: Path) -> str | None:
    """Why ``prefix`` looks like the remains of an interrupted create, or None.

    The staging/building/old names and their meaning are envguard.leftovers' (envguard.leftovers.interruption);
    on top of those, a prefix whose conda-meta holds no records although it holds files is half-built (a
    transaction interrupted before it wrote them). Raises BusyError while the creating process lives.
    """
    from envguard.errors import BusyError

    prefix = Path(os.path.abspath(prefix))
    found = interruption(prefix)
    if found is not None:
        if found.running:
            raise BusyError(f"{prefix}: {found.reason}; check it when it is done")
        return found.reason
    meta = prefix / "conda-meta"
    if meta.is_dir():
        try:
            names = os.listdir(meta)
        except OSError:
            return None
        has_records = any(n.endswith(".json") and not n.startswith("envguard-") for n in names)
        populated = any((prefix / d).exists() for d in ("bin", "lib", "Lib", "include", "share"))
        if not has_records and populated:
            return "conda-meta holds no package records but the prefix holds files (an interrupted install)"
    return None


def _moved_aside(prefix: Path) -> bool:
    """Whether the environment missing at ``prefix`` was moved aside by an interrupted create (EG534)."""
    found = interruption(prefix)
    return found is not None and found.tag == OLD_TAG


def _lock_packages(lockfile: Path, platform: str) -> tuple[list[Package] | None, list[Finding]]:
    from envguard import sources

    try:
        desc = sources.load(str(lockfile), platform=platform)
    except PlatformNotLocked as e:
        return None, [Finding("EG513", Severity.ERROR, e.message, _relock_for(lockfile, platform),
                              file=str(lockfile))]
    from envguard import lockwhole  # EG518: a lock that is not whole, on any platform (lint's EG159, exit 3)

    holes = lockwhole.of_file(str(lockfile), desc)
    return desc.packages_for(platform), [Finding("EG518", Severity.ERROR, f"the lock is not whole: "
                                                 f"{lockwhole.summary(holes)}", lockwhole.FIX,
                                                 file=str(lockfile))] if holes else []


def _recorded_lock_findings(choice: Any, target: Path) -> list[Finding]:
    """EG517: the lock envguard built the environment from changed since (info: it still judges the
    environment, as it is now) or is gone (warning: the fingerprint alone judges it; no other lock does)."""
    if not choice.problem:
        return []
    from envguard.check.checks import create_command

    if choice.path is not None:
        return [Finding("EG517", Severity.INFO, choice.problem,
                        f"`{create_command(target, str(choice.recorded))}` rebuilds it from that lock where it "
                        "differs and records the lock as it is now", file=str(choice.recorded))]
    return [Finding("EG517", Severity.WARNING, choice.problem,
                    "restore that lock, or name the lock to judge the environment by with --lockfile (and "
                    "rebuild it from that one with envguard create and the same --lockfile)",
                    file=str(choice.recorded))]


def _stale_lock(lock_path: Path, platform: str, target: Path) -> tuple[str | None, str, bool]:
    """(why the lock is stale for the environment file(s) it was made from, the fix, whether the lock does not
    come from them at all), or (None, "", False) when it is fresh or its spec is not here. The verdict is
    `envguard lock --check`'s, for this platform only. An environment built from this lock with --frozen
    (create checked it against no spec: a colleague's lock) is not called stale: nothing says the lock was
    ever made from the environment file beside it."""
    from envguard.errors import EnvguardError
    from envguard.lock import check_fresh, read_lock

    try:
        sources = [lock_path.parent / s for s in read_lock(lock_path).sources]
    except EnvguardError:
        return None, "", False  # a lock this broken gives its own findings
    if not sources:
        sources = [lock_path.parent / "environment.yml"]
    if not all(s.is_file() for s in sources):
        return None, "", False
    try:
        fresh = check_fresh(sources, lock_path, platforms=[platform])
    except EnvguardError:
        return None, "", False  # a spec that cannot be read: lint says why, with line and column
    if fresh.fresh or fresh.missing:
        return None, "", False
    import shlex

    from envguard.check.checks import create_command
    from envguard.lock import relock_command

    relock = relock_command(sources, lock_path)  # for the platforms it covers, not this machine's alone
    own_spec = shlex.join(["envguard", "create", "-p", str(target), *[a for s in sources for a in ("-f", str(s))]])
    if _built_frozen_from(target, lock_path):
        spec = " and ".join(str(s) for s in sources)
        return (f"{lock_path} does not come from {spec} (its content hash for {platform} is another spec's): the "
                "environment was built from it with --frozen, as written, without reading the environment file",
                f"keep that lock beside the environment file it was made from; to build this project's spec "
                f"instead: `{own_spec}`", True)

    if os.path.abspath(sources[0].parent / "conda-lock.yml") == os.path.abspath(lock_path):
        # the spec's own default lock: create re-locks it when it is read through -f (never a --lockfile one)
        fix = f"`{own_spec}` re-locks it, then rebuilds the environment; or only re-lock: `{relock}`"
    else:
        fix = (f"re-lock it on purpose with `{relock}`, then rebuild the environment with "
               f"`{create_command(target, str(lock_path))}`")
    return fresh.reason, fix, False


def _built_frozen_from(target: Path, lock_path: Path) -> bool:
    """Whether `envguard create --frozen` built ``target`` from ``lock_path``: its last block in
    conda-meta/history names that lock and records no spec (create recorded none, having read none)."""
    from envguard.history import read_built

    built = read_built(target)
    return (built is not None and built.conda_specs is None and built.lockfile is not None
            and os.path.realpath(built.lockfile) == os.path.realpath(lock_path))


def _relock_for(lockfile: Path, platform: str) -> str:
    """The fix of a lock without this platform: re-lock its environment file(s) for its platforms and this one
    (an environment file's own `platforms:` then needs it too)."""
    from envguard.errors import EnvguardError
    from envguard.lock import fix_command, read_lock

    try:
        lock = read_lock(lockfile)
    except EnvguardError:
        import shlex

        relock = shlex.join(["envguard", "lock", "--platform", platform, "--lockfile", str(lockfile)])
        return f"re-lock for {platform}: `{relock}`"
    sources = [lockfile.parent / s for s in lock.sources] or [lockfile.parent / "environment.yml"]
    cmd = fix_command(sources, lockfile, [*[p for p in lock.platforms if p != platform], platform])
    return f"re-lock for {platform} as well (and add it to `platforms:` of the environment file if it has one): `{cmd}`"


def _spec_wants_cuda(spec_file: Path, platform: str) -> tuple[str | None, str]:
    from envguard.check.checks import cuda_from_spec
    from envguard.errors import EnvguardError
    from envguard.lock import read_spec

    try:
        spec = read_spec([spec_file], [platform])
    except EnvguardError:
        return None, ""  # lint reports a broken spec; check judges the installed env
    conda, pip = spec.dependencies_for(platform)
    return cuda_from_spec(conda, pip, str(spec_file))


def _library_path_libs(env: Mapping[str, str], prefix: Path) -> list[tuple[str, list[str]]]:
    out: list[tuple[str, list[str]]] = []
    inside = str(prefix).rstrip("/") + "/"
    for d in (env.get("LD_LIBRARY_PATH") or "").split(os.pathsep):
        if not d or (d.rstrip("/") + "/").startswith(inside):
            continue
        try:
            names = os.listdir(d)
        except OSError:
            continue
        libs = sorted({n.split(".so")[0] for n in names if n.startswith(("libcudnn", "libnccl")) and ".so" in n})
        if libs:
            out.append((d, libs))
    return out


def _default_driver_info() -> Any:
    from envguard.driver import get_driver_info  # lazily: only a CUDA build needs the driver

    return get_driver_info()


def _smoke_checks(probe: Mapping[str, Any]) -> list[dict[str, Any]]:
    """What the smoke probe ran and how each check ended, for the report: name, status, seconds, reason."""
    out = []
    for c in probe.get("checks") or []:
        if not isinstance(c, Mapping) or not isinstance(c.get("name"), str):
            continue
        detail: Mapping[str, Any] = c["detail"] if isinstance(c.get("detail"), Mapping) else {}
        out.append({"name": c["name"], "status": str(c.get("status")),
                    "seconds": c.get("seconds") if isinstance(c.get("seconds"), (int, float)) else None,
                    "reason": str(detail.get("reason") or c.get("error") or "") or None})
    return out


def _run_smoke(python: str, timeout: float, require_cuda: bool, driver_raw: Any, driver_checked: bool,
               progress: Callable[[str], None] | None = None, distributed: bool = False,
               only_distributed: bool = False, env: dict[str, str] | None = None
               ) -> tuple[list[Finding], dict[str, Any] | None, dict[str, Any], int]:
    """(findings, torch facts from the probe, smoke summary, exit code to propagate: 7 or 124 only when the
    smoke test itself failed or timed out, see envguard.smoke.SmokeResult.failed)."""
    from envguard.smoke import run_smoke

    # The driver was queried once already (or deliberately not): hand the smoke test the same answer.
    res = run_smoke(python, quick=True, timeout=timeout, require_cuda=require_cuda, distributed=distributed,
                    only_distributed=only_distributed, env=env,
                    driver_info=(lambda: driver_raw) if driver_checked else (lambda: None), progress=progress)
    probe = res.probe or {}
    torch_facts = dict(probe["torch"]) if isinstance(probe.get("torch"), Mapping) else None
    reported = probe.get("cuda")
    cuda = reported if isinstance(reported, Mapping) else {}
    if torch_facts is not None and cuda.get("arch_list"):
        torch_facts["arch_list"] = list(cuda["arch_list"])
    from envguard.smoke import distributed_summary

    code = int(ExitCode.SMOKE_TIMEOUT) if res.timed_out else int(ExitCode.SMOKE_FAILED) if res.failed else 0
    summary = {"exit_code": code, "timed_out": bool(res.timed_out), "findings": len(res.findings),
               "duration_s": round(res.duration, 2), "checks": _smoke_checks(probe),
               "distributed": distributed_summary(res.probe)}
    return list(res.findings), torch_facts, summary, code


# A static rule and a smoke finding can report one problem twice: the smoke test names it by its
# failure-catalogue id. Keep the more severe of the two (the static one on a tie: it names the lock).
_SAME_CASE = {"EG550": "cpu-build", "EG551": "driver-old", "EG552": "arch", "EG553": "no-driver",
              "EG543": "mkl-symbol", "EG561": "omp-dup"}


def _merge(static: list[Finding], smoke: list[Finding]) -> list[Finding]:
    by_case = {f.code: f for f in smoke}
    drop_smoke: set[int] = set()
    out: list[Finding] = []
    for f in static:
        twin = by_case.get(_SAME_CASE.get(f.code, ""))
        if twin is not None and twin.severity.rank < f.severity.rank:
            continue  # the smoke test's finding is more severe: it stays, this one goes
        if twin is not None:
            drop_smoke.add(id(twin))
        out.append(f)
    return out + [f for f in smoke if id(f) not in drop_smoke]


# envguard.mixing's rules on the installed records: the same rules lint applies to every file kind.
MIXING_CODES = {"channels": "EG570", "openmp": "EG571", "cuda-lines": "EG572", "torch-twice": "EG573"}


def mixing_findings(installed: Sequence[Package], already: Sequence[Finding] = ()) -> list[Finding]:
    """Channel, CUDA-line and torch-twice mixing in a live prefix. torch twice is left to the pip-over-conda
    rules (EG520/EG521/EG523) when they already name torch: they know which copy `import torch` resolves to."""
    from envguard.mixing import mixing

    torch_named = any(f.code in ("EG520", "EG521", "EG523") and f.severity is not Severity.INFO
                      and (f.package or "").lower() in ("torch", "pytorch") for f in already)
    out: list[Finding] = []
    for m in mixing(installed, context="prefix"):
        if m.rule == "torch-twice" and torch_named:
            continue
        out.append(Finding(MIXING_CODES[m.rule], Severity(m.severity), m.message, m.fix, package=m.package))
    return out


# --------------------------------------------------------------------------- the command


def run_check(options: CheckOptions) -> CheckReport:
    """Check one environment (what to check and how: CheckOptions). Raises UserError for bad input;
    everything else is a finding. With neither ``smoke`` nor ``imports`` no process is started. Which
    environment: envguard.envs.resolve_target (``-p``, ``-n``, the active conda environment, the one
    ``environment.yml`` names; never envguard's own); ``progress`` follows envguard.smoke.run_smoke.
    """
    o = options
    prefix, name, lockfile, files, deep, smoke = o.prefix, o.name, o.lockfile, o.files, o.deep, o.smoke
    imports, env, driver_info_fn, core, strict = o.imports, o.env, o.driver_info_fn, o.core, o.strict
    smoke_timeout, cwd, workers, progress, distributed = o.smoke_timeout, o.cwd, o.workers, o.progress, o.distributed
    from envguard.check import checks
    from envguard.platforms import host_platform, python_in_prefix
    from envguard.prefix import inspect_prefix, verify_files

    env = dict(os.environ) if env is None else env
    from envguard.envs import NoTargetError, resolve_target

    cwd = cwd or Path.cwd()
    from envguard.envs import lock_for
    from envguard.filekind import require_lock

    if lockfile is not None:
        require_lock(Path(lockfile))  # an environment file or a report read as a lock would be a lock of nothing
    target = resolve_target(prefix, name, env=env, cwd=cwd, aside=_moved_aside)
    choice = lock_for(target, lockfile, cwd=cwd, env=env)
    lock_path, lock_why = choice.path, choice.why
    if lock_path is not None and lockfile is None:
        require_lock(lock_path)
    platform = host_platform()
    if not target.is_dir():
        moved = half_built_reason(target) if not target.exists() else None
        if moved:  # moved aside by an interrupted `create --force`: say where it is (EG534)
            finding = Finding("EG534", Severity.ERROR, f"no environment at {target}: {moved}",
                              f"run `{checks.create_command(target, str(lock_path) if lock_path else None)}` again: it "
                              "puts the previous environment back", file=str(target))
            return CheckReport(prefix=target, platform=platform, kind="other", python_version=None,
                               lock_file=str(lock_path) if lock_path else None, findings=[finding], packages=[],
                               strict=strict, target_why=target.why)
        raise NoTargetError(f"no environment at {target} ({target.why})", key="-p",
                            fix="pass an existing prefix with -p or a name with -n, or build it with `envguard create`")
    info: PrefixInfo = inspect_prefix(target)
    if not info.is_conda and not info.is_venv and not os.path.exists(python_in_prefix(target)) \
            and half_built_reason(target) is None:
        # smoke, export and diff refuse such a directory too: a clean report of it would be a false pass
        raise UserError("not an environment (no conda-meta/, pyvenv.cfg or Python interpreter)", file=str(target),
                        key="-p/-n", fix="pass the root directory of a conda environment or virtualenv")

    findings: list[Finding] = _recorded_lock_findings(choice, target)
    lock_pkgs: list[Package] | None = None
    changes: list[Any] | None = None
    installed = info.packages(platform)
    if lock_path is not None:
        lock_pkgs, lock_findings = _lock_packages(lock_path, platform)
        findings += lock_findings
        if lock_pkgs is not None:
            from envguard.diff import diff_packages

            changes = diff_packages(lock_pkgs, installed)

    wants, wants_src = checks.cuda_from_packages(lock_pkgs or [])
    from envguard.project import project_dir

    spec_file = (lock_path.parent if lock_path else project_dir(cwd)) / "environment.yml"
    if wants:
        wants_src = f"the lock ({wants_src})"
    elif spec_file.is_file():
        wants, wants_src = _spec_wants_cuda(spec_file, platform)
    stale, stale_fix, not_from_spec = (_stale_lock(lock_path, platform, target)
                                       if lock_pkgs is not None and lock_path is not None and options.spec_freshness
                                       else (None, "", False))

    mode = "sha256" if deep else ("size" if files else "none")
    problems = verify_files(info, deep=deep, workers=workers) if (files or deep) and info.is_conda else []
    if (files or deep) and not info.is_conda:
        findings.append(Finding("EG503", Severity.INFO, "no conda-meta: --files/--deep have no records to verify "
                                "against", ""))

    # The driver matters only to a CUDA build (or an env that should be one): skip the query otherwise.
    static_build = checks.torch_build(info)
    driver_checked = bool(wants) or (static_build.source != "none" and not static_build.cpu)
    driver_fn = driver_info_fn or _default_driver_info
    driver_raw = driver_fn() if driver_checked else None
    gpu = checks.gpu_facts(driver_raw)
    half_built = half_built_reason(target)

    python = python_in_prefix(target)
    origins: dict[str, Any] | None = None
    probe: dict[str, Any] | None = None
    smoke_summary: dict[str, Any] | None = None
    dist_result: dict[str, Any] | None = None
    smoke_findings: list[Finding] = []
    smoke_exit = 0
    imports = (smoke or distributed) if imports is None else imports
    act: Any = None  # envguard.check.activated.Activated: the environment the probes ran in
    if half_built:
        pass  # running code from a half-built prefix proves nothing
    elif (smoke or imports) and not os.path.exists(python):
        findings.append(Finding("EG504", Severity.WARNING, f"no interpreter at {python}: smoke test and import "
                                "checks skipped", "check the prefix, or pass --no-smoke"))
    elif smoke or imports:
        from envguard.check.activated import activate, run_probes

        act = activate(target, options.env)  # the probes see what a job started by `envguard run` sees

        def smoke_in(in_env: dict[str, str] | None, shown: bool) -> tuple[list[Finding], Any, Any, int]:
            return _run_smoke(python, smoke_timeout, bool(wants), driver_raw, driver_checked,
                              progress if shown else None, distributed, not smoke, env=in_env)

        origins, probe_findings, ran = run_probes(python, act, smoke_in if smoke or distributed else None)
        findings += probe_findings
        if ran is not None:
            smoke_findings, probe, smoke_summary, smoke_exit = ran
            dist_result = smoke_summary.pop("distributed")
            smoke_summary = smoke_summary if smoke else None  # --no-smoke --distributed: only the distributed part

    fp_conda: dict[str, str] | None = None
    fp_pip: list[str] | None = None
    fp_lock: str | None = None
    if info.is_conda and changes is None:
        fp = read_fingerprint(target)
        if fp is not None:
            fp_conda, fp_pip = dict(fp.conda), list(fp.pip)
            fp_lock = fp.lockfile if fp.lockfile and os.path.isfile(fp.lockfile) else None

    inp = CheckInput(
        info=info, platform=platform, lock_file=str(lock_path) if lock_path else None, lock_packages=lock_pkgs,
        lock_changes=changes, wants_cuda=wants, wants_cuda_source=wants_src, gpu=gpu,
        driver_checked=driver_checked, env=env,
        library_path_libs=_library_path_libs(act.env if act is not None and act.env is not None else env, target),
        import_origins=origins, probe=probe, file_problems=problems, files_mode=mode,
        half_built=half_built, core=tuple(core) if core else DEFAULT_CORE,
        fingerprint_conda=fp_conda, fingerprint_pip=fp_pip, fingerprint_lockfile=fp_lock,
        stale_lock=stale, stale_lock_fix=stale_fix, lock_not_from_spec=not_from_spec,
    )
    from envguard.catalog import aim_findings

    static = findings + checks.evaluate(inp)
    if act is not None:  # a foreign library activation put on LD_LIBRARY_PATH: said with the script
        from envguard.check.activated import blame_library_path

        static = blame_library_path(static, act)
    static += mixing_findings(installed, static)
    findings = aim_findings(_merge(static, smoke_findings), target)
    kind = "conda" if info.is_conda else ("venv" if info.is_venv else "other")
    return CheckReport(
        prefix=target, platform=platform, kind=kind, python_version=info.python_version,
        lock_file=str(lock_path) if lock_path else None, findings=sort_findings(findings), packages=installed,
        files_mode=mode, file_problems=problems, torch=checks.torch_build(info, probe), gpu=gpu,
        import_origins=origins, smoke=smoke_summary, smoke_exit=smoke_exit, strict=strict,
        target_why=target.why, host=_hostname(), lock_sha256=_sha256(lock_path) if lock_path else None,
        distributed=dist_result, lock_why=lock_why, node=node_identity(),
    )


def _hostname() -> str:
    import socket

    return socket.gethostname()


def _sha256(path: Path) -> str | None:
    import hashlib

    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


# --------------------------------------------------------------------------- for envguard export


def prefix_findings(info: PrefixInfo, *, file_problems: list[FileProblem] | None = None,
                    core: Sequence[str] | None = None) -> list[Finding]:
    """check's rules that need nothing but the prefix's own records: unreadable records, files changed
    since install (``file_problems`` from envguard.prefix.verify_files) and pip over conda. envguard export
    names what cannot be reproduced with them, so both commands say it alike."""
    from envguard.check import checks
    from envguard.platforms import host_platform

    inp = CheckInput(info=info, platform=host_platform(), file_problems=file_problems,
                     files_mode="none" if file_problems is None else "sha256",
                     core=tuple(core) if core else DEFAULT_CORE)
    return [f for rule in (checks.rule_integrity, checks.rule_files, checks.rule_pip_over_conda) for f in rule(inp)]


def installed_torch(info: PrefixInfo) -> TorchBuild:
    """The torch build a prefix holds, from its records and dists (no process is run)."""
    from envguard.check.checks import torch_build

    return torch_build(info)
