"""Read the compatibility data (``envguard/data/compat.yaml``).

Pure: no processes, no network. Other modules ask questions here instead of
hard-coding release facts.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from packaging.version import Version

from envguard.yamlio import load_fast


def _key(v: str) -> tuple[int, ...]:
    return tuple(int(p) for p in v.split(".") if p.isdigit())


@dataclass(frozen=True)
class TorchRelease:
    version: str  # "2.13"
    python: tuple[str, ...]
    cuda: tuple[str, ...]
    channels: tuple[str, ...]


@dataclass(frozen=True)
class Compat:
    raw: dict[str, Any]

    @property
    def supported_python(self) -> tuple[str, ...]:
        return tuple(self.raw["python"]["supported"])

    @property
    def default_python(self) -> str:
        return str(self.raw["python"]["default"])

    def python_legacy(self, python: str) -> dict[str, Any] | None:
        return self.raw["python"].get("legacy", {}).get(python)

    @property
    def torch_releases(self) -> list[TorchRelease]:
        rels = [
            TorchRelease(str(v), tuple(d["python"]), tuple(d["cuda"]), tuple(d["channels"]))
            for v, d in self.raw["torch"].items()
        ]
        return sorted(rels, key=lambda r: _key(r.version))

    def torch(self, version: str) -> TorchRelease | None:
        """The release line ``X.Y`` for any torch version string (``2.13.0+cpu`` -> 2.13)."""
        mm = ".".join(str(Version(version.split("+")[0]).release[i]) for i in range(2)) if version else ""
        return next((r for r in self.torch_releases if r.version == mm), None)

    @property
    def newest_torch(self) -> str:
        return self.torch_releases[-1].version

    def min_driver(self, cuda: str) -> str | None:
        """Minimum driver for a CUDA runtime version such as ``12.6`` or ``12``."""
        return self.raw["min_driver"].get(cuda.split(".")[0])

    def min_arch(self, cuda: str) -> str | None:
        return self.raw["min_arch"].get(cuda.split(".")[0])

    @property
    def pytorch_channel_frozen_at(self) -> str:
        return str(self.raw["channels"]["pytorch"]["frozen_at"])

    @property
    def pytorch_mkl_max(self) -> str:
        return str(self.raw["channels"]["pytorch_mkl_max"])

    @property
    def legacy_packages(self) -> dict[str, str]:
        return dict(self.raw.get("legacy_packages", {}))

    # -- added for init/lint (#7) -------------------------------------------
    @property
    def core_packages(self) -> tuple[str, ...]:
        """PyPI names of the packages one manager must own (torch, numpy, ...)."""
        return tuple(self.raw.get("core_packages", ()))

    @property
    def cuda_runtime_packages(self) -> tuple[str, ...]:
        return tuple(self.raw.get("cuda_runtime_packages", ()))

    @property
    def nightly_channels(self) -> tuple[str, ...]:
        return tuple(self.raw.get("nightly_channels", ()))

    def cuda_platforms(self, channel: str) -> tuple[str, ...]:
        """Conda subdirs with CUDA builds of pytorch on a channel route."""
        return tuple(self.raw.get("cuda_platforms", {}).get(channel, ()))

    def releases_on(self, channel: str) -> list[TorchRelease]:
        return [r for r in self.torch_releases if channel in r.channels]

    def releases_for_python(self, python: str) -> list[TorchRelease]:
        return [r for r in self.torch_releases if python in r.python]

    @property
    def known_channels(self) -> tuple[str, ...]:
        """Channel routes named by at least one release, in data order."""
        seen: dict[str, None] = {}
        for r in self.torch_releases:
            for c in r.channels:
                seen.setdefault(c, None)
        return tuple(seen)


@lru_cache(maxsize=1)
def load() -> Compat:
    # Read at every command's start-up: the C loader (envguard.yamlio) keeps that cheap.
    text = resources.files("envguard").joinpath("data/compat.yaml").read_text(encoding="utf-8")
    return Compat(load_fast("envguard/data/compat.yaml", text=text))


def version_key(v: str) -> tuple[int, ...]:
    """Numeric sort key for dotted versions such as ``3.10`` or ``12.6``."""
    return _key(v)


def driver_satisfies(driver: str, minimum: str) -> bool:
    return _key(driver) >= _key(minimum)


_ARCH = re.compile(r"(sm|compute)_(\d+)([a-z]?)")


def arch_covers(capability: tuple[int, int], arch_list: Iterable[str]) -> bool:
    """Whether a build with ``arch_list`` (``sm_XY`` / ``compute_XY``) runs on a GPU of this capability.

    A cubin runs on its own major version at an equal or higher minor; an arch-specific cubin
    (``sm_90a``) on that exact device only; PTX (``compute_XY``) is JIT-compiled for any equal or
    newer device. Shared by check (the arch list from the probe) and smoke (from torch itself).
    """
    major, minor = capability
    for arch in arch_list:
        m = _ARCH.fullmatch(arch)
        if not m:
            continue
        digits = m.group(2)
        am, an = int(digits[:-1]), int(digits[-1])
        if m.group(1) == "sm" and am == major and an <= minor and not m.group(3):
            return True
        if m.group(1) == "sm" and m.group(3) and (am, an) == (major, minor):
            return True
        if m.group(1) == "compute" and (am, an) <= (major, minor):
            return True
    return False
