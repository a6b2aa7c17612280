"""check's runs in the environment's own interpreter: the import check and the smoke probe, activated as
`envguard run` activates it (envguard.check.activated), and how the smoke test's findings join the static
rules' (one problem said once)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from envguard.check.facts import CheckInput
from envguard.check.options import CheckOptions
from envguard.errors import ExitCode
from envguard.findings import Finding


@dataclass
class ProbeRun:
    """What the probes gave: ``findings`` about the runs themselves (EG505, EG506), the smoke test's own
    ``smoke_findings``, its report ``summary`` (None: not asked for), the exit code it propagates (7, 124 or
    0), this rank's ``distributed`` result, and the activated environment (envguard.check.activated)."""

    findings: list[Finding] = field(default_factory=list)
    smoke_findings: list[Finding] = field(default_factory=list)
    summary: dict[str, Any] | None = None
    exit: int = 0
    distributed: dict[str, Any] | None = None
    act: Any = None


def run(o: CheckOptions, inp: CheckInput, driver_raw: Any) -> ProbeRun:
    """Run what ``o`` asks for in the checked environment and put what the rules judge into ``inp``
    (import origins, the probe's torch, a missing interpreter). Nothing runs in a half-built prefix."""
    from envguard.platforms import python_in_prefix

    out = ProbeRun()
    python = python_in_prefix(inp.info.prefix)
    smoke = o.smoke
    imports = (smoke or o.distributed) if o.imports is None else o.imports
    if inp.half_built or not (smoke or imports):
        return out  # running code from a half-built prefix proves nothing
    if not os.path.exists(python):
        inp.no_interpreter = python  # EG504
        return out
    from envguard.check.activated import activate, run_probes

    out.act = activate(inp.info.prefix, o.env)  # the probes see what a job started by `envguard run` sees

    def smoke_in(in_env: dict[str, str] | None, shown: bool) -> tuple[list[Finding], Any, Any, int]:
        return run_smoke(python, o.smoke_timeout, bool(inp.wants_cuda), driver_raw, inp.driver_checked,
                         o.progress if shown else None, o.distributed, not smoke, env=in_env)

    inp.import_origins, out.findings, ran = run_probes(python, out.act, smoke_in if smoke or o.distributed else None)
    if ran is not None:
        out.smoke_findings, inp.probe, summary, out.exit = ran
        out.distributed = summary.pop("distributed")
        out.summary = summary if smoke else None  # --no-smoke --distributed: only the distributed part
    return out


def smoke_checks(probe: Mapping[str, Any]) -> list[dict[str, Any]]:
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


def run_smoke(python: str, timeout: float, require_cuda: bool, driver_raw: Any, driver_checked: bool,
              progress: Callable[[str], None] | None = None, distributed: bool = False,
              only_distributed: bool = False, env: dict[str, str] | None = None
              ) -> tuple[list[Finding], dict[str, Any] | None, dict[str, Any], int]:
    """(findings, torch facts from the probe, smoke summary, exit code to propagate: 7 or 124 only when the
    smoke test itself failed or timed out, see envguard.smoke.SmokeResult.failed)."""
    from envguard.smoke import distributed_summary
    from envguard.smoke import run_smoke as smoke_run

    # The driver was queried once already (or deliberately not): hand the smoke test the same answer.
    res = smoke_run(python, quick=True, timeout=timeout, require_cuda=require_cuda, distributed=distributed,
                    only_distributed=only_distributed, env=env,
                    driver_info=(lambda: driver_raw) if driver_checked else (lambda: None), progress=progress)
    probe = res.probe or {}
    torch_facts = dict(probe["torch"]) if isinstance(probe.get("torch"), Mapping) else None
    reported = probe.get("cuda")
    cuda = reported if isinstance(reported, Mapping) else {}
    if torch_facts is not None and cuda.get("arch_list"):
        torch_facts["arch_list"] = list(cuda["arch_list"])
    code = int(ExitCode.SMOKE_TIMEOUT) if res.timed_out else int(ExitCode.SMOKE_FAILED) if res.failed else 0
    summary = {"exit_code": code, "timed_out": bool(res.timed_out), "findings": len(res.findings),
               "duration_s": round(res.duration, 2), "checks": smoke_checks(probe),
               "distributed": distributed_summary(res.probe)}
    return list(res.findings), torch_facts, summary, code


# A static rule and a smoke finding can report one problem twice: the smoke test names it by its
# failure-catalogue id. Keep the more severe of the two (the static one on a tie: it names the lock).
SAME_CASE = {"EG550": "cpu-build", "EG551": "driver-old", "EG552": "arch", "EG553": "no-driver",
             "EG543": "mkl-symbol", "EG561": "omp-dup"}


def merge(static: list[Finding], smoke: list[Finding]) -> list[Finding]:
    """The static findings and the smoke test's, each problem once (SAME_CASE)."""
    by_case = {f.code: f for f in smoke}
    drop_smoke: set[int] = set()
    out: list[Finding] = []
    for f in static:
        twin = by_case.get(SAME_CASE.get(f.code, ""))
        if twin is not None and twin.severity.rank < f.severity.rank:
            continue  # the smoke test's finding is more severe: it stays, this one goes
        if twin is not None:
            drop_smoke.add(id(twin))
        out.append(f)
    return out + [f for f in smoke if id(f) not in drop_smoke]
