"""What real files write that envguard read wrongly: selectors inside pip:, secrets in files of any kind,
and smaller items: an export's platform, an unused channel, and lint's summary beside an unreadable file."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from envguard.diff import SideArgs, compare
from envguard.findings import Severity
from envguard.lint import lint_file, lint_paths, lint_text
from envguard.sources import load

CF = "https://conda.anaconda.org/conda-forge"
PYPI = "https://files.pythonhosted.org/packages/ab/cd"


def _lock(path: Path, platforms: list[str], entries: list[tuple[str, str, str, str, str]]) -> Path:
    """A conda-lock.yml (version 1) of (platform, name, version, manager, url) entries; conda-lock accepts it."""
    pkgs = [{"name": n, "version": v, "manager": m, "platform": plat, "dependencies": {}, "url": url,
             "hash": {"sha256": "ab" * 32} if m == "pip" else {"md5": "cd" * 16, "sha256": "ab" * 32},
             "category": "main", "optional": False} for plat, n, v, m, url in entries]
    path.write_text(yaml.safe_dump({"version": 1, "metadata": {
        "content_hash": {p: "a" * 64 for p in platforms}, "channels": [{"url": "conda-forge", "used_env_vars": []}],
        "platforms": platforms, "sources": ["environment.yml"]}, "package": pkgs}, sort_keys=False))
    from conda_lock.lockfile import parse_conda_lock_file

    parse_conda_lock_file(path)
    return path


# --------------------------------------------------------------------------- class 2: selectors inside pip:

SELECTORS = """\
name: sel
channels:
  - conda-forge
dependencies:
  - python=3.11
  - requests  # [linux]
  - pip
  - pip:
    - psutil  # [linux64] sensors, linux only
    - cowsay  # [not win]
    - tqdm  # [nonsense]
    - requests  # [osx]
