"""Readers for every environment description, on the real files in ../shared/realworld."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from envguard.errors import ExitCode, UserError
from envguard.sources import Description, detect_kind, load

READABLE_KINDS = ("conda-lock", "explicit", "export", "pixi")


def _files(realworld: Path, folder: str) -> list[Path]:
    files = sorted(p for p in (realworld / folder).iterdir() if p.is_file())
    if folder == "environment":
        files = [p for p in files if p.suffix in (".yml", ".yaml")]
    if folder == "pixi":
        files = [p for p in files if p.suffix == ".lock"]
    return files


# --------------------------------------------------------------------------- every real file


@pytest.mark.slow
@pytest.mark.parametrize("folder", [*READABLE_KINDS, "environment"])
def test_every_real_file_is_read_and_detected_from_content(realworld: Path, folder: str) -> None:
    files = _files(realworld, folder)
    assert files, f"no {folder} files in the corpus"
    for f in files:
        d = load(str(f))
        assert d.kind == folder, f"{f.name}: detected {d.kind}"
        if folder == "environment":
            assert d.requested, f.name
            continue
        if folder == "pixi":  # a pixi environment may be empty (a real one is); read every environment
            envs = [load(str(f), environment=e) for e in d.environments]
            assert any(e.packages for e in envs), f"{f.name}: no environment has packages"
            d.packages = {f"{e.environment}/{plat}": pkgs for e in envs for plat, pkgs in e.packages.items()}
        assert d.packages and all(d.packages.values()), f"{f.name}: empty platform"
        for plat, pkgs in d.packages.items():
            for p in pkgs:
                assert p.name and isinstance(p.version, str), (f.name, p)
                assert p.manager in ("conda", "pip")
                if p.manager == "conda" and folder != "export":
                    if p.url and "://" not in p.url:  # built from the project's source: no channel
                        assert p.channel is None, (f.name, p)
                    else:
                        assert p.build and p.channel, (f.name, p)


def test_detection_uses_content_not_name(realworld: Path, tmp_path: Path) -> None:
    lock = realworld / "conda-lock" / "01-ai__Yi__conda-lock.yml"
    explicit = realworld / "explicit" / "conda__conda-lock__tests__zlib__conda-linux-64.lock"
    pixi = realworld / "pixi" / "wang7x__pixi-pytorch-example__pixi.lock"
    export = realworld / "export" / "RosettaCommons__RoseTTAFold__RoseTTAFold-linux.yml"
    for src, name, kind in ((lock, "environment.yml", "conda-lock"), (explicit, "conda-lock.yml", "explicit"),
                            (pixi, "notes.txt", "pixi"), (export, "pixi.lock", "export")):
        dst = tmp_path / name
        shutil.copyfile(src, dst)
        assert load(str(dst)).kind == kind


def test_kind_override_and_unknown_kind(realworld: Path, tmp_path: Path) -> None:
    export = realworld / "export" / "DeepRank__DeepRank-GNN-esm__environment-gpu.yml"
    assert load(str(export)).kind == "export"
    as_env = load(str(export), kind="environment")
    assert as_env.kind == "environment" and len(as_env.requested) > 100
    with pytest.raises(UserError, match="unknown kind"):
        load(str(export), kind="poetry")


# --------------------------------------------------------------------------- conda-lock formats


def test_conda_lock_v1_dedupes_categories_and_derives_builds(realworld: Path, tmp_path: Path) -> None:
    f = realworld / "conda-lock" / "conda__conda-lock__tests__test-v2-to-v3-upgrade__conda-lock-v2.5.8.yml"
    raw = yaml.load(f.read_text(), Loader=yaml.CSafeLoader)
    d = load(str(f))
    assert d.declared_platforms == tuple(raw["metadata"]["platforms"])
    assert sum(len(v) for v in d.packages.values()) == len(raw["package"])
    # v1 repeats a package once per category when it is in several optional ones
    dup = dict(raw, package=raw["package"] + [dict(p, category="docs") for p in raw["package"]
                                              if p["category"] == "dev"])
    assert len(dup["package"]) > len(raw["package"])
    (tmp_path / "dup.yml").write_text(yaml.safe_dump(dup, sort_keys=False))
    from conda_lock.lockfile import parse_conda_lock_file

    assert len(parse_conda_lock_file(tmp_path / "dup.yml").package) == len(raw["package"])
    d2 = load(str(tmp_path / "dup.yml"))
    assert d2.packages == d.packages
    by_url = {p["url"]: p for p in raw["package"]}
    for pkgs in d.packages.values():
        for p in pkgs:
            src = by_url[p.url]
            assert p.version == str(src["version"]) and p.sha256 == src["hash"].get("sha256")
            if p.manager == "conda":
                assert src["url"].endswith(f"{p.name}-{p.version}-{p.build}.conda") or \
                    src["url"].endswith(f"{p.name}-{p.version}-{p.build}.tar.bz2")


def test_old_conda_lock_layouts(realworld: Path, tmp_path: Path) -> None:
    """Sorted keys with ``version:`` last, and the older files with no ``version:`` at all."""
    from conda_lock.lockfile import MissingLockfileVersion, parse_conda_lock_file

    src = realworld / "conda-lock" / "conda__conda-lock__tests__test-lockfile__conda-lock.yml"
    text = src.read_text()
    assert text.rstrip().endswith("version: 1")
    f = tmp_path / "unversioned.yml"
    f.write_text(text.rstrip().removesuffix("version: 1"))
    with pytest.raises(MissingLockfileVersion):
        parse_conda_lock_file(f)
    assert load(str(src)).packages == load(str(f)).packages
    d = load(str(f))
    assert d.kind == "conda-lock" and set(d.packages) == {"linux-64", "osx-64", "osx-arm64"}
    pip = [p for p in d.packages["linux-64"] if p.manager == "pip"]
    assert pip and all(p.channel is None and p.build is None for p in pip)
    appnope = next(p for p in d.packages["osx-arm64"] if p.name == "appnope")
    assert (appnope.version, appnope.build, appnope.md5) == ("0.1.2", "py39h2804cbe_2",
                                                              "7fb8a37f9e9afaad0210974e1452f84a")


def test_conda_lock_v2_format_matches_its_v1_original(realworld: Path, tmp_path: Path) -> None:
    """A ``version: 2`` file (categories as a list), checked by conda-lock's own parser first."""
    from conda_lock.lockfile import parse_conda_lock_file

    src = realworld / "conda-lock" / "conda__conda-lock__tests__test-v2-to-v3-upgrade__conda-lock-v2.5.8.yml"
    raw = yaml.load(src.read_text(), Loader=yaml.CSafeLoader)
    merged: dict[tuple[str, str, str], dict] = {}
    for p in raw["package"]:
        k = (p["platform"], p["manager"], p["name"])
        cats = set(merged[k]["categories"]) if k in merged else set()
        entry = {key: v for key, v in p.items() if key not in ("category", "optional")}
        entry["categories"] = sorted(cats | {p["category"]})
        merged[k] = entry
    v2 = {"version": 2, "metadata": raw["metadata"], "package": list(merged.values())}
    out = tmp_path / "conda-lock.yml"
    out.write_text(yaml.safe_dump(v2, sort_keys=False))
    parse_conda_lock_file(out)  # the authority accepts it
    a, b = load(str(src)), load(str(out))
    assert {k: sorted(v, key=lambda p: (p.manager, p.name)) for k, v in a.packages.items()} == \
        {k: sorted(v, key=lambda p: (p.manager, p.name)) for k, v in b.packages.items()}


