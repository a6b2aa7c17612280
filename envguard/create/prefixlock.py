"""One lock per environment prefix, so that two `envguard create` runs never build the same prefix at once.

The lock is an advisory ``flock`` on ``.<name>.envguard-lock`` beside the prefix (not inside it: the prefix
is renamed and replaced while the lock is held). The holder writes its PID into the file, so a waiter can
name it. The kernel drops the lock when its holder dies, even by SIGKILL, so a stale lock cannot block
anyone; the file itself is left in place (removing it would race with the next locker).
"""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from envguard.errors import BackendError, BusyError

if os.name == "nt":  # pragma: no cover - exercised on Windows only
    import msvcrt

    def _try_lock(fd: int) -> bool:
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
            return True
        except OSError:
            return False

    def _unlock(fd: int) -> None:
        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)

else:
    import fcntl

    def _try_lock(fd: int) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except OSError as e:
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                return False
            raise

    def _unlock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)


WaitCallback = Callable[[int | None, float], None]  # (holder pid or None, seconds waited so far)


def lock_path_for(prefix: str | os.PathLike[str]) -> Path:
    prefix = Path(os.path.abspath(prefix))
    return prefix.parent / f".{prefix.name}.envguard-lock"


def read_holder(path: Path) -> int | None:
    try:
        text = path.read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


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
        self.timeout = timeout
        self.on_wait = on_wait
        self.interval = interval
        self.poll = poll
        self.waited = False
        self._fd: int | None = None

    def acquire(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise BackendError(f"cannot create the prefix lock {self.path}: {e.strerror or e} "
                               "(fix: check permissions and free space of that directory)") from e
        start = time.monotonic()
        next_report = start
        holder: int | None = None
        try:
            while not _try_lock(fd):
                self.waited = True
                now = time.monotonic()
                holder = read_holder(self.path) or holder
                waited = now - start
                if self.timeout is not None and waited >= self.timeout:
                    who = f"process {holder}" if holder else "another process"
                    raise BusyError(
                        f"{self.prefix} is being created by envguard {who} (lock {self.path}); "
                        f"gave up after {self.timeout:g}s (fix: wait for it to finish, or raise --timeout)"
                    )
                if self.on_wait is not None and now >= next_report:
                    self.on_wait(holder, waited)
                    next_report = now + self.interval
                sleep = self.poll
                if self.timeout is not None:
                    sleep = max(0.0, min(sleep, self.timeout - waited))
                time.sleep(sleep)
            os.ftruncate(fd, 0)
            os.lseek(fd, 0, os.SEEK_SET)
            os.write(fd, f"{os.getpid()}\n".encode())
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    def release(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            os.ftruncate(fd, 0)  # nobody holds it: a waiter must not name us any more
            _unlock(fd)
        finally:
            os.close(fd)

    def __enter__(self) -> PrefixLock:
        self.acquire()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()
