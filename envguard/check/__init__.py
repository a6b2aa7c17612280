"""``envguard check``: verify an installed environment against its lock, its policy and its hardware.

Orchestration only: gather facts (gather.py: prefix inspection, lock, spec, driver; probes.py: the
smoke probe, import origins), hand them to the pure rule families in
:mod:`envguard.check.checks`, and return a :class:`CheckReport`. Nothing is written
into the checked prefix. Imports stay lazy: check is the command people run
first and most often (bench/check.py measures its start-up).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envguard.check.checks import DEFAULT_CORE, INTEGRITY_CODES, CheckInput, GpuFacts, TorchBuild
from envguard.check.hook import watched_changed as watched_changed  # public: the envguard-check git hook's trigger
from envguard.check.hook import watched_files as watched_files  # public: what that trigger watches (#37 variants)
from envguard.check.mixing_rules import MIXING_CODES as MIXING_CODES  # public: export applies the mixing rules
from envguard.check.mixing_rules import mixing_findings as mixing_findings
from envguard.check.node import node_identity
from envguard.check.options import CheckOptions
from envguard.errors import ExitCode
from envguard.findings import Finding, Severity, sort_findings
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
    variant: dict[str, Any] | None = None  # the declared variant it was built from (variant_rules.VariantFacts)

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
            "variant": self.variant,
            "packages": [_redacted(p.to_dict()) for p in self.packages],
        }


def _redacted(d: dict[str, Any]) -> dict[str, Any]:
    from envguard.redact import redact

    return {k: (redact(v) if isinstance(v, str) and k in ("url", "channel") else v) for k, v in d.items()}


# --------------------------------------------------------------------------- the command


def run_check(options: CheckOptions) -> CheckReport:
    """Check one environment (what to check and how: CheckOptions). Raises UserError for bad input;
    everything else is a finding. With neither ``smoke`` nor ``imports`` no process is started. Which
    environment: envguard.envs.resolve_target (``-p``, ``-n``, the active conda environment, the one
    ``environment.yml`` names; never envguard's own); ``progress`` follows envguard.smoke.run_smoke.

    Coordination only: gather the facts (gather.py), run the probes (probes.py), apply the rule families
    (checks.evaluate), merge the smoke test's findings; every finding is a rule family's.
    """
    from envguard.catalog import aim_findings
    from envguard.check import gather, probes
    from envguard.check.checks import evaluate, torch_build
    from envguard.check.integrity_rules import moved_aside
    from envguard.envs import NoTargetError
    from envguard.platforms import host_platform

    o = options
    env = dict(os.environ) if o.env is None else o.env
    cwd = o.cwd or Path.cwd()
    target, choice = gather.target_and_lock(o, env, cwd)
    lock_path, platform = choice.path, host_platform()
    lock_file = str(lock_path) if lock_path else None
    if not target.is_dir():
        moved = gather.half_built_reason(target) if not target.exists() else None
        if moved:  # moved aside by an interrupted `create --force`: say where it is (EG534)
            return CheckReport(prefix=target, platform=platform, kind="other", python_version=None,
                               lock_file=lock_file, findings=[moved_aside(target, lock_file, moved)], packages=[],
                               strict=o.strict, target_why=target.why)
        raise NoTargetError(f"no environment at {target} ({target.why})", key="-p",
                            fix="pass an existing prefix with -p or a name with -n, or build it with `envguard create`")
    info = gather.inspect(target)
    inp, driver_raw = gather.facts(o, target, info, choice, platform, env, cwd)
    from envguard.check.variant_rules import variant_facts

    inp.variant = variant_facts(target, lock_path, driver_raw, inp.driver_checked,
                                o.driver_info_fn or gather.default_driver_info, env)
    ran = probes.run(o, inp, driver_raw)
    inp.library_path_libs = gather.library_path_libs(
        ran.act.env if ran.act is not None and ran.act.env is not None else env, target)
    static = ran.findings + evaluate(inp)
    if ran.act is not None:  # a foreign library activation put on LD_LIBRARY_PATH: said with the script
        from envguard.check.activated import blame_library_path

        static = blame_library_path(static, ran.act)
    findings = aim_findings(probes.merge(static, ran.smoke_findings), target)
    kind = "conda" if info.is_conda else ("venv" if info.is_venv else "other")
    return CheckReport(
        prefix=target, platform=platform, kind=kind, python_version=info.python_version, lock_file=lock_file,
        findings=sort_findings(findings), packages=inp.installed or [], files_mode=inp.files_mode,
        file_problems=inp.file_problems or [], torch=torch_build(info, inp.probe), gpu=inp.gpu,
        import_origins=dict(inp.import_origins) if inp.import_origins is not None else None, smoke=ran.summary,
        smoke_exit=ran.exit, strict=o.strict, target_why=target.why, host=gather.hostname(),
        lock_sha256=(gather.given_lock(o, lock_path)[1] or gather.sha256_of(lock_path)) if lock_path else None,
        distributed=ran.distributed,
        lock_why=choice.why, node=node_identity(), variant=inp.variant.to_dict() if inp.variant else None,
    )


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