def test_conda_lock_platform_filter_and_missing_platform(realworld: Path) -> None:
    f = realworld / "conda-lock" / "Clay-foundation__model__conda-lock@32518ce.yml"
    d = load(str(f), platform="osx-arm64")
    assert list(d.packages) == ["osx-arm64"]
    torch = next(p for p in d.packages["osx-arm64"] if p.name == "pytorch")
    assert torch.build == "cpu_generic_py311hc35e6e7_4" and torch.channel == "conda-forge"
    with pytest.raises(UserError, match="win-64 is not in this lock"):
        load(str(f), platform="win-64")


# --------------------------------------------------------------------------- explicit


def test_explicit_reads_hashes_platform_and_channels(realworld: Path) -> None:
    d = load(str(realworld / "explicit" / "3dlg-hcvc__paris__spec-file@aec6a0f.txt"))
    pkgs = d.packages["linux-64"]
    channels = {p.channel for p in pkgs}
    assert {"pkgs/main", "pytorch", "conda-forge", "pytorch3d", "bottler"} <= channels
    torch = next(p for p in pkgs if p.name == "pytorch")
    assert torch.version.startswith("1.11") and "cuda11.3" in (torch.build or "")
    zlib = load(str(realworld / "explicit" / "conda__conda-lock__tests__zlib__conda-linux-64.lock"))
    names = [p.name for p in zlib.packages["linux-64"]]
    assert len(names) == len(set(names)) == 6  # the file repeats three lines
    assert all(p.md5 and len(p.md5) == 32 for p in zlib.packages["linux-64"])


