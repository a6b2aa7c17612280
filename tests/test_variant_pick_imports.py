"""What choosing a variant loads in `envguard create` (#37: "choosing adds at most 50 ms", bench/variant_pick.py):
with no NVIDIA driver the pick is the CPU variant, so neither the compatibility data (envguard.compat, PyYAML's
parse of compat.yaml) nor the version parser is loaded; the declaration (environment.yml, variants/*.yml) is read
without PyYAML; the "variant cpu: ..." line is written without rich. With a driver the data is loaded: the check
below tells one case from the other. Each create is a whole process under ``python -X importtime``, its
imported modules read from that trace (as tests/test_imports_follow_need.py does), on the real variant project of
tests/test_variant_create.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.variant_project import fake_smi, make_project

pytestmark = [pytest.mark.slow, pytest.mark.skipif(sys.platform == "win32", reason="shell-script nvidia-smi")]

# what a cpu pick never needs: the compatibility data and its readers, the version parser, rich for one line
NOT_FOR_CPU = {"envguard.compat", "yaml", "packaging.version", "rich.console"}


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, channel_url: str) -> Path:
    return make_project(tmp_path_factory.mktemp("variants"), channel_url)


def imported_by_create(project: Path, prefix: Path, smi: str) -> tuple[set[str], str]:
    """The modules ``envguard create -p prefix --no-check`` imported (exit 0), and its stderr without the trace."""
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE")}  # a pipe stays one
    env["ENVGUARD_NVIDIA_SMI"] = smi
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "envguard", "create", "-p", str(prefix),
                           "--no-check"], cwd=project, capture_output=True, text=True, timeout=600, env=env)
    lines = proc.stderr.splitlines()
    assert proc.returncode == 0, "\n".join(line for line in lines if not line.startswith("import time:"))[-2000:]
    mods = {line.rsplit("|", 1)[-1].strip() for line in lines if line.startswith("import time:")}
    return mods, "\n".join(line for line in lines if not line.startswith("import time:"))


def test_a_cpu_pick_loads_no_compatibility_data(project: Path, tmp_path: Path) -> None:
    for _ in range(2):  # the build, then a sync (a create's common case): both pick, neither needs the data
        mods, err = imported_by_create(project, tmp_path / "env", "")
        assert "variant cpu: no NVIDIA driver" in err
        assert "envguard.variantpick" in mods  # the pick ran
        assert not NOT_FOR_CPU & mods, sorted(NOT_FOR_CPU & mods)


def test_a_driver_loads_the_compatibility_data(project: Path, tmp_path: Path) -> None:
    """The other side of the same check: a driver's pick judges GPU architectures from the data."""
    smi = fake_smi(tmp_path, "570.86.15", "12.8", "8.0", "9.0")
    mods, err = imported_by_create(project, tmp_path / "env", str(smi))
    assert "variant cuda-12.8: driver 570.86.15" in err
    assert "envguard.compat" in mods
