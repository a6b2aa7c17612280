"""Pin the `envguard check --format json` schema (envguard.check/1) to docs/check-schema.md."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from support import channels, check_envs
from support.channels import HOST_PY

pytestmark = pytest.mark.slow  # its report comes from a real installed environment

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "check-schema.md"

# Changing any of these is a schema change: bump SCHEMA in envguard/check/__init__.py and the doc.
TOP = {
    "schema": str, "envguard_version": str, "prefix": str, "target": (str, type(None)), "platform": str, "kind": str,
    "python": (str, type(None)), "lockfile": (str, type(None)), "exit_code": int, "summary": dict, "counts": dict,
    "findings": list, "files": dict, "torch": (dict, type(None)), "gpu": (dict, type(None)),
    "import_origins": (dict, type(None)), "smoke": (dict, type(None)), "packages": list,
    "host": str, "lock_sha256": (str, type(None)), "distributed": (dict, type(None)), "node": dict,
    "variant": (dict, type(None)),
}
NODE = {"slurm_node": (str, type(None)), "job_id": (str, type(None)), "rank": (int, type(None))}
FINDING = {"code": str, "severity": str, "message": str, "fix": str, "file": (str, type(None)),
           "line": (int, type(None)), "package": (str, type(None))}
FILE_PROBLEM = {"path": str, "package": str, "problem": str, "expected": (str, type(None)),
                "actual": (str, type(None))}
TORCH = {"source": str, "version": (str, type(None)), "cuda": (str, type(None)), "cpu": bool, "arch_list": list,
         "evidence": str}
DISTRIBUTED = {"ok": bool, "launcher": str, "backend": (str, type(None)), "rank": int, "world_size": int,
               "local_rank": int, "host": str, "master": str, "stage": str, "case": (str, type(None)),
               "error": (str, type(None)), "rendezvous_s": (float, type(None)), "missing": list,
               "allreduce_ok": (bool, type(None)), "broadcast_ok": (bool, type(None)), "bandwidth": list}
PACKAGE = {"name": str, "version": str, "manager": str, "build": (str, type(None)), "channel": (str, type(None)),
           "sha256": (str, type(None)), "md5": (str, type(None)), "url": (str, type(None)),
           "platform": (str, type(None)), "depends": list}


def _shape(obj: dict, spec: dict, where: str) -> None:
    assert set(obj) == set(spec), f"{where}: keys {sorted(set(obj) ^ set(spec))} differ from the pinned schema"
    for k, t in spec.items():
        assert isinstance(obj[k], t), f"{where}.{k}: {type(obj[k]).__name__}"


@pytest.fixture
def report(channel_url: str, session_tmp: Path, tmp_path: Path) -> dict:
    """A report with every section filled: lock differences, file problems, pip over conda, imports."""
    prefix, records = check_envs.make_env(channel_url, [f"python {HOST_PY}.*", "pytorch 2.13.0 *cpu*", "pip", "egtool"],
                                          tmp_path / "env", session_tmp / "check-pkgs")
    lock = check_envs.write_lock(tmp_path / "conda-lock.yml", records)
    check_envs.pip_install(prefix, channels.build_wheel(tmp_path / "w", "torch", "2.13.1"))
    from envguard.check import CheckOptions, run_check

    rep = run_check(CheckOptions(prefix=prefix, lockfile=lock, files=True, smoke=False, imports=True,
                                 driver_info_fn=lambda: None, cwd=tmp_path))
    return json.loads(json.dumps(rep.to_json()))


def test_report_matches_pinned_schema(report: dict) -> None:
    _shape(report, TOP, "report")
    assert report["schema"] == "envguard.check/1"
    assert set(report["summary"]) == {"errors", "warnings", "info"}
    assert report["findings"] and report["files"]["problems"] and report["packages"]
    for f in report["findings"]:
        _shape(f, FINDING, "finding")
        assert f["severity"] in ("error", "warning", "info")
    assert set(report["files"]) == {"mode", "problems"} and report["files"]["mode"] == "size"
    for p in report["files"]["problems"]:
        _shape(p, FILE_PROBLEM, "file problem")
        assert p["problem"] in ("missing", "size", "sha256", "unreadable", "outside")
    _shape(report["torch"], TORCH, "torch")
    _shape(report["node"], NODE, "node")
    for p in report["packages"]:
        _shape(p, PACKAGE, "package")
        assert p["manager"] in ("conda", "pip")
    assert report["exit_code"] == 3 and report["summary"]["errors"] >= 4
    assert set(report["import_origins"]) == {"torch", "numpy"}


def test_doc_lists_every_field_and_code() -> None:
    doc = DOC.read_text(encoding="utf-8")
    for spec in (TOP, FINDING, FILE_PROBLEM, TORCH, PACKAGE, DISTRIBUTED, NODE):
        for key in spec:
            assert f"| `{key}` |" in doc, f"docs/check-schema.md does not document `{key}`"
    src = "".join(p.read_text() for p in sorted((REPO / "envguard" / "check").glob("*.py")))  # every rule module
    in_code = set(re.findall(r'"(EG5\d\d)"', src))
    in_doc = set(re.findall(r"^\| (EG5\d\d) \|", doc, re.M))
    assert in_code == in_doc, f"undocumented: {sorted(in_code - in_doc)}, stale: {sorted(in_doc - in_code)}"
    assert '"envguard.check/1"' in doc


def test_report_is_readable_by_diff(report: dict, tmp_path: Path) -> None:
    from envguard import sources

    path = tmp_path / "report.json"
    path.write_text(json.dumps(report))
    desc = sources.load(str(path))  # the diff's report reader has landed: no skip may hide a break
    pkgs = desc.packages_for(report["platform"])
    assert {(p.manager, p.name, p.version) for p in pkgs} == {
        (p["manager"], p["name"], p["version"]) for p in report["packages"]}


def test_distributed_result_matches_pinned_schema() -> None:
    """The `distributed` object of `check --distributed` (one rank of a launcher's world), from probe documents of a
    rank that passed and of one whose peer never came (tests/test_distributed.py runs the real thing)."""
    from envguard.smoke import distributed_summary

    world = {"mode": "launcher", "launcher": "slurm", "backend": "gloo", "rank": 0, "world_size": 2, "local_rank": 0,
             "host": "node07", "master": "node07:29500"}
    ok = {"checks": [{"name": "distributed", "status": "pass"}],
          "distributed": {**world, "stage": "done", "rendezvous_s": 0.25, "allreduce": {"ok": True},
                          "broadcast": {"ok": True},
                          "bandwidth": [{"bytes": 4096, "seconds": 0.001, "algbw_gbps": 0.004, "busbw_gbps": 0.004,
                                         "reps": 3}]}}
    failed = {"checks": [{"name": "distributed", "status": "fail", "error": "1 of 2 ranks did not join ..."}],
              "distributed": {**world, "stage": "join", "missing": [{"rank": 1, "host": "node08"}]}}
    for doc in (ok, failed):
        d = distributed_summary(doc)
        _shape(d, DISTRIBUTED, "distributed")
        for row in d["bandwidth"]:
            assert set(row) == {"bytes", "seconds", "algbw_gbps", "busbw_gbps"}
    assert distributed_summary(failed)["case"] == "rendezvous"
    assert distributed_summary({"distributed": {"world_size": 2, "results": []}}) is None  # the local pair


def test_node_identity_comes_from_the_launchers_variables() -> None:
    """What fleet names a node by: Slurm's node name, the job and the rank, whatever the report file is called."""
    from envguard.check.node import node_identity

    slurm = {"SLURMD_NODENAME": "gpu017", "SLURM_JOB_ID": "4242", "SLURM_PROCID": "3"}
    assert node_identity(slurm) == {"slurm_node": "gpu017", "job_id": "4242", "rank": 3}
    _shape(node_identity(slurm), NODE, "node")
    assert node_identity({**slurm, "RANK": "11"})["rank"] == 11  # torchrun's global rank under srun
    assert node_identity({}) == {"slurm_node": None, "job_id": None, "rank": None}
    assert node_identity({"RANK": "x"})["rank"] is None
