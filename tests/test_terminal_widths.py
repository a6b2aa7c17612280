"""Every command's real output on a real terminal (a pseudo-terminal COLUMNS wide) fits the width: no line
longer than it, no path or word that fits on a line broken across two, the verdict on the first lines, a
table only where it fits and one item per line where it does not. The commands run for real: lint and diff on
the real-world files, lock against the test channel, smoke, check and tune on this virtualenv, fleet on
real check reports."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import shutil
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest
from rich.cells import cell_len
from support.channels import HOST_PY
from support.lock_support import write_env

from envguard.render import Column, table_layout, wrap_offsets

ENVGUARD = [sys.executable, "-m", "envguard"]
WIDTHS = [60, 80, 120]
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
PANGEO = "conda-lock/pangeo-data__pangeo-docker-images__pytorch-notebook__conda-lock"


def on_terminal(args: list[str], columns: int, *, cwd: Path | None = None, timeout: int = 300) -> tuple[int, str]:
    """Run envguard with its stdout on a pseudo-terminal ``columns`` wide (stderr to a pipe); its screen text."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE")}
    env.update(COLUMNS=str(columns), TERM="xterm", NO_COLOR="1")  # rich gives a "dumb" one 80 columns
    proc = subprocess.Popen([*ENVGUARD, *args], stdin=subprocess.DEVNULL, stdout=slave, stderr=subprocess.DEVNULL,
                            cwd=cwd, env=env)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: every writer closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    rc = proc.wait(timeout=timeout)
    return rc, ANSI.sub("", b"".join(chunks).decode("utf-8", "replace")).replace("\r\n", "\n")


def assert_fits(text: str, width: int, whole: list[str]) -> list[str]:
    """No line wider than ``width``; each of ``whole`` (paths, names) that fits a line is on one line whole."""
    lines = text.splitlines()
    assert lines, text
    wide = [ln for ln in lines if cell_len(ln) > width]
    assert not wide, "\n".join(wide)
    for word in whole:
        if cell_len(word) <= width and word in text.replace("\n", " "):
            assert any(word in ln for ln in lines), (word, text)
    return lines


# ---------------------------------------------------------------- the layout itself


def test_a_table_only_where_every_word_and_path_fits() -> None:
    path = "/home/someone/projects/very-long-project-name/conda-lock.yml"
    cols = [Column("name"), Column("where"), Column("empty"), Column("note", wrap=True, least=20)]
    rows = [["numpy", path, "", "a long note that may wrap between its words"], ["torch", "x", "", "short"]]
    used, widths = table_layout(cols, rows, 120)
    assert used == [0, 1, 3] and widths == [5, len(path), 43]  # the empty column left out; the note on one line
    assert table_layout(cols, rows, 95) == (used, [5, len(path), 20])  # 95: the note wraps at its least
    assert table_layout(cols, rows, 80) == (used, None)  # 5 + 60 + 20 and the borders do not fit 80
    assert table_layout(cols, rows, 120, min_width=130) == (used, None)


def test_lines_break_between_words_and_a_path_gets_a_line_of_its_own() -> None:
    text = "  + upgraded   numpy 1.26.4 -> 2.0.0: /home/someone/projects/very/long/conda-lock.yml asked for it"
    pieces = [" " * i + text[a:b] for a, b, i in wrap_offsets(text, 40, 4)]
    assert all(len(p) <= 40 for p in pieces), pieces
    # broken between words, the path (longer than an indented line) from the first column, cut once at the width
    assert pieces == ["  + upgraded   numpy 1.26.4 -> 2.0.0:", "/home/someone/projects/very/long/conda-l",
                      "    ock.yml asked for it"]
    short = "error EG511 /home/someone/conda-lock.yml:12: torch was installed by pip"
    assert [" " * i + short[a:b] for a, b, i in wrap_offsets(short, 34, 2)] == [
        "error EG511", "  /home/someone/conda-lock.yml:12:", "  torch was installed by pip"]


# ---------------------------------------------------------------- the commands


@pytest.mark.slow
@pytest.mark.parametrize("width", WIDTHS)
def test_lint(width: int, realworld: Path) -> None:
    spec = realworld / "environment" / "facebookresearch__drqv2__conda_env.yml"
    rc, text = on_terminal(["lint", str(spec)], width)
    lines = assert_fits(text, width, [str(spec)])
    assert re.search(r"\d+ errors?, \d+ warnings?", "\n".join(lines[:4])), lines[:4]  # the verdict before the rows
    assert rc in (0, 1)


@pytest.mark.slow
@pytest.mark.parametrize("width", WIDTHS)
def test_diff_of_two_real_locks(width: int, realworld: Path) -> None:
    a, b = realworld / f"{PANGEO}.yml", realworld / f"{PANGEO}@2beeef5.yml"
    rc, text = on_terminal(["diff", str(a), str(b)], width)
    names = ["cuda129_mkl_py312_h2ff76c1_300", "cuda126_mkl_py312_h30b5a27_300", "hd63d673_2_cpython"]
    lines = assert_fits(text, width, [str(a), str(b), *names])
    assert re.match(r"\d+ changes \(", lines[0]), lines[:3]  # the verdict first
    assert rc != 0 and "pytorch" in text


