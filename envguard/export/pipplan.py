"""The pip side of an export: what goes into the spec, the lock and the requirements file, and what not.

Each dist's source (envguard.export.pipdists) decides: a dist from an index is pinned by name and looked up
on the indexes for its artifact and sha256 (envguard.export.index); a direct URL keeps its URL and recorded
hash, a VCS source its commit; editable installs and directories built in place cannot be locked and are
named instead.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

from envguard.export.codes import finding, listed
from envguard.export.files import Requirement
from envguard.export.index import PYPI, Found
from envguard.export.pipdists import PipDist
from envguard.findings import Finding
from envguard.model import pep503

# local version labels of PyTorch's own wheel indexes (2.13.0+cpu, +cu126, +rocm6.2, +xpu)
_TORCH_LABEL_INDEX = "https://download.pytorch.org/whl/{label}"


@dataclass
class PipPlan:
    spec: list[str] = field(default_factory=list)  # the pip: section
    repositories: list[str] = field(default_factory=list)  # pip-repositories: (never PyPI, never file://)
    locked: list[Any] = field(default_factory=list)  # envguard.lock.AdoptedPackage
    requirements: list[Requirement] = field(default_factory=list)
    indexes: list[str] = field(default_factory=list)  # every index a dist came from, for the requirements file
    findings: list[Finding] = field(default_factory=list)
    inferred: bool = False  # no REQUESTED marker anywhere: the spec holds what nothing requires

    def use_index(self, index: str) -> None:
        if index not in self.indexes:
            self.indexes.append(index)
        if index != PYPI and index.startswith(("http://", "https://")) and index not in self.repositories:
            self.repositories.append(index)


@dataclass
class _Source:
    """Where one dist can be fetched from, as the spec, the lock and the requirements file name it."""

    spec: str | None = None  # the pip: line (None: not in the spec)
    url: str | None = None  # the lock's url (None: not in the lock)
    sha256: str | None = None
    vcs: bool = False
    direct: bool = False  # installed from that URL, not by name from an index
    comment: str | None = None  # the requirements file's note instead of a line
    hashless: bool = False


def torch_label_index(version: str) -> str | None:
    """PyTorch's own index for a local version label: ``2.13.0+cpu`` -> https://download.pytorch.org/whl/cpu."""
    label = version.partition("+")[2].lower()
    if re.fullmatch(r"cpu|cu\d{2,3}|rocm\d+(\.\d+)*|xpu", label):
        return _TORCH_LABEL_INDEX.format(label=label)
    return None


def _local_path(url: str | None) -> str:
    from urllib.parse import unquote, urlsplit

    return unquote(urlsplit(url).path) if url and url.startswith("file:") else (url or "")


def _sha256_file(url: str) -> str | None:
    from envguard.safeio import open_regular

    try:
        h = hashlib.sha256()
        with open_regular(_local_path(url)) as fh:  # never a FIFO that blocks or a device that never ends
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
        return h.hexdigest()
    except OSError:
        return None


def _valid_requirement(line: str) -> bool:
    from packaging.requirements import InvalidRequirement
    from packaging.requirements import Requirement as Req

    try:
        Req(line)
    except InvalidRequirement:
        return False
    return True


def _lookups(dists: list[PipDist], indexes: list[str], timeout: float) -> tuple[dict[str, Found], dict[str, str]]:
    """(dist path -> what an index has for it, unreachable index -> why). A PyTorch-labelled version is asked
    of PyTorch's index for that label first."""
    from envguard.export.index import IndexClient

    by_label: dict[str | None, list[PipDist]] = {}
    for d in dists:
        if d.source in ("index", "unknown"):
            by_label.setdefault(torch_label_index(d.version), []).append(d)
    found: dict[str, Found] = {}
    unreachable: dict[str, str] = {}
    for label, group in by_label.items():
        client = IndexClient(([label] if label else []) + indexes, timeout=timeout)
        for d, hit in zip(group, client.find_all([(d.name, d.version, d.tags) for d in group]), strict=False):
            if hit is not None:
                found[d.path] = hit
        unreachable.update(client.unreachable)
    return found, unreachable


