"""A long TMPDIR and multiprocessing's Unix socket (smoke, check's smoke, tune).

DataLoader workers hand each batch over through a Unix socket that multiprocessing makes under TMPDIR
(``pymp-*/listener-*``: the file_descriptor sharing strategy, and the forkserver), and a socket's path must
fit in the kernel's address. With a TMPDIR too long for it a real DataLoader stalls until its timeout (a
worker's "OSError: AF_UNIX path too long" on stderr). The smoke probe used to run in a folder inside
envguard's work dir, ~35 characters deeper than the user's TMPDIR: a TMPDIR the user's own DataLoader runs
in failed the probe with "hang" (found when the suite ran under pytest-xdist, whose TMPDIR is deeper). Now:
the probe keeps the user's TMPDIR when its own folder would be too deep, the too-long case is named
(``tmpdir-long``, the TMPDIR and the fix, not "hang") without waiting for a DataLoader timeout, and nothing of
the probe is left in TMPDIR.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from envguard import catalog
from envguard.procsession import sockets_fit
from envguard.smoke import classify, run_smoke

LINUX_SOCKET_PATH = 107  # bytes of a socket path on Linux (sun_path holds 108 with the NUL)

LISTEN = """\
import sys
from multiprocessing import connection
try:
    connection.Listener(family="AF_UNIX").close()
except OSError as e:
    print(e)
    sys.exit(3)
"""

DATALOADER = """\
import torch
from torch.utils.data import DataLoader, Dataset


