"""``envguard export``: adopt an environment that already works into a spec and a lock, without a solve.

The prefix is read as it is (conda-meta records, pip's dist-infos); what was requested becomes
``environment.yml`` (envguard.export.conda, envguard.export.pipdists), every installed package becomes
``conda-lock.yml`` for this platform, written by the lock wing with conda-lock's models, writer and
content hash (envguard.lock.write_adopted), or an ``@EXPLICIT`` file and a hashed requirements file.
What the files cannot reproduce is named, one finding per kind, with check's and lint's own rules where
they apply. Every output replaces an existing file only with ``force``, atomically, after the whole
export succeeded.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from envguard.errors import BackendError, ExitCode, UserError, os_error
from envguard.export.codes import CODES, finding, listed
from envguard.export.conda import record_channel, record_url
from envguard.export.files import ExplicitLine, SpecPlan
from envguard.export.pipplan import plan_pip, torch_label_index
from envguard.findings import Finding, Severity, sort_findings
from envguard.prefix import PrefixInfo
from envguard.project import lock_for_spec
from envguard.versions import major_minor

E, W, I = Severity.ERROR, Severity.WARNING, Severity.INFO  # noqa: E741 - the severities by their letters
FORMATS = ("lock", "environment", "explicit")
SPEC_FILE = "environment.yml"
META_PREFIX = "envguard.export.prefix"
# lint's rules about channels, applied to the exported file: mixing defaults with conda-forge,
# the frozen pytorch channel, nightly channels whose builds disappear.
LINT_CHANNEL_CODES = frozenset({"EG111", "EG113", "EG120"})


@dataclass(frozen=True)
class Written:
    path: Path
    kind: str  # "environment" | "lock" | "explicit" | "requirements"
    changed: bool
    detail: str = ""


@dataclass
class ExportResult:
    prefix: Path
    shown: str  # the prefix as the files name it: ~-relative, credentials masked
    platform: str
    kind: str  # "conda" | "venv" | "other"
    format: str
    requested_from: str  # "history" | "records" | "inferred" | "pinned" | "none"
    torch: str | None  # "torch 2.13.0+cpu (CPU build) from pip", for the summary
    files: list[Written] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def exit_code(self) -> int:
        """1 when something cannot be reproduced from the files (an error finding), else 0."""
        return int(ExitCode.PROBLEMS) if any(f.severity is E for f in self.findings) else int(ExitCode.OK)


# --------------------------------------------------------------------------- the target


def shown_prefix(prefix: Path, env: Mapping[str, str]) -> str:
    """``~/envs/train`` under the home directory, else the path; credentials masked either way."""
    from envguard.redact import redact

    home = env.get("HOME") or str(Path.home())
    p = str(prefix)
    if home and home != "/" and (p == home or p.startswith(home.rstrip("/") + "/")):
        p = "~" + p[len(home.rstrip("/")):]
    return redact(p)


def _check_target(prefix: Path, info: PrefixInfo) -> str:
    from envguard.platforms import python_in_prefix

    if info.is_conda:
        return "conda"
    if info.is_venv:
        return "venv"
    if info.site_packages and os.path.exists(python_in_prefix(prefix)):
        return "other"
    raise UserError("not an environment (no conda-meta/, pyvenv.cfg or site-packages with an interpreter)",
                    file=str(prefix), key="-p/-n", fix="pass the root directory of a conda environment or virtualenv")


def _env_name(prefix: Path, name: str | None, built: Any = None) -> str:
    """``--name``; else the name of the spec ``envguard create`` built the prefix from (conda-meta/history);
    else the prefix's directory name, as conda names an environment (a ``.venv``: its project's directory)."""
    if name:
        return name
    if built is not None and built.name:
        return str(built.name)
    base = prefix.name if not prefix.name.startswith(".") else prefix.parent.name
    return base.lstrip(".") or "env"


# --------------------------------------------------------------------------- outputs


def _targets(out_dir: Path, fmt: str, platform: str, with_conda: bool, with_pip: bool) -> dict[str, Path]:
    if fmt == "environment":
        return {"environment": out_dir / SPEC_FILE}
    if fmt == "lock":
        spec = out_dir / SPEC_FILE
        return {"environment": spec, **({"lock": lock_for_spec(spec)} if with_conda else {})}
    out: dict[str, Path] = {}
    if with_conda:
        out["explicit"] = out_dir / f"conda-{platform}.lock"
    if with_pip or not with_conda:
        out["requirements"] = out_dir / f"requirements-{platform}.txt"
    return out


def _refuse_existing(targets: Mapping[str, Path], force: bool) -> None:
    from envguard.filekind import require_lock_target

    for what, path in targets.items():
        if what in ("lock", "explicit") and path.is_file():  # a lock replaces only a lock, --force or not
            require_lock_target(path, key="-o", accept="conda-lock" if what == "lock" else "explicit")
        if path.is_dir():
            raise UserError("is a directory, expected a file", file=str(path), key="-o",
                            fix="remove it, or pass -o another directory")
        if (path.exists() or path.is_symlink()) and not force:
            raise UserError("already exists", file=str(path), key="-o",
                            fix="pass --force to replace it, or -o another directory")


def _prepare_dir(out_dir: Path) -> None:
    if out_dir.exists() and not out_dir.is_dir():
        raise UserError("is not a directory", file=str(out_dir), key="-o", fix="pass a directory with -o")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise os_error(e, "cannot create", out_dir) from e


def _install(staged: Path, target: Path) -> bool:
    """Move a staged file over ``target`` (an atomic rename); False when the bytes were the same already."""
    try:
        if target.is_file() and not target.is_symlink() and target.read_bytes() == staged.read_bytes():
            return False
        with open(staged, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(staged, target)
    except OSError as e:
        raise os_error(e, "cannot write", target) from e
    return True


@contextmanager
def _writing(target: Path) -> Iterator[None]:
    """A file staged for ``target`` that cannot be written (a full disk, a read-only file system) is one line
    naming ``target``, never the staging name nobody asked for; the staging directory goes with it."""
    try:
        yield
    except OSError as e:
        raise os_error(e, "cannot write", target) from e
    except BackendError as e:  # the lock wing's writer names the staged file: name the target instead
        if isinstance(e.__cause__, OSError):
            raise os_error(e.__cause__, "cannot write", target) from e.__cause__
        raise


# --------------------------------------------------------------------------- conda


def _plan_conda(info: PrefixInfo) -> tuple[list[Any], list[ExplicitLine], list[Finding]]:
    from envguard.export.conda import toposorted
    from envguard.lock import AdoptedPackage

    locked: list[Any] = []
    lines: list[ExplicitLine] = []
    findings: list[Finding] = []
    local: dict[str, list[str]] = {}
    masked: dict[str, list[str]] = {}
    for r in toposorted(info.conda):
        url = record_url(r)
        if url is None:
            findings.append(finding(
                "EG602", f"conda package {r.name} {r.version} {r.build} has no URL and no channel (installed from "
                "a local file?)", "publish it to a channel and reinstall it from there",
                file=f"conda-meta/{r.meta_file}", package=r.name))
            continue
        channel = record_channel(r) or url
        if url.startswith("file:"):
            local.setdefault(channel, []).append(r.name)
        if "***" in url:
            masked.setdefault(channel, []).append(r.name)
        locked.append(AdoptedPackage(name=r.name, version=r.version, manager="conda", url=url, md5=r.md5,
                                     sha256=r.sha256, depends=r.depends))
        lines.append(ExplicitLine(url, r.sha256, r.md5))
    for channel, names in sorted(local.items()):
        findings.append(finding(
            "EG603", f"{len(names)} conda package{'s' * (len(names) != 1)} from the local channel {channel}: "
            f"{listed(sorted(names))}", "serve the channel over https (or a shared path every machine mounts) "
            "before building elsewhere"))
    for channel, names in sorted(masked.items()):
        findings.append(finding(
            "EG604", f"channel {channel} needs a credential, masked as *** for {listed(sorted(names))}",
            "write it as ${VAR} placeholders (e.g. https://${USER}:${TOKEN}@host/channel) in environment.yml, "
            "then `envguard lock`"))
    return locked, lines, findings


def _torch(info: PrefixInfo, driver_info_fn: Callable[[], Any] | None) -> tuple[str | None, list[Finding]]:
    """The torch build for the summary, and a note when it is a CPU build (a warning on a GPU machine)."""
    from envguard.check import installed_torch

    tb = installed_torch(info)
    if tb.source == "none":
        return None, []
    build = f"CUDA {tb.cuda} build" if tb.cuda else ("CPU build" if tb.cpu else "build not recorded")
    rec = next((r for r in info.conda if r.name in ("pytorch", "pytorch-gpu", "pytorch-cpu", "torch")), None)
    if rec is not None:
        where = f"conda channel {record_channel(rec) or '?'}"
    else:
        label = torch_label_index(tb.version or "")
        where = f"pip ({label})" if label else "pip"
    desc = f"torch {tb.version} ({build}) from {where}"
    if not tb.cpu:
        return desc, []
    if driver_info_fn is None:
        from envguard.driver import get_driver_info

        driver_info_fn = get_driver_info
    driver = driver_info_fn()
    message = f"torch {tb.version} is a CPU build ({tb.evidence}): the files pin that build"
    if driver is not None:
        message += f"; this machine has an NVIDIA driver ({getattr(driver, 'driver_version', '?')})"
    fix = ("if it should train on a GPU, ask for a CUDA build in environment.yml (conda-forge: "
           "`pytorch=X.Y.*=cuda12*` with `cuda-version`; pip: the cuXXX index) and run `envguard lock`")
    return desc, [finding("EG620", message, fix, severity=W if driver is not None else I, package="torch")]


def _mixed_hashes(reqs: Sequence[Any], filename: str) -> list[Finding]:
    """pip turns on hash-checking for a whole requirements file as soon as one line has a ``--hash``, and then
    refuses every line without one (a version-control URL can never have one)."""
    lines = [r for r in reqs if r.comment is None]
    unhashed = sorted((r.name for r in lines if not r.sha256), key=str.lower)
    if not unhashed or len(unhashed) == len(lines):
        return []
    return [finding(
        "EG619", f"{filename} has --hash on {len(lines) - len(unhashed)} of {len(lines)} lines: pip then checks "
        f"every line and refuses those of {listed(unhashed)}", "export again where the index has them "
        "(--index-url URL), or install those lines from a requirements file of their own")]


_HEADERS = {
    "history": "Requested specs from conda-meta/history.",
    "records": "Requested specs from the conda-meta records.",
    "inferred": "Requested specs inferred: the packages nothing else depends on.",
    "pinned": "Every requested package pinned to its installed build (--pinned).",
    "none": "Not a conda environment: python and pip from conda-forge, the rest from pip.",
}


def _spec_plan(target: Path, shown: str, info: PrefixInfo, name: str | None, pip_spec: list[str],
               repositories: list[str], pinned: bool, platform: str, built: Any = None) -> tuple[SpecPlan, str]:
    """What environment.yml says, and where its conda specs came from."""
    from envguard.export import conda as conda_side

    if info.is_conda:
        request = conda_side.requested_specs(target, info.conda, pinned=pinned, needs_pip=bool(pip_spec))
        specs, source, channels = request.specs, ("pinned" if pinned else request.source), conda_side.channels(
            info.conda)
    else:  # a virtualenv: its python is the host's, conda-forge has the same release
        python = info.python_version or ""
        version = ".".join(python.split(".")[:3]) if pinned else (major_minor(python) or python)
        specs = ([f"python={version}"] if version else []) + ["pip"]
        source, channels = ("pinned" if pinned else "none"), ["conda-forge"]
    header = [f"Written by `envguard export` from {shown} ({platform}).", _HEADERS[source]]
    if built is not None and source == "history" and built.conda_specs is not None:
        header[-1] = "Requested specs from conda-meta/history: the spec `envguard create` built it from."
    from envguard.variables import state_variables

    plan = SpecPlan(name=_env_name(target, name, built), channels=channels or ["conda-forge"], conda=specs,
                    pip=pip_spec, platform=platform, pip_repositories=repositories, header=header,
                    variables=state_variables(target) if info.is_conda else {})
    return plan, source


def _lint_channels(plan: SpecPlan, spec_target: Path, written: bool) -> list[Finding]:
    """lint's channel rules on the exported file. The pip: section comes after the channels and the conda
    dependencies and no channel rule reads it: the part before it is linted, so the lines are the file's."""
    from envguard.export.files import environment_yml
    from envguard.lint import lint_text

    out = []
    for f in lint_text(environment_yml(replace(plan, pip=[], pip_repositories=[])), str(spec_target)):
        if f.code in LINT_CHANNEL_CODES:  # about the environment itself, whether the spec is written or not
            out.append(f if written else replace(f, file=None, line=None))
    return out


