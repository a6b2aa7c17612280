"""Driver facts, on a machine without an NVIDIA driver: a fake `nvidia-smi` (real subprocess), a fake
`pynvml`-compatible module injected into envguard.driver, and NVIDIA's real binding (nvidia-ml-py) loading a fake
libnvidia-ml built with the C compiler."""

from __future__ import annotations

import ctypes.util
import json
import os
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest
from support.require import importorskip, require

from envguard import driver
from envguard.driver import DriverInfo, from_nvml, get_driver_info


def _script(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


H200_SMI = """case "$1" in
  --query-gpu=driver_version,name,compute_cap) printf '570.86.15, NVIDIA H200, 9.0\\n570.86.15, NVIDIA H200, 9.0\\n' ;;
  "") echo "| NVIDIA-SMI 570.86.15   Driver Version: 570.86.15   CUDA Version: 12.8 |" ;;
  *) echo "unexpected: $*" >&2; exit 2 ;;
esac
"""

posix = pytest.mark.skipif(sys.platform == "win32", reason="shell-script fakes")


@posix
def test_fake_nvidia_smi_via_env_var(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    smi = _script(tmp_path / "nvidia-smi", H200_SMI)
    monkeypatch.setenv("ENVGUARD_NVIDIA_SMI", str(smi))
    info = get_driver_info()
    assert info == DriverInfo("570.86.15", "12.8", [("NVIDIA H200", "9.0"), ("NVIDIA H200", "9.0")], "nvidia-smi")
    assert info.to_dict()["gpus"] == [["NVIDIA H200", "9.0"], ["NVIDIA H200", "9.0"]]


@posix
def test_old_nvidia_smi_without_compute_cap_field(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    smi = _script(tmp_path / "nvidia-smi", """case "$1" in
  *compute_cap*) echo 'Field "compute_cap" is not a valid field to query.' ; exit 2 ;;
  --query-gpu=driver_version,name) echo "418.87.01, Tesla K80" ;;
  "") echo "| NVIDIA-SMI 418.87.01    Driver Version: 418.87.01    CUDA Version: 10.1 |" ;;
esac
""")
    monkeypatch.setenv("ENVGUARD_NVIDIA_SMI", str(smi))
    assert get_driver_info() == DriverInfo("418.87.01", "10.1", [("Tesla K80", "")], "nvidia-smi")


@posix
@pytest.mark.parametrize("body", [
    "echo \"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\"; exit 9\n",
    "echo 'No devices were found'; exit 6\n",
    "echo 'garbage'\n",
])
def test_nvidia_smi_without_a_driver_is_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> None:
    monkeypatch.setenv("ENVGUARD_NVIDIA_SMI", str(_script(tmp_path / "nvidia-smi", body)))
    assert get_driver_info() is None


def test_missing_or_empty_override_is_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENVGUARD_NVIDIA_SMI", str(tmp_path / "absent"))
    assert get_driver_info() is None
    monkeypatch.setenv("ENVGUARD_NVIDIA_SMI", "")
    assert get_driver_info() is None


@posix
def test_nvidia_smi_found_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    require(from_nvml() is None, "a real NVML answers first on this machine", allowed="gpu")
    _script(tmp_path / "bin" / "nvidia-smi", H200_SMI)
    monkeypatch.delenv("ENVGUARD_NVIDIA_SMI", raising=False)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
    info = get_driver_info()
    assert info is not None and info.driver_version == "570.86.15" and info.source == "nvidia-smi"
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert get_driver_info() is None


FAKE_NVML = r"""
#include <string.h>
static int inited = 0;
int nvmlInitWithFlags(unsigned int flags) { inited = 1; return 0; }
int nvmlInit_v2(void) { inited = 1; return 0; }
int nvmlShutdown(void) { inited = 0; return 0; }
int nvmlSystemGetDriverVersion(char *buf, unsigned int n) {
    if (!inited) return 1; strncpy(buf, "550.54.15", n); return 0; }
int nvmlSystemGetCudaDriverVersion_v2(int *v) { *v = 12040; return 0; }
int nvmlDeviceGetCount_v2(unsigned int *c) { *c = 2; return 0; }
int nvmlDeviceGetHandleByIndex_v2(unsigned int i, void **h) { *h = (void *)(long)(i + 1); return 0; }
int nvmlDeviceGetName(void *h, char *buf, unsigned int n) {
    strncpy(buf, (long)h == 1 ? "NVIDIA A100-SXM4-80GB" : "Tesla V100-SXM2-16GB", n); return 0; }
int nvmlDeviceGetCudaComputeCapability(void *h, int *major, int *minor) {
    if ((long)h == 1) { *major = 8; *minor = 0; } else { *major = 7; *minor = 0; } return 0; }
"""


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a Linux shared library")
@pytest.mark.requires(shutil.which("cc"), "needs a C compiler")
def test_nvidia_ml_py_with_a_fake_library(tmp_path: Path) -> None:
    """NVIDIA's real binding (pynvml from nvidia-ml-py) loads libnvidia-ml.so.1 by name: a fake one on
    LD_LIBRARY_PATH answers it, in a fresh interpreter (the loader reads LD_LIBRARY_PATH at start)."""
    importorskip("pynvml")
    src = tmp_path / "nvml.c"
    src.write_text(FAKE_NVML)
    lib = tmp_path / "libnvidia-ml.so.1"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True, timeout=60)
    script = tmp_path / "ask.py"
    script.write_text("import json\nfrom envguard.driver import from_nvml\n"
                      "info = from_nvml()\nprint(json.dumps(info.to_dict() if info else None))\n")
    env = dict(os.environ, LD_LIBRARY_PATH=str(tmp_path))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == DriverInfo(
        "550.54.15", "12.4", [("NVIDIA A100-SXM4-80GB", "8.0"), ("Tesla V100-SXM2-16GB", "7.0")], "nvml").to_dict()
    # without the library the same binding answers "no driver", not an exception; on a machine with a real
    # driver in the loader's cache, the real one answers instead
    env["LD_LIBRARY_PATH"] = str(tmp_path / "empty")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    if ctypes.util.find_library("nvidia-ml"):
        assert json.loads(proc.stdout)["driver_version"] != "550.54.15", proc.stdout
    else:
        assert proc.stdout.strip() == "null", proc.stdout


class _NVMLError(Exception):
    pass


def fake_pynvml(*, init_error: bool = False, driver: str | bytes = "575.51.03", cuda: int = 12090,
                gpus: list[tuple[str, tuple[int, int] | None]] | None = None, lost: set[int] | None = None,
                no_v2: bool = False) -> types.ModuleType:
    """A module with pynvml's functions and error class, recording the calls made to it."""
    gpus = [("NVIDIA GeForce RTX 5090", (12, 0)), ("NVIDIA H100 80GB HBM3", (9, 0))] if gpus is None else gpus
    mod = types.ModuleType("pynvml")
    mod.NVMLError = _NVMLError  # type: ignore[attr-defined]
    mod.calls = []  # type: ignore[attr-defined]

    def call(name: str, result=None, fail: bool = False):
        def fn(*args):
            mod.calls.append(name)  # type: ignore[attr-defined]
            if fail:
                raise _NVMLError(name)
            return result(*args) if callable(result) else result
        return fn

    mod.nvmlInit = call("nvmlInit", fail=init_error)  # type: ignore[attr-defined]
    mod.nvmlShutdown = call("nvmlShutdown")  # type: ignore[attr-defined]
    mod.nvmlSystemGetDriverVersion = call("nvmlSystemGetDriverVersion", driver)  # type: ignore[attr-defined]
    mod.nvmlSystemGetCudaDriverVersion_v2 = call("v2", cuda, fail=no_v2)  # type: ignore[attr-defined]
    mod.nvmlSystemGetCudaDriverVersion = call("v1", cuda)  # type: ignore[attr-defined]
    mod.nvmlDeviceGetCount = call("count", len(gpus))  # type: ignore[attr-defined]

    def handle(i: int) -> int:
        if i in (lost or set()):
            raise _NVMLError("GPU is lost")
        return i

    mod.nvmlDeviceGetHandleByIndex = call("handle", handle)  # type: ignore[attr-defined]
    mod.nvmlDeviceGetName = call("name", lambda h: gpus[h][0])  # type: ignore[attr-defined]

    def capability(h: int) -> tuple[int, int]:
        if gpus[h][1] is None:
            raise _NVMLError("not supported")
        return gpus[h][1]

    mod.nvmlDeviceGetCudaComputeCapability = call("cap", capability)  # type: ignore[attr-defined]
    return mod


def test_nvml_binding_facts_from_an_injected_module() -> None:
    nvml = fake_pynvml(driver=b"575.51.03")
    assert from_nvml(nvml) == DriverInfo("575.51.03", "12.9", [("NVIDIA GeForce RTX 5090", "12.0"),
                                                               ("NVIDIA H100 80GB HBM3", "9.0")], "nvml")
    assert nvml.calls[0] == "nvmlInit" and nvml.calls[-1] == "nvmlShutdown"
    # an older binding without the _v2 call, a lost GPU and one without a capability: the rest still counts
    nvml = fake_pynvml(no_v2=True, lost={1}, gpus=[("Tesla K80", None), ("lost", (9, 0)), ("NVIDIA A10", (8, 6))])
    assert from_nvml(nvml) == DriverInfo("575.51.03", "12.9", [("Tesla K80", ""), ("NVIDIA A10", "8.6")], "nvml")
    assert nvml.calls[-1] == "nvmlShutdown"


def test_no_driver_through_the_binding_falls_back_to_nvidia_smi(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """nvmlInit fails (no libnvidia-ml: NVML_ERROR_LIBRARY_NOT_FOUND) -> nvidia-smi on PATH answers; neither -> None.
    The same holds when nvidia-ml-py is not installed at all."""
    monkeypatch.delenv("ENVGUARD_NVIDIA_SMI", raising=False)
    failing = fake_pynvml(init_error=True)
    assert from_nvml(failing) is None and failing.calls == ["nvmlInit"]
    if sys.platform != "win32":
        _script(tmp_path / "bin" / "nvidia-smi", H200_SMI)
        monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
        info = get_driver_info(fake_pynvml(init_error=True))
        assert info is not None and info.source == "nvidia-smi" and info.gpus[0] == ("NVIDIA H200", "9.0")
        # NVML answering wins over nvidia-smi
        assert get_driver_info(fake_pynvml()).source == "nvml"
        monkeypatch.setattr(driver, "_import_nvml", lambda: None)  # nvidia-ml-py absent
        assert get_driver_info().source == "nvidia-smi"
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert get_driver_info(fake_pynvml(init_error=True)) is None
