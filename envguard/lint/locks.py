"""Lint rules for lock files: conda-lock.yml, pixi.lock and explicit files.

The files are read by :mod:`envguard.sources` (one normalised package model
for every format); this module only judges what was locked, per platform (and
per pixi environment):

* EG150: the CUDA line of the pytorch build (``cuda118`` -> 11.8) against
  ``cuda-version`` and the CUDA runtime packages;
* EG151: one package locked from both conda and pip;
* EG152: a package locked from a channel the lock does not list;
* EG153: a pre-release (nightly) torch;
* EG154: pytorch from the ``pytorch`` channel beside mkl >= 2024.1;
* EG155: a literal credential (userinfo, ``/t/<token>``) in a URL of the lock;
* EG159: a record needs what the lock does not hold on its platform (envguard.lockwhole);
* EG160: a CPU build of torch beside CUDA libraries or CUDA builds (a CPU variant that installs CUDA);
* EG130: a channel the lock lists that nothing is locked from;
* the mixing rules of :mod:`envguard.mixing` on the locked records: EG113 (anaconda's defaults with
  conda-forge), EG156 (mkl and its OpenMP runtime from the two), EG157 (CUDA lines mixed across conda
  and pip, or within conda), EG158 (torch from conda and from pip: which one is imported). EG151 leaves
  torch to EG158.

Findings for the same problem on several platforms are merged into one that
names them all, pointing at the first occurrence's line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from envguard import compat
from envguard.findings import Finding, Severity
from envguard.model import Package, canonical_name
from envguard.redact import redact
from envguard.versions import conda_key, is_prerelease, release

_URL = re.compile(r"[a-zA-Z][a-zA-Z0-9+.-]*://[^\s#'\"]+")
_CUDA_DOTTED = re.compile(r"cuda(\d{1,2})\.(\d)")
_CUDA_DIGITS = re.compile(r"cuda(\d{2,3})(?!\d)")
_DEFAULTS = ("pkgs/main", "pkgs/r", "pkgs/msys2", "pkgs/free", "pkgs/pro")


@dataclass
class _Group:
    label: str  # "linux-64" or "cpu/linux-64" for a pixi environment
    packages: list[Package]
    listed: set[str] | None  # channels the lock lists for it; None when the format lists none


def cuda_line_of_build(build: str | None) -> tuple[int, int] | None:
    """``py3.10_cuda11.8_cudnn8.7.0_0`` -> (11, 8); ``cuda120_py311h...`` -> (12, 0); CPU builds -> None."""
    if not build:
        return None
    m = _CUDA_DOTTED.search(build)
    if m:
        return int(m.group(1)), int(m.group(2))
    m = _CUDA_DIGITS.search(build)
    if m:
        digits = m.group(1)
        return (int(digits[:2]), int(digits[2:] or 0)) if len(digits) == 3 else (int(digits[0]), int(digits[1]))
    return None


def _listed(channels: Any) -> set[str]:
    from envguard.channels import normalise_channel

    out: set[str] = set()
    for ch in channels if isinstance(channels, list) else []:
        raw = ch.get("url") if isinstance(ch, dict) else ch
        n = normalise_channel(str(raw)) if raw else None
        if not n:
            continue
        if n == "defaults":
            out.update(_DEFAULTS)
        out.add(n.rstrip("/"))
    return out


def _line_index(text: str) -> dict[str, int]:
    """First line of every URL in the file (URLs without their #fragment)."""
    index: dict[str, int] = {}
    for n, line in enumerate(text.splitlines(), start=1):
        if "://" not in line:
            continue
        for url in _URL.findall(line):
            index.setdefault(url.rstrip("/"), n)
    return index


def _groups(kind: str, shown: str, text: str, data: Any) -> list[_Group]:
    if kind == "conda-lock":
        from envguard.sources.condalock import read_conda_lock

        desc = read_conda_lock(data, shown)
        listed = _listed((data.get("metadata") or {}).get("channels"))
        return [_Group(str(p), pk, listed) for p, pk in desc.packages.items()]
    if kind == "pixi":
        from envguard.sources.pixi import read_pixi

        envs = data.get("environments") or {}
        if not isinstance(envs, dict):
            read_pixi(data, shown)  # the reader's one-line refusal
        groups = []
        for env in envs:
            desc = read_pixi(data, shown, environment=str(env))
            listed = _listed((envs.get(env) or {}).get("channels"))
            for p, pk in desc.packages.items():
                groups.append(_Group(f"{env}/{p}" if len(envs) > 1 else str(p), pk, listed))
        return groups
    from envguard.sources.explicit import read_explicit

    desc = read_explicit(text, shown)
    return [_Group(str(p or "?"), pk, None) for p, pk in desc.packages.items()]


class _Collector:
    """Per-platform findings, merged across platforms when the problem is the same."""

    def __init__(self, shown: str, lines: dict[str, int]) -> None:
        self.shown, self.lines = shown, lines
        self.merged: dict[tuple[str, str], dict[str, Any]] = {}

    def line_of(self, pkg: Package | None) -> int | None:
        if pkg is None or not pkg.url:
            return None
        return self.lines.get(pkg.url.split("#", 1)[0].rstrip("/"))

    def add(self, code: str, severity: Severity, message: str, fix: str, group: str, pkg: Package | None) -> None:
        key = (code, message)
        slot = self.merged.setdefault(key, {"severity": severity, "fix": fix, "groups": [], "line": None,
                                            "package": pkg.name if pkg else None})
        slot["groups"].append(group)
        if slot["line"] is None:
            slot["line"] = self.line_of(pkg)

    def findings(self) -> list[Finding]:
        out = []
        for (code, message), s in self.merged.items():
            where = ", ".join(dict.fromkeys(s["groups"]))
            out.append(Finding(code, s["severity"], redact(f"{message} (on {where})"), redact(s["fix"]),
                               self.shown, s["line"], s["package"]))
        return out


def _fmt(line: tuple[int, int]) -> str:
    return f"{line[0]}.{line[1]}"


def _cuda_rules(g: _Group, col: _Collector, runtime_names: tuple[str, ...]) -> None:
    conda = {p.name: p for p in g.packages if p.manager == "conda"}
    torch = conda.get("pytorch")
    built = cuda_line_of_build(torch.build) if torch else None
    if torch is None or built is None:
        return
    for name in runtime_names:
        rt = conda.get(name)
        have = release(rt.version)[:2] if rt else ()
        if rt is None or len(have) < 2:
            continue
        if have[0] != built[0]:
            col.add("EG150", Severity.ERROR,
                    f"pytorch {torch.version} is built for CUDA {_fmt(built)} (build {torch.build}) but {name} is "
                    f"{rt.version}: CUDA {built[0]} binaries beside a CUDA {have[0]} runtime",
                    f"re-lock with `cuda-version={_fmt(built)}` pinned, or a pytorch build for CUDA {have[0]} "
                    f"(`pytorch=*=cuda{have[0]}*`)", g.label, torch)
        elif have[1] < built[1]:
            col.add("EG150", Severity.WARNING,
                    f"pytorch {torch.version} is built for CUDA {_fmt(built)} but {name} is {rt.version}, "
                    "an older runtime of the same line",
                    f"re-lock with `cuda-version>={_fmt(built)}`", g.label, torch)


_CUDA_RUNTIMES = ("cudatoolkit", "cuda-cudart", "cuda-runtime")  # files a CUDA program loads (not cuda-version)
_TORCH_RECORDS = ("pytorch", "libtorch", "pytorch-cpu", "pytorch-gpu")


def _cpu_torch_rule(g: _Group, col: _Collector) -> None:
    """EG160: torch is a CPU build (a CPU variant: a pixi environment, a variant's lock) and the same solve took
    CUDA: a runtime (cudatoolkit 11.8, ~700 MB) or another package's CUDA build. The manifest's CUDA requirement
    let the solver prefer a CUDA build of some dependency (kaldi, implicit, magma in real pixi.locks), so the CPU
    environment downloads and installs CUDA libraries torch never loads."""
    conda = {p.name: p for p in g.packages if p.manager == "conda"}
    torch = conda.get("pytorch") or conda.get("libtorch")
    if torch is None or not (torch.build or "").startswith("cpu"):
        return
    runtimes = [conda[n] for n in _CUDA_RUNTIMES if n in conda]
    built = [p for p in conda.values() if p.name not in _TORCH_RECORDS and cuda_line_of_build(p.build)]
    if not runtimes and not built:
        return
    pulled = {r.name for r in runtimes}
    needers = [p for p in conda.values() if p.name not in _TORCH_RECORDS and p.name not in pulled
               and any(d.split()[0] in pulled for d in p.depends if d.split())]
    culprits = list(dict.fromkeys([*built, *needers]))
    what = ", ".join(f"{p.name} {p.version}" for p in runtimes)
    why = ", ".join(f"{p.name} {p.version} {p.build}" for p in culprits[:4]) + (", ..." if len(culprits) > 4 else "")
    verb = "is" if len(runtimes) == 1 else "are"
    text = (f"{what} {verb} locked beside it (needed by {why})" if what and why else
            f"{what} {verb} locked beside it" if what else f"CUDA builds are locked beside it ({why})")
    first = culprits[0].name if culprits else runtimes[0].name
    col.add("EG160", Severity.WARNING,
            f"pytorch {torch.version} is a CPU build, yet {text}: this CPU environment installs CUDA libraries "
            "torch never loads",
            f"pin a CPU build of {first} where this environment takes it, or declare no CUDA for this environment "
            "(a CUDA requirement lets the solver prefer CUDA builds); a deliberate mix (another framework's CUDA "
            "build) can stay", g.label, culprits[0] if culprits else torch)


def _pip_conda_rules(g: _Group, col: _Collector) -> None:
    conda = {canonical_name(p.name, "conda"): p for p in g.packages if p.manager == "conda"}
    for p in g.packages:
        if p.manager != "pip":
            continue
        key = canonical_name(p.name, "pip")
        other = conda.get(key)
        if key == "torch" and other is not None and other.name == "pytorch":
            continue  # EG158 (mixing): torch twice, and which copy is imported
        if other is not None:
            col.add("EG151", Severity.ERROR,
                    f"{key} is locked twice: conda {other.name} {other.version} and pip {p.name} {p.version}; "
                    "pip's copy overwrites conda's files",
                    f"remove {p.name} from the pip: section and re-lock", g.label, p)


def _channel_rules(g: _Group, unlisted: dict[str, dict[str, Any]]) -> None:
    """Collect, per channel, the packages locked from it that the lock does not list."""
    if g.listed is None:
        return
    for p in g.packages:
        if p.manager != "conda" or not p.channel:
            continue
        ch = p.channel.rstrip("/")
        if ch in g.listed or ch.lower() in g.listed:
            continue
        slot = unlisted.setdefault(ch, {"names": {}, "groups": []})
        slot["names"].setdefault(p.name, p)
        if g.label not in slot["groups"]:
            slot["groups"].append(g.label)


def _report_unlisted(unlisted: dict[str, dict[str, Any]], col: _Collector) -> None:
    for ch, slot in unlisted.items():
        pkgs: dict[str, Package] = slot["names"]
        # name the package users care about first: torch's, else the first locked
        first = next((p for n, p in pkgs.items() if canonical_name(n) == "torch"), next(iter(pkgs.values())))
        others = [n for n in pkgs if n != first.name]
        names = f"{first.name} {first.version}" + (f" and {len(others)} more ({', '.join(others[:4])}"
                                                   f"{', ...' if len(others) > 4 else ''})" if others else "")
        for label in slot["groups"]:
            col.add("EG152", Severity.ERROR,
                    f"{names} locked from channel `{ch}`, which the lock's channel list does not name: the lock "
                    "cannot be re-solved or audited from its own metadata",
                    f"add `{ch}` to the environment file's channels and re-lock, or drop the `{ch}::` prefix; "
                    f"if `{ch}` is a mirror of a listed channel, re-lock with `envguard lock` where the mirror is "
                    "configured: the lock then records it (docs/offline.md)",
                    label, first)


def _torch_rules(g: _Group, col: _Collector, c: compat.Compat) -> None:
    conda = {p.name: p for p in g.packages if p.manager == "conda"}
    for p in g.packages:
        if canonical_name(p.name, p.manager) != "torch":
            continue
        if is_prerelease(p.version):
            col.add("EG153", Severity.WARNING,
                    f"{p.name} {p.version} is a pre-release (nightly) build: it disappears from its channel, so "
                    "this lock cannot be installed later", "lock a released torch", g.label, p)
    torch = conda.get("pytorch")
    if torch is not None:
        _build_line_rule(g, col, torch)
    mkl = conda.get("mkl")
    if (torch and mkl and (torch.channel or "").lower() == "pytorch"
            and conda_key(mkl.version) >= conda_key(c.pytorch_mkl_max)):
        col.add("EG154", Severity.ERROR,
                f"pytorch {torch.version} from the `pytorch` channel with mkl {mkl.version}: import torch fails "
                "with \"undefined symbol: iJIT_NotifyEvent\" (pytorch#123097)",
                f"pin `mkl<{c.pytorch_mkl_max}`, or move to conda-forge", g.label, mkl)


def _build_line_rule(g: _Group, col: _Collector, torch: Package) -> None:
    """EG118: a conda-forge pytorch build whose CUDA line the channel does not build for the lock's platform,
    by the rule init and lint's spec rules apply (envguard.channelfacts.cuda_verdict)."""
    from envguard import channelfacts

    if (torch.channel or "").rstrip("/").rsplit("/", 1)[-1].lower() != compat.CONDA_FORGE:
        return
    found = channelfacts.unbuilt_cuda_line(torch.version, torch.build or "", torch.platform or
                                           g.label.rsplit("/", 1)[-1])
    if found is None:
        return
    rel, choices = found
    fix = (f"re-lock with `cuda-version={choices[-1]}` (or `pytorch={rel.version}.*=cuda{choices[-1].split('.')[0]}*`)"
           if choices else "re-lock without a CUDA build for this platform (`pytorch=*=cpu*`), or drop the platform")
    built = (f"only for CUDA {' and '.join(choices)}" if choices else "no CUDA build")  # the label names the platform
    col.add("EG118", Severity.ERROR, f"`pytorch {torch.version} {torch.build}`: conda-forge builds torch "
            f"{rel.version} {built}", fix, g.label, torch)


def _whole_findings(groups: list[_Group], col: _Collector, strict: bool) -> list[Finding]:
    """EG159, one finding for the whole file: records that need what the lock does not hold on their platform
    (envguard.lockwhole, the judgement behind every other command's exit 3). A version or build that is there
    but not allowed is a warning in a lock conda-lock wrote (``strict`` False): the dependencies it recorded
    may be older than its solve's."""
    from envguard import lockwhole

    judge = lockwhole.new_judge()  # one rattler MatchSpec per dependency string, over every platform
    found = [h for g in groups for h in lockwhole.holes_in(g.label, g.packages, judge)]
    failed = lockwhole.failures(found, versions=strict)
    soft = [h for h in found if not (strict or h.absent)]
    out = []
    for holes, severity, text, fix in (
            (failed, Severity.ERROR, "the lock is not whole: {}", lockwhole.FIX),
            (soft, Severity.WARNING, "{}: conda-lock records the dependencies of a package conda linked from its "
             "cache as that cache had them, which a repodata patch may have changed since",
             "re-lock (`envguard lock` or `conda-lock lock`) so that the lock's dependencies are its solve's")):
        if holes:
            first = holes[0]
            record = next((p for g in groups if g.label == first.platform for p in g.packages
                           if p.name == first.package), None)
            out.append(Finding("EG159", severity, redact(text.format(lockwhole.summary(holes))), fix, col.shown,
                               col.line_of(record), first.package))
    return out


def _mixing_rules(g: _Group, col: _Collector) -> None:
    from envguard.lint import MIX_CODES
    from envguard.mixing import mixing

    for m in mixing(g.packages, context="lock"):
        col.add(MIX_CODES[m.rule], Severity(m.severity), m.message, m.fix, g.label, m.records[0])


def _channel_use(g: _Group, listed: dict[str, list[Package | None]], used: set[str]) -> None:
    """Gather, over the whole lock, the channels listed and those packages are locked from."""
    if g.listed is None:
        return
    for ch in g.listed:
        listed.setdefault(ch, [])
    used.update((p.channel or "").rstrip("/").lower() for p in g.packages if p.manager == "conda")


def _report_unused(listed: dict[str, list[Package | None]], used: set[str], col: _Collector) -> None:
    """A channel the lock lists that no package of any platform (or pixi environment) is locked from.

    Judged over the whole file: the nvidia channel serves linux-64 and win-64 only, and a pixi workspace's
    channels serve every environment, so a channel idle on one platform or in one environment is not unused.
    """
    via_defaults = "defaults" in listed
    for ch in sorted(listed):
        if ch == "nodefaults" or (ch in _DEFAULTS and via_defaults):
            continue  # nodefaults is no channel; the members of `defaults` are judged as `defaults`
        if (ch == "defaults" and used & set(_DEFAULTS)) or (ch != "defaults" and ch.lower() in used):
            continue
        from envguard.lint.projects import unused_channel

        message, fix = unused_channel(ch, locked=True)  # the wording a spec's EG130 has
        col.add("EG130", Severity.WARNING, message, fix, "every platform", None)


def credential_lines(text: str) -> list[int]:
    from envguard.redact import has_credentials

    return [n for n, line in enumerate(text.splitlines(), start=1) if "://" in line and has_credentials(line)]


def credential_finding(shown: str, text: str, code: str = "EG155") -> list[Finding]:
    """Secrets in a committed file leak through git. Scanned on the raw text (the readers redact URLs), for
    any file given to lint, whatever its kind; the finding names the line, never the secret."""
    lines = credential_lines(text)
    if not lines:
        return []
    more = f" and {len(lines) - 1} more line{'s' * (len(lines) > 2)}" if len(lines) > 1 else ""
    return [Finding(code, Severity.ERROR, f"a literal credential in a URL{more}",
                    "revoke it; write the channel as https://${USER}:${TOKEN}@host/... (or /t/${TOKEN}/) in the "
                    "environment file and re-lock with `envguard lock`, which never writes secrets",
                    shown, lines[0])]


_credential_rule = credential_finding


def lint_lock(kind: str, shown: str, text: str, data: Any) -> list[Finding]:
    """Lint a lock of ``kind`` (``conda-lock``, ``pixi`` or ``explicit``); unreadable -> UserError."""
    c = compat.load()
    col = _Collector(shown, _line_index(text))
    runtime = tuple(n for n in c.cuda_runtime_packages)
    unlisted: dict[str, dict[str, Any]] = {}
    listed: dict[str, list[Package | None]] = {}
    used: set[str] = set()
    groups = _groups(kind, shown, text, data)
    for g in groups:
        _cuda_rules(g, col, runtime)
        _cpu_torch_rule(g, col)
        _pip_conda_rules(g, col)
        _channel_rules(g, unlisted)
        _channel_use(g, listed, used)
        _torch_rules(g, col, c)
        _mixing_rules(g, col)
    _report_unlisted(unlisted, col)
    _report_unused(listed, used, col)
    if kind == "pixi":  # EG136: the environments of one pixi.lock that lock different torch releases
        from envguard.lint.workspace_rules import lock_torch

        for message, fix, rec in lock_torch([(g.label, g.packages) for g in groups]):
            col.add("EG136", Severity.WARNING, message, fix, rec.platform or "", rec)
    whole: list[Finding] = []
    if kind != "explicit":  # an explicit file records no dependencies
        from envguard.lockwhole import judges_versions

        meta = data.get("metadata") if kind == "conda-lock" and isinstance(data, dict) else None
        strict = judges_versions(kind, meta.get("custom_metadata") if isinstance(meta, dict) else None)
        whole = _whole_findings(groups, col, strict)
    return whole + col.findings() + _credential_rule(shown, text)


__all__ = ["credential_finding", "credential_lines", "cuda_line_of_build", "lint_lock"]