# --------------------------------------------------------------------------- the command


def export(
    prefix: str | os.PathLike[str] | None = None,
    *,
    name: str | None = None,
    output: str | os.PathLike[str] | None = None,
    fmt: str = "lock",
    pinned: bool = False,
    force: bool = False,
    deep: bool = False,
    index_urls: Sequence[str] | None = None,
    use_index: bool = True,
    index_timeout: float = 15.0,
    env: Mapping[str, str] | None = None,
    driver_info_fn: Callable[[], Any] | None = None,
) -> ExportResult:
    """Export one environment. Raises UserError (2) for bad input; what cannot be reproduced is a finding."""
    from envguard.check import MIXING_CODES, mixing_findings, prefix_findings
    from envguard.envs import resolve_target
    from envguard.export.index import pip_index_urls
    from envguard.export.pipdists import read_dists
    from envguard.platforms import host_platform
    from envguard.prefix import inspect_prefix

    started = time.perf_counter()
    env = os.environ if env is None else env
    if fmt not in FORMATS:
        raise UserError(f"unknown format {fmt!r}", key="--format", fix=f"use one of {', '.join(FORMATS)}")
    if index_timeout <= 0:
        raise UserError(f"the index timeout must be positive, got {index_timeout:g}", fix="pass e.g. 15 seconds")
    target = resolve_target(prefix, name)
    info = inspect_prefix(target)
    kind = _check_target(target, info)
    platform = host_platform()
    out_dir = Path(output) if output is not None else Path.cwd()
    shown = shown_prefix(target, env)

    from envguard.history import read_built

    built = read_built(target)  # what `envguard create` recorded: the spec's name, specs and pip packages
    dists = read_dists(info)
    targets = _targets(out_dir, fmt, platform, info.is_conda, bool(dists))
    _refuse_existing(targets, force)  # before any index is asked anything
    indexes = [u.rstrip("/") for u in index_urls] if index_urls else pip_index_urls(env)
    hashed = "lock" in targets or "requirements" in targets  # files that carry pip hashes
    pip = plan_pip(dists, indexes, use_index and hashed, index_timeout, built=built,
                   python_version=info.python_version)
    if not hashed:  # only the spec is written: nothing about hashes concerns it
        pip.findings = [f for f in pip.findings if f.code not in ("EG614", "EG616", "EG618")]
    locked_conda, explicit_lines, findings = _plan_conda(info)
    findings += pip.findings
    if "requirements" in targets:
        findings += _mixed_hashes(pip.requirements, targets["requirements"].name)

    plan, requested_from = _spec_plan(target, shown, info, name, pip.spec, pip.repositories, pinned, platform,
                                      built)
    if not info.is_conda and fmt == "lock":
        findings.append(finding(
            "EG621", f"not a conda environment ({kind}): python is not a conda package, so no conda-lock.yml was "
            "written", "run `envguard lock` on the exported environment.yml: it solves python from conda-forge and "
            "pins the pip: section with hashes"))
    inferred = [w for w, on in (("conda", requested_from == "inferred"), ("pip", pip.inferred and pip.spec)) if on]
    if inferred:
        findings.append(finding(
            "EG601", f"no record of what was requested ({' and '.join(inferred)}): the specs are the packages "
            "nothing else depends on", "review environment.yml and keep what the project needs"))
    torch_desc, torch_findings = _torch(info, driver_info_fn)
    if torch_desc:
        plan.header.append(torch_desc + ".")
    findings += torch_findings
    problems = None
    if deep and info.is_conda:
        from envguard.prefix import verify_files

        problems = verify_files(info, deep=True)
    static = prefix_findings(info, file_problems=problems)
    # check's mixing rules on the installed records (CUDA lines, OpenMP runtimes, torch twice), as check applies
    # them; channel mixing is lint's EG113 on the exported file below
    findings += static + [f for f in mixing_findings(info.packages(platform), static)
                          if f.code != MIXING_CODES["channels"]]
    findings += _lint_channels(plan, out_dir / SPEC_FILE, "environment" in targets)

    cuda = info.record("cuda-version")
    written = _write(targets, out_dir, shown, plan, locked_conda, explicit_lines, pip, platform,
                     cuda=(major_minor(cuda.version) or cuda.version) if cuda else None)
    return ExportResult(
        prefix=target, shown=shown, platform=platform, kind=kind, format=fmt,
        requested_from=requested_from, torch=torch_desc, files=written, findings=sort_findings(findings),
        seconds=time.perf_counter() - started)


