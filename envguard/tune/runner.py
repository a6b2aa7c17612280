"""The tuning probe as a process: started, spoken to, and stopped the way `envguard smoke` runs its own.

The probe (``tune/probe/tune_probe.py``) runs by path in the target interpreter, in a session of its own
(``envguard.procsession.start_session``). It answers JSON lines: one ``inspect`` document, then one result
per trial request written to its stdin. Whatever happens (a trial that hangs, the probe crashing, the
overall limit, Ctrl-C) the whole session is stopped (``envguard.procsession.stop_session``) and /dev/shm
files its own processes left are removed (``envguard.procsession.cleanup_shm``).
"""

from __future__ import annotations

import json
import queue
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import IO, Any

from envguard.procsession import (
    cleanup_shm,
    event_pids,
    pids_of,
    read_events,
    remove_temp_dirs,
    shm_snapshot,
    start_session,
    stop_session,
)


def probe_path() -> Path:
    """The tuning probe, shipped as package data."""
    return Path(str(resources.files("envguard").joinpath("tune/probe/tune_probe.py")))


class ProbeGone(Exception):
    """The probe exited (or closed its output) before answering."""


@dataclass
class ProbeRun:
    """What was left once the probe was stopped."""

    returncode: int | None = None
    stderr_tail: str = ""
    pids: list[int] = field(default_factory=list)
    shm_removed: list[str] = field(default_factory=list)


class ProbeProcess:
    def __init__(self, python: Path, args: list[str], cwd: Path) -> None:
        self.work = Path(tempfile.mkdtemp(prefix="envguard-tune-"))
        self.events = self.work / "events.jsonl"
        self.argv = [str(python), str(probe_path()), "--serve", *args, "--workdir", str(self.work),
                     "--events", str(self.events)]
        self.cwd = cwd
        self.shm_before = shm_snapshot()
        self.proc: subprocess.Popen[bytes] | None = None
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        self._err: IO[bytes] | None = None

    def start(self) -> None:
        self._err = open(self.work / "stderr", "wb")  # noqa: SIM115 - open while the session runs, closed by stop()
        self.proc = start_session(self.argv, cwd=self.cwd, tmpdir=self.work / "tmp", stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=self._err)
        threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True).start()

    def _read(self, stream: IO[bytes]) -> None:
        for line in iter(stream.readline, b""):
            self._lines.put(line)
        self._lines.put(None)

    def receive(self, timeout: float) -> dict[str, Any] | None:
        """The next JSON document; None when ``timeout`` passed first. Raises ProbeGone at end of output."""
        deadline = time.monotonic() + max(timeout, 0.0)
        while True:
            try:
                line = self._lines.get(timeout=max(deadline - time.monotonic(), 0.001))
            except queue.Empty:
                return None
            if line is None:
                self._lines.put(None)  # stays at the end for later calls
                raise ProbeGone()
            try:
                doc = json.loads(line)
            except ValueError:
                continue  # not ours (the probe keeps fd 1 for the protocol, but be tolerant)
            if isinstance(doc, dict):
                return doc
            if time.monotonic() >= deadline:
                return None

    def send(self, doc: dict[str, Any]) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        try:
            self.proc.stdin.write((json.dumps(doc) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise ProbeGone() from None

    def stop(self, *, finished: bool) -> ProbeRun:
        """Stop the probe and everything it started; remove the shared memory its processes left."""
        run = ProbeRun()
        if self.proc is None:
            shutil.rmtree(self.work, ignore_errors=True)
            return run
        if finished:
            try:
                if self.proc.stdin is not None:
                    self.proc.stdin.write(b'{"op": "quit"}\n')
                    self.proc.stdin.close()
                self.proc.wait(timeout=10)
            except (OSError, ValueError, subprocess.TimeoutExpired):
                finished = False
        reported = sorted(event_pids(self.events))
        seen = stop_session(self.proc, reported, finished=finished)
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        if self._err is not None:
            self._err.close()
        events = read_events(self.events)
        pids = pids_of(events) | set(seen) | {self.proc.pid}
        run.shm_removed = cleanup_shm(self.shm_before, pids)
        remove_temp_dirs(events)  # where the probe kept the user's TMPDIR (start_session)
        run.pids = sorted(pids)
        run.returncode = self.proc.returncode
        try:
            run.stderr_tail = (self.work / "stderr").read_text(encoding="utf-8", errors="replace")[-4000:]
        except OSError:
            pass
        shutil.rmtree(self.work, ignore_errors=True)
        return run

    def last_phase(self) -> str | None:
        """Where the probe was, from its events (for a message about a stopped run)."""
        try:
            lines = self.events.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return None
        for line in reversed(lines):
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if isinstance(ev, dict) and "phase" in ev:
                return str(ev["phase"])
        return None
