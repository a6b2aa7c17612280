"""One lock per environment prefix, so that two `envguard create` runs never build the same prefix at once.

The lock is the operating system's own (``flock`` on POSIX, ``msvcrt.locking`` on Windows) on a file in
envguard's own hidden folder (:func:`envguard.settings.prefix_locks_dir`, ``$XDG_CACHE_HOME/envguard/locks``
on Linux), named after the prefix's absolute path. Not beside the prefix: a lock file there showed up as an
untracked file in every project, and not inside it either: the prefix is renamed and replaced while the
lock is held. The holder writes its PID into a companion ``.pid`` file, so that a waiter can name it. The
kernel drops the lock when its holder dies, even by SIGKILL, so a stale lock cannot block anyone; the files
stay (removing a lock file would race with the next locker).

The OS calls are made here rather than through the filelock package: importing filelock (asyncio, its
read-write locks) cost ~70 ms of every create's start-up, more than the whole warm pre-link check.
"""

from __future__ import annotations

import errno
import hashlib
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from envguard import settings
from envguard.errors import BackendError, BusyError

WaitCallback = Callable[[int | None, float], None]  # (holder pid or None, seconds waited so far)


def lock_path_for(prefix: str | os.PathLike[str]) -> Path:
    """The lock file of ``prefix``: one per absolute path (its directory's symlinks resolved)."""
    prefix = Path(os.path.abspath(prefix))
    real = Path(os.path.realpath(prefix.parent)) / prefix.name
    digest = hashlib.sha256(os.fsencode(real)).hexdigest()[:20]
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in prefix.name)[:40] or "env"
    return settings.prefix_locks_dir() / f"{safe}-{digest}.lock"


def holder_path(prefix: str | os.PathLike[str]) -> Path:
    """Where the holder of ``prefix``'s lock writes its PID."""
    return lock_path_for(prefix).with_suffix(".pid")


def read_holder(path: Path) -> int | None:
    try:
        text = path.read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _try_lock(fd: int) -> bool:
    """Take the exclusive lock on ``fd`` without waiting: False when another process holds it."""
    if sys.platform == "win32":
        import msvcrt

        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError as e:
            if e.errno in (errno.EACCES, errno.EDEADLK):
                return False
            raise
        return True
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        if e.errno in (errno.EAGAIN, errno.EWOULDBLOCK, errno.EACCES):
            return False
        raise
    return True


def _unlock(fd: int) -> None:
    try:
        if sys.platform == "win32":
            import msvcrt

            os.lseek(fd, 0, os.SEEK_SET)
            msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
        else:
            import fcntl

            fcntl.flock(fd, fcntl.LOCK_UN)
    except OSError:
        pass  # closing the descriptor drops the lock anyway


class PrefixLock:
    """``with PrefixLock(prefix, timeout=..., on_wait=...) as lock:`` holds the prefix exclusively.

    ``timeout=None`` waits forever, ``0`` fails at once. ``on_wait(pid, waited)`` is called right after the
    first failed attempt and then every ``interval`` seconds. ``lock.waited`` tells whether someone else
    held the lock first (then the caller should look at what that run produced before building again).
    """

    def __init__(self, prefix: str | os.PathLike[str], *, timeout: float | None = None,
                 on_wait: WaitCallback | None = None, interval: float = 3.0, poll: float = 0.1) -> None:
        self.prefix = Path(os.path.abspath(prefix))
        self.path = lock_path_for(self.prefix)
        self.pid_path = holder_path(self.prefix)
        self.timeout = timeout
        self.on_wait = on_wait
        self.interval = interval
        self.poll = poll
        self.waited = False
        self._fd: int | None = None

    def acquire(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise BackendError(f"cannot create envguard's lock folder {self.path.parent}: {e.strerror or e}",
                               fix="check permissions and free space of your cache directory") from e
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0),
                         0o644)
        except OSError as e:
            raise BackendError(f"cannot take the prefix lock {self.path}: {e.strerror or e}",
                               fix="check permissions of your cache directory") from e
        start = time.monotonic()
        next_report = start
        holder: int | None = None
        while True:
            try:
                if _try_lock(fd):
                    break
            except OSError as e:
                os.close(fd)
                raise BackendError(f"cannot take the prefix lock {self.path}: {e.strerror or e}",
                                   fix="check permissions of your cache directory") from e
            self.waited = True
            now = time.monotonic()
            holder = read_holder(self.pid_path) or holder
            waited = now - start
            if self.timeout is not None and waited >= self.timeout:
                os.close(fd)
                who = f"process {holder}" if holder else "another process"
                raise BusyError(f"{self.prefix} is being created by envguard {who} (lock {self.path}); "
                                f"gave up after {self.timeout:g}s", fix="wait for it to finish, or raise --timeout")
            if self.on_wait is not None and now >= next_report:
                self.on_wait(holder, waited)
                next_report = now + self.interval
            sleep = self.poll
            if self.timeout is not None:
                sleep = max(0.0, min(sleep, self.timeout - waited))
            time.sleep(sleep)
        self._fd = fd
        try:
            tmp = self.pid_path.with_name(f"{self.pid_path.name}.{os.getpid()}.tmp")
            tmp.write_text(f"{os.getpid()}\n", encoding="ascii")
            os.replace(tmp, self.pid_path)
        except OSError:
            pass  # the lock holds without it; a waiter then says "another process"

    def release(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            if read_holder(self.pid_path) == os.getpid():  # nobody holds it: a waiter must not name us any more
                self.pid_path.unlink()
        except OSError:
            pass
        finally:
            _unlock(fd)
            os.close(fd)

    def __enter__(self) -> PrefixLock:
        self.acquire()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()
