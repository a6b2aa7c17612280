"""``envguard create``: build an environment from the lock, atomically, with every hash verified.

The sequence, all under a per-prefix lock (envguard.create.prefixlock):

1. Clean what an interrupted earlier run left beside the target (envguard.create.staging.cleanup_leftovers).
2. Verify the sha256 of every local (``file://``) artifact against the lock: rattler does not.
3. Build. A relocatable backend (rattler) builds in ``.<name>.envguard-staging-<pid>`` beside the target,
   with rattler's ``alternative_target_prefix`` so that placeholders and shebangs carry the final path.
   pip packages go into the same staging directory, then the fingerprint.
4. Swap it into place: a plain rename when the target is absent; over an existing environment (``--force``)
   an atomic exchange (Linux ``renameat2(RENAME_EXCHANGE)``), or else rename-aside + rename-in. The old
   environment is deleted only once the new one is in place.

A SIGKILL at any point leaves the target as it was once the next run has cleaned up: staging directories
are deleted, an old environment renamed aside is put back if the target is missing, and (for external
backends, which build at the target path itself) a half-built target marked by
``.<name>.envguard-building-<pid>`` is removed before the old one is restored. SIGINT is deferred while the
renames run.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envguard import __version__, settings
from envguard.create.backends import Backend, InstallPlan, get_backend
from envguard.create.backends.pip_step import PipArtifact, install_pip
from envguard.create.integrity import Artifact, strip_archive_suffix, verify_cache_entries
from envguard.create.prefixlock import PrefixLock
from envguard.create.prelink import prepare
from envguard.create.staging import (
    cleanup_leftovers,
    deferred_sigint,
    fault_hook,
    is_empty_dir,
    is_env,
    os_error,
    rmtree,
    swap_in,
)
from envguard.errors import EnvguardError, IntegrityError, Interrupted, StaleLockError, UserError
from envguard.fingerprint import Fingerprint, read_fingerprint, write_fingerprint
from envguard.leftovers import BUILDING_TAG, OLD_TAG, STAGING_TAG, interrupt_report, sibling
from envguard.model import pep503
from envguard.platforms import host_platform
from envguard.redact import MASK, redact

if TYPE_CHECKING:
    from envguard.lock import Freshness


# --------------------------------------------------------------------------- reporting


class CreateReporter:
    """Callbacks for progress; every method is a no-op here. envguard/create/render.py renders them with rich.

    ``cached``/``linked`` may be called from installer threads.
    """

    def stage(self, text: str) -> None:
        """A new step begins (verifying, installing, pip, activating, checking)."""

    def waiting(self, holder_pid: int | None, waited_s: float) -> None:
        """Another envguard holds the prefix lock; called every few seconds while waiting."""

    def install_start(self, total: int) -> None:
        """The installer starts ``total`` package operations."""

    def cached(self, name: str) -> None:
        """A package is in the package cache (downloaded or already there)."""

    @property
    def wants_events(self) -> bool:
        """Whether install_start/cached/linked are listened to (default: when a subclass overrides one).
        Without a listener the installer is not asked for per-package events, which cost time."""
        cls = type(self)
        return any(getattr(cls, m) is not getattr(CreateReporter, m) for m in ("install_start", "cached", "linked"))

    def linked(self, name: str) -> None:
        """A package is linked into the new environment."""

    def note(self, text: str) -> None:
        """Something envguard did besides the create itself (cleaning up after an interrupted run)."""


class _Progress:
    """InstallProgress for backends: forwards to the reporter and runs the fault hook ``link:<n>``
    (envguard.create.staging.fault_hook) as each package is linked."""

    def __init__(self, reporter: CreateReporter) -> None:
        self.reporter = reporter
        self.linked_count = 0
        self._lock = threading.Lock()

    @property
    def wants_events(self) -> bool:
        # an armed test hook (``link:<n>``) counts linked events even when nothing is displayed
        return bool(getattr(self.reporter, "wants_events", True) or settings.test_hook(settings.TEST_KILL_AT)
                    or settings.test_hook(settings.TEST_PAUSE_AT))

    def install_start(self, total: int) -> None:
        self.reporter.install_start(total)

    def cached(self, name: str) -> None:
        self.reporter.cached(name)

    def linked(self, name: str) -> None:
        with self._lock:
            self.linked_count += 1
            n = self.linked_count
        self.reporter.linked(name)
        fault_hook(f"link:{n}")

    def message(self, text: str) -> None:
        self.reporter.stage(text)


# --------------------------------------------------------------------------- result


@dataclass
class CreateResult:
    prefix: Path
    status: str  # "created", "replaced" (drifted, or --force) or "unchanged"
    backend: str
    lockfile: Path
    fingerprint: Fingerprint
    conda_count: int = 0
    pip_count: int = 0
    verified_local: int = 0
    waited: bool = False
    check: Any = None  # envguard.check.CheckReport when the command layer checked the new environment
    seconds: float = 0.0  # lock to environment in place, without the check
    drift: list[str] = field(default_factory=list)  # how the environment it replaced differed from the lock

    @property
    def exit_code(self) -> int:
        """0, or the check's exit code when the post-create check found problems."""
        if self.check is not None:
            return int(getattr(self.check, "exit_code", 0))
        return 0