class Items(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        return torch.full((4,), float(i))


if __name__ == "__main__":
    seen = sorted(int(x) for b in DataLoader(Items(), batch_size=2, num_workers=2, timeout=20) for x in b[:, 0])
    assert seen == list(range(8)), seen
    print("ok")
"""

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux socket paths (107 bytes)")


@pytest.fixture
def short_root() -> Iterator[Path]:
    """A folder right under /tmp: the tests' own TMPDIR is already deep, and these need exact lengths."""
    root = Path(tempfile.mkdtemp(prefix="egt-", dir="/tmp"))
    yield root
    shutil.rmtree(root, ignore_errors=True)


def _tmpdir_of_length(root: Path, length: int) -> Path:
    pad = length - len(str(root)) - 1
    assert pad > 0
    folder = root / ("d" * pad)
    folder.mkdir()
    assert len(str(folder)) == length
    return folder


def _script(root: Path, name: str, text: str) -> Path:
    path = root / name
    path.write_text(text)
    return path


def _run(script: Path, tmpdir: Path) -> subprocess.CompletedProcess[str]:
    # run by path: DataLoader workers re-import __main__ by path under spawn and forkserver
    return subprocess.run([sys.executable, str(script)], env={**os.environ, "TMPDIR": str(tmpdir)},
                          capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_sockets_fit_agrees_with_multiprocessing_at_the_boundary(short_root: Path) -> None:
    """sockets_fit asks the kernel with a path of multiprocessing's shape; multiprocessing's own Listener, in an
    interpreter whose TMPDIR is that folder, is the authority. They agree on both sides of the boundary."""
    listen = _script(short_root, "listen.py", LISTEN)
    tail = len("/pymp-xxxxxxxx/listener-xxxxxxxx")
    answers = {}
    for length in range(LINUX_SOCKET_PATH - tail - 2, LINUX_SOCKET_PATH - tail + 3):
        folder = _tmpdir_of_length(short_root, length)
        answers[length] = (sockets_fit(folder), _run(listen, folder).returncode == 0)
        shutil.rmtree(folder)
    assert all(ours == theirs for ours, theirs in answers.values()), answers
    assert {theirs for _ours, theirs in answers.values()} == {True, False}, answers  # the boundary was crossed
    assert not any(p.name.startswith("pymp-") for p in short_root.rglob("*")), "sockets_fit left its folder"


@pytest.mark.slow
def test_a_tmpdir_the_users_dataloader_runs_in_passes_smoke(short_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Deep enough that envguard's own folder inside it would not hold the socket, short enough for the user's
    DataLoader: a real DataLoader passes there, so smoke passes there too (it failed with "hang" before)."""
    tmpdir = _tmpdir_of_length(short_root, LINUX_SOCKET_PATH - len("/pymp-xxxxxxxx/listener-xxxxxxxx") - 6)
    assert sockets_fit(tmpdir) and not sockets_fit(_tmpdir_of_length(tmpdir, len(str(tmpdir)) + 30))
    shutil.rmtree(tmpdir / ("d" * 29))
    proc = _run(_script(short_root, "loader.py", DATALOADER), tmpdir)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]
    monkeypatch.setenv("TMPDIR", str(tmpdir))
    monkeypatch.setattr(tempfile, "tempdir", None)  # envguard's own temporary files follow TMPDIR too
    r = run_smoke(sys.executable, quick=True)
    assert r.exit_code == 0, [(f.code, f.message) for f in r.findings]
    assert not [f for f in r.findings if f.code in ("hang", "tmpdir-long")]
    assert sorted(p.name for p in tmpdir.iterdir()) == [], "smoke left something in TMPDIR"


@pytest.mark.slow
def test_a_tmpdir_too_long_for_the_socket_is_named_not_a_hang(short_root: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Too long for the user's own DataLoader too (it stalls, a worker's AF_UNIX error on stderr): smoke says
    so, naming TMPDIR and the fix, at once rather than after the DataLoader timeout."""
    tmpdir = _tmpdir_of_length(short_root, LINUX_SOCKET_PATH - len("/pymp-xxxxxxxx/listener-xxxxxxxx") + 10)
    proc = _run(_script(short_root, "loader.py", DATALOADER.replace("timeout=20", "timeout=5")), tmpdir)
    assert proc.returncode != 0 and "AF_UNIX path too long" in proc.stderr, proc.stderr[-2000:]
    before = sorted(p.name for p in tmpdir.iterdir())  # what the stalled DataLoader's own processes left
    monkeypatch.setenv("TMPDIR", str(tmpdir))
    monkeypatch.setattr(tempfile, "tempdir", None)
    r = run_smoke(sys.executable, quick=True)
    assert r.exit_code == 7
    errors = [f for f in r.findings if f.severity.name == "ERROR"]
    assert [f.code for f in errors] == ["tmpdir-long"], [(f.code, f.message) for f in r.findings]
    assert str(tmpdir) in errors[0].message and "AF_UNIX path too long" in errors[0].message
    assert "TMPDIR" in catalog.get("tmpdir-long").fix
    check = next(c for c in r.probe["checks"] if c["name"] == "dataloader:fork")
    assert check["status"] == "fail" and check["seconds"] == 0.0  # not run: no DataLoader timeout waited for
    assert sorted(p.name for p in tmpdir.iterdir()) == before, "smoke left something in TMPDIR"


def test_a_dataloader_that_timed_out_on_the_socket_is_classified_by_the_workers_error() -> None:
    """Where a DataLoader ran and stalled (no fact from the probe first), the worker's traceback on stderr names
    the cause: the finding is tmpdir-long, not hang."""
    probe = {"torch": {"version": "2.13.0+cpu", "cuda": None}, "limits": {},
             "checks": [{"name": "dataloader:fork", "status": "fail",
                         "error": "RuntimeError: DataLoader timed out after 30.0 seconds"}]}
    stderr = ("Traceback (most recent call last):\n  File \".../multiprocessing/resource_sharer.py\", line 126, in "
              "_start\n    self._listener = Listener(authkey=process.current_process().authkey)\n"
              "OSError: AF_UNIX path too long\n")
    codes = [f.code for f in classify(probe, stderr=stderr)]
    assert "tmpdir-long" in codes and "hang" not in codes, codes
    assert "hang" in [f.code for f in classify(probe, stderr="")]  # without it: a stall, as before


def test_a_socket_fact_without_a_failed_dataloader_is_a_warning() -> None:
    """With the file_system strategy the batches take no socket, but forkserver DataLoaders still do."""
    probe = {"torch": {"version": "2.13.0+cpu", "cuda": None}, "checks": [],
             "limits": {"sharing_strategy": "file_system",
                        "af_unix": {"tmpdir": "/x" * 60, "tmpdir_bytes": 120, "error": "OSError: AF_UNIX path too long"}}}
    found = {f.code: f for f in classify(probe)}
    assert found["tmpdir-long"].severity.name == "WARNING" and "/x/x" in found["tmpdir-long"].message



@pytest.mark.slow
def test_tune_in_a_deep_tmpdir_measures_and_leaves_nothing(short_root: Path) -> None:
    """tune's probe starts the same way (procsession.start_session): in a TMPDIR where envguard's own folder
    would be too deep it keeps the user's TMPDIR, its DataLoaders work, and its pymp-* folders are removed."""
    tmpdir = _tmpdir_of_length(short_root, LINUX_SOCKET_PATH - len("/pymp-xxxxxxxx/listener-xxxxxxxx") - 6)
    p = subprocess.run([str(Path(sys.executable).with_name("envguard")), "tune", "-p", sys.prefix, "--demo",
                        "--current", "num_workers=2", "--max-workers", "2", "--budget", "3"],
                       env={**os.environ, "TMPDIR": str(tmpdir)}, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "1 trial (1 worked)" in p.stdout, p.stdout
    assert sorted(x.name for x in tmpdir.iterdir()) == [], "tune left something in TMPDIR"
