"""A lock is whole, or it is an integrity failure (issue #35, point 4).

A real lock that `envguard lock` writes from the standard test channel, then damaged as a hand edit or a bad
merge damages one: cut short at a record, the python record removed, a record another one depends on removed,
a dependency's constraint that its record no longer meets. conda-lock's content hash covers the spec, not the
package list, so every one of them is still "fresh": `lock --check` said so (exit 0), `lint` found nothing,
`create --frozen` built what was left. Now every command refuses it the same way, naming the record, the
missing dependency and the platform: lint EG159 (exit 1), lock --check, create (every path), check (EG518)
and diff exit 3, before anything is fetched or built. The real-world locks stay quiet.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from support.channels import HOST_PY, host_platform
from support.create_fixtures import make_lock, run_cli, write_env

from envguard import lockwhole, sources
from envguard.lock import read_lock

PLATFORM = host_platform()


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, channel_url: str, pypi_index) -> Path:
    """environment.yml and the conda-lock.yml envguard wrote for it: python, pytorch (needs numpy), egtool
    (noarch: python), pip, and one pip: package."""
    env_file = write_env(tmp_path_factory.mktemp("whole") / "proj", channel_url,
                         [f"python={HOST_PY}", "pytorch=2.13.0=cpu*", "egtool", "pip"], pip=["egdemo-b==1.0"],
                         pip_index=pypi_index.url)
    make_lock(env_file)
    return env_file.parent


def _entries(text: str) -> tuple[str, list[str]]:
    """A conda-lock file's text as (everything up to `package:`, one text block per record)."""
    head, _, body = text.partition("\npackage:\n")
    blocks = ["- " + b for b in ("\n" + body).split("\n- ")[1:]]
    return head + "\npackage:\n", [b if b.endswith("\n") else b + "\n" for b in blocks]


def _name(block: str) -> str:
    return block.split("\n", 1)[0].removeprefix("- name:").strip()


def _damaged(project: Path, tmp_path: Path, how: str) -> Path:
    """A copy of the project with its lock damaged ``how``: "cut" (the second half of the records gone, at a
    record boundary), "no-python", "no-numpy" (pytorch needs it), "constraint" (pytorch asks for a numpy
    the lock does not hold)."""
    proj = tmp_path / "proj"
    shutil.copytree(project, proj)
    lock = proj / "conda-lock.yml"
    head, blocks = _entries(lock.read_text())
    if how == "cut":
        blocks = blocks[: len(blocks) // 2]
    elif how in ("no-python", "no-numpy"):
        blocks = [b for b in blocks if _name(b) != how.removeprefix("no-")]
    elif how == "constraint":
        blocks = [re.sub(r"(?m)^    numpy: .*$", "    numpy: '>=99'", b) if _name(b) == "pytorch" else b
                  for b in blocks]
    lock.write_text(head + "".join(blocks))
    assert lock.read_text() != (project / "conda-lock.yml").read_text()
    return proj


def test_the_lock_envguard_wrote_is_whole(project: Path, capsys) -> None:
    lock = read_lock(project / "conda-lock.yml")
    assert {p.name for p in lock.packages} >= {"python", "pytorch", "numpy", "egtool", "pip", "egdemo-b"}
    assert lockwhole.holes(lockwhole.by_platform(lock.packages)) == []
    lockfile = str(project / "conda-lock.yml")
    assert run_cli(capsys, "lock", "--check", "-f", str(project / "environment.yml"), "--lockfile", lockfile)[0] == 0
    code, out, _ = run_cli(capsys, "lint", lockfile, "--format", "json")
    assert "EG159" not in out, out


@pytest.mark.parametrize("how,record,missing", [
    ("no-python", "egtool", "python"),
    ("no-numpy", "pytorch", "numpy"),
    ("constraint", "pytorch", "numpy >=99"),
])
def test_lint_names_the_record_the_missing_dependency_and_the_platform(project: Path, tmp_path: Path, capsys,
                                                                        how: str, record: str, missing: str) -> None:
    lockfile = _damaged(project, tmp_path, how) / "conda-lock.yml"
    code, out, err = run_cli(capsys, "lint", str(lockfile), "--format", "json")
    assert code == 1, err
    found = [f for f in json.loads(out)["findings"] if f["code"] == "EG159"]
    assert found and all(f["severity"] == "error" for f in found), found
    text = " | ".join(f["message"] for f in found)
    assert f"`{missing}" in text and PLATFORM in text and "not whole" in text, text
    assert any(f["message"].split(": ", 1)[1].startswith(f"{record} ") for f in found), text
    if how == "no-python":  # the noarch: python record and the pip record need their interpreter too
        assert "more packages need python" in text, text


@pytest.mark.parametrize("how", ["cut", "no-python", "no-numpy", "constraint"])
def test_lock_check_says_integrity_not_fresh(project: Path, tmp_path: Path, capsys, how: str) -> None:
    proj = _damaged(project, tmp_path, how)
    code, out, err = run_cli(capsys, "lock", "--check", "-f", str(proj / "environment.yml"))
    assert code == 3, (out, err)
    assert "is not whole" in err and PLATFORM in err and "fresh" not in out, err


@pytest.mark.parametrize("path", ["frozen", "lockfile", "locked", "implicit"])
def test_create_refuses_before_anything_is_fetched(project: Path, tmp_path: Path, capsys,
                                                   monkeypatch: pytest.MonkeyPatch, path: str) -> None:
    proj = _damaged(project, tmp_path, "no-python")
    cache = tmp_path / "pkgs"
    monkeypatch.setenv("ENVGUARD_PKGS_DIR", str(cache))
    monkeypatch.chdir(proj)
    target = tmp_path / "env"
    args = {"frozen": ["--lockfile", "conda-lock.yml", "--frozen"], "lockfile": ["--lockfile", "conda-lock.yml"],
            "locked": ["--locked"], "implicit": ["-f", "environment.yml"]}[path]
    code, _, err = run_cli(capsys, "create", "-p", str(target), *args, "--no-check")
    assert code == 3, err
    assert "not whole" in err and "needs `python" in err and PLATFORM in err, err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not target.exists() and not (cache.exists() and any(cache.iterdir()))
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".env")] == []


