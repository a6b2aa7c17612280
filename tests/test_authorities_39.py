"""Read as the owning tools read (conda, rattler, pixi, conda-lock), and name what real projects get wrong.

Every file here is written for its point and goes through the real CLI (`envguard lint`, `envguard diff`) in a
subprocess. Each test failed on the code before this change: the verdict it checks was another one then (a package
named `https`, a refusal pixi does not make, "malformed JSON" in one command and "malformed YAML" in the other,
a finding that was missing).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.check_envs import envguard

MD5 = "4c1a3f5e9b0a8a1f6b2c7d5e3f1a2b3c"
SHA = "2c1a3f5e9b0a8a1f6b2c7d5e3f1a2b3c" * 2
CF = "https://conda.anaconda.org/conda-forge"
PYPI = "https://files.pythonhosted.org/packages/aa/bb"


def _lint(*paths: Path, cwd: Path) -> tuple[int, list[dict[str, Any]], str]:
    proc = envguard("lint", *map(str, paths), "--format", "json", cwd=cwd)
    doc = json.loads(proc.stdout)
    return proc.returncode, doc["findings"], proc.stderr


def _codes(findings: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for f in findings:
        out.setdefault(f["code"], []).append(f)
    return out


# ------------------------------------------------------------------ 1: a channel URL before `::`

def test_a_channel_url_before_the_double_colon_is_a_channel(tmp_path: Path) -> None:
    """conda and rattler read `https://conda.anaconda.org/conda-forge::python=3.11` as channel + `python=3.11`;
    envguard read a package named `https` (EG101 "no python", and `https` listed twice)."""
    from rattler import MatchSpec

    spec = f"{CF}::python=3.11"
    ms = MatchSpec(spec, strict=False)
    assert ms.name.normalized == "python" and ms.channel is not None and ms.channel.name == "conda-forge"
    env = tmp_path / "environment.yml"
    env.write_text(f"channels:\n  - conda-forge\ndependencies:\n  - {spec}\n  - {CF}::numpy\n")
    rc, findings, _ = _lint(env, cwd=tmp_path)
    assert rc == 0 and findings == [], findings
    # a URL channel the file does not list: EG119 names it as written, and its fix drops that very prefix
    env.write_text("channels:\n  - conda-forge\ndependencies:\n  - python=3.11\n"
                   "  - https://conda.anaconda.org/bioconda::samtools\n")
    rc, findings, _ = _lint(env, cwd=tmp_path)
    eg119 = _codes(findings)["EG119"][0]
    assert eg119["line"] == 5 and "names channel `bioconda`" in eg119["message"], eg119
    assert "drop the `https://conda.anaconda.org/bioconda::` prefix" in eg119["fix"], eg119
    # diff reads the spec the same way: against the plain `python=3.11`, no package `https` on either side
    url_form, plain = tmp_path / "url.yml", tmp_path / "plain.yml"
    url_form.write_text(f"channels: [conda-forge]\ndependencies:\n  - {spec}\n")
    plain.write_text("channels: [conda-forge]\ndependencies:\n  - python=3.11\n")
    proc = envguard("diff", str(url_form), str(plain), "--format", "json", cwd=tmp_path)
    assert proc.returncode in (0, 1) and '"https' not in proc.stdout.replace('"https://', ""), proc.stdout
    changes = [c for p in json.loads(proc.stdout)["platforms"] for c in p["changes"]]
    assert [(c["name"], c["old_spec"]) for c in changes] == [("python", "conda-forge::python =3.11")], changes


CHANNEL_FORMS = [
    f"{CF}::python=3.11",
    'https://repo.anaconda.com/pkgs/main/linux-64::numpy[version=">=1.26"]',
    "http://localhost:8000/ch::pkg>=1",
    "file:///tmp/chan::zlib",
    "conda-forge/linux-64::scipy >=1.12",
    "https://conda.anaconda.org/nvidia/label/cuda-12.1.0::cuda-cudart 12.1.*",
]


def test_every_channel_form_before_the_double_colon_reads_as_rattler_reads_it(tmp_path: Path) -> None:
    """The package and the channel envguard's environment reader takes from each form, against rattler's
    MatchSpec on the same text (the channel by name: URL, label or name with its subdir)."""
    from rattler import MatchSpec

    from envguard.sources import load

    env = tmp_path / "environment.yml"
    env.write_text("channels: [conda-forge]\ndependencies:\n" + "".join(f"  - '{s}'\n" for s in CHANNEL_FORMS))
    read = [(r.name, r.channel) for r in load(str(env)).requested]
    assert len(read) == len(CHANNEL_FORMS), read
    for (name, channel), spec in zip(read, CHANNEL_FORMS, strict=True):
        ms = MatchSpec(spec, strict=False)
        assert ms.name is not None and ms.channel is not None, spec
        assert name == ms.name.normalized, (spec, name)
        # an anaconda.org channel by its name (as rattler names it), any other host by its URL
        assert channel in (ms.channel.name, str(ms.channel.base_url).rstrip("/")), (spec, channel, ms.channel)


# ------------------------------------------------------------------ 12: Python 3.12 and 3.10

def test_a_newer_python_is_information_and_3_10_its_end_of_life_date(tmp_path: Path) -> None:
    env = tmp_path / "environment.yml"
    env.write_text("channels: [conda-forge]\ndependencies:\n  - python=3.12\n  - pytorch=2.13.*=cpu*\n")
    rc, findings, _ = _lint(env, cwd=tmp_path)
    eg102 = _codes(findings)["EG102"][0]
    assert rc == 0 and eg102["severity"] == "info", eg102  # a valid file fails no pre-commit run
    assert "the file is valid" in eg102["message"] and "3.10, 3.11" in eg102["message"], eg102
    assert "not supported" not in eg102["message"], eg102
    env.write_text("channels: [conda-forge]\ndependencies:\n  - python=3.10\n  - pytorch=2.13.*=cpu*\n")
    rc, findings, _ = _lint(env, cwd=tmp_path)
    eg103 = _codes(findings)["EG103"][0]
    assert rc == 0 and eg103["severity"] == "warning" and "2026-10-31" in eg103["message"], eg103
    assert eg103["line"] == 3, eg103


# ------------------------------------------------------------------ 5 and 6: CUDA twice in a lock

def _conda(name: str, version: str, build: str, deps: dict[str, str] | None = None) -> dict[str, Any]:
    return {"name": name, "version": version, "manager": "conda", "platform": "linux-64",
            "dependencies": deps or {}, "url": f"{CF}/linux-64/{name}-{version}-{build}.conda",
            "hash": {"md5": MD5, "sha256": SHA}, "category": "main", "optional": False}


def _pip(name: str, version: str, deps: dict[str, str] | None = None) -> dict[str, Any]:
    wheel = name.replace("-", "_")
    return {"name": name, "version": version, "manager": "pip", "platform": "linux-64", "dependencies": deps or {},
            "url": f"{PYPI}/{wheel}-{version}-py3-none-manylinux2014_x86_64.whl", "hash": {"sha256": SHA},
            "category": "main", "optional": False}


def _conda_lock(tmp_path: Path, packages: list[dict[str, Any]], name: str = "conda-lock.yml") -> Path:
    doc = {"version": 1, "metadata": {"channels": [{"url": "conda-forge", "used_env_vars": []}],
                                      "platforms": ["linux-64"], "sources": ["environment.yml"]},
           "package": packages}
    f = tmp_path / name
    f.write_text(json.dumps(doc, indent=1))
    return f


CUDA_STACK = [_conda("python", "3.11.9", "hb806964_0_cpython"), _conda("cuda-version", "12.6", "h7480c83_3"),
              _conda("libcusolver", "11.7.3.90", "h9ab20c4_1", {"cuda-version": ">=12.6,<12.7.0a0"})]


def test_one_cuda_library_from_conda_and_from_a_pip_wheel_in_a_conda_lock(tmp_path: Path) -> None:
    lock = _conda_lock(tmp_path, [*CUDA_STACK, _pip("nvidia-cusolver-cu12", "11.7.3.90")])
    rc, findings, _ = _lint(lock, cwd=tmp_path)
    eg133 = _codes(findings)["EG133"][0]
    assert rc == 1 and eg133["severity"] == "error", findings
    assert "conda libcusolver 11.7.3.90 and pip nvidia-cusolver-cu12 11.7.3.90" in eg133["message"], eg133
    assert eg133["line"] and eg133["package"] == "nvidia-cusolver-cu12", eg133
    # the same library on another CUDA line is EG157's (lines mixed), not a second finding here
    other = _conda_lock(tmp_path, [*CUDA_STACK, _pip("nvidia-cusolver-cu11", "11.4.1.48")], "other.yml")
    _, findings, _ = _lint(other, cwd=tmp_path)
    assert "EG157" in _codes(findings) and "EG133" not in _codes(findings), findings


def test_a_pip_package_built_for_cuda_names_the_wheels_it_pulls_in_a_pixi_lock(tmp_path: Path) -> None:
    """pixi.lock: cupy-cuda12x's metadata (requires_dist) pulls nvidia-cusolver-cu12 beside conda's
    libcusolver; the finding says who pulled the wheel in."""
    cupy = f"{PYPI}/cupy_cuda12x-13.3.0-cp311-cp311-manylinux2014_x86_64.whl"
    wheel = f"{PYPI}/nvidia_cusolver_cu12-11.7.3.90-py3-none-manylinux2014_x86_64.whl"
    py = f"{CF}/linux-64/python-3.11.9-hb806964_0_cpython.conda"
    cv = f"{CF}/noarch/cuda-version-12.6-h7480c83_3.conda"
    solver = f"{CF}/linux-64/libcusolver-11.7.3.90-h9ab20c4_1.conda"
    text = (f"version: 6\nenvironments:\n  default:\n    channels:\n    - url: {CF}/\n    indexes:\n"
            f"    - https://pypi.org/simple\n    packages:\n      linux-64:\n      - conda: {py}\n      - conda: {cv}\n"
            f"      - conda: {solver}\n      - pypi: {cupy}\n      - pypi: {wheel}\npackages:\n"
            f"- conda: {py}\n  sha256: {SHA}\n  md5: {MD5}\n"
            f"- conda: {cv}\n  sha256: {SHA}\n  md5: {MD5}\n"
            f"- conda: {solver}\n  sha256: {SHA}\n  md5: {MD5}\n  depends:\n  - cuda-version >=12.6,<12.7.0a0\n"
            f"- pypi: {cupy}\n  name: cupy-cuda12x\n  version: 13.3.0\n  sha256: {SHA}\n  requires_dist:\n"
            f"  - nvidia-cusolver-cu12==11.7.3.90 ; extra == 'ctk'\n  requires_python: '>=3.9'\n"
            f"- pypi: {wheel}\n  name: nvidia-cusolver-cu12\n  version: 11.7.3.90\n  sha256: {SHA}\n")
    (tmp_path / "pixi.lock").write_text(text)
    rc, findings, _ = _lint(tmp_path / "pixi.lock", cwd=tmp_path)
    eg133 = _codes(findings)["EG133"][0]
    assert rc == 1 and "(pulled in by pip's cupy-cuda12x 13.3.0)" in eg133["message"], eg133


def test_a_cuda_built_pypi_package_beside_a_conda_cuda_stack_in_a_spec(tmp_path: Path) -> None:
    """No lock at hand: the name's CUDA suffix says it (`cupy-cuda12x`, `*-cu12`), as a warning."""
    env = tmp_path / "environment.yml"
    env.write_text("channels: [conda-forge]\ndependencies:\n  - python=3.11\n  - cuda-version=12.6\n"
                   "  - cuda-cudart\n  - pip\n  - pip:\n    - cupy-cuda12x==13.3.0\n")
    rc, findings, _ = _lint(env, cwd=tmp_path)
    eg133 = _codes(findings)["EG133"][0]
    assert rc == 0 and eg133["severity"] == "warning" and eg133["line"] == 8, eg133
    assert "`-cuda12x`" in eg133["message"] and "cuda-cudart" in eg133["message"], eg133
    # without a conda CUDA stack there is no second copy: nothing to say
    env.write_text("channels: [conda-forge]\ndependencies:\n  - python=3.11\n  - pip\n  - pip:\n"
                   "    - cupy-cuda12x==13.3.0\n")
    _, findings, _ = _lint(env, cwd=tmp_path)
    assert "EG133" not in _codes(findings), findings


