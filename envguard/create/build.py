"""Building the environment under the prefix lock: drift against the lock, then a staged build swapped into
place (relocatable backends) or a build at the target with the old environment set aside (external ones);
credentials scrubbed from the records, pip packages, and the fingerprint last.

For envguard.create: :func:`create_locked` (the build, once the plan is made and the prefix lock held),
:func:`target_identity` (the target's device and inode, to tell a target replaced while create ran),
:func:`scrub_credentials` and :func:`json_str` (conda-meta records as the lock writes their URLs)."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path

from envguard.create.backends import Backend, InstallPlan
from envguard.create.backends.pip_step import install_pip
from envguard.create.integrity import Artifact, verify_cache_entries
from envguard.create.options import CreateOptions
from envguard.create.plan import LockPlan
from envguard.create.prefixlock import PrefixLock
from envguard.create.prelink import DOWNLOAD_TAG, prepare
from envguard.create.report import CreateReporter, CreateResult, Progress
from envguard.create.staging import (
    cleanup_leftovers,
    deferred_sigint,
    fault_hook,
    is_empty_dir,
    is_env,
    rmtree,
    swap_in,
)
from envguard.create.unpack import UNPACK_TAG
from envguard.errors import UserError, os_error
from envguard.fingerprint import Fingerprint, foreign_env, read_fingerprint, write_fingerprint
from envguard.leftovers import BUILDING_TAG, OLD_TAG, STAGING_TAG, remove_dead_owners, sibling


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


def target_identity(path: Path) -> tuple[int, int] | None:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def create_locked(target: Path, be: Backend, plan: LockPlan, lock_path: Path, platform: str, expected: Fingerprint,
                   pkgs: Path, options: CreateOptions, *,
                   rep: CreateReporter, started: float,
                   found: dict[str, tuple[int, int] | None]) -> CreateResult:
    """``options``: its force, timeout and offline (the rest is resolved into the other arguments)."""
    force, timeout, offline = options.force, options.timeout, options.offline
    drift: list[str] = []
    cause, built_from = "", None
    # the download folders of runs killed mid-download, whatever this run does next: one that finds the target
    # unchanged (or refuses it) downloads nothing, and left them in the package cache for good (#38 point 8)
    remove_dead_owners(pkgs, DOWNLOAD_TAG)
    remove_dead_owners(pkgs, UNPACK_TAG)  # and their half-extracted staging folders (envguard.create.unpack)
    with PrefixLock(target, timeout=timeout, on_wait=rep.waiting) as plock:
        for note in cleanup_leftovers(target):
            rep.note(note)
        _refuse_non_env(target)  # only now: a half-built target of a killed run is gone after the cleanup
        found["before"] = target_identity(target)
        replacing = target.exists() and is_env(target)
        if replacing:
            _refuse_base(target)
            from envguard.create.drift import find_drift

            rep.stage(f"comparing {target} with {lock_path}")
            current = read_fingerprint(target)
            foreign = foreign_env(target) if current is None else None
            drift, cause = find_drift(plan.conda, plan.pip, target, current, expected)
            built_from = current.lockfile if current is not None else None
            from envguard.variables import kept_variables, write_state

            plan.kept_variables = kept_variables(target, current.variables if current is not None else ())
            if not drift and not (force and not plock.waited):
                if foreign is None and write_state(target, plan.variables or {}, plan.kept_variables):
                    rep.note(f"{target}/conda-meta/state: the lock's variables set")
                if foreign is None and (current is None or (current.digest, current.lockfile, current.lock_sha256,
                                                            current.variables, current.variant)
                                        != (expected.digest, expected.lockfile, expected.lock_sha256,
                                            expected.variables, expected.variant)):
                    write_fingerprint(target, expected)  # the same packages: record them (and this lock) for check
                return CreateResult(prefix=target, status="unchanged", backend=be.name, lockfile=lock_path,
                                    fingerprint=expected, conda_count=len(plan.conda), pip_count=len(plan.pip),
                                    waited=plock.waited, seconds=time.monotonic() - started)
            if foreign is not None and not force:
                _refuse_foreign(target, foreign, drift)

        if offline:  # every package from the cache or a local channel, else all the missing ones named
            from envguard.create.offline import require

            require(plan.conda, plan.pip, pkgs, use_cache=be.name == "rattler")
        # hashes, the package cache and every path checked before anything is linked (envguard.create.prelink)
        prepared = prepare(plan.conda, pkgs, platform=platform, lockfile=lock_path, use_cache=be.name == "rattler",
                           note=rep.note, stage=rep.stage, offline=offline, reading=rep.verify_start,
                           read=rep.verified)
        fault_hook("verified")  # tests replace a channel's artifact here: the installer must not read it
        verified = prepared.verified_local
        plan.conda = list(prepared.artifacts)
        progress = Progress(rep)
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
                        seconds=time.monotonic() - started, drift=drift, drift_cause=cause, built_from=built_from)


def _refuse_base(target: Path) -> None:
    """A conda installation's base environment holds conda itself: a sync never replaces it."""
    if (target / "condabin").is_dir():
        raise UserError(f"{target} is the base environment of a conda installation; envguard does not replace it",
                        key="-p", fix="create the project's environment at another prefix (-p) or name (-n)")


def _refuse_foreign(target: Path, what: str, drift: Sequence[str]) -> None:
    """A sync replaces what envguard built; an environment someone else made may hold what they put there
    (files, packages installed by hand): replaced only when asked, with --force."""
    from envguard.create.drift import summarise

    differs = f" and differs from the lock ({summarise(drift, 3)})" if drift else ""
    raise UserError(f"{target} is {what}{differs}; it was left untouched", key="-p",
                    fix="pass --force to replace it with the lock's environment (the old one is kept until the new "
                        "one is in place), or choose another prefix")


def _refuse_non_env(target: Path) -> None:
    if target.is_symlink() and not target.exists():
        raise UserError(f"{target} is a dangling symlink", key="-p", fix="remove it or choose another prefix")
    if target.exists() and not is_env(target) and not is_empty_dir(target):
        from envguard.yamlio import kind_of

        kind = "a directory that is not a conda environment (no conda-meta/)" if target.is_dir() else kind_of(target)
        raise UserError(f"{target} exists and is {kind}; it was left untouched", key="-p",
                        fix="choose another prefix, or remove it yourself")


def _complete(plan: LockPlan, expected: Fingerprint, build_dir: Path, target: Path, rep: CreateReporter) -> None:
    """After the conda packages, wherever the environment is built: credentials out of the records, the pip
    packages (their scripts pointing at ``target``), then the fingerprint that marks it finished."""
    scrub_credentials(build_dir, plan.conda)
    if plan.pip:
        rep.stage(f"installing {len(plan.pip)} pip packages (--no-deps --require-hashes)")
        install_pip(plan.pip, build_dir, target, plan.lockfile)
    from envguard.create.history import write_history

    write_history(build_dir, plan, plan.request)  # what was asked for, as conda records it
    from envguard.variables import write_state

    write_state(build_dir, plan.variables or {}, plan.kept_variables or {})  # as `conda env create` does
    write_fingerprint(build_dir, expected)


def _build_staged(be: Backend, install_plan: InstallPlan, plan: LockPlan, expected: Fingerprint, target: Path,
                  pkgs: Path, progress: Progress, rep: CreateReporter) -> None:
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
                    target: Path, progress: Progress, rep: CreateReporter) -> None:
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
