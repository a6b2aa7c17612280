"""A full disk and a read-only file system under every file a command writes (issue #35, point 9).

Each test mounts a real tmpfs (root only: ``mount -t tmpfs``), fills it or makes it read-only, and runs the
real CLI in a subprocess against it: `init -o`, `export --output-dir`, `check`'s report on standard output (the
report a user keeps is ``envguard check --format json > report.json``), and `tune --plot`. Every one must end
as `lock` and `create` do: one line naming the file the user asked for and the system's reason, exit 6, no
traceback, and nothing written that was not whole (no temporary file, no half report, an existing file
unchanged). Without the right to mount the tests skip, saying why; under CI=true they fail instead.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import channels, check_envs
from support.channels import HOST_PY
from support.require import importorskip, require

pytestmark = pytest.mark.slow  # every test starts envguard, one builds an environment

ENVGUARD = [sys.executable, "-m", "envguard"]
PAGE = os.sysconf("SC_PAGE_SIZE")  # tmpfs counts its size in pages
FULL = os.strerror(errno.ENOSPC)  # "No space left on device"
READ_ONLY = os.strerror(errno.EROFS)  # "Read-only file system"
INIT = ["init", "--torch", "2.12", "--cuda", "cpu", "--platform", "linux-64"]  # answered from the offline table


class Mounts:
    """Real tmpfs mounts under the test's directory, all unmounted by the fixture's finalizer."""

    def __init__(self, root: Path) -> None:
        self.root, self.mounted = root, []

    def tmpfs(self, name: str, *, size: str = "64k", readonly: bool = False) -> Path:
        where = self.root / name
        where.mkdir(parents=True)
        options = f"size={size}" + (",ro" if readonly else "")
        try:
            proc = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)],
                                  capture_output=True, text=True, timeout=60)
            ok, why = proc.returncode == 0, (proc.stderr or proc.stdout).strip()
        except OSError as e:  # no mount command at all
            ok, why = False, str(e)
        require(ok, f"cannot mount a tmpfs here (root and CAP_SYS_ADMIN are needed): {why}")
        self.mounted.append(where)
        return where

    @staticmethod
    def remount_readonly(where: Path) -> None:
        proc = subprocess.run(["mount", "-o", "remount,ro", str(where)], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr

    @staticmethod
    def fill(where: Path, *, leave_pages: int = 0) -> None:
        """Write until the file system says it is full, then give back ``leave_pages`` pages."""
        fill = where / "fill"
        with open(fill, "wb", buffering=0) as fh:  # unbuffered: every short write and ENOSPC is seen
            with pytest.raises(OSError) as full:
                while True:
                    fh.write(b"\0" * PAGE)
            assert full.value.errno == errno.ENOSPC, full.value
        if leave_pages:
            os.truncate(fill, max(0, fill.stat().st_size - leave_pages * PAGE))

    def close(self) -> None:
        for where in reversed(self.mounted):
            if subprocess.run(["umount", str(where)], capture_output=True).returncode != 0:
                subprocess.run(["umount", "-l", str(where)], capture_output=True)


@pytest.fixture
def mounts(tmp_path: Path) -> Iterator[Mounts]:
    m = Mounts(tmp_path / "mnt")
    try:
        yield m
    finally:
        m.close()


def envguard(*args: str, stdout: int | object = subprocess.PIPE, cwd: Path | None = None,
             env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if k not in ("CONDA_PREFIX", "VIRTUAL_ENV")}
    full_env.update(env or {})
    return subprocess.run([*ENVGUARD, *args], stdout=stdout, stderr=subprocess.PIPE, text=True, cwd=cwd,
                          env=full_env, timeout=300)


def one_line(proc: subprocess.CompletedProcess[str], path: Path | str, reason: str, *,
             what: str = "cannot write") -> str:
    """Exit 6 and one line on stderr naming ``path`` and the system's ``reason``, with a fix, no traceback."""
    assert proc.returncode == 6, (proc.returncode, proc.stderr)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr
    assert lines[0].startswith(f"error: {what} {path}"), lines[0]
    assert f": {reason} (fix: " in lines[0], lines[0]
    return lines[0]


