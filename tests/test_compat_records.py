"""`envguard init` checks a request against the channel's own records, and solves the file it writes there.

The channel is conda-forge's real records from the locks in ../shared/realworld (tests/support/metadata_channel.py),
served from disk. It is a sample, so "the records lack it" is what these records lack: init must say so
without consulting the table. The table (envguard/data/compat.yaml) answers only when the channel does not
(unreachable, or ENVGUARD_OFFLINE=1), and init then says which table and how old it is.
"""

from __future__ import annotations

import copy
import datetime as dt
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from envguard import channelfacts, compat
from envguard.errors import UserError
from envguard.init import init
from envguard.lint import lint_text

UNREACHABLE = "http://127.0.0.1:9/conda-forge"  # the discard port: nothing answers


@pytest.fixture
def records_url(realdata_channel) -> str:
    return realdata_channel.url


@pytest.fixture
def no_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """A table whose conda-forge route knows only torch 2.0 and CUDA 11: what init accepts from here on came
    from the records, not from it."""
    data = copy.deepcopy(compat.load_all())
    cf = data["routes"]["conda-forge"]
    cf["releases"] = {"2.0": cf["releases"]["2.0"]}
    cf["toolkit_lines"] = [v for v in cf["toolkit_lines"] if v.startswith("11.")]
    damaged = compat.Compat(data)
    monkeypatch.setattr(compat, "load", lambda: damaged)


def _refused(**args) -> str:
    with pytest.raises(UserError) as e:
        init(output="-", **args)
    assert e.value.exit_code == 2
    return e.value.message


def test_init_accepts_what_the_records_hold_without_the_table(records_url: str, no_table: None,
                                                              tmp_path: Path) -> None:
    out = tmp_path / "environment.yml"
    result = init(torch="2.12", cuda="12.9", platforms=["linux-64", "win-64"], output=out, channel_url=records_url)
    assert result.evidence == f"checked against conda-forge records ({records_url})" and result.stale is None
    deps = yaml.safe_load(out.read_text())["dependencies"]
    assert "pytorch=2.12.*=cuda12*" in deps and "cuda-version=12.9" in deps
    text = out.read_text()
    assert "# win-64: the cuda128 build on the CUDA 12.9 libraries" in text  # the records' win-64 line
    # CPU: the newest release in the records is the default
    cpu = init(output="-", channel_url=records_url)
    assert cpu.torch == "2.12" and cpu.cuda == "cpu"


def test_init_refuses_what_the_records_lack_naming_what_they_hold(records_url: str, no_table: None) -> None:
    # the table of today lists 2.13; these records do not hold it
    assert _refused(torch="2.13", channel_url=records_url) == (
        "torch 2.13 is not in conda-forge's records (torch 2.1, 2.4, 2.6, 2.7, 2.8, 2.9, 2.10, 2.11 and 2.12); "
        "use --torch 2.12")
    # the records have no cuda130 build of 2.12 on linux-64 (the table says conda-forge builds one)
    assert _refused(torch="2.12", cuda="13.0", platforms=["linux-64"], channel_url=records_url) == (
        "conda-forge builds torch 2.12 for CUDA 12.9 on linux-64; use --cuda 12.9")
    assert _refused(torch="2.9.0", channel_url=records_url) == (
        "torch 2.9.0 is not in conda-forge's records (torch 2.9: 2.9.1); use --torch 2.9")
    # Python lines from the records, gaps included
    assert _refused(torch="2.8", cuda="12.9", platforms=["linux-64", "win-64"], python="3.11",
                    channel_url=records_url) == (
        "torch 2.8 has no Python 3.11 build in conda-forge's records (its Python lines: 3.10, 3.12 and 3.13); "
        "use --python 3.10 or --torch 2.10")
    # cuda-version lines the records hold: 12.4 is not among them
    assert _refused(torch="2.12", cuda="12.4", platforms=["linux-64"], channel_url=records_url).startswith(
        "conda-forge builds torch 2.12 for CUDA 12.9 on linux-64")
    assert _refused(torch="2.12", cuda="13.2", platforms=["linux-64"], channel_url=records_url).startswith(
        "conda-forge builds torch 2.12 for CUDA 12.9 on linux-64")


