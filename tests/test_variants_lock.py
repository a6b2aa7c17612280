"""#37 declare + lock: `envguard init --cuda cpu --cuda 12.6 ...` writes a project with variants, `envguard lock`
locks every variant into conda-lock.<name>.yml, together, against conda-forge's REAL records (the metadata
channel of ../shared/realworld, tests/support/metadata_channel.py), and conda-lock itself reads the files and
the locks the same way.

The sample holds, for Python 3.12 and torch 2.7.1 on linux-64, a CPU build and the cuda126 build beside
cuda-version 12.6 and 12.9: three variants of one release (cpu, cuda-12.6, cuda-12.9). It holds no CUDA 13
pytorch build at all (asserted below), so a cuda-13.0 variant is declared and refused here, not locked.
For osx-arm64 it holds torch 2.8.0 CPU for Python 3.13, beside the linux-64 cuda129 build.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml
from support.lock_support import conda_lock_verdict, envguard, stub_conda  # noqa: F401 (fixture)

from envguard.errors import UserError
from envguard.init.variants import init_variants
from envguard.lock.lockfile import host_records, read_lock
from envguard.lock.relock import rank
from envguard.variants import declared_variants, lock_variant, lock_variant_cuda, lock_variants

REPO = Path(__file__).resolve().parent.parent
CONDA_LOCK_PY = REPO / ".venv" / "bin" / "python"


def _use_channel(env_file: Path, url: str) -> None:
    text = env_file.read_text(encoding="utf-8")
    assert "  - conda-forge\n" in text
    env_file.write_text(text.replace("  - conda-forge\n", f"  - {url}\n"), encoding="utf-8")


def _records(lockfile: Path, platform: str) -> dict[str, str]:
    return {e.name: e.filename for e in host_records(read_lock(lockfile), platform)}


# ------------------------------------------------------------------ merging is conda-lock's merge


_BASE = """\
name: demo
channels: [conda-forge]
platforms: [linux-64, osx-arm64]
dependencies:
  - python=3.12
  - pytorch=2.7.*=cpu*
  - numpy<2  # [linux]
  - pip
  - pip:
    - rich==13.7.1
"""
_OVERLAYS = {
    "replaces the build line, adds cuda-version": "dependencies:\n  - pytorch=2.7.*=cuda12*\n  - cuda-version=12.6\n",
    "narrows the platforms, a selector, a pip line": ("platforms: [linux-64]\ndependencies:\n  - numpy  # [linux]\n"
                                                     "  - pip:\n    - rich==14.0.0\n"),
    "extends the channels": "channels: [pytorch, conda-forge]\ndependencies:\n  - pytorch=2.7.*=cpu*\n",
}


@pytest.mark.parametrize("overlay", list(_OVERLAYS.values()), ids=list(_OVERLAYS))
@pytest.mark.parametrize("platforms", [["linux-64"], ["linux-64", "osx-arm64"]])
def test_lock_merges_files_exactly_as_conda_lock_aggregates_them(tmp_path: Path, overlay: str,
                                                                 platforms: list[str]) -> None:
    """`envguard lock -f environment.yml -f variants/x.yml` reads the two files as conda-lock 4.0.3's
    aggregate_lock_specs merges them (the later file wins per (manager, name), channels extend), which is what
    makes `conda-lock -f ... -f ...` reproduce a variant's lock."""
    from conda_lock.src_parser.aggregation import aggregate_lock_specs
    from conda_lock.src_parser.environment_yaml import parse_environment_file

    from envguard.lock.pypi import mapping_path
    from envguard.lock.spec import read_spec

    base, extra = tmp_path / "environment.yml", tmp_path / "variants" / "x.yml"
    extra.parent.mkdir()
    base.write_text(_BASE)
    extra.write_text(overlay)
    spec = read_spec([base, extra], platforms)
    ours = spec.lock_spec(str(mapping_path()))
    theirs = aggregate_lock_specs([parse_environment_file(f, platforms=platforms, mapping_url=str(mapping_path()))
                                   for f in (base, extra)], platforms)
    assert list(ours.platforms) == platforms
    for p in platforms:
        assert [d.model_dump() for d in ours.dependencies[p]] == [d.model_dump() for d in theirs.dependencies[p]]
    assert [c.url for c in ours.channels] == [c.url for c in theirs.channels]
    from envguard.lock.changes import name_of

    for p in platforms:  # the lines envguard reads back (why, create's history, check) are the merged ones too
        conda, pip = spec.dependencies_for(p)
        assert [name_of("conda", d) for d in conda] == [d.name for d in theirs.dependencies[p] if d.manager == "conda"]
        assert [name_of("pip", d) for d in pip] == [d.name for d in theirs.dependencies[p] if d.manager == "pip"]
    merged = {d.name: d for d in ours.dependencies["linux-64"]}
    wins = yaml.safe_load(overlay)["dependencies"]
    if any(isinstance(d, str) and d.startswith("pytorch=") for d in wins):
        assert merged["pytorch"].build == next(d for d in wins if isinstance(d, str)
                                               and d.startswith("pytorch=")).split("=")[2]