# ------------------------------------------------------------------ 3 and 4: what the lock readers refuse

def test_a_conda_lock_entry_without_hash_or_manager_is_refused_by_lint_and_diff(tmp_path: Path) -> None:
    for missing in ("hash", "manager"):
        entry = _conda("zlib", "1.3.1", "hb9d3cd8_2")
        del entry[missing]
        lock = _conda_lock(tmp_path, [CUDA_STACK[0], entry], f"{missing}.yml")
        rc, _, err = _lint(lock, cwd=tmp_path)
        assert rc == 2 and f"package[1].{missing}: package[1] (zlib) has no `{missing}`" in err, err
        diff = envguard("diff", str(lock), str(lock), cwd=tmp_path)
        assert diff.returncode == 2 and f"has no `{missing}`" in diff.stderr, diff.stderr


def test_a_pixi_lock_with_a_platform_twice_is_refused_by_lint_as_by_diff(tmp_path: Path) -> None:
    zlib = f"{CF}/linux-64/zlib-1.3.1-hb9d3cd8_2.conda"
    text = (f"version: 7\nplatforms:\n- name: linux-64\n- name: gpu\n  subdir: linux-64\n- name: gpu\n"
            f"  subdir: linux-64\nenvironments:\n  default:\n    channels:\n    - url: {CF}/\n    packages:\n"
            f"      linux-64:\n      - conda: {zlib}\npackages:\n- conda: {zlib}\n  sha256: {SHA}\n  md5: {MD5}\n")
    (tmp_path / "pixi.lock").write_text(text)
    rc, _, err = _lint(tmp_path / "pixi.lock", cwd=tmp_path)
    diff = envguard("diff", "pixi.lock", "pixi.lock", cwd=tmp_path)
    assert rc == 2 and diff.returncode == 2, (err, diff.stderr)
    assert "platform name 'gpu' is declared twice" in err and "platform name 'gpu' is declared twice" in diff.stderr