# --------------------------------------------------------------------------- lock



@dataclass
class LockPlan:
    lockfile: Path
    platform: str
    content_hash: str | None
    conda: list[Artifact]
    pip: list[PipArtifact]
    sources: list[Path]

    def fingerprint(self, backend: str) -> Fingerprint:
        return Fingerprint(
            platform=self.platform,
            content_hash=self.content_hash,
            conda={a.name: (a.sha256 or f"md5:{a.md5}") for a in self.conda},
            pip={pep503(p.name): (p.sha256 or "") for p in self.pip},
            lockfile=redact(str(self.lockfile)),
            backend=backend,
            envguard_version=__version__,
        )


_PLACEHOLDER = re.compile(r"\$\{(?P<var>[A-Za-z_][A-Za-z0-9_]*)\}")


def expand_url(url: str, lockfile: Path, package: str) -> str:
    """conda-lock writes credentials as ``${VAR}`` placeholders; fill them from the environment. A credential
    the lock holds masked (``***``: it was written literally in the spec) can only fail: say so up front."""
    if MASK in url:
        from envguard.auth import split_credentials

        parts = split_credentials(url)
        if MASK in (parts.user, parts.password, parts.token):
            raise UserError(f"{package}: the lock holds this URL's credential masked ({redact(url)}): the "
                            "environment file named it literally, and envguard never writes a credential",
                            file=str(lockfile), key="url",
                            fix="write it as ${VAR} placeholders in the environment file (https://${USER}:${PASS}@"
                                "host/..., /t/${TOKEN}/), run `envguard lock`, and export the variables")

    def sub(m: re.Match[str]) -> str:
        value = os.environ.get(m["var"])
        if value is None:
            raise UserError(f"{package}: the URL needs ${{{m['var']}}}, which is not set", file=str(lockfile),
                            fix=f"export {m['var']}=... (the credential for that channel)")
        return value

    return _PLACEHOLDER.sub(sub, url) if "${" in url else url


