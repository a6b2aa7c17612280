"""Building beside the target and swapping into place, and undoing what an interrupted run left.

Names beside a target ``<dir>/<name>`` (``<pid>`` is the creating process):

* ``.<name>.envguard-staging-<pid>``: a relocatable backend builds the new environment here; after an
  atomic exchange it briefly holds the old one. Never the target itself: always safe to delete.
* ``.<name>.envguard-old-<pid>``: an existing environment moved aside (``--force`` without an atomic
  exchange, or an external backend building in place). Put back if the target is missing, else deleted.
* ``.<name>.envguard-building-<pid>``: an external backend is building at the target path itself; if its
  process is gone, the target is half-built and is removed (before any old environment is put back).
* (the prefix lock is not here: envguard.create.prefixlock keeps it in envguard's own folder.)
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envguard import settings
from envguard.errors import BackendError

STAGING_TAG = "envguard-staging"
OLD_TAG = "envguard-old"
BUILDING_TAG = "envguard-building"
_LEFTOVER = re.compile(r"^\.(?P<name>.+)\.(?P<tag>" + "|".join(map(re.escape, (STAGING_TAG, OLD_TAG, BUILDING_TAG)))
                       + r")-(?P<pid>\d+)$")


def fault_hook(event: str) -> None:
    """``ENVGUARD_TEST_KILL_AT=<event>`` SIGKILLs this process at that point, ``ENVGUARD_TEST_PAUSE_AT=
    <event>:<seconds>`` sleeps there: tests interrupt a real create at a known point (with
    ``ENVGUARD_TESTING=1`` only, see :func:`envguard.settings.test_hook`). Events: ``link:<n>`` (the n-th
    package linked), ``staged`` (staging complete), ``swap`` (between moving the old environment aside and
    the new one in), ``relock`` (a stale lock is about to be solved again)."""
    kill_at = settings.test_hook(settings.TEST_KILL_AT)
    if kill_at and kill_at == event:
        sys.stdout.flush()
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGKILL)
    pause_at = settings.test_hook(settings.TEST_PAUSE_AT)
    if pause_at:
        where, _, seconds = pause_at.rpartition(":")
        if where == event:  # said on stderr, so that a test can signal the process exactly there
            sys.stderr.write(f"envguard: test hook: paused at {event}\n")
            sys.stderr.flush()
            time.sleep(float(seconds))


def is_env(path: Path) -> bool:
    return (path / "conda-meta").is_dir()


def is_empty_dir(path: Path) -> bool:
    try:
        return path.is_dir() and not path.is_symlink() and not any(path.iterdir())
    except OSError:
        return False


def sibling(target: Path, tag: str, pid: int | None = None) -> Path:
    return target.parent / f".{target.name}.{tag}-{os.getpid() if pid is None else pid}"


def pid_alive(pid: int) -> bool:
    """Whether another process with this PID runs (a PID reused by an unrelated process counts as alive:
    its leftovers are then kept, never wrongly deleted)."""
    if pid == os.getpid():
        return False  # a leftover of an earlier process that had our PID
    if os.name == "nt":
        # os.kill(pid, 0) would terminate the process on Windows. Cleanup runs under the prefix lock,
        # where no other envguard can be building this target, so "gone" is the right answer there.
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    return True


def parse_leftover(name: str) -> tuple[str, str, int] | None:
    """``.<name>.<tag>-<pid>`` -> (target name, tag, pid); None for any other name."""
    m = _LEFTOVER.match(name)
    return (m["name"], m["tag"], int(m["pid"])) if m else None


def leftovers(target: Path) -> list[tuple[str, int, Path]]:
    """(tag, pid, path) of every staging/old/building entry beside ``target``."""
    found: list[tuple[str, int, Path]] = []
    try:
        entries = list(target.parent.iterdir())
    except OSError:
        return found
    for path in entries:
        parsed = parse_leftover(path.name)
        if parsed and parsed[0] == target.name:
            found.append((parsed[1], parsed[2], path))
    return found


@dataclass(frozen=True)
class Interruption:
    """A create in progress (``running``) or interrupted that leaves ``prefix`` unfinished."""

    tag: str
    pid: int
    running: bool
    reason: str


def interruption(prefix: str | os.PathLike[str]) -> Interruption | None:
    """What a create in progress or interrupted did to ``prefix``, else None.

    ``prefix`` may itself be one of the names above (someone pointed a command at a staging directory).
    Otherwise, since rattler builds beside the target, only an external backend's in-place build (marker
    ``.<name>.envguard-building-<pid>``) or an old environment moved aside leave the target itself
    half-built or missing; staging directories never affect the target.
    """
    target = Path(os.path.abspath(prefix))
    parsed = parse_leftover(target.name)
    if parsed is not None:
        _name, tag, pid = parsed
        running = pid_alive(pid)
        what = ("an environment `envguard create` moved aside to replace it" if tag == OLD_TAG else
                "a directory `envguard create` was building")
        return Interruption(tag, pid, running, f"{target.name} is {what}, and process {pid} is " + (
            "still running" if running else "gone (interrupted)"))
    for tag, pid, path in leftovers(target):
        running = pid_alive(pid)
        if tag == BUILDING_TAG:
            return Interruption(tag, pid, running, (
                f"envguard process {pid} is building this environment right now" if running else
                f"half-built by an interrupted `envguard create` (process {pid}); "
                "run `envguard create` again to restore the previous state"))
        if tag == OLD_TAG and not target.exists():
            return Interruption(tag, pid, running, (
                f"envguard process {pid} is replacing this environment right now" if running else
                f"an interrupted `envguard create` (process {pid}) moved the old environment aside to {path}"))
    return None


def interrupt_report(target: Path, finished: bool) -> str:
    """The one line for a Ctrl-C: the state ``target`` is actually in (``finished``: it holds the new
    environment), and what the next run will clean up."""
    beside = leftovers(target)
    cleanup = "; the next `envguard create` removes what this run left beside it" if beside else ""
    if finished:
        return f"interrupted: the new environment is in place at {target}{cleanup}"
    if target.exists():
        return f"interrupted: {target} was left as it was{cleanup}"
    old = [path for tag, _pid, path in beside if tag == OLD_TAG]
    if old:
        return (f"interrupted: the previous environment is at {old[0]}; the next `envguard create` puts it "
                f"back at {target}")
    return f"interrupted: nothing was created at {target}{cleanup}"


def cleanup_leftovers(target: Path) -> list[str]:
    """Undo what interrupted runs left (only entries whose process is gone). Returns what was done.

    Call only while holding the prefix lock: then nobody else is building this target.
    """
    done: list[str] = []
    dead = [(tag, pid, path) for tag, pid, path in leftovers(target) if not pid_alive(pid)]
    # 1. A target an external backend was building in place is half-built: remove it.
    for tag, _pid, path in dead:
        if tag == BUILDING_TAG:
            if target.exists() or target.is_symlink():
                rmtree(target)
                done.append(f"removed the half-built environment at {target}")
            path.unlink(missing_ok=True)
    # 2. An old environment moved aside: put it back if the target is missing, else it is obsolete.
    for tag, _pid, path in dead:
        if tag == OLD_TAG:
            if not target.exists() and not target.is_symlink():
                os.rename(path, target)
                done.append(f"restored the previous environment at {target}")
            else:
                rmtree(path)
                done.append(f"removed the replaced environment {path.name}")
    # 3. Staging directories never became the target (or hold an old one after an exchange).
    for tag, _pid, path in dead:
        if tag == STAGING_TAG:
            rmtree(path)
            done.append(f"removed the leftover staging directory {path.name}")
    return done


def rmtree(path: Path) -> None:
    """Delete a file, symlink or directory tree, including read-only entries some packages ship."""
    if path.is_symlink() or path.is_file():
        path.unlink(missing_ok=True)
        return

    def onerror(func: Any, p: str, exc: Any) -> None:
        # read-only files and dirs (some packages ship them) block deletion: make writable, retry once
        try:
            os.chmod(p, 0o700)
            parent = os.path.dirname(p)
            os.chmod(parent, 0o700)
            func(p)
        except OSError:
            pass

    shutil.rmtree(path, onerror=onerror)  # noqa: B028 - onexc is 3.12+


_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths (Linux renameat2 RENAME_EXCHANGE). False when unsupported here (or when a
    test asks for the two-rename fallback with ENVGUARD_TEST_NO_RENAME_EXCHANGE=1)."""
    if not sys.platform.startswith("linux") or settings.test_hook(settings.TEST_NO_RENAME_EXCHANGE):
        return False
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(b))


