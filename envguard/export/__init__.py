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

import hashlib
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from envguard.errors import BackendError, ExitCode, UserError
from envguard.export.conda import record_channel, record_url
from envguard.export.files import ExplicitLine, Requirement, SpecPlan
from envguard.export.pipdists import PipDist
from envguard.findings import Finding, Severity, sort_findings
from envguard.model import pep503
from envguard.prefix import PrefixInfo

E, W, I = Severity.ERROR, Severity.WARNING, Severity.INFO
FORMATS = ("lock", "environment", "explicit")
SPEC_FILE = "environment.yml"
LOCK_FILE = "conda-lock.yml"
META_PREFIX = "envguard.export.prefix"
# lint's rules about channels, applied to the exported file: mixing defaults with conda-forge,
# the frozen pytorch channel, nightly channels whose builds disappear.
LINT_CHANNEL_CODES = frozenset({"EG111", "EG113", "EG120"})
# local version labels of PyTorch's own wheel indexes (2.13.0+cpu, +cu126, +rocm6.2, +xpu)
_TORCH_LABEL_INDEX = "https://download.pytorch.org/whl/{label}"
_MAX_LISTED = 8

# Every code export reports itself (check's EG5xx and lint's EG1xx codes keep their own meaning).
CODES: dict[str, tuple[Severity, str]] = {
    "EG601": (I, "the requested specs were inferred: no conda-meta/history, requested_spec or REQUESTED marker"),
    "EG602": (E, "a conda record without a URL or channel: left out of the lock"),
    "EG603": (W, "conda records from a local (file://) channel: only machines with that path can fetch them"),
    "EG604": (W, "a channel URL carried a credential: masked as *** in the files"),
    "EG610": (W, "an editable pip install: not in the spec or the lock"),
    "EG611": (E, "a pip dist built in place from a local directory: not in the spec or the lock"),
    "EG612": (W, "a pip dist from a local file (file://): only this machine has it"),
    "EG613": (W, "a pip dist from version control: pinned to its commit, without an archive hash"),
    "EG614": (W, "pip dists written without a hash: `envguard create` refuses the lock until they have one"),
    "EG615": (E, "a pip dist with no known source (not installed by pip, not on the index): left out of the lock"),
    "EG616": (W, "a pip dist built on this machine from an sdist: no wheel on the index matches its tags"),
    "EG617": (E, "a broken dist-info (no METADATA, an unreadable direct_url.json, an invalid name)"),
    "EG618": (I, "an index could not be reached: hashes were not looked up there"),
    "EG620": (I, "a CPU build of torch (a warning on a machine with an NVIDIA driver)"),
    "EG621": (I, "not a conda environment: no conda-lock.yml (python itself is not a conda package here)"),
}


def _f(code: str, message: str, fix: str = "", *, severity: Severity | None = None, file: str | None = None,
       package: str | None = None) -> Finding:
    return Finding(code, severity or CODES[code][0], message, fix, file=file, package=package)


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
    conda_specs: int
    pip_specs: int
    conda_packages: int
    pip_packages: int
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


def _env_name(prefix: Path, name: str | None) -> str:
    if name:
        return name
    base = prefix.name if not prefix.name.startswith(".") else prefix.parent.name
    return base.lstrip(".") or "env"


# --------------------------------------------------------------------------- outputs


def _targets(out_dir: Path, fmt: str, platform: str, with_conda: bool, with_pip: bool) -> dict[str, Path]:
    if fmt == "environment":
        return {"environment": out_dir / SPEC_FILE}
    if fmt == "lock":
        return {"environment": out_dir / SPEC_FILE, **({"lock": out_dir / LOCK_FILE} if with_conda else {})}
    out: dict[str, Path] = {}
    if with_conda:
        out["explicit"] = out_dir / f"conda-{platform}.lock"
    if with_pip or not with_conda:
        out["requirements"] = out_dir / f"requirements-{platform}.txt"
    return out


def _refuse_existing(targets: Mapping[str, Path], force: bool) -> None:
    for path in targets.values():
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
        raise BackendError(f"cannot create {out_dir}: {e.strerror or e}") from None