V7_TABLES = {
    "a platform table without a name": ("platforms:\n- subdir: linux-64\n", "linux-64", "needs a `name`"),
    "an empty name": ("platforms:\n- name: ''\n", "linux-64", "'' is not a known subdir"),
    "virtual packages that are no list": ("platforms:\n- name: linux-64\n  virtual-packages: __cuda=12\n",
                                          "linux-64", "must be a list of strings"),
    "a virtual package that is no string": ("platforms:\n- name: linux-64\n  virtual-packages:\n  - 42\n",
                                            "linux-64", "must be a list of strings"),
    "no platform table at all": ("", "linux-64", "names its platforms in a 'platforms' table"),
}


@pytest.mark.slow  # an `envguard lint` and an `envguard diff` process for each form
def test_a_malformed_v7_platform_table_is_refused_by_lint_diff_and_rattler(tmp_path: Path) -> None:
    import rattler

    zlib = f"{CF}/linux-64/zlib-1.3.1-hb9d3cd8_2.conda"
    for form, (table, platform, why) in V7_TABLES.items():
        d = tmp_path / form.replace(" ", "-")
        d.mkdir()
        (d / "pixi.lock").write_text(
            f"version: 7\n{table}environments:\n  default:\n    channels:\n    - url: {CF}/\n    packages:\n"
            f"      {platform}:\n      - conda: {zlib}\npackages:\n- conda: {zlib}\n  sha256: {SHA}\n  md5: {MD5}\n")
        with pytest.raises(Exception) as refused:  # rattler's own error family: pixi's reader refuses it
            rattler.LockFile.from_path(d / "pixi.lock")
        assert refused.value is not None, form
        rc, _, err = _lint(d / "pixi.lock", cwd=d)
        diff = envguard("diff", "pixi.lock", "pixi.lock", cwd=d)
        assert rc == 2 and why in err, (form, err)
        assert diff.returncode == 2 and why in diff.stderr, (form, diff.stderr)