def _checked_url(url: str, locked: str, lockfile: Path, package: str) -> str:
    """``url`` when it parses (host, port): a damaged lock is bad input, not an installer crash."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port out of range or not a number
    except ValueError as e:
        raise UserError(f"{package}: not a valid URL ({e}): {redact(locked)}", file=str(lockfile), key="url",
                        fix="restore the lock from version control, or re-lock with `envguard lock`") from None
    return url


_HEX = {"sha256": re.compile(r"^[0-9a-fA-F]{64}$"), "md5": re.compile(r"^[0-9a-fA-F]{32}$")}


def _hash_field(entry: Any, algorithm: str, lockfile: Path) -> str | None:
    value = getattr(entry, algorithm)
    if value is None or value == "":
        return None
    # YAML turns an all-digit "hash" into a number: that, like any non-hex value, is a damaged lock
    if not isinstance(value, str) or not _HEX[algorithm].match(value):
        raise IntegrityError(f"{lockfile}: {entry.name}: hash.{algorithm} is not a {algorithm} ({value!r})",
                             fix="restore the lock from version control, or re-lock with `envguard lock`",
                             command="envguard lock")
    return value.lower()


def _entry_fields(entry: Any, lockfile: Path) -> dict[str, Any]:
    """The fields of an envguard.lock.lockfile.LockEntry that installing needs."""
    return {
        "name": entry.name,
        "version": str(entry.version),
        "url": entry.url,
        "sha256": _hash_field(entry, "sha256", lockfile),
        "md5": _hash_field(entry, "md5", lockfile),
        "build": None,  # conda: from the file name, in _conda_artifact
        "depends": tuple(entry.depends),
        "platform": entry.platform,
    }


def _conda_artifact(f: dict[str, Any], url: str, lockfile: Path) -> Artifact:
    path = url.split("?", 1)[0].split("#", 1)[0]
    filename = path.rsplit("/", 1)[-1]
    stem = strip_archive_suffix(filename)
    if stem == filename:
        raise UserError(f"{f['name']}: the URL is not a conda package (.conda or .tar.bz2): {redact(url)}",
                        file=str(lockfile), fix="re-lock with `envguard lock`")
    # the build string, as envguard.lock.lockfile.LockEntry.build reads it
    head = f"{f['name']}-{f['version']}-"
    build = stem[len(head):] if stem.startswith(head) else stem.rsplit("-", 1)[-1]
    if not build:
        parts = stem.rsplit("-", 2)
        build = parts[2] if len(parts) == 3 else ""
    if not build:
        raise UserError(f"{f['name']}: cannot read the build string from {filename}", file=str(lockfile),
                        fix="re-lock with `envguard lock`")
    subdir = path.rsplit("/", 2)[-2] if path.count("/") >= 2 else (f["platform"] or "noarch")
    return Artifact(name=f["name"], version=f["version"], build=build, url=url,
                    sha256=(f["sha256"] or "").lower() or None, md5=(f["md5"] or "").lower() or None,
                    subdir=subdir, depends=f["depends"], locked_url=f["url"] if f["url"] != url else None)


def read_plan(lockfile: Path, platform: str) -> LockPlan:
    """The host platform's conda artifacts and pip packages from a conda-lock file."""
    from envguard.lock import host_records, pip_records, read_lock

    lock = read_lock(lockfile)
    if platform not in lock.platforms:
        raise StaleLockError(f"{lockfile}: the lock has no packages for this machine's platform {platform} "
                             f"(it covers {', '.join(lock.platforms) or 'none'})",
                             fix=f"`envguard lock` with {platform} among the platforms")
    conda: list[Artifact] = []
    pip: list[PipArtifact] = []
    for entry in host_records(lock, platform):
        f = _entry_fields(entry, lockfile)
        if not f["name"].startswith("__"):  # virtual packages are never installed
            url = _checked_url(expand_url(f["url"], lockfile, f["name"]), f["url"], lockfile, f["name"])
            conda.append(_conda_artifact(f, url, lockfile))
    for entry in pip_records(lock, platform):
        f = _entry_fields(entry, lockfile)
        url = _checked_url(expand_url(f["url"], lockfile, f["name"]), f["url"], lockfile, f["name"])
        pip.append(PipArtifact(f["name"], f["version"], url, (f["sha256"] or "").lower() or None,
                               locked_url=f["url"] if url != f["url"] else None))
    sources = [lockfile.parent / s for s in lock.sources]
    return LockPlan(lockfile, platform, lock.content_hash.get(platform), conda, pip, sources)


def _freshness(files: Sequence[Path], lockfile: Path, platform: str) -> Freshness:
    """`envguard lock --check`'s verdict, for this platform only."""
    from envguard.lock import check_fresh

    return check_fresh(list(files), lockfile, platforms=[platform])


