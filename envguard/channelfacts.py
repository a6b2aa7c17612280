"""What a conda channel's own records say exists: torch builds per platform, their CUDA lines, Python lines,
glibc floors and variants, and whether a file solves there.

The compatibility table (``envguard/data/compat.yaml``) is a snapshot; the channel knows which builds exist
today. This module asks it through rattler's gateway for the few packages that decide a PyTorch
environment (:data:`RECORD_NAMES`), never the whole dependency tree, and turns the answer into the same
rows the table holds, so that ``envguard init``, the maintainer script ``scripts/regen_compat.py``, lint and
check read one shape whichever source answered. Solving is records-only: nothing is downloaded but
repodata.

A channel that does not answer raises :class:`ChannelUnreachable`; callers then fall back to the table and
say so (:func:`table_note`).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import datetime as _dt
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from envguard import compat, settings
from envguard.versions import line_key, release_line

# pytorch and its two wrappers (they force the variant), the CUDA toolkit selector, the interpreter.
RECORD_NAMES = ("pytorch", "pytorch-cpu", "pytorch-gpu", "cuda-version", "python")
STALE_AFTER_DAYS = 90

_PY_DEP = re.compile(r"^python\s+>=\s*(\d+\.\d+)")
_GLIBC_DEP = re.compile(r"^__glibc\s+>=\s*(\d+(?:\.\d+)+)")
_VARIANT_DEP = re.compile(r"^arm-variant\s+\*\s+(\w+)")
_CUDA_DEP = re.compile(r"^cuda-version\s+(\S+)")


class ChannelUnreachable(Exception):
    """The channel did not answer (DNS, connection, missing repodata); the message says why, redacted."""


def offline() -> bool:
    """settings.OFFLINE: never ask a channel (air-gapped machines, hermetic tests)."""
    return settings.text(settings.OFFLINE) not in ("", "0")


def channel_url(channel: str) -> str:
    """A channel name as the URL its records are read from (envguard.condaconfig.resolve_channel: conda's and
    pixi's configuration, ENVGUARD_CHANNEL_ALIAS); a URL is kept as it is. A channel mirrored by a ``file://``
    folder is read from that folder (rattler's HTTP client cannot fetch it)."""
    from envguard import condaconfig

    return condaconfig.resolve_channel(channel).read_from


def _client(creds: Any) -> Any:
    """rattler's client for these credentials and the configured mirrors (envguard.condaconfig)."""
    from envguard import condaconfig

    return creds.client(condaconfig.load().mirror_map())


@dataclasses.dataclass(frozen=True)
class TorchRecord:
    """One ``pytorch`` record of the channel, reduced to what compatibility depends on."""

    platform: str
    version: str
    build: str
    kind: str  # "cpu" or the CUDA line of the build ("12.9")
    python: str | None  # "3.11", from its python dependency
    glibc: str | None  # the floor of its __glibc dependency
    variant: str | None  # linux-aarch64 CUDA builds: "sbsa" (servers) or "tegra" (Jetson), same build string
    cuda_range: str | None  # its cuda-version dependency, ">=12.9,<13"

    @property
    def line(self) -> str:
        return release_line(self.version) or self.version


def torch_record(platform: str, version: str, build: str, depends: Iterable[str]) -> TorchRecord:
    deps = [str(d).strip() for d in depends]

    def first(pattern: re.Pattern[str]) -> str | None:
        return next((m.group(1) for m in map(pattern.match, deps) if m), None)

    cuda = compat.cuda_in_build(build)
    kind = cuda if cuda and cuda != "any" and "." in cuda else "cpu"
    return TorchRecord(platform, version, build, kind, first(_PY_DEP), first(_GLIBC_DEP), variant_of(deps),
                       first(_CUDA_DEP))


@dataclasses.dataclass(frozen=True)
class ChannelRecords:
    """The answer of one channel for some platforms."""

    channel: str  # the name envguard's routes use ("conda-forge")
    url: str
    platforms: tuple[str, ...]
    torch: tuple[TorchRecord, ...]
    cuda_versions: tuple[str, ...]  # X.Y lines of the channel's cuda-version packages, oldest first
    pythons: tuple[tuple[str, tuple[str, ...]], ...]  # platform -> X.Y lines of its python packages
    count: int = 0  # records read (every name of RECORD_NAMES, every subdir asked)
    digest: str = ""  # records_digest() of them: which record set the rows came from

    def rows(self) -> dict[str, dict[str, Any]]:
        """The release rows these records give, in compat.yaml's shape (line -> row), oldest first."""
        lines: dict[str, list[TorchRecord]] = {}
        for r in self.torch:
            lines.setdefault(r.line, []).append(r)
        out: dict[str, dict[str, Any]] = {}
        for line in sorted(lines, key=line_key):
            recs = lines[line]
            cuda: dict[str, set[str]] = {}
            glibc: dict[str, str] = {}
            variants: dict[str, dict[str, set[str]]] = {}
            for r in recs:
                if r.kind != "cpu":
                    cuda.setdefault(r.platform, set()).add(r.kind)
                if r.glibc and r.platform.startswith("linux"):
                    old = glibc.get(r.kind)
                    if old is None or line_key(r.glibc) < line_key(old):
                        glibc[r.kind] = r.glibc  # the floor some build of that kind accepts
                if r.variant and r.kind != "cpu":
                    variants.setdefault(r.platform, {}).setdefault(r.kind, set()).add(r.variant)
            row: dict[str, Any] = {
                "status": "released",
                "versions": sorted({r.version for r in recs}, key=line_key),
                "source": f"{self.channel} records ({self.url})",
                "python": sorted({r.python for r in recs if r.python}, key=line_key),
                "cpu": sorted({r.platform for r in recs if r.kind == "cpu"}),
                "cuda": {p: sorted(v, key=line_key) for p, v in sorted(cuda.items())},
            }
            if glibc:
                row["glibc"] = {k: glibc[k] for k in sorted(glibc, key=lambda k: (k != "cpu", k))}
            if variants:
                row["variants"] = {p: {k: sorted(v) for k, v in sorted(by.items())}
                                   for p, by in sorted(variants.items())}
            out[line] = row
        return out

    def route(self, base: compat.Route) -> compat.Route:
        """The route ``base`` (title, architectures, ...) with its release rows and CUDA lines from these
        records: what ``envguard init`` checks a request against when the channel answers."""
        rows = self.rows()
        releases = tuple(compat.release_from_row(base.name, line, row, base.declared_cuda_platforms)
                         for line, row in rows.items())
        return dataclasses.replace(base, releases=releases, toolkit_lines=self.cuda_versions,
                                   source=f"{self.channel} records ({self.url})", records_of=self.url)


def _redacted(e: BaseException) -> str:
    from envguard.redact import redact

    text = str(e).strip() or type(e).__name__
    return "; ".join(line.strip() for line in redact(text).splitlines() if line.strip())


def fetch(channel: str, platforms: Sequence[str], url: str | None = None) -> ChannelRecords:
    """Ask ``channel`` (or ``url``) for :data:`RECORD_NAMES` on ``platforms`` and noarch."""
    from rattler import Channel, Gateway, Subdir

    from envguard.auth import Credentials

    real = url or channel_url(channel)
    creds = Credentials()
    clean = creds.strip(real)

    async def run() -> list[list[Any]]:
        gateway = Gateway(cache_dir=_cache_dir(), client=_client(creds))
        subdirs = [Subdir(p) for p in (*platforms, "noarch")]
        return await gateway.query([Channel(clean)], subdirs, list(RECORD_NAMES), recursive=False)

    import asyncio  # lazily: check and lint read the table's verdict without asking a channel

    try:
        answer = asyncio.run(run())
    except _unreachable_errors() as e:
        raise ChannelUnreachable(f"{channel} ({_redacted(e)})") from None
    torch: list[TorchRecord] = []
    cuda_versions: set[str] = set()
    pythons: dict[str, set[str]] = {}
    read = [r for per_channel in answer for r in per_channel]
    for rec in read:
        name = rec.name.normalized
        subdir = str(rec.subdir)
        if name == "pytorch" and subdir in platforms:
            torch.append(torch_record(subdir, str(rec.version), str(rec.build), rec.depends))
        elif name == "cuda-version":
            line = release_line(str(rec.version))
            if line:
                cuda_versions.add(line)
        elif name == "python" and subdir in platforms:
            line = release_line(str(rec.version))
            if line:
                pythons.setdefault(subdir, set()).add(line)
    return ChannelRecords(channel, real, tuple(platforms), tuple(torch),
                          tuple(sorted(cuda_versions, key=line_key)),
                          tuple((p, tuple(sorted(v, key=line_key))) for p, v in sorted(pythons.items())),
                          len(read), records_digest((str(r.subdir), str(r.file_name), (r.sha256 or b"").hex())
                                                    for r in read))


def records_digest(records: Iterable[tuple[str, str, str]]) -> str:
    """``sha256:<hex>`` of a record set given as (subdir, file name, sha256 hex or "") per record: the SHA-256 of
    one UTF-8 line ``<subdir>/<file name>\t<sha256>\n`` per record, the lines sorted. It names the record set
    scripts/regen_compat.py read (compat.yaml's ``regenerated.digest``): the same records give the same digest
    whatever channel, mirror or order served them, and a rebuilt package (same name, another hash) another."""
    import hashlib

    lines = sorted(f"{subdir}/{name}\t{sha}\n" for subdir, name, sha in set(records))
    return "sha256:" + hashlib.sha256("".join(lines).encode()).hexdigest()


_REGENERATED = {"channel", "records", "date", "count", "digest", "sample"}


def regeneration_problems(block: Any) -> list[str]:
    """What is wrong with a route's ``regenerated`` block (compat.yaml, written by scripts/regen_compat.py), as
    ``.key: problem`` lines; compat.validate reports them under the route."""
    if not isinstance(block, Mapping):
        return [": must be a mapping (channel, records, date, count, digest, sample)"]
    out = [f": unknown keys {sorted(set(block) - _REGENERATED)}"] if set(block) - _REGENERATED else []
    out += [f".{k}: missing" for k in sorted(_REGENERATED - set(block))]
    for key in ("channel", "records"):
        if key in block and not (isinstance(block[key], str) and block[key]):
            out.append(f".{key}: must be a non-empty string")
    if "date" in block and not re.fullmatch(r"\d{4}-\d{2}-\d{2}", str(block["date"])):
        out.append(".date: must be YYYY-MM-DD")
    if "count" in block and not (type(block["count"]) is int and block["count"] > 0):
        out.append(".count: must be the number of records read")
    if "digest" in block and not re.fullmatch(r"sha256:[0-9a-f]{64}", str(block["digest"])):
        out.append(".digest: must be sha256:<64 hex digits> (channelfacts.records_digest)")
    if "sample" in block and not isinstance(block["sample"], bool):
        out.append(".sample: must be true or false")
    return out


def _unreachable_errors() -> tuple[type[BaseException], ...]:
    """What rattler raises when a channel does not answer: no connection, no repodata, a bad URL."""
    from rattler import exceptions as x

    return (x.GatewayError, x.FetchRepoDataError, x.InvalidChannelError, x.InvalidUrlError, x.CacheDirError,
            x.IoError, OSError)


def _cache_dir() -> Any:
    return settings.rattler_cache_dir()


# --------------------------------------------------------------------------- records-only solve

def virtual_packages(platform: str, cuda: str | None) -> list[Any]:
    """The machine a solve assumes: conda-lock's default virtual packages (what ``envguard lock`` uses), with
    ``__cuda`` at the written CUDA line, or none for a CPU file."""
    from conda_lock.virtual_package import default_virtual_package_repodata
    from rattler import BuildString, GenericVirtualPackage, PackageName, Version

    vpr = default_virtual_package_repodata(cuda_version=cuda or "")
    best: dict[str, Mapping[str, Any]] = {}
    for entry in ((vpr.all_repodata.get(platform) or {}).get("packages") or {}).values():
        cur = best.get(entry["name"])
        if cur is None or Version(str(entry["version"])) > Version(str(cur["version"])):
            best[entry["name"]] = entry
    return [GenericVirtualPackage(PackageName(e["name"]), Version(str(e["version"])), BuildString(str(e["build"])))
            for _, e in sorted(best.items())]


def solve(urls: Sequence[str], specs: Sequence[str], platform: str, cuda: str | None) -> tuple[list[Any] | None, str]:
    """Solve ``specs`` for ``platform`` against the records at ``urls``, in priority order (nothing
    downloaded but repodata).

    Returns (records, "") or (None, why it does not solve); raises :class:`ChannelUnreachable` when the
    channel does not answer."""
    import rattler
    from rattler import Channel, ChannelPriority, Gateway, MatchSpec, Subdir

    from envguard.auth import Credentials

    creds = Credentials()
    vps = virtual_packages(platform, cuda)

    async def run() -> list[Any]:
        gateway = Gateway(cache_dir=_cache_dir(), client=_client(creds))
        return await rattler.solve([Channel(creds.strip(u)) for u in urls],
                                   [MatchSpec(s, strict=False) for s in specs], gateway=gateway,
                                   platforms=[Subdir(platform), Subdir("noarch")], virtual_packages=vps,
                                   channel_priority=ChannelPriority.Strict, strategy="highest")

    import asyncio  # lazily, as above: only a records-only solve needs an event loop

    from rattler.exceptions import SolverError

    try:
        return asyncio.run(run()), ""
    except SolverError as e:  # its explanation is a tree: one line, without the drawing
        return None, re.sub(r"\s*;\s*", "; ", re.sub(r"[│├└─]+", " ", _redacted(e))).replace(":;", ":").strip()
    except _unreachable_errors() as e:
        raise ChannelUnreachable(f"{', '.join(urls)} ({_redacted(e)})") from None


# --------------------------------------------------------------------------- the table's age

def table_note(route: compat.Route, today: _dt.date | None = None) -> tuple[str, str | None]:
    """("from envguard's table of <date>", a warning when that is older than 90 days, else None)."""
    as_of = route.as_of
    if not as_of:
        return "from envguard's table (undated)", None
    try:
        day = _dt.date.fromisoformat(as_of)
    except ValueError:
        return f"from envguard's table of {as_of}", None
    age = ((today or _dt.date.today()) - day).days
    text = f"from envguard's table of {as_of}"
    if age <= STALE_AFTER_DAYS:
        return text, None
    return text, (f"envguard's {route.title} table is {age} days old (of {as_of}): releases and CUDA lines "
                  f"{route.title} shipped since are unknown to it; run where the channel is reachable, or "
                  "update envguard")


# --------------------------------------------------------------------------- one answer for every command

# The route a command checks against while it runs: init puts the channel's records here before it lints
# the file it writes, so lint's rules see the rows init saw, not the table's.
_ANSWER: contextvars.ContextVar[tuple[compat.Route, ...]] = contextvars.ContextVar("envguard_channel_answer",
                                                                                    default=())


@contextlib.contextmanager
def answering(route: compat.Route) -> Iterator[None]:
    token = _ANSWER.set((route, *_ANSWER.get()))
    try:
        yield
    finally:
        _ANSWER.reset(token)


def route(name: str) -> compat.Route | None:
    """The route ``name`` as the running command knows it: the channel's records inside :func:`answering`,
    else the table's."""
    return next((r for r in _ANSWER.get() if r.name == name), None) or compat.load().routes.get(name)


def released(version: str, route_name: str) -> compat.Release | None:
    """The released row of any torch version string (``2.13.0``, ``2.13``) on the route as known now."""
    r = route(route_name)
    line = release_line(version) if version else None
    rel = r.release(line) if r and line else None
    return rel if rel is not None and rel.released else None


# --------------------------------------------------------------------------- build variants

@dataclasses.dataclass(frozen=True)
class Variant:
    """Which of several builds with one build string is installed (linux-aarch64 cuda129: sbsa or tegra)."""

    name: str
    what: str  # "Jetson (Orin) only"
    arch: compat.ArchRange | None
    glibc: str | None
    siblings: tuple[str, ...]  # every variant the channel builds under that build string

    def describe(self) -> str:
        parts = [self.what] + ([self.arch.describe()] if self.arch else []) + (
            [f"glibc >= {self.glibc}"] if self.glibc else [])
        return ", ".join(p for p in parts if p)


def variant_of(depends: Iterable[str]) -> str | None:
    """The variant a record's dependencies select (``arm-variant * tegra`` -> ``tegra``), None when none."""
    return next((m.group(1) for m in map(_VARIANT_DEP.match, (str(d).strip() for d in depends)) if m), None)


def installed_variant(route_name: str, platform: str, version: str, cuda: str,
                      depends: Iterable[str]) -> Variant | None:
    """The variant of an installed or locked build, with what the curated rows say it runs on."""
    name = variant_of(depends)
    if name is None:
        return None
    table = compat.load().routes.get(route_name)
    rel = released(version, route_name)
    row: Mapping[str, Any] = (table.variant(name) if table else None) or {}
    siblings = rel.variants_of(platform, cuda) if rel else ()
    arch = None
    sm = row.get("sm")
    if sm:
        arch = compat.ArchRange(str(sm[0]), str(sm[1]) if sm[1] is not None else None, bool(row.get("ptx")),
                                str(row.get("source", "")))
    glibc = row.get("glibc")
    return Variant(name, str(row.get("what", "")), arch, str(glibc) if glibc else None, siblings or (name,))


# --------------------------------------------------------------------------- the shared CUDA-line verdict

@dataclasses.dataclass(frozen=True)
class CudaVerdict:
    """Whether a CUDA line (``cuda-version X.Y``, or the line a build string names) is served on each platform."""

    line: str
    lacking: tuple[str, ...]  # platforms where no build of the release accepts the line
    built: tuple[tuple[str, tuple[str, ...]], ...]  # for each lacking platform: the lines that do exist there
    choices: tuple[str, ...]  # the lines every platform's build accepts

    @property
    def ok(self) -> bool:
        return not self.lacking

    def built_text(self) -> str:
        """``for CUDA 12.9 and 13.0 on linux-64, for CUDA 12.8 and 13.0 on win-64``."""
        groups: dict[tuple[str, ...], list[str]] = {}
        for p, lines in self.built:
            groups.setdefault(lines, []).append(p)
        return ", ".join((f"for CUDA {_and(lines)} on {_and(ps)}" if lines else f"no CUDA build on {_and(ps)}")
                         for lines, ps in groups.items())


def _and(values: Sequence[str]) -> str:
    values = list(values)
    return values[0] if len(values) == 1 else ", ".join(values[:-1]) + " and " + values[-1]


def cuda_verdict(rel: compat.Release, platforms: Sequence[str], line: str, exact_build: bool = False) -> CudaVerdict:
    """The one rule init, lint and check apply: which of ``platforms`` have a build of ``rel`` that takes CUDA
    ``line``. ``exact_build``: ``line`` names the build itself (``cuda126_*``), not a cuda-version a build of a
    lower minor may run on; a major line (``12``) is served by any build of that major."""
    lacking: list[str] = []
    for p in platforms:
        lines = rel.cuda_on(p)
        if "." not in line:
            ok = any(x.split(".")[0] == line for x in lines)
        elif exact_build:
            ok = line in lines
        else:
            ok = rel.build_line(p, line) is not None
        if not ok:
            lacking.append(p)
    return CudaVerdict(line, tuple(lacking), tuple((p, rel.cuda_on(p)) for p in lacking),
                       tuple(rel.cuda_choices(platforms)))


def unbuilt_cuda_line(version: str, build: str, platform: str,
                      route_name: str = compat.CONDA_FORGE) -> tuple[compat.Release, tuple[str, ...]] | None:
    """A locked ``cudaXYZ`` build of ``version`` on ``platform`` that the route does not build: (its release
    row, the CUDA lines that do exist there). None when the build is one of them, is not a CUDA build, or the
    release is unknown (unknown is not absent)."""
    line = compat.cuda_in_build(build or "")
    rel = released(version, route_name)
    if rel is None or not line or "." not in line:
        return None
    if cuda_verdict(rel, [platform], line, exact_build=True).ok:
        return None
    return rel, rel.cuda_on(platform)


__all__ = [
    "RECORD_NAMES",
    "ChannelRecords",
    "ChannelUnreachable",
    "CudaVerdict",
    "TorchRecord",
    "Variant",
    "answering",
    "channel_url",
    "cuda_verdict",
    "fetch",
    "installed_variant",
    "offline",
    "released",
    "route",
    "solve",
    "table_note",
    "torch_record",
    "unbuilt_cuda_line",
    "variant_of",
    "virtual_packages",
]