def test_a_template_named_like_a_lock_gets_one_message_from_lint_and_diff(tmp_path: Path) -> None:
    """A conda-build meta.yaml-style file: diff said "malformed JSON" (it starts with `{`), lint "malformed
    YAML"; both now say the same line, naming the Jinja it holds."""
    f = tmp_path / "conda-lock.yml"
    f.write_text('{% set version = "1.0" %}\npackage:\n  name: foo\n  version: {{ version }}\n')
    rc, _, err = _lint(f, cwd=tmp_path)
    diff = envguard("diff", str(f), str(f), cwd=tmp_path)
    assert rc == 2 and diff.returncode == 2
    lint_line = err.strip().splitlines()[-1].removeprefix("error: ")
    diff_line = diff.stderr.strip().splitlines()[-1].removeprefix("error: side A: ")
    assert lint_line == diff_line and "Jinja templating" in lint_line and ":1:2:" in lint_line, (lint_line, diff_line)


# ------------------------------------------------------------------ 2: pixi's env-markers, backends, inheritance

def test_pixi_env_markers_are_read_as_pixi_reads_them(tmp_path: Path) -> None:
    m = tmp_path / "pixi.toml"
    body = ('[workspace]\nname = "em"\nchannels = ["conda-forge"]\nplatforms = ["linux-64", "win-64"]\n\n'
            '[dependencies]\npython = "3.11.*"\n\n[pypi-dependencies]\n'
            'pywin32 = {{ version = ">=306", env-markers = "{marker}" }}\n')
    m.write_text(body.format(marker="sys_platform == 'win32'"))
    rc, findings, err = _lint(m, cwd=tmp_path)
    assert rc == 0 and findings == [], (findings, err)
    # pixi refuses a marker that names no marker variable (pixi_pypi_spec's own test), and so does envguard
    m.write_text(body.format(marker="potato == 'potato'"))
    rc, _, err = _lint(m, cwd=tmp_path)
    assert rc == 2 and "pypi-dependencies.pywin32.env-markers" in err and "not an environment marker" in err, err