def _source(d: PipDist, hit: Found | None, default_index: str, plan: PipPlan, built: Any = None,
            extras: str = "") -> _Source:
    from envguard.export.pipdists import created_by_envguard

    if created_by_envguard(d, built):  # installed by `envguard create` from its lock: pinned by name there
        for repo in built.pip_repositories:
            plan.use_index(repo)
        sha256 = built.pip_installed[d.key][1] or d.sha256
        return _Source(spec=f"{d.name}{extras}=={d.version}", url=d.url, sha256=sha256, hashless=sha256 is None)
    if d.source == "editable":
        plan.findings.append(finding(
            "EG610", f"{d.name} {d.version} is an editable install of {d.url}: the files cannot carry a working tree",
            f"after `envguard create`, run `pip install -e {_local_path(d.url)}`", file=d.path, package=d.name))
        return _Source(comment=f"{d.name} {d.version}: editable install of {d.url} (pip install -e)")
    if d.source == "dir":
        plan.findings.append(finding(
            "EG611", f"{d.name} {d.version} was built in place from the directory {d.url}: there is no artifact "
            "to lock", "build a wheel (`pip wheel --no-deps PATH`) and publish it to an index, or install it after "
            "`envguard create`", file=d.path, package=d.name))
        return _Source(comment=f"{d.name} {d.version}: built from the directory {d.url}")
    if d.source == "vcs":
        plan.findings.append(finding(
            "EG613", f"{d.name} {d.version} comes from version control ({d.url}): pinned to its commit, but no "
            "archive hash can be checked", "publish a wheel to an index and pin it there: `envguard create` "
            "installs only hash-checked pip packages and refuses a lock with this entry", file=d.path, package=d.name))
        return _Source(spec=f"{d.name} @ {d.url}", url=d.url, vcs=True, direct=True)
    if d.source in ("url", "file"):
        sha256 = d.sha256 or (_sha256_file(d.url) if d.source == "file" and d.url else None)
        if d.source == "file":
            plan.findings.append(finding(
                "EG612", f"{d.name} {d.version} was installed from the local file {d.url}",
                "publish it to an index (or a shared URL) so other machines can fetch it", file=d.path, package=d.name))
        return _Source(spec=f"{d.name}{extras} @ {d.url}", url=d.url, sha256=sha256, direct=True,
                       hashless=sha256 is None)
    if hit is not None:
        plan.use_index(hit.index)
        if hit.sdist:
            plan.findings.append(finding(
                "EG616", f"{d.name} {d.version} was built on this machine from its sdist: no wheel on {hit.index} "
                f"matches its tags ({', '.join(d.tags) or 'none recorded'})", "the lock names the sdist; a machine "
                "without a compiler cannot rebuild it", file=d.path, package=d.name))
        return _Source(spec=f"{d.name}{extras}=={d.version}", url=hit.url, sha256=hit.sha256,
                       hashless=hit.sha256 is None)
    if d.source == "unknown":
        plan.findings.append(finding(
            "EG615", f"{d.name} {d.version} was installed by {d.installer or 'no INSTALLER file'}, not by pip, and "
            "no index has it", "reinstall it with pip from an index, or add it to the conda dependencies",
            file=d.path, package=d.name))
        return _Source(spec=f"{d.name}=={d.version}", comment=f"{d.name}=={d.version}: no known source")
    index = torch_label_index(d.version) or default_index
    plan.use_index(index)
    return _Source(spec=f"{d.name}{extras}=={d.version}", url=f"{index.rstrip('/')}/{pep503(d.name)}/",
                   hashless=True)


