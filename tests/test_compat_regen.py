"""scripts/regen_compat.py: the conda-forge rows of compat.yaml regenerated from channel records.

Two channels: conda-forge's real records from ../shared/realworld's locks (a sample: what it regenerates is
a part of every committed row it covers, and whole for the cells it holds completely), and a records-only
channel that holds every build the committed rows describe (the script must reproduce those rows exactly,
and print no difference).
"""

from __future__ import annotations

import copy
import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from envguard import compat

pytestmark = pytest.mark.slow  # every test starts the script in its own interpreter

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "regen_compat.py"
DATA = REPO / "envguard" / "data" / "compat.yaml"
CF = compat.CONDA_FORGE


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=300,
                          cwd=REPO, check=False)


def _rows() -> dict[str, Any]:
    return compat.load_all()["routes"][CF]["releases"]


def _changes(proc: subprocess.CompletedProcess[str]) -> dict[str, tuple[Any, Any]]:
    out = {}
    for line in proc.stdout.splitlines()[1:]:
        if line.startswith("#"):
            continue
        key, _, rest = line.partition(": ")
        if key.startswith("+ ") or key == "wrote":
            out[key] = (None, rest)
            continue
        was, _, now = rest.partition(" -> ")
        out[key] = (json.loads(was), json.loads(now))
    return out


def _part_of(now: Any, was: Any) -> bool:
    if isinstance(now, dict):
        return isinstance(was, dict) and all(k in was and _part_of(v, was[k]) for k, v in now.items())
    if isinstance(now, list):
        return isinstance(was, list) and set(now) <= set(was)
    return now == was


def test_over_the_real_records_every_row_it_covers_is_reproduced_or_a_part_of_it(realdata_channel) -> None:
    proc = _run("--url", realdata_channel.url)
    assert proc.returncode == 1, proc.stderr  # a sample differs: it holds less
    changes = _changes(proc)
    assert not [k for k in changes if k.startswith("+ ")], changes  # no release the data lacks
    for key, (was, now) in changes.items():
        if key == "toolkit_lines":
            assert set(now) <= set(was), (key, now)  # every cuda-version line of the records is in the data
            continue
        assert _part_of(now, was), (key, was, now)  # never a line, Python or platform the data lacks
    # cells the sample holds completely come out exactly as committed
    for line in ("2.6", "2.7", "2.8", "2.9", "2.10", "2.11", "2.12"):
        assert f"{line}.versions" not in changes, changes.get(f"{line}.versions")
    for line in ("2.8", "2.9"):
        assert f"{line}.cuda" not in changes  # linux-64 12.9, linux-aarch64 12.9, win-64 12.8
        assert f"{line}.variants" not in changes and f"{line}.glibc" not in changes
    assert "2.1.versions" in changes and changes["2.1.versions"][1] == ["2.1.2"]  # the sample's only 2.1


def _regenerate_sample(channel_url: str, target: Path) -> subprocess.CompletedProcess[str]:
    """The last regeneration again, as compat.yaml's ``regenerated`` block records it, writing ``target``."""
    block = compat.load_all()["routes"][CF]["regenerated"]
    return _run("--url", channel_url, "--sample", "--write", "--data", str(target), "--date", block["date"],
                "--records", block["records"])


def test_the_recorded_sample_gives_the_committed_rows_and_the_recorded_digest(realdata_channel,
                                                                               tmp_path: Path) -> None:
    """compat.yaml records what its last regeneration read (#39 point 11): the conda-forge records of
    ../shared/realworld, a sample. Run again over the metadata channel of those records, the script reads a
    record set of the recorded size and digest and writes a copy of compat.yaml back exactly as committed: the
    release rows it covers, the toolkit lines and the block itself."""
    block = compat.load_all()["routes"][CF]["regenerated"]
    assert block["channel"] == CF and block["sample"] is True and "../shared/realworld" in block["records"]
    committed = DATA.read_text(encoding="utf-8")
    target = tmp_path / "compat.yaml"
    target.write_text(committed, encoding="utf-8")
    proc = _regenerate_sample(realdata_channel.url, target)
    assert proc.returncode == 0, proc.stdout + proc.stderr  # the sample shows no build the rows lack
    assert f"# {block['count']} records read (a sample), digest {block['digest']}" in proc.stdout.splitlines(), \
        proc.stdout  # the same records: a changed corpus or reader is a new record set, to be recorded
    covered = proc.stdout.splitlines()[0]
    assert "9 release lines" in covered, covered  # 2.1, 2.4, 2.6-2.12: the rows it covers
    assert target.read_text(encoding="utf-8") == committed


