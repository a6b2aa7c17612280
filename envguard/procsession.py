"""A probe's process session: started in a session of its own, and nothing of it left behind.

Both standalone probes (smoke's and tune's) run this way in the target interpreter: in a session and process
group of their own, so that on a timeout or Ctrl-C the whole group is stopped (SIGTERM, then SIGKILL), and
workers the probe reported as its own in its events file (JSON lines) are stopped too when they left the
group. /dev/shm files that the probe's own processes left behind are removed; anything else there is left
alone.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from envguard import settings
from envguard.errors import UserError

SHM_DIR = "/dev/shm"
KILL_GRACE = 1.5  # seconds between SIGTERM and SIGKILL
_TORCH_SHM = re.compile(r"^torch_(\d+)_")


# ---------------------------------------------------------------- starting


def _probe_env(env: dict[str, str] | None, tmpdir: Path | None = None) -> dict[str, str]:
    out = dict(os.environ)
    # macOS venv launchers leak our interpreter's identity into children.
    for var in ("__PYVENV_LAUNCHER__", "PYTHONEXECUTABLE", settings.PROBE_EVENTS.name):
        out.pop(var, None)
    out.setdefault("PYTHONUNBUFFERED", "1")
    if env:
        out.update(env)
    if tmpdir is not None:
        # multiprocessing's pymp-* directory (and anything else the probe's tempfile makes) goes in here:
        # a probe stopped by a signal never removes its own, the caller removes this folder whatever happened
        for var in ("TMPDIR", "TEMP", "TMP"):
            out[var] = str(tmpdir)
    return out


def sockets_fit(tmpdir: Path) -> bool:
    """Whether multiprocessing's Unix sockets fit under the existing folder ``tmpdir``. A DataLoader's workers
    hand batches over through one (the file_descriptor sharing strategy; the forkserver too), at
    ``<TMPDIR>/pymp-XXXXXXXX/listener-XXXXXXXX``, and a socket's path must fit in the kernel's address (107
    bytes on Linux). The kernel is asked: a socket is bound at a path of that very shape (the folder made as
    multiprocessing makes its own, the listener's name as long as its)."""
    import socket
    import tempfile

    if not hasattr(socket, "AF_UNIX"):  # Windows
        return True
    try:
        folder = Path(tempfile.mkdtemp(prefix="pymp-", dir=tmpdir))
    except OSError:
        return False
    try:
        with socket.socket(socket.AF_UNIX) as sock:
            sock.bind(str(folder / "listener-xxxxxxxx"))
        return True
    except OSError:
        return False
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def start_session(argv: list[str], *, cwd: Path, env: dict[str, str] | None = None, stdin: Any = subprocess.DEVNULL,
                  stdout: Any = None, stderr: Any = None, tmpdir: Path | None = None) -> subprocess.Popen[bytes]:
    """Start a probe (``argv[0]`` is the target interpreter) in a session and process group of its own;
    ``tmpdir`` (made here) is its temporary directory, for the caller to remove after it has stopped, unless
    multiprocessing's sockets do not fit under it (:func:`sockets_fit`): then the probe keeps the TMPDIR it
    was given, as the user's own jobs do, so that envguard's longer path never fails a DataLoader that
    theirs runs (a probe killed outright may then leave its ``pymp-*`` folder there, as any killed job does)."""
    popen_kw: dict[str, Any] = {"start_new_session": True} if sys.platform != "win32" else {
        "creationflags": getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0)}
    if tmpdir is not None:
        tmpdir.mkdir(mode=0o700, exist_ok=True)
        if not sockets_fit(tmpdir):
            tmpdir = None
    try:
        return subprocess.Popen(argv, stdin=stdin, stdout=stdout, stderr=stderr, cwd=cwd,
                                env=_probe_env(env, tmpdir), **popen_kw)
    except OSError as e:
        raise UserError(f"cannot run the interpreter: {e.strerror or e}", file=str(argv[0]),
                        fix="pass a working Python interpreter") from None


def stop_session(proc: subprocess.Popen[bytes], reported: list[int], *, finished: bool,
                 grace: float = KILL_GRACE) -> list[int]:
    """Leave nothing of a probe's session running. ``finished``: it exited by itself, so helpers get a
    moment before stragglers are stopped; otherwise right away: SIGTERM, then SIGKILL after ``grace`` seconds.
    ``reported``: the pids the probe named as its own (workers that left its process group). Returns the pids
    seen."""
    return _sweep(proc, reported) if finished else _stop_session(proc, reported, grace)


# ---------------------------------------------------------------- stopping