def listing(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in directory.iterdir() if p.is_file()}


# ---------------------------------------------------------------- init -o


def test_init_on_a_full_disk_names_the_file_and_leaves_nothing(mounts: Mounts) -> None:
    full = mounts.tmpfs("full")
    (full / "old.yml").write_text("name: mine\n")  # the user's file, to be replaced with --force
    mounts.fill(full)
    before = listing(full)
    one_line(envguard(*INIT, "-o", str(full / "environment.yml")), full / "environment.yml", FULL)
    one_line(envguard(*INIT, "--force", "-o", str(full / "old.yml")), full / "old.yml", FULL)
    assert listing(full) == before and sorted(p.name for p in full.iterdir()) == ["fill", "old.yml"]


def test_init_on_a_read_only_file_system_names_the_file(mounts: Mounts) -> None:
    ro = mounts.tmpfs("ro")
    (ro / "environment.yml").write_text("name: mine\n")
    mounts.remount_readonly(ro)
    one_line(envguard(*INIT, "-o", str(ro / "new.yml")), ro / "new.yml", READ_ONLY)
    one_line(envguard(*INIT, "-o", str(ro / "sub" / "environment.yml")), ro / "sub" / "environment.yml",
             READ_ONLY)
    one_line(envguard(*INIT, "--force", "-o", str(ro / "environment.yml")), ro / "environment.yml", READ_ONLY)
    assert listing(ro) == {"environment.yml": b"name: mine\n"}


# ---------------------------------------------------------------- export --output-dir


@pytest.fixture(scope="module")
def conda_env(channel_url: str, tmp_path_factory: pytest.TempPathFactory, session_tmp: Path) -> Path:
    """A real conda environment (rattler installs it from the test channel): export writes both files."""
    root = tmp_path_factory.mktemp("disk-errors-env")
    prefix, _ = check_envs.make_env(channel_url, [f"python {HOST_PY}.*", "pip", "egtool"], root / "env",
                                    session_tmp / "check-pkgs")
    return prefix


def test_export_on_a_read_only_file_system_replaces_nothing(mounts: Mounts, conda_env: Path) -> None:
    ro = mounts.tmpfs("ro", size="1m")
    proc = envguard("export", "-p", str(conda_env), "--no-index", "--output-dir", str(ro))  # the files a user has there
    assert proc.returncode in (0, 1), proc.stderr
    (ro / "environment.yml").write_text((ro / "environment.yml").read_text() + "# mine\n")
    before = listing(ro)
    mounts.remount_readonly(ro)
    one_line(envguard("export", "-p", str(conda_env), "--no-index", "--force", "--output-dir", str(ro)),
             ro / "environment.yml", READ_ONLY)
    one_line(envguard("export", "-p", str(conda_env), "--no-index", "--output-dir", str(ro / "sub")), ro / "sub",
             READ_ONLY, what="cannot create")
    assert listing(ro) == before and sorted(before) == ["conda-lock.yml", "environment.yml"]
    assert sorted(p.name for p in ro.iterdir()) == ["conda-lock.yml", "environment.yml"]


def test_export_on_a_full_disk_names_the_file_that_did_not_fit(mounts: Mounts, conda_env: Path,
                                                               tmp_path: Path) -> None:
    # the sizes of what it writes, on a disk with room
    roomy = tmp_path / "roomy"
    proc = envguard("export", "-p", str(conda_env), "--no-index", "--output-dir", str(roomy))
    assert proc.returncode in (0, 1), proc.stderr
    spec, lock = (roomy / "environment.yml").stat().st_size, (roomy / "conda-lock.yml").stat().st_size
    assert 0 < spec <= PAGE and lock > 0, (spec, lock)  # a tmpfs gives every file one page at least

    full = mounts.tmpfs("full")
    mounts.fill(full)
    one_line(envguard("export", "-p", str(conda_env), "--no-index", "--output-dir", str(full)), full / "environment.yml",
             FULL)
    # room for environment.yml only: the lock, staged next, is the file named (never its staging name)
    mounts.fill(full, leave_pages=1)
    one_line(envguard("export", "-p", str(conda_env), "--no-index", "--output-dir", str(full)), full / "conda-lock.yml",
             FULL)
    assert sorted(p.name for p in full.iterdir()) == ["fill"]  # no staging directory, no environment.yml