def test_diff_refuses_a_lock_that_is_not_whole(project: Path, tmp_path: Path, capsys) -> None:
    whole = str(project / "conda-lock.yml")
    broken = str(_damaged(project, tmp_path, "no-numpy") / "conda-lock.yml")
    assert run_cli(capsys, "diff", whole, whole)[0] == 0
    code, out, err = run_cli(capsys, "diff", whole, broken)
    assert code == 3, (out, err)
    assert "side B" in err and "numpy" in err and PLATFORM in err, err


@pytest.mark.slow
def test_check_reports_it_as_an_integrity_finding(project: Path, tmp_path: Path, capsys) -> None:
    target = tmp_path / "env"
    whole = str(project / "conda-lock.yml")
    assert run_cli(capsys, "create", "-p", str(target), "--lockfile", whole, "--frozen", "--no-check")[0] == 0
    code, out, _ = run_cli(capsys, "check", "-p", str(target), "--lockfile", whole, "--no-smoke", "--format", "json")
    assert "EG518" not in out
    broken = _damaged(project, tmp_path, "no-numpy") / "conda-lock.yml"
    code, out, _ = run_cli(capsys, "check", "-p", str(target), "--lockfile", str(broken), "--no-smoke",
                           "--format", "json")
    assert code == 3, out
    found = [f for f in json.loads(out)["findings"] if f["code"] == "EG518"]
    assert len(found) == 1 and found[0]["severity"] == "error"
    assert "pytorch" in found[0]["message"] and "`numpy" in found[0]["message"] and PLATFORM in found[0]["message"]


def test_a_conda_lock_version_mismatch_is_a_warning_a_missing_name_an_error(project: Path, tmp_path: Path,
                                                                              capsys) -> None:
    """Without envguard's metadata the lock is conda-lock's: the dependencies it records for a package conda
    only linked from its cache are that cache's, maybe older than a repodata patch the solve used. A version
    the constraint does not allow is then a lint warning and nothing else refuses it; a name missing is not."""
    proj = _damaged(project, tmp_path, "constraint")
    lock = proj / "conda-lock.yml"
    text = lock.read_text()
    start = text.index("  custom_metadata:\n")
    end = text.index("\npackage:\n", start)
    lock.write_text(text[:start] + text[end + 1:])
    assert "envguard." not in lock.read_text()
    code, out, _ = run_cli(capsys, "lint", str(lock), "--format", "json")
    found = [f for f in json.loads(out)["findings"] if f["code"] == "EG159"]
    assert [f["severity"] for f in found] == ["warning"] and "repodata patch" in found[0]["message"]
    assert run_cli(capsys, "diff", str(lock), str(lock))[0] == 0
    head, blocks = _entries(text[:start] + text[end + 1:])
    lock.write_text(head + "".join(b for b in blocks if _name(b) != "numpy"))
    assert run_cli(capsys, "diff", str(lock), str(lock))[0] == 3


def test_pip_records_alone_are_a_virtualenvs_and_whole(project: Path, tmp_path: Path, capsys) -> None:
    """A lock of pip records alone describes a virtualenv's packages (check -p VENV judges one by it): its
    interpreter is not the lock's to hold. Beside conda records, the pip records need conda's python."""
    lock = tmp_path / "conda-lock.yml"
    head, blocks = _entries((project / "conda-lock.yml").read_text())
    pip = [b for b in blocks if "\n  manager: pip\n" in b]
    assert pip
    lock.write_text(head + "".join(pip))
    code, out, _ = run_cli(capsys, "lint", str(lock), "--format", "json")
    assert "EG159" not in out, out
    assert run_cli(capsys, "diff", str(lock), str(lock))[0] == 0
    conda_pip = next(b for b in blocks if _name(b) == "pip")  # one conda record (noarch: python), the pip ones
    lock.write_text(head + conda_pip + "".join(pip))
    code, out, err = run_cli(capsys, "diff", str(lock), str(lock))
    assert code == 3 and "needs `python" in err and f"{len(pip)} more packages need python" in err, err


