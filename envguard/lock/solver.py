"""Solve conda specs with rattler, one platform at a time.

The virtual packages come from conda-lock's own virtual-package repodata,
so that the solve and conda-lock's content hash see the same machine.
``virtual_packages=None`` would mean *no* virtual packages to rattler, so they
are always passed explicitly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from envguard import settings
from envguard.errors import BackendError
from envguard.lock.lockfile import cuda_arg
from envguard.redact import redact
from envguard.versions import conda_key

if TYPE_CHECKING:
    from envguard.lock.solvefail import SpecLines


def virtual_package_repo(cuda: str | bool | None) -> Any:
    """conda-lock's FakeRepoData for the CUDA assumption (it writes a temp dir, removed at exit).

    Cached per assumption: conda-lock's hash functions copy it before changing anything.
    """
    return _virtual_package_repo(cuda_arg(cuda))


@lru_cache(maxsize=8)
def _virtual_package_repo(cuda_version: str) -> Any:
    from conda_lock.virtual_package import default_virtual_package_repodata

    return default_virtual_package_repodata(cuda_version=cuda_version)


def platform_virtual_packages(vpr: Any, platform: str) -> dict[str, Any]:
    """conda-lock's virtual package entries for ``platform`` (file name -> repodata entry)."""
    data = vpr.all_repodata.get(platform) or {}
    return dict(data.get("packages") or {})


def rattler_virtual_packages(vpr: Any, platform: str) -> list[Any]:
    """The same virtual packages as rattler objects; the highest version per name wins, as in conda."""
    from rattler import BuildString, GenericVirtualPackage, PackageName, Version

    best: dict[str, dict[str, Any]] = {}
    for entry in platform_virtual_packages(vpr, platform).values():
        name = entry["name"]
        cur = best.get(name)
        if cur is None or conda_key(str(entry["version"])) > conda_key(str(cur["version"])):
            best[name] = entry
    return [
        GenericVirtualPackage(PackageName(e["name"]), Version(str(e["version"])), BuildString(str(e["build"])))
        for _, e in sorted(best.items())
    ]


def cuda_version_of(vpr: Any, platform: str) -> str | None:
    for entry in platform_virtual_packages(vpr, platform).values():
        if entry["name"] == "__cuda":
            return str(entry["version"])
    return None


def match_spec_of(dep: Any) -> str:
    """A conda-lock VersionedDependency as a matchspec string."""
    version = (dep.version or "").replace(" ", "")
    build = dep.build or ""
    spec = dep.name
    if build:
        spec += f" {version or '*'} {build}"
    elif version and version != "*":
        spec += f" {version}"
    if getattr(dep, "conda_channel", None):
        spec = f"{dep.conda_channel}::{spec}"
    return spec


def _restore_credentials(record: Any, restore: dict[str, str]) -> None:
    """Put a channel's credentials back into a solved record's URL (conda-lock maps it to ``${VAR}``s)."""
    url = str(record.url)
    for clean, real in restore.items():
        if url.startswith(clean):
            record.url = real + url[len(clean):]
            return


def _explain(e: BaseException) -> str:
    text = str(e).strip() or type(e).__name__
    return redact(text)


@dataclass(frozen=True)
class Preferred:
    """A record of the existing lock the solve should keep when the spec still allows it."""

    name: str
    subdir: str
    filename: str
    sha256: str | None = None


@dataclass
class Solution:
    records: dict[str, list[Any]]  # platform -> RepoDataRecords
    # platform -> names of preferred records the channels no longer serve (the solve could not keep them)
    unavailable: dict[str, set[str]] = field(default_factory=dict)


async def _preferred_records(gateway: Any, chans: list[Any], platform: str, wanted: Sequence[Preferred]) -> tuple[
        list[Any], set[str]]:
    """The channels' own RepoDataRecords for ``wanted`` (rattler prefers a locked record only if it is the
    channel's record), and the names whose locked file the channels no longer have."""
    if not wanted:
        return [], set()
    result = await gateway.query(chans, [platform, "noarch"], sorted({w.name for w in wanted}), recursive=False)
    by_file: dict[tuple[str, str], list[Any]] = {}
    for records in result:
        for r in records:
            by_file.setdefault((str(r.subdir), str(r.file_name)), []).append(r)
    found: list[Any] = []
    missing: set[str] = set()
    for w in wanted:
        candidates = by_file.get((w.subdir, w.filename), [])
        same = [r for r in candidates if w.sha256 and r.sha256 and r.sha256.hex() == w.sha256]
        if same or candidates:  # a same-named file with another hash is a rebuild: keep the name, report it
            found.append((same or candidates)[0])
        else:
            missing.add(w.name)
    return found, missing


