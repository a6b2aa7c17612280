"""check sees what training sees: the import checks and the smoke probe run in the environment activated as
`envguard run` activates it (envguard.activate: PATH, CONDA_PREFIX, conda-meta/state and env_vars.d
variables, the activate.d scripts), so that a script that breaks the interpreter or puts another CUDA on
LD_LIBRARY_PATH is found. A failure that happens activated and not without activation is put on the
activate.d scripts: each is run alone (a shell each, only on that failure path) to say what it changes.

Cheap on the way that passes: one activation (a shell run, a few milliseconds) per check; the interpreter
runs again without activation only when something failed activated.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envguard.findings import Finding, Severity

#: what changes which libraries and which Python load: named first when a script is blamed
_LOADER = ("PYTHONHOME", "PYTHONPATH", "LD_LIBRARY_PATH", "LD_PRELOAD", "CUDA_HOME", "CUDA_PATH", "PATH",
           "DYLD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES")


@dataclass
class Activated:
    """The environment a check's probes run in: ``env`` activated, or None (not a conda environment, or
    activation failed: ``finding`` says why, and the probes run without it)."""

    prefix: Path
    base: dict[str, str]
    env: dict[str, str] | None
    finding: Finding | None = None
    _effects: dict[str, list[str]] | None = field(default=None, repr=False)

    def effects(self) -> dict[str, list[str]]:
        if self._effects is None:
            from envguard.activate import script_effects

            self._effects = script_effects(self.prefix, self.base)
        return self._effects

    def culprits(self, names: tuple[str, ...] = ()) -> str:
        """The activate.d scripts to blame, with what they change (those changing ``names`` or the loader's
        variables first); "" when there is none."""
        eff = self.effects()
        if not eff:
            return ""
        wanted = set(names) or set(_LOADER)
        hit = {s: v for s, v in eff.items() if wanted & set(v) or v == ["(exits)"]}
        chosen = hit or eff

        def said(vars_: list[str]) -> str:
            if vars_ == ["(exits)"]:
                return "ends the shell"
            first = sorted(vars_, key=lambda v: (v not in wanted, v))
            return "sets " + ", ".join(first[:4]) + (", ..." if len(first) > 4 else "")

        return "; ".join(f"{s} ({said(v)})" for s, v in chosen.items())

    def worth_blaming(self) -> bool:
        """Whether activation changed anything that could make a probe fail (a script, a variable beyond
        PATH and conda's own): else a failure is the environment's, and nothing runs twice."""
        if self.env is None:
            return False
        own = {"PATH", "CONDA_PREFIX", "CONDA_DEFAULT_ENV", "CONDA_SHLVL", "CONDA_PROMPT_MODIFIER"}
        return bool(self.effects()) or any(self.env.get(k) != self.base.get(k)
                                           for k in set(self.env) | set(self.base) if k not in own)

    def attribute(self, what: str, fails: Callable[[], bool]) -> Finding | None:
        """When ``what`` failed activated: EG506 naming the scripts if it passes without activation
        (``fails()`` runs it in the plain environment), else None."""
        if not self.worth_blaming() or fails():
            return None
        scripts = self.culprits()
        return Finding("EG506", Severity.ERROR,
                       f"{what} fails in the activated environment (as envguard run starts a job) and passes "
                       f"without activation: " + (f"an activation script of {self.prefix} does it: {scripts}"
                                                   if scripts else "a variable of conda-meta/state or "
                                                   "etc/conda/env_vars.d does it"),
                       "fix or remove that script (the conda-meta record whose files list it names its package), "
                       "or unset the variable there", file=str(self.prefix))


def activate(prefix: Path, env: Mapping[str, str] | None) -> Activated:
    """``prefix`` activated from ``env`` (default: this process's environment as the user's shell gave it)."""
    from envguard.activate import activated_environ
    from envguard.errors import EnvguardError

    base = dict(os.environ) if env is None else dict(env)
    if not (prefix / "conda-meta").is_dir():
        return Activated(prefix, base, None)
    try:
        act = activated_environ(prefix, env)
    except EnvguardError as e:
        found = Activated(prefix, base, None)
        scripts = found.culprits()
        found.finding = Finding("EG506", Severity.ERROR,
                                f"activating the environment fails, so envguard run cannot start a job in it: "
                                f"{e.message}" + (f" ({scripts})" if scripts else ""),
                                e.fix or "fix the activation scripts of the environment", file=str(prefix))
        return found
    return Activated(prefix, base, act)


def blame_library_path(findings: list[Finding], act: Activated) -> list[Finding]:
    """EG560 (a foreign library on LD_LIBRARY_PATH) said with the script that put it there, when activation
    did (the check's own environment did not have it)."""
    from dataclasses import replace

    if act.env is None or act.env.get("LD_LIBRARY_PATH") == act.base.get("LD_LIBRARY_PATH"):
        return findings
    scripts = act.culprits(("LD_LIBRARY_PATH",))
    if not scripts:
        return findings
    return [replace(f, message=f"{f.message} (set by activation: {scripts})") if f.code == "EG560" else f
            for f in findings]


#: the smoke probe run in an environment (None: the plain one), with the progress shown or not
SmokeRun = Callable[[dict[str, str] | None, bool], tuple[list[Finding], Any, Any, int]]


def run_probes(python: str, act: Activated, smoke: SmokeRun | None
               ) -> tuple[dict[str, Any] | None, list[Finding], tuple[list[Finding], Any, Any, int] | None]:
    """The import check, then (``smoke``) the smoke probe, in ``act``'s environment: (import origins, findings
    about the run, the smoke run's result). Each failure that does not happen without activation is put on
    the scripts (EG506); the smoke probe runs again only then, and not after a timeout."""
    from envguard.errors import EnvguardError, ExitCode
    from envguard.prefix import import_origins

    findings = [act.finding] if act.finding is not None else []
    try:
        origins = import_origins(python, env=act.env)
    except EnvguardError as e:
        findings.append(act.attribute("the environment's interpreter", lambda: _import_fails(python))
                        or Finding("EG505", Severity.ERROR, f"the environment's interpreter does not run: {e.message}",
                                   "recreate the environment with `envguard create`"))
        return None, findings, None
    if smoke is None:
        return origins, findings, None
    ran = smoke(act.env, True)
    if ran[3] == ExitCode.SMOKE_FAILED:
        blamed = act.attribute("the smoke test", lambda: smoke(None, False)[3] != 0)
        findings += [blamed] if blamed is not None else []
    return origins, findings, ran


def _import_fails(python: str) -> bool:
    from envguard.errors import EnvguardError
    from envguard.prefix import import_origins

    try:
        import_origins(python)
    except EnvguardError:
        return True
    return False
