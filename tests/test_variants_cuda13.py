"""#37 with CUDA 13: cpu, cuda-12.9 and cuda-13.0 variants locked together against conda-forge's real records plus
cuda130 records derived from the real cuda129 ones.

../shared/realworld holds no CUDA 13 pytorch record (no public lock it was drawn from used one), so init against
the metadata channel refuses `--cuda 13.0` although the compatibility data lists conda-forge's cuda130 builds for
torch 2.10-2.13 on linux-64: the refusal is the sample's, not the data's (asserted below). The derived records
are modelled on the real ones, record by record: the real environment array-api-extra `tests-cuda-py311` (torch
2.11.0 cuda129, Python 3.11, linux-64) gives pytorch's closure; every record of it bound to the CUDA line (it
depends on cuda-version or __cuda, or on such a record) gets a CUDA 13 twin: cuda-version 13.0 constraining
`__cuda >=13` as the real one does, the CUDA toolkit libraries at 13.0.x (12.9.x -> 13.0.x), pytorch and libtorch
built `cuda130_...` as conda-forge names them, the other CUDA-bound libraries (cudnn, nccl, magma, ...) at their
version with a CUDA 13 build, each dependency on a 12.x line moved to the 13 line.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from support import metadata_channel
from support.lock_support import envguard

from envguard.lock.lockfile import host_records, read_lock

SEED_LOCK = "pixi/data-apis__array-api-extra__pixi@842457a.lock"
SEED_ENV = "tests-cuda-py311"
_NUMBER = re.compile(r"(?<![\w.])(\d+)((?:\.\d+)*)(a0)?")


def _to_13(spec: str) -> str:
    """A version spec on the 12.x line moved to the 13 line: >=12.9.1.4,<13.0a0 -> >=13.0.1.4,<14.0a0,
    >=12.9,<12.10.0a0 -> >=13.0,<13.1.0a0."""
    def one(m: re.Match[str]) -> str:
        major, rest, pre = int(m.group(1)), m.group(2), m.group(3) or ""
        if major == 12:  # 12.9 is the line's last: 12.9 -> 13.0, 12.10 (an upper bound) -> 13.1, 12.6 -> 13.0
            parts = rest.split(".")[1:]
            minor = str(max(0, int(parts[0]) - 9)) if parts else ""
            return "13" + ("." + minor + "".join("." + p for p in parts[1:]) if parts else "") + pre
        if major == 13:
            return "14" + rest + pre
        return m.group(0)

    return _NUMBER.sub(one, spec)


def _seed_records(realworld: Path) -> dict[str, dict[str, Any]]:
    import rattler

    lf = rattler.LockFile.from_path(realworld / SEED_LOCK)
    env = lf.environment(SEED_ENV)
    assert env is not None
    recs = next(pkgs for plat, pkgs in env.conda_repodata_records().items() if str(plat) == "linux-64")
    out = {}
    for r in recs:
        entry = json.loads(r.to_json()) if hasattr(r, "to_json") else None
        if entry is None:
            entry = {"name": r.name.normalized, "version": str(r.version), "build": str(r.build),
                     "build_number": r.build_number, "depends": list(r.depends), "constrains": list(r.constrains),
                     "subdir": r.subdir}
        out[r.name.normalized] = entry
    return out


def _closure(records: dict[str, dict[str, Any]], root: str) -> set[str]:
    seen, todo = set(), [root]
    while todo:
        n = todo.pop()
        if n in seen or n not in records:
            continue
        seen.add(n)
        todo += [d.split()[0] for d in records[n].get("depends") or []]
    return seen


def derive_cuda13(records: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """filename -> repodata entry of the CUDA 13 twin of every CUDA-bound record of pytorch's closure."""
    closure = _closure(records, "pytorch")
    bound = {n for n in closure if n == "cuda-version" or any(d.split()[0] in ("cuda-version", "__cuda")
                                                             for d in records[n].get("depends") or [])}
    grown = True
    while grown:  # what depends on a CUDA-bound record is built per CUDA line too (pytorch on libtorch)
        grown = False
        for n in closure - bound:
            if any(d.split()[0] in bound for d in records[n].get("depends") or []):
                bound.add(n)
                grown = True
    on_12 = {n for n in bound if re.match(r"12\.9(\.|$)", records[n]["version"])}  # the toolkit's own 12.9 line
    moved = on_12 | {"__cuda", "cudatoolkit"}
    out = {}
    for n in sorted(bound):
        r = dict(records[n])
        version = _to_13(r["version"]) if n in on_12 else r["version"]
        build = r["build"].replace("cuda129", "cuda130").replace("cuda12", "cuda13")
        if version == r["version"] and build == r["build"]:
            build = f"cuda13{build}"  # same version, another build: the CUDA 13 one
        def move(d: str) -> str:
            name, _, spec = d.partition(" ")
            spec = spec.replace("cuda129", "cuda130")
            return f"{name} {_to_13(spec)}".strip() if name in moved else f"{name} {spec}".strip()
        r.update(version=version, build=build, depends=[move(d) for d in r.get("depends") or []],
                 constrains=[move(c) for c in r.get("constrains") or []])
        fn = f"{n}-{version}-{build}.conda"
        r["sha256"] = hashlib.sha256(fn.encode()).hexdigest()
        r["md5"] = hashlib.md5(fn.encode()).hexdigest()
        for k in ("url", "channel", "fn", "file_name"):
            r.pop(k, None)
        out[fn] = r
    return out


