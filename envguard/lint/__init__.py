"""``envguard lint``: static rules for environment files and lock files.

Pure: reads files, runs nothing. Every rule has a stable code (``EG1xx``,
listed in :data:`RULES` and in docs/commands/lint.md), a severity, a message naming the
exact line, and a fix. Release facts (which torch supports which Python and
CUDA line, which channel is frozen) come from ``envguard/data/compat.yaml``
through :mod:`envguard.compat`; structural checks of environment files
(unknown keys, credentials, ``pip:`` without ``pip``, unparseable specs) come
from :func:`envguard.lock.spec.validate`, so ``lint`` and ``lock`` agree.

Lock files (conda-lock.yml, pixi.lock, explicit files) are read by
:mod:`envguard.sources` and checked by :mod:`envguard.lint.locks`; pixi manifests
(pixi.toml, pyproject.toml with [tool.pixi]) by :mod:`envguard.lint.manifest`, with
the same rules as environment files, once per pixi environment. The mixing rules
(channels, CUDA lines across conda and pip, torch from two managers) are
:mod:`envguard.mixing`'s, for every kind. Every file's raw text is scanned for
literal credentials, whatever its kind, even one lint cannot otherwise read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from envguard import compat
from envguard.errors import UserError
from envguard.findings import Finding, Severity
from envguard.platforms import DEFAULT_PLATFORMS
from envguard.redact import has_credentials, redact
from envguard.versions import line_key, release

E, W, I = Severity.ERROR, Severity.WARNING, Severity.INFO


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
    Rule("EG102", "python-unsupported", E, "Python is not 3.10/3.11 (error when older, warning when newer)"),
    Rule("EG103", "python-legacy", W, "Python 3.10 is legacy: end of life, capped at torch 2.14"),
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
]
# envguard.mixing's rules, as lint codes
MIX_CODES: dict[str, str] = {"channels": "EG113", "openmp": "EG156", "cuda-lines": "EG157", "torch-twice": "EG158"}
RULES: dict[str, Rule] = {r.code: r for r in _RULE_LIST}

TORCH_CONDA_NAMES = ("pytorch", "pytorch-gpu", "pytorch-cpu")
ENV_FILE_NAMES = ("environment.yml", "environment.yaml")
LOCK_FILE_NAMES = ("conda-lock.yml",)


@dataclass
class LintResult:
    findings: list[Finding] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)  # one-line messages (exit 2)

    @property
    def summary(self) -> str:
        """One line; never "no findings" beside a file that could not be read."""
        from envguard.report import summary_line

        if not self.unreadable:
            return summary_line(self.findings)
        n = len(self.unreadable)
        unread = f"{n} file{'s' * (n != 1)} could not be read"
        if self.findings:
            return f"{summary_line(self.findings)}; {unread}"
        linted = len(self.files) - n
        return unread + (f"; nothing to report in the other {linted}" if linted > 0 else "")

    @property
    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for f in self.findings:
            out[f.code] = out.get(f.code, 0) + 1
        return out


# ---------------------------------------------------------------- versions


def _universe(majors: Iterable[int], minors: int) -> list[tuple[str, str]]:
    """(line, version) probes: X.Y with a few patch levels, to learn what a spec allows."""
    out = []
    for x in majors:
        for y in range(minors):
            for v in (f"{x}.{y}.0", f"{x}.{y}.1", f"{x}.{y}.12"):
                out.append((f"{x}.{y}", v))
    return out


_TORCH_UNIVERSE = _universe((1, 2, 3), 40)
_PYTHON_UNIVERSE = _universe((2, 3), 30)
_CUDA_UNIVERSE = _universe(range(9, 15), 10)


def _conda_matcher(version: str) -> Callable[[str], bool] | None:
    from rattler import Version, VersionSpec

    try:
        vs = VersionSpec(version, strict=False)
    except Exception:  # rattler's own error family: an unparseable constraint
        return None

    def match(v: str) -> bool:
        return bool(vs.matches(Version(v)))

    return match


def _pip_matcher(specifier: str) -> Callable[[str], bool] | None:
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        ss = SpecifierSet(specifier)
    except InvalidSpecifier:
        return None
    return lambda v: ss.contains(v, prereleases=True)


def release_lines(constraint: str | None, manager: str, universe: list[tuple[str, str]]) -> frozenset[str] | None:
    """The X.Y release lines a version constraint allows; None when it allows everything."""
    if not constraint or constraint.strip() in ("*", ""):
        return None
    matcher = (_conda_matcher if manager == "conda" else _pip_matcher)(constraint.strip())
    if matcher is None:
        return frozenset()
    lines = frozenset(line for line, v in universe if matcher(v))
    if not lines:
        # outside the probes (torch 9.1, a local version label): take the written X.Y of an exact pin
        m = re.match(r"^\s*(?:==|=)?\s*(\d+)\.(\d+)", constraint)
        if m and not re.search(r"[<>!~,|]", constraint):
            return frozenset({f"{m.group(1)}.{m.group(2)}"})
    return lines


def _lines_text(lines: Iterable[str]) -> str:
    return ", ".join(sorted(lines, key=line_key))


def _nearest_line(line: str, choices: list[str]) -> str:
    """The choice closest to ``line`` in version order (ties to the newer)."""
    def flat(v: str) -> int:
        k = release(v) + (0, 0)
        return k[0] * 1000 + k[1]

    return min(choices, key=lambda c: (abs(flat(c) - flat(line)), -flat(c)))


# ---------------------------------------------------------------- environment files


@dataclass
class _Dep:
    name: str  # as written, lower case
    manager: str  # conda | pip
    spec: str  # as written (redacted)
    version: str | None
    build: str | None
    channel: str | None
    line: int | None
    platforms: tuple[str, ...] | None  # from a # [selector]; None = every platform
    via: str | None = None  # "requirements.txt" when read through a pip -r include


def _parse_conda(req: Any, raw: str | None) -> _Dep | None:
    from rattler import MatchSpec

    spec = raw or req.spec
    try:
        ms = MatchSpec(spec, strict=False)
    except Exception:  # reported by spec.validate as EG121
        return None
    version = str(ms.version) if ms.version is not None else None
    build = str(ms.build) if ms.build is not None else None
    return _Dep(req.name.lower(), "conda", spec, version, build, req.channel, req.line, req.platforms)


def _parse_pip(req: Any, fallback_line: int | None) -> _Dep:
    from packaging.requirements import InvalidRequirement, Requirement

    version = None
    try:
        version = str(Requirement(req.spec).specifier) or None
    except InvalidRequirement:
        pass
    return _Dep(req.name.lower(), "pip", req.spec, version, None, None, req.line or fallback_line, req.platforms,
                via=None if req.line else "a -r requirements file")


def _channel_name(ch: str) -> str:
    from envguard.channels import normalise_channel

    return (normalise_channel(ch.strip()) or "").lower()


def _is_conda_forge(ch: str) -> bool:
    from envguard.mixing import channel_family

    return channel_family(ch.strip()) == "conda-forge"


def _is_defaults(ch: str) -> bool:
    from envguard.mixing import channel_family

    return channel_family(ch.strip()) == "defaults"


# What the `pytorch` channel is for: listed without any of these, it serves nothing in the file.
_PYTORCH_CHANNEL_PACKAGES = frozenset({
    "pytorch", "pytorch-cpu", "pytorch-gpu", "torchvision", "torchaudio", "torchtext", "torchdata", "torchtriton",
    "pytorch-cuda", "pytorch-mutex", "cpuonly", "captum", "botorch", "ignite", "faiss", "faiss-cpu", "faiss-gpu",
})


class _EnvLinter:
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
            if code == "EG100" and sev is Severity.ERROR:
                fatal = True
            msg = f"{issue.key}: {issue.message}" if code in ("EG100", "EG124") else issue.message
            self.add(code, msg, issue.fix, issue.line, sev)
        return not fatal and isinstance(self.data, dict) and isinstance(self.data.get("dependencies"), list)

    # -- gathering -------------------------------------------------------------
    def gather(self) -> None:
        from envguard.sources.envfile import read_environment

        desc = read_environment(self.text, self.data, self.path, base_dir=self.base_dir)
        self.conda: list[_Dep] = []
        self.pip: list[_Dep] = []
        first_include = self._first_pip_include_line()
        raw_at = {self.pos.line("dependencies", i): redact(dep.strip())
                  for i, dep in enumerate(self.data["dependencies"]) if isinstance(dep, str)}
        for req in desc.requested:
            if req.manager == "conda":
                d = _parse_conda(req, raw_at.get(req.line))
                if d is not None:
                    self.conda.append(d)
            else:
                self.pip.append(_parse_pip(req, first_include))
        chans = self.data.get("channels")
        self.channels: list[tuple[str, int | None]] = [
            (str(ch), self.pos.line("channels", i)) for i, ch in enumerate(chans if isinstance(chans, list) else [])
            if isinstance(ch, str) and ch.strip()
        ]
        self.channel_names = {_channel_name(ch) for ch, _ in self.channels}
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
            self.platforms = [found] if found else list(DEFAULT_PLATFORMS)

    def _route(self) -> str:
        """Where the file's torch comes from: the legacy pytorch channel, conda-forge, or PyPI wheels."""
        if self.torch_conda:
            if any((d.channel or "").lower() == "pytorch" for d in self.torch_conda):
                return compat.PYTORCH
            order = [n for n in (_channel_name(ch) for ch, _ in self.channels) if n in ("pytorch", "conda-forge")]
            return compat.PYTORCH if order[:1] == ["pytorch"] else compat.CONDA_FORGE
        return compat.PYPI if self.torch_pip else compat.CONDA_FORGE

    def _release(self) -> Any:
        """The released row of the pinned torch on the file's route, or None."""
        return self.c.torch(self.torch_release, self.route) if self.torch_release else None

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
            got = release_lines(d.version, d.manager, _TORCH_UNIVERSE)
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
        lines = release_lines(pys[0].version, "conda", _PYTHON_UNIVERSE) if pys else None
        return next(iter(lines)) if lines and len(lines) == 1 else None

    # -- rules -----------------------------------------------------------------
    def python_rules(self) -> None:
        pys = [d for d in self.conda if d.name == "python"]
        supported = self.c.supported_python
        if not pys:
            self.add("EG101", "no python in dependencies: the solver picks the newest Python it finds",
                     f"add {self.dep_fix('python', self.c.default_python)} to dependencies", self._deps_line())
            return
        d = pys[0]
        lines = release_lines(d.version, "conda", _PYTHON_UNIVERSE)
        if not lines or len(lines) != 1:
            self.add("EG101", f"python is not pinned to one release (`{d.spec}`)",
                     f"pin it: {self.pin('python', self.c.default_python)}", d.line, package="python")
            return
        py = next(iter(lines))
        if py not in supported:
            older = line_key(py) < line_key(supported[0])
            self.add("EG102", f"Python {py} is not supported (envguard supports {', '.join(supported)})",
                     f"use {self.pin('python', self.c.default_python)}", d.line, E if older else W,
                     package="python")
        legacy = self.c.python_legacy(py)
        if legacy:
            self.add("EG103", f"Python {py} is legacy: {legacy.get('note', 'end of life')}",
                     f"move to {self.pin('python', self.c.default_python)}", d.line, package="python")
        rel = self._release()
        if rel and py not in rel.python:
            newest_for_py = [r.version for r in self.c.releases_for_python(py, self.route)]
            pys_ok = [p for p in supported if p in rel.python]
            fix_parts = []
            if pys_ok:
                fix_parts.append(self.pin("python", min(pys_ok, key=lambda p: abs(release(p)[1] - release(py)[1]))))
            if newest_for_py:
                fix_parts.append(f"torch {newest_for_py[-1]}")
            relation = (f"needs Python ≥ {rel.python[0]}" if line_key(py) < line_key(rel.python[0])
                        else f"supports Python ≤ {rel.python[-1]}")
            self.add("EG104", f"torch {rel.version} {relation}; Python {py} has no torch {rel.version} builds",
                     "use " + " or ".join(fix_parts) if fix_parts else "pick a torch release that supports it",
                     d.line, package="python")

    def torch_rules(self) -> None:
        has_pytorch = any(d.name == "pytorch" for d in self.torch_conda)
        for d in self.torch_conda + self.torch_pip:
            if d.name in ("pytorch-gpu", "pytorch-cpu") and has_pytorch:
                continue  # a variant metapackage beside pytorch: the version is pytorch's, judged there
            lines = release_lines(d.version, d.manager, _TORCH_UNIVERSE)
            if lines is None or len(lines) != 1:
                pin = (self.pin(d.name, self.c.newest_torch) if d.manager == "conda"
                       else self.pin("torch", self.c.newest_torch, "pip"))
                self.add("EG105", f"{d.name} is not pinned to one release (`{d.spec}`)",
                         f"pin one release line, e.g. {pin}", d.line, package=d.name)
        rel = self.torch_release
        frozen = self.c.route(self.route).frozen_at
        if frozen and rel and line_key(rel) > line_key(frozen):
            return  # past a frozen channel's last release: EG111 says so, and where to go instead
        if rel and self.c.torch(rel, self.route) is None and re.match(r"^\d+\.\d+$", rel):
            route = self.c.route(self.route)
            known = route.released
            row = route.release(rel)
            d = (self.torch_conda + self.torch_pip)[0]
            if row is not None:
                what = (f"torch {rel} has no release evidence on {route.title} in envguard's data "
                        f"(status {row.status}: {row.source})")
            else:
                when = ("older than" if line_key(rel) < line_key(known[0].version) else
                        "newer than" if line_key(rel) > line_key(known[-1].version) else "missing from")
                what = (f"torch {rel} is {when} envguard's data for {route.title} "
                        f"({known[0].version}–{known[-1].version})")
            # the newest release that the file's own Python can run (2.15 has no Python 3.10 build)
            py = self._python_line()
            fits = [r.version for r in known if py is None or py in r.python] or [known[-1].version]
            self.add("EG106", f"{what}: its Python/CUDA/driver pairing is not checked",
                     f"use torch {fits[-1]}, or update envguard", d.line, package=d.name)

    def pip_rules(self) -> None:
        """EG107: a core package from pip is an error where conda provides the torch stack or the same package
        (two owners, mismatched binaries), on a platform both lines apply to. A torch stack from pip on conda's
        Python alone is PyTorch's own recommended install since the pytorch channel ended: one info line names
        that layout."""
        core = self.pip_core()
        conda_by_key: dict[str, list[_Dep]] = {}
        for c in self.conda:
            conda_by_key.setdefault(self._key(c), []).append(c)
        conda_stack = [d for d in self.conda if self._key(d) in ("torch", "torchvision", "torchaudio")
                       or d.name in TORCH_CONDA_NAMES + ("libtorch",)]
        layout: list[_Dep] = []
        for d in self.pip:
            key = self._key(d)
            via = f" (through {d.via})" if d.via else ""
            both = [c for c in conda_by_key.get(key, []) if _overlap(c.platforms, d.platforms)]
            stack = [c for c in conda_stack if _overlap(c.platforms, d.platforms)]
            if key in core and (stack or both):
                conda_name = "pytorch" if key == "torch" else key
                pin = ""
                lines = release_lines(d.version, "pip", _TORCH_UNIVERSE if key == "torch" else _universe((0, 1, 2), 40))
                if lines and len(lines) == 1:
                    pin = f"={next(iter(lines))}.*"
                beside = (f"conda's `{stack[0].spec}`" if stack and not both else f"conda's {conda_name}")
                self.add("EG107", f"{key} is installed by pip (`{d.spec}`{via}) beside {beside}: two managers for "
                         "one torch stack (two owners, mismatched binaries)",
                         f"move it to the conda dependencies as `{conda_name}{pin}` and delete the pip line, or "
                         "move the whole torch stack to pip", d.line, package=key)
            elif key in core:
                layout.append(d)
            elif both:
                self.add("EG123", f"{d.name} is requested from both conda and pip (`{d.spec}`)",
                         "keep one: delete the pip line or the conda one", d.line, package=key)
        if layout:
            names = ", ".join(self._key(d) + (f" through {d.via}" if d.via else "") for d in layout)
            from envguard.mixing import conda_cuda_library

            # pytorch-cuda beside a pip torch is EG108's to say
            cuda_libs = [d.name for d in self.conda if conda_cuda_library(d.name) and d.name != "pytorch-cuda"]
            if cuda_libs:
                self.add("EG107", f"the torch stack comes from pip ({names}) but conda installs CUDA libraries too "
                         f"({', '.join(cuda_libs[:3])}): the wheels bring their own CUDA runtime, so the environment "
                         "holds two, and what loads first decides which one a library gets",
                         f"drop {', '.join(cuda_libs[:3])} from the conda dependencies (the pip-only torch stack needs "
                         "none), or install the whole torch stack from conda-forge", layout[0].line, W,
                         package=self._key(layout[0]))
            elif not (self.torch_pip and any(d.name == "pytorch-cuda" for d in self.conda)):
                self.add("EG107", f"the torch stack comes from pip ({names}) on conda's Python: a supported layout "
                         "(PyTorch's own install since the pytorch channel ended) as long as conda installs no "
                         "torch, numpy or CUDA libraries of its own", "", layout[0].line, I,
                         package=self._key(layout[0]))

    @staticmethod
    def _key(d: _Dep) -> str:
        from envguard.model import canonical_name

        return canonical_name(d.name, "conda" if d.manager == "conda" else "pip")

    def cuda_rules(self) -> None:
        names = {d.name: d for d in self.conda}
        pcuda = names.get("pytorch-cuda")
        frozen = self.c.pytorch_channel_frozen_at
        # AnimateDiff: conda's pytorch-cuda, pip's torch, no conda pytorch
        if pcuda and self.torch_pip and not self.torch_conda:
            t = self.torch_pip[0]
            self.add("EG108", f"`{pcuda.spec}` comes from conda but torch from pip (`{t.spec}`): the pip wheel "
                     "carries its own CUDA runtime, so conda's CUDA line is not the one torch uses",
                     "install pytorch from conda and drop the pip torch (conda-forge: `pytorch=X.Y.*=cuda12*` "
                     "with `cuda-version`), or drop pytorch-cuda", pcuda.line, package="pytorch-cuda")
        tk = names.get("cudatoolkit")
        if tk and self.torch_conda:  # beside a torch from pip alone, EG107 (CUDA libraries beside the wheels')
            self._cudatoolkit(tk)
        if pcuda:
            after = self._torch_all_after(frozen)
            self.add("EG110", f"`{pcuda.spec}` only exists on the pytorch/nvidia channels, which stopped at "
                     f"torch {frozen}" + (f"; torch {_lines_text(self.torch_lines or ())} cannot use it"
                                          if after else ""),
                     f"on conda-forge use {self._conda_forge_cuda_pins(pcuda.version)}",
                     pcuda.line, E if after else W, package="pytorch-cuda")
            # which pytorch-channel build pairs with it matters only for a torch from that channel (EG108: pip's)
            rel = (self.c.torch(self.torch_release, compat.PYTORCH)
                   if self.torch_release and self.torch_conda else None)
            cl = release_lines(pcuda.version, "conda", _CUDA_UNIVERSE)
            if rel and cl and len(cl) == 1 and next(iter(cl)) not in rel.cuda:
                self.add("EG118", f"the pytorch channel has no CUDA {next(iter(cl))} build of torch {rel.version} "
                         f"(its CUDA lines: {', '.join(rel.cuda)})",
                         f"use {self.pin('pytorch-cuda', rel.cuda[-1])}", pcuda.line, package="pytorch-cuda")
        cv = names.get("cuda-version")
        if cv and self.route == compat.CONDA_FORGE:
            self._cuda_version_line(cv)
        for d in self.torch_conda:
            if self.route == compat.CONDA_FORGE and d.build:
                self._build_line(d)
        self._build_guard(names)

    def _cuda_platforms(self, dep: _Dep, rel: Any) -> list[str]:
        """The file's platforms where ``dep`` applies and the release has CUDA builds."""
        plats = [p for p in self.platforms if dep.platforms is None or p in dep.platforms]
        return [p for p in plats if rel.cuda_on(p)]

    def _lacking(self, lacking: list[str], plats: list[str]) -> list[str]:
        """The platforms to report as lacking a build. An export whose platform the file does not give away
        describes one machine on one of them: only a build no platform has is wrong."""
        return lacking if not self.one_machine or len(lacking) == len(plats) else []

    def _built_text(self, rel: Any, plats: list[str]) -> str:
        groups: dict[tuple[str, ...], list[str]] = {}
        for p in plats:
            groups.setdefault(rel.cuda_on(p), []).append(p)
        return ", ".join(f"for CUDA {' and '.join(lines)} on {', '.join(ps)}" for lines, ps in groups.items())

    def _cuda_version_line(self, cv: _Dep) -> None:
        """EG118: ``cuda-version X.Y`` that no conda-forge build of the pinned torch accepts on some platform (a
        ``cudaXYZ`` build depends on ``cuda-version >=X.Y,<X+1``)."""
        rel = self._release()
        cl = release_lines(cv.version, "conda", _CUDA_UNIVERSE)
        if rel is None or not cl or len(cl) != 1:
            return
        line = next(iter(cl))
        plats = self._cuda_platforms(cv, rel)
        lacking = self._lacking([p for p in plats if rel.build_line(p, line) is None], plats)
        if not lacking:
            return
        choices = rel.cuda_choices(plats)
        fix = f"use {self.pin('cuda-version', _nearest_line(line, choices))}" if choices else self.per_platform_pin()
        self.add("EG118", f"conda-forge builds torch {rel.version} {self._built_text(rel, lacking)}: no build there "
                 f"accepts `{cv.spec}`", fix, cv.line, package="cuda-version")

    def _build_line(self, d: _Dep) -> None:
        """EG118: a build string that names a CUDA line conda-forge never built for the pinned torch."""
        rel = self._release()
        line = compat.cuda_in_build(d.build or "")
        if rel is None or not line or line == "any":
            return
        plats = self._cuda_platforms(d, rel)
        if "." in line:
            lacking = [p for p in plats if line not in rel.cuda_on(p)]
        else:
            lacking = [p for p in plats if not any(c.split(".")[0] == line for c in rel.cuda_on(p))]
        lacking = self._lacking(lacking, plats)
        if lacking:
            self.add("EG118", f"conda-forge builds torch {rel.version} {self._built_text(rel, lacking)}: no build "
                     f"matches `{d.spec}`", f"write {self._conda_forge_cuda_pins(line if '.' in line else None)}",
                     d.line, package=d.name)

    def _conda_forge_cuda_pins(self, line_hint: str | None) -> str:
        """`pytorch=X.Y.*=cudaN*` with a `cuda-version` that conda-forge builds for the file's torch."""
        cf = self.c.route(compat.CONDA_FORGE)
        rel = (cf.release(self.torch_release) if self.torch_release else None) or cf.release(cf.newest)
        if rel is None or not rel.released:
            rel = cf.release(cf.newest)
        assert rel is not None
        plats = [p for p in self.platforms if rel.cuda_on(p)] or list(rel.cuda_platforms)
        choices = rel.cuda_choices(plats) or list(rel.cuda)
        hints = sorted(release_lines(line_hint, "conda", _CUDA_UNIVERSE) or (), key=line_key) if line_hint else []
        hint = hints[0] if hints else (line_hint if line_hint and re.fullmatch(r"\d+\.\d+", line_hint) else None)
        same = [c for c in choices if hint and c.split(".")[0] == hint.split(".")[0]]
        line = same[-1] if same else (_nearest_line(hint, choices) if hint else choices[-1])
        return (f"{self.build_pin('pytorch', f'{rel.version}.*', 'cuda' + line.split('.')[0] + '*')} with "
                f"{self.pin('cuda-version', line)}")

    def _cudatoolkit(self, tk: _Dep) -> None:
        """EG109: cudatoolkit is CUDA 11 packaging. conda-forge's torch 2.0-2.5 CUDA 11.x builds really use it;
        every other torch 2 build does not, so the solver may pick a CPU build or a mismatched runtime."""
        if self.torch_lines is None:
            self.add("EG109", f"`{tk.spec}` with an unpinned torch: the solver picks the newest torch 2, which does "
                     "not use cudatoolkit (CUDA 11 packaging)",
                     f"pin torch and use {self._conda_forge_cuda_pins(None)}", tk.line, W, package="cudatoolkit")
            return
        if not self.torch_lines or not all(line_key(v) >= line_key("2") for v in self.torch_lines):
            return
        tk_lines = release_lines(tk.version, "conda", _CUDA_UNIVERSE)
        if self.route == compat.CONDA_FORGE and self.torch_conda:
            rels = [self.c.torch(v, compat.CONDA_FORGE) for v in self.torch_lines]
            cuda11 = [r for r in rels if r is not None and any(c.startswith("11.") for c in r.cuda)]
            if len(cuda11) == len(rels) and (tk_lines is None or all(
                    any(line in r.cuda for r in cuda11) for line in tk_lines)):
                return  # conda-forge's own CUDA 11 packaging of torch 2.0-2.5
        rel = self.torch_release or min(self.torch_lines, key=line_key)
        self.add("EG109", f"`{tk.spec}` with torch {rel}: cudatoolkit is CUDA 11 packaging that this torch's builds "
                 "do not use, so the solver can pick a CPU build or a mismatched CUDA runtime",
                 f"drop cudatoolkit and use {self._conda_forge_cuda_pins(tk.version)}", tk.line,
                 package="cudatoolkit")

    def _build_guard(self, names: dict[str, _Dep]) -> None:
        if names.keys() & {"pytorch-cuda", "cpuonly"}:
            return  # the legacy channel picks the variant through pytorch-cuda (CUDA) or cpuonly (CPU)
        signals = sorted(n for n in names if n == "cuda-version" or n == "cudatoolkit" or n.startswith("cuda-")
                         or n in ("cudnn", "nccl"))
        if "nvidia" in self.channel_names:
            signals.append("the nvidia channel")
        signals += self.cuda_signals()
        if not signals:
            return
        # pytorch-gpu and pytorch-cpu force the build variant themselves: they are build guards
        guards = [d for d in self.torch_conda if d.name in ("pytorch-gpu", "pytorch-cpu")]
        for d in self.torch_conda:
            if d.name != "pytorch" or d.build:
                continue
            if d.platforms is not None and not any(p.startswith(("linux", "win")) for p in d.platforms):
                continue  # an "# [osx]" line: no CUDA there
            if any(g.platforms is None or d.platforms is not None and set(d.platforms) <= set(g.platforms)
                   for g in guards):
                continue
            cv = names.get("cuda-version")
            major = ""
            if cv is not None:
                cl = release_lines(cv.version, "conda", _CUDA_UNIVERSE)
                if cl and len({c.split(".")[0] for c in cl}) == 1:
                    major = next(iter(cl)).split(".")[0]
            ver = f"{self.torch_release}.*" if self.torch_release else "*"
            self.add("EG112", f"`{d.spec}` has no build guard, yet the file names CUDA ({', '.join(signals[:3])}): "
                     "whether the solver installs a CUDA or a CPU build then depends on the machine that locks",
                     f"write {self.spec_fix('pytorch', ver, f'cuda{major}*')} for a CUDA build (or "
                     f"{self.spec_fix('pytorch', ver, 'cpu*')} for a CPU one)", d.line, package="pytorch")

    def channel_rules(self) -> None:
        frozen = self.c.pytorch_channel_frozen_at
        has_cf = any(_is_conda_forge(ch) for ch, _ in self.channels)
        for ch, line in self.channels:
            n = _channel_name(ch)
            if has_cf and _is_defaults(ch):
                self.add("EG113", f"channel `{ch}` mixed with conda-forge: their binaries are built against "
                         "different libraries and break each other", "remove it and add `nodefaults`", line)
            if ch.strip().lower().startswith("http://"):
                self.add("EG114", f"channel `{ch}` is plain HTTP: packages can be altered in transit",
                         "use https://", line)
            if n == "pytorch" and not self._pytorch_channel_used():
                self.add("EG130", "channel `pytorch` is listed but nothing in this file comes from it (every "
                         "package it carries is either not requested or pinned to another channel)",
                         "remove it from channels", line)
            elif n == "pytorch":
                after = self._torch_all_after(frozen)
                self.add("EG111", f"the `pytorch` channel is frozen at torch {frozen} (pytorch#138506)"
                         + (f"; torch {_lines_text(self.torch_lines or ())} is not on it" if after else ""),
                         "use conda-forge (channels: conda-forge, nodefaults) with `pytorch=X.Y.*`",
                         line, E if after else W)
            if n in self.c.nightly_channels:
                self.add("EG120", f"channel `{ch}` deletes its builds: the environment cannot be rebuilt later",
                         "use a released torch from conda-forge", line)
        for d in self.conda:
            if not d.channel:
                continue
            n = d.channel.lower()
            if n == "pytorch" and d.name in TORCH_CONDA_NAMES + ("torchvision", "torchaudio", "pytorch-cuda") \
                    and "pytorch" not in self.channel_names:
                after = self._torch_all_after(frozen)
                self.add("EG111", f"`{d.spec}` uses the `pytorch` channel, frozen at torch {frozen}",
                         "use conda-forge with `pytorch=X.Y.*`", d.line, E if after else W, package=d.name)
            if n in self.c.nightly_channels:
                self.add("EG120", f"`{d.spec}` comes from `{d.channel}`, which deletes its builds",
                         "use a released torch from conda-forge", d.line, package=d.name)
            listed = n in self.channel_names or (_is_defaults(n) and "defaults" in self.channel_names)
            if not listed:
                self.add("EG119", f"`{d.spec}` names channel `{d.channel}`, which `channels:` does not list: "
                         "other tools and the lock's channel list will not know it",
                         f"add `{d.channel}` to channels, or drop the `{d.channel}::` prefix", d.line,
                         package=d.name)

    def _pytorch_channel_used(self) -> bool:
        return any(d.name in _PYTORCH_CHANNEL_PACKAGES and (d.channel is None or d.channel.lower() == "pytorch")
                   for d in self.conda)

    # -- mixing (envguard.mixing), on the requested specs as records -------------------------------------
    def records(self, platform: str | None) -> tuple[list[Any], dict[int, int | None]]:
        """The specs requested on ``platform`` (None: those without a selector) as records for envguard.mixing:
        exact pins keep their version, a CUDA package pinned to one line keeps that line. The second value
        maps each record to its line in the file."""
        from envguard.mixing import cuda_major
        from envguard.model import Package

        out: list[Any] = []
        lines: dict[int, int | None] = {}
        for d in self.conda + self.pip:
            if d.platforms is not None and (platform is None or platform not in d.platforms):
                continue
            version = _exact_version(d.version) or ""
            if not version and d.manager == "conda" and d.version:
                got = release_lines(d.version, "conda", _CUDA_UNIVERSE)
                line = next(iter(got)) if got and len(got) == 1 else ""
                if line and cuda_major(Package(d.name, f"{line}.0")) is not None:
                    version = line
            if not version and d.version and d.manager == "conda":
                version = d.version.removeprefix("==")  # shown as written: "1.13.*"
            build = d.build if d.build and "*" not in d.build else None
            rec = Package(name=d.name, version=version, manager=d.manager, build=build,  # type: ignore[arg-type]
                          channel=d.channel if d.manager == "conda" else None)
            out.append(rec)
            lines[id(rec)] = d.line
        return out, lines

    def mixing_rules(self) -> None:
        from envguard.mixing import mixing

        list_level = any(f.code == "EG113" for f in self.findings)
        selected = sorted({p for d in self.conda + self.pip for p in (d.platforms or ())})
        seen: set[tuple[str, str]] = set()
        for platform in [None, *selected]:
            records, lines = self.records(platform)
            for m in mixing(records, context="spec"):
                code = MIX_CODES[m.rule]
                if (code == "EG113" and list_level) or (code, m.message) in seen:
                    continue  # the channels list already says so / another platform did
                if code == "EG158" and any(f.code == "EG107" and f.package == "torch" for f in self.findings):
                    continue  # EG107 already stops the pip torch line in a spec
                seen.add((code, m.message))
                if m.rule == "cuda-lines" and {r.manager for r in m.records} == {"conda", "pip"}:
                    # the same two CUDA runtimes EG107's warning names, here with their lines: say it once
                    self.findings = [f for f in self.findings if not (f.code == "EG107" and f.severity is W)]
                where = f" (on {platform})" if platform else ""
                self.add(code, m.message + where, m.fix, lines.get(id(m.records[0])), package=m.package)

    def url_rules(self) -> None:
        """http:// and credentials in pip lines (spec.validate covers channel credentials)."""
        flagged = {f.line for f in self.findings if f.code == "EG115"}
        for i, dep in enumerate(self.data.get("dependencies") or []):
            if not (isinstance(dep, dict) and isinstance(dep.get("pip"), list)):
                continue
            for j, item in enumerate(dep["pip"]):
                if not isinstance(item, str):
                    continue
                line = self.pos.line("dependencies", i, "pip", j)
                for url in re.findall(r"[a-zA-Z][a-zA-Z0-9+.-]*://\S+", item):
                    if url.lower().startswith(("http://", "git+http://")):
                        self.add("EG114", f"pip entry `{item.strip()}` uses plain HTTP", "use https://", line)
                    if has_credentials(url) and line not in flagged:
                        flagged.add(line)
                        self.add("EG115", f"pip entry `{item.strip()}` carries a literal credential",
                                 "use ${VAR} placeholders, e.g. https://${USER}:${TOKEN}@host/simple", line)

    def exactness_rules(self) -> None:
        for d in self.conda:
            # only where X.Y names a release series; exports pin real X.Y versions on purpose
            if d.name not in TORCH_CONDA_NAMES + ("python", "cuda-version"):
                continue
            if d.build and d.version and d.version.startswith("==") and re.search(
                    r"(?<![=<>!~])=\d+\.\d+=", d.spec.replace(" ", "")):
                written = d.version[2:]
                self.add("EG122", f"`{d.spec}` means exactly {written}.0: a build string makes the version exact",
                         f"write `{d.name}={written}.*={d.build}`", d.line, package=d.name)

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
        return self.findings


