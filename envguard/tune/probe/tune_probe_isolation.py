"""Isolation in the tune probe: every trial in a fresh process, in a process group of its own.

A child forked from the serving process (Linux), killed with its workers when it outlives its limit; elsewhere
a fresh interpreter running ``tune_probe.py --one-trial``. Orphaned workers are reaped (the serving process
is a child subreaper), and the trial's progress lines reach the serving process on a pipe.

Standalone like its entry point: the standard library and torch only, never envguard (the target
environment does not have it).
"""

from __future__ import annotations

import json
import os
import sys
import time

from tune_probe_shared import _err, _tb, event

# The entry point, beside this file: what a trial in a fresh interpreter runs.
_ENTRY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tune_probe.py")

_PROGRESS_FD: int | None = None  # set in a trial process: its pipe to the serving process


def progress(**fields: object) -> None:
    """A line on the trial's pipe while it runs, so a trial still loading at its limit is told from a hung one."""
    if _PROGRESS_FD is None:
        return
    try:
        os.write(_PROGRESS_FD, (json.dumps({"progress": True, **fields}) + "\n").encode())
    except OSError:
        pass


def _subreaper() -> None:
    """Orphaned workers of a finished trial become our children, so we can reap and account for them."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except Exception:  # noqa: BLE001 - best effort
        pass


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def _stop_group(pgid: int, grace: float) -> None:
    """Stop what is left of a trial's process group: a moment to exit, then SIGTERM, then SIGKILL."""
    import signal

    for sig, wait in ((None, grace), (signal.SIGTERM, 0.5), (signal.SIGKILL, 2.0)):
        if sig is not None:
            try:
                os.killpg(pgid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            _reap()
            if not _group_alive(pgid):
                return
            time.sleep(0.01)


def _signal_name(status: int) -> str:
    import signal

    if os.WIFSIGNALED(status):
        try:
            return signal.Signals(os.WTERMSIG(status)).name
        except ValueError:
            return f"signal {os.WTERMSIG(status)}"
    return f"exit code {os.WEXITSTATUS(status)}" if os.WIFEXITED(status) else f"status {status}"


def _tail(path: str, n: int = 3000) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - n))
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def run_forked(fn, req: dict, workdir: str, protocol_fd: int | None) -> dict:  # noqa: PLR0915 - one supervisor of the forked trial: fork, watch, reap, in order
    """Run ``fn()`` (which returns a JSON-able dict) in a forked child in a process group of its own."""
    import select
    import signal

    limit = float(req.get("limit_s") or 60)
    errfile = os.path.join(workdir, f"trial-{req.get('id')}.stderr")
    r, w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # the trial
        code = 0
        try:
            os.setpgid(0, 0)
            os.close(r)
            if protocol_fd is not None:
                os.close(protocol_fd)  # only the serving process writes the protocol
            fd = os.open(errfile, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(fd, 2)
            os.dup2(fd, 1)
            os.close(fd)
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.close(null)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            global _PROGRESS_FD  # noqa: PLW0603 - this forked child's progress pipe, read by the trial's code
            _PROGRESS_FD = w
            try:
                res = fn()
            except BaseException as e:  # noqa: BLE001
                res = {"type": "trial", "id": req.get("id"), "status": "failed", "error": _tb(e),
                       "headline": _err(e).splitlines()[0][:300], "phase": "trial"}
            data = (json.dumps(res, default=str) + "\n").encode()
            while data:
                data = data[os.write(w, data):]
        except BaseException:  # noqa: BLE001
            code = 70
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    os.close(w)
    try:
        os.setpgid(pid, pid)
    except OSError:
        pass  # the child already did it (or is gone)
    event(trial=req.get("id"), trial_pid=pid, pids=[pid])
    # Progress lines, then one result line. Read up to the result, not to EOF: fork workers the trial
    # left behind inherited the pipe and would hold it open.
    data, res, timed_out = b"", None, False
    last_progress: dict | None = None
    last_progress_t = t0
    deadline = t0 + limit
    while res is None:
        left = deadline - time.perf_counter()
        if left <= 0:
            timed_out = True
            break
        ready, _, _ = select.select([r], [], [], min(left, 1.0))
        if not ready:
            continue
        chunk = os.read(r, 65536)
        if not chunk:
            break
        data += chunk
        while b"\n" in data and res is None:
            line, data = data.split(b"\n", 1)
            try:
                doc = json.loads(line.decode())
            except ValueError:
                continue
            if isinstance(doc, dict) and doc.get("progress"):
                last_progress, last_progress_t = doc, time.perf_counter()
            elif isinstance(doc, dict):
                res = doc
    os.close(r)
    status = None
    if not timed_out:  # the child exits right after writing its line
        end = time.perf_counter() + 2.0
        while status is None and time.perf_counter() < end:
            got, st = os.waitpid(pid, os.WNOHANG)
            status = st if got else None
            if status is None:
                time.sleep(0.01)
    if status is None:
        _stop_group(pid, 0.0)
        try:
            _, status = os.waitpid(pid, 0)
        except ChildProcessError:  # reaped while stopping the group
            status = None
    _stop_group(pid, 0.5)  # workers, forkserver, resource tracker left by the trial
    _reap()
    seconds = time.perf_counter() - t0
    if res is None and timed_out and last_progress is not None and \
            time.perf_counter() - last_progress_t < max(5.0, limit / 4):
        # Batches were still arriving: too slow for its limit, not hung.
        res = {"type": "trial", "id": req.get("id"), "settings": req.get("settings"), "status": "slow",
               "error": f"still loading when stopped at its limit of {limit:g} s ({last_progress.get('phase')}, "
                        f"{last_progress.get('batches')} batches in)", "progress": last_progress}
    elif res is None:
        how = f"did not finish within {limit:g} s" if timed_out else \
            f"ended by {_signal_name(status)} without a result" if status is not None else "ended without a result"
        stalled = f" (no progress for {time.perf_counter() - last_progress_t:.0f} s, during " \
                  f"{last_progress.get('phase')})" if timed_out and last_progress else ""
        res = {"type": "trial", "id": req.get("id"), "settings": req.get("settings"),
               "status": "timeout" if timed_out else "crashed", "error": f"the trial process {how}{stalled}",
               "headline": f"the trial process {how}", "exit": _signal_name(status) if status is not None else None}
    if res.get("status", "ok") != "ok" or res.get("error"):
        res["stderr_tail"] = _tail(errfile)
    res["seconds"] = round(seconds, 3)
    res["pid"] = pid
    try:
        os.unlink(errfile)
    except OSError:
        pass
    return res


def run_exec(req: dict, args: dict) -> dict:
    """Where fork is not used: the trial is a fresh interpreter running this file with --one-trial."""
    import subprocess

    limit = float(req.get("limit_s") or 60)
    argv = [sys.executable, _ENTRY, "--one-trial", json.dumps(req)] + _pass_on(args)
    t0 = time.perf_counter()
    kw: dict = {"start_new_session": True} if os.name == "posix" else {}
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)
    event(trial=req.get("id"), trial_pid=p.pid, pids=[p.pid])
    try:
        out, err = p.communicate(timeout=limit)
        timed_out = False
    except subprocess.TimeoutExpired:
        timed_out = True
        if os.name == "posix":
            _stop_group(p.pid, 0.0)
        else:  # pragma: no cover - Windows
            subprocess.run(["taskkill", "/F", "/T", "/PID", str(p.pid)], capture_output=True, check=False)
        out, err = p.communicate()
    if os.name == "posix":
        _stop_group(p.pid, 0.5)
    res = None
    if not timed_out:
        for line in reversed(out.decode(errors="replace").splitlines()):
            if line.startswith("{"):
                try:
                    res = json.loads(line)
                    break
                except ValueError:
                    continue
    if res is None:
        how = (f"did not finish within {limit:g} s" if timed_out
               else f"ended with exit code {p.returncode} without a result")
        res = {"type": "trial", "id": req.get("id"), "settings": req.get("settings"),
               "status": "timeout" if timed_out else "crashed", "error": f"the trial process {how}",
               "headline": f"the trial process {how}"}
    if res.get("status") != "ok":
        res["stderr_tail"] = err.decode(errors="replace")[-3000:]
    res["seconds"] = round(time.perf_counter() - t0, 3)
    res["pid"] = p.pid
    return res


def _pass_on(args: dict) -> list[str]:
    out = ["--demo"] if args["demo"] else ["--dataset", args["dataset"]]
    for key, flag in (("path", "--path"), ("batch_size", "--batch-size"), ("events", "--events")):
        if args.get(key) is not None:
            out += [flag, str(args[key])]
    out += ["--step-ms", str(args["step_ms"]), "--h2d", args["h2d"]] + ["--busy"] * bool(args["busy"])
    return out
