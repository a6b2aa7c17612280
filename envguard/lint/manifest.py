"""Lint a pixi manifest (pixi.toml, or pyproject.toml with [tool.pixi]) with the environment-file rules.

Every pixi environment is one spec: its features' dependencies, pypi-dependencies, channels, platforms and
system requirements together. The rules of :class:`envguard.lint.envfile.EnvLinter` run once per environment;
a finding that several environments share is reported once, naming them when not all have it. The
Python and torch rules judge only environments that hold python or torch (a `lint` or `docs` environment
of ruff alone is not a PyTorch environment).

Differences from environment.yml, where pixi differs:

* torch from PyPI (`[pypi-dependencies] torch`) is a documented pixi route, so EG107 does not apply;
  torch from both (`pytorch` and PyPI `torch`) is EG158, and CUDA lines across the two managers EG157;
* ``[system-requirements] cuda`` is the CUDA driver level the solve assumes (``__cuda``): a CUDA signal
  for the build guard (EG112), and EG118 when the pinned torch has no build for a line that driver runs.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from envguard.findings import Finding, Severity
from envguard.lint.constraints import CUDA_UNIVERSE, release_lines
from envguard.lint.deps import Dep, channel_name
from envguard.lint.envfile import EnvLinter
from envguard.lint.projects import project_rules, satisfied_by_pixi
from envguard.lint.rules import RULES
from envguard.sources.pixi_manifest import Environment, Manifest, ManifestDep, parse_manifest
from envguard.versions import line_key, release


def _dep(d: ManifestDep, env: Environment, subdir_of: dict[str, str]) -> Dep | None:
    # the rules judge subdirs (what a route builds for); a named platform ({name = "gpu", platform = "linux-64"})
    # stands for its subdir
    plats = None if d.platforms is None else tuple(
        dict.fromkeys(subdir_of.get(p, p) for p in d.platforms if p in env.platforms))
    if d.manager == "pip":
        return Dep(d.name.lower(), "pip", d.spec, d.version, None, None, d.line, plats)
    from rattler import MatchSpec

    try:
        ms = MatchSpec(d.spec, strict=False)
    except Exception:  # noqa: BLE001 - reported as EG121 by the structure pass
        return None
    version = str(ms.version) if ms.version is not None else None
    build = str(ms.build) if ms.build is not None else None
    return Dep(d.name.lower(), "conda", d.spec, version, build, d.channel, d.line, plats)


class _ManifestEnvLinter(EnvLinter):
    """The environment-file rules over one pixi environment."""

    def __init__(self, manifest: Manifest, env: Environment, text: str) -> None:
        super().__init__(manifest.path, text, {}, None, Path(manifest.path).parent)
        self.manifest, self.env = manifest, env

    def dep_fix(self, name: str, spec: str) -> str:
        return f'`{name} = "{spec}.*"`'

    def pin(self, name: str, line: str, manager: str = "conda") -> str:
        return f'`{name} = "{line}.*"`' if manager == "conda" else f'`{name} = "=={line}.*"`'

    def build_pin(self, name: str, version: str, build: str) -> str:
        return f'`{name} = {{ version = "{version}", build = "{build}" }}`'

    def per_platform_pin(self) -> str:
        return ('pin each platform\'s line in its own table, e.g. `cuda-version = "12.9.*"` under '
                "[target.linux-64.dependencies]")

    def _declared_cuda(self) -> list[tuple[str, str]]:
        """(platform name, cuda) of this environment's platforms whose table declares a CUDA driver."""
        info = self.manifest.platform_info
        return [(p, info[p]["cuda"]) for p in self.env.platforms if info.get(p, {}).get("cuda")]

    def spec_fix(self, name: str, version: str, build: str) -> str:
        table = self.build_pin(name, version, build)
        if not build.startswith("cuda"):
            return table  # CPU builds exist on every platform
        declared = [p for p, _ in self._declared_cuda()]
        cuda_names = declared or [p for p in self.env.platforms
                                  if self.manifest.platforms.get(p, p).startswith(("linux", "win"))]
        if len(cuda_names) == len(self.env.platforms):
            return table
        # guard only the platforms that can have a CUDA build, the way pixi's docs do
        why = "the platforms that declare CUDA" if declared else "macOS has no CUDA build"
        where = ", ".join(f"[target.{p}.dependencies]" for p in cuda_names[:2]) or "[target.linux-64.dependencies]"
        return f'{table} under {where} ({why}), or `pytorch-gpu = "*"` there'

    def gather(self) -> None:
        sub = self.manifest.platforms
        self.conda = [x for x in (_dep(d, self.env, sub) for d in self.env.deps if d.manager == "conda") if x]
        self.pip = [x for x in (_dep(d, self.env, sub) for d in satisfied_by_pixi(self.env.deps)
                                if d.manager == "pip" and not d.source) if x]
        self.channels = [(ch, self.manifest.channels[0][1] if self.manifest.channels else self.manifest.workspace_line)
                         for ch in self.env.channels]
        self.channel_names = {channel_name(ch) for ch, _ in self.channels}
        self.torch_conda = [d for d in self.conda if d.name in ("pytorch", "pytorch-gpu", "pytorch-cpu")]
        self.torch_pip = [d for d in self.pip if d.name == "torch"]
        self.torch_lines = self._torch_lines()
        self.route = self._route()
        self.platforms = list(dict.fromkeys(sub.get(p, p) for p in self.env.platforms))
        self.one_machine = False  # what EnvLinter.gather sets for an export

    def cuda_signals(self) -> list[str]:
        # the driver level pixi solves for, for every platform or in a platform's table: a request for CUDA builds
        cuda = self.env.system.get("cuda")
        return ([f'[system-requirements] cuda = "{cuda}"'] if cuda else []) + [
            f'cuda = "{c}" on platform {p}' for p, c in self._declared_cuda()]

    def _deps_line(self) -> int:
        return self.manifest.workspace_line or 1

    def pip_core(self) -> set[str]:
        """pixi installs PyPI packages with uv on top of the conda ones: torch from PyPI alone is a documented
        route (no EG107); one package from both managers stays EG123, torch from both EG158."""
        return set()

    def cuda_rules(self) -> None:
        super().cuda_rules()
        self._system_cuda_rule()
        self._cuda_build_rule()

    def _cuda_build_rule(self) -> None:
        """EG139: the environment is a CUDA variant (pytorch-gpu, or a pytorch build cuda*) on a platform that can
        have one, yet none of its features declares CUDA (``[system-requirements] cuda``, a platform's ``cuda``).
        pixi solves with the virtual packages the manifest declares, never the machine's (so that a lock does not
        depend on who ran it), and conda-forge's CUDA builds need ``__cuda``: `pixi lock` finds no build."""
        if self.env.system.get("cuda") or self._declared_cuda():
            return
        if not any(self.manifest.platforms.get(p, p).startswith(("linux", "win")) for p in self.env.platforms):
            return
        asks = next((d for d in self.torch_conda if d.name == "pytorch-gpu" or (d.build or "").startswith("cuda")),
                    None)
        if asks is None:
            return
        feature = next((d.feature for d in self.env.deps if d.line == asks.line and d.name.lower() == asks.name),
                       "default")
        table = "[system-requirements]" if feature == "default" else f"[feature.{feature}.system-requirements]"
        pinned = next((d.version for d in self.conda if d.name == "cuda-version" and d.version), "")
        m = re.match(r"\D*(\d+)", pinned)  # the environment's own CUDA line, else conda-forge's current 12
        major = m.group(1) if m else "12"
        self.add("EG139", f"`{asks.spec}` asks a CUDA build, but the environment declares no CUDA: pixi solves "
                 "with the virtual packages the manifest declares, not this machine's, and conda-forge's CUDA "
                 "builds need __cuda, so it finds none",
                 f'declare the driver level the CUDA variant needs: `cuda = "{major}"` under {table}', asks.line,
                 package="pytorch")

    def _system_cuda_rule(self) -> None:
        rel = self._release()
        if rel is None or not rel.cuda:
            return
        system = self.env.system.get("cuda")
        declared = ([(f'[system-requirements] cuda = "{system}"', system, self.env.system_line)] if system else [])
        declared += [(f'cuda = "{c}" on platform {p}', c, self.manifest.workspace_line)
                     for p, c in self._declared_cuda()]
        for label, cuda, line in declared:
            lines = release_lines(cuda, "conda", CUDA_UNIVERSE)
            have = min(lines, key=line_key) if lines else None
            if have and all(release(c)[0] > release(have)[0] for c in rel.cuda):
                self.add("EG118", f"{label}: torch {rel.version} has no CUDA {have} build (its CUDA lines: "
                         f"{', '.join(rel.cuda)}), so pixi can solve only a CPU build",
                         f'raise it to cuda = "{rel.cuda[0].split(".")[0]}" (the driver must support it)', line,
                         package="pytorch")

    def url_rules(self) -> None:
        return  # the raw-text credential scan covers every URL of a manifest

    def run(self) -> list[Finding]:
        self.gather()
        has_torch = bool(self.torch_conda or self.torch_pip)
        if has_torch:
            self.torch_rules()
        if has_torch or any(d.name == "python" for d in self.conda):
            self.python_rules()
        self.pip_rules()
        self.cuda_rules()
        self.channel_rules()
        self.exactness_rules()
        self.mixing_rules()
        project_rules(self)
        return self.findings