def _overlap(a: tuple[str, ...] | None, b: tuple[str, ...] | None) -> bool:
    """Whether two selectors' platforms meet (None: every platform)."""
    if a is None or b is None:
        return a != () and b != ()
    return bool(set(a) & set(b))


def _exact_version(constraint: str | None) -> str | None:
    """``==2.1.0`` -> 2.1.0 (a pin to one version); None for ranges and wildcards."""
    if not constraint:
        return None
    m = re.match(r"^\s*(?:==|===)?\s*([0-9][0-9A-Za-z._+!-]*)\s*$", constraint)
    return m.group(1) if m and "*" not in constraint else None


def lint_environment(path: str, text: str, base_dir: Path | None = None) -> list[Finding]:
    """Lint the text of an environment file (or a conda env export); ``path`` names it."""
    from envguard.yamlio import load_with_lines

    data, positions = load_with_lines(path, text)
    return _EnvLinter(path, text, data, positions, base_dir or Path(path).parent).run()


# ---------------------------------------------------------------- files


_PACKAGE_URL_LINE = re.compile(r"^\s*\S+://\S+\.(?:conda|tar\.bz2)(?:#\S*)?\s*$")


def _kind(path: str, text: str) -> tuple[str, Any]:
    from envguard.sources import detect_kind
    from envguard.sources.pixi_manifest import looks_like_toml, parse_toml
    from envguard.yamlio import load_fast

    if detect_kind(text) == "explicit":
        return "explicit", None
    if looks_like_toml(text):
        data = parse_toml(text, path)
        if detect_kind(text, data) == "pixi-manifest":
            return "pixi-manifest", data
        raise UserError("a TOML file without pixi's tables: no [workspace] (or [project]) with channels, and no "
                        "[tool.pixi]", file=path, fix="pass a pixi.toml, or a pyproject.toml with [tool.pixi]")
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    if lines and all(_PACKAGE_URL_LINE.match(ln) for ln in lines):
        raise UserError("package URLs without an @EXPLICIT line: conda and envguard read such a file only "
                        "after that marker", file=path, fix="add a line `@EXPLICIT` before the first URL")
    data = load_fast(path, text)
    kind = detect_kind(text, data)
    if kind in ("environment", "export"):
        return "environment", data
    if kind in ("conda-lock", "pixi"):
        return kind, data
    if isinstance(data, dict) and ("channels" in data or "name" in data):
        return "environment", data  # an environment file without dependencies: spec.validate says so
    raise UserError("neither an environment file nor a lock file", file=path,
                    fix="pass environment.yml, pixi.toml, conda-lock.yml, pixi.lock or an @EXPLICIT file")