@pytest.mark.slow
@pytest.mark.parametrize("width", WIDTHS)
def test_diff_of_a_spec_against_its_lock(width: int, realworld: Path) -> None:
    env = realworld / "environment" / "pangeo-data__pangeo-docker-images__pytorch-notebook__environment.yml"
    lock = realworld / f"{PANGEO}.yml"
    rc, text = on_terminal(["diff", str(env), str(lock)], width)
    lines = assert_fits(text, width, [str(env), str(lock)])
    assert "requested specs" in text and not lines[0].startswith("A: "), lines[:3]
    assert rc in (0, 1)


@pytest.fixture(scope="module")
def relocked(tmp_path_factory: pytest.TempPathFactory, channel_url: str) -> Path:
    """A real lock against the test channel, then the spec edited: the next lock has changes to report."""
    root = tmp_path_factory.mktemp("relock-with-a-long-directory-name-for-the-paths")
    spec = write_env(root / "environment.yml", channels=[channel_url],
                     deps=[f"python={HOST_PY}", "pytorch=2.13", "egtool"], platforms=["linux-64"])
    proc = subprocess.run([*ENVGUARD, "lock", "-f", str(spec)], capture_output=True, text=True, timeout=300,
                          cwd=root, check=False)
    assert proc.returncode == 0, proc.stderr
    write_env(spec, channels=[channel_url], deps=[f"python={HOST_PY}", "pytorch=2.12", "egtool"],
              platforms=["linux-64"])
    return root


@pytest.mark.slow
@pytest.mark.parametrize("width", WIDTHS)
def test_lock_change_report(width: int, relocked: Path, tmp_path: Path) -> None:
    root = tmp_path / "copy"
    shutil.copytree(relocked, root)
    rc, text = on_terminal(["lock", "-f", str(root / "environment.yml")], width, cwd=root)
    lines = assert_fits(text, width, [str(root / "conda-lock.yml")])
    assert rc == 0 and lines[0].split()[0] == "wrote", lines[:3]
    assert re.search(r"^\s+v downgraded\s+pytorch 2\.13", text, re.MULTILINE), text


@pytest.mark.slow
@pytest.mark.parametrize("width", WIDTHS)
def test_smoke(width: int) -> None:
    rc, text = on_terminal(["smoke", "--python", sys.executable, "--quick"], width)
    lines = assert_fits(text, width, [sys.executable, "import-torch", "numpy-interop"])
    assert rc == 0 and lines[0].startswith("envguard smoke: passed in "), lines[:3]


@pytest.mark.slow
@pytest.mark.parametrize("width", WIDTHS)
def test_check(width: int) -> None:
    rc, text = on_terminal(["check", "-p", sys.prefix], width)
    lines = assert_fits(text, width, [sys.prefix])
    assert lines[0].startswith("envguard check "), lines[:3]
    verdict = next(i for i, ln in enumerate(lines) if re.match(r"(\d+ errors?, |no findings|everything)", ln))
    assert verdict <= 5 and not any(re.match(r"(info|warning|error)\b", ln) for ln in lines[:verdict]), lines
    assert rc in (0, 1)


@pytest.mark.slow
@pytest.mark.parametrize("width", WIDTHS)
def test_tune(width: int) -> None:
    rc, text = on_terminal(["tune", "-p", sys.prefix, "--demo", "--current", "num_workers=2", "--max-workers", "2",
                            "--budget", "3"], width)
    lines = assert_fits(text, width, [sys.executable])
    assert rc == 0 and lines[0].startswith("envguard tune: done in "), lines[:3]
    rec = next(i for i, ln in enumerate(lines) if ln.startswith("recommended: "))
    measured = next(i for i, ln in enumerate(lines) if ln.startswith("usable CPUs"))
    assert rec <= 2 and rec < measured, lines[:6]  # the verdict before what was measured
    table = any(ln.lstrip().startswith("#") and "settings" in ln for ln in lines)
    assert table == (width >= 120) and ("samples/s 1" in text.replace("\n", " ")) != table, text


@pytest.fixture(scope="module")
def fleet_reports(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three nodes' real check reports of this virtualenv; one with another numpy and another torch."""
    proc = subprocess.run([*ENVGUARD, "check", "-p", sys.prefix, "--no-smoke", "--format", "json"],
                          capture_output=True, text=True, timeout=300, check=False)
    report = json.loads(proc.stdout)
    root = tmp_path_factory.mktemp("fleet")
    odd = json.loads(json.dumps(report))
    for p in odd.get("packages") or []:
        if p.get("name") in ("numpy", "torch", "pytorch"):
            p["version"] = "0.0.1-a-very-long-local-version-string"
    for host, doc in (("node01", report), ("node02", report), ("node03", odd)):
        (root / f"{host}.json").write_text(json.dumps({**doc, "host": host}))
    return root


@pytest.mark.slow
@pytest.mark.parametrize("width", WIDTHS)
def test_fleet_details(width: int, fleet_reports: Path) -> None:
    rc, text = on_terminal(["fleet", str(fleet_reports), "--details"], width)
    lines = assert_fits(text, width, [str(fleet_reports), "0.0.1-a-very-long-local-version-string"])
    assert lines[0].startswith("envguard fleet · 3 nodes") and "of 3 nodes match" in lines[1], lines[:3]
    assert rc in (0, 1)