def spec_files_for(env_files: Sequence[Path], lockfile: Path | None, cwd: Path) -> list[Path]:
    """The environment files this create reads: ``-f``, else ``environment.yml`` beside the lock (default:
    in the working directory) when it exists. Their ``name:`` names the environment without -p/-n."""
    if env_files:
        return [Path(f) for f in env_files]
    spec = (Path(lockfile).parent if lockfile is not None else cwd) / "environment.yml"
    return [spec] if spec.is_file() else []


def ensure_lock(lockfile: Path | None, env_files: Sequence[Path], *, locked: bool,
                reporter: CreateReporter, cwd: Path, frozen: bool = False,
                spec_files: Sequence[Path] | None = None) -> Path:
    """The lock to install from: given, default, or made now from the spec (neither --locked nor --frozen)."""
    from envguard.yamlio import special_file

    files = [Path(f) for f in env_files]
    for f in files:
        if not f.is_file():
            raise UserError("is a directory, expected an environment file" if f.is_dir() else
                            special_file(f) or "environment file not found", file=str(f), key="-f",
                            fix="pass an existing environment.yml")
    specs = list(spec_files) if spec_files is not None else files
    lockfile = Path(lockfile) if lockfile is not None else (files[0].parent if files else cwd) / "conda-lock.yml"
    if lockfile.is_dir() or special_file(lockfile):  # never lock into a FIFO or a device either
        raise UserError("is a directory, expected a lock file" if lockfile.is_dir() else str(special_file(lockfile)),
                        file=str(lockfile), key="--lockfile", fix="pass the path of conda-lock.yml")
    if lockfile.is_file():
        return lockfile
    if not specs or locked or frozen:
        flag = "--frozen" if frozen else "--locked"
        why = f"{flag} needs an existing lock" if (locked or frozen) else "nothing to install from"
        raise StaleLockError(f"lock file not found: {lockfile} ({why})",
                             fix="run `envguard lock` first" + ("" if specs else ", or pass -f environment.yml"),
                             command="envguard lock")
    reporter.stage(f"no lock yet: locking {', '.join(str(f) for f in specs)} into {lockfile}")
    from envguard.lock import lock as do_lock

    do_lock(specs, lockfile=lockfile)
    return lockfile


def _spec_declares_platforms(files: Sequence[Path]) -> bool:
    from envguard.yamlio import load_fast

    for f in files:
        try:
            data = load_fast(f)
        except (EnvguardError, OSError):
            continue
        if isinstance(data, dict) and data.get("platforms"):
            return True
    return False


def check_lock_fresh(plan: LockPlan, env_files: Sequence[Path], *, locked: bool, frozen: bool = False,
                     reporter: CreateReporter | None = None) -> tuple[LockPlan, list[str]]:
    """Staleness as uv and pixi treat it: a stale lock is re-locked first (then installed), refused with
    ``--locked`` (exit 4) and not looked at with ``--frozen``. Returns the plan to install and notes.
    Sources named by the lock that no longer exist are not checked."""
    if frozen:
        return plan, []
    files = [Path(f) for f in env_files] or [s for s in plan.sources if s.is_file()]
    if not files or (not env_files and len(files) != len(plan.sources)):
        return plan, []
    verdict = _freshness(files, plan.lockfile, plan.platform)
    if verdict.fresh:
        return plan, []
    if locked:
        raise StaleLockError(f"--locked: {verdict.message}; `envguard create` without --locked re-locks it first, "
                             "--frozen installs it as it is", command=verdict.command or None)
    reason = verdict.reason
    if reporter is not None:
        reporter.stage(f"re-locking: {reason}")
    from envguard.lock import lock as do_lock
    from envguard.lock import read_lock

    platforms = None if _spec_declares_platforms(files) else list(read_lock(plan.lockfile).platforms) or None
    fault_hook("relock")
    try:
        do_lock(files, platforms=platforms, lockfile=plan.lockfile)
    except EnvguardError as e:
        raise EnvguardError(f"{reason}, and re-locking it failed: {e.message}",
                            fix="correct that and rerun, or install the lock as it is with `envguard create --frozen`",
                            exit_code=e.exit_code) from None
    return read_plan(plan.lockfile, plan.platform), [f"{reason}: re-locked it first"]


