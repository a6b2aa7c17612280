"""Reading files that envguard did not write and no user named: an environment's records and dist-info
files, a fingerprint, conda's environments.txt.

Any of them may be something else than a regular file: a FIFO blocks whoever opens it until a writer comes
(an ``envguard check`` of such an environment never answered), a symlink to /dev/zero never ends, a
directory cannot be read. So each is opened without blocking, checked through its descriptor (what is
checked is what is read) and read up to a bound; anything else reads as absent, which is what these
readers make of a file they cannot use. Files a user names go through envguard.yamlio.read_bytes instead,
which says what is wrong with them.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import BinaryIO

_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)


def open_regular(path: str | os.PathLike[str]) -> BinaryIO:
    """The regular file at ``path`` (symlinks followed), opened for reading without blocking and checked
    through its descriptor, so what was checked is what is read. A FIFO, device, socket or directory
    raises OSError at once (opened this way, a FIFO never waits for a writer), as does a missing or
    unreadable file."""
    fd = os.open(path, _FLAGS)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", os.fspath(path))
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_small(path: str | os.PathLike[str], limit: int) -> bytes | None:
    """The bytes of the regular file at ``path`` (symlinks followed), or None when it is missing, not a
    regular file, unreadable or larger than ``limit`` bytes."""
    try:
        fh = open_regular(path)
    except OSError:
        return None
    with fh:
        try:
            if os.fstat(fh.fileno()).st_size > limit:
                return None
            chunks: list[bytes] = []
            total = 0
            while total <= limit:  # a file that grows while it is read stops at the bound too
                chunk = fh.read(min(1 << 20, limit + 1 - total))
                if not chunk:
                    break
                chunks.append(chunk)
                total += len(chunk)
        except OSError:
            return None
    return b"".join(chunks) if total <= limit else None


def read_small_text(path: str | os.PathLike[str], limit: int) -> str | None:
    """:func:`read_small` decoded as UTF-8 (undecodable bytes replaced: these files name things, and a name
    that is not UTF-8 is reported as read, never a crash)."""
    data = read_small(path, limit)
    return None if data is None else data.decode("utf-8", "replace")