@contextmanager
def deferred_sigint() -> Iterator[None]:
    """Hold SIGINT (and SIGTERM) while the renames run; deliver it as KeyboardInterrupt afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []
    previous = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        previous[sig] = signal.signal(sig, lambda s, _f: received.append(s))
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if received:
            raise KeyboardInterrupt


def os_error(e: OSError, what: str, path: Path) -> BackendError:
    hint = {
        errno.ENOSPC: "free some space",
        errno.EDQUOT: "free some space (disk quota)",
        errno.EACCES: "choose a writable location",
        errno.EPERM: "choose a writable location",
        errno.EROFS: "choose a location on a writable filesystem",
    }.get(e.errno or 0, "check the path")
    return BackendError(f"{what} {path}: {e.strerror or e}", fix=hint)


def swap_in(staging: Path, target: Path) -> None:
    """Put the finished ``staging`` environment at ``target``; an old environment there is deleted only
    after the new one is in place (or, after an exchange, left in ``staging`` for the caller to delete)."""
    with deferred_sigint():
        if not target.exists() or is_empty_dir(target):
            if target.is_dir():
                target.rmdir()
            os.rename(staging, target)
            return
        if exchange(staging, target):
            fault_hook("swap")
            return  # staging now holds the old environment: the caller's cleanup deletes it
        old = sibling(target, OLD_TAG)
        os.rename(target, old)
        try:
            fault_hook("swap")
            os.rename(staging, target)
        except BaseException:
            os.rename(old, target)
            raise
    rmtree(old)
