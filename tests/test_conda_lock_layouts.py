"""conda-lock 1.x-3.x layouts read into one model; identical artifacts are one package.

The real conda-lock 2.5.8 file of the corpus is rewritten with the pinned conda-lock's own models and writer:
as conda-lock 4.0.3 writes it (version 1, one entry per category), as its version-2 model (a categories list),
and in the unversioned layout of conda-lock before 1.0. A pip package locked from a URL is added to each the way
each generation writes it: conda-lock 2.x with the version from the wheel, conda-lock 3.x with a ``source``,
the hash in the URL's fragment and its placeholder version 0.0.0.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from envguard.diff import SideArgs, compare, diff_packages
from envguard.model import Package
from envguard.sources import load

V258 = "conda__conda-lock__tests__test-v2-to-v3-upgrade__conda-lock-v2.5.8.yml"
WHEEL = "https://files.pythonhosted.org/packages/f1/13/63c0a02c44024ee1/egwheel-1.2-py3-none-any.whl"
SHA = "f9d1ad3f6fd3b84a5b4e0f7d6fe7a9c0a7f5b4b36c2ea33d0f4a8b6d7e6a0f11"


def _as_written_by(lockfile, generation: str):  # conda_lock.lockfile.v2prelim.models.Lockfile
    """The 2.5.8 file's packages as conda-lock ``generation`` ("2.x" or "3.x") writes them.

    The file already holds cowsay 6.1 locked from a GitHub tarball URL; a wheel locked from a URL (egwheel)
    is added. conda-lock 3.x writes both with the placeholder version 0.0.0 (pypi_solver.get_package) and
    the hash in the URL's fragment.
    """
    from conda_lock.lockfile.v1.models import DependencySource, HashModel
    from conda_lock.lockfile.v2prelim.models import LockedDependency

    for plat in lockfile.metadata.platforms:
        lockfile.package.append(LockedDependency(
            name="egwheel", version="1.2", manager="pip", platform=plat, dependencies={}, url=WHEEL,
            hash=HashModel(sha256=SHA), source=DependencySource(type="url", url=f"{WHEEL}#sha256={SHA}"),
            categories={"main"}))
    if generation == "3.x":
        for p in lockfile.package:
            if p.manager == "pip" and p.source is not None:
                p.version = "0.0.0"
                p.url = p.source.url
    return lockfile


@pytest.fixture(scope="module")
def layouts(realworld: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from conda_lock.lockfile import parse_conda_lock_file, write_conda_lock_file

    out = tmp_path_factory.mktemp("layouts")
    src = realworld / "conda-lock" / V258
    files: dict[str, Path] = {}
    # conda-lock 2.x: the real file's packages, plus a wheel locked from a URL
    v2x = _as_written_by(parse_conda_lock_file(src), "2.x")
    files["2.x"] = out / "conda-lock-2x.yml"
    write_conda_lock_file(v2x, files["2.x"], metadata_choices=None)
    # conda-lock 3.x: the same packages, URL-locked pip packages with the 0.0.0 placeholder
    v3x = _as_written_by(parse_conda_lock_file(src), "3.x")
    files["3.x"] = out / "conda-lock-3x.yml"
    write_conda_lock_file(v3x, files["3.x"], metadata_choices=None)
    # the version-2 model itself (one entry per package and platform, a categories list)
    dump = _as_written_by(parse_conda_lock_file(src), "2.x").model_dump(mode="json")
    files["version 2"] = out / "conda-lock-v2.yml"
    files["version 2"].write_text(yaml.safe_dump({"version": 2, **dump}, sort_keys=False))
    # before 1.0: no version key, metadata first, channels as plain strings, keys in another order
    v1 = yaml.safe_load(files["2.x"].read_text())
    meta = dict(v1["metadata"], channels=[c["url"] for c in v1["metadata"]["channels"]])
    order = ("category", "dependencies", "hash", "manager", "name", "optional", "platform", "url", "version")
    old = {"metadata": meta, "package": [{k: e[k] for k in order if k in e} for e in v1["package"]]}
    files["pre-1.0"] = out / "conda-lock-old.yml"
    files["pre-1.0"].write_text(yaml.safe_dump(old, sort_keys=False))
    return files


@pytest.mark.slow
def test_conda_lock_reads_the_files_written(layouts: dict[str, Path]) -> None:
    from conda_lock.lockfile import parse_conda_lock_file

    for name in ("2.x", "3.x", "version 2"):
        assert any(p.name == "egwheel" for p in parse_conda_lock_file(layouts[name]).package), name
    cowsay = [p for p in parse_conda_lock_file(layouts["3.x"]).package if p.name == "cowsay"]
    assert cowsay and all(p.version == "0.0.0" and p.source is not None for p in cowsay)


@pytest.mark.slow
def test_every_layout_reads_to_the_same_model(layouts: dict[str, Path], realworld: Path) -> None:
    ref = load(str(layouts["2.x"]))
    real = load(str(realworld / "conda-lock" / V258))
    assert sorted(ref.packages) == sorted(real.packages) == sorted(ref.declared_platforms)
    from conda_lock.lockfile import parse_conda_lock_file

    # cowsay's tarball and requests' git URL name no version: the 3.x placeholder stays (diff knows the artifact)
    unnamed = {p.name for p in parse_conda_lock_file(realworld / "conda-lock" / V258).package if p.source}
    assert {"cowsay", "requests"} <= unnamed

    def key(p: Package) -> tuple:
        return (p.name, p.manager, "" if p.name in unnamed else p.version, p.build, p.sha256)

    for name, path in layouts.items():
        d = load(str(path))
        for plat in ref.packages:
            mine, theirs = {key(p) for p in d.packages[plat]}, {key(p) for p in ref.packages[plat]}
            assert mine == theirs, (name, plat, mine ^ theirs)
    notes = load(str(layouts["3.x"])).notes
    assert notes == ["egwheel: conda-lock's placeholder version 0.0.0 read as 1.2, the version in its file name"]


@pytest.mark.parametrize("other", ["3.x", "version 2", "pre-1.0"])
def test_diff_across_layouts_finds_no_differences(layouts: dict[str, Path], other: str) -> None:
    r = compare(SideArgs(str(layouts["2.x"])), SideArgs(str(layouts[other])), all_platforms=True)
    assert len(r.platforms) == 6 and r.equal, [(pd.label, [(c.name, c.kinds) for c in pd.changes])
                                               for pd in r.platforms if pd.changes]
    assert r.summary() == "no differences"
    if other == "3.x":  # cowsay 6.1 vs the placeholder: said, but not an upgrade
        said = [n for n in r.notes if n.split(": ", 1)[-1].startswith("cowsay:")]
        assert len(said) == 6 and "A says version 6.1, B says 0.0.0" in said[0] and "not a version change" in said[0]
        assert any("requests:" in n for n in r.notes)


def test_identical_artifacts_are_one_package_whatever_version_is_claimed() -> None:
    git = "git+https://github.com/org/tool.git@0123abcd"
    a = [Package("tool", "0.0.0", "pip", url=git, sha256="ab" * 32),
         Package("egwheel", "0.0.0", "pip", url=f"{WHEEL}#sha256={SHA}", sha256=SHA)]
    b = [Package("tool", "1.4", "pip", url=git, sha256="ab" * 32),
         Package("egwheel", "1.2", "pip", url=WHEEL, sha256=SHA)]
    notes: list[str] = []
    assert diff_packages(a, b, notes) == []
    assert len(notes) == 2 and all("same artifact" in n and "not a version change" in n for n in notes)
    assert any("placeholder 0.0.0" in n for n in notes)
    # a different sha256 is a different artifact: an upgrade, as before
    c = [Package("tool", "1.4", "pip", url=git, sha256="cd" * 32)]
    (change,) = diff_packages(a[:1], c)
    assert change.kinds == ("upgraded",)