def _install(staged: Path, target: Path) -> bool:
    """Move a staged file over ``target`` (an atomic rename); False when the bytes were the same already."""
    try:
        if target.is_file() and not target.is_symlink() and target.read_bytes() == staged.read_bytes():
            return False
        with open(staged, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(staged, target)
    except OSError as e:
        raise BackendError(f"cannot write {target}: {e.strerror or e}") from None
    return True


# --------------------------------------------------------------------------- pip


@dataclass
class _PipPlan:
    spec: list[str] = field(default_factory=list)
    repositories: list[str] = field(default_factory=list)
    locked: list[Any] = field(default_factory=list)  # envguard.lock.AdoptedPackage
    requirements: list[Requirement] = field(default_factory=list)
    indexes: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    inferred: bool = False


def torch_label_index(version: str) -> str | None:
    """PyTorch's own index for a local version label: ``2.13.0+cpu`` -> https://download.pytorch.org/whl/cpu."""
    import re

    label = version.partition("+")[2].lower()
    if re.fullmatch(r"cpu|cu\d{2,3}|rocm\d+(\.\d+)*|xpu", label):
        return _TORCH_LABEL_INDEX.format(label=label)
    return None


def _sha256_file(url: str) -> str | None:
    from urllib.parse import unquote, urlsplit

    path = unquote(urlsplit(url).path)
    try:
        h = hashlib.sha256()
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
        return h.hexdigest()
    except OSError:
        return None


def _valid_requirement(line: str) -> bool:
    from packaging.requirements import InvalidRequirement, Requirement as Req

    try:
        Req(line)
    except InvalidRequirement:
        return False
    return True


def _listed(names: Sequence[str]) -> str:
    shown = ", ".join(names[:_MAX_LISTED])
    return shown + (f" and {len(names) - _MAX_LISTED} more" if len(names) > _MAX_LISTED else "")


def _plan_pip(dists: list[PipDist], indexes: list[str], use_index: bool, timeout: float) -> _PipPlan:
    from envguard.export.index import PYPI, IndexClient
    from envguard.export.pipdists import dependencies, requested
    from envguard.lock import AdoptedPackage

    plan = _PipPlan()
    if not dists:
        return plan
    req = requested(dists)
    plan.inferred = req.inferred
    wanted = {d.path for d in req.dists}
    default_index = indexes[0] if indexes else PYPI

    # Where each dist can be fetched from: direct_url.json, else an index lookup.
    lookup = [d for d in dists if d.source in ("index", "unknown")]
    found: dict[str, Any] = {}
    unreachable: dict[str, str] = {}
    if use_index and lookup:
        jobs = []
        for d in lookup:
            label = torch_label_index(d.version)
            jobs.append((label, d))
        clients: dict[str | None, IndexClient] = {}
        for label, _d in jobs:
            if label not in clients:
                clients[label] = IndexClient(([label] if label else []) + indexes, timeout=timeout)
        for label, client in clients.items():
            group = [d for lb, d in jobs if lb == label]
            for d, hit in zip(group, client.find_all([(d.name, d.version, d.tags) for d in group])):
                if hit is not None:
                    found[d.path] = hit
            unreachable.update(client.unreachable)

    no_hash: list[str] = []
    no_source: list[str] = []
    for d in dists:
        key = pep503(d.name)
        if not d.has_metadata or d.problem or not _valid_requirement(f"{d.name}=={d.version}"):
            why = d.problem or ("no METADATA" if not d.has_metadata else "its name or version is not valid")
            plan.findings.append(_f("EG617", f"{d.path}: {why}", f"reinstall it: `pip install --force-reinstall "
                                    f"--no-deps {d.name}`", file=d.path, package=d.name))
            if not _valid_requirement(f"{d.name}=={d.version}"):
                continue
        spec_line: str | None = None
        url: str | None = None
        sha256: str | None = None
        source_url: str | None = None
        comment: str | None = None
        if d.source == "editable":
            plan.findings.append(_f("EG610", f"{d.name} {d.version} is an editable install of {d.url}: the files "
                                    "cannot carry a working tree", f"after `envguard create`, run `pip install -e "
                                    f"{_path_of(d.url)}`", file=d.path, package=d.name))
            comment = f"{d.name} {d.version}: editable install of {d.url} (pip install -e)"
        elif d.source == "dir":
            plan.findings.append(_f("EG611", f"{d.name} {d.version} was built in place from the directory {d.url}: "
                                    "there is no artifact to lock", "build a wheel (`pip wheel --no-deps PATH`) and "
                                    "publish it to an index, or install it after `envguard create`", file=d.path,
                                    package=d.name))
            comment = f"{d.name} {d.version}: built from the directory {d.url}"
        elif d.source == "vcs":
            url = source_url = d.url
            spec_line = f"{d.name} @ {d.url}"
            plan.findings.append(_f("EG613", f"{d.name} {d.version} comes from version control ({d.url}): pinned "
                                    "to its commit, but no archive hash can be checked", "publish a wheel to an "
                                    "index and pin it there, or install it after `envguard create`", file=d.path,
                                    package=d.name))
        elif d.source in ("url", "file"):
            url, sha256 = d.url, d.sha256
            if sha256 is None and d.source == "file" and url:
                sha256 = _sha256_file(url)
            spec_line = f"{d.name} @ {d.url}"
            if d.source == "file":
                plan.findings.append(_f("EG612", f"{d.name} {d.version} was installed from the local file {d.url}",
                                        "publish it to an index (or a shared URL) so other machines can fetch it",
                                        file=d.path, package=d.name))
            if sha256 is None:
                no_hash.append(d.name)
        else:
            hit = found.get(d.path)
            spec_line = f"{d.name}=={d.version}"
            if hit is not None:
                url, sha256 = hit.url, hit.sha256
                if hit.index != PYPI and hit.index.startswith("http") and hit.index not in plan.repositories:
                    plan.repositories.append(hit.index)
                if hit.index not in plan.indexes:
                    plan.indexes.append(hit.index)
                if hit.sdist:
                    plan.findings.append(_f("EG616", f"{d.name} {d.version} was built on this machine from its "
                                            f"sdist: no wheel on {hit.index} matches its tags "
                                            f"({', '.join(d.tags) or 'none recorded'})", "the lock names the "
                                            "sdist; a machine without a compiler cannot rebuild it",
                                            file=d.path, package=d.name))
                if sha256 is None:
                    no_hash.append(d.name)
            elif d.source == "unknown":
                who = d.installer or "no INSTALLER file"
                plan.findings.append(_f("EG615", f"{d.name} {d.version} was installed by {who}, not by pip, and no "
                                        "index has it", "reinstall it with pip from an index, or add it to the "
                                        "conda dependencies", file=d.path, package=d.name))
                comment = f"{d.name}=={d.version}: no known source"
            else:
                index = torch_label_index(d.version) or default_index
                url = f"{index.rstrip('/')}/{key}/"
                if index != PYPI and index.startswith("http") and index not in plan.repositories:
                    plan.repositories.append(index)
                if index not in plan.indexes:
                    plan.indexes.append(index)
                no_hash.append(d.name)
        # pip itself is a conda dependency of every exported spec (a pip: section needs it)
        if d.path in wanted and spec_line is not None and key != "pip" and _valid_requirement(spec_line):
            plan.spec.append(spec_line)
        if url is not None:
            plan.locked.append(AdoptedPackage(name=key, version=d.version, manager="pip", url=url, sha256=sha256,
                                              dependencies=dependencies(d), source_url=source_url))
            direct = d.source in ("url", "file", "vcs")
            artifact = url if direct or sha256 else None  # a hashless index entry names the project page only
            plan.requirements.append(Requirement(d.name, d.version, artifact, sha256, direct=direct))
        elif comment is not None:
            plan.requirements.append(Requirement(d.name, d.version, None, None, comment=comment))
    if no_hash:
        why = "no index was asked (--no-index)" if not use_index else "no index had a matching file with a hash"
        plan.findings.append(_f("EG614", f"{len(no_hash)} pip dist{'s' * (len(no_hash) != 1)} without a known "
                                f"hash ({why}): {_listed(sorted(no_hash, key=str.lower))}",
                                "export again where the index is reachable (--index-url URL), or run `envguard "
                                "lock` on the exported environment.yml to resolve them with hashes"))
    for index, why in sorted(unreachable.items()):
        plan.findings.append(_f("EG618", f"index {index} could not be reached ({why}): hashes were not looked up "
                                "there", "export again where it is reachable, or pass --index-url"))
    plan.spec.sort(key=str.lower)
    plan.requirements.sort(key=lambda r: r.name.lower())
    return plan


def _path_of(url: str | None) -> str:
    from urllib.parse import unquote, urlsplit

    return unquote(urlsplit(url).path) if url and url.startswith("file:") else (url or "")


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
            findings.append(_f("EG602", f"conda package {r.name} {r.version} {r.build} has no URL and no channel "
                               "(installed from a local file?)", "publish it to a channel and reinstall it from "
                               "there", file=f"conda-meta/{r.meta_file}", package=r.name))
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
        findings.append(_f("EG603", f"{len(names)} conda package{'s' * (len(names) != 1)} from the local channel "
                           f"{channel}: {_listed(sorted(names))}", "serve the channel over https (or a shared "
                           "path every machine mounts) before building elsewhere"))
    for channel, names in sorted(masked.items()):
        findings.append(_f("EG604", f"channel {channel} needs a credential, masked as *** for "
                           f"{_listed(sorted(names))}", "write it as ${VAR} placeholders (e.g. "
                           "https://${USER}:${TOKEN}@host/channel) in environment.yml, then `envguard lock`"))
    return locked, lines, findings


def _torch(info: PrefixInfo, driver_info_fn: Callable[[], Any] | None) -> tuple[str | None, list[Finding]]:
    from envguard.check import installed_torch

    tb = installed_torch(info)
    if tb.source == "none":
        return None, []
    build = f"CUDA {tb.cuda}" if tb.cuda else ("CPU" if tb.cpu else "build unknown")
    where = "conda" if tb.source == "conda" else "pip"
    rec = next((r for r in info.conda if r.name in ("pytorch", "pytorch-gpu", "pytorch-cpu", "torch")), None)
    if rec is not None:
        where = f"conda channel {record_channel(rec) or '?'}"
    else:
        label = torch_label_index(tb.version or "")
        where = f"pip ({label})" if label else "pip"
    desc = f"torch {tb.version} ({build} build) from {where}"
    if not tb.cpu:
        return desc, []
    if driver_info_fn is None:
        from envguard.driver import get_driver_info as driver_info_fn
    driver = driver_info_fn()
    on_gpu = driver is not None
    message = f"torch {tb.version} is a CPU build ({tb.evidence}): the files pin that build"
    if on_gpu:
        message += f"; this machine has an NVIDIA driver ({getattr(driver, 'driver_version', '?')})"
    fix = ("if it should train on a GPU, ask for a CUDA build in environment.yml (conda-forge: "
           "`pytorch=X.Y.*=cuda12*` with `cuda-version`; pip: the cuXXX index) and run `envguard lock`")
    return desc, [_f("EG620", message, fix, severity=W if on_gpu else I, package="torch")]


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
    from envguard.envs import resolve_target
    from envguard.export import conda as conda_side
    from envguard.export import files
    from envguard.export.index import pip_index_urls, strip_credentials
    from envguard.export.pipdists import read_dists
    from envguard.platforms import host_platform
    from envguard.prefix import inspect_prefix

    started = time.perf_counter()
    env = os.environ if env is None else env
    if fmt not in FORMATS:
        raise UserError(f"unknown format {fmt!r}", key="--format", fix=f"use one of {', '.join(FORMATS)}")
    if index_timeout <= 0:
        raise UserError(f"timeout must be positive, got {index_timeout:g}", key="--index-timeout")
    target = resolve_target(prefix, name, env=env)
    info = inspect_prefix(target)
    kind = _check_target(target, info)
    platform = host_platform()
    out_dir = Path(output) if output is not None else Path.cwd()
    shown = shown_prefix(target, env)

    dists = read_dists(info)
    targets = _targets(out_dir, fmt, platform, info.is_conda, bool(dists))
    _refuse_existing(targets, force)  # before any index is asked anything
    indexes = [u.rstrip("/") for u in index_urls] if index_urls else pip_index_urls(env)
    hashed = "lock" in targets or "requirements" in targets  # files that carry pip hashes
    pip = _plan_pip(dists, indexes, use_index and hashed, index_timeout)
    if not hashed:  # only the spec is written: nothing about hashes concerns it
        pip.findings = [f for f in pip.findings if f.code not in ("EG614", "EG616", "EG618")]
    locked_conda, explicit_lines, findings = _plan_conda(info)
    findings += pip.findings

    if info.is_conda:
        request = conda_side.requested_specs(target, info.conda, pinned=pinned, needs_pip=bool(pip.spec))
        conda_specs, requested_from = request.specs, ("pinned" if pinned else request.source)
        channels = conda_side.channels(info.conda)
    else:
        mm = ".".join((info.python_version or "").split(".")[:2 if not pinned else 3])
        conda_specs = ([f"python={mm}"] if mm else []) + ["pip"]
        requested_from, channels = ("pinned" if pinned else "none"), ["conda-forge"]
        if "lock" in targets or fmt == "lock":
            findings.append(_f("EG621", f"not a conda environment ({kind}): python is not a conda package, so "
                               "no conda-lock.yml was written", "run `envguard lock` on the exported environment.yml: it solves python "
                               "from conda-forge and pins the pip: section with hashes"))
    if requested_from == "inferred" or (pip.inferred and pip.spec):
        which = " and ".join(w for w, on in (("conda", requested_from == "inferred"), ("pip", pip.inferred)) if on)
        findings.append(_f("EG601", f"no record of what was requested ({which}): the specs are the packages "
                           "nothing else depends on", "review environment.yml and keep what the project needs"))

    torch_desc, torch_findings = _torch(info, driver_info_fn)
    findings += torch_findings
    from envguard.check import prefix_findings

    problems = None
    if deep and info.is_conda:
        from envguard.prefix import verify_files

        problems = verify_files(info, deep=True)
    findings += prefix_findings(info, file_problems=problems)

    header = [f"Written by `envguard export` from {shown} ({platform}).",
              {"history": "Requested specs from conda-meta/history.",
               "records": "Requested specs from the conda-meta records.",
               "inferred": "Requested specs inferred: the packages nothing else depends on.",
               "pinned": "Every requested package pinned to its installed build (--pinned).",
               "none": "A virtualenv: python and pip from conda-forge, the rest from pip."}[requested_from]]
    if torch_desc:
        header.append(torch_desc + ".")
    plan = SpecPlan(name=_env_name(target, name), channels=channels or ["conda-forge"], conda=conda_specs,
                    pip=pip.spec, platform=platform, pip_repositories=pip.repositories, header=header)
    spec_text = files.environment_yml(plan)
    spec_target = out_dir / SPEC_FILE
    from envguard.lint import lint_text

    # The pip: section comes after channels and conda dependencies and no channel rule reads it: lint the
    # part before it, so the lines are the file's own.
    conda_part = files.environment_yml(replace(plan, pip=[], pip_repositories=[]))
    for f in lint_text(conda_part, str(spec_target)):
        if f.code in LINT_CHANNEL_CODES:  # about the environment itself, wherever the spec is written or not
            findings.append(f if "environment" in targets else replace(f, file=None, line=None))

    _prepare_dir(out_dir)
    staging = Path(tempfile.mkdtemp(prefix=".envguard-export-", dir=out_dir))
    written: list[Written] = []
    try:
        staged: dict[str, Path] = {}
        if "environment" in targets:
            staged["environment"] = staging / SPEC_FILE
            staged["environment"].write_text(spec_text, encoding="utf-8")
        if "lock" in targets:
            from envguard.lock import write_adopted

            staged_spec = staging / SPEC_FILE
            cuda_rec = info.record("cuda-version")
            result = write_adopted(staged_spec, locked_conda + pip.locked, lockfile=staging / LOCK_FILE,
                                   platform=platform, cuda=".".join(cuda_rec.version.split(".")[:2]) if cuda_rec
                                   else None, custom={META_PREFIX: shown})
            staged["lock"] = result.lockfile
        file_header = [f"Written by `envguard export` from {shown}."]
        if "explicit" in targets:
            staged["explicit"] = staging / targets["explicit"].name
            staged["explicit"].write_text(files.explicit(explicit_lines, platform, file_header, pip.requirements),
                                          encoding="utf-8")
        if "requirements" in targets:
            staged["requirements"] = staging / targets["requirements"].name
            staged["requirements"].write_text(files.requirements(
                pip.requirements, [strip_credentials(i) for i in pip.indexes], file_header), encoding="utf-8")
        details = {"environment": f"{len(conda_specs)} conda + {len(pip.spec)} pip specs",
                   "lock": f"{len(locked_conda)} conda + {len(pip.locked)} pip packages, {platform}",
                   "explicit": f"{len(explicit_lines)} conda packages, {platform}",
                   "requirements": f"{sum(r.comment is None for r in pip.requirements)} pip packages, {platform}"}
        for what, path in staged.items():
            written.append(Written(targets[what], what, _install(path, targets[what]), details[what]))
    finally:
        shutil.rmtree(staging, ignore_errors=True)

    return ExportResult(
        prefix=target, shown=shown, platform=platform, kind=kind, format=fmt, requested_from=requested_from,
        conda_specs=len(conda_specs), pip_specs=len(pip.spec), conda_packages=len(locked_conda),
        pip_packages=len(pip.locked), torch=torch_desc, files=written, findings=sort_findings(findings),
        seconds=time.perf_counter() - started)


__all__ = ["CODES", "FORMATS", "ExportResult", "Written", "export", "shown_prefix", "torch_label_index"]
