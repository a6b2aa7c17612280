"""`envguard fleet` over reports from real `envguard check` runs on real environments (built by rattler
from the test channels), multiplied to hundreds of nodes with varied host names."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support import channels, check_envs
from support.channels import HOST_PY
from support.lanes import builds_environment

from envguard.fleet.hosts import compress

BASE = [f"python {HOST_PY}.*", "pytorch 2.13.0 *cpu*", "pip", "egtool", "eglink"]
ENVGUARD = [sys.executable, "-m", "envguard"]


def fleet(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ENVGUARD, "fleet", *args], capture_output=True, text=True, timeout=120)


def fleet_json(*args: str) -> tuple[int, dict[str, Any], str]:
    proc = fleet(*args, "--format", "json")
    return proc.returncode, json.loads(proc.stdout), proc.stderr


@pytest.fixture(scope="module")
@builds_environment
def real(channel_url: str, session_tmp: Path, tmp_path_factory) -> dict[str, Any]:
    """Four environments, each checked for real: a clean CPU env, the same with torch pip-installed over
    conda's, one built from another lock (pytorch 2.12.0), and conda's Python with torch from pip alone."""
    root = tmp_path_factory.mktemp("fleet")
    cache = session_tmp / "check-pkgs"
    (root / "lock-a").mkdir()
    (root / "lock-c").mkdir()
    a, rec_a = check_envs.make_env(channel_url, BASE, root / "a", cache)
    lock_a = check_envs.write_lock(root / "lock-a" / "conda-lock.yml", rec_a)
    b, _ = check_envs.make_env(channel_url, BASE, root / "b", cache)
    check_envs.pip_install(b, channels.build_wheel(root / "wheels", "torch", "2.13.1"))
    c, rec_c = check_envs.make_env(channel_url,
                                   [f"python {HOST_PY}.*", "pytorch 2.12.0 *cpu*", "pip", "egtool", "eglink"],
                                   root / "c", cache)
    lock_c = check_envs.write_lock(root / "lock-c" / "conda-lock.yml", rec_c)
    d, _ = check_envs.make_env(channel_url, [f"python {HOST_PY}.*", "pip"], root / "d", cache)
    check_envs.pip_install(d, channels.build_wheel(root / "wheels-d", "torch", "2.13.0"))
    reports: dict[str, tuple[int, dict[str, Any]]] = {}
    for name, prefix, lock in (("a", a, lock_a), ("b", b, lock_a), ("c", c, lock_c), ("d", d, lock_a)):
        proc = check_envs.envguard("check", "-p", str(prefix), "--lockfile", str(lock), "--no-smoke",
                                   "--format", "json")
        reports[name] = (proc.returncode, json.loads(proc.stdout))
    return {"reports": reports, "lock_a": lock_a, "lock_c": lock_c}


def write_nodes(directory: Path, report: dict[str, Any], hosts: list[str]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for h in hosts:
        (directory / f"{h}.json").write_text(json.dumps({**report, "host": h}))


def gpu(numbers: list[int]) -> list[str]:
    return [f"gpu{n:03d}" for n in numbers]


B_NODES = [17, 101, 102, 103, 104, 105]
A_NODES = [n for n in range(1, 251) if n not in B_NODES]


def test_the_real_reports_are_what_the_fleet_test_assumes(real: dict[str, Any]) -> None:
    (rc_a, a), (rc_b, b), (rc_c, c) = (real["reports"][k] for k in "abc")
    assert rc_a == 0 and rc_c == 0 and rc_b == 1
    assert {"EG521", "EG522"} <= {f["code"] for f in b["findings"]}
    assert a["lock_sha256"] == b["lock_sha256"] != c["lock_sha256"]
    assert a["host"] and a["distributed"] is None
    # a torch stack from pip alone on conda's Python: check's info line, not pip over conda
    d = real["reports"]["d"][1]
    assert ("EG520", "info", "torch") in {(f["code"], f["severity"], f["package"]) for f in d["findings"]}
    assert not {"EG521", "EG522"} & {f["code"] for f in d["findings"]}


def test_hundreds_of_nodes_groups_ranges_and_exit_codes(real: dict[str, Any], tmp_path: Path) -> None:
    (_, a), (_, b), (_, c) = (real["reports"][k] for k in "abc")
    d = tmp_path / "reports"
    write_nodes(d, a, gpu(A_NODES))
    write_nodes(d, b, gpu(B_NODES))
    write_nodes(d, c, [f"a100-rack2-n{i}" for i in (1, 2, 3)])
    text = json.dumps(a)
    (d / "gpu251.json").write_text(text[: len(text) // 2])  # cut off mid-write
    (d / "notes.json").write_text("[1, 2, 3]")
    (d / "gpu252.json").write_text("")  # `check > gpu252.json` that exited 2 before writing a report

    rc, doc, err = fleet_json(str(d), "--lockfile", str(real["lock_a"]))
    assert rc == 2  # unreadable reports are named, and the rest is still read
    assert {Path(u["path"]).name for u in doc["unreadable"]} == {"gpu251.json", "gpu252.json", "notes.json"}
    assert "gpu251.json" in err and "not JSON" in err and "notes.json" in err
    assert "gpu252.json: empty: the check on this node wrote no report" in err
    assert doc["nodes"] == 253 and doc["matching"] == 244
    groups = [(g["reference"], g["nodes"], g["count"]) for g in doc["groups"]]
    assert groups == [(True, "gpu[001-016,018-100,106-250]", 244), (False, "gpu[017,101-105]", 6),
                      (False, "a100-rack2-n[1-3]", 3)]
    ref, pip_group, other_lock = doc["groups"]
    assert ref["facts"]["torch"] == {"version": "2.13.0", "cuda": None, "cpu": True} and ref["changes"] == []
    # pip over conda: named as a fact, the findings, and the package change in diff's classes
    assert pip_group["facts"]["pip_over_conda"] == ["torch"]
    assert ("pip over conda", "none", "torch") in {(f["fact"], f["reference"], f["group"])
                                                    for f in pip_group["fact_changes"]}
    torch_change = next(ch for ch in pip_group["changes"] if ch["key"] == "torch")
    assert torch_change["new"]["manager"] == "pip" and torch_change["new"]["version"] == "2.13.1"
    assert {"EG521", "EG522"} <= {f["code"] for f in pip_group["findings"]}
    assert pip_group["exit_codes"] == [1]
    # another lock: the lock and torch differ, torch is a downgrade against the reference lock
    facts = {f["fact"] for f in other_lock["fact_changes"]}
    assert {"lock", "torch"} <= facts
    torch_change = next(ch for ch in other_lock["changes"] if ch["key"] == "torch")
    assert torch_change["kinds"] == ["downgraded"] and torch_change["new"]["version"] == "2.12.0"

    for name in ("gpu251.json", "gpu252.json", "notes.json"):
        (d / name).unlink()
    rc, doc, _ = fleet_json(str(d), "--lockfile", str(real["lock_a"]))
    assert rc == 1 and doc["unreadable"] == []
    # without a lock the majority is the reference: the same verdict here
    rc, doc, _ = fleet_json(str(d))
    assert rc == 1 and doc["reference"] == "majority" and doc["groups"][0]["nodes"] == "gpu[001-016,018-100,106-250]"

    for f in d.iterdir():
        if not f.name.startswith("gpu") or int(f.stem[3:]) in B_NODES:
            f.unlink()
    rc, doc, _ = fleet_json(str(d), "--lockfile", str(real["lock_a"]))
    assert rc == 0 and doc["matching"] == doc["nodes"] == 244 and len(doc["groups"]) == 1
    text = fleet(str(d))
    assert text.returncode == 0 and "244 of 244 nodes match the majority" in text.stdout


def test_text_and_markdown_name_the_groups(real: dict[str, Any], tmp_path: Path) -> None:
    (_, a), (_, b), (_, d) = real["reports"]["a"], real["reports"]["b"], real["reports"]["d"]
    write_nodes(tmp_path, a, gpu(list(range(1, 21))))
    write_nodes(tmp_path, b, gpu([21, 23]))
    write_nodes(tmp_path, d, gpu([30]))
    md = fleet(str(tmp_path), "--format", "markdown")
    assert md.returncode == 1
    assert "`gpu[001-020]` | 20 |" in md.stdout and "#### Group 2: 2 nodes `gpu[021,023]`" in md.stdout
    assert "#### Group 3: 1 node `gpu030`" in md.stdout
    assert "| pip over conda | differs | none | torch |" in md.stdout and "**EG521**" in md.stdout
    assert md.stdout.count("| pip over conda |") == 1  # gpu030's torch from pip alone is not pip over conda
    text = fleet(*(str(p) for p in sorted(tmp_path.glob("*.json"))))  # files instead of a directory
    assert text.returncode == 1
    assert "gpu[021,023]" in text.stdout and "20 of 23 nodes match the majority" in text.stdout


def test_a_torch_stack_from_pip_alone_is_not_pip_over_conda(real: dict[str, Any], tmp_path: Path) -> None:
    """check calls torch from pip alone on conda's Python a supported layout (an info EG520): fleet groups it
    apart (it is not what the lock holds) but does not call it pip over conda, as it does torch installed by
    pip over conda's own."""
    write_nodes(tmp_path, real["reports"]["a"][1], gpu([1, 2, 3]))
    write_nodes(tmp_path, real["reports"]["b"][1], gpu([4]))
    write_nodes(tmp_path, real["reports"]["d"][1], gpu([5]))
    rc, doc, _ = fleet_json(str(tmp_path), "--lockfile", str(real["lock_a"]))
    assert rc == 1
    groups = {g["nodes"]: g for g in doc["groups"]}
    over, alone = groups["gpu004"], groups["gpu005"]
    assert over["facts"]["pip_over_conda"] == ["torch"] and alone["facts"]["pip_over_conda"] == []
    assert "pip over conda" not in {f["fact"] for f in alone["fact_changes"]}
    moved = next(ch for ch in alone["changes"] if ch["key"] == "torch")
    assert moved["old"]["manager"] == "conda" and moved["new"]["manager"] == "pip"


