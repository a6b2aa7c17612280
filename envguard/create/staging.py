"""Building beside the target and swapping into place, and undoing what an interrupted run left.

The names beside a target ``<dir>/<name>`` (staging, old, building) and what they mean are
envguard.leftovers', which check reads as well.

The prefix lock is not beside the target: envguard.create.prefixlock keeps it in envguard's own folder.
"""

from __future__ import annotations

import errno
import os
import shutil
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from envguard import settings
from envguard.leftovers import (
    BUILDING_TAG,
    OLD_TAG,
    STAGING_TAG,
    leftovers,
    pid_alive,
    sibling,
)


def fault_hook(event: str) -> None:
    """``ENVGUARD_TEST_KILL_AT=<event>`` SIGKILLs this process at that point, ``ENVGUARD_TEST_PAUSE_AT=
    <event>:<seconds>`` sleeps there: tests interrupt a real create at a known point (with
    ``ENVGUARD_TESTING=1`` only, see :func:`envguard.settings.test_hook`). Events: ``link:<n>`` (the n-th
    package linked), ``verified`` (every artifact hashed and scanned, nothing extracted yet), ``staged``
    (staging complete), ``swap`` (between moving the old environment aside and the new one in), ``relock``
    (a stale lock is about to be solved again)."""
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

    shutil.rmtree(path, onerror=onerror)  # onexc is 3.12+


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
    """Hold SIGINT (and SIGTERM) while the renames run; deliver it afterwards to the handler it was held from
    (the CLI's: SIGTERM is then reported as terminated, exit 143, not as a Ctrl-C), else as KeyboardInterrupt."""
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
            held = signal.Signals(signal.SIGTERM if signal.SIGTERM in received else received[0])
            handler = previous[held]
            if callable(handler):
                handler(held, None)  # raises (the CLI's handlers raise KeyboardInterrupt)
            raise KeyboardInterrupt


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