def _workspace(tmp_path: Path, ws_deps: str, member: str) -> Path:
    (tmp_path / "pixi.toml").write_text(
        '[workspace]\nchannels = ["conda-forge"]\nplatforms = ["linux-64"]\npreview = ["pixi-build"]\n\n'
        f'[workspace.dependencies]\n{ws_deps}\n[dependencies]\nmypkg = {{ path = "pkg" }}\n')
    (tmp_path / "pkg").mkdir(exist_ok=True)
    pkg = tmp_path / "pkg" / "pixi.toml"
    pkg.write_text('[package]\nname = "mypkg"\nversion = "0.1.0"\n\n[package.build.backend]\n'
                   f'name = "pixi-build-python"\n{member}\n[package.run-dependencies]\nnumpy = {{ workspace = true }}\n')
    return pkg


def test_a_package_manifest_is_read_against_its_workspace(tmp_path: Path) -> None:
    both = 'pixi-build-python = ">=0.4"\nnumpy = ">=2"\n'
    # inheritance the workspace gives meaning to, and a backend given by the path of a package file: read
    for member in ("workspace = true\n", 'path = "../backend-0.1-0.conda"\n'):
        rc, findings, err = _lint(_workspace(tmp_path, both, member), cwd=tmp_path)
        assert rc == 0, (member, findings, err)
    # what pixi refuses: a name the workspace does not define, a backend that is a source tree
    rc, _, err = _lint(_workspace(tmp_path, 'pixi-build-python = ">=0.4"\n', "workspace = true\n"), cwd=tmp_path)
    assert rc == 2 and "does not define `numpy` in [workspace.dependencies]" in err and "pixi.toml:10" in err, err
    rc, _, err = _lint(_workspace(tmp_path, both, 'path = "../backend-src"\n'), cwd=tmp_path)
    assert rc == 2 and "build backends cannot be defined as source dependencies" in err, err
    rc, _, err = _lint(_workspace(tmp_path, both, 'workspace = true\nversion = "1"\n'), cwd=tmp_path)
    assert rc == 2 and "`version` is mutually exclusive with `workspace`" in err, err


# ------------------------------------------------------------------ 3: a feature's platforms; 8 and 9 in a manifest

