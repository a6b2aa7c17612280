"""The standalone probe script itself: run by path with a real interpreter, real DataLoaders."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envguard.smoke import probe_path

PROBE = probe_path()


def _run_probe(*args: str, env_extra: dict[str, str] | None = None, timeout: float = 120) -> tuple[dict, str]:
    import os

    env = dict(os.environ)
    env.update(env_extra or {})
    proc = subprocess.run([sys.executable, str(PROBE), *args], capture_output=True, text=True, env=env,
                          timeout=timeout, cwd=Path(PROBE).parent.parent.parent.parent)
    # Exactly one JSON document on stdout, nothing else.
    assert proc.stdout.count("\n") == 1, proc.stdout[:2000]
    return json.loads(proc.stdout), proc.stderr


def _checks(doc: dict) -> dict[str, dict]:
    return {c["name"]: c for c in doc["checks"]}


def test_probe_imports_only_stdlib_and_torch() -> None:
    stdlib = set(sys.stdlib_module_names)
    # multinode_probe.py sits beside the probe (its directory is sys.path[0] when run by path) and obeys the same rule
    siblings = {"multinode_probe"}
    allowed = stdlib | {"torch", "numpy", "threadpoolctl", "__future__"} | siblings
    for path in [PROBE] + [PROBE.parent / f"{name}.py" for name in sorted(siblings)]:
        seen = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                seen |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                seen.add(node.module.split(".")[0])
        assert "envguard" not in seen, path
        assert seen <= allowed, (path, seen - allowed)
    tree = ast.parse(PROBE.read_text())
    # A __main__ guard, and the worker-side definitions at module level (spawn re-imports by path).
    top = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    assert {"ProbeDataset", "worker_init", "dist_rank", "main"} <= top
    assert any(isinstance(n, ast.If) and "__main__" in ast.unparse(n.test) for n in tree.body)


@pytest.mark.slow
def test_probe_full_run_in_the_test_venv_without_envguard_importable(tmp_path: Path) -> None:
    """Every start method round-trips; a poisoned `envguard` package on the path proves it is never imported."""
    poison = tmp_path / "poison" / "envguard"
    poison.mkdir(parents=True)
    (poison / "__init__.py").write_text("raise ImportError('the probe must not import envguard')\n")
    import multiprocessing

    events = tmp_path / "ev.jsonl"
    doc, stderr = _run_probe("--dl-timeout", "60", "--events", str(events),
                             env_extra={"PYTHONPATH": str(poison.parent)})
    checks = _checks(doc)
    assert doc["ok"] is True, json.dumps(doc["checks"], indent=1)[:3000]
    assert checks["import-torch"]["status"] == "pass"
    assert checks["numpy-interop"]["status"] == "pass"
    methods = [m for m in ("fork", "forkserver", "spawn") if m in multiprocessing.get_all_start_methods()]
    for m in methods:
        c = checks[f"dataloader:{m}"]
        assert c["status"] == "pass", c
        assert c["detail"]["num_workers"] == 2 and c["detail"]["persistent_workers"] is True
        assert c["detail"]["prefetch_factor"] == 2 and c["detail"]["timeout"] == 60.0
        assert len(set(c["detail"]["worker_pids"])) == 2
        assert c["seconds"] > 0
    import torch

    assert doc["torch"]["version"] == torch.__version__
    assert doc["torch"]["cuda"] == torch.version.cuda
    if not torch.cuda.is_available():
        assert checks["pinned-memory"]["status"] == "not-exercised"
        assert doc["dataloader"]["pin_memory"] is False
    else:  # on a GPU host pinned memory is checked here too, not only in one skipped test
        assert checks["pinned-memory"]["status"] == "pass", checks["pinned-memory"]
        assert checks["pinned-memory"]["detail"]["pinned_gbps"] > 0
        assert doc["dataloader"]["pin_memory"] is True
    lim = doc["limits"]
    assert lim["nofile"]["soft"] > 0 and lim["sharing_strategy"] in ("file_descriptor", "file_system")
    if Path("/dev/shm").is_dir():
        assert lim["shm"]["free"] > 0 and lim["shm"]["need"] > 0
    assert "KMP_DUPLICATE_LIB_OK" in lim
    # the events file: the probe's pid first, every worker's pid, the phases up to "done"
    lines = [json.loads(x) for x in events.read_text().splitlines()]
    # and multiprocessing's pymp-* folder, for the runner to remove if the probe is killed (test_smoke_tmpdir.py)
    assert lines[0]["probe_pid"] == doc["pid"] and set(lines[0]) == {"probe_pid", "tmp"}
    assert os.path.basename(lines[0]["tmp"]).startswith("pymp-")
    sock = lim["af_unix"]  # multiprocessing's own Listener under the probe's TMPDIR
    assert sock["error"] is None and sock["tmpdir_bytes"] == len(os.fsencode(sock["tmpdir"]))
    worker_pids = {e["worker_pid"] for e in lines if "worker_pid" in e}
    assert worker_pids == {p for m in methods for p in checks[f"dataloader:{m}"]["detail"]["worker_pids"]}
    assert [e["phase"] for e in lines if "phase" in e][-1] == "done"


@pytest.mark.slow
def test_probe_rejects_unknown_injection() -> None:
    proc = subprocess.run([sys.executable, str(PROBE), "--inject", "nonsense"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2 and "unknown --inject" in proc.stderr


def test_probe_injection_from_the_environment_needs_the_testing_opt_in(monkeypatch) -> None:
    """A stray ENVGUARD_PROBE_INJECT in a user's shell injects nothing; the --inject flag always works."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("smoke_probe_under_test", PROBE)
    assert spec is not None and spec.loader is not None
    probe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(probe)
    monkeypatch.setenv("ENVGUARD_PROBE_INJECT", "killed,hang")
    monkeypatch.delenv("ENVGUARD_TESTING", raising=False)
    assert probe._parse([])["inject"] == []
    assert probe._parse(["--inject", "pickling"])["inject"] == ["pickling"]
    monkeypatch.setenv("ENVGUARD_TESTING", "1")
    assert probe._parse([])["inject"] == ["killed", "hang"]


def test_probe_ships_in_the_package() -> None:
    assert PROBE.name == "smoke_probe.py" and PROBE.is_file()
    assert (PROBE.parent / "__init__.py").is_file()