def solve_platforms(
    *,
    channels: Sequence[str],
    dependencies: dict[str, list[Any]],
    virtual_packages: dict[str, list[Any]],
    on_platform: Callable[[str, int], None] | None = None,
    cuda_note: str = "",
    preferred: dict[str, list[Preferred]] | None = None,
    update: Callable[[str], bool] | None = None,
    where: SpecLines | None = None,
) -> Solution:
    """Solve each platform (key of ``dependencies``); return platform -> RepoDataRecords.

    ``preferred`` (platform -> records of the existing lock) become rattler's ``locked_packages``: the
    solver keeps each one unless the specs, or what the other packages need, exclude it. That is what makes
    an edit move only what it must. ``channels`` are real URLs/names (``${VAR}`` already expanded): they
    are never printed unredacted. Unsatisfiable specs raise BackendError (exit 6) carrying rattler's
    explanation.

    ``update`` says which package names move on purpose (``--update NAME``). Leaving them out of the
    preferred records is not enough: the solver may settle a locked dependency of theirs first and then keep
    the old version of the named package. So the named packages are constrained to the records a solve from
    scratch picks for them (that solution satisfies every spec, so the constrained solve has one too).

    ``where`` (envguard.lock.solvefail.SpecLines) says which spec line asked for each package: a requested
    package or version the channels do not hold becomes a UserError (exit 2) naming that line and what the
    channels have instead; a conflict keeps rattler's explanation and gets the lines it names.
    """
    import rattler
    from rattler import Channel, ChannelPriority, Gateway, MatchSpec, Subdir

    # Credentials go to rattler's client, never inside a URL its repodata cache would write (envguard.auth);
    # the solved records get them back so that the lock keeps the channel URL as written.
    from envguard import condaconfig
    from envguard.auth import Credentials

    # channel names resolved the way this user's conda resolves them (.condarc, CONDA_*), pixi's mirrors
    config = condaconfig.load()
    channels = config.expand(list(channels))
    offline = settings.solve_offline()
    creds = Credentials()
    clean = [creds.strip(c) for c in channels]
    restore = {c.rstrip("/") + "/": real.rstrip("/") + "/"
               for c, real in zip(clean, channels, strict=True) if c != real}

    async def run() -> Solution:
        from rattler import SourceConfig

        # offline: repodata only from rattler's cache (and local channels, read from disk), never the network
        source = SourceConfig(cache_action="force-cache-only") if offline else None
        gateway = Gateway(cache_dir=settings.rattler_cache_dir(), client=creds.client(config.mirror_map()),
                          default_config=source)
        chans = [Channel(c) for c in clean]
        out = Solution(records={})
        for i, (platform, deps) in enumerate(dependencies.items(), start=1):
            if on_platform:
                on_platform(platform, i)
            specs = [MatchSpec(match_spec_of(d), strict=False) for d in deps
                     if d.manager == "conda" and getattr(d, "version", None) is not None]
            try:
                locked, out.unavailable[platform] = await _preferred_records(
                    gateway, chans, platform, (preferred or {}).get(platform, []))
                common: dict[str, Any] = {
                    "gateway": gateway, "platforms": [Subdir(platform), Subdir("noarch")],
                    "virtual_packages": virtual_packages[platform], "channel_priority": ChannelPriority.Strict,
                    "strategy": "highest"}
                constraints = []
                if locked and update is not None:
                    scratch = await rattler.solve(chans, specs, **common)
                    constraints = [MatchSpec(f"{r.name.normalized} =={r.version} {r.build}", strict=False)
                                   for r in scratch if update(r.name.normalized)]
                out.records[platform] = await rattler.solve(
                    chans, specs, locked_packages=locked or None, constraints=constraints or None, **common)
                for record in out.records[platform] if restore else ():
                    _restore_credentials(record, restore)
            except Exception as e:  # noqa: BLE001 - rattler's solver errors have no common public base
                kind = type(e).__name__
                if kind == "SolverError":
                    from envguard.lock.solvefail import solve_failure

                    hint = ""
                    if "__cuda" in str(e) and cuda_note:
                        hint = f" (the solve assumed {cuda_note}; pass --cuda X.Y to assume another driver)"
                    raise await solve_failure(e, gateway=gateway, chans=chans, channels=clean, platform=platform,
                                              specs=specs, platforms=list(dependencies), where=where,
                                              hint=hint) from None
                # one line: rattler chains its causes as "\nCaused by: ..." lines
                cause = "; ".join(line.strip() for line in _explain(e).splitlines() if line.strip())
                if offline:
                    remote = [redact(c) for c in channels if not c.startswith(("file://", "/", "."))]
                    raise BackendError(
                        f"offline: cannot load channels for {platform} from the cache ({kind}): {cause}",
                        fix="lock once online so that rattler caches the repodata of "
                        + (", ".join(remote) or "these channels")
                        + ", or name a local channel (docs/offline.md)") from None
                raise BackendError(f"cannot load channels for {platform} ({kind}): {cause}",
                                   fix="check the channel URLs and that they are reachable; without a network "
                                   "use --offline with cached repodata or a local channel (docs/offline.md)") from None
        return out

    import asyncio  # lazily: why and check import this module (Preferred) and solve nothing

    return asyncio.run(run())