def scrub_credentials(prefix: Path, artifacts: Sequence[Artifact]) -> int:
    """Write into conda-meta the URL as the lock has it (``${VAR}`` placeholders included) where the
    installer was given another one: the URL without credentials, or a verified local copy of the archive."""
    changed = 0
    for art in artifacts:
        wanted = art.locked_url or art.url
        if art.install_url == wanted:
            continue
        record = prefix / "conda-meta" / f"{art.stem}.json"
        try:
            text = record.read_text(encoding="utf-8")
        except OSError:
            continue
        locked_channel = wanted.rsplit("/", 2)[0]
        new = text.replace(json_str(art.install_url), json_str(wanted))
        if locked_channel != art.channel:
            new = new.replace(json_str(art.channel), json_str(locked_channel))
        if new != text:
            record.write_text(new, encoding="utf-8")
            changed += 1
    return changed


def json_str(value: str) -> str:
    import json

    return json.dumps(value)[1:-1]


# --------------------------------------------------------------------------- create


def create(
    prefix: str | os.PathLike[str] | None = None,
    *,
    name: str | None = None,
    lockfile: str | os.PathLike[str] | None = None,
    env_files: Sequence[str | os.PathLike[str]] = (),
    force: bool = False,
    locked: bool = False,
    frozen: bool = False,
    backend: str | None = None,
    timeout: float | None = None,
    reporter: CreateReporter | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    platform: str | None = None,
) -> CreateResult:
    """Make the environment at ``prefix`` (or ``-n name``, else the spec's ``name:``) exactly the lock.

    A sync: a missing environment is created, one that drifted from the lock is rebuilt (see
    envguard.create.drift), one that matches is left alone unless ``force``. A stale lock is re-locked first;
    ``locked`` refuses it, ``frozen`` installs the lock without reading the spec. See the module doc. The
    new environment is not checked here: the command layer does that (envguard.workflow.create_and_check).

    Raises EnvguardError subclasses: UserError (2: bad input, target is not an environment), IntegrityError
    (3), StaleLockError (4: lock missing, stale under --locked, or without this platform), BusyError (5),
    BackendError (6: installer, permissions, disk full, a failed re-lock).
    """
    started = time.monotonic()
    rep = reporter or CreateReporter()
    from envguard.envs import resolve_target

    if locked and frozen:
        raise UserError("--locked and --frozen exclude each other", key="--frozen",
                        fix="--locked refuses a stale lock, --frozen installs it without looking at the spec: "
                            "pass one of them")
    files = [Path(f) for f in env_files]
    here = Path(cwd) if cwd else Path.cwd()
    specs = spec_files_for(files, Path(lockfile) if lockfile is not None else None, here)
    target = resolve_target(prefix, name, existing=False, cwd=here, spec_files=specs)
    if timeout is not None and timeout < 0:
        raise UserError(f"must be 0 or more seconds, got {timeout:g}", key="--timeout",
                        fix="pass how long to wait for another create of this prefix, e.g. --timeout 600")
    for parent in target.parents:  # a file where a directory of the path must go: bad input, not a disk fault
        if parent.exists():
            if not parent.is_dir():
                raise UserError("a file stands where a directory of the prefix path must go", file=str(parent),
                                key="-p", fix="choose a prefix path whose parents are directories")
            break
    be = get_backend(backend)
    found: dict[str, tuple[int, int] | None] = {}  # what stood at the target before this run built anything
    expected: Fingerprint | None = None
    try:
        lock_path = ensure_lock(Path(lockfile) if lockfile is not None else None, files, locked=locked,
                                frozen=frozen, reporter=rep, cwd=here, spec_files=specs)
        platform = platform or host_platform()
        plan = read_plan(lock_path, platform)
        plan, notes = check_lock_fresh(plan, files, locked=locked, frozen=frozen, reporter=rep)
        for n in notes:
            rep.note(n)
        expected = plan.fingerprint(be.name)
        pkgs = Path(cache_dir) if cache_dir is not None else settings.package_cache_dir()
        return _create_locked(target, be, plan, lock_path, platform, expected, pkgs, force=force, timeout=timeout,
                              rep=rep, started=started, found=found)
    except Interrupted:
        raise
    except KeyboardInterrupt:  # say what the target really holds now (a (re-)lock is replaced atomically)
        in_place = expected is not None and _new_env_in_place(target, found, expected)
        raise Interrupted(interrupt_report(target, in_place)) from None


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _new_env_in_place(target: Path, found: dict[str, tuple[int, int] | None], expected: Fingerprint) -> bool:
    """Whether this run's new environment stands at ``target``: another directory than the one found there
    before the build, carrying the lock's fingerprint. The fingerprint alone cannot tell: an environment
    that drifted after create (or one rebuilt with --force) carries the same one while it is still the old."""
    if "before" not in found:
        return False  # interrupted before this run touched the target (waiting for the prefix lock)
    now = _identity(target)
    if now is None or now == found["before"]:
        return False
    current = read_fingerprint(target)
    return current is not None and current.digest == expected.digest


