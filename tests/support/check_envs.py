"""Real conda environments for the check and prefix tests: solved and installed by rattler.

Plain helpers (no pytest): ``make_env`` solves specs against the test channels and installs the
result into a prefix; ``write_lock`` writes a conda-lock.yml (format version 1) for records, so a
test can lock one solution and install another.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from support import channels

ENVGUARD = [sys.executable, "-m", "envguard"]


def _virtual(cuda: str | None) -> list[Any]:
    from rattler import BuildString, GenericVirtualPackage, PackageName, Version

    out = [GenericVirtualPackage(PackageName("__glibc"), Version("2.35"), BuildString("0")),
           GenericVirtualPackage(PackageName("__unix"), Version("0"), BuildString("0")),
           GenericVirtualPackage(PackageName("__linux"), Version("6.1"), BuildString("0"))]
    if cuda:
        out.append(GenericVirtualPackage(PackageName("__cuda"), Version(cuda), BuildString("0")))
    return out


def solve(channel_urls: Sequence[str], specs: Sequence[str], *, cuda: str | None = None) -> list[Any]:
    import rattler
    from rattler import Channel, MatchSpec, Subdir

    plat = channels.host_platform()
    return channels.run(rattler.solve(
        [Channel(u) for u in channel_urls], [MatchSpec(s, strict=False) for s in specs],
        platforms=[Subdir(plat), Subdir("noarch")], virtual_packages=_virtual(cuda),
    ))


def install(records: Sequence[Any], prefix: Path, cache: Path) -> Path:
    import rattler

    channels.run(rattler.install(list(records), prefix, cache_dir=cache, show_progress=False,
                                 execute_link_scripts=False))
    return prefix


def make_env(channel_urls: Sequence[str] | str, specs: Sequence[str], prefix: Path, cache: Path, *,
             cuda: str | None = None) -> tuple[Path, list[Any]]:
    urls = [channel_urls] if isinstance(channel_urls, str) else list(channel_urls)
    records = solve(urls, specs, cuda=cuda)
    install(records, prefix, cache)
    return prefix, records


def write_lock(path: Path, records: Sequence[Any], *, pip: Sequence[tuple[str, str]] = ()) -> Path:
    """A conda-lock.yml (version 1) for the host platform holding ``records`` (rattler RepoDataRecords)."""
    plat = channels.host_platform()
    entries: list[dict[str, Any]] = []
    for r in records:
        entries.append({
            "name": r.name.normalized, "version": str(r.version), "manager": "conda", "platform": plat,
            "dependencies": {d.split(" ", 1)[0]: (d.split(" ", 1)[1] if " " in d else "") for d in r.depends},
            "url": r.url, "hash": {"md5": r.md5.hex() if isinstance(r.md5, bytes) else r.md5,
                                   "sha256": r.sha256.hex() if isinstance(r.sha256, bytes) else r.sha256},
            "category": "main", "optional": False,
        })
    for name, version in pip:
        entries.append({"name": name, "version": version, "manager": "pip", "platform": plat, "dependencies": {},
                        "url": f"https://files.example.invalid/{name}-{version}-py3-none-any.whl",
                        "hash": {"sha256": "0" * 64}, "category": "main", "optional": False})
    data = {"version": 1, "metadata": {"content_hash": {plat: "0" * 64}, "channels": [], "platforms": [plat],
                                       "sources": ["environment.yml"]}, "package": entries}
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def envguard(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
             timeout: float = 240) -> subprocess.CompletedProcess[str]:
    """Run the real CLI in a subprocess."""
    full_env = dict(os.environ)
    full_env.pop("CONDA_PREFIX", None)
    full_env.pop("VIRTUAL_ENV", None)  # an activated venv is an environment envguard may pick: tests pass one
    if env:
        full_env.update(env)
    return subprocess.run([*ENVGUARD, *args], capture_output=True, text=True, cwd=cwd, env=full_env,
                          timeout=timeout)


def pip_install(prefix: Path, wheel: Path) -> None:
    """The real pip of the environment, offline, no dependencies."""
    py = prefix / "bin" / "python"
    proc = subprocess.run([str(py), "-m", "pip", "install", "--no-deps", "--no-index", "--disable-pip-version-check",
                           "-q", str(wheel)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def replace_file(path: Path, data: bytes) -> None:
    """Write new content without touching the package cache (installed files are hardlinks into it)."""
    path.unlink()
    path.write_bytes(data)