def _stat(pid: int) -> tuple[str, int, int, int] | None:
    """(state, pgrp, session, starttime) from /proc; None when gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read().decode(errors="replace")
    except OSError:
        return None
    rest = data[data.rfind(")") + 2:].split()
    try:
        return rest[0], int(rest[2]), int(rest[3]), int(rest[19])
    except (IndexError, ValueError):
        return None


def session_members(sid: int) -> list[int]:
    """Live (non-zombie) processes in session ``sid`` or process group ``sid``."""
    if not os.path.isdir("/proc"):
        return []
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        st = _stat(int(entry))
        if st and st[0] not in ("Z", "X") and (st[2] == sid or st[1] == sid):
            out.append(int(entry))
    return out


def _signal_all(sid: int, sig: int, extra: list[int]) -> None:
    try:
        os.killpg(sid, sig)
    except (ProcessLookupError, PermissionError, OSError):
        pass
    # Members that moved to another group but stayed in the session, and the
    # workers the probe reported (if they are still in our session).
    for pid in set(session_members(sid)) | {p for p in extra if (_stat(p) or ("", 0, -1, 0))[2] == sid}:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _stop_session(proc: subprocess.Popen[bytes], reported: list[int], grace: float = KILL_GRACE) -> list[int]:
    """Stop everything in the probe's session: SIGTERM, then SIGKILL. Returns the pids seen."""
    sid = proc.pid
    seen = set(session_members(sid))
    if sys.platform == "win32":  # pragma: no cover - no sessions on Windows
        subprocess.run(["taskkill", "/F", "/T", "/PID", str(sid)], capture_output=True, check=False)
        proc.wait()
        return [sid]
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        alive = session_members(sid)
        if not alive and proc.poll() is not None and os.path.isdir("/proc"):
            break  # without /proc we cannot see the group: signal it anyway
        seen |= set(alive)
        _signal_all(sid, sig, reported)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            proc.poll()
            if proc.returncode is not None and not session_members(sid):
                break
            time.sleep(0.02)
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:  # pragma: no cover - unkillable (D state)
        pass
    return sorted(seen)


def _sweep(proc: subprocess.Popen[bytes], reported: list[int]) -> list[int]:
    """After a normal exit: give helpers (forkserver, resource tracker) a moment, then stop stragglers."""
    deadline = time.monotonic() + 0.5
    left = session_members(proc.pid)
    while left and time.monotonic() < deadline:
        time.sleep(0.02)
        left = session_members(proc.pid)
    return _stop_session(proc, reported, grace=0.5) if left else []


# ---------------------------------------------------------------- events


def read_events(path: Path) -> list[dict[str, Any]]:
    """The documents of a probe's events file (JSON lines; a line it was still writing is skipped)."""
    out: list[dict[str, Any]] = []
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return out
    for line in text.splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def pids_of(events: list[dict[str, Any]]) -> set[int]:
    """Every pid the events (a probe's, as :func:`read_events` returns them) name as the probe's own."""
    pids: set[int] = set()
    for e in events:
        for key in ("probe_pid", "worker_pid", "dist_pid"):
            if isinstance(e.get(key), int):
                pids.add(e[key])
        pids |= {p for p in e.get("pids") or () if isinstance(p, int)}
    return pids


def remove_temp_dirs(events: list[dict[str, Any]]) -> None:
    """Remove the ``pymp-*`` folders the probe's processes reported (``tmp`` in their events) and left: a
    process killed outright never runs multiprocessing's own clean-up. Only real folders of that name."""
    for e in events:
        path = e.get("tmp")
        if not isinstance(path, str) or not os.path.isabs(path) or not os.path.basename(path).startswith("pymp-"):
            continue
        try:
            if stat.S_ISDIR(os.lstat(path).st_mode):
                shutil.rmtree(path, ignore_errors=True)
        except OSError:
            continue


def event_pids(events_file: Path) -> set[int]:
    """Every pid a probe reported as its own in its events file (JSON lines)."""
    return pids_of(read_events(events_file))


# ---------------------------------------------------------------- /dev/shm


def shm_snapshot(shm_dir: str = SHM_DIR) -> set[str]:
    try:
        return set(os.listdir(shm_dir))
    except OSError:
        return set()


def _paths_in_use(paths: set[str]) -> set[str]:
    """Which of ``paths`` some live process has open or mapped."""
    used: set[str] = set()
    if not os.path.isdir("/proc"):
        return set(paths)  # cannot tell: treat everything as in use
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        fd_dir = f"/proc/{entry}/fd"
        try:
            for fd in os.listdir(fd_dir):
                try:
                    target = os.readlink(f"{fd_dir}/{fd}")
                except OSError:
                    continue
                if target in paths:
                    used.add(target)
        except OSError:
            pass
        try:
            with open(f"/proc/{entry}/maps", "rb") as f:
                maps = f.read().decode(errors="replace")
        except OSError:
            continue
        for p in paths - used:
            if p in maps:
                used.add(p)
    return used


def cleanup_shm(before: set[str], pids: set[int], shm_dir: str = SHM_DIR) -> list[str]:
    """Remove /dev/shm files left by our own processes.

    A file goes only if it is new since ``before``, torch named it after one
    of ``pids`` (``torch_<pid>_...``) and no live process has it open or mapped.
    """
    new = shm_snapshot(shm_dir) - before
    candidates = set()
    for name in new:
        m = _TORCH_SHM.match(name)
        if m and int(m.group(1)) in pids:
            candidates.add(os.path.join(shm_dir, name))
    if not candidates:
        return []
    removed = []
    for path in sorted(candidates - _paths_in_use(candidates)):
        try:
            os.unlink(path)
            removed.append(path)
        except FileNotFoundError:  # torch_shm_manager got there first
            pass
        except OSError:
            pass
    return removed