def test_over_the_sample_a_row_missing_what_the_records_show_gets_it_back(realdata_channel, tmp_path: Path) -> None:
    """The sample's records are evidence: a row that lost a version, a Python line or a CUDA platform they show
    is printed as a difference, and --write puts it back, to the byte."""
    committed = DATA.read_text(encoding="utf-8")
    at21, at29 = committed.index('      "2.1":\n'), committed.index('      "2.9":\n')
    edited = committed[:at21] + committed[at21:].replace('versions: ["2.1.0", "2.1.2"]', 'versions: ["2.1.0"]', 1)
    edited = edited[:at29] + edited[at29:].replace('python: ["3.10", "3.11", "3.12", "3.13"]',
                                                   'python: ["3.10", "3.11", "3.13"]', 1)
    assert edited.count("\n") == committed.count("\n") and edited != committed
    target = tmp_path / "compat.yaml"
    target.write_text(edited, encoding="utf-8")
    proc = _regenerate_sample(realdata_channel.url, target)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    changed = {ln.split(":")[0] for ln in proc.stdout.splitlines() if not ln.startswith(("#", "wrote"))}
    assert changed == {"2.1.versions", "2.9.python"}, proc.stdout
    assert target.read_text(encoding="utf-8") == committed


def test_the_records_digest_is_defined_by_the_sorted_records() -> None:
    """sha256 over one line "<subdir>/<file name>\\t<sha256>\\n" per record, sorted: the order the channel answers
    in does not matter, a rebuilt package (same file name, another hash) does."""
    from envguard.channelfacts import records_digest

    a = ("linux-64", "pytorch-2.9.1-cuda129_py312_h0_300.conda", "ab" * 32)
    b = ("noarch", "cuda-version-12.9-h4f385c5_3.conda", "")
    expected = hashlib.sha256(f"linux-64/{a[1]}\t{a[2]}\nnoarch/{b[1]}\t\n".encode()).hexdigest()
    assert records_digest([b, a]) == records_digest([a, b]) == f"sha256:{expected}"
    assert records_digest([(a[0], a[1], "cd" * 32), b]) != records_digest([a, b])


def test_a_malformed_regenerated_block_is_named_by_validate() -> None:
    raw = copy.deepcopy(compat.load_all())  # the loaded data is shared: change a copy
    assert compat.validate(raw) == []
    block = raw["routes"][CF]["regenerated"]
    block.update(digest="md5:00", date="04.12.2026", count=0, sample="yes", extra=1)
    del block["records"]
    problems = [p for p in compat.validate(raw) if p.startswith(f"routes.{CF}.regenerated")]
    assert {p.split(":")[0] for p in problems} == {f"routes.{CF}.regenerated" + k for k in (
        "", ".records", ".date", ".count", ".digest", ".sample")}, problems


def _record(subdir: str, version: str, build: str, depends: list[str]) -> tuple[str, dict[str, Any]]:
    return f"pytorch-{version}-{build}.conda", {"name": "pytorch", "version": version, "build": build,
                                                "build_number": 0, "depends": depends, "subdir": subdir}