def test_init_writes_only_what_solves_on_every_platform(records_url: str, tmp_path: Path) -> None:
    """The records hold 2.6.0 cuda126 builds for Python 3.10 and 3.12 on linux-64 (and 3.11 on other
    platforms): 3.11 passes the row check and fails the solve, which init reports before writing anything."""
    out = tmp_path / "environment.yml"
    with pytest.raises(UserError) as e:
        init(python="3.11", torch="2.6", cuda="12.6", platforms=["linux-64"], output=out, channel_url=records_url)
    assert e.value.message.startswith("torch 2.6 (CUDA 12.6) does not solve on linux-64 against conda-forge's "
                                      f"records ({records_url}): ")
    assert e.value.message.endswith("; conda-forge's records hold torch 2.6 cuda126 builds on linux-64 for Python "
                                    "3.10 and 3.12; use --python 3.10 or drop --platform linux-64, or another --torch "
                                    "or --cuda"), e.value.message
    assert not out.exists()
    init(python="3.10", torch="2.6", cuda="12.6", platforms=["linux-64"], output=out, channel_url=records_url)
    assert "cuda-version=12.6" in yaml.safe_load(out.read_text())["dependencies"]


def test_offline_the_table_answers_and_says_its_date_and_age(monkeypatch: pytest.MonkeyPatch,
                                                             records_url: str) -> None:
    # unreachable: the table answers (2.13 is in it), and the report says which table and why
    result = init(torch="2.13", cuda="12.9", platforms=["linux-64"], output="-", channel_url=UNREACHABLE)
    assert result.evidence.startswith("from envguard's table of 2026-08-13; conda-forge (")
    assert result.evidence.endswith(") did not answer")
    assert result.stale is not None and "days old (of 2026-08-13)" in result.stale
    # ENVGUARD_OFFLINE=1: the channel is never asked, even where it would answer
    monkeypatch.setenv("ENVGUARD_OFFLINE", "1")
    monkeypatch.setenv("ENVGUARD_CHANNEL_ALIAS", records_url.rsplit("/", 1)[0])
    result = init(torch="2.13", output="-")
    assert result.evidence == "from envguard's table of 2026-08-13" and result.torch == "2.13"


def test_the_age_warning_starts_past_90_days() -> None:
    cf = compat.load().route("conda-forge")
    day = dt.date.fromisoformat(cf.as_of or "")
    assert channelfacts.table_note(cf, day + dt.timedelta(days=90)) == ("from envguard's table of 2026-08-13", None)
    _, stale = channelfacts.table_note(cf, day + dt.timedelta(days=91))
    assert stale is not None and stale.startswith("envguard's conda-forge table is 91 days old")