class LintReadError(UserError):
    """A file lint cannot read; ``findings`` holds what its raw text showed anyway (literal credentials)."""

    def __init__(self, cause: UserError, findings: list[Finding]) -> None:
        super().__init__(cause.message)
        for attr in ("file", "key", "line", "column", "problem", "reason", "fix", "command"):
            setattr(self, attr, getattr(cause, attr, None))
        self.findings = findings


def _raw_credentials(path: str, text: str, kind: str | None, found: list[Finding]) -> list[Finding]:
    """The credential scan of the raw text, for lines no other finding already named (EG115 for a spec)."""
    from envguard.lint.locks import credential_finding, credential_lines

    if kind in ("conda-lock", "pixi", "explicit"):
        return []  # lint_lock scanned the same raw text (EG155)
    code = "EG115" if kind in ("environment", "pixi-manifest") else "EG155"
    named = {f.line for f in found if f.code in ("EG115", "EG155")}
    if not any(n not in named for n in credential_lines(text)):
        return []
    if kind in ("environment", "pixi-manifest"):
        return [Finding("EG115", Severity.ERROR, "a literal credential in a URL", "use ${VAR} placeholders, e.g. "
                        "https://${USER}:${TOKEN}@host/..., and revoke the one committed", path, n)
                for n in credential_lines(text) if n not in named]
    return credential_finding(path, text, code) if not named else []