def test_explicit_pip_lines_from_conda_lock_render(realworld: Path, tmp_path: Path) -> None:
    """conda-lock's own explicit rendering of a lock with pip packages, read back."""
    from conda_lock.conda_lock import render_lockfile_for_platform
    from conda_lock.lockfile import parse_conda_lock_file

    src = realworld / "conda-lock" / "FSadrieh__BERTchen__conda-lock.yml"
    lines = render_lockfile_for_platform(lockfile=parse_conda_lock_file(src), include_dev_dependencies=True,
                                         extras=None, kind="explicit", platform="linux-64",
                                         suppress_warning_for_pip_and_explicit=True)
    out = tmp_path / "rendered.lock"
    out.write_text("\n".join(lines) + "\n")
    assert any(line.startswith("# pip ") for line in lines)
    d = load(str(out))
    lock = load(str(src)).packages["linux-64"]
    got = {(p.manager, p.name, p.version, p.sha256 if p.manager == "pip" else p.md5) for p in d.packages["linux-64"]}
    want = {(p.manager, p.name, p.version, p.sha256 if p.manager == "pip" else p.md5) for p in lock}
    assert got == want and any(m == "pip" for m, *_ in got)


def test_explicit_errors_name_the_line(tmp_path: Path) -> None:
    f = tmp_path / "bad.txt"
    f.write_text("@EXPLICIT\nhttps://conda.anaconda.org/conda-forge/linux-64/not-a-package.txt\n")
    with pytest.raises(UserError, match=r"bad.txt:2: not a conda package URL"):
        load(str(f))


# --------------------------------------------------------------------------- export


def test_export_forms(realworld: Path) -> None:
    d = load(str(realworld / "export" / "RosettaCommons__RoseTTAFold__RoseTTAFold-linux.yml"))
    assert d.platforms == ["linux-64"]  # ld_impl_linux-64 says where the export was taken
    pkgs = {p.name: p for p in d.packages["linux-64"]}
    assert pkgs["blast-legacy"].channel == "biocore" and pkgs["blast-legacy"].version == "2.2.26"
    assert pkgs["hhsuite"].version == "" and pkgs["cudatoolkit"].build == "h6bb024c_0"
    assert pkgs["pytorch"].build and "cuda11.1" in pkgs["pytorch"].build
    assert pkgs["dgl-cu110"].manager == "pip" and pkgs["dgl-cu110"].version == "0.6.1"
    dyn = load(str(realworld / "export" / "ArjunArasappan__dynamo_ssl__conda_env.yml"))
    dp = {p.name: p for p in dyn.packages[None]}
    assert dp["python"].build == "he550d4f_0_cpython" and dp["torch"].manager == "pip"
    assert dp["d4rl"].manager == "pip" and dp["d4rl"].url and "github.com" in dp["d4rl"].url
    nob = load(str(realworld / "export" / "DeepRank__DeepRank-GNN-esm__environment-gpu.yml"))
    assert nob.kind == "export" and all(p.build is None for p in nob.packages_for(None))


# --------------------------------------------------------------------------- pixi


def test_pixi_v7_custom_platform_names(realworld: Path) -> None:
    d = load(str(realworld / "pixi" / "prefix-dev__pixi__examples__multi-machine__pixi.lock"))
    assert {"p1", "p2", "p3"} <= set(d.packages)
    assert {p.platform for p in d.packages["p1"]} <= {"win-64"}
    assert {p.platform for p in d.packages["p3"]} <= {"osx-arm64"}


def test_pixi_pypi_and_conda_packages(realworld: Path) -> None:
    d = load(str(realworld / "pixi" / "prefix-dev__pixi__examples__llama-index-inference__pixi.lock"))
    linux = d.packages["linux-64"]
    torch = next(p for p in linux if p.key == "torch")
    assert torch.manager == "pip" and torch.version == "2.4.0" and torch.sha256
    numpy = next(p for p in linux if p.name == "numpy")
    assert numpy.manager == "conda" and numpy.build and numpy.channel == "conda-forge"


def test_pixi_environment_choice(realworld: Path) -> None:
    f = realworld / "pixi" / "wang7x__pixi-pytorch-example__pixi.lock"
    cpu = load(str(f), environment="cpu")
    gpu = load(str(f), environment="gpu")
    t_cpu = next(p for p in cpu.packages["linux-64"] if p.name == "pytorch")
    t_gpu = next(p for p in gpu.packages["linux-64"] if p.name == "pytorch")
    assert t_cpu.build.startswith("cpu_") and t_gpu.build.startswith("cuda126")
    with pytest.raises(UserError, match="no environment 'nope'"):
        load(str(f), environment="nope")


