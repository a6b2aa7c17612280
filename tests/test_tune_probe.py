"""The standalone tuning probe itself: usable CPUs from affinity and cgroup quotas (fake cgroup trees),
and a trial in a fresh interpreter (the isolation used where fork is not), run by path for real."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envguard.tune.runner import probe_path

DATASETS = Path(__file__).resolve().parent / "support"  # tune_datasets.py


@pytest.fixture(scope="module")
def probe():  # the probe file as a module, loaded by path the way its interpreter would
    spec = importlib.util.spec_from_file_location("tune_probe_under_test", probe_path())
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def host(probe):  # the probe's sibling with the host facts, imported the way the probe imports it
    import tune_probe_host  # the probe put its own directory on sys.path

    return tune_probe_host


def test_the_probe_and_its_siblings_import_only_stdlib_and_torch() -> None:
    """Every part of the probe runs in the target interpreter, where envguard is not installed."""
    parts = sorted(probe_path().parent.glob("tune_probe*.py"))
    siblings = {p.stem for p in parts}
    allowed = set(sys.stdlib_module_names) | {"torch", "__future__"} | siblings
    assert probe_path() in parts and len(parts) > 1
    for path in parts:
        seen = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                seen |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                seen.add(node.module.split(".")[0])
        assert seen <= allowed, (path, seen - allowed)


def _tree(root: Path, files: dict[str, str]) -> str:
    for rel, text in files.items():
        p = root / rel.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return str(root)


def test_cgroup_v2_quota_is_the_tightest_ancestor(host, tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "/proc/self/cgroup": "0::/kubepods/pod1/ctr\n",
        "/proc/self/mountinfo": "30 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n",
        "/sys/fs/cgroup/kubepods/cpu.max": "max 100000\n",
        "/sys/fs/cgroup/kubepods/pod1/cpu.max": "150000 100000\n",
        "/sys/fs/cgroup/kubepods/pod1/ctr/cpu.max": "max 100000\n",
    })
    assert host.cgroup_cpu_quota(root) == (1.5, "/sys/fs/cgroup/kubepods/pod1/cpu.max")
    cpus = host.usable_cpus(root)
    assert cpus["cgroup_quota"] == 1.5
    assert cpus["usable"] == min(1.5, float(cpus["affinity"] or cpus["cpu_count"]))


def test_cgroup_v1_in_a_container_with_its_own_mount_root(host, tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "/proc/self/cgroup": "11:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n",
        "/proc/self/mountinfo": "41 31 0:38 /docker/abc /sys/fs/cgroup/cpu,cpuacct ro - cgroup cgroup rw,cpu,cpuacct\n"
                                "42 31 0:39 /docker/abc /sys/fs/cgroup/memory ro - cgroup cgroup rw,memory\n",
        "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us": "50000\n",
        "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": "100000\n",
    })
    assert host.cgroup_cpu_quota(root) == (0.5, "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us")
    assert host.usable_cpus(root)["usable"] == 0.5 and host.usable_cpus(root)["limited_by"] == "cgroup"


def test_no_quota_means_affinity(host, tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "/proc/self/cgroup": "4:cpu,cpuacct:/\n0::/\n",
        "/proc/self/mountinfo": "32 31 0:29 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n"
                                "41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n",
        "/sys/fs/cgroup/cpu/cpu.cfs_quota_us": "-1\n",
        "/sys/fs/cgroup/cpu/cpu.cfs_period_us": "100000\n",
    })
    assert host.cgroup_cpu_quota(root) == (None, None)
    cpus = host.usable_cpus(root)
    if hasattr(os, "sched_getaffinity"):
        assert cpus["usable"] == len(os.sched_getaffinity(0)) and cpus["affinity"] == len(os.sched_getaffinity(0))


@pytest.mark.slow
def test_a_trial_in_a_fresh_interpreter(tmp_path: Path) -> None:
    """--isolation exec (the path for platforms without a safe fork): the serving probe runs the trial as
    `tune_probe.py --one-trial` in a new interpreter; the answer is the same JSON as a forked trial's."""
    req = {"op": "trial", "id": 1, "settings": {"num_workers": 1, "prefetch_factor": 2, "persistent_workers": True,
                                                "pin_memory": False, "multiprocessing_context": "fork"},
           "samples": 16, "limit_s": 120, "dl_timeout": 60}
    p = subprocess.run([sys.executable, str(probe_path()), "--serve", "--dataset", "tune_datasets:tiny",
                        "--path", str(DATASETS), "--batch-size", "8", "--isolation", "exec", "--h2d", "cpu",
                        "--workdir", str(tmp_path)],
                       input=json.dumps(req) + "\n", capture_output=True, text=True, timeout=180, cwd=tmp_path)
    lines = [json.loads(line) for line in p.stdout.splitlines()]
    assert p.returncode == 0 and [d["type"] for d in lines] == ["inspect", "trial"], p.stderr[-2000:]
    inspect, trial = lines
    assert inspect["isolation"] == "exec" and inspect["dataset"]["length"] == 48
    assert trial["status"] == "ok" and trial["samples"] == 16 and trial["batches"] == 2, trial
    assert trial["pid"] != inspect["pid"] and trial["epoch_samples"] == 48 and trial["h2d"]["batches"] == 2


@pytest.mark.parametrize("factory, stage, words", [
    ("empty", "empty", "length 0"),
    ("not_a_dataset", "dataset", "not a Dataset"),
    ("broken", "factory", "cannot open /data/train.tar"),
    ("no_such_factory", "factory", "no_such_factory"),
])
def test_what_the_factory_returns_is_checked(probe, factory: str, stage: str, words: str) -> None:
    """The probe's own loading and checks, in this process (the end-to-end runs are in test_tune.py)."""
    from envguard.tune.report import inspect_error

    with pytest.raises(probe._Stage) as e:
        probe.describe(probe.load_user(f"tune_datasets:{factory}", False, str(DATASETS)))
    assert e.value.stage == stage and words in probe._err(e.value.error)
    finding = inspect_error({"stage": e.value.stage, "error": probe._err(e.value.error)})
    assert finding.code == {"empty": "dataset-empty"}.get(stage, "dataset-factory") and words in finding.message


def test_unpicklable_datasets_are_found_before_any_worker_starts(probe) -> None:
    user = probe.load_user("tune_datasets:flaky", False, str(DATASETS))
    info = probe.describe(user)
    assert info["picklable"] is False and "lambda" in info["pickle_error"] and info["collate_fn"] == "flaky.<locals>.<lambda>"
    ok = probe.describe(probe.load_user("tune_datasets:tiny", False, str(DATASETS)))
    assert ok["picklable"] is True and ok["pickled_bytes"] > 0 and ok["length"] == 48 and ok["kind"] == "map"
