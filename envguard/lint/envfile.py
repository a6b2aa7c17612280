"""The linter of one environment file (or conda env export): every rule family over the gathered state.
:func:`lint_environment` is what envguard.lint calls; manifest.py subclasses :class:`EnvLinter` to run the
same rules once per pixi environment."""

from __future__ import annotations

from pathlib import Path

from envguard.errors import UserError
from envguard.findings import Finding
from envguard.lint.channel_rules import ChannelRules
from envguard.lint.cuda_rules import CudaRules
from envguard.lint.pip_rules import PipRules
from envguard.lint.projects import project_rules
from envguard.lint.torch_rules import TorchRules


class EnvLinter(TorchRules, PipRules, CudaRules, ChannelRules):
    def run(self) -> list[Finding]:
        if not self.structure():
            return self.findings
        try:
            self.gather()
        except UserError as e:  # sources' reader disagrees with the structure: report, don't crash
            self.add("EG100", e.message, "fix the entry named", getattr(e, "line", None))
            return self.findings
        self.torch_rules()
        self.python_rules()
        self.pip_rules()
        self.cuda_rules()
        self.channel_rules()
        self.url_rules()
        self.exactness_rules()
        self.mixing_rules()
        project_rules(self)
        return self.findings


def lint_environment(path: str, text: str, base_dir: Path | None = None) -> list[Finding]:
    """Lint the text of an environment file (or a conda env export); ``path`` names it."""
    from envguard.yamlio import load_with_lines

    data, positions = load_with_lines(path, text)
    return EnvLinter(path, text, data, positions, base_dir or Path(path).parent).run()