def _extras(dists: list[PipDist], asked: list[PipDist], python_version: str | None,
            plan: PipPlan) -> tuple[dict[str, str], dict[str, list[str]]]:
    """(dist path -> ``[a,b]`` for the spec line, dist path -> the names its installed extras add), and a
    finding for each extra only partly installed (envguard.export.extras)."""
    from envguard.export.extras import installed_extras, marker_environment
    from envguard.export.pipdists import requirement_names

    env = marker_environment(python_version)
    by_key = {d.key: d for d in dists}
    # what is there for another reason: asked for itself, or a plain requirement of some dist
    explained = {d.key for d in asked}.union(*(requirement_names(d.requires) for d in dists))
    tags: dict[str, str] = {}
    adds: dict[str, list[str]] = {}
    for d in asked:
        found = installed_extras(d, by_key, env)
        if found.installed and d.source in ("editable", "dir"):  # its requirements are kept, pinned
            adds[d.path] = found.requires
        elif found.installed:  # named on the spec line, when the extra explains something nothing else does
            shown = [e for e in found.installed if not set(found.adds[e]) <= explained]
            if shown:
                tags[d.path] = "[" + ",".join(sorted(shown, key=str.lower)) + "]"
        for extra, missing in sorted(found.partly.items()):
            plan.findings.append(finding(
                "EG622", f"{d.name} {d.version}: the extra [{extra}] is only partly installed (not installed: "
                f"{listed(missing)}), so its requirements were left out of the spec",
                f"install it whole (`pip install '{d.name}[{extra}]'`) and export again, or add what the project "
                "needs to the pip: section by hand", file=d.path, package=d.name))
    return tags, adds


def plan_pip(dists: list[PipDist], indexes: list[str], use_index: bool, timeout: float, *, built: Any = None,
             python_version: str | None = None) -> PipPlan:
    """The pip part of every output, and the findings for what it cannot hold. ``built``: what ``envguard
    create`` recorded in conda-meta/history (envguard.history.Built); ``python_version``: the environment's
    own, for the markers of extras' requirements."""
    from envguard.export.pipdists import dependencies, kept_dependencies, requested
    from envguard.lock import AdoptedPackage

    plan = PipPlan()
    if not dists:
        return plan
    req = requested(dists, built)
    plan.inferred = req.inferred
    extra_tags, extra_adds = _extras(dists, req.dists, python_version, plan)
    wanted = {d.path for d in req.dists} | {d.path for d in kept_dependencies(dists, req.dists, extra_adds)}
    found, unreachable = _lookups(dists, indexes, timeout) if use_index else ({}, {})
    hashless: list[str] = []
    for d in dists:
        valid = _valid_requirement(f"{d.name}=={d.version}")
        if not d.has_metadata or d.problem or not valid:
            why = d.problem or ("no METADATA" if not d.has_metadata else "its name or version is not valid")
            plan.findings.append(finding("EG617", f"{d.path}: {why}", "reinstall it: `pip install --force-reinstall "
                                         f"--no-deps {d.name}`", file=d.path, package=d.name))
            if not valid:
                continue
        src = _source(d, found.get(d.path), indexes[0] if indexes else PYPI, plan, built, extra_tags.get(d.path, ""))
        # pip itself is a conda dependency of every exported spec (a pip: section needs it)
        if d.path in wanted and src.spec and pep503(d.name) != "pip" and _valid_requirement(src.spec):
            plan.spec.append(src.spec)
        if src.url is not None:
            plan.locked.append(AdoptedPackage(name=pep503(d.name), version=d.version, manager="pip", url=src.url,
                                              sha256=src.sha256, dependencies=dependencies(d),
                                              source_url=src.url if src.vcs else None))
            artifact = src.url if src.direct or src.sha256 else None  # a hashless index entry: its page only
            plan.requirements.append(Requirement(d.name, d.version, artifact, src.sha256, direct=src.direct))
        elif src.comment is not None:
            plan.requirements.append(Requirement(d.name, d.version, None, None, comment=src.comment))
        if src.hashless:
            hashless.append(d.name)
    if hashless:
        why = "no index was asked (--no-index)" if not use_index else "no index had a matching file with a hash"
        plan.findings.append(finding(
            "EG614", f"{len(hashless)} pip dist{'s' * (len(hashless) != 1)} without a known hash ({why}): "
            f"{listed(sorted(hashless, key=str.lower))}", "export again where the index is reachable "
            "(--index-url URL), or run `envguard lock` on the exported environment.yml to resolve them with hashes"))
    for index, why in sorted(unreachable.items()):
        plan.findings.append(finding("EG618", f"index {index} could not be reached ({why}): hashes were not looked "
                                     "up there", "export again where it is reachable, or pass --index-url"))
    plan.spec.sort(key=str.lower)
    plan.requirements.sort(key=lambda r: r.name.lower())
    return plan
