"""Facts about the host's NVIDIA driver and GPUs.

One entry point, :func:`get_driver_info`: NVML through ctypes when
``libnvidia-ml`` loads, else ``nvidia-smi`` from PATH. ``ENVGUARD_NVIDIA_SMI``
names a specific ``nvidia-smi`` executable and then NVML is not consulted, so
tests (and users with an odd install) get exactly the answer of that program.
A missing driver is ``None``, never an exception.
"""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field

SMI_ENV = "ENVGUARD_NVIDIA_SMI"
_SMI_TIMEOUT = 15.0


@dataclass(frozen=True)
class DriverInfo:
    driver_version: str  # "550.54.15"
    cuda_driver_version: str | None  # the newest CUDA this driver supports, "12.4", when known
    gpus: list[tuple[str, str]] = field(default_factory=list)  # (name, capability "9.0" or "")
    source: str = "nvml"  # "nvml" | "nvidia-smi"

    def to_dict(self) -> dict:
        return {"driver_version": self.driver_version, "cuda_driver_version": self.cuda_driver_version,
                "gpus": [list(g) for g in self.gpus], "source": self.source}


def get_driver_info() -> DriverInfo | None:
    """The driver's version, its CUDA level and the GPUs; None when there is no driver."""
    smi = os.environ.get(SMI_ENV)
    if smi is not None:
        return from_nvidia_smi(smi) if smi else None
    info = from_nvml()
    if info is not None:
        return info
    found = shutil.which("nvidia-smi")
    return from_nvidia_smi(found) if found else None


# ---------------------------------------------------------------- NVML


def _nvml_names() -> list[str]:
    if sys.platform == "win32":
        base = os.environ.get("ProgramFiles", r"C:\Program Files")
        return ["nvml.dll", os.path.join(base, "NVIDIA Corporation", "NVSMI", "nvml.dll")]
    return ["libnvidia-ml.so.1", "libnvidia-ml.so"]


def from_nvml(library: str | None = None) -> DriverInfo | None:
    """Ask NVML directly (no process); None when the library or the driver is absent."""
    lib = None
    for name in [library] if library else _nvml_names():
        try:
            lib = ctypes.CDLL(name)
            break
        except OSError:
            continue
    if lib is None:
        return None
    try:
        init = getattr(lib, "nvmlInit_v2", None) or lib.nvmlInit
        if init() != 0:
            return None
    except (AttributeError, OSError):
        return None
    try:
        buf = ctypes.create_string_buffer(96)
        if lib.nvmlSystemGetDriverVersion(buf, ctypes.c_uint(len(buf))) != 0:
            return None
        driver = buf.value.decode(errors="replace").strip()
        cuda = None
        cv = ctypes.c_int(0)
        getter = getattr(lib, "nvmlSystemGetCudaDriverVersion_v2", None) or getattr(
            lib, "nvmlSystemGetCudaDriverVersion", None)
        if getter is not None and getter(ctypes.byref(cv)) == 0 and cv.value > 0:
            cuda = f"{cv.value // 1000}.{(cv.value % 1000) // 10}"  # 12040 -> "12.4"
        gpus: list[tuple[str, str]] = []
        count = ctypes.c_uint(0)
        count_fn = getattr(lib, "nvmlDeviceGetCount_v2", None) or lib.nvmlDeviceGetCount
        if count_fn(ctypes.byref(count)) == 0:
            by_index = getattr(lib, "nvmlDeviceGetHandleByIndex_v2", None) or lib.nvmlDeviceGetHandleByIndex
            for i in range(count.value):
                handle = ctypes.c_void_p()
                if by_index(ctypes.c_uint(i), ctypes.byref(handle)) != 0:
                    continue
                name = ctypes.create_string_buffer(96)
                lib.nvmlDeviceGetName(handle, name, ctypes.c_uint(96))  # left empty on failure
                gpu = name.value.decode(errors="replace")
                major, minor = ctypes.c_int(0), ctypes.c_int(0)
                cap = ""
                cc = getattr(lib, "nvmlDeviceGetCudaComputeCapability", None)
                if cc is not None and cc(handle, ctypes.byref(major), ctypes.byref(minor)) == 0:
                    cap = f"{major.value}.{minor.value}"
                gpus.append((gpu, cap))
        return DriverInfo(driver, cuda, gpus, "nvml")
    except (AttributeError, OSError, UnicodeDecodeError):
        return None
    finally:
        try:
            lib.nvmlShutdown()
        except (AttributeError, OSError):
            pass


# ---------------------------------------------------------------- nvidia-smi


def _run(argv: list[str]) -> subprocess.CompletedProcess[str] | None:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=_SMI_TIMEOUT, check=False)
    except (OSError, subprocess.SubprocessError):
        return None


def from_nvidia_smi(exe: str) -> DriverInfo | None:
    """Parse ``nvidia-smi --query-gpu``; None when it is missing or cannot reach a driver."""
    fields = "driver_version,name,compute_cap"
    res = _run([exe, f"--query-gpu={fields}", "--format=csv,noheader"])
    if res is not None and res.returncode != 0 and "compute_cap" in (res.stdout + res.stderr):
        # drivers before ~510 do not know the compute_cap field
        fields = "driver_version,name"
        res = _run([exe, f"--query-gpu={fields}", "--format=csv,noheader"])
    if res is None or res.returncode != 0:
        return None
    driver = ""
    gpus: list[tuple[str, str]] = []
    for line in res.stdout.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if not parts or not re.match(r"^\d+(\.\d+)+$", parts[0]):
            continue
        driver = driver or parts[0]
        name = parts[1] if len(parts) > 1 else ""
        cap = parts[2] if len(parts) > 2 and re.match(r"^\d+\.\d+$", parts[2]) else ""
        gpus.append((name, cap))
    if not driver:
        return None
    # The CUDA level is only in the banner of a plain `nvidia-smi`.
    cuda = None
    banner = _run([exe])
    if banner is not None and banner.returncode == 0:
        m = re.search(r"CUDA Version:\s*(\d+\.\d+)", banner.stdout)
        cuda = m.group(1) if m else None
    return DriverInfo(driver, cuda, gpus, "nvidia-smi")
