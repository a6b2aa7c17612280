"""Writing a file a user asked for (``init -o``, ``tune --plot``): the whole of it under its name, or nothing.

The bytes go to a temporary file beside the target, which is renamed over it only once they are all written:
a full disk, a read-only file system or a Ctrl-C never leaves half a file under the user's name, and no
temporary file is left behind either. The file gets the mode a plain ``open`` would give (0666 less the
umask; mkstemp makes 0600), since what a user asks envguard to write is meant to be shared. A failure to
write is one line naming the target, not the temporary name (envguard.errors.os_error, exit 6).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from envguard.errors import os_error


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def publish(path: Path, data: bytes, *, before_replace: Callable[[], None] | None = None) -> None:
    """``data`` as the file ``path`` (its folder made if missing); ``before_replace`` runs between writing and
    renaming, the last moment to refuse (init: a file someone created meanwhile)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=str(path.parent))
    except OSError as e:
        raise os_error(e, "cannot write", path) from e
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, 0o666 & ~_umask())
        if before_replace is not None:
            before_replace()
        os.replace(tmp, path)
    except BaseException as e:  # Ctrl-C included: no temporary file is left behind
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError):
            raise os_error(e, "cannot write", path) from e
        raise
