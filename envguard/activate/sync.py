"""Before `envguard run` and `envguard shell`: make sure the environment is its lock, as `uv run` does.

The test is the fast one (milliseconds, no solve, nothing parsed beyond the lock's ``metadata:`` block):

* the environment's fingerprint (written by `envguard create`) records this very lock, with the sha256 its
  file has now;
* the conda packages installed (the ``conda-meta/*.json`` names) are the ones the fingerprint lists, and
  nothing was written into ``site-packages`` after the fingerprint (a ``pip install`` over it);
* the lock is fresh for the environment file(s) it was made from (`envguard lock --check`'s verdict, from
  the fingerprint the lock carries), unless ``--frozen``.

Anything else goes through `envguard create` itself, so the exactness rules are create's: a missing
environment is created, a drifted one rebuilt, a stale default lock re-locked first (refused with
``--locked``: exit 4), a lock named by the environment's own record installed as written. When create
finds nothing to do after all (a file merely touched), the fingerprint's time is moved on, so that the next
run's test is the fast one again. An environment envguard did not build (conda's, a virtualenv) is run as it
is: no lock says what it should hold.
"""

from __future__ import annotations

import hashlib
import os
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from envguard.envs import NoTargetError, Target, lock_for, resolve_target, spec_name
from envguard.errors import StaleLockError, UserError
from envguard.fingerprint import Fingerprint, fingerprint_path, foreign_env, read_fingerprint

if TYPE_CHECKING:
    from envguard.create import CreateReporter

MODES = ("sync", "locked", "frozen", "none")


def pick_target(prefix: str | os.PathLike[str] | None, name: str | None, cwd: Path) -> Target:
    """The environment to run in, picked as every command picks it (envguard.envs.resolve_target); one that
    does not exist yet is where `envguard create` would build it (``-n NAME``, the one environment.yml names)."""
    try:
        return resolve_target(prefix, name, cwd=cwd)
    except NoTargetError:
        from envguard.project import spec_file

        if name is None and spec_name([spec_file(cwd)]) is None:
            raise
        return resolve_target(prefix, name, existing=False, cwd=cwd)


def ensure(target: Target, mode: str, *, cwd: Path, say: Callable[[str], None]) -> str:
    """Make ``target`` its lock as ``mode`` says (sync, locked, frozen, or none: as it is). Returns what was
    done, in a few words ("" when nothing was)."""
    if mode not in MODES:
        raise ValueError(mode)
    shown = shlex.quote(str(target))
    if not target.exists() or _empty_dir(target):
        if mode == "none":
            raise UserError("no environment here (--no-sync runs an existing environment as it is)", file=str(target),
                            fix=f"build it with `envguard create -p {shown}`, or leave out --no-sync")
        from envguard.project import spec_file

        if not spec_file(cwd).is_file():
            raise UserError(f"no environment here ({target.why or 'the environment to run in'}), and no "
                            "environment.yml here to build it from", file=str(target),
                            fix=f"build it from an environment file: envguard create -p {shown} -f and the file's "
                                "path; or run in an existing one")
        say(f"{target} does not exist: creating it from the lock")
        return _create(target, None, mode, cwd, say)
    if mode == "none" or not (target / "conda-meta").is_dir():
        return ""  # as it is; a virtualenv has no lock to be
    fp = read_fingerprint(target)
    if fp is None and foreign_env(target) is not None:
        if mode == "locked":
            raise StaleLockError(f"--locked: {target} was not built by envguard from a lock, so no lock says what "
                                 "it must hold",
                                 fix=f"replace it with the lock's environment: `envguard create -p {shown} --force`")
        return ""
    choice = lock_for(target, None, cwd=cwd)
    if choice.path is None:
        if mode == "locked":
            raise StaleLockError(f"--locked: no lock judges {target}" + (f" ({choice.why})" if choice.why else ""),
                                 fix=f"name the lock to build it from: envguard create -p {shown} --lockfile and "
                                     "the lock's path")
        return ""
    own = _is_project_lock(choice.path, cwd)
    why = out_of_sync(target, fp, choice.path, spec=own and mode != "frozen")
    if why is None:
        return ""
    say(f"{target} is not its lock ({why}): syncing it")
    # the project's own lock: exactly what `envguard create` does there; any other lock (the one the
    # environment records it was built from): installed as written, never re-locked from a spec here
    lockfile = None if own else choice.path
    return _create(target, lockfile, mode if own or mode == "locked" else "frozen", cwd, say)


def _is_project_lock(lock: Path, cwd: Path) -> bool:
    from envguard.project import lock_for_spec, spec_file

    spec = spec_file(cwd)
    return spec.is_file() and os.path.realpath(lock_for_spec(spec)) == os.path.realpath(lock)