@pytest.mark.slow  # starts envguard
def test_the_cli_says_what_it_checked_against(realdata_channel, tmp_path: Path) -> None:
    alias = tmp_path / "alias"
    alias.mkdir()
    (alias / "conda-forge").symlink_to(realdata_channel.path, target_is_directory=True)
    env = {k: v for k, v in os.environ.items() if k != "ENVGUARD_OFFLINE"}
    env["ENVGUARD_CHANNEL_ALIAS"] = alias.as_uri()
    proc = subprocess.run([sys.executable, "-m", "envguard", "init", "--torch", "2.12", "--cuda", "12.9",
                           "--platform", "linux-64", "-o", str(tmp_path / "environment.yml")],
                          capture_output=True, text=True, env=env, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert lines[-2] == (f"checked against conda-forge records ({alias.as_uri()}/conda-forge, "
                         "from ENVGUARD_CHANNEL_ALIAS)")
    assert lines[-1] == "next: envguard lock" and "days old" not in proc.stderr
    # the same mirror named the way conda users name it, in ~/.condarc: init takes lock's route to it
    home = tmp_path / "home"
    home.mkdir()
    (home / ".condarc").write_text(f"custom_channels:\n  conda-forge: {alias.as_uri()}\n")
    rc_env = {k: v for k, v in env.items() if k != "ENVGUARD_CHANNEL_ALIAS" and not k.startswith("CONDA")}
    proc = subprocess.run([sys.executable, "-m", "envguard", "init", "--torch", "2.12", "--cuda", "12.9",
                           "--platform", "linux-64", "-o", "-"], capture_output=True, text=True,
                          env={**rc_env, "HOME": str(home)}, cwd=tmp_path, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    assert (f"checked against conda-forge records ({alias.as_uri()}/conda-forge, from ~/.condarc: "
            "custom_channels)") in proc.stdout + proc.stderr
    env["ENVGUARD_OFFLINE"] = "1"
    proc = subprocess.run([sys.executable, "-m", "envguard", "init", "-o", "-"], capture_output=True, text=True,
                          env=env, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "from envguard's table of 2026-08-13" in proc.stderr and "days old" in proc.stderr


def test_lint_gives_the_answer_init_checked_against(records_url: str, tmp_path: Path) -> None:
    """Inside init, lint sees the records' rows: a cuda-version=13.0 spec for torch 2.12 on linux-64 is an
    error with the lines the records hold; against the table (which lists 13.0) it is not."""
    spec = ("channels: [conda-forge]\ndependencies:\n  - python=3.11\n  - pytorch=2.12.*=cuda13*\n"
            "  - cuda-version=13.0\nplatforms: [linux-64]\n")
    path = str(tmp_path / "environment.yml")
    assert not [f for f in lint_text(spec, path) if f.code == "EG118"]
    records = channelfacts.fetch("conda-forge", ["linux-64"], records_url)
    with channelfacts.answering(records.route(compat.load().route("conda-forge"))):
        found = [f for f in lint_text(spec, path) if f.code == "EG118"]
    assert found and all("for CUDA 12.9 on linux-64" in f.message for f in found), found


def test_the_records_rows_carry_variants_and_glibc_floors(records_url: str) -> None:
    records = channelfacts.fetch("conda-forge", ["linux-64", "linux-aarch64", "win-64"], records_url)
    rows = records.rows()
    assert rows["2.9"]["versions"] == ["2.9.1"]
    assert rows["2.9"]["variants"] == {"linux-aarch64": {"12.9": ["sbsa"]}}
    assert rows["2.9"]["glibc"]["12.9"] == "2.17"
    assert rows["2.8"]["cuda"] == {"linux-64": ["12.9"], "linux-aarch64": ["12.9"], "win-64": ["12.8"]}
    assert {"12.8", "12.9", "13.0", "13.1"} <= set(records.cuda_versions)


def test_7_releases_shipped_after_the_table_are_offered_once_the_channel_has_them(tmp_path: Path) -> None:
    """The table of 2026-08-13 ends at 2.13; PyPI shipped 2.14.0, 2.14.1 and 2.15.0 since. A channel whose records
    hold conda-forge builds of them: offline init refuses them (no evidence in the table), against the records
    it writes them, the newest one by default."""
    from test_compat_regen import complete_channel

    data = copy.deepcopy(compat.load_all()["routes"]["conda-forge"])
    rows = data["releases"]
    rows["2.14"] = copy.deepcopy(rows["2.13"]) | {"versions": ["2.14.0", "2.14.1"]}
    rows["2.15"] = copy.deepcopy(rows["2.13"]) | {"versions": ["2.15.0"], "python": ["3.11", "3.12", "3.13", "3.14"]}
    rows["2.15"]["cuda"] = {"linux-64": ["12.9", "13.0", "13.2"], "linux-aarch64": ["12.9", "13.0"],
                            "win-64": ["12.8", "13.0", "13.2"]}
    url = complete_channel(tmp_path / "conda-forge", rows, data["toolkit_lines"], data["variants"], solvable=True).as_uri()
    assert _refused(torch="2.15").startswith("torch 2.15 has no release evidence on conda-forge in envguard's data")
    out = tmp_path / "environment.yml"
    result = init(torch="2.15", cuda="13.2", output=out, channel_url=url)
    assert result.evidence == f"checked against conda-forge records ({url})"
    text = out.read_text()
    assert "pytorch=2.15.*=cuda13*" in text and "# win-64: the cuda132 build;" in text
    assert init(output="-", channel_url=url).torch == "2.15"
    assert "pytorch=2.14.1=cpu*" in init(torch="2.14.1", output="-", channel_url=url).text
    # Python 3.10 is not among these 2.15 builds: refused, naming the lines that exist
    assert _refused(torch="2.15", python="3.10", channel_url=url) == (
        "torch 2.15 needs Python ≥ 3.11; use --python 3.11 or --torch 2.14")


def test_a_channel_without_pytorch_is_refused_in_one_line(tmp_path: Path) -> None:
    for subdir in ("noarch", "linux-64"):
        (tmp_path / "empty" / subdir).mkdir(parents=True)
        (tmp_path / "empty" / subdir / "repodata.json").write_text(
            f'{{"info": {{"subdir": "{subdir}"}}, "packages": {{}}, "packages.conda": {{}}}}')
    url = (tmp_path / "empty").as_uri()
    assert _refused(platforms=["linux-64"], channel_url=url) == (
        "conda-forge's records hold no pytorch for linux-64; use --platform with one that has builds, or another "
        "--channel")


def test_an_unknown_platform_is_refused_before_the_channel_is_asked(records_url: str) -> None:
    assert _refused(platforms=["linux-99"], channel_url=records_url).startswith("unknown platform 'linux-99'; use ")