def lint_text(text: str, path: str = "environment.yml", base_dir: Path | None = None) -> list[Finding]:
    """Lint file content already in memory; ``path`` is only used to name the file.

    A file lint cannot read raises :class:`LintReadError`, whose ``findings`` are what the raw text showed.
    """
    if not text.strip():
        raise UserError("empty file", file=path, fix="pass an environment file or a lock file")
    try:
        kind, data = _kind(path, text)
        if kind == "environment":
            found = lint_environment(path, text, base_dir or Path(path).parent)
        elif kind == "pixi-manifest":
            from envguard.lint.manifest import lint_manifest

            found = lint_manifest(path, text, data)
        else:
            from envguard.lint.locks import lint_lock

            found = lint_lock(kind, path, text, data)
    except UserError as e:
        raise LintReadError(e, _raw_credentials(path, text, None, [])) from None
    return found + _raw_credentials(path, text, kind, found)


def lint_file(path: str | Path) -> list[Finding]:
    """Lint one file of any supported kind; an unreadable file raises :class:`UserError`."""
    from envguard.yamlio import read_text

    return lint_text(read_text(path), str(path), Path(path).parent)


def default_targets(directory: str | Path = ".") -> list[Path]:
    """environment.yml (and conda-lock.yml when present) in ``directory``."""
    d = Path(directory)
    env = next((d / n for n in ENV_FILE_NAMES if (d / n).is_file()), None)
    if env is None:
        raise UserError(f"no environment.yml in {d.resolve()}", fix="pass the files to lint, or run `envguard init`")
    return [env] + [d / n for n in LOCK_FILE_NAMES if (d / n).is_file()]


def lint_paths(paths: Iterable[str | Path]) -> LintResult:
    """Lint every file; unreadable ones are reported in ``unreadable``, the rest still linted."""
    result = LintResult()
    for p in paths:
        result.files.append(str(p))
        try:
            result.findings += lint_file(p)
        except UserError as e:
            result.unreadable.append(e.message)
            result.findings += getattr(e, "findings", [])  # a secret in an unreadable file is still reported
    return result


__all__ = ["RULES", "Rule", "LintResult", "LintReadError", "MIX_CODES", "lint_file", "lint_text", "lint_paths", "lint_environment", "default_targets",
           "release_lines"]