def _create_locked(target: Path, be: Backend, plan: LockPlan, lock_path: Path, platform: str, expected: Fingerprint,
                   pkgs: Path, *, force: bool, timeout: float | None,
                   rep: CreateReporter, started: float,
                   found: dict[str, tuple[int, int] | None]) -> CreateResult:
    drift: list[str] = []
    with PrefixLock(target, timeout=timeout, on_wait=rep.waiting) as plock:
        for note in cleanup_leftovers(target):
            rep.note(note)
        _refuse_non_env(target)  # only now: a half-built target of a killed run is gone after the cleanup
        found["before"] = _identity(target)
        replacing = target.exists() and is_env(target)
        if replacing:
            _refuse_base(target)
            from envguard.create.drift import find_drift

            rep.stage(f"comparing {target} with {lock_path}")
            drift = find_drift(plan.conda, plan.pip, target)
            current = read_fingerprint(target)
            if not drift and not (force and not plock.waited):
                if current is None or current.digest != expected.digest:
                    write_fingerprint(target, expected)  # the same packages: record them for check
                return CreateResult(prefix=target, status="unchanged", backend=be.name, lockfile=lock_path,
                                    fingerprint=expected, conda_count=len(plan.conda), pip_count=len(plan.pip),
                                    waited=plock.waited, seconds=time.monotonic() - started)

        # hashes, the package cache and every path checked before anything is linked (envguard.create.prelink)
        prepared = prepare(plan.conda, pkgs, platform=platform, lockfile=lock_path, use_cache=be.name == "rattler",
                           note=rep.note, stage=rep.stage)
        verified = prepared.verified_local
        plan.conda = list(prepared.artifacts)
        progress = _Progress(rep)
        install_plan = InstallPlan(prepared.artifacts, target, pkgs, platform, lock_path, prepared.client)
        try:
            if be.relocatable:
                _build_staged(be, install_plan, plan, expected, target, pkgs, progress, rep)
            else:
                _build_in_place(be, install_plan, plan, expected, target, progress, rep)
            prepared.finalize()
        finally:
            prepared.cleanup()

    return CreateResult(prefix=target, status="replaced" if replacing else "created", backend=be.name,
                        lockfile=lock_path, fingerprint=expected, conda_count=len(plan.conda),
                        pip_count=len(plan.pip), verified_local=verified, waited=plock.waited,
                        seconds=time.monotonic() - started, drift=drift)


def summarise_drift(drift: Sequence[str]) -> str:
    """How an environment differed from the lock, in one line (the first few differences)."""
    from envguard.create.drift import summarise

    return summarise(drift)