@pytest.fixture(scope="module")
def cuda13_channel(realworld: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, Any]]:
    root = tmp_path_factory.mktemp("cuda13") / "channel"
    channel = metadata_channel.build_metadata_channel(metadata_channel.realworld_locks(realworld), root)
    assert not [r for r in channel.find("pytorch") if r.build.startswith("cuda13")]  # the sample has none
    derived = derive_cuda13(_seed_records(realworld))
    repodata = root / "linux-64" / "repodata.json"
    doc = json.loads(repodata.read_text())
    doc["packages.conda"].update(derived)
    repodata.write_text(json.dumps(doc))
    return channel.url, derived


@pytest.mark.slow
def test_init_refuses_13_for_the_sample_and_takes_it_where_the_records_exist(realworld: Path, cuda13_channel,
                                                                              tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from envguard.compat import load_all
    from envguard.errors import UserError

    # the compatibility data lists conda-forge's CUDA 13.0 build of torch 2.11 on linux-64
    assert "13.0" in load_all()["routes"]["conda-forge"]["releases"]["2.11"]["cuda"]["linux-64"]
    from envguard.init.variants import init_variants

    monkeypatch.delenv("ENVGUARD_OFFLINE", raising=False)
    plain = metadata_channel.build_metadata_channel(metadata_channel.realworld_locks(realworld), tmp_path / "plain")
    out = tmp_path / "a" / "environment.yml"
    out.parent.mkdir()
    with pytest.raises(UserError) as e:  # the sample's records: no cuda130 pytorch, so refused
        init_variants(["cpu", "12.9", "13.0"], python="3.11", torch="2.11", platforms=["linux-64"], output=out,
                      channel_url=plain.url)
    assert "CUDA 12.9" in e.value.message and "13.0" not in e.value.message.split(";")[0], e.value.message
    out = tmp_path / "b" / "environment.yml"
    out.parent.mkdir()
    made = init_variants(["cpu", "12.9", "13.0"], python="3.11", torch="2.11", platforms=["linux-64"], output=out,
                         channel_url=cuda13_channel[0])
    assert [n for n, _p, _r in made.variants] == ["cpu", "cuda-12.9", "cuda-13.0"]


def _records(lockfile: Path) -> dict[str, str]:
    return {e.name: e.filename for e in host_records(read_lock(lockfile), "linux-64")}


@pytest.mark.slow
def test_cpu_129_and_130_variants_locked_together(cuda13_channel, tmp_path: Path) -> None:
    url, derived = cuda13_channel
    assert "pytorch" in {r["name"] for r in derived.values()}
    cv = next(r for r in derived.values() if r["name"] == "cuda-version")
    assert cv["version"] == "13.0" and "__cuda >=13" in cv["constrains"], cv  # as conda-forge's cuda-version 13.0
    proc = envguard(["init", "--python", "3.11", "--torch", "2.11", "--cuda", "cpu", "--cuda", "12.9", "--cuda",
                     "13.0", "--platform", "linux-64"], cwd=tmp_path, env={**os.environ, "ENVGUARD_OFFLINE": "1"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    spec = tmp_path / "environment.yml"
    spec.write_text(spec.read_text().replace("  - conda-forge\n", f"  - {url}\n"))
    assert yaml.safe_load((tmp_path / "variants" / "cuda-13.0.yml").read_text())["dependencies"] == [
        "pytorch=2.11.*=cuda13*", "cuda-version=13.0"]
    proc = envguard(["lock"], cwd=tmp_path, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    locks = {n: _records(tmp_path / f"conda-lock.{n}.yml") for n in ("cpu", "cuda-12.9", "cuda-13.0")}
    assert locks["cpu"]["pytorch"].startswith("pytorch-2.11.0-cpu_")
    assert locks["cuda-12.9"]["pytorch"].startswith("pytorch-2.11.0-cuda129_")
    assert locks["cuda-13.0"]["pytorch"].startswith("pytorch-2.11.0-cuda130_")
    assert locks["cuda-13.0"]["cuda-version"].startswith("cuda-version-13.0-")
    assert locks["cuda-12.9"]["cuda-version"].startswith("cuda-version-12.9-")
    derived_names = {r["name"] for r in derived.values()}
    # outside what the variants force, every package is the same record in the three locks
    common = set(locks["cpu"]) & set(locks["cuda-12.9"]) & set(locks["cuda-13.0"])
    same = {n for n in common if locks["cpu"][n] == locks["cuda-12.9"][n] == locks["cuda-13.0"][n]}
    assert len(same) >= 30, sorted(same)
    assert {"python", "numpy"} <= same
    assert not (common - same) - derived_names - {"libabseil", "libprotobuf", "libtorch", "pytorch"}, common - same
    # 12.9 and 13.0 share every record that is not CUDA-bound
    both = set(locks["cuda-12.9"]) & set(locks["cuda-13.0"])
    assert {n for n in both if locks["cuda-12.9"][n] != locks["cuda-13.0"][n]} <= derived_names
    assert "cuda-13.0 vs cpu on linux-64:" in proc.stdout and "differ although" not in proc.stdout, proc.stdout
    assert envguard(["lock", "--check"], cwd=tmp_path).returncode == 0
    proc = envguard(["diff", "conda-lock.cuda-12.9.yml", "conda-lock.cuda-13.0.yml"], cwd=tmp_path)
    assert proc.stdout.startswith("variants cuda-12.9 and cuda-13.0: only the torch family and CUDA libraries "
                                  "differ"), proc.stdout + proc.stderr
