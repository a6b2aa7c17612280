"""`envguard init` then `envguard lock` against conda-forge's REAL records.

The channel is built from the package records of the real locks in ../shared/realworld
(tests/support/metadata_channel.py): conda-forge's own dependency graph, not our assumptions. It is a sample:
it holds only what those solves picked.
So the tests tell three cases apart, using the compatibility data for "what exists":

* covered: some real lock solved that Python + torch + CUDA line on that platform, so all its records are here;
  init must write it and lock must solve it, choosing the right CUDA build per platform;
* conda-forge lacks it (the data says so): init refuses it with exit 2, before anything is solved;
* not in the sample: the data says it exists, the sample holds no solution for it: nothing is asserted about
  the solve, only that init accepts it.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml
from support.lock_support import envguard

from envguard import compat
from envguard.errors import BackendError, UserError
from envguard.init import CPU, init
from envguard.lock import lock
from envguard.lock.lockfile import host_records, read_lock
from envguard.versions import line_key

REPO = Path(__file__).resolve().parent.parent
CF = compat.CONDA_FORGE
_PY_TAG = re.compile(r"_py3(\d+)(?=[_h])")


def _mm(version: str) -> str:
    return ".".join(version.split(".")[:2])


def _kind(build: str) -> str:
    """``cpu`` or the CUDA line of a conda-forge pytorch build string."""
    line = compat.cuda_in_build(build)
    return line if line and line != "any" else CPU


def _python_of(build: str) -> str | None:
    m = _PY_TAG.search(build)
    return f"3.{m.group(1)}" if m else None


def _use_channel(env_file: Path, url: str) -> None:
    """The file init wrote names conda-forge; point it at the local copy of conda-forge's records."""
    text = env_file.read_text(encoding="utf-8")
    assert "  - conda-forge\n" in text
    env_file.write_text(text.replace("  - conda-forge\n", f"  - {url}\n"), encoding="utf-8")


def _covered(envs) -> dict[tuple[str, str, str], set[str]]:
    """(python, torch line, CUDA line or cpu) -> platforms on which a real lock solved exactly that."""
    c = compat.load()
    out: dict[tuple[str, str, str], set[str]] = {}
    for e in envs:
        torch, python = e.get("pytorch", CF), e.get("python", CF)
        if torch is None or python is None or _mm(python[0]) not in c.supported_python:
            continue
        kind = _kind(torch[1])
        if kind != CPU:
            cv = e.get("cuda-version", CF)
            if cv is None:
                continue
            kind = _mm(cv[0])
        out.setdefault((_mm(python[0]), _mm(torch[0]), kind), set()).add(e.platform)
    return out


def test_the_sample_never_contradicts_the_data(realdata_channel, standard_channel) -> None:
    """Every real conda-forge pytorch record is a build the data lists (release, platform, CUDA line, Python), and
    every real cuda-version record constrains __cuda to its major line, as the synthetic test channel now does."""
    route = compat.load().route(CF)
    seen = 0
    for rec in realdata_channel.find("pytorch"):
        rel = route.release(_mm(rec.version))
        assert rel is not None and rel.released, f"{rec.filename}: the data has no released torch {rec.version}"
        if rel.versions:
            assert rec.version in rel.versions, rec.filename
        kind = _kind(rec.build)
        if kind == CPU:
            assert rec.subdir in rel.cpu, f"{rec.filename}: the data has no CPU build on {rec.subdir}"
        else:
            assert kind in rel.cuda_on(rec.subdir), f"{rec.filename}: the data has no CUDA {kind} on {rec.subdir}"
        if _python_of(rec.build):
            assert _python_of(rec.build) in rel.python, rec.filename
        seen += 1
    assert seen >= 60  # 2.1 to 2.12, CPU and CUDA, four platforms
    versions = realdata_channel.find("cuda-version")
    assert {"12.6", "12.8", "12.9", "13.0"} <= {r.version for r in versions}
    for rec in versions:
        assert _mm(rec.version) in route.toolkit_lines, rec.filename
        if rec.constrains_known:
            assert f"__cuda >={rec.version.split('.')[0]}" in rec.entry["constrains"], rec.filename
    import json

    synthetic = json.loads((standard_channel.path / "noarch" / "repodata.json").read_text())
    for fn, entry in {**synthetic["packages"], **synthetic["packages.conda"]}.items():
        if entry["name"] == "cuda-version":
            assert f"__cuda >={entry['version'].split('.')[0]}" in entry["constrains"], fn


