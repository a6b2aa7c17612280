"""``envguard diff`` end to end on the real files: pair groups, known cases, exit codes, output formats."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from envguard.cli import run
from envguard.diff import DiffResult
from envguard.sources import load

CLAY = "conda-lock/Clay-foundation__model__conda-lock@32518ce.yml"
LENSKIT = "pixi/lenskit__lkpy__pixi@663ff5a.lock"
YI = "conda-lock/01-ai__Yi__conda-lock.yml"


def pair_groups(realworld: Path) -> dict[str, list[Path]]:
    """``- **P05** repo:dir:commit: `a`, `b``` lines of SOURCES.md, keeping the files present here."""
    groups: dict[str, list[Path]] = {}
    for line in (realworld / "SOURCES.md").read_text(encoding="utf-8").splitlines():
        m = re.match(r"^- \*\*(P\d+)\*\*[^`]*(`.*)$", line)
        if m:
            groups[m.group(1)] = [realworld / f for f in re.findall(r"`([^`]+)`", m.group(2))]
    return groups


def _json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, dict]:
    code = run(["diff", *argv, "--format", "json"])
    out = capsys.readouterr().out
    return code, json.loads(out)


# --------------------------------------------------------------------------- pair groups


@pytest.mark.slow
def test_pair_groups(realworld: Path, capsys: pytest.CaptureFixture[str]) -> None:
    groups = pair_groups(realworld)
    assert len(groups) >= 10
    env_lock = lock_explicit = 0
    for gid, files in groups.items():
        present = [f for f in files if f.is_file()]
        by_kind: dict[str, list[Path]] = {}
        for f in present:
            if f.suffix in (".toml", ".txt") and f.parent.name != "explicit":
                continue  # pixi manifests and pip requirement companions are not descriptions of their own
            by_kind.setdefault(load(str(f)).kind, []).append(f)
        for lock in by_kind.get("conda-lock", []):
            for env in by_kind.get("environment", []):
                code, doc = _json(capsys, [str(env), str(lock), "--all-platforms"])
                failing = [(r["platform"], c["spec"]["spec"], c["reason"]) for r in doc["spec_reports"]
                           for c in r["checks"] if c["status"] != "satisfied"]
                assert code == 0 and not failing and doc["spec_side"] == "A", (gid, failing)
                assert all(r["checks"] and r["unrequested"] for r in doc["spec_reports"])
                env_lock += 1
            for explicit in by_kind.get("explicit", []):
                code, doc = _json(capsys, [str(lock), str(explicit)])
                assert code == 0 and doc["equal"], (gid, doc["summary"])
                assert doc["a"]["platform"] == load(str(explicit)).platforms[0]
                assert doc["platforms"] and not doc["platforms"][0]["changes"]
                lock_explicit += 1
            for other in by_kind.get("export", []):  # a lock and an export of one commit: readable, comparable
                code, doc = _json(capsys, [str(lock), str(other)])
                assert code in (0, 1) and doc["platforms"], gid
        for pixi in by_kind.get("pixi", []):
            for env in load(str(pixi)).environments:
                code, _ = _json(capsys, [str(pixi), str(pixi), "--environment", env, "--all-platforms"])
                assert code == 0, (gid, env)
    assert env_lock >= 5 and lock_explicit >= 2


# --------------------------------------------------------------------------- known cases


def test_clay_linux_vs_osx_arm64_is_a_cuda_cpu_flip(realworld: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = str(realworld / CLAY)
    code, doc = _json(capsys, [f, f, "--a-platform", "linux-64", "--b-platform", "osx-arm64"])
    assert code == 1 and not doc["equal"]
    changes = doc["platforms"][0]["changes"]
    torch = next(c for c in changes if c["name"] == "pytorch")
    assert "cpu-cuda-flip" in torch["kinds"] and torch["core"] and torch["severity"] == "warning"
    assert "cuda120" in torch["old"]["build"] and torch["new"]["build"].startswith("cpu_generic")
    assert changes[0]["name"] == "python" and changes[1]["name"] == "pytorch"  # core first
    assert "hash-changed" not in doc["counts"]  # same build string on two platforms is two artifacts


def test_lenskit_win_pytorch_channel(realworld: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = str(realworld / LENSKIT)
    for other in ("linux-64", "osx-arm64"):
        code, doc = _json(capsys, [f, f, "--a-platform", "win-64", "--b-platform", other])
        torch = next(c for c in doc["platforms"][0]["changes"] if c["name"] == "pytorch")
        assert "channel" in torch["kinds"], other
        assert (torch["old"]["channel"], torch["new"]["channel"]) == ("pytorch", "conda-forge")
    code, doc = _json(capsys, [f, f, "--a-platform", "linux-64", "--b-platform", "osx-arm64"])
    torch = [c for c in doc["platforms"][0]["changes"] if c["name"] == "pytorch"]
    assert all("channel" not in c["kinds"] for c in torch)


def test_equal_inputs_exit_0(realworld: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = str(realworld / YI)
    assert run(["diff", f, f]) == 0
    assert "no differences" in capsys.readouterr().out


def test_text_and_markdown_output(realworld: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = str(realworld / "pixi" / "wang7x__pixi-pytorch-example__pixi.lock")
    assert run(["diff", f, f, "--a-environment", "cpu", "--b-environment", "gpu"]) == 1
    text = capsys.readouterr().out
    # the verdict first: two environments of one pixi.lock are compared as variants (#37), then the changes
    assert "CPU↔CUDA build flip" in text and re.match(r"environments cpu and gpu: .*; \d+ changes \(",
                                                        text.splitlines()[0])
    assert run(["diff", f, f, "--a-environment", "cpu", "--b-environment", "gpu", "--format", "markdown",
                "--exit-zero"]) == 0
    md = capsys.readouterr().out
    assert md.startswith("### envguard diff") and "| ⚠️ | **pytorch** |" in md


def test_environment_against_lock_reports_unsatisfied(realworld: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    env = tmp_path / "environment.yml"
    env.write_text("channels: [conda-forge]\ndependencies:\n  - python=3.12\n  - pytorch>=2.1=*cpu*  # [linux]\n"
                   "  - nonexistent-pkg\n")
    code, doc = _json(capsys, [str(env), str(realworld / CLAY), "--platform", "linux-64"])
    assert code == 1
    st = {c["spec"]["name"]: c["status"] for c in doc["spec_reports"][0]["checks"]}
    assert st == {"python": "unsatisfied", "pytorch": "unsatisfied", "nonexistent-pkg": "missing"}
    code, doc = _json(capsys, [str(env), str(realworld / CLAY), "--platform", "osx-arm64"])
    assert "pytorch" not in {c["spec"]["name"] for c in doc["spec_reports"][0]["checks"]}


def test_json_round_trips(realworld: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = str(realworld / LENSKIT)
    code, doc = _json(capsys, [f, f, "--a-platform", "win-64", "--b-platform", "linux-64"])
    assert DiffResult.from_dict(doc).to_dict() == doc


# --------------------------------------------------------------------------- errors and redaction


def test_malformed_side_exits_2_naming_the_side(realworld: Path, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "broken.yml"
    bad.write_text("package: [\n")
    assert run(["diff", str(realworld / YI), str(bad)]) == 2
    err = capsys.readouterr().err
    assert "side B" in err and "broken.yml" in err and "malformed YAML" in err and len(err.strip().splitlines()) == 1
    assert run(["diff", str(tmp_path / "missing.yml"), str(realworld / YI)]) == 2
    err = capsys.readouterr().err
    assert "side A" in err and "missing.yml" in err and "file not found" in err


@pytest.mark.parametrize("argv, match", [
    (["a", "b", "-n", "c"], "need two sides"),
    (["a", "b", "--platform", "linux-64", "--all-platforms"], "exclude each other"),
    (["a", "b", "--format", "xml"], "unknown format"),
])
def test_usage_errors(argv: list[str], match: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["diff", *argv]) == 2
    assert match in capsys.readouterr().err


def test_platform_not_in_side(realworld: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = str(realworld / YI)
    assert run(["diff", f, f, "--platform", "win-64"]) == 2
    err = capsys.readouterr().err
    assert "side A" in err and "no platform win-64" in err


def test_tokens_are_redacted_everywhere(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    token_url = "https://alice:s3cr3t@conda.example.com/t/tk-9a8b7c/private/linux-64"
    a = tmp_path / "a.txt"
    b = tmp_path / "b.txt"
    a.write_text(f"# platform: linux-64\n@EXPLICIT\n{token_url}/secretpkg-1.0-0.conda#{'1' * 32}\n")
    b.write_text(f"# platform: linux-64\n@EXPLICIT\n{token_url}/secretpkg-1.1-0.conda#{'2' * 32}\n"
                 f"# pip extra @ https://bob:pw123@pypi.example/extra-1.0-py3-none-any.whl#sha256={'3' * 64}\n")
    for fmt in ("text", "markdown", "json"):
        assert run(["diff", str(a), str(b), "--format", fmt]) == 1
        out = capsys.readouterr().out
        assert "secretpkg" in out
        for secret in ("s3cr3t", "tk-9a8b7c", "pw123", "alice", "bob"):
            assert secret not in out, (fmt, secret)


def test_exit_zero(realworld: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = str(realworld / CLAY)
    assert run(["diff", f, f, "--a-platform", "osx-64", "--b-platform", "osx-arm64", "--exit-zero"]) == 0


def test_named_prefix_side(realworld: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                           capsys: pytest.CaptureFixture[str]) -> None:
    from test_sources import _fake_prefix

    explicit = realworld / "explicit" / "conda__conda-lock__tests__zlib__conda-linux-64.lock"
    _fake_prefix(tmp_path / "envs" / "z", explicit)
    monkeypatch.setenv("ENVGUARD_ENVS_DIR", str(tmp_path / "envs"))
    from envguard.platforms import host_platform

    argv = [str(explicit), "-n", "z", "--a-platform", "linux-64", "--b-platform", host_platform()]
    assert run(["diff", *argv]) == 0
    assert run(["diff", str(explicit), "name:z", "--a-platform", "linux-64", "--b-platform", host_platform()]) == 0
    capsys.readouterr()


# --------------------------------------------------------------------------- real processes


def _envguard(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, COLUMNS="200")
    return subprocess.run([sys.executable, "-m", "envguard", "diff", *args], capture_output=True, text=True,
                          env=env, timeout=120)


@pytest.mark.slow
def test_subprocess_exit_codes(realworld: Path, tmp_path: Path) -> None:
    f = str(realworld / LENSKIT)
    p = _envguard(f, f, "--a-platform", "win-64", "--b-platform", "linux-64", "--format", "json")
    assert p.returncode == 1, p.stderr
    assert json.loads(p.stdout)["schema"] == "envguard.diff/1"
    bad = tmp_path / "bad.lock"
    bad.write_text("@EXPLICIT\nnot a url\n")
    p = _envguard(f, str(bad))
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.count("\n") == 1 and "side B" in p.stderr and "Traceback" not in p.stderr


def test_two_environment_files(realworld: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = str(realworld / "environment" / "FSadrieh__BERTchen__environment.yml")
    b = str(realworld / "environment" /
            "konstantinjdobler__tight-budget-llm-adaptation__helpers__main-exp-deps__environment.yml")
    code, doc = _json(capsys, [a, b, "--platform", "linux-64"])
    assert code == 1
    got = {c["key"]: (c["kinds"], c["old_spec"], c["new_spec"]) for c in doc["platforms"][0]["changes"]}
    assert got["torch"] == (["spec-changed"], "pytorch::pytorch =2.1.0", "pytorch-nightly::pytorch >=2.0")
    assert got["lightning"][0] == ["removed"] and got["bitsandbytes"][0] == ["added"]
    assert run(["diff", a, a]) == 0
    capsys.readouterr()


def test_check_report_against_prefix_and_lock(realworld: Path, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Two machines: a real `envguard check --format json` report against the prefix and its explicit lock."""
    from test_sources import _fake_prefix

    from envguard.platforms import host_platform

    explicit = realworld / "explicit" / "conda__conda-lock__tests__zlib__conda-linux-64.lock"
    prefix = _fake_prefix(tmp_path / "p", explicit)
    assert run(["check", "-p", str(prefix), "--no-smoke", "--format", "json"]) in (0, 1)
    report = tmp_path / "machine.json"
    report.write_text(capsys.readouterr().out)
    assert run(["diff", str(report), str(prefix)]) == 0
    assert run(["diff", str(report), str(explicit), "--a-platform", host_platform(), "--b-platform",
                "linux-64"]) == 0
    capsys.readouterr()
    (prefix / "conda-meta" / "zlib-1.2.11-h36c2ea0_1013.json").unlink()
    code, doc = _json(capsys, [str(report), str(prefix)])
    assert code == 1 and [(c["name"], c["kinds"]) for c in doc["platforms"][0]["changes"]] == [("zlib", ["removed"])]
