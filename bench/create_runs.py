"""The timed runs bench/create.py's package-cache workloads share (``--cache-packages``, ``--real-tree``): a
whole ``envguard create`` process, the peer process (bench/create.py's PEER: rattler.LockFile +
rattler.install), envguard's pre-link step in-process, and dropping the stamped file identities so that
the next pre-link step hashes every extracted file."""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class Runs:
    env: dict[str, str]  # the processes' environment (caches under the bench's temporary directory)
    plat: str
    peer_script: Path
    lockfile: Path
    plan: Any  # envguard.create.read_plan(lockfile, plat)

    def create(self, pkgs: Path, target: Path) -> float:
        """Seconds of a whole ``envguard create`` process with package cache ``pkgs``."""
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "envguard", "create", "-p", str(target), "--lockfile",
                               str(self.lockfile), "--no-check", "--quiet"],
                              env={**self.env, "ENVGUARD_PKGS_DIR": str(pkgs)}, capture_output=True, text=True)
        if proc.returncode != 0:
            raise SystemExit(f"envguard create failed ({proc.returncode}): {proc.stderr.strip()}")
        return time.perf_counter() - start

    def peer(self, pkgs: Path, target: Path) -> float:
        """Seconds of the peer process (the plain rattler install) with package cache ``pkgs``."""
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, str(self.peer_script), str(self.lockfile), str(target), str(pkgs),
                               self.plat], env=self.env, capture_output=True, text=True)
        if proc.returncode != 0:
            raise SystemExit(f"peer failed ({proc.returncode}): {proc.stderr.strip()}")
        return time.perf_counter() - start

    def prepare(self, pkgs: Path) -> float:
        """Seconds of envguard's pre-link step (envguard.create.prelink.prepare) in this process."""
        from envguard.create.prelink import prepare

        start = time.perf_counter()
        prepare(self.plan.conda, pkgs, platform=self.plat, lockfile=self.lockfile).cleanup()
        return time.perf_counter() - start

    @staticmethod
    def forget_identities(pkgs: Path) -> None:
        """Drop the stamped identities of the extracted packages: the next pre-link step hashes every file
        (and the next create stamps them again)."""
        from envguard.create.integrity import VerifiedStamps

        stamps = VerifiedStamps(pkgs)
        stamps.packages = {key: [rec[0], None, rec[2]] for key, rec in stamps.packages.items()}
        stamps.changed = True
        stamps.save()