def test_channels_conda_lock_cannot_merge_are_refused_as_it_refuses(tmp_path: Path) -> None:
    from conda_lock.errors import ChannelAggregationError
    from conda_lock.src_parser.aggregation import aggregate_lock_specs
    from conda_lock.src_parser.environment_yaml import parse_environment_file

    from envguard.lock.pypi import mapping_path
    from envguard.lock.spec import read_spec

    base, extra = tmp_path / "environment.yml", tmp_path / "x.yml"
    base.write_text(_BASE)
    extra.write_text("channels: [pytorch]\ndependencies:\n  - pytorch=2.7.*=cpu*\n")
    with pytest.raises(ChannelAggregationError):
        aggregate_lock_specs([parse_environment_file(f, platforms=["linux-64"], mapping_url=str(mapping_path()))
                              for f in (base, extra)], ["linux-64"])
    with pytest.raises(UserError) as e:
        read_spec([base, extra], ["linux-64"]).lock_spec(str(mapping_path()))
    assert e.value.exit_code == 2 and "ordered subset" in e.value.message


# ------------------------------------------------------------------ init


def test_init_refuses_what_a_merge_cannot_write_and_what_the_data_lacks(tmp_path: Path) -> None:
    out = tmp_path / "environment.yml"
    with pytest.raises(UserError, match="an overlay can replace a line, not drop one"):
        init_variants(["12.9", "cpu"], output=out)  # cpu after a CUDA default cannot drop cuda-version
    with pytest.raises(UserError, match=r"no CUDA 12\.7"):
        init_variants(["cpu", "12.7"], torch="2.7", output=out)  # refused as a single --cuda 12.7 is
    with pytest.raises(UserError, match=r"both the cuda-12\.9 variant"):
        init_variants(["12", "12.9"], output=out)
    with pytest.raises(UserError, match="-o - prints one"):
        init_variants(["cpu", "12.9"], output="-")
    assert list(tmp_path.iterdir()) == []  # nothing written by a refusal
    (tmp_path / "variants").write_text("not a folder\n")  # where the overlays go: refused as -o's parent is
    with pytest.raises(UserError, match="a parent of the output is not a directory"):
        init_variants(["cpu", "12.9"], output=out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["variants"]


def test_one_cuda_value_writes_the_single_variant_project_unchanged(tmp_path: Path) -> None:
    proc = envguard(["init", "--cuda", "12.9", "-o", "environment.yml"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["environment.yml"]
    assert declared_variants(tmp_path / "environment.yml") == []


def test_a_variant_projects_environment_yml_names_no_single_lock(tmp_path: Path) -> None:
    """The templates' "Next:" comment says `envguard lock` writes conda-lock.yml; a variant project's
    environment.yml must say what lock and create do with variants instead."""
    out = tmp_path / "environment.yml"
    init_variants(["cpu", "12.9"], output=out)
    text = out.read_text()
    assert "conda-lock.yml" not in text
    assert "conda-lock.<name>.yml" in text and "builds the variant this machine runs" in text
    assert text.count("# Next:") == 1


# ------------------------------------------------------------------ init + lock on the real records


@pytest.mark.slow
def test_init_and_lock_three_variants_together_on_real_records(realdata_channel, stub_conda,
                                                               tmp_path: Path) -> None:
    assert realdata_channel.find("pytorch", version="2.7.1", subdir="linux-64")
    assert not [r for r in realdata_channel.find("pytorch") if r.build.startswith("cuda13")]  # no CUDA 13 build
    # the first step: numpy held below 2, one variant only (a project can grow variants later)
    proc = envguard(["init", "--python", "3.12", "--torch", "2.7", "--cuda", "cpu", "--cuda", "12.6", "--cuda",
                     "12.9", "--platform", "linux-64"], cwd=tmp_path, env={**_env(), "ENVGUARD_OFFLINE": "1"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "wrote variants/cuda-12.6.yml: variant cuda-12.6 (CUDA 12.6) for linux-64" in proc.stdout
    spec = tmp_path / "environment.yml"
    _use_channel(spec, realdata_channel.url)
    assert [(v.name, v.cuda, v.default) for v in declared_variants(spec)] == [
        ("cpu", None, True), ("cuda-12.6", "12.6", False), ("cuda-12.9", "12.9", False)]
    overlay = yaml.safe_load((tmp_path / "variants" / "cuda-12.6.yml").read_text())
    assert overlay["dependencies"] == ["pytorch=2.7.*=cuda12*", "cuda-version=12.6"]

    # lock: the default first, at numpy < 2 (an existing lock the others have not seen)
    cuda_files = [tmp_path / "variants" / n for n in ("cuda-12.6.yml", "cuda-12.9.yml")]
    hidden = [f.rename(f.with_suffix(".off")) for f in cuda_files]
    spec.write_text(spec.read_text().replace("  - numpy\n", "  - numpy<2\n"))
    assert envguard(["lock"], cwd=tmp_path).returncode == 0
    assert read_lock(tmp_path / "conda-lock.cpu.yml").packages
    for f in hidden:
        f.rename(f.with_suffix(".yml"))
    spec.write_text(spec.read_text().replace("  - numpy<2\n", "  - numpy\n"))

    proc = envguard(["lock"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    locks = {n: tmp_path / f"conda-lock.{n}.yml" for n in ("cpu", "cuda-12.6", "cuda-12.9")}
    cpu = _records(locks["cpu"], "linux-64")
    assert cpu["pytorch"].split("-")[2].startswith("cpu_") and cpu["numpy"].startswith("numpy-1.26.")
    for name in ("cuda-12.6", "cuda-12.9"):
        mine = _records(locks[name], "linux-64")
        assert mine["pytorch"].split("-")[2].startswith("cuda126_"), mine["pytorch"]
        assert mine["cuda-version"].startswith(f"cuda-version-{name[5:]}")
        # locked together: a fresh variant takes the default's numpy 1.26, not the channel's newest 2.x
        assert mine["numpy"] == cpu["numpy"]
        common = [n for n in mine if n in cpu and rank(n) >= 2]
        same = [n for n in common if mine[n] == cpu[n]]
        assert len(same) >= 50
        assert set(common) - set(same) <= {"libabseil", "libprotobuf"}, set(common) - set(same)
    assert "between the variants:" in proc.stdout
    assert "cuda-12.6 vs cpu on linux-64:" in proc.stdout and "differ although" not in proc.stdout
    assert "2 pinned by them" in proc.stdout  # the cuda126 build pins an older libabseil and libprotobuf

    for name, path in locks.items():
        lock = read_lock(path)
        assert lock_variant({"custom_metadata": lock.custom_metadata}) == name
        assert lock_variant_cuda({"custom_metadata": lock.custom_metadata}) == (None if name == "cpu" else name[5:])
        assert lock_variants({"custom_metadata": lock.custom_metadata}) == list(locks)
        assert all(k.startswith("envguard.") for k in lock.custom_metadata)  # CEP 37
        _conda_lock_reads(path)
        files = [spec, tmp_path / "variants" / f"{name}.yml"]
        cuda = "none" if name == "cpu" else name[5:]
        assert conda_lock_verdict(stub_conda, files, path, platforms=["linux-64"], cuda=cuda, cwd=tmp_path) == "fresh"

    assert envguard(["lock", "--check"], cwd=tmp_path).returncode == 0
    # why reads the default variant's lock; another variant's by name, its pytorch line from its overlay
    proc = envguard(["why", "pytorch"], cwd=tmp_path)
    assert proc.returncode == 0 and "`pytorch=2.7.*=cpu*` (environment.yml:" in proc.stdout, proc.stdout + proc.stderr
    proc = envguard(["why", "pytorch", "--lockfile", "conda-lock.cuda-12.6.yml"], cwd=tmp_path)
    assert "`pytorch=2.7.*=cuda12*` (variants/cuda-12.6.yml:" in proc.stdout and "=cpu*" not in proc.stdout
    # an edit of one overlay: that variant alone is stale, and named
    (tmp_path / "variants" / "cuda-12.9.yml").write_text(
        (tmp_path / "variants" / "cuda-12.9.yml").read_text() + "  - libcublas\n")
    proc = envguard(["lock", "--check"], cwd=tmp_path)
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "variant cuda-12.9: conda-lock.cuda-12.9.yml is stale" in proc.stderr
    assert "cuda-12.6" not in proc.stderr and "variant cpu: conda-lock.cpu.yml is fresh" in proc.stdout

    # an edit of the common file moves what it forces, in every variant, and nothing else
    spec.write_text(spec.read_text().replace("  - numpy\n", "  - numpy\n  - scipy\n"))
    proc = envguard(["lock", "--format", "json"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["schema"] == "envguard.lock-variants/1" and [v["name"] for v in doc["variants"]] == list(locks)
    _documented(doc)
    for v in doc["variants"]:
        changes = v["changes"]["platforms"][0]["changes"]
        assert {c["change"] for c in changes} == {"added"}, changes
        scipy = next(c for c in changes if c["name"] == "scipy")
        assert scipy["reason"]["kind"] == "requested" or scipy["reason"]["kind"] == "spec"
        assert scipy["reason"]["file"] == "environment.yml"
    assert all(not [d for d in b["differences"] if not d["forced"]] for b in doc["between"])
    scipys = {_records(p, "linux-64")["scipy"] for p in locks.values()}
    assert len(scipys) == 1

    # --update NAME moves it in every variant, to the same record
    proc = envguard(["lock", "--update", "numpy"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    numpys = {_records(p, "linux-64")["numpy"] for p in locks.values()}
    assert len(numpys) == 1 and not next(iter(numpys)).startswith("numpy-1.26."), numpys
    assert envguard(["lock", "--check"], cwd=tmp_path).returncode == 0


@pytest.mark.slow
def test_init_solves_every_variant_against_the_records(realdata_channel, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the channel answers, every variant is solved against its records before anything is written (init's
    own check, per variant); a CUDA line those records lack is refused as a single --cuda refuses it."""
    monkeypatch.delenv("ENVGUARD_OFFLINE", raising=False)
    out = tmp_path / "a" / "environment.yml"
    out.parent.mkdir()
    made = init_variants(["cpu", "12.6", "12.9"], python="3.12", torch="2.7", platforms=["linux-64"], output=out,
                         channel_url=realdata_channel.url)
    assert made.spec.evidence.startswith("checked against conda-forge records")
    assert [n for n, _p, _r in made.variants] == ["cpu", "cuda-12.6", "cuda-12.9"]
    out = tmp_path / "b" / "environment.yml"
    out.parent.mkdir()
    with pytest.raises(UserError) as e:  # the records hold no CUDA 13 torch 2.7 (nor any CUDA 13 pytorch)
        init_variants(["cpu", "13.0"], python="3.12", torch="2.7", platforms=["linux-64"], output=out,
                      channel_url=realdata_channel.url)
    assert e.value.message == "conda-forge builds torch 2.7 for CUDA 12.6 and 12.9 on linux-64; use --cuda 12.9"
    assert list(out.parent.iterdir()) == []


@pytest.mark.slow
def test_cpu_variant_on_osx_arm64_beside_a_linux_cuda_variant(realdata_channel, tmp_path: Path) -> None:
    proc = envguard(["init", "--python", "3.13", "--torch", "2.8", "--cuda", "cpu", "--cuda", "12.9", "--platform",
                     "linux-64", "--platform", "osx-arm64"], cwd=tmp_path, env={**_env(), "ENVGUARD_OFFLINE": "1"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    _use_channel(tmp_path / "environment.yml", realdata_channel.url)
    assert yaml.safe_load((tmp_path / "variants" / "cuda-12.9.yml").read_text())["platforms"] == ["linux-64"]
    proc = envguard(["lock"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    cpu, cuda = read_lock(tmp_path / "conda-lock.cpu.yml"), read_lock(tmp_path / "conda-lock.cuda-12.9.yml")
    assert cpu.platforms == ["linux-64", "osx-arm64"] and cuda.platforms == ["linux-64"]
    osx = _records(tmp_path / "conda-lock.cpu.yml", "osx-arm64")
    assert osx["pytorch"].startswith("pytorch-2.8.0-cpu_")
    assert _records(tmp_path / "conda-lock.cuda-12.9.yml", "linux-64")["pytorch"].startswith("pytorch-2.8.0-cuda129_")
    assert "cuda-12.9 vs cpu on linux-64:" in proc.stdout and "differ although" not in proc.stdout


def test_lock_cuda_flag_is_refused_in_a_variant_project(tmp_path: Path) -> None:
    (tmp_path / "variants").mkdir()
    (tmp_path / "environment.yml").write_text(_BASE)
    (tmp_path / "variants" / "cpu.yml").write_text("dependencies:\n  - pytorch=2.7.*=cpu*\n")
    proc = envguard(["lock", "--cuda", "12.6"], cwd=tmp_path)
    assert proc.returncode == 2 and "each variant names its own CUDA line" in proc.stderr, proc.stderr
    proc = envguard(["lock", "--check", "--platform", "linux-aarch64"], cwd=tmp_path)
    assert proc.returncode == 2 and "no variant is locked for linux-aarch64" in proc.stderr, proc.stderr
    proc = envguard(["lock", "--check"], cwd=tmp_path)
    assert proc.returncode == 4 and "variant cpu: conda-lock.cpu.yml is missing" in proc.stderr, proc.stderr
    (tmp_path / "variants" / "notes.yml").write_text("just a note\n")
    proc = envguard(["lock", "--check"], cwd=tmp_path)
    assert proc.returncode == 2 and "notes.yml" in proc.stderr and "not a variant overlay" in proc.stderr
    proc = envguard(["lint"], cwd=tmp_path)  # lint names it too, as a file that is neither kind
    assert proc.returncode == 2 and "variants/notes.yml: neither an environment file" in proc.stderr, proc.stderr


def _env() -> dict[str, str]:
    import os

    return os.environ.copy()


def _conda_lock_reads(path: Path) -> None:
    """conda-lock's own reader parses the lock (in a subprocess: its models, not ours)."""
    code = ("import sys, pathlib\nfrom conda_lock.lockfile import parse_conda_lock_file\n"
            "lf = parse_conda_lock_file(pathlib.Path(sys.argv[1]))\n"
            "print(len(lf.package), sorted(lf.metadata.custom_metadata))\n")
    proc = subprocess.run([str(CONDA_LOCK_PY), "-c", code, str(path)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "envguard.variant" in proc.stdout


def _documented(doc: dict) -> None:
    """The document's fields and counts are the ones docs/json.md lists for envguard.lock-variants/1."""
    import re

    text = (REPO / "docs" / "json.md").read_text(encoding="utf-8").split("## `envguard.lock-variants/1`", 1)[1]
    section = text.split("\n## ", 1)[0]
    rows = dict(re.findall(r"^\| `(\w+)` \| [a-z ]+ \| (.*) \|$", section, re.M))
    assert sorted(rows) == sorted(doc)
    assert sorted(re.findall(r"`(\w+)`", rows["counts"].split("(")[0])) == sorted(doc["counts"])