def complete_channel(root: Path, rows: dict[str, Any], toolkit: list[str], variants: list[dict],
                     solvable: bool = False) -> Path:
    """Every build the rows describe, as records: one per version, platform, kind and Python. ``solvable``:
    with python, numpy and pip records too, so that the files init writes solve there."""
    by_subdir: dict[str, dict[str, Any]] = {"noarch": {}}
    pythons: dict[str, set[str]] = {}
    marker = {v["name"]: v["depends"] for v in variants}
    for row in rows.values():
        if row.get("status") != "released":
            continue
        cuda = row.get("cuda") or {}
        if isinstance(cuda, list):
            cuda = {p: cuda for p in ("linux-64", "win-64")}
        glibc = row.get("glibc") or {}
        for version in row["versions"]:
            for py in row["python"]:
                tag = py.replace(".", "")
                kinds = [(p, "cpu") for p in row["cpu"]] + [(p, c) for p, lines in cuda.items() for c in lines]
                for i, (subdir, kind) in enumerate(kinds):
                    deps = [f"python >={py},<3.{int(py.split('.')[1]) + 1}.0a0"]
                    if subdir.startswith("linux") and kind in glibc:
                        deps.append(f"__glibc >={glibc[kind]},<3.0.a0")
                    names = (row.get("variants") or {}).get(subdir, {}).get(kind, [None])
                    for name in names:
                        d = deps + ([marker[name]] if name else [])
                        if kind == "cpu":
                            build = f"cpu_generic_py{tag}_h{i}_{names.index(name)}"
                        else:
                            build = f"cuda{kind.replace('.', '')}_generic_py{tag}_h{i}_{names.index(name)}"
                            d.append(f"cuda-version >={kind},<{int(kind.split('.')[0]) + 1}")
                        fn, entry = _record(subdir, version, build, d)
                        by_subdir.setdefault(subdir, {})[fn] = entry
                        pythons.setdefault(subdir, set()).add(py)
    for v in toolkit:
        by_subdir["noarch"][f"cuda-version-{v}-h0_3.conda"] = {
            "name": "cuda-version", "version": v, "build": "h0_3", "build_number": 3, "depends": [],
            "constrains": [f"__cuda >={v.split('.')[0]}"], "subdir": "noarch"}
    for subdir, lines in pythons.items() if solvable else ():
        for py in lines:
            by_subdir[subdir][f"python-{py}.0-h0_0_cpython.conda"] = {
                "name": "python", "version": f"{py}.0", "build": "h0_0_cpython", "build_number": 0, "depends": [],
                "subdir": subdir}
        by_subdir[subdir]["numpy-2.0.0-h0_0.conda"] = {"name": "numpy", "version": "2.0.0", "build": "h0_0",
                                                       "build_number": 0, "depends": [], "subdir": subdir}
    if solvable:
        by_subdir["noarch"]["pip-25.0-pyh0_0.conda"] = {"name": "pip", "version": "25.0", "build": "pyh0_0",
                                                       "build_number": 0, "depends": [], "subdir": "noarch",
                                                       "noarch": "python"}
    for subdir, entries in by_subdir.items():
        (root / subdir).mkdir(parents=True, exist_ok=True)
        doc = {"info": {"subdir": subdir}, "repodata_version": 1, "packages": {}, "packages.conda": entries}
        (root / subdir / "repodata.json").write_text(json.dumps(doc), encoding="utf-8")
    return root


def test_over_a_complete_channel_the_committed_rows_are_reproduced_exactly(tmp_path: Path) -> None:
    data = compat.load_all()["routes"][CF]
    channel = complete_channel(tmp_path / "conda-forge", data["releases"], data["toolkit_lines"], data["variants"])
    proc = _run("--url", channel.as_uri())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 difference(s)" in proc.stdout.splitlines()[0]


def test_a_change_on_the_channel_is_printed_and_written(tmp_path: Path) -> None:
    """conda-forge ships 2.14 with a CUDA 13.2 build on linux-64: the script prints it, --write records it, and
    the rewritten file passes the schema with every curated part untouched."""
    data = copy.deepcopy(compat.load_all()["routes"][CF])
    rows = data["releases"]
    rows["2.14"] = copy.deepcopy(rows["2.13"]) | {"versions": ["2.14.0"]}
    rows["2.14"]["cuda"]["linux-64"] = ["12.9", "13.0", "13.2"]
    channel = complete_channel(tmp_path / "conda-forge", rows, data["toolkit_lines"], data["variants"])
    target = tmp_path / "compat.yaml"
    target.write_text((REPO / "envguard" / "data" / "compat.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    proc = _run("--url", channel.as_uri(), "--write", "--data", str(target))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert any(ln.startswith("2.14.status: \"unknown\" -> \"released\"") for ln in lines), lines
    assert any(ln.startswith("2.14.cuda: {} -> {\"linux-64\": [\"12.9\", \"13.0\", \"13.2\"]") for ln in lines), lines
    first, second = target.read_text(encoding="utf-8").split("\n---\n", 1)
    written = {**yaml.safe_load(first), **yaml.safe_load(second)}
    assert compat.validate(written) == []
    new = written["routes"][CF]
    assert new["releases"]["2.14"]["status"] == "released"
    assert new["releases"]["2.14"]["cuda"]["linux-64"] == ["12.9", "13.0", "13.2"]
    assert new["releases"]["2.13"] == {**_rows()["2.13"], "source": new["releases"]["2.13"]["source"]}
    assert new["arch"] == data["arch"] and new["variants"] == data["variants"]  # curated: untouched
    assert written["routes"]["pypi"] == compat.load_all()["routes"]["pypi"]
    assert new["as_of"] != data["as_of"]
    # run again over the same channel: nothing left to change
    again = _run("--url", channel.as_uri(), "--data", str(target))
    assert again.returncode == 0, again.stdout


def test_an_unreachable_channel_exits_2() -> None:
    proc = _run("--url", "http://127.0.0.1:9/conda-forge")
    assert proc.returncode == 2 and proc.stderr.startswith("error: conda-forge (")
