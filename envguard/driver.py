"""Facts about the host's NVIDIA driver and GPUs.

One entry point, :func:`get_driver_info`: NVML through NVIDIA's own Python
binding (``nvidia-ml-py``, module ``pynvml``) when the driver's
``libnvidia-ml`` loads, else ``nvidia-smi`` from PATH. ``ENVGUARD_NVIDIA_SMI``
names a specific ``nvidia-smi`` executable and then NVML is not consulted, so
tests (and users with an odd install) get exactly the answer of that program.
A missing driver is ``None``, never an exception.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from envguard import settings

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


def get_driver_info(nvml: ModuleType | None = None) -> DriverInfo | None:
    """The driver's version, its CUDA level and the GPUs; None when there is no driver.

    ``nvml`` replaces the ``pynvml`` module (tests inject a compatible fake)."""
    smi = settings.nvidia_smi()
    if smi is not None:
        return from_nvidia_smi(smi) if smi else None
    info = from_nvml(nvml)
    if info is not None:
        return info
    found = shutil.which("nvidia-smi")
    return from_nvidia_smi(found) if found else None


# ---------------------------------------------------------------- NVML (nvidia-ml-py)


def _import_nvml() -> ModuleType | None:
    if sys.platform.startswith("linux") and not _loads("libnvidia-ml.so.1"):
        # the binding loads this very name on Linux, and without it answers "no driver": asking the loader
        # first spares a machine without a driver the binding's import (~10 ms of every variant create)
        return None
    try:
        import pynvml  # nvidia-ml-py: NVIDIA's binding; it loads libnvidia-ml itself (nvml.dll on Windows)
    except ImportError:
        return None
    return pynvml


def _text(value: Any) -> str:
    return (value.decode(errors="replace") if isinstance(value, bytes) else str(value)).strip()


def from_nvml(nvml: ModuleType | None = None) -> DriverInfo | None:
    """Ask NVML (no process) through ``pynvml``, or the compatible module ``nvml``; None when the binding, the
    library or the driver is absent."""
    nvml = nvml or _import_nvml()
    if nvml is None:
        return None
    errors: tuple[type[BaseException], ...] = (getattr(nvml, "NVMLError", OSError), OSError, AttributeError)
    try:
        nvml.nvmlInit()
    except errors:
        return None  # NVML_ERROR_LIBRARY_NOT_FOUND, DRIVER_NOT_LOADED, ...
    try:
        driver = _text(nvml.nvmlSystemGetDriverVersion())
        cuda = None
        for getter in ("nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion"):
            try:
                v = int(getattr(nvml, getter)())
            except errors:
                continue
            if v > 0:
                cuda = f"{v // 1000}.{(v % 1000) // 10}"  # 12040 -> "12.4"
                break
        gpus: list[tuple[str, str]] = []
        for i in range(int(nvml.nvmlDeviceGetCount())):
            try:
                handle = nvml.nvmlDeviceGetHandleByIndex(i)
            except errors:
                continue  # a GPU NVML cannot open (lost, or no permission): the others still count
            try:
                name = _text(nvml.nvmlDeviceGetName(handle))
            except errors:
                name = ""
            try:
                major, minor = nvml.nvmlDeviceGetCudaComputeCapability(handle)
                cap = f"{int(major)}.{int(minor)}"
            except errors:
                cap = ""
            gpus.append((name, cap))
        return DriverInfo(driver, cuda, gpus, "nvml") if driver else None
    except errors:
        return None
    finally:
        try:
            nvml.nvmlShutdown()
        except errors:
            pass


def _loads(library: str) -> bool:
    import ctypes

    try:
        ctypes.CDLL(library)
    except OSError:
        return False
    return True


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