@pytest.mark.slow
def test_every_covered_combination_inits_and_locks(realdata_channel, realdata_environments, tmp_path: Path) -> None:
    """What real locks solved, init writes and lock solves, with each platform's newest build that the written
    cuda-version accepts (linux-64 cuda129 and win-64 cuda128 under cuda-version 12.9) and the driver assumption
    taken from the spec (no --cuda)."""
    c = compat.load()
    covered = _covered(realdata_environments)
    assert len(covered) >= 15
    cuda_combos = 0
    for i, ((py, line, cuda), plats) in enumerate(sorted(covered.items())):
        rel = c.route(CF).release(line)
        assert rel is not None
        plats = sorted(p for p in plats if (p in rel.cpu if cuda == CPU else rel.cuda_on(p)))
        out = tmp_path / str(i) / "environment.yml"
        init(python=py, torch=line, cuda=cuda, platforms=plats, output=out)  # the data admits what real locks hold
        _use_channel(out, realdata_channel.url)
        try:
            result = lock([out])
        except BackendError as e:  # pragma: no cover - the failure message is the point
            pytest.fail(f"{(py, line, cuda, plats)} was solved by a real lock but not here: {e.message}")
        assert result.cuda == ("none" if cuda == CPU else cuda), (py, line, cuda)
        if cuda != CPU:
            cuda_combos += 1
            assert result.cuda_note.startswith(f"__cuda={cuda}, from cuda-version={cuda} in ")
        locked = read_lock(out.parent / "conda-lock.yml")
        for p in plats:
            torch = next(e for e in host_records(locked, p) if e.name == "pytorch")
            assert torch.version.startswith(line + "."), (py, line, cuda, p, torch.version)
            assert _python_of(torch.build) == py, (py, p, torch.build)
            got = _kind(torch.build)
            if cuda == CPU:
                assert got == CPU, (py, line, p, torch.build)
                continue
            # the newest build in the sample that cuda-version=cuda admits: same major, line <= cuda
            sample = {_kind(r.build) for r in realdata_channel.find("pytorch", version=f"{line}.*", subdir=p)
                      if _python_of(r.build) == py}
            fits = [k for k in sample if k != CPU and k.split(".")[0] == cuda.split(".")[0]
                    and line_key(k) <= line_key(cuda)]
            assert got == max(fits, key=line_key), (py, line, cuda, p, torch.build, sorted(sample))
            # and the data agrees that this build takes that cuda-version there
            built = rel.build_line(p, cuda)
            assert built is not None and line_key(got) <= line_key(built), (p, got, built)
    assert cuda_combos >= 5


@pytest.mark.parametrize(("args", "message"), [
    # the issue's own case: conda-forge has no CUDA 12.6 build of 2.8-2.13
    ({"cuda": "12.6", "platforms": ["linux-64"]},
     "conda-forge builds torch 2.13 for CUDA 12.9 and 13.0 on linux-64; use --cuda 12.9"),
    ({"cuda": "12.6"}, "conda-forge builds torch 2.13 for CUDA 12.9 and 13.0 on linux-64, for CUDA 12.8 and 13.0 "
                       "on win-64; use --cuda 12.9"),
    ({"torch": "2.10", "cuda": "12.8", "platforms": ["linux-64", "win-64"]},
     "conda-forge builds torch 2.10 for CUDA 12.9 and 13.0 on linux-64; use --cuda 12.9"),
    ({"torch": "2.8", "cuda": "13.0", "platforms": ["linux-64"]},
     "conda-forge builds torch 2.8 for CUDA 12.9 on linux-64; use --cuda 12.9"),
    ({"torch": "2.12", "cuda": "12.9", "platforms": ["osx-arm64"]},
     "conda-forge builds torch 2.12 for CUDA on linux-64, linux-aarch64 and win-64 only, not osx-arm64; "
     "drop --platform osx-arm64, or use --cuda cpu"),
    ({"torch": "2.4", "platforms": ["win-64"]},
     "conda-forge builds torch 2.4 for CPU on linux-64, linux-aarch64, osx-64 and osx-arm64 only, not win-64; "
     "drop --platform win-64"),
    ({"torch": "2.14"}, "torch 2.14 has no release evidence on conda-forge in envguard's data (status unknown: the "
                        "feedstock snapshot of 2026-08-13 ends at 2.13.0; PyPI released 2.14.0 on 2026-09-02); "
                        "use --torch 2.13"),
    ({"torch": "2.2"}, "torch 2.2 is not in conda-forge's releases in envguard's data (conda-forge: 2.0–2.13); "
                       "use --channel pytorch or --torch 2.1 or --torch 2.3"),
    ({"torch": "2.16"}, "torch 2.16 is not in envguard's compatibility data (conda-forge: 2.0–2.13); "
                        "use --torch 2.13"),
    ({"torch": "2.7", "cuda": "12.7"}, "conda-forge packages no CUDA 12.7 (its CUDA 12 lines: 12.0, 12.1, 12.2, "
                                       "12.3, 12.4, 12.5, 12.6, 12.8 and 12.9); use --cuda 12.8"),
    # a line past the data is unknown to envguard, not known to be missing (13.2 is in the data since
    # conda-forge packaged it on 2026-03-09: tests/test_compat_facts.py)
    ({"cuda": "13.3"}, "CUDA 13.3 is newer than the conda-forge CUDA lines in envguard's data (its CUDA 13 lines: "
                       "13.0, 13.1 and 13.2); use --cuda 13.2, or update envguard"),
])
def test_combinations_conda_forge_lacks_are_refused_before_any_solve(tmp_path: Path, args: dict,
                                                                     message: str) -> None:
    out = tmp_path / "environment.yml"
    with pytest.raises(UserError) as e:
        init(output=out, **args)
    assert e.value.message == message and e.value.exit_code == 2
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_every_line_a_covered_build_lacks_is_refused(realdata_environments, tmp_path: Path) -> None:
    """Around every covered CUDA combination, each other CUDA line that no build on one of its platforms accepts
    (per the data) is refused by init; each one a build accepts is written."""
    c = compat.load()
    route = c.route(CF)
    every_line = sorted({x for r in c.routes.values() for rel in r.releases for x in rel.cuda}
                        | set(route.toolkit_lines), key=line_key)
    refused = written = 0
    for (py, line, cuda), plats in sorted(_covered(realdata_environments).items()):
        rel = route.release(line)
        assert rel is not None
        plats = sorted(p for p in plats if rel.cuda_on(p))
        if cuda == CPU or not plats:
            continue
        for other in every_line:
            out = tmp_path / f"{py}-{line}-{other}.yml"
            if other in route.cuda_choices(rel, plats):
                init(python=py, torch=line, cuda=other, platforms=plats, output=out)
                assert f"cuda-version={other}" in yaml.safe_load(out.read_text())["dependencies"]
                written += 1
            else:
                with pytest.raises(UserError):
                    init(python=py, torch=line, cuda=other, platforms=plats, output=out)
                assert not out.exists()
                refused += 1
    assert refused >= 50 and written >= 10