WORKSPACE = """\
[workspace]
name = "ws"
channels = ["conda-forge"]
platforms = ["linux-64", "osx-arm64"]

[dependencies]
python = "3.11.*"

[pypi-dependencies]
torch = "==2.9.1"

[feature.gpu]
platforms = ["linux-64", "linux-aarch64"]

[feature.gpu.dependencies]
python = "3.11.*"

[feature.gpu.pypi-dependencies]
torch = { version = "==2.7.1+cu126", index = "https://download.pytorch.org/whl/cu126" }

[feature.cu.pypi-options]
index-strategy = "unsafe-best-match"
extra-index-urls = ["https://download.pytorch.org/whl/cu126"]

[feature.cu.pypi-dependencies]
torchvision = "*"

[environments]
gpu = { features = ["gpu"], no-default-feature = true }
cu = ["cu"]
"""


def test_a_workspace_names_its_platforms_torch_releases_and_index_strategy(tmp_path: Path) -> None:
    m = tmp_path / "pixi.toml"
    m.write_text(WORKSPACE)
    rc, findings, err = _lint(m, cwd=tmp_path)
    by = _codes(findings)
    assert rc == 0, (findings, err)
    # 3: a feature platform the workspace does not list, dropped by pixi without a word
    eg135 = by["EG135"][0]
    assert eg135["line"] == 13 and "`linux-aarch64`" in eg135["message"], eg135
    # 8: the default and cu environments get torch 2.9, gpu 2.7: named once, at the second pin
    assert len(by["EG136"]) == 1, by["EG136"]
    eg136 = by["EG136"][0]
    assert "`default`, `cu` get torch 2.9" in eg136["message"] and "`gpu` torch 2.7" in eg136["message"], eg136
    assert eg136["line"] == 19, eg136
    # 9: unsafe-best-match beside the PyTorch index, with a torch that has no index of its own
    eg137 = by["EG137"][0]
    assert eg137["line"] == 22 and "https://download.pytorch.org/whl/cu126" in eg137["message"], eg137
    # one solve-group solves them together: no release can differ there; torch tied to its index: no EG137
    grouped = WORKSPACE.replace('gpu = { features = ["gpu"], no-default-feature = true }',
                                'gpu = { features = ["gpu"], no-default-feature = true, solve-group = "one" }\n'
                                'default = { features = [], solve-group = "one" }')
    grouped = grouped.replace("cu = [\"cu\"]", 'cu = { features = ["cu"], solve-group = "one" }')
    grouped = grouped.replace('torch = "==2.9.1"', 'torch = { version = "==2.9.1", index = '
                                                   '"https://download.pytorch.org/whl/cu126" }')
    grouped = grouped.replace('torchvision = "*"', 'torchvision = { version = "*", index = '
                                                   '"https://download.pytorch.org/whl/cu126" }')
    m.write_text(grouped)
    rc, findings, err = _lint(m, cwd=tmp_path)
    assert rc == 0 and not {"EG136", "EG137"} & set(_codes(findings)), (findings, err)


def test_environments_of_a_pixi_lock_that_lock_different_torch_releases(tmp_path: Path) -> None:
    py = f"{CF}/linux-64/python-3.11.9-hb806964_0_cpython.conda"
    t9 = f"{PYPI}/torch-2.9.1-cp311-cp311-manylinux_2_28_x86_64.whl"
    t7 = "https://download.pytorch.org/whl/cu126/torch-2.7.1%2Bcu126-cp311-cp311-manylinux_2_28_x86_64.whl"

    def env(name: str, torch: str) -> str:
        return (f"  {name}:\n    channels:\n    - url: {CF}/\n    indexes:\n    - https://pypi.org/simple\n"
                f"    packages:\n      linux-64:\n      - conda: {py}\n      - pypi: {torch}\n")

    def lock(second: str) -> str:
        return ("version: 6\nenvironments:\n" + env("default", t9) + env("gpu", second) + "packages:\n"
                f"- conda: {py}\n  sha256: {SHA}\n  md5: {MD5}\n"
                f"- pypi: {t9}\n  name: torch\n  version: 2.9.1\n  sha256: {SHA}\n  requires_python: '>=3.10'\n"
                f"- pypi: {t7}\n  name: torch\n  version: 2.7.1+cu126\n  sha256: {SHA}\n"
                "  requires_python: '>=3.9'\n")

    (tmp_path / "pixi.lock").write_text(lock(t7))
    rc, findings, _ = _lint(tmp_path / "pixi.lock", cwd=tmp_path)
    eg136 = _codes(findings)["EG136"][0]
    assert rc == 0 and "`default` locks pip torch 2.9.1, environment `gpu` pip torch 2.7.1+cu126" in eg136["message"]
    assert eg136["line"] == 20 and "(on linux-64)" in eg136["message"], eg136
    (tmp_path / "pixi.lock").write_text(lock(t9))
    _, findings, _ = _lint(tmp_path / "pixi.lock", cwd=tmp_path)
    assert "EG136" not in _codes(findings), findings


