"""What every part of the tune probe shares: torch as imported once, the events file, error texts, batches.

Standalone like its entry point: the standard library and torch only, never envguard (the target
environment does not have it). The probe imports this module first, at module level, so torch
is imported while ``__main__`` is (a forkserver preloads ``__main__``, so its workers start with torch already
imported, exactly as the user's would).
"""

from __future__ import annotations

import json
import os
import time
import traceback

_T0 = time.perf_counter()
try:
    import torch  # at module level on purpose: see the module docstring
except BaseException as _e:  # noqa: BLE001 - ImportError, OSError (undefined symbol), ...
    torch = None  # type: ignore[assignment]  # an optional import: _setup() reports it and stops
    TORCH_ERROR: str | None = f"{type(_e).__name__}: {_e}"
else:
    TORCH_ERROR = None
TORCH_IMPORT_S = time.perf_counter() - _T0

_EVENTS_ENV = "ENVGUARD_PROBE_EVENTS"  # declared in envguard.settings (this file cannot import it)
_MAX_ERROR = 6000


def event(**fields: object) -> None:
    """Append one JSON line to the events file (which processes are ours; where we are)."""
    path = os.environ.get(_EVENTS_ENV)
    if not path:
        return
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, (json.dumps(fields) + "\n").encode())
        finally:
            os.close(fd)
    except OSError:
        pass

def mp_temp_dir() -> str | None:
    """multiprocessing's ``pymp-*`` folder of this process (made now if it was not yet): reported in the
    events, the runner removes it if the process is killed before its own exit handler does."""
    try:
        from multiprocessing import util

        return util.get_temp_dir()
    except Exception:  # noqa: BLE001 - only a clean-up aid
        return None


def _err(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"[:_MAX_ERROR]


def _tb(e: BaseException) -> str:
    return "".join(traceback.format_exception(type(e), e, e.__traceback__))[-_MAX_ERROR:]


def tensors_in(obj, out: list) -> list:
    """Every tensor in a batch (tensors, dicts, lists, tuples, namedtuples), in order."""
    if torch is not None and isinstance(obj, torch.Tensor):
        out.append(obj)
    elif isinstance(obj, dict):
        for v in obj.values():
            tensors_in(v, out)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            tensors_in(v, out)
    return out


def batch_len(obj, default: int) -> int:
    """Samples in a batch: the first dimension of its first tensor."""
    ts = tensors_in(obj, [])
    return int(ts[0].shape[0]) if ts and ts[0].dim() > 0 else default


def is_pinned(t) -> bool | None:
    try:
        return bool(t.is_pinned())
    except Exception:  # noqa: BLE001 - CPU builds may refuse to answer
        return None
