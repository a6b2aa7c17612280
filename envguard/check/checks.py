"""The rules of ``envguard check``. Pure: facts in, findings out; no I/O, no processes.

:mod:`envguard.check` gathers the facts (prefix inspection, lock, driver, probe
results) into a :class:`CheckInput`; :func:`evaluate` applies every rule. Each
rule has a stable code (EG5xx, documented in docs/check-schema.md), a
severity, a message and a fix.

The rules live by family: integrity_rules.py (records, files, lock, fingerprint), pip_rules.py (pip over
conda, import origins), cuda_rules.py (torch's CUDA build, driver, GPU), policy_rules.py (Python, channels,
environment variables, what was skipped), mixing_rules.py (channels, OpenMP, CUDA lines, torch twice, after
the others); the facts they judge in facts.py (gathered by gather.py and probes.py), fix wording in fixes.py.
"""

from __future__ import annotations

from envguard.check.cuda_rules import arch_supported, rule_cuda
from envguard.check.facts import (
    DEFAULT_CORE,
    CheckInput,
    GpuFacts,
    TorchBuild,
    cuda_from_build,
    cuda_from_packages,
    cuda_from_spec,
    gpu_facts,
    is_core,
    torch_build,
)
from envguard.check.fixes import create_command
from envguard.check.integrity_rules import (
    INTEGRITY_CODES,
    MAX_FILES_PER_FINDING,
    rule_files,
    rule_fingerprint,
    rule_integrity,
    rule_lock,
    rule_lock_file,
    rule_recorded_lock,
    rule_stale_lock,
)
from envguard.check.mixing_rules import rule_mixing
from envguard.check.pip_rules import rule_import_origins, rule_pip_over_conda
from envguard.check.policy_rules import rule_channels, rule_environment, rule_python, rule_skipped
from envguard.check.variant_rules import rule_variant
from envguard.findings import Finding

RULES = (rule_recorded_lock, rule_lock_file, rule_integrity, rule_files, rule_lock, rule_stale_lock,
         rule_fingerprint, rule_pip_over_conda, rule_import_origins, rule_python, rule_channels, rule_cuda,
         rule_environment, rule_skipped, rule_variant)


def evaluate(inp: CheckInput) -> list[Finding]:
    out: list[Finding] = []
    for rule in RULES:
        out.extend(rule(inp))
    out += rule_mixing(inp, out)  # after the others: torch twice is theirs when pip-over-conda named it
    from envguard.catalog import aim_findings  # every envguard command in a fix names the checked environment

    return aim_findings(out, inp.info.prefix)


__all__ = [
    "DEFAULT_CORE", "INTEGRITY_CODES", "MAX_FILES_PER_FINDING", "RULES", "CheckInput", "GpuFacts", "TorchBuild",
    "arch_supported", "create_command", "cuda_from_build", "cuda_from_packages", "cuda_from_spec", "evaluate",
    "gpu_facts", "is_core", "rule_channels", "rule_cuda", "rule_environment", "rule_files", "rule_fingerprint",
    "rule_import_origins", "rule_integrity", "rule_lock", "rule_lock_file", "rule_mixing", "rule_pip_over_conda",
    "rule_python", "rule_recorded_lock", "rule_skipped", "rule_stale_lock", "torch_build",
]