"""


def test_lint_reads_selectors_inside_pip() -> None:
    fs = lint_text(SELECTORS, "environment.yml")
    eg125 = sorted(f.line for f in fs if f.code == "EG125")
    assert eg125 == [10, 11]  # [not win] and [nonsense]: conda-lock drops those lines on every platform
    assert "EG123" not in {f.code for f in fs}  # requests from conda on linux, from pip on osx: never both
    both = SELECTORS.replace("requests  # [osx]", "requests  # [linux64]")
    assert [f.line for f in lint_text(both, "environment.yml") if f.code == "EG123"] == [12]


def test_selector_on_the_pip_line_is_an_error() -> None:
    text = "channels: [conda-forge]\ndependencies:\n  - python=3.11\n  - pip\n  - pip:  # [linux]\n    - rich\n"
    (f,) = [f for f in lint_text(text, "environment.yml") if f.code == "EG125"]
    assert f.line == 5 and f.severity is Severity.ERROR and "drops only that line" in f.message


def test_diff_carries_selectors_inside_pip_as_conda_lock_does(tmp_path: Path) -> None:
    env = tmp_path / "environment.yml"
    env.write_text(SELECTORS + "platforms:\n  - linux-64\n  - win-64\n")
    py = "python-3.11.9-hb806964_0_cpython.conda"
    lock = _lock(tmp_path / "conda-lock.yml", ["linux-64", "win-64"], [
        ("linux-64", "python", "3.11.9", "conda", f"{CF}/linux-64/{py}"),
        ("win-64", "python", "3.11.9", "conda", f"{CF}/win-64/{py}"),
        ("linux-64", "requests", "2.32.3", "conda", f"{CF}/noarch/requests-2.32.3-pyhd8ed1ab_0.conda"),
        ("linux-64", "pip", "24.0", "conda", f"{CF}/noarch/pip-24.0-pyhd8ed1ab_0.conda"),
        ("win-64", "pip", "24.0", "conda", f"{CF}/noarch/pip-24.0-pyhd8ed1ab_0.conda"),
        ("linux-64", "psutil", "5.9.8", "pip", f"{PYPI}/psutil-5.9.8-cp36-abi3-manylinux_2_17_x86_64.whl"),
    ])
    r = compare(SideArgs(str(env)), SideArgs(str(lock)), all_platforms=True)
    by_plat = {rep.platform: {c.spec.name: c.status for c in rep.checks} for rep in r.spec_reports}
    assert by_plat["linux-64"]["psutil"] == "satisfied" and "psutil" not in by_plat["win-64"]
    assert not ({"cowsay", "tqdm"} & (by_plat["linux-64"].keys() | by_plat["win-64"].keys()))
    assert r.equal, by_plat
    assert any("cowsay" in n and "drops the entry on every platform" in n for n in r.notes)


@pytest.mark.slow
def test_lock_honours_selectors_inside_pip(tmp_path: Path, channel_url: str, pypi_index) -> None:
    from envguard.lock import lock
    from envguard.lock.lockfile import pip_records, read_lock

    env = tmp_path / "environment.yml"
    env.write_text(textwrap.dedent(f"""\
        channels:
          - {channel_url}
        dependencies:
          - python=3.11
          - pip
          - pip:
            - egdemo-b  # [linux64]
        platforms: [linux-64, win-64]
        pip-repositories:
          - {pypi_index.url}
        allow-pypi-requests: false
        """))
    lock([env])
    lk = read_lock(tmp_path / "conda-lock.yml")
    assert {e.name for e in pip_records(lk, "linux-64")} == {"egdemo-a", "egdemo-b"}
    assert pip_records(lk, "win-64") == []


# --------------------------------------------------------------------------- class 9: secrets, any kind


@pytest.mark.slow
def test_secret_in_an_explicit_file_without_the_marker(tmp_path: Path) -> None:
    p = tmp_path / "conda-linux-64.lock"
    p.write_text("# platform: linux-64\n"
                 "https://bob:hunter2@conda.example.com/private/linux-64/egx-1.0-0.conda#" + "0" * 32 + "\n"
                 "https://conda.example.com/t/tok-123/private/linux-64/egy-1.0-0.conda\n")
    result = lint_paths([p])
    assert len(result.unreadable) == 1 and "@EXPLICIT" in result.unreadable[0]
    (f,) = result.findings
    assert (f.code, f.line, f.severity) == ("EG155", 2, Severity.ERROR) and "1 more line" in f.message
    proc = subprocess.run([sys.executable, "-m", "envguard", "lint", str(p)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2 and "EG155" in proc.stdout
    assert "hunter2" not in proc.stdout + proc.stderr and "tok-123" not in proc.stdout + proc.stderr


def test_secret_in_any_file_and_anywhere_in_a_spec(tmp_path: Path) -> None:
    req = tmp_path / "requirements.txt"
    req.write_text("--index-url https://alice:s3cret@pypi.example.com/simple\ntorch==2.6.0\n")
    result = lint_paths([req])
    assert result.unreadable and [(f.code, f.line) for f in result.findings] == [("EG155", 1)]
    env = tmp_path / "environment.yml"
    env.write_text("channels: [conda-forge]\ndependencies:\n  - python=3.11\n  - pip\n  - pip: [rich]\n"
                   "pip-repositories:\n  - https://alice:s3cret@pypi.example.com/simple\n")
    fs = [f for f in lint_file(env) if f.code == "EG115"]
    assert [f.line for f in fs] == [7] and "s3cret" not in fs[0].message + fs[0].fix
    toml = tmp_path / "pixi.toml"
    toml.write_text('[workspace]\nname = "x"\nplatforms = ["linux-64"]\n'
                    'channels = ["https://u:p4ss@conda.example.com/private"]\n\n[dependencies]\npython = "3.11.*"\n')
    assert [(f.code, f.line) for f in lint_file(toml) if f.code == "EG115"] == [("EG115", 4)]


# --------------------------------------------------------------------------- class 11: smaller items


WIN_EXPORT = """\
name: winenv
channels:
  - conda-forge
dependencies:
  - python=3.11.9=h631f459_0_cpython
  - pytorch=2.5.1=cpu_mkl_py311h0_103
  - numpy=1.26.4=py311h0b4df5a_0
  - ucrt=10.0.22621.0=h57928b3_0
  - vc=14.3=h8a93ad2_20
  - vs2015_runtime=14.40.33810=h3bf8584_20
