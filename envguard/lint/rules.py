"""lint's rules: every code (``EG1xx``) with its name, usual severity and one-line summary, as
docs/commands/lint.md lists them, and the codes envguard.mixing's rules report under."""

from __future__ import annotations

from dataclasses import dataclass

from envguard.findings import Severity
from envguard.lint.projects import RULES as PROJECT_RULES
from envguard.lint.workspace_rules import RULES as WORKSPACE_RULES

E, W, I = Severity.ERROR, Severity.WARNING, Severity.INFO  # noqa: E741 - the severities by their letters


@dataclass(frozen=True)
class Rule:
    code: str
    name: str
    severity: Severity  # the usual severity; some rules soften to a warning when the case is unsure
    summary: str
    applies_to: str = "environment"  # "environment" (specs and manifests) | "lock" | "any"


_RULE_LIST = [
    Rule("EG100", "invalid-environment-file", E, "the file's structure is not a valid environment file"),
    Rule("EG101", "python-not-pinned", E, "Python is missing or not pinned to one release (3.10, 3.11)"),
    Rule("EG102", "python-unsupported", E, "Python is not 3.10/3.11 (error when older; info when newer: the file "
         "is valid, envguard's templates and data cover 3.10/3.11)"),
    Rule("EG103", "python-legacy", W, "Python 3.10 is legacy: end of life on 2026-10-31, capped at torch 2.14"),
    Rule("EG104", "torch-python-mismatch", E, "the pinned torch has no builds for the pinned Python"),
    Rule("EG105", "torch-not-pinned", E, "torch/pytorch is not pinned to one release line"),
    Rule("EG106", "torch-unknown-release", W, "the pinned torch release is not in the compatibility data"),
    Rule("EG107", "core-package-under-pip", E, "torch, torchvision, torchaudio or numpy from pip beside conda's torch "
         "stack or the same conda package (info for a pip-only torch stack, warning beside conda CUDA libraries)"),
    Rule("EG108", "pytorch-cuda-with-pip-torch", E, "conda's pytorch-cuda next to a torch from pip"),
    Rule("EG109", "cudatoolkit-with-torch2", E, "cudatoolkit (CUDA <= 11 packaging) with torch >= 2"),
    Rule("EG110", "pytorch-cuda-legacy", E, "pytorch-cuda: legacy pytorch/nvidia channels (error for torch >= 2.6)"),
    Rule("EG111", "pytorch-channel", E, "the pytorch channel, frozen at 2.5 (error for torch >= 2.6)"),
    Rule("EG112", "cuda-pytorch-without-build-guard", E, "a CUDA pytorch without a cuda* build string"),
    Rule("EG113", "defaults-with-conda-forge", E, "anaconda's defaults mixed with conda-forge (channels or records)",
         "any"),
    Rule("EG114", "http-url", E, "a channel or package index over plain http://"),
    Rule("EG115", "credentials-in-url", E, "a literal credential in a URL"),
    Rule("EG116", "pip-section-without-pip", W, "a pip: section without pip among the conda dependencies"),
    Rule("EG117", "unknown-key", E, "an unknown top-level key (conda silently ignores it)"),
    Rule("EG118", "torch-cuda-line-unsupported", E, "the CUDA line has no builds of the pinned torch"),
    Rule("EG119", "channel-not-listed", W, "a channel::package whose channel is not in channels"),
    Rule("EG120", "nightly-channel", W, "a nightly channel: its builds disappear"),
    Rule("EG121", "invalid-conda-spec", E, "a dependency that is not a valid conda match spec"),
    Rule("EG122", "build-string-makes-version-exact", W, "name=X.Y=build means exactly X.Y.0"),
    Rule("EG123", "package-in-conda-and-pip", W, "one package requested from both conda and pip"),
    Rule("EG124", "pip-entry-not-lockable", E, "a pip entry conda-lock cannot lock (options, -r, local paths)"),
    Rule("EG125", "selector-matches-nothing", W, "a # [selector] that matches no platform"),
    Rule("EG126", "prefix-key", W, "a prefix: key (ignored by the lock)"),
    Rule("EG127", "unsupported-platform", E, "a platform conda-lock cannot lock"),
    Rule("EG128", "folded-list-item", E, "a list item YAML folded together with the mis-indented line below it"),
    Rule("EG129", "no-channels", E, "no channels named: conda would use .condarc's, a lock finds nothing"),
    Rule("EG130", "unused-channel", W, "a listed channel nothing comes from", "any"),
    Rule("EG140", "invalid-variables", E, "a variables: entry activation cannot set as written: a name no shell "
         "exports, a value that is not a string or holds \", $, `, \\ (warning: a lower-case name)"),
    Rule("EG150", "lock-cuda-mismatch", E, "a pytorch build's CUDA line disagrees with the CUDA runtime", "lock"),
    Rule("EG151", "lock-conda-and-pip", E, "one package locked from both conda and pip", "lock"),
    Rule("EG152", "lock-unlisted-channel", E, "a package locked from a channel the lock does not list", "lock"),
    Rule("EG153", "lock-prerelease-torch", W, "a pre-release (nightly) torch is locked", "lock"),
    Rule("EG154", "lock-pytorch-channel-mkl", E, "pytorch-channel pytorch with mkl >= 2024.1", "lock"),
    Rule("EG155", "lock-credential-in-url", E, "a literal credential in a URL of a lock (or any other file)", "lock"),
    Rule("EG156", "mkl-openmp-split", E, "mkl from one channel family, its OpenMP runtime from the other", "any"),
    Rule("EG157", "cuda-lines-mixed", E, "CUDA packages of two major lines (conda and pip, or within conda)", "any"),
    Rule("EG158", "torch-from-two-managers", E, "torch from conda and from pip: pip's copy is the one imported",
         "any"),
    Rule("EG159", "lock-not-whole", E, "a locked record needs a package the lock does not hold on its platform "
         "(a warning for a version conda-lock recorded)", "lock"),
    Rule("EG160", "cpu-torch-with-cuda-libraries", W, "a CPU build of torch locked beside CUDA libraries or CUDA "
         "builds: the CPU environment (variant) installs CUDA it does not use", "lock"),
]
_RULE_LIST += [Rule(code, name, Severity(sev), summary, applies)
               for code, name, sev, summary, applies in PROJECT_RULES + WORKSPACE_RULES]
# envguard.mixing's rules, as lint codes
MIX_CODES: dict[str, str] = {"channels": "EG113", "openmp": "EG156", "cuda-lines": "EG157", "torch-twice": "EG158",
                             "cuda-twice": "EG133"}
RULES: dict[str, Rule] = {r.code: r for r in _RULE_LIST}

TORCH_CONDA_NAMES = ("pytorch", "pytorch-gpu", "pytorch-cpu")