# ------------------------------------------------------------------ 9: a spec named like a lock

def test_a_hand_written_spec_named_conda_lock_yml_locks_nothing(tmp_path: Path) -> None:
    f = tmp_path / "conda-lock.yml"
    f.write_text("channels:\n  - conda-forge\ndependencies:\n  - python=3.11\n  - numpy\nplatforms:\n  - linux-64\n")
    rc, findings, _ = _lint(f, cwd=tmp_path)
    eg138 = _codes(findings)["EG138"][0]
    assert rc == 1 and eg138["line"] == 1 and "locks nothing" in eg138["message"], eg138
    (tmp_path / "environment.yml").write_text(f.read_text())
    _, findings, _ = _lint(tmp_path / "environment.yml", cwd=tmp_path)
    assert "EG138" not in _codes(findings), findings


# ------------------------------------------------------------------ 7: the legacy channels listed and unused

def test_unused_nvidia_and_pytorch_channels_are_named_alike_in_a_spec_and_a_lock(tmp_path: Path) -> None:
    env = tmp_path / "environment.yml"
    env.write_text("channels:\n  - pytorch\n  - nvidia/label/cuda-12.1.0\n  - conda-forge\ndependencies:\n"
                   "  - python=3.11\n  - numpy\n")
    rc, findings, _ = _lint(env, cwd=tmp_path)
    unused = {f["line"]: f for f in _codes(findings)["EG130"]}
    assert rc == 0 and set(unused) == {2, 3}, findings  # both, though the other legacy channel is listed
    spec_message = unused[3]["message"]
    assert spec_message.startswith("channel `nvidia/label/cuda-12.1.0` is listed but nothing"), spec_message
    lock = _conda_lock(tmp_path, [CUDA_STACK[0]])
    doc = json.loads(lock.read_text())
    doc["metadata"]["channels"].append({"url": "nvidia/label/cuda-12.1.0", "used_env_vars": []})
    lock.write_text(json.dumps(doc))
    _, findings, _ = _lint(lock, cwd=tmp_path)
    lock_message = _codes(findings)["EG130"][0]["message"]
    why = "(the nvidia channel carries CUDA packages only, and none is"
    assert lock_message.startswith("channel `nvidia/label/cuda-12.1.0` is listed but nothing"), lock_message
    assert why in spec_message and why in lock_message, (spec_message, lock_message)
    # the pytorch channel's CUDA builds take their CUDA packages from nvidia: both used
    env.write_text("channels:\n  - pytorch\n  - nvidia\n  - conda-forge\ndependencies:\n  - python=3.11\n"
                   "  - pytorch=2.5.1\n  - pytorch-cuda=12.1\n")
    _, findings, _ = _lint(env, cwd=tmp_path)
    assert "EG130" not in _codes(findings), findings


def test_the_spec_after_a_channel_url_is_judged_like_any_other(tmp_path: Path) -> None:
    """conda refuses `python >=3.10 <3.12` after a URL channel as after a named one (EG121); before, any spec
    holding `://` passed unread."""
    env = tmp_path / "environment.yml"
    env.write_text(f"channels: [conda-forge]\ndependencies:\n  - '{CF}::python >=3.10 <3.12'\n")
    rc, findings, _ = _lint(env, cwd=tmp_path)
    eg121 = _codes(findings)["EG121"][0]
    assert rc == 1 and eg121["line"] == 3 and "two constraints separated by a space" in eg121["message"], eg121