def test_pixi_unsupported_version(tmp_path: Path) -> None:
    f = tmp_path / "pixi.lock"
    f.write_text("version: 3\nenvironments: {default: {}}\npackages: []\n")
    with pytest.raises(UserError, match=r"unsupported pixi\.lock version 3"):
        load(str(f))


# --------------------------------------------------------------------------- environment.yml


def test_environment_selectors_channels_and_pip(realworld: Path) -> None:
    d = load(str(realworld / "environment" / "Clay-foundation__model__environment@32518ce.yml"))
    torch = [s for s in d.requested if s.name == "pytorch"]
    assert {s.platforms for s in torch} == {("osx-64", "osx-arm64"), ("linux-64", "linux-aarch64", "linux-ppc64le")}
    assert any("*cuda12*" in s.spec for s in torch)
    assert d.declared_platforms == ("linux-64", "osx-64", "osx-arm64")
    dino = load(str(realworld / "environment" / "facebookresearch__dinov2__conda.yaml"))
    by = {s.name: s for s in dino.requested}
    assert by["pytorch"].channel == "pytorch" and by["pytorch"].spec == "pytorch =2.0.0"
    assert by["submitit"].manager == "pip"
    spaced = load(str(realworld / "environment" / "microsoft__planetary-computer-containers__gpu-pytorch__environment.yml"))
    assert next(s for s in spaced.requested if s.name == "pangeo-dask").spec == "pangeo-dask =2024.03.18"


def test_environment_pip_requirements_files_are_followed(tmp_path: Path) -> None:
    (tmp_path / "req-base.txt").write_text("numpy>=1.24,<3.0\n")
    (tmp_path / "req.txt").write_text("-r req-base.txt\ntorch>=2.4.1, <2.7.0\n")
    env = tmp_path / "environment.yml"
    env.write_text("channels: [conda-forge]\ndependencies:\n  - python=3.11\n  - pip:\n    - -r req.txt\n"
                   "    - --extra-index-url https://user:s3cret@pypi.example/simple\n")
    d = load(str(env))
    assert [(s.name, s.manager) for s in d.requested] == [("python", "conda"), ("numpy", "pip"), ("torch", "pip")]


# --------------------------------------------------------------------------- prefix and report


def _fake_prefix(root: Path, explicit_file: Path) -> Path:
    """A conda prefix whose conda-meta records the packages of an explicit file."""
    meta = root / "conda-meta"
    meta.mkdir(parents=True)
    for line in explicit_file.read_text().splitlines():
        if not line.startswith("http"):
            continue
        url, _, md5 = line.partition("#")
        fn = url.rsplit("/", 1)[1]
        stem = fn.removesuffix(".conda").removesuffix(".tar.bz2")
        name, version, build = stem.rsplit("-", 2)
        channel = url.rsplit("/", 2)[0]
        (meta / f"{stem}.json").write_text(json.dumps({
            "name": name, "version": version, "build": build, "build_number": 0, "channel": channel,
            "subdir": url.rsplit("/", 2)[1], "url": url, "md5": md5, "files": [], "depends": []}))
    return root