def _refuse_base(target: Path) -> None:
    """A conda installation's base environment holds conda itself: a sync never replaces it."""
    if (target / "condabin").is_dir():
        raise UserError(f"{target} is the base environment of a conda installation; envguard does not replace it",
                        key="-p", fix="create the project's environment at another prefix (-p) or name (-n)")


def _refuse_non_env(target: Path) -> None:
    if target.is_symlink() and not target.exists():
        raise UserError(f"{target} is a dangling symlink", key="-p", fix="remove it or choose another prefix")
    if target.exists() and not is_env(target) and not is_empty_dir(target):
        kind = "a file" if not target.is_dir() else "a directory that is not a conda environment (no conda-meta/)"
        raise UserError(f"{target} exists and is {kind}; it was left untouched", key="-p",
                        fix="choose another prefix, or remove it yourself")


def _complete(plan: LockPlan, expected: Fingerprint, build_dir: Path, target: Path, rep: CreateReporter) -> None:
    """After the conda packages, wherever the environment is built: credentials out of the records, the pip
    packages (their scripts pointing at ``target``), then the fingerprint that marks it finished."""
    scrub_credentials(build_dir, plan.conda)
    if plan.pip:
        rep.stage(f"installing {len(plan.pip)} pip packages (--no-deps --require-hashes)")
        install_pip(plan.pip, build_dir, target, plan.lockfile)
    write_fingerprint(build_dir, expected)


def _build_staged(be: Backend, install_plan: InstallPlan, plan: LockPlan, expected: Fingerprint, target: Path,
                  pkgs: Path, progress: _Progress, rep: CreateReporter) -> None:
    staging = sibling(target, STAGING_TAG)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        staging.mkdir()
    except OSError as e:
        raise os_error(e, "cannot create the staging directory", staging) from e
    interrupted = False
    try:
        rep.stage(f"installing {len(plan.conda)} packages with {be.describe()}")
        be.install(install_plan, staging, progress)
        verify_cache_entries(plan.conda, pkgs, lockfile=plan.lockfile)
        _complete(plan, expected, staging, target, rep)
        fault_hook("staged")
        rep.stage(f"moving the new environment into place at {target}")
        swap_in(staging, target)
    except KeyboardInterrupt:
        # rattler's transaction may still be writing into the staging directory from its own threads:
        # leave it; the next run removes it once this process is gone.
        interrupted = True
        raise
    except OSError as e:
        raise os_error(e, "cannot write", staging) from e
    finally:
        if not interrupted and staging.exists():
            _remove_settled(staging)


def _remove_settled(path: Path, *, settle: float = 10.0) -> None:
    """Remove a failed staging directory. When rattler's transaction fails (e.g. a hash mismatch on one
    download) it returns while its other link tasks may still be writing into the directory for a moment, so
    a single rmtree can lose the race: retry until the directory stays gone."""
    deadline = time.monotonic() + settle
    while True:
        rmtree(path)
        time.sleep(0.05)
        if not path.exists() or time.monotonic() > deadline:
            return


def _build_in_place(be: Backend, install_plan: InstallPlan, plan: LockPlan, expected: Fingerprint,
                    target: Path, progress: _Progress, rep: CreateReporter) -> None:
    old: Path | None = None
    marker = sibling(target, BUILDING_TAG)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with deferred_sigint():
            if target.exists():
                old = sibling(target, OLD_TAG)
                os.rename(target, old)
            fault_hook("swap")
            marker.touch()  # from here on a dead run's target is half-built (see cleanup_leftovers)
    except OSError as e:
        if old is not None and old.exists() and not target.exists():
            os.rename(old, target)
        raise os_error(e, "cannot prepare", target) from e
    ok = False
    try:
        rep.stage(f"installing {len(plan.conda)} packages with {be.describe()} at {target}")
        be.install(install_plan, target, progress)
        _complete(plan, expected, target, target, rep)
        ok = True
    finally:
        with deferred_sigint():
            if not ok:
                if target.exists() or target.is_symlink():
                    rmtree(target)
                if old is not None:
                    os.rename(old, target)
            marker.unlink(missing_ok=True)
    if old is not None:
        rmtree(old)
