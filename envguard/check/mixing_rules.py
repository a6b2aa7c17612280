"""Mixing in a live prefix (EG570-EG573): envguard.mixing's rules on the installed records, the same rules
lint applies to every file kind; envguard export applies them too."""

from __future__ import annotations

from collections.abc import Sequence

from envguard.check.facts import CheckInput
from envguard.findings import Finding, Severity
from envguard.model import Package

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


def rule_mixing(inp: CheckInput, already: Sequence[Finding] = ()) -> list[Finding]:
    """:func:`mixing_findings` of the checked prefix, after the other rules' ``already``."""
    installed = inp.installed if inp.installed is not None else inp.info.packages(inp.platform)
    return mixing_findings(installed, already)
