"""The prefix lock: the OS's own lock (flock), exclusive across processes, dropped by the kernel when its holder
dies, even by SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from envguard.create.prefixlock import PrefixLock, holder_path
from envguard.errors import BusyError

HOLD = textwrap.dedent("""
    import sys, time
    from envguard.create.prefixlock import PrefixLock
    with PrefixLock(sys.argv[1], timeout=0):
        print("held", flush=True)
        time.sleep(60)
""")


def _holder(prefix: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(prefix)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


@pytest.mark.slow
def test_another_process_holding_the_prefix_makes_a_waiter_busy_until_it_is_killed(tmp_path: Path) -> None:
    prefix = tmp_path / "env"
    proc = _holder(prefix)
    try:
        seen: list[int | None] = []
        with pytest.raises(BusyError) as err, PrefixLock(prefix, timeout=0.3, poll=0.05,
                                                         on_wait=lambda pid, _w: seen.append(pid)):
            pass
        assert f"process {proc.pid}" in str(err.value) and seen == [proc.pid]  # the holder is named
        os.kill(proc.pid, signal.SIGKILL)  # the kernel drops the lock of a killed holder
        proc.wait(10)
        start = time.monotonic()
        with PrefixLock(prefix, timeout=5) as lock:
            assert holder_path(prefix).read_text().strip() == str(os.getpid())
        assert time.monotonic() - start < 2 and lock.waited is False
    finally:
        proc.kill()
        proc.wait()


def test_the_lock_is_exclusive_and_released(tmp_path: Path) -> None:
    prefix = tmp_path / "env"
    # a second descriptor, as another process would have: refused while the first holds it
    with PrefixLock(prefix, timeout=0), pytest.raises(BusyError), PrefixLock(prefix, timeout=0):
        pass
    assert not holder_path(prefix).exists()  # the holder's PID file goes with the lock
    with PrefixLock(prefix, timeout=0) as again:
        assert again.waited is False
