"""Compare two environment descriptions in terms a reviewer cares about. Pure: no I/O.

:func:`diff_packages` pairs packages by their normalised key (``pytorch`` and
``torch`` are one package) and classifies each difference; a change can carry
several classes at once (a pytorch that moved from 2.1.2 cuda120 to 2.1.2
cpu_generic is *rebuilt* and a *CPU↔CUDA flip*). :func:`spec_vs_lock` checks
an environment file's requested specs against locked packages. Core packages
(python, torch, CUDA, numpy) are listed first.

The engine's parts: facts.py (what one package's version and build say), changes.py (the change classes
and :func:`classify`), packages.py (two package lists, two spec lists), speccheck.py (specs against a lock),
result.py (a whole comparison and its JSON), markdown.py (pure text); the rich tables are in
envguard/diff/render.py.
"""

from __future__ import annotations

from typing import Any

from envguard.diff.changes import KINDS, LABELS, Change, ChangeSeverity, classify, identical_artifact
from envguard.diff.facts import CUDA_LINE_PACKAGES, core_rank, cuda_line, variant
from envguard.diff.markdown import describe, to_markdown
from envguard.diff.packages import diff_packages, diff_requested
from envguard.diff.result import SCHEMA, DiffResult, PlatformDiff, Side
from envguard.diff.speccheck import SpecCheck, SpecReport, SpecStatus, check_spec, spec_vs_lock

__all__ = [
    "CUDA_LINE_PACKAGES", "KINDS", "LABELS", "SCHEMA", "Change", "ChangeSeverity", "DiffResult", "PlatformDiff",
    "Side", "SpecCheck", "SpecReport", "SpecStatus", "check_spec", "classify", "core_rank", "cuda_line",
    "describe", "diff_packages", "diff_requested", "identical_artifact", "spec_vs_lock", "to_markdown", "variant",
]


# The command's entry (loading two sides and comparing them) lives in envguard.diff.sides, which builds on
# this engine; it is part of the wing's public API, imported on first use.
def __getattr__(name: str) -> Any:
    if name in ("compare", "SideArgs"):
        import importlib

        return getattr(importlib.import_module("envguard.diff.sides"), name)
    raise AttributeError(f"module 'envguard.diff' has no attribute {name!r}")