def _structure(m: Manifest, text: str) -> list[Finding]:
    """What the manifest's shape gets wrong before any rule: no channels, specs conda/rattler cannot read."""
    from envguard.lock import version_problem

    out: list[Finding] = []
    if not m.channels and not any(f.channels for f in m.features.values()) and not m.member:
        out.append(Finding("EG129", Severity.ERROR, "no channels in the workspace table: pixi cannot solve anything",
                           'add `channels = ["conda-forge"]` to [workspace]', m.path, m.workspace_line))
    seen: set[tuple[str, int | None]] = set()
    for f in m.features.values():
        for d in f.deps:
            if d.manager != "conda" or d.version is None or (d.name, d.line) in seen:
                continue
            seen.add((d.name, d.line))
            problem = version_problem(d.version.replace(" ", ""))
            if problem is None:
                from rattler import VersionSpec

                try:
                    VersionSpec(d.version, strict=False)
                except Exception as e:  # noqa: BLE001 - rattler's own error family: what pixi itself would refuse
                    problem = str(e).splitlines()[0]
            if problem:
                out.append(Finding("EG121", Severity.ERROR, f"{d.name} = \"{d.version}\": {problem}",
                                   "write a version spec such as \">=2.5,<3\" or \"2.5.*\"", m.path, d.line, d.name))
    return out


