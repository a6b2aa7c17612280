"""`envguard smoke` against real environments other than the test virtualenv: a conda prefix solved and
installed by rattler from the test channel (its python imports the real torch), and a plain virtualenv."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import pytest
from support import channels
from support.require import require

pytestmark = pytest.mark.slow  # smoke in an environment rattler installed


def _cli(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "envguard", "smoke", *args], capture_output=True, text=True,
                          env=dict(os.environ), timeout=timeout)


@pytest.fixture(scope="module")
def rattler_env(standard_channel: Any, host_python_pkg_available: bool, session_tmp: Path) -> Path:
    """``<ENVGUARD_ENVS_DIR>/smoke-rattler``: python + pytorch (cpu) + numpy, solved and installed by rattler."""
    require(host_python_pkg_available and standard_channel.real_torch_version is not None,
            "the test channel has no working python/torch for this platform")
    import rattler
    from rattler import BuildString, Channel, GenericVirtualPackage, MatchSpec, PackageName, Subdir, Version

    plat = channels.host_platform()
    virtual = [("__unix", "0")] + ([("__glibc", "2.35"), ("__linux", "6.1")] if plat.startswith("linux")
                                   else [("__osx", "14.0")])
    py = ".".join(standard_channel.python_version.split(".")[:2])
    records = channels.run(rattler.solve(
        [Channel(standard_channel.url)],
        [MatchSpec(s, strict=False) for s in (f"python={py}", "pytorch=2.13.0=cpu*", "numpy")],
        platforms=[Subdir(plat), Subdir("noarch")],
        virtual_packages=[GenericVirtualPackage(PackageName(n), Version(v), BuildString("0")) for n, v in virtual]))
    prefix = Path(os.environ["ENVGUARD_ENVS_DIR"]) / "smoke-rattler"
    channels.run(rattler.install(records, prefix, cache_dir=session_tmp / "cache" / "smoke-pkgs",
                                 show_progress=False, execute_link_scripts=False))
    assert (prefix / "conda-meta").is_dir()
    return prefix


def test_default_smoke_passes_in_a_rattler_env_by_name(rattler_env: Path) -> None:
    """All start methods: spawn/forkserver workers re-run <prefix>/bin/python and find torch there too."""
    p = _cli("-n", rattler_env.name, "--format", "json")
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr
    r = json.loads(p.stdout)
    assert r["python"] == str(rattler_env / "bin" / "python")
    probe = r["probe"]
    assert Path(probe["python"]["prefix"]) == rattler_env  # it really ran inside the prefix
    assert Path(probe["torch"]["file"]).resolve().is_file()
    statuses = {c["name"]: c["status"] for c in probe["checks"]}
    import multiprocessing

    for m in ("fork", "forkserver", "spawn"):
        if m in multiprocessing.get_all_start_methods():
            assert statuses[f"dataloader:{m}"] == "pass", probe["checks"]
    assert statuses["numpy-interop"] == "pass"


def test_quick_smoke_in_a_plain_virtualenv_by_prefix(tmp_path: Path) -> None:
    """A venv of its own (no envguard in it) that sees the real torch through a .pth file."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    purelib = Path(sysconfig.get_paths()["purelib"])  # where this test interpreter has torch
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "real_torch.pth").write_text(str(purelib) + "\n")
    p = _cli("-p", str(venv), "--quick", "--format", "json")
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr
    r = json.loads(p.stdout)
    assert r["exit_code"] == 0 and r["ok"] is True
    assert Path(r["probe"]["python"]["prefix"]) == venv
    codes = {f["code"] for f in r["findings"]}
    import torch

    if torch.cuda.is_available():  # pinned memory really exercised, and passed
        assert codes <= {"shm", "fd-limit"}, r["findings"]
        assert {c["name"]: c["status"] for c in r["probe"]["checks"]}["pinned-memory"] == "pass"
    else:  # no GPU: the probe must say pinned memory was not exercised, and why CUDA is missing
        assert {"pin-cpu", "cpu-build"} <= codes <= {"pin-cpu", "cpu-build", "shm", "fd-limit"}, r["findings"]
