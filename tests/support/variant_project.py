"""A project with variants for the create/check/fleet tests of #37 (tests/test_variant_*.py): environment.yml
(cpu is the default), variants/cpu.yml, cuda-12.6.yml and cuda-12.8.yml over the standard test channel (pytorch
2.13.0 cpu, cuda126 and cuda128 builds), locked by `envguard lock`; a fake nvidia-smi per driver and GPUs."""

from __future__ import annotations

import json
from pathlib import Path

from support.channels import HOST_PY, host_platform
from support.create_fixtures import envguard_run


def fake_smi(directory: Path, driver: str, cuda: str, *caps: str) -> Path:
    rows = "".join(f"{driver}, GPU {i}, {cap}\\n" for i, cap in enumerate(caps))
    path = directory / f"nvidia-smi-{driver}-{'-'.join(caps)}"
    path.write_text(f"""#!/bin/sh
case "$1" in
  --query-gpu=*) printf '{rows}' ;;
  "") echo "| NVIDIA-SMI {driver}   Driver Version: {driver}   CUDA Version: {cuda} |" ;;
  *) exit 2 ;;
esac
""")
    path.chmod(0o755)
    return path


def make_project(root: Path, channel_url: str) -> Path:
    """environment.yml (cpu is the default) + variants/cpu.yml, cuda-12.6.yml, cuda-12.8.yml, locked by
    `envguard lock` into conda-lock.<name>.yml."""
    (root / "environment.yml").write_text(
        f"name: vt\nchannels:\n  - {channel_url}\ndependencies:\n  - python={HOST_PY}\n  - numpy\n"
        f"  - pytorch=2.13.0=cpu*\nplatforms:\n  - {host_platform()}\n")
    (root / "variants").mkdir()
    overlays = {"cpu": ["pytorch=2.13.0=cpu*"],
                "cuda-12.6": ["pytorch=2.13.0=cuda126*", "cuda-version=12.6"],
                "cuda-12.8": ["pytorch=2.13.0=cuda128*", "cuda-version=12.8"]}
    for name, lines in overlays.items():
        (root / "variants" / f"{name}.yml").write_text("dependencies:\n" + "".join(f"  - {line}\n" for line in lines))
    from envguard.lock.together import lock_variants

    lock_variants(root / "environment.yml")  # what `envguard lock` does here: every variant, solved together
    assert sorted(p.name for p in root.glob("conda-lock*.yml")) == [
        "conda-lock.cpu.yml", "conda-lock.cuda-12.6.yml", "conda-lock.cuda-12.8.yml"]
    return root


def create(project: Path, prefix: Path, *args: str, smi: Path | str = "", **env: str):
    return envguard_run("create", "-p", str(prefix), "--no-check", *args, cwd=project,
                        env={"ENVGUARD_NVIDIA_SMI": str(smi), **env}, timeout=600)


def fingerprint(prefix: Path) -> dict:
    return json.loads((prefix / "conda-meta" / "envguard-fingerprint.json").read_text())


def torch_build(prefix: Path) -> str:
    meta = next((prefix / "conda-meta").glob("pytorch-2.13.0-*.json"))
    return json.loads(meta.read_text())["build"]