# ---------------------------------------------------------------- reports on standard output


def test_check_report_on_a_full_disk_is_one_line_and_no_half_report(mounts: Mounts, tmp_path: Path) -> None:
    args = ("check", "-p", sys.prefix, "--no-smoke", "--format", "json")
    with open(tmp_path / "report.json", "w") as out:  # on a disk with room: a whole report, bigger than a page
        assert envguard(*args, stdout=out).returncode in (0, 1)
    report = (tmp_path / "report.json").read_bytes()
    assert json.loads(report)["schema"] == "envguard.check/1" and len(report) > 2 * PAGE

    full = mounts.tmpfs("full")
    mounts.fill(full)
    with open(full / "report.json", "w") as out:
        proc = envguard(*args, stdout=out)
    one_line(proc, f"{full / 'report.json'} (standard output)", FULL, what="cannot write the output to")
    assert (full / "report.json").read_bytes() == b""
    with open(full / "report.txt", "w") as out:  # the text report, as a log keeps it
        proc = envguard("check", "-p", sys.prefix, "--no-smoke", stdout=out)
    one_line(proc, f"{full / 'report.txt'} (standard output)", FULL, what="cannot write the output to")
    assert (full / "report.txt").read_bytes() == b""

    # room for part of it, appended to what the file held: the part that fitted is taken back (a buffered
    # stream would have dropped the rest of a write the disk took only part of, and exited 0)
    for name in ("report.json", "report.txt", "fill"):
        (full / name).unlink()
    (full / "reports.log").write_text("yesterday's report\n")
    mounts.fill(full, leave_pages=1)
    with open(full / "reports.log", "a") as out:
        proc = envguard(*args, stdout=out)
    one_line(proc, f"{full / 'reports.log'} (standard output)", FULL, what="cannot write the output to")
    assert (full / "reports.log").read_text() == "yesterday's report\n"


@pytest.mark.parametrize("args", [
    pytest.param(["lint", "--format", "json"], id="lint"),
    pytest.param([*INIT, "-o", "-"], id="init-to-stdout"),
])
def test_any_report_on_standard_output_says_so(mounts: Mounts, tmp_path: Path, args: list[str]) -> None:
    (tmp_path / "environment.yml").write_text(
        f"name: t\nchannels: [conda-forge]\ndependencies: [python={HOST_PY}]\nplatforms: [{channels.host_platform()}]\n")
    full = mounts.tmpfs("full")
    mounts.fill(full)
    with open(full / "out", "w") as out:
        proc = envguard(*args, stdout=out, cwd=tmp_path)
    one_line(proc, f"{full / 'out'} (standard output)", FULL, what="cannot write the output to")
    assert (full / "out").read_bytes() == b""


# ---------------------------------------------------------------- tune --plot


def test_tune_plot_on_a_read_only_file_system(mounts: Mounts) -> None:
    importorskip("matplotlib", allowed="plot")
    ro = mounts.tmpfs("ro")
    mounts.remount_readonly(ro)
    proc = envguard("tune", "-p", sys.prefix, "--dataset", "tune_datasets:tiny", "--batch-size", "8",
                    "--max-workers", "1", "--budget", "5", "--plot", str(ro / "tune.png"),
                    cwd=Path(__file__).resolve().parent / "support")
    one_line(proc, ro / "tune.png", READ_ONLY)
    assert list(ro.iterdir()) == []