def test_prefix_side_and_name_lookup(realworld: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    explicit = realworld / "explicit" / "conda__conda-lock__tests__zlib__conda-linux-64.lock"
    prefix = _fake_prefix(tmp_path / "envs" / "zlibenv", explicit)
    d = load(str(prefix))
    assert d.kind == "prefix"
    (plat, pkgs), = d.packages.items()
    want = {(p.name, p.version, p.build, p.channel, p.md5) for p in load(str(explicit)).packages["linux-64"]}
    assert {(p.name, p.version, p.build, p.channel, p.md5) for p in pkgs} == want
    monkeypatch.setenv("ENVGUARD_ENVS_DIR", str(tmp_path / "envs"))
    assert load("name:zlibenv").kind == "prefix"
    with pytest.raises(UserError, match="no environment named 'missing'"):
        load("name:missing")


def test_report_side(tmp_path: Path) -> None:
    report = {"schema": "envguard.check/1", "platform": "linux-64", "packages": [
        {"name": "torch", "version": "2.13.0", "manager": "pip", "url": "https://u:tok@example.org/torch.whl"},
        {"name": "python", "version": "3.11.9", "manager": "conda", "build": "hb806964_0_cpython",
         "channel": "https://conda.anaconda.org/conda-forge"}]}
    f = tmp_path / "machine.json"
    f.write_text(json.dumps(report))
    d = load(str(f))
    assert d.kind == "report" and list(d.packages) == ["linux-64"]
    by = {p.name: p for p in d.packages["linux-64"]}
    assert by["python"].channel == "conda-forge" and "tok" not in (by["torch"].url or "")


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("content, match", [
    ("version: 1\nmetadata: {platforms: [linux-64]}\npackage:\n- {version: '1', platform: linux-64}\n",
     r"package\[0\]\.name: package\[0\] has no `name`"),
    ("version: 9\nmetadata: {}\npackage: []\n", "unsupported conda-lock format version 9"),
    ("dependencies: [\n", "malformed YAML"),
    ("just: a mapping\n", "cannot tell what kind"),
    ("", "empty file"),
])
def test_bad_input_is_a_one_line_user_error(tmp_path: Path, content: str, match: str) -> None:
    f = tmp_path / "broken.yml"
    f.write_text(content)
    with pytest.raises(UserError, match=match) as e:
        load(str(f))
    assert e.value.exit_code == ExitCode.USAGE and "\n" not in e.value.message


def test_detect_kind_without_data() -> None:
    assert detect_kind("# comment\n@EXPLICIT\nhttps://x/linux-64/a-1-0.conda\n") == "explicit"
    assert detect_kind("name: x\n") is None
    assert Description(kind="export", path="x").platforms == []


@pytest.mark.slow
def test_pixi_reader_agrees_with_rattler(realworld: Path) -> None:
    """Every environment of every pixi.lock, against rattler's own lock reader: same packages per platform."""
    from rattler import LockFile

    for f in _files(realworld, "pixi"):
        for env_name, env in LockFile.from_path(f).environments():
            ours = load(str(f), environment=env_name)
            for lp in env.platforms():
                theirs: set[tuple[str, ...]] = set()
                for p in env.packages(lp):
                    rec = getattr(p, "package_record", None)
                    if rec is not None:  # versions too: a YAML float such as 1.10 must not become 1.1
                        theirs.add(("conda", str(p.name), str(rec.version), str(rec.build), str(p.location)))
                    elif type(p).__name__ == "CondaLockedSourcePackage":  # v7 source build: no record
                        theirs.add(("conda", str(p.name), "", "", str(p.location)))
                    else:
                        theirs.add(("pip", str(p.name), str(p.version)))
                mine = {("conda", q.name, q.version if q.build else "", q.build or "", q.url or "")
                        if q.manager == "conda" else ("pip", q.name, q.version) for q in ours.packages[lp.name]}
                dynamic = {t for t in theirs if t[-1] == "<dynamic>"}  # rattler leaves editable versions open
                mine = {m for m in mine if not any(m[:2] == d[:2] for d in dynamic)}
                assert mine == theirs - dynamic, (f.name, env_name, lp.name)


@pytest.mark.slow
def test_explicit_and_conda_lock_readers_agree_with_rattler(realworld: Path) -> None:
    """Peers: rattler's explicit-file reader on every file, and its lock reader where it can read the file
    (it refuses most conda-lock v1 files with pip or empty-dependency entries, and the old layout)."""
    from rattler import LockFile
    from rattler.explicit_environment import ExplicitEnvironmentSpec

    for f in _files(realworld, "explicit"):
        spec = ExplicitEnvironmentSpec.from_path(f)
        ours = load(str(f))
        assert ours.platforms == [str(spec.platform)]
        assert {q.url for q in ours.packages_for(None) if q.manager == "conda"} == \
            {str(p.url).split("#", 1)[0] for p in spec.packages}, f.name
    compared = 0
    for f in _files(realworld, "conda-lock"):
        try:
            lf = LockFile.from_path(f)
        except Exception:  # rattler's own limits, not ours: every file is read by the test above
            continue
        ours = load(str(f))
        for _, env in lf.environments():
            for lp in env.platforms():
                theirs = {("conda", str(p.location)) if getattr(p, "package_record", None) is not None
                          else ("pip", str(p.name), str(p.version)) for p in env.packages(lp)}
                mine = {("conda", q.url) if q.manager == "conda" else ("pip", q.name, q.version)
                        for q in ours.packages[lp.name]}
                assert mine == theirs, (f.name, lp.name)
                compared += 1
    assert compared >= 3