def test_pixi_lock_the_same_rule(realworld: Path, tmp_path: Path, capsys) -> None:
    """pixi.lock: the python record of one environment's platform removed from its list (the package itself
    stays, another environment uses it): lint EG159 names that environment, diff exits 3."""
    src = realworld / "pixi" / "wang7x__pixi-pytorch-example__pixi.lock"
    lines = src.read_text().splitlines(keepends=True)
    desc = sources.load(str(src), first_environment=True)
    plat = next(p for p, pk in desc.packages.items() if any(x.name == "python" for x in pk))
    python = next(x for x in desc.packages[plat] if x.name == "python")
    assert python.url and len(desc.environments) > 1
    ref = next(i for i, line in enumerate(lines) if line.strip() == f"- conda: {python.url}")
    env = next(m[1] for line in reversed(lines[:ref]) if (m := re.match(r"^  (\S+):$", line)))  # its environment
    broken = tmp_path / "pixi.lock"
    broken.write_text("".join(lines[:ref] + lines[ref + 1:]))
    code, out, err = run_cli(capsys, "lint", str(broken), "--format", "json")
    assert code == 1, err
    found = [f for f in json.loads(out)["findings"] if f["code"] == "EG159"]
    assert found and "needs `python" in found[0]["message"] and f"{env}/{plat}" in found[0]["message"], found
    code, _, err = run_cli(capsys, "diff", str(broken), str(broken), "--environment", str(env))
    assert code == 3 and "not whole" in err, err


def test_rattler_judges_name_version_and_build_and_nothing_the_lock_cannot_record() -> None:
    """The judgement itself, on records as the readers give them: virtual packages aside, python_abi's build
    matched, a channel prefix, ``track_features`` or ``build_number`` not held against a lock that records none
    of them; a version or build outside the constraint named with what stands there instead."""
    from envguard.model import Package

    cf = "https://conda.anaconda.org/conda-forge/linux-64"

    def rec(name: str, version: str, build: str, *deps: str) -> Package:
        return Package(name=name, version=version, build=build, url=f"{cf}/{name}-{version}-{build}.conda",
                       platform="linux-64", depends=deps)

    python = rec("python", "3.11.9", "hb806964_0_cpython", "__glibc >=2.17,<3.0.a0")
    abi = rec("python_abi", "3.11", "5_cp311")
    numpy = rec("numpy", "1.26.4", "py311h64a7726_0", "python >=3.11,<3.12.0a0", "python_abi 3.11.* *_cp311",
                "conda-forge::python", "python[track_features=pypy]", "python_abi[build_number='>=9']",
                "__cuda", "libfoo-unreadable [[[")
    assert lockwhole.holes([("linux-64", [python, abi, numpy])]) == []
    wrong = rec("numpy", "1.26.4", "py311h64a7726_0", "python_abi 3.11.* *_cp312", "python >=3.12")
    found = lockwhole.holes([("linux-64", [python, abi, wrong])])
    assert [(h.missing, h.found) for h in found] == [("python_abi 3.11.* *_cp312", "python_abi 3.11 5_cp311"),
                                                     ("python >=3.12", "python 3.11.9 hb806964_0_cpython")]
    assert lockwhole.failures(found, versions=False) == [] and lockwhole.failures(found, versions=True) == found


@pytest.mark.slow  # sweeps the whole real-world corpus: seconds of CPU
def test_real_world_locks_are_whole(realworld: Path) -> None:
    """No false alarm: every real conda-lock file and every environment of every real pixi.lock is whole.
    One conda-lock file records libarrow needing aws-crt-cpp >=0.26.0 beside aws-crt-cpp 0.25.0 (dependencies
    conda-lock copied from a package cache): a warning, not a failure."""
    warned = []
    files = sorted((realworld / "conda-lock").glob("*.yml")) + sorted((realworld / "pixi").glob("*.lock"))
    assert len(files) >= 20
    for f in files:
        first = sources.load(str(f), first_environment=True)
        for env in first.environments or (None,):
            desc = sources.load(str(f), environment=env) if env else first
            failed, soft = lockwhole.of_description(desc)
            assert failed == [], (f.name, lockwhole.summary(failed))
            warned += [(f.name, h.package, h.name) for h in soft]
    assert warned == [("konstantinjdobler__tight-budget-llm-adaptation__helpers__main-exp-deps__conda-lock.yml",
                       "libarrow", "aws-crt-cpp")]