def test_a_lock_nobody_matches(real: dict[str, Any], tmp_path: Path) -> None:
    write_nodes(tmp_path, real["reports"]["a"][1], gpu([1, 2, 3]))
    rc, doc, _ = fleet_json(str(tmp_path), "--lockfile", str(real["lock_c"]))
    assert rc == 1 and doc["matching"] == 0 and doc["groups"][0]["reference"] is False
    torch_change = next(ch for ch in doc["groups"][0]["changes"] if ch["key"] == "torch")
    assert torch_change["kinds"] == ["upgraded"]  # 2.12.0 locked, 2.13.0 installed


@pytest.mark.slow
def test_nothing_readable_is_one_line_exit_2(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text("{not json")
    if hasattr(os, "mkfifo"):
        os.mkfifo(tmp_path / "pipe.json")  # a special file is named, never opened (it would block)
    proc = fleet(str(tmp_path), str(tmp_path / "missing.json"))
    assert proc.returncode == 2 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "no readable envguard check report" in lines[0] and "a.json" in lines[0]
    assert "Traceback" not in proc.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = fleet(str(empty))
    assert proc.returncode == 2 and "no *.json reports in this directory" in proc.stderr


@pytest.mark.parametrize("names, expected", [
    (gpu(list(range(1, 18)) + [20]), "gpu[001-017,020]"),
    (["node1", "node2", "node10", "login"], "login,node[1-2,10]"),
    (["gpu098", "gpu099", "gpu100"], "gpu[098-100]"),
    (["r1-n05.cluster", "r1-n06.cluster", "r2-n01.cluster"], "r1-n[05-06].cluster,r2-n01.cluster"),
    (["solo", "solo"], "solo"),
])
def test_host_ranges(names: list[str], expected: str) -> None:
    assert compress(names) == expected


@pytest.mark.slow
def test_each_platform_is_compared_with_its_own_part_of_the_lock(channel_url: str,
                                                                 tmp_path: Path) -> None:
    """A fleet of two architectures under one lock: a node matches when it installed the lock's packages for
    its own platform. The linux node is built from the lock and checked for real; the other platform's node
    reports exactly what the lock holds for it (no machine of that platform here)."""
    from support.create_fixtures import write_env

    from envguard import sources
    from envguard.lock import lock

    host, other = channels.host_platform(), ("osx-arm64" if channels.host_platform() != "osx-arm64" else "linux-64")
    spec = write_env(tmp_path / "proj", channel_url, [f"python={HOST_PY}", "pytorch=2.13.0=cpu*", "pip", "egtool"])
    lockfile = Path(lock([spec], platforms=[host, other]).lockfile)
    proc = check_envs.envguard("create", "-p", str(tmp_path / "env"), "--lockfile", str(lockfile), "--no-check",
                               "-q")
    assert proc.returncode == 0, proc.stderr
    proc = check_envs.envguard("check", "-p", str(tmp_path / "env"), "--lockfile", str(lockfile), "--no-smoke",
                               "--format", "json")
    assert proc.returncode == 0, proc.stdout
    here = json.loads(proc.stdout)
    theirs = {**here, "platform": other,
              "packages": [p.to_dict() for p in sources.load(str(lockfile)).packages_for(other)]}
    assert {p["url"] for p in theirs["packages"]} != {p["url"] for p in here["packages"]}  # other builds
    reports = tmp_path / "reports"
    write_nodes(reports, here, gpu([1, 2, 3]))
    write_nodes(reports, theirs, [f"arm{n:02d}" for n in (1, 2)])

    rc, doc, _ = fleet_json(str(reports), "--lockfile", str(lockfile))
    assert rc == 0 and doc["matching"] == doc["nodes"] == 5, doc["summary"]
    assert sorted((g["nodes"], g["reference"]) for g in doc["groups"]) == [("arm[01-02]", True),
                                                                           ("gpu[001-003]", True)]
    rc, doc, _ = fleet_json(str(reports))
    assert rc == 0 and doc["summary"] == "5 of 5 nodes match the majority of their platform"

    # a node of the other platform with another numpy: that one change, against its own platform's builds
    numpy = next(p for p in theirs["packages"] if p["name"] == "numpy")
    changed = {**theirs, "packages": [p for p in theirs["packages"] if p is not numpy]
               + [{**numpy, "version": "1.26.4", "build": "py311_h0_0", "sha256": "1" * 64, "md5": None,
                   "url": numpy["url"].replace(numpy["version"], "1.26.4")}]}
    write_nodes(reports, changed, ["arm03"])
    rc, doc, _ = fleet_json(str(reports), "--lockfile", str(lockfile))
    assert rc == 1 and doc["matching"] == 5
    odd = next(g for g in doc["groups"] if not g["reference"])
    assert odd["nodes"] == "arm03" and [c["key"] for c in odd["changes"]] == ["numpy"]
    assert odd["fact_changes"] == []  # compared with the reference of its own platform


def test_text_reads_in_a_log_verdict_first_findings_grouped_by_code(real: dict[str, Any], tmp_path: Path) -> None:
    """Three reports, one with 88 findings: the verdict is the second line, each group one line, the 88
    findings one line per code with their count; every line fits 80 columns when COLUMNS says so, and stays
    short in a log that has no width."""
    (_, a), (_, b), (_, c) = real["reports"]["a"], real["reports"]["b"], real["reports"]["c"]
    warning = next(f for f in b["findings"] if f["severity"] in ("warning", "error"))
    many = {**b, "findings": b["findings"] + [dict(warning, package=f"pkg{i}") for i in range(88)]}
    write_nodes(tmp_path, a, ["node1"])
    write_nodes(tmp_path, many, ["node2"])
    write_nodes(tmp_path, c, ["node3"])
    for columns, limit in (("80", 80), (None, 400)):
        env = {k: v for k, v in os.environ.items() if k != "COLUMNS"} | ({"COLUMNS": columns} if columns else {})
        proc = subprocess.run([*ENVGUARD, "fleet", str(tmp_path)], capture_output=True, text=True, timeout=120,
                              env=env, check=False)
        lines = proc.stdout.splitlines()
        assert max(len(ln) for ln in lines) <= limit, max(lines, key=len)
        assert lines[0].startswith("envguard fleet · 3 nodes") and "of 3 nodes match" in lines[1], lines[:3]
        assert len(lines) < 40, proc.stdout
        assert f"{warning['code']} {warning['severity']} ×" in proc.stdout, proc.stdout
    detailed = fleet(str(tmp_path), "--details")
    assert detailed.stdout.count(warning["code"]) > 88


def _as_node(report: dict[str, Any], host: str, slurm_node: str | None, job: str | None, rank: int | None,
             world: int | None = None) -> dict[str, Any]:
    """A real report as that node of a job would have written it (check --distributed, ok)."""
    dist = None if world is None else {"ok": True, "launcher": "slurm", "backend": "gloo", "rank": rank,
                                       "world_size": world, "host": host, "missing": [], "bandwidth": []}
    return {**report, "host": host, "node": {"slurm_node": slurm_node, "job_id": job, "rank": rank},
            "distributed": dist}


def test_nodes_are_named_by_the_identity_inside_their_reports(real: dict[str, Any], tmp_path: Path) -> None:
    """Three Slurm nodes of one host: named by their Slurm node names, whatever the report files are called."""
    (_, a) = real["reports"]["a"]
    d = tmp_path / "reports"
    d.mkdir()
    for rank, node in enumerate(("n1", "n2", "n3")):
        (d / f"report-{rank}.json").write_text(json.dumps(_as_node(a, "vm", node, "7", rank, world=3)))
    rc, doc, _ = fleet_json(str(d), "--lockfile", str(real["lock_a"]))
    assert rc == 0 and doc["identity"] == [] and doc["counts"]["identity_problems"] == 0
    assert [(g["nodes"], g["count"]) for g in doc["groups"]] == [("n[1-3]", 3)]


def test_two_reports_of_one_node_are_flagged(real: dict[str, Any], tmp_path: Path) -> None:
    """Cloned machines, or one node's report copied: the same job, Slurm node, host and rank twice."""
    (_, a) = real["reports"]["a"]
    d = tmp_path / "reports"
    d.mkdir()
    (d / "gpu001.json").write_text(json.dumps(_as_node(a, "gpu001", "gpu001", "7", 0)))
    (d / "gpu001-again.json").write_text(json.dumps(_as_node(a, "gpu001", "gpu001", "7", 0)))
    (d / "gpu002.json").write_text(json.dumps(_as_node(a, "gpu002", "gpu002", "7", 1)))
    rc, doc, _ = fleet_json(str(d), "--lockfile", str(real["lock_a"]))
    assert rc == 1 and doc["counts"]["identity_problems"] == 1, doc["identity"]
    (dup,) = doc["identity"]
    assert dup["problem"] == "duplicate" and [Path(p).name for p in dup["reports"]] == ["gpu001-again.json",
                                                                                       "gpu001.json"]
    assert "2 reports come from one node (node gpu001, job 7, rank 0)" in dup["message"]
    assert "reported twice" in doc["summary"]
    text = fleet(str(d), "--lockfile", str(real["lock_a"]))
    assert text.returncode == 1 and "duplicate: 2 reports come from one node" in text.stdout
    # the same host name on two Slurm nodes (or two ranks of one node) is two nodes, not a duplicate
    (d / "gpu001-again.json").write_text(json.dumps(_as_node(a, "gpu001", "gpu003", "7", 2)))
    rc, doc, _ = fleet_json(str(d), "--lockfile", str(real["lock_a"]))
    assert rc == 0 and doc["identity"] == [], doc["identity"]


def test_a_world_larger_than_the_reports_is_flagged(real: dict[str, Any], tmp_path: Path) -> None:
    """Two nodes of one host that both wrote `$(hostname).json`: one report left for a world of two ranks."""
    (_, a) = real["reports"]["a"]
    d = tmp_path / "reports"
    d.mkdir()
    (d / "vm.json").write_text(json.dumps(_as_node(a, "vm", None, "9", 1, world=2)))
    rc, doc, _ = fleet_json(str(d), "--lockfile", str(real["lock_a"]))
    assert rc == 1 and [p["problem"] for p in doc["identity"]] == ["world-size"], doc
    assert "a world of 2 ranks, but 1 report of it was read" in doc["identity"][0]["message"]
    assert "the distributed world size is not the number of reports" in doc["summary"]
    md = fleet(str(d), "--lockfile", str(real["lock_a"]), "--format", "markdown")
    assert md.returncode == 1 and "#### Reports and nodes" in md.stdout and "a world of 2 ranks" in md.stdout
