"""envguard.variants: what a project declares (environment.yml + variants/<name>.yml) and which lock is whose."""

from __future__ import annotations

from pathlib import Path

import pytest

from envguard.errors import UserError
from envguard.variants import (
    META_VARIANT,
    META_VARIANT_CUDA,
    META_VARIANTS,
    Variant,
    cuda_of,
    declared_variants,
    find_variant,
    lock_variant,
    lock_variant_cuda,
    lock_variants,
    variant_files,
    variant_metadata,
)

BASE = """\
name: demo
channels: [conda-forge]
platforms: [linux-64, osx-arm64]
dependencies:
  - python=3.12
  - numpy
  - pytorch=2.10.*=cpu*
"""


def _project(tmp_path: Path, overlays: dict[str, str], base: str = BASE) -> Path:
    spec = tmp_path / "environment.yml"
    spec.write_text(base)
    if overlays:
        (tmp_path / "variants").mkdir()
    for name, text in overlays.items():
        (tmp_path / "variants" / name).write_text(text)
    return spec


CPU = "dependencies:\n  - pytorch=2.10.*=cpu*\n"
CU126 = "platforms: [linux-64]\ndependencies:\n  - pytorch=2.10.*=cuda*\n  - cuda-version=12.6.*\n"
CU130 = "platforms: [linux-64]\ndependencies:\n  - pytorch=2.10.*=cuda*\n  - conda-forge::cuda-version >=13.0,<13.1\n"


def test_single_variant_project_declares_none(tmp_path: Path) -> None:
    spec = _project(tmp_path, {})
    assert declared_variants(spec) == []
    (tmp_path / "variants").mkdir()  # an empty folder is no declaration either
    assert declared_variants(spec) == []


def test_variants_default_first_with_cuda_lines_platforms_and_locks(tmp_path: Path) -> None:
    spec = _project(tmp_path, {"cuda-12.6.yml": CU126, "cpu.yml": CPU, "cuda-13.0.yml": CU130})
    vs = declared_variants(spec)
    assert [v.name for v in vs] == ["cpu", "cuda-12.6", "cuda-13.0"]
    cpu, c126, c130 = vs
    assert cpu.default and not c126.default and not c130.default
    assert cpu.cuda is None and c126.cuda == "12.6" and c130.cuda == "13.0"
    assert cpu.platforms == ("linux-64", "osx-arm64")  # the spec's, the overlay names none
    assert c126.platforms == ("linux-64",)
    assert c126.lockfile == tmp_path / "conda-lock.cuda-12.6.yml"
    assert c126.overlay == tmp_path / "variants" / "cuda-12.6.yml"
    assert variant_files(spec, c126) == [spec, tmp_path / "variants" / "cuda-12.6.yml"]


def test_default_is_the_overlay_the_spec_already_holds(tmp_path: Path) -> None:
    base = BASE.replace("pytorch=2.10.*=cpu*", "pytorch=2.10.*=cuda*\n  - cuda-version=12.6.*")
    vs = declared_variants(_project(tmp_path, {"cpu.yml": CPU, "cuda-12.6.yml": CU126}, base))
    assert [(v.name, v.default) for v in vs] == [("cuda-12.6", True), ("cpu", False)]


def test_renaming_the_file_renames_the_variant(tmp_path: Path) -> None:
    spec = _project(tmp_path, {"cpu.yml": CPU, "cluster.yml": CU126})
    names = {v.name: v for v in declared_variants(spec)}
    assert names["cluster"].cuda == "12.6"  # from cuda-version, not the name
    assert names["cluster"].lockfile.name == "conda-lock.cluster.yml"


@pytest.mark.parametrize("text, why", [
    ("just a note\n", "is not a variant overlay"),
    ("- a\n- b\n", "is not a variant overlay"),
    ("dependencies: numpy\n", "is not a variant overlay"),
    ("dependencies: [numpy]\nflavour: x\n", "unknown key 'flavour'"),
    ("dependencies: [numpy]\nplatforms: [linux-128]\n", "unsupported platform 'linux-128'"),
])
def test_a_file_that_is_not_an_overlay_is_refused_naming_it(tmp_path: Path, text: str, why: str) -> None:
    spec = _project(tmp_path, {"cpu.yml": CPU, "notes.yml": text})
    with pytest.raises(UserError) as e:
        declared_variants(spec)
    assert why in str(e.value)
    assert e.value.file is not None and e.value.file.endswith("notes.yml")
    assert e.value.exit_code == 2


def test_a_name_that_is_no_plain_word_is_refused(tmp_path: Path) -> None:
    spec = _project(tmp_path, {"cpu.yml": CPU, "my variant.yml": CU126})
    with pytest.raises(UserError, match="not a plain word"):
        declared_variants(spec)


def test_yml_and_yaml_of_one_name_are_refused(tmp_path: Path) -> None:
    spec = _project(tmp_path, {"cpu.yml": CPU, "cpu.yaml": CPU})
    with pytest.raises(UserError, match="declared twice"):
        declared_variants(spec)


def test_find_variant_names_the_declared_ones(tmp_path: Path) -> None:
    vs = declared_variants(_project(tmp_path, {"cpu.yml": CPU, "cuda-12.6.yml": CU126}))
    assert find_variant(vs, "cuda-12.6").cuda == "12.6"
    with pytest.raises(UserError, match=r"declared: cpu, cuda-12.6"):
        find_variant(vs, "cuda-13.0")


@pytest.mark.parametrize("lines, name, cuda", [
    (["cuda-version=12.9"], "x", "12.9"),
    (["cuda-version 12.8.*"], "x", "12.8"),
    (["cuda-version>=13.0,<13.1"], "x", "13.0"),
    (["conda-forge::cuda-version=12.6"], "x", "12.6"),
    (["cuda-version-extra=11.8"], "x", None),  # another package
    (["pytorch=*=cuda*"], "cuda-12.4", "12.4"),
    (["pytorch=*=cpu*"], "cpu", None),
])
def test_cuda_line(lines: list[str], name: str, cuda: str | None) -> None:
    assert cuda_of(lines, name) == cuda


def test_lock_metadata_round_trip(tmp_path: Path) -> None:
    vs = declared_variants(_project(tmp_path, {"cpu.yml": CPU, "cuda-12.6.yml": CU126}))
    meta = variant_metadata(vs[1], vs)
    assert meta == {META_VARIANT: "cuda-12.6", META_VARIANT_CUDA: "12.6", META_VARIANTS: "cpu,cuda-12.6"}
    assert all(k.startswith("envguard.") for k in meta)  # CEP 37: envguard's keys only in custom_metadata
    whole = {"platforms": ["linux-64"], "custom_metadata": {**meta, "envguard.cuda": "12.6"}}
    assert lock_variant(whole) == lock_variant(meta) == "cuda-12.6"
    assert lock_variant_cuda(whole) == "12.6" and lock_variants(whole) == ["cpu", "cuda-12.6"]
    cpu = variant_metadata(vs[0], vs)
    assert lock_variant(cpu) == "cpu" and lock_variant_cuda(cpu) is None
    assert lock_variant({"custom_metadata": {"envguard.cuda": "12.6"}}) is None  # a single-variant lock
    assert lock_variant({}) is None and lock_variants({"custom_metadata": None}) == []


def test_variant_is_frozen(tmp_path: Path) -> None:
    v = Variant("cpu", tmp_path / "variants/cpu.yml", tmp_path / "conda-lock.cpu.yml", None, ("linux-64",))
    with pytest.raises(AttributeError):
        v.name = "x"  # type: ignore[misc]
