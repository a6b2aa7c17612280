"""Driver facts: a fake `nvidia-smi` (real subprocess) and a fake libnvidia-ml built with the C compiler
(real ctypes calls), since this machine has no NVIDIA driver."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

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
    if from_nvml() is not None:
        pytest.skip("a real NVML answers first on this machine")
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


@pytest.mark.skipif(not shutil.which("cc") or not sys.platform.startswith("linux"), reason="needs a C compiler")
def test_nvml_through_ctypes_with_a_fake_library(tmp_path: Path) -> None:
    src = tmp_path / "nvml.c"
    src.write_text(FAKE_NVML)
    lib = tmp_path / "libnvidia-ml.so.1"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True, timeout=60)
    info = from_nvml(str(lib))
    assert info == DriverInfo("550.54.15", "12.4",
                              [("NVIDIA A100-SXM4-80GB", "8.0"), ("Tesla V100-SXM2-16GB", "7.0")], "nvml")


def test_nvml_absent_is_none() -> None:
    assert from_nvml("/nonexistent/libnvidia-ml.so.1") is None
    assert driver.SMI_ENV == "ENVGUARD_NVIDIA_SMI"