prefix: C:\\Users\\me\\miniforge3\\envs\\winenv
"""


def test_export_of_a_win_64_env_is_shown_with_its_platform(tmp_path: Path) -> None:
    p = tmp_path / "environment.yml"
    p.write_text(WIN_EXPORT)
    d = load(str(p))
    assert d.kind == "export" and d.platforms == ["win-64"]
    lock = _lock(tmp_path / "conda-lock.yml", ["linux-64", "win-64"], [
        ("win-64", "python", "3.11.9", "conda", f"{CF}/win-64/python-3.11.9-h631f459_0_cpython.conda"),
        ("linux-64", "python", "3.11.9", "conda", f"{CF}/linux-64/python-3.11.9-hb806964_0_cpython.conda"),
    ])
    r = compare(SideArgs(str(p)), SideArgs(str(lock)))
    assert r.a.platform == "win-64" and [pd.label for pd in r.platforms] == ["win-64"]
    assert "any platform" not in json.dumps(r.to_dict())


def test_unused_channel_is_reported_as_unused_not_frozen(realworld: Path, tmp_path: Path) -> None:
    mini = realworld / "environment" / "Vision-CAIR__MiniGPT-4__environment.yml"  # torch from pip only
    fs = lint_file(mini)
    (f,) = [f for f in fs if f.code == "EG130"]
    assert "`pytorch`" in f.message and "pytorch" in mini.read_text().splitlines()[f.line - 1]
    assert "EG111" not in {x.code for x in fs}
    used = "channels: [pytorch, conda-forge]\ndependencies:\n  - python=3.10\n  - pytorch=2.1\n"
    assert "EG111" in {x.code for x in lint_text(used, "environment.yml")}
    lock = _lock(tmp_path / "conda-lock.yml", ["linux-64"], [
        ("linux-64", "python", "3.11.9", "conda", f"{CF}/linux-64/python-3.11.9-hb806964_0_cpython.conda")])
    data = yaml.safe_load(lock.read_text())
    data["metadata"]["channels"].append({"url": "pytorch", "used_env_vars": []})
    lock.write_text(yaml.safe_dump(data, sort_keys=False))
    (u,) = [f for f in lint_file(lock) if f.code == "EG130"]
    assert "`pytorch` is listed but nothing is locked from it" in u.message


@pytest.mark.slow
def test_lint_never_says_no_findings_next_to_an_unreadable_file(tmp_path: Path) -> None:
    good = tmp_path / "environment.yml"
    good.write_text("channels: [conda-forge, nodefaults]\ndependencies:\n  - python=3.11\n"
                    "  - pytorch=2.13.*=cpu*\n")
    bad = tmp_path / "broken.yml"
    bad.write_text("dependencies: [a\n")
    assert lint_paths([good]).findings == []
    for fmt in ("text", "json", "markdown"):
        proc = subprocess.run([sys.executable, "-m", "envguard", "lint", "--format", fmt, str(good), str(bad)],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2 and "no findings" not in proc.stdout, proc.stdout
        assert "1 file could not be read" in proc.stdout and "malformed YAML" in proc.stderr


def test_a_pip_requirements_file_that_cannot_be_read_is_a_note_with_its_problem_and_fix(tmp_path: Path) -> None:
    """The note says what was wrong with the file and what to do, without repeating its path."""
    (tmp_path / "adir").mkdir()
    env = tmp_path / "environment.yml"
    env.write_text("name: x\nchannels: [conda-forge]\ndependencies:\n  - pip\n  - pip:\n"
                   f"    - -r {tmp_path / 'missing.txt'}\n    - -r {tmp_path / 'adir'}\n")
    assert load(str(env)).notes == [
        f"pip -r {tmp_path / 'missing.txt'} not read (file not found (fix: check the path)): its requirements are "
        "not compared",
        f"pip -r {tmp_path / 'adir'} not read (is a directory, expected a file (fix: pass the file inside it)): its "
        "requirements are not compared",
    ]
