"""Mixing rules on what real projects' files hold: false alarms first (names that are equal across conda
and PyPI but are not the same project), then what used to be missed."""

from __future__ import annotations

import json
from pathlib import Path

from envguard.lint import lint_file, lint_text
from envguard.model import CONDA_NOT_PYPI, CONDA_TO_PYPI, canonical_name

CONDA_TZ = "https://conda.anaconda.org/conda-forge/noarch/{}-2025b-h78e105d_0.conda"
PIP_TZ = "https://files.pythonhosted.org/packages/5c/23/c7/tzdata-2025.2-py2.py3-none-any.whl"
H = {"md5": "4c1a3f5e9b0a8a1f6b2c7d5e3f1a2b3c", "sha256": "2c1a3f5e9b0a8a1f6b2c7d5e3f1a2b3c" * 2}


def _lock(tmp_path: Path, conda_name: str) -> Path:
    pkgs = [
        {"name": conda_name, "version": "2025b", "manager": "conda", "platform": "linux-64", "dependencies": {},
         "url": CONDA_TZ.format(conda_name), "hash": H, "category": "main", "optional": False},
        {"name": "tzdata", "version": "2025.2", "manager": "pip", "platform": "linux-64", "dependencies": {},
         "url": PIP_TZ, "hash": {"sha256": H["sha256"]}, "category": "main", "optional": False},
    ]
    doc = {"version": 1, "metadata": {"channels": [{"url": "conda-forge", "used_env_vars": []}],
                                      "platforms": ["linux-64"], "sources": ["environment.yml"]}, "package": pkgs}
    f = tmp_path / "conda-lock.yml"
    f.write_text(json.dumps(doc))
    return f


def test_condas_tzdata_is_not_pypis(tmp_path: Path) -> None:
    """conda-forge's tzdata is the IANA database; PyPI's tzdata is conda's python-tzdata: not locked twice."""
    assert "EG151" not in {f.code for f in lint_file(_lock(tmp_path, "tzdata"))}
    assert "EG151" in {f.code for f in lint_file(_lock(tmp_path, "python-tzdata"))}


def test_conda_only_names_come_from_the_mapping() -> None:
    mapping = json.loads((Path(__file__).resolve().parent.parent / "envguard" / "data" /
                          "conda-pypi-mapping.json").read_text())
    for name in CONDA_NOT_PYPI:
        # the PyPI project of that name is another conda package, and that package maps back to it
        conda = mapping[name]["conda_name"]
        assert conda != name and CONDA_TO_PYPI[conda] == name
        assert canonical_name(name, "conda") != canonical_name(name, "pip")
        assert canonical_name(conda, "conda") == canonical_name(name, "pip")


# ------------------------------------------------------------------ what used to be missed

def _codes(text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for f in lint_text(text):
        out.setdefault(f.code, []).append(f.message)
    return out


HEAD = "name: x\nchannels:\n  - conda-forge\n  - nodefaults\ndependencies:\n  - python=3.11\n"


def test_one_cuda_library_from_both_managers_on_one_line() -> None:
    found = _codes(HEAD + "  - cuda-version=12.9\n  - pytorch=2.8=cuda12*\n  - libcublas\n  - pip\n  - pip:\n"
                          "      - nvidia-cublas-cu12==12.9.1.4\n")
    assert "EG133" in found and "two copies of one CUDA library" in found["EG133"][0]
    # another line is EG157's (CUDA lines mixed), not this rule's
    other = _codes(HEAD + "  - cuda-version=11.8\n  - libcublas\n  - pip\n  - pip:\n      - nvidia-cublas-cu12\n")
    assert "EG133" not in other


def test_cuda_wheels_beside_a_conda_cuda_stack_in_a_pixi_manifest(tmp_path: Path) -> None:
    f = tmp_path / "pixi.toml"
    f.write_text('[workspace]\nname = "w"\nchannels = ["conda-forge"]\nplatforms = ["linux-64"]\n'
                 '[dependencies]\npython = "3.11.*"\ncuda-version = "12.9.*"\nlibcublas = "*"\n'
                 '[pypi-dependencies]\nnvidia-cublas-cu12 = "*"\n')
    assert "EG133" in {x.code for x in lint_file(f)}


def test_torch_only_as_a_dependency_while_cuda_is_pinned() -> None:
    found = _codes(HEAD + "  - cuda-version=12.9\n  - pytorch_geometric\n")
    assert "EG134" in found and "pytorch_geometric" in found["EG134"][0]
    assert "EG134" not in _codes(HEAD + "  - cuda-version=12.9\n  - pytorch_geometric\n  - pytorch=2.8=cuda12*\n")


def test_nightly_channels_beyond_pytorch_nightly() -> None:
    found = _codes(HEAD.replace("  - nodefaults\n", "  - rapidsai-nightly\n  - nodefaults\n") + "  - cugraph>=25.10.0a0\n")
    assert any("rapidsai-nightly" in m for m in found.get("EG120", []))
    assert "EG120" not in _codes(HEAD + "  - numpy\n")


def test_git_requirement_without_a_commit() -> None:
    found = _codes(HEAD + "  - pip\n  - pip:\n      - git+https://github.com/org/repo.git\n"
                          "      - lib @ git+https://github.com/org/lib@0123456789abcdef0123456789abcdef01234567\n")
    assert len(found.get("EG132", [])) == 1 and "org/repo.git" in found["EG132"][0]


def test_a_dependency_listed_twice() -> None:
    found = _codes(HEAD + "  - numpy\n  - numpy>=1.26\n")
    assert len(found.get("EG131", [])) == 1
    # on two platforms by selectors: not twice
    assert "EG131" not in _codes(HEAD + "  - numpy=1.26  # [linux]\n  - numpy=2.0  # [osx]\n")


def test_unused_nvidia_channel() -> None:
    found = _codes(HEAD.replace("  - nodefaults\n", "  - nvidia\n  - nodefaults\n") + "  - numpy\n")
    assert any("`nvidia`" in m for m in found.get("EG130", []))
    used = _codes(HEAD.replace("  - nodefaults\n", "  - nvidia\n  - nodefaults\n") + "  - cuda-cudart\n")
    assert not any("`nvidia`" in m for m in used.get("EG130", []))


def test_unknown_key_is_named() -> None:
    (msg,) = _codes(HEAD + "chanels: []\n")["EG117"]
    assert msg.startswith("chanels:")


def test_torch_wheels_from_pypi_beside_conda_cuda_in_a_pixi_manifest(tmp_path: Path) -> None:
    f = tmp_path / "pixi.toml"
    base = ('[workspace]\nname = "w"\nchannels = ["conda-forge"]\nplatforms = ["linux-64"]\n'
            '[dependencies]\npython = "3.11.*"\n')
    f.write_text(base + 'cuda-version = "12.9.*"\ncuda-cudart = "*"\n[pypi-dependencies]\ntorch = ">=2.8"\n')
    found = [x for x in lint_file(f) if x.code == "EG133"]
    assert found and "CUDA from both managers" in found[0].message
    f.write_text(base + '[pypi-dependencies]\ntorch = ">=2.8"\n')  # PyPI's torch alone: pixi's documented route
    assert "EG133" not in {x.code for x in lint_file(f)}