def test_not_in_the_sample_is_told_apart_from_lacking(realdata_channel, realdata_environments,
                                                      tmp_path: Path) -> None:
    """The data says conda-forge builds these; the sample holds no solution for them. init writes them; a failed
    solve against the sample is then "not in the sample", which the channel itself shows."""
    covered = _covered(realdata_environments)
    # no 2.13 record at all in the sample: the spec's line asks for what the channel lacks (exit 2, the line and
    # the versions it has); the win-64 cuda128 build exists, but only beside 12.9 libraries: a conflict (exit 6)
    cases = [("3.11", "2.13", "12.9", ["linux-64"], UserError, "no pytorch 2.13.* for linux-64"),
             ("3.11", "2.12", "12.8", ["win-64"], BackendError, "cannot solve")]
    for py, line, cuda, plats, error, words in cases:
        assert not any(p in covered.get((py, line, cuda), set()) for p in plats)
        out = tmp_path / line / "environment.yml"
        init(python=py, torch=line, cuda=cuda, platforms=plats, output=out)
        _use_channel(out, realdata_channel.url)
        with pytest.raises(error) as e:
            lock([out])
        assert words in e.value.message
    assert realdata_channel.find("pytorch", version="2.13.*") == []


def _readme_workflow() -> list[list[str]]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    block = text.split("## The workflow", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    return [shlex.split(ln, comments=True) for ln in block.splitlines() if ln.strip()]


@pytest.mark.slow
def test_readme_init_then_lock_works_as_written(realdata_channel, tmp_path: Path) -> None:
    """README's workflow, `envguard init …` then `envguard lock`, as written: the only change is the channel,
    conda-forge's real records served from disk instead of conda-forge itself."""
    steps = _readme_workflow()
    init_argv = next(a for a in steps if a[:2] == ["envguard", "init"])
    lock_argv = next(a for a in steps if a[:2] == ["envguard", "lock"])
    assert lock_argv == ["envguard", "lock"]
    proc = envguard(init_argv[1:], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "next: envguard lock"
    _use_channel(tmp_path / "environment.yml", realdata_channel.url)
    proc = envguard(lock_argv[1:], cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    spec = yaml.safe_load((tmp_path / "environment.yml").read_text())
    cuda = next(d.split("=")[1] for d in spec["dependencies"] if isinstance(d, str) and d.startswith("cuda-version="))
    assert f"__cuda={cuda}, from cuda-version={cuda} in environment.yml" in proc.stdout, proc.stdout
    locked = read_lock(tmp_path / "conda-lock.yml")
    for p in spec["platforms"]:
        torch = next(e for e in host_records(locked, p) if e.name == "pytorch")
        assert torch.build.startswith("cuda") and torch.url.startswith("https://conda.anaconda.org/conda-forge/")
    assert envguard(["lock", "--check"], cwd=tmp_path).returncode == 0


def test_the_example_project_solves_on_the_real_records(realdata_channel, tmp_path: Path) -> None:
    env = tmp_path / "environment.yml"
    env.write_text((REPO / "examples" / "pytorch-project" / "environment.yml").read_text(encoding="utf-8"))
    _use_channel(env, realdata_channel.url)
    result = lock([env])
    assert result.cuda == "12.9"
    torch = next(e for e in host_records(read_lock(tmp_path / "conda-lock.yml"), "linux-64") if e.name == "pytorch")
    assert torch.build.startswith("cuda129_")