def _workspace_findings(m: Manifest, text: str, data: Any,
                        torch_by_env: dict[str, tuple[str, str, int | None]]) -> list[Finding]:
    """The rules over the whole workspace (envguard.lint.workspace_rules): EG135, EG136, EG137."""
    from envguard.lint import workspace_rules
    from envguard.sources.pixi_manifest import pixi_table, toml_lines

    table = pixi_table(data) or {}
    lines = toml_lines(text)
    return (workspace_rules.feature_platforms(m, table, lines) + workspace_rules.unsafe_best_match(m, table, lines)
            + workspace_rules.manifest_torch(m.path, table, torch_by_env))


def lint_manifest(shown: str, text: str, data: Any) -> list[Finding]:
    """Every environment-file rule over every environment of a pixi manifest."""
    m = parse_manifest(text, data, shown)
    findings = _structure(m, text)
    if any(f.code == "EG121" for f in findings):
        bad = {f.line for f in findings if f.code == "EG121"}
        for feature in m.features.values():
            feature.deps = [d for d in feature.deps if d.line not in bad]
    by_key: dict[tuple[str, str, int | None], tuple[Finding, list[str]]] = {}
    torch_by_env: dict[str, tuple[str, str, int | None]] = {}
    for env in m.environments.values() if not m.member else ():  # a member's environments are its workspace's
        linter = _ManifestEnvLinter(m, env, text)
        for f in linter.run():
            key = (f.code, f.message, f.line)
            slot = by_key.setdefault(key, (f, []))
            slot[1].append(env.name)
        pin = next(iter(linter.torch_conda + linter.torch_pip), None)
        if linter.torch_release and pin is not None and env.platforms:  # no platform: nothing is built
            torch_by_env[env.name] = (linter.torch_release, pin.spec, pin.line)
    findings += _workspace_findings(m, text, data, torch_by_env)
    n_envs = len(m.environments)
    for f, envs in by_key.values():
        if f.code == "EG130" and len(envs) < n_envs:
            continue  # the workspace's channels serve every environment: unused only if unused by all
        if n_envs > 1 and len(envs) < n_envs:
            label = "environment" if len(envs) == 1 else "environments"
            shown_envs = ", ".join(envs[:4]) + (f" and {len(envs) - 4} more" if len(envs) > 4 else "")
            findings.append(Finding(f.code, f.severity, f"{f.message} ({label} {shown_envs})", f.fix, f.file, f.line,
                                    f.package))
        else:
            findings.append(f)
    return findings


__all__ = ["RULES", "lint_manifest"]
