"""Locks solved for real against real conda-forge repodata subsets (../shared/realworld/repodata)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.lock_support import realworld_channel, write_env

from envguard.lock import check_fresh, lock
from envguard.lock.lockfile import host_records, read_lock


def _repodata_index(channel: Path) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for sub in ("linux-64", "noarch"):
        doc = json.loads((channel / sub / "repodata.json").read_text())
        for key in ("packages", "packages.conda"):
            for fn, rec in (doc.get(key) or {}).items():
                out[f"{sub}/{fn}"] = rec
    return out


@pytest.mark.parametrize(("which", "deps", "expect"), [
    ("py39", ["python=3.9", "pip"], {"python": "3.9.19", "pip": None, "openssl": None}),
    ("numpy312", ["numpy", "python=3.12"], {"numpy": "1.26.4", "python": "3.12.1", "libopenblas": None}),
])
def test_real_conda_forge_subset_locks_with_real_urls_and_hashes(
        tmp_path: Path, realworld: Path, which: str, deps: list[str], expect: dict[str, str | None]) -> None:
    from conda_lock.lockfile import parse_conda_lock_file

    channel = realworld_channel(realworld, tmp_path / "channels", which)
    env = write_env(tmp_path / "proj" / "environment.yml", channels=[channel.as_uri()], deps=deps,
                    platforms=["linux-64"])
    result = lock([env], cuda=False)
    lockfile = tmp_path / "proj" / "conda-lock.yml"
    entries = host_records(read_lock(lockfile), "linux-64")
    assert result.packages["linux-64"] == len(entries) >= 15
    by_name = {e.name: e for e in entries}
    for name, version in expect.items():
        assert name in by_name, (name, sorted(by_name))
        if version:
            assert by_name[name].version == version
    index = _repodata_index(channel)
    subdirs = set()
    for e in entries:
        assert e.url == f"https://conda.anaconda.org/conda-forge/{e.subdir}/{e.filename}", e.url
        rec = index[f"{e.subdir}/{e.filename}"]
        assert e.sha256 == rec["sha256"] and e.md5 == rec["md5"], e.filename
        subdirs.add(e.subdir)
    assert subdirs == {"linux-64", "noarch"}  # noarch records come through too
    assert len(parse_conda_lock_file(lockfile).package) == len(entries)
    assert check_fresh([env], lockfile).fresh