def _write(targets: Mapping[str, Path], out_dir: Path, shown: str, plan: SpecPlan, locked_conda: list[Any],
           explicit_lines: list[ExplicitLine], pip: Any, platform: str, cuda: str | None) -> list[Written]:
    """Every file into a staging directory beside the targets, then each moved into place."""
    from envguard.export import files
    from envguard.export.index import strip_credentials

    _prepare_dir(out_dir)
    with _writing(next(iter(targets.values()))):
        staging = Path(tempfile.mkdtemp(prefix=".envguard-export-", dir=out_dir))
    try:
        staged: dict[str, Path] = {}
        if "environment" in targets:
            staged["environment"] = staging / SPEC_FILE
            with _writing(targets["environment"]):
                staged["environment"].write_text(files.environment_yml(plan), encoding="utf-8")
        if "lock" in targets:
            from envguard.lock import write_adopted

            with _writing(targets["lock"]):
                spec = staged["environment"]
                staged["lock"] = write_adopted(spec, locked_conda + pip.locked, lockfile=lock_for_spec(spec),
                                               platform=platform, cuda=cuda,
                                               custom={META_PREFIX: shown}).lockfile
        header = [f"Written by `envguard export` from {shown}."]
        if "explicit" in targets:
            staged["explicit"] = staging / targets["explicit"].name
            with _writing(targets["explicit"]):
                staged["explicit"].write_text(files.explicit(explicit_lines, platform, header, pip.requirements),
                                              encoding="utf-8")
        if "requirements" in targets:
            staged["requirements"] = staging / targets["requirements"].name
            with _writing(targets["requirements"]):
                staged["requirements"].write_text(files.requirements(
                    pip.requirements, [strip_credentials(i) for i in pip.indexes], header), encoding="utf-8")
        details = {"environment": f"{len(plan.conda)} conda + {len(plan.pip)} pip specs",
                   "lock": f"{len(locked_conda)} conda + {len(pip.locked)} pip packages, {platform}",
                   "explicit": f"{len(explicit_lines)} conda packages, {platform}",
                   "requirements": f"{sum(r.comment is None for r in pip.requirements)} pip packages, {platform}"}
        return [Written(targets[what], what, _install(path, targets[what]), details[what])
                for what, path in staged.items()]
    finally:
        shutil.rmtree(staging, ignore_errors=True)


__all__ = ["CODES", "FORMATS", "ExportResult", "Written", "export", "shown_prefix", "torch_label_index"]
