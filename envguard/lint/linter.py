"""The state every environment-file rule reads: the file's dependencies, channels, platforms and the
torch release and route they pin, gathered once; how this kind of file writes a pin (a pixi manifest
overrides these); and the structural pass from envguard.lock's own spec validation.

The rule families (torch_rules, pip_rules, cuda_rules, channel_rules) are mixins over :class:`Linter`;
envfile.py joins them into the linter of one environment file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from envguard import compat
from envguard.findings import Finding, Severity
from envguard.lint.constraints import PYTHON_UNIVERSE, TORCH_UNIVERSE, release_lines
from envguard.lint.deps import Dep, channel_name, parse_conda, parse_pip
from envguard.lint.projects import declares_nothing, raw_by_line, raw_for
from envguard.lint.rules import RULES, TORCH_CONDA_NAMES
from envguard.platforms import command_platforms
from envguard.redact import redact
from envguard.versions import line_key


class Linter:
    def __init__(self, path: str, text: str, data: Any, positions: Any, base_dir: Path) -> None:
        self.path, self.text, self.data, self.pos, self.base_dir = path, text, data, positions, base_dir
        self.findings: list[Finding] = []
        self.c = compat.load()

    def add(self, code: str, message: str, fix: str, line: int | None, severity: Severity | None = None,
            package: str | None = None) -> None:
        sev = severity or RULES[code].severity
        self.findings.append(Finding(code, sev, redact(message), redact(fix), self.path, line, package))

    def dep_fix(self, name: str, spec: str) -> str:
        """How to write ``name`` pinned to ``spec`` in this kind of file."""
        return f"`- {name}={spec}`"

    def spec_fix(self, name: str, version: str, build: str) -> str:
        """The build guard to write (EG112)."""
        return self.build_pin(name, version, build)

    def pin(self, name: str, line: str, manager: str = "conda") -> str:
        """``name`` pinned to the release line ``line``, as this kind of file writes it."""
        return f"`{name}={line}`" if manager == "conda" else f"`{name}=={line}.*`"

    def build_pin(self, name: str, version: str, build: str) -> str:
        return f"`{name}={version}={build}`"

    def per_platform_pin(self) -> str:
        """How to pin a different CUDA line per platform in this kind of file."""
        return "pin the platforms' lines with selectors, e.g. `cuda-version=12.9  # [linux]`"

    def pip_core(self) -> set[str]:
        """PyPI names that must not come from pip (EG107)."""
        return set(self.c.core_packages)

    def cuda_signals(self) -> list[str]:
        """What else asks for CUDA besides the CUDA packages (a pixi manifest's system-requirements)."""
        return []

    # -- structure, from spec.validate -----------------------------------------
    def structure(self) -> bool:
        """Run spec.validate; False when the file is too broken for the deeper rules."""
        from envguard.lock import validate

        errors, warnings = validate(self.data, self.pos, self.path, self.text)
        fatal = False
        for issue in errors + warnings:
            code = issue.code  # set where validate found the problem
            sev = Severity.ERROR if issue.severity == "error" else Severity.WARNING
            if code == "EG115":
                sev = Severity.ERROR  # a committed secret leaks through git, lock or not
            if code == "EG100" and issue.key == "dependencies" and declares_nothing(self.data):
                sev = Severity.WARNING  # conda and mamba create an empty environment from it: valid
            if code == "EG100" and sev is Severity.ERROR:
                fatal = True
            msg = f"{issue.key}: {issue.message}" if code in ("EG100", "EG117", "EG124") else issue.message
            self.add(code, msg, issue.fix, issue.line, sev)
        return not fatal and isinstance(self.data, dict) and isinstance(self.data.get("dependencies"), list)

    # -- gathering -------------------------------------------------------------
    def gather(self) -> None:
        from envguard.sources.envfile import read_environment

        desc = read_environment(self.text, self.data, self.path, base_dir=self.base_dir)
        self.conda: list[Dep] = []
        self.pip: list[Dep] = []
        first_include = self._first_pip_include_line()
        raw_at = raw_by_line(self.data["dependencies"], self.pos)
        for req in desc.requested:
            if req.manager == "conda":
                d = parse_conda(req, raw_for(raw_at, req))
                if d is not None:
                    self.conda.append(d)
            else:
                self.pip.append(parse_pip(req, first_include))
        chans = self.data.get("channels")
        self.channels: list[tuple[str, int | None]] = [
            (str(ch), self.pos.line("channels", i)) for i, ch in enumerate(chans if isinstance(chans, list) else [])
            if isinstance(ch, str) and ch.strip()
        ]
        self.channel_names = {channel_name(ch) for ch, _ in self.channels}
        self.torch_conda = [d for d in self.conda if d.name in TORCH_CONDA_NAMES]
        self.torch_pip = [d for d in self.pip if d.name == "torch"]
        self.torch_lines = self._torch_lines()
        self.route = self._route()
        plats = self.data.get("platforms")
        self.one_machine = False  # an export: one machine, on one platform (which, the file may not say)
        if isinstance(plats, list):
            self.platforms: list[str] = [str(p) for p in plats if isinstance(p, str)]
        else:
            from envguard.sources.export import export_platform, looks_like_export

            self.one_machine = looks_like_export(self.data)
            found = export_platform(self.data) if self.one_machine else None
            self.platforms = command_platforms(None, [found] if found else [])  # an export's own, else the default

    def _route(self) -> str:
        """Where the file's torch comes from: the legacy pytorch channel, conda-forge, or PyPI wheels."""
        if self.torch_conda:
            if any((d.channel or "").lower() == "pytorch" for d in self.torch_conda):
                return compat.PYTORCH
            order = [n for n in (channel_name(ch) for ch, _ in self.channels) if n in ("pytorch", "conda-forge")]
            return compat.PYTORCH if order[:1] == ["pytorch"] else compat.CONDA_FORGE
        return compat.PYPI if self.torch_pip else compat.CONDA_FORGE

    def _release(self) -> Any:
        """The released row of the pinned torch on the file's route, or None: the channel's records while init
        checks against them (envguard.channelfacts.answering), else the table's."""
        from envguard import channelfacts

        return channelfacts.released(self.torch_release, self.route) if self.torch_release else None

    def _first_pip_include_line(self) -> int | None:
        for i, dep in enumerate(self.data.get("dependencies") or []):
            if isinstance(dep, dict) and isinstance(dep.get("pip"), list):
                for j, item in enumerate(dep["pip"]):
                    if isinstance(item, str) and item.strip().startswith(("-r", "--requirement")):
                        return self.pos.line("dependencies", i, "pip", j)
        return None

    def _torch_lines(self) -> frozenset[str] | None:
        lines: frozenset[str] | None = None
        for d in self.torch_conda + self.torch_pip:
            got = release_lines(d.version, d.manager, TORCH_UNIVERSE)
            if got is not None:
                lines = got if lines is None else (lines & got or got)
        return lines

    @property
    def torch_release(self) -> str | None:
        """The one X.Y release the file pins torch to, if it does."""
        return next(iter(self.torch_lines)) if self.torch_lines and len(self.torch_lines) == 1 else None

    def _torch_all_after(self, version: str) -> bool:
        return bool(self.torch_lines) and all(line_key(v) > line_key(version) for v in self.torch_lines or ())

    def _deps_line(self) -> int:
        return self.pos.line("dependencies") or 1

    def _python_line(self) -> str | None:
        """The one X.Y the file pins Python to, if it does."""
        pys = [d for d in self.conda if d.name == "python"]
        lines = release_lines(pys[0].version, "conda", PYTHON_UNIVERSE) if pys else None
        return next(iter(lines)) if lines and len(lines) == 1 else None