def out_of_sync(target: Path, fp: Fingerprint | None, lock: Path, *, spec: bool) -> str | None:
    """Why ``target`` may not be ``lock`` (a few words), or None when the fast test says it is (see the
    module). ``spec``: also whether the lock is fresh for its environment file(s)."""
    if fp is None:
        return "no fingerprint of what envguard built"
    recorded = fp.recorded_lock()
    if recorded is None or os.path.realpath(recorded) != os.path.realpath(lock):
        return f"it was built from another lock ({recorded or 'not recorded'})"
    try:
        digest = hashlib.sha256(lock.read_bytes()).hexdigest()
    except OSError as e:
        return f"{lock} cannot be read ({e.strerror or e})"
    if digest != fp.lock_sha256:
        return f"{lock} changed since it was built"
    meta = target / "conda-meta"
    try:
        names = {n[:-5].rsplit("-", 2)[0] for n in os.listdir(meta)
                 if n.endswith(".json") and n.count("-") >= 2 and not n.startswith(".")}
    except OSError:
        names = set()
    if names != set(fp.conda):
        return "conda packages were added or removed since it was built"
    stamp = _mtime(fingerprint_path(target))
    # only where envguard may write: the first import of a top-level module also touches site-packages
    # (its __pycache__), and an environment others keep read-only must stay runnable as it is
    if os.access(meta, os.W_OK) and any(_mtime(sp) > stamp for sp in _site_packages(target)):
        return "site-packages changed since it was built"
    if spec:
        stale = _stale_for_spec(lock)
        if stale:
            return stale
    return None


def _stale_for_spec(lock: Path) -> str:
    """`envguard lock --check`'s verdict for this platform, from the lock's own sources (fast: the lock's
    recorded fingerprint of its inputs decides, without a solve); "" when fresh or nothing to judge by."""
    from envguard.errors import EnvguardError
    from envguard.lock import check_fresh, read_metadata
    from envguard.platforms import host_platform

    try:
        meta = read_metadata(lock) or {}
    except EnvguardError:
        return ""
    from envguard.project import lock_sources

    listed = meta.get("sources")
    sources = lock_sources(lock, [str(s) for s in listed] if isinstance(listed, list) else [])
    if not all(s.is_file() for s in sources):
        return ""
    try:
        verdict = check_fresh(sources, lock, platforms=[host_platform()])
    except EnvguardError:
        return ""  # a spec that cannot be read: create says why, with line and column
    return "" if verdict.fresh else verdict.reason


def _empty_dir(path: Path) -> bool:
    try:
        if not path.is_dir():
            return False
        with os.scandir(path) as entries:
            return next(entries, None) is None
    except OSError:
        return False


def _mtime(path: Path) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0


def _site_packages(prefix: Path) -> list[Path]:
    lib = prefix / "lib"
    try:
        found = [lib / d / "site-packages" for d in os.listdir(lib) if d.startswith("python")]
    except OSError:
        found = []
    return [p for p in found + [prefix / "Lib" / "site-packages"] if p.is_dir()]


def _said(say: Callable[[str], None]) -> CreateReporter:
    """create's steps and notes, one line each on stderr (``say``): standard output is the command's.
    Made here, not at import: envguard.create costs a tenth of a second to import, and a run that finds
    the environment its lock never needs it (bench/run.py)."""
    from envguard.create import CreateReporter

    class Said(CreateReporter):
        def stage(self, text: str) -> None:
            say(text)

        def note(self, text: str) -> None:
            say(text)

        def waiting(self, holder_pid: int | None, waited_s: float) -> None:
            who = f"envguard process {holder_pid}" if holder_pid else "another envguard process"
            say(f"waiting for {who}, which is creating this environment ({waited_s:.0f} s)")

    return Said()


def _create(target: Target, lockfile: Path | None, mode: str, cwd: Path, say: Callable[[str], None]) -> str:
    from envguard.create import CreateOptions, create, summarise_drift

    result = create(CreateOptions(prefix=target, lockfile=lockfile, locked=mode == "locked", frozen=mode == "frozen",
                                  cwd=cwd, reporter=_said(say)))
    if result.status == "unchanged":
        try:  # compared in full just now: the next run's fast test may trust the fingerprint again
            os.utime(fingerprint_path(target))
        except OSError:
            pass
        return ""
    drift = f" (it had differed: {summarise_drift(result.drift)})" if result.drift else ""
    done = (f"{result.status} {target} from {result.lockfile}: {result.conda_count} conda packages in "
            f"{result.seconds:.1f} s{drift}")
    say(done)
    return done
