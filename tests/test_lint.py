"""envguard lint: each rule on small environment and lock files, and the CLI contract."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support.lock_support import LOCK_HEAD

from envguard import cli
from envguard.findings import Severity
from envguard.lint import RULES, lint_file, lint_paths, lint_text, release_lines


def _lint(text: str, name: str = "environment.yml") -> list:
    return lint_text(textwrap.dedent(text).lstrip("\n"), name)


def _codes(findings: list) -> set[str]:
    return {f.code for f in findings}


def _one(findings: list, code: str):
    hits = [f for f in findings if f.code == code]
    assert len(hits) == 1, f"expected one {code}, got {[(f.code, f.line, f.message) for f in findings]}"
    return hits[0]


GOOD = """
name: ok
channels:
  - conda-forge
  - nodefaults
dependencies:
  - python=3.11
  - pytorch=2.13.*=cuda12*
  - cuda-version=12.9
  - numpy
  - pip
  - pip:
    - rich>=13
"""


def test_good_file_has_no_findings() -> None:
    assert _lint(GOOD) == []


def test_every_rule_is_documented() -> None:
    doc = (Path(__file__).resolve().parent.parent / "docs" / "commands" / "lint.md").read_text(encoding="utf-8")
    missing = [code for code in RULES if f"`{code}`" not in doc]
    assert not missing, f"rules missing from docs/commands/lint.md: {missing}"


@pytest.mark.parametrize("spec,lines", [
    ("2.15.*", {"2.15"}),
    ("=2.1", {"2.1"}),
    ("==2.1.0", {"2.1"}),
    ("~=2.1.0", {"2.1"}),
    (">=2.0.0,<=2.6.0", {"2.0", "2.1", "2.2", "2.3", "2.4", "2.5", "2.6"}),
])
def test_release_lines_of_conda_constraints(spec: str, lines: set[str]) -> None:
    from envguard.lint.constraints import TORCH_UNIVERSE

    assert release_lines(spec, "conda", TORCH_UNIVERSE) == lines


def test_release_lines_unbounded_and_pip() -> None:
    from envguard.lint.constraints import TORCH_UNIVERSE

    assert release_lines(None, "conda", TORCH_UNIVERSE) is None
    assert len(release_lines(">=2.4.1", "conda", TORCH_UNIVERSE) or ()) > 1
    assert release_lines("==2.0.0", "pip", TORCH_UNIVERSE) == {"2.0"}


def test_python_missing_and_unpinned() -> None:
    f = _one(_lint("""
        channels: [conda-forge]
        dependencies:
          - pytorch=2.13.*=cpu*
        """), "EG101")
    assert f.severity is Severity.ERROR and f.line == 2 and "python=3.11" in f.fix
    f = _one(_lint("""
        channels: [conda-forge]
        dependencies:
          - python>=3.10
          - pytorch=2.13.*=cpu*
        """), "EG101")
    assert f.line == 3 and "python>=3.10" in f.message


def test_python_unsupported_and_legacy() -> None:
    old = _one(_lint("""
        channels: [conda-forge]
        dependencies:
          - python=3.9
          - pytorch=2.8.*=cpu*
        """), "EG102")
    assert old.severity is Severity.ERROR and old.line == 3
    new = _one(_lint("""
        channels: [conda-forge]
        dependencies:
          - python=3.12
          - pytorch=2.13.*=cpu*
        """), "EG102")
    assert new.severity is Severity.INFO and "the file is valid" in new.message  # a newer Python fails nothing
    legacy = _one(_lint("""
        channels: [conda-forge]
        dependencies:
          - python=3.10
          - pytorch=2.13.*=cpu*
        """), "EG103")
    assert legacy.severity is Severity.WARNING and "2026-10-31" in legacy.message


def test_torch_python_mismatch_names_nearest_choices() -> None:
    """PyPI's torch 2.15 wheels need Python >= 3.11 (conda-forge still builds 2.13 for 3.10: routes differ)."""
    fs = _lint("""
        channels: [conda-forge]
        dependencies:
          - python=3.10
          - pip
          - pip:
            - torch==2.15.*
        """)
    f = _one(fs, "EG104")
    assert f.severity is Severity.ERROR and f.line == 3
    assert "needs Python ≥ 3.11" in f.message
    assert "python=3.11" in f.fix and "torch 2.14" in f.fix
    assert "EG104" not in _codes(_lint("""
        channels: [conda-forge]
        dependencies:
          - python=3.10
          - pytorch=2.13.*=cpu*
        """))


def test_torch_not_pinned_and_unknown_release() -> None:
    fs = _lint("""
        channels: [conda-forge]
        dependencies:
          - python=3.11
          - pytorch>=2.4
        """)
    f = _one(fs, "EG105")
    assert f.line == 4 and "pytorch>=2.4" in f.message
    f = _one(_lint("""
        channels: [conda-forge]
        dependencies:
          - python=3.11
          - pytorch=1.13.*=cpu*
        """), "EG106")
    assert f.severity is Severity.WARNING and "older than" in f.message


def test_unknown_release_fix_names_a_torch_the_files_python_runs() -> None:
    """EG106's fix must work as written: PyPI's newest torch (2.15) has no Python 3.10 wheels, 2.14 does."""
    pip_torch = "channels: [conda-forge]\ndependencies:\n  - python={py}\n  - pip\n  - pip:\n    - torch==2.1.0\n"
    assert _one(lint_text(pip_torch.format(py="3.10")), "EG106").fix == "use torch 2.14, or update envguard"
    assert _one(lint_text(pip_torch.format(py="3.11")), "EG106").fix == "use torch 2.15, or update envguard"


def test_core_packages_under_pip() -> None:
    fs = _lint("""
        name: x
        channels: [conda-forge]
        dependencies:
          - python=3.11
          - numpy
          - pip
          - pip:
            - torch==2.13.0
            - requests
            - numpy==2.0.0
        """)
    hits = {f.package: f for f in fs if f.code == "EG107"}
    assert set(hits) == {"torch", "numpy"}
    # numpy from both managers is an error; torch from pip alone is the pip-stack layout, named in one info line
    assert hits["numpy"].line == 10 and hits["numpy"].severity is Severity.ERROR
    assert "numpy=2.0.*" in hits["numpy"].fix
    assert hits["torch"].line == 8 and hits["torch"].severity is Severity.INFO


def test_core_package_through_requirements_include(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text("torch>=2.4,<2.7\n", encoding="utf-8")
    env = tmp_path / "environment.yml"
    env.write_text(textwrap.dedent("""\
        channels: [conda-forge]
        dependencies:
          - python=3.11
          - pip
          - pip:
            - -r requirements.txt
        """), encoding="utf-8")
    fs = lint_file(env)
    f = _one(fs, "EG107")
    assert f.line == 6 and "requirements file" in f.message and f.severity is Severity.INFO
    assert "EG124" in _codes(fs)  # and conda-lock cannot follow -r (spec.validate's rule)


def test_pytorch_cuda_with_pip_torch() -> None:
    fs = _lint("""
        channels: [pytorch, nvidia]
        dependencies:
          - python=3.10
          - pytorch-cuda=11.7
          - pip
          - pip:
            - torch==2.1.0
        """)
    f = _one(fs, "EG108")
    assert f.line == 4 and f.severity is Severity.ERROR


def _env(*deps: str, channels: str = "[conda-forge, nodefaults]") -> str:
    return "channels: " + channels + "\ndependencies:\n  - python=3.11\n  - pip\n" + "".join(
        f"  {d}\n" for d in deps)


def _said(findings: list) -> list[tuple[str, str]]:
    return sorted((f.code, f.severity.value) for f in findings)


def test_a_pip_torch_beside_conda_cuda_is_said_once() -> None:
    """One finding per problem where a torch stack from pip meets conda's CUDA packages: EG107's warning (CUDA
    libraries beside the wheels'), EG157 (two CUDA lines across the managers) and EG108 (pytorch-cuda with a pip
    torch) each name a case the others do not; EG109 and EG118 judge conda builds a pip torch never uses."""
    pip_torch = ("- pip:", "  - torch==2.13.0")
    # conda's cudatoolkit beside the wheels' runtime: the warning, not EG109 ("the solver can pick a CPU build"
    # of a torch the solver does not install)
    fs = lint_text(_env("- cudatoolkit=11.8", *pip_torch))
    assert _said(fs) == [("EG107", "warning")], fs
    assert "cudatoolkit" in fs[0].message
    # pip's CUDA 12 wheels beside conda's CUDA 11: EG157 names both lines; the warning would say it again
    fs = lint_text(_env("- cudatoolkit=11.8", *pip_torch, "  - nvidia-cublas-cu12"))
    assert _said(fs) == [("EG157", "error")], fs
    # cuda-version installs no library: the layout stays supported (info), as check says of the same prefix
    fs = lint_text(_env("- cuda-version=12.9", *pip_torch, "  - nvidia-cublas-cu12"))
    assert _said(fs) == [("EG107", "info")], fs
    # pytorch-cuda with a pip torch: EG108 (and EG110, the legacy channel); no warning repeating EG108, no EG118
    # about which pytorch-channel build would pair with a line the pip torch does not use
    fs = lint_text(_env("- pytorch-cuda=11.7", "- pip:", "  - torch==2.5.1", channels="[pytorch, nvidia]"))
    assert {f.code for f in fs} == {"EG108", "EG110", "EG111"}, _said(fs)


def test_cudatoolkit_with_torch2() -> None:
    f = _one(_lint("""
        channels: [conda-forge]
        dependencies:
          - python=3.11
          - cudatoolkit=11.8
          - pytorch=2.7.*=cuda*
        """), "EG109")
    assert f.line == 4 and f.severity is Severity.ERROR
    assert "EG109" not in _codes(_lint("""
        channels: [conda-forge]
        dependencies:
          - python=3.11
          - cudatoolkit=11.1
          - pytorch=1.9.*=cuda*
        """))


def test_pytorch_cuda_and_pytorch_channel_by_torch_release() -> None:
    new = _lint("""
        channels: [pytorch, nvidia]
        dependencies:
          - python=3.11
          - pytorch=2.6.*
          - pytorch-cuda=12.4
        """)
    assert _one(new, "EG110").severity is Severity.ERROR
    chan = _one(new, "EG111")
    assert chan.severity is Severity.ERROR and chan.line == 1
    old = _lint("""
        channels: [pytorch, nvidia]
        dependencies:
          - python=3.11
          - pytorch=2.5.*
          - pytorch-cuda=12.4
        """)
    assert _one(old, "EG110").severity is Severity.WARNING
    assert _one(old, "EG111").severity is Severity.WARNING


def test_prefixed_pytorch_channel() -> None:
    fs = _lint("""
        channels: [conda-forge]
        dependencies:
          - python=3.11
          - pytorch::pytorch=2.1.0
        """)
    assert _one(fs, "EG111").line == 4
    assert _one(fs, "EG119").line == 4


def test_cuda_without_build_guard() -> None:
    f = _one(_lint("""
        channels: [conda-forge]
        dependencies:
          - python=3.11
          - pytorch=2.13.*
          - cuda-version=12.9
        """), "EG112")
    assert f.line == 4 and "pytorch=2.13.*=cuda12*" in f.fix
    # an "# [osx]" line needs no CUDA guard; a CPU-only file has no CUDA to guard
    assert "EG112" not in _codes(_lint("""
        channels: [conda-forge]
        dependencies:
          - python=3.11
          - pytorch=2.13.*  # [osx]
          - pytorch=2.13.*=cuda12*  # [linux]
          - cuda-version=12.9  # [linux]
        """))
    assert "EG112" not in _codes(_lint("""
        channels: [conda-forge]
        dependencies:
          - python=3.11
          - pytorch=2.13.*
        """))


def test_channels_defaults_http_nightly() -> None:
    fs = _lint("""
        channels:
          - conda-forge
          - defaults
          - http://example.org/conda/mirror
          - pytorch-nightly
        dependencies:
          - python=3.11
          - pytorch=2.13.*=cpu*
        """)
    assert _one(fs, "EG113").line == 3
    assert _one(fs, "EG114").line == 4
    assert _one(fs, "EG120").line == 5
    assert "EG113" not in _codes(_lint("""
        channels: [defaults]
        dependencies: [python=3.11]
        """))


def test_credentials_are_errors_and_redacted() -> None:
    fs = _lint("""
        channels:
          - https://alice:s3cret@conda.example.org/private
          - conda-forge
        dependencies:
          - python=3.11
          - pip
          - pip:
            - --extra-index-url https://bob:hunter2@pypi.example.org/simple
        """)
    creds = [f for f in fs if f.code == "EG115"]
    assert {f.line for f in creds} == {2, 8}
    assert all(f.severity is Severity.ERROR for f in creds)
    blob = json.dumps([f.to_dict() for f in fs])
    assert "s3cret" not in blob and "hunter2" not in blob
    # ${VAR} placeholders are not secrets
    assert "EG115" not in _codes(_lint("""
        channels:
          - https://${USER}:${TOKEN}@conda.example.org/private
        dependencies: [python=3.11]
        """))


def test_pip_section_without_pip_and_unknown_key() -> None:
    fs = _lint("""
        name: x
        channels: [conda-forge]
        dependecies_extra: 1
        dependencies:
          - python=3.11
          - pip:
            - rich
        """)
    assert _one(fs, "EG116").line == 6
    unknown = _one(fs, "EG117")
    assert unknown.line == 3


def test_unknown_key_did_you_mean() -> None:
    f = _one(_lint("""
        chanels: [conda-forge]
        dependencies: [python=3.11]
        """), "EG117")
    assert "channels" in f.fix


def test_torch_cuda_major_not_built() -> None:
    f = _one(_lint("""
        channels: [conda-forge]
        dependencies:
          - python=3.11
          - pytorch=2.13.*=cuda*
          - cuda-version=11.8
        """), "EG118")
    assert f.line == 5 and "cuda-version=12.9" in f.fix
    assert "for CUDA 12.9 and 13.0 on linux-64" in f.message and "12.8 and 13.0 on win-64" in f.message


def test_invalid_spec_and_exact_build_pin() -> None:
    fs = _lint("""
        channels: [conda-forge]
        dependencies:
          - python=3.11
          - pytorch=2.13=cuda12*
          - numpy>=>2
        """)
    exact = _one(fs, "EG122")
    assert exact.line == 4 and "pytorch=2.13.*=cuda12*" in exact.fix
    assert _one(fs, "EG121").line == 5


def test_package_in_conda_and_pip() -> None:
    f = _one(_lint("""
        channels: [conda-forge]
        dependencies:
          - python=3.11
          - rich
          - pip
          - pip:
            - rich
        """), "EG123")
    assert f.line == 7 and f.severity is Severity.WARNING


def test_selector_prefix_and_platform_rules() -> None:
    fs = _lint("""
        channels: [conda-forge]
        prefix: /opt/envs/x
        dependencies:
          - python=3.11
          - rich  # [windoze]
        platforms:
          - linux-64
          - linux-99
        """)
    assert _one(fs, "EG125").line == 5
    assert _one(fs, "EG126").line == 2
    assert _one(fs, "EG127").line == 8


def test_structural_error_stops_deeper_rules() -> None:
    fs = _lint("""
        channels: [conda-forge]
        dependencies: python=3.11
        """)
    assert _codes(fs) == {"EG100"}


# ---------------------------------------------------------------- lock files


def _entry(name: str, version: str, url: str, manager: str = "conda", platform: str = "linux-64") -> str:
    return textwrap.dedent(f"""\
        - name: {name}
          version: '{version}'
          manager: {manager}
          platform: {platform}
          dependencies: {{}}
          url: {url}
          hash:
            md5: "{'0' * 32}"
            sha256: "{'0' * 64}"
          category: main
          optional: false
        """)


def _lock(tmp_path: Path, *entries: str) -> Path:
    p = tmp_path / "conda-lock.yml"
    p.write_text(LOCK_HEAD + "".join(entries), encoding="utf-8")
    return p


CF = "https://conda.anaconda.org/conda-forge"


def test_lock_fixture_is_a_real_conda_lock_file(tmp_path: Path) -> None:
    """The hand-written locks below are files conda-lock itself accepts."""
    from conda_lock.lockfile import parse_conda_lock_file

    p = _lock(tmp_path, _entry("cuda-version", "12.6", f"{CF}/noarch/cuda-version-12.6-h7480c83_3.conda"))
    assert parse_conda_lock_file(p).package[0].name == "cuda-version"


def test_lock_cuda_line_mismatch(tmp_path: Path) -> None:
    p = _lock(
        tmp_path,
        _entry("cuda-version", "12.5", f"{CF}/noarch/cuda-version-12.5-hd4f0392_3.conda"),
        _entry("pytorch", "2.5.1", f"{CF}/linux-64/pytorch-2.5.1-cuda118_py311h0_300.conda"),
    )
    f = _one(lint_file(p), "EG150")
    assert f.severity is Severity.ERROR and "CUDA 11.8" in f.message and "12.5" in f.message
    # the line of the pytorch entry's url
    assert p.read_text().splitlines()[f.line - 1].strip() == f"url: {CF}/linux-64/pytorch-2.5.1-cuda118_py311h0_300.conda"


def test_lock_same_major_newer_runtime_is_fine_older_warns(tmp_path: Path) -> None:
    ok = _lock(
        tmp_path,
        _entry("cuda-version", "12.8", f"{CF}/noarch/cuda-version-12.8-h5d125a7_3.conda"),
        _entry("pytorch", "2.7.1", f"{CF}/linux-64/pytorch-2.7.1-cuda126_generic_py311h0_200.conda"),
    )
    assert "EG150" not in _codes(lint_file(ok))
    older = _lock(
        tmp_path,
        _entry("cuda-cudart", "12.4.127", f"{CF}/linux-64/cuda-cudart-12.4.127-he02047a_2.conda"),
        _entry("pytorch", "2.7.1", f"{CF}/linux-64/pytorch-2.7.1-cuda126_generic_py311h0_200.conda"),
    )
    assert _one(lint_file(older), "EG150").severity is Severity.WARNING


def test_lock_conda_and_pip_copy_of_one_package(tmp_path: Path) -> None:
    p = _lock(
        tmp_path,
        _entry("pytorch", "2.7.1", f"{CF}/linux-64/pytorch-2.7.1-cpu_generic_py311h0_0.conda"),
        _entry("torch", "2.7.1", "https://files.pythonhosted.org/packages/ab/torch-2.7.1-cp311-cp311-"
                                 "manylinux_2_28_x86_64.whl", manager="pip"),
    )
    fs = lint_file(p)
    f = _one(fs, "EG158")  # torch twice is EG158, which says which copy is imported; EG151 leaves it
    assert f.package == "torch" and f.severity is Severity.ERROR and "EG151" not in _codes(fs)
    numpy = _lock(
        tmp_path,
        _entry("numpy", "1.26.4", f"{CF}/linux-64/numpy-1.26.4-py311h0_0.conda"),
        _entry("numpy", "1.26.4", "https://files.pythonhosted.org/packages/ab/numpy-1.26.4-cp311-cp311-"
                                  "manylinux_2_28_x86_64.whl", manager="pip"),
    )
    assert _one(lint_file(numpy), "EG151").package == "numpy"


def test_lock_unlisted_channel_and_prerelease(tmp_path: Path) -> None:
    p = _lock(
        tmp_path,
        _entry("pytorch", "2.3.0.dev20240117",
               "https://conda.anaconda.org/pytorch-nightly/linux-64/pytorch-2.3.0.dev20240117-py3.11_cpu_0.tar.bz2"),
    )
    fs = lint_file(p)
    assert "pytorch-nightly" in _one(fs, "EG152").message
    assert _one(fs, "EG153").severity is Severity.WARNING


def test_lock_pytorch_channel_with_new_mkl(tmp_path: Path) -> None:
    p = _lock(
        tmp_path,
        _entry("mkl", "2024.1.0", f"{CF}/linux-64/mkl-2024.1.0-ha957f24_693.conda"),
        _entry("pytorch", "2.1.0",
               "https://conda.anaconda.org/pytorch/linux-64/pytorch-2.1.0-py3.11_cpu_0.tar.bz2"),
    )
    assert _one(lint_file(p), "EG154").package == "mkl"


@pytest.mark.parametrize(("mkl", "flagged"), [("2024.0.2", False), ("2024.1", True), ("2024.10.0", True),
                                               ("2024.1.0rc1", False)])
def test_lock_pytorch_channel_mkl_is_compared_in_condas_order(tmp_path: Path, mkl: str, flagged: bool) -> None:
    p = _lock(
        tmp_path,
        _entry("mkl", mkl, f"{CF}/linux-64/mkl-{mkl}-ha957f24_693.conda"),
        _entry("pytorch", "2.1.0",
               "https://conda.anaconda.org/pytorch/linux-64/pytorch-2.1.0-py3.11_cpu_0.tar.bz2"),
    )
    assert ("EG154" in _codes(lint_file(p))) is flagged


def test_lock_with_a_literal_credential_is_an_error_and_is_not_echoed(tmp_path: Path) -> None:
    secret_url = "https://bob:hunter2@conda.example.com/t/tok-123/private/linux-64/egx-1.0-0.conda"
    p = _lock(tmp_path, _entry("egx", "1.0", secret_url),
              _entry("egy", "1.0", "https://conda.example.com/t/tok-123/private/linux-64/egy-1.0-0.conda"))
    f = _one(lint_file(p), "EG155")
    assert f.severity is Severity.ERROR and "1 more line" in f.message
    assert p.read_text().splitlines()[f.line - 1].strip() == f"url: {secret_url}"
    assert "hunter2" not in f.message + f.fix and "tok-123" not in f.message + f.fix
    placeholder = _lock(tmp_path, _entry("egx", "1.0", "https://${USER}:${PASS}@conda.example.com/private/"
                                                       "linux-64/egx-1.0-0.conda"))
    assert "EG155" not in _codes(lint_file(placeholder))


def test_explicit_lock_is_linted(tmp_path: Path) -> None:
    p = tmp_path / "conda-linux-64.lock"
    p.write_text("# platform: linux-64\n@EXPLICIT\n"
                 f"{CF}/noarch/cuda-version-13.0-h0_3.conda#{'0' * 32}\n"
                 f"{CF}/linux-64/pytorch-2.9.0-cuda126_generic_py311h0_200.conda#{'1' * 32}\n", encoding="utf-8")
    f = _one(lint_file(p), "EG150")
    assert f.line == 4


# ---------------------------------------------------------------- files and CLI


def test_unreadable_inputs_are_reported_not_raised(tmp_path: Path) -> None:
    bad = tmp_path / "environment.yml"
    bad.write_text("channels: [conda-forge\n", encoding="utf-8")
    res = lint_paths([bad, tmp_path / "missing.yml"])
    assert len(res.unreadable) == 2
    assert "malformed YAML" in res.unreadable[0] and ":1" in res.unreadable[0]


def test_cli_exit_codes_and_formats(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli.run(["lint"]) == 2  # no environment.yml here
    assert "no environment.yml" in capsys.readouterr().err
    (tmp_path / "environment.yml").write_text(textwrap.dedent(GOOD).lstrip(), encoding="utf-8")
    assert cli.run(["lint"]) == 0
    assert "no findings" in capsys.readouterr().out
    bad = tmp_path / "bad.yml"
    bad.write_text("channels: [conda-forge]\ndependencies:\n  - python=3.11\n  - pytorch>=2\n", encoding="utf-8")
    assert cli.run(["lint", "--format", "json", str(bad)]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["findings"][0]["code"] == "EG105" and doc["findings"][0]["line"] == 4
    assert cli.run(["lint", "--format", "markdown", str(bad)]) == 1
    assert "`EG105`" in capsys.readouterr().out
    # warnings alone do not fail
    warn_only = tmp_path / "warn.yml"
    warn_only.write_text("channels: [conda-forge]\ndependencies:\n  - python=3.10\n  - pytorch=2.13.*=cpu*\n",
                         encoding="utf-8")
    assert cli.run(["lint", str(warn_only)]) == 0
    assert cli.run(["lint", "--format", "yaml", str(warn_only)]) == 2


def test_cli_lints_lock_beside_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "environment.yml").write_text(textwrap.dedent(GOOD).lstrip(), encoding="utf-8")
    _lock(tmp_path, _entry("pytorch", "2.7.1", f"{CF}/linux-64/pytorch-2.7.1-cpu_generic_py311h0_0.conda"),
          _entry("python", "3.11.9", f"{CF}/linux-64/python-3.11.9-hb806964_0_cpython.conda"),  # pip's interpreter
          _entry("torch", "2.7.1", "https://files.pythonhosted.org/torch-2.7.1-cp311-cp311-linux_x86_64.whl",
                 manager="pip"))
    assert cli.run(["lint", "--format", "json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert [f["code"] for f in doc["findings"]] == ["EG158"]  # torch twice: EG158 names the copy imported
    assert doc["files"] == ["environment.yml", "conda-lock.yml"]


@pytest.mark.slow
def test_cli_subprocess_no_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "environment.yml"
    bad.write_bytes(b"\xff\xfe not utf-8")
    proc = subprocess.run([sys.executable, "-m", "envguard", "lint", str(bad)], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and "not UTF-8" in proc.stderr


# ---------------------------------------------------------------- CUDA truth on conda-forge


def test_pytorch_gpu_and_pytorch_cpu_are_build_guards() -> None:
    """pytorch-gpu forces a CUDA build itself (pytorch-cpu a CPU one): the pytorch beside it is guarded."""
    for guard in ("pytorch-gpu", "pytorch-cpu"):
        fs = _lint(f"""
            channels: [conda-forge]
            dependencies:
              - python=3.11
              - pytorch=2.7.*
              - {guard}
              - cuda-version=12.6
            """)
        assert "EG112" not in _codes(fs), (guard, [(f.code, f.message) for f in fs])
    # a guard for linux only does not guard a pytorch line that applies to win-64 too
    assert "EG112" in _codes(_lint("""
        channels: [conda-forge]
        dependencies:
          - python=3.11
          - pytorch=2.7.*
          - pytorch-gpu  # [linux]
          - cuda-version=12.6
        """))


def test_cudatoolkit_with_conda_forges_own_cuda11_builds_is_fine() -> None:
    """conda-forge built torch 2.0-2.5 for CUDA 11.x with cudatoolkit: that packaging is real, not a mistake."""
    assert "EG109" not in _codes(_lint("""
        channels: [conda-forge]
        dependencies:
          - python=3.11
          - pytorch=2.1.*=cuda11*
          - cudatoolkit=11.8
        """))
    # a line conda-forge never built torch 2.0 for, or torch >= 2.6 (no CUDA 11 builds at all): still errors
    bad = _one(_lint("""
        channels: [conda-forge]
        dependencies:
          - python=3.11
          - pytorch=2.0.*
          - cudatoolkit=11.7
        """), "EG109")
    assert bad.severity is Severity.ERROR and "cuda-version=" in bad.fix
    f = _one(_lint("""
        channels: [conda-forge]
        dependencies:
          - python=3.11
          - pytorch=2.13.*=cuda12*
          - cudatoolkit=11.8
        """), "EG109")
    assert "`pytorch=2.13.*=cuda12*` with `cuda-version=12.9`" in f.fix


def test_an_export_is_judged_on_its_own_platform() -> None:
    """`conda env export` writes no platforms: it is one machine. A linux-64 export (ld_impl_linux-64 gives it
    away) of conda-forge's cuda129 build is right, though win-64 has only cuda128 builds of 2.12; the same build
    in a win-64 export is not, and an export that does not say where is judged against every platform at once."""
    export = """
        name: train
        channels:
          - conda-forge
        dependencies:
          - {marker}
          - python=3.11.9=hb806964_0_cpython
          - pytorch=2.12.0=cuda129_mkl_py311_h49b8cc7_300
          - numpy=2.4.6=py311h65cb7f3_0
          - tzdata=2025b=h78e105d_0
        prefix: /opt/conda/envs/train
        """
    assert "EG118" not in _codes(_lint(export.format(marker="ld_impl_linux-64=2.43=h712a8e2_4")))
    assert "EG118" not in _codes(_lint(export.format(marker="libzlib=1.3.1=hb9d3cd8_2")))
    win = _one(_lint(export.format(marker="vs2015_runtime=14.44.35208=h38c0c73_26")), "EG118")
    assert "on win-64" in win.message and "linux-64" not in win.message
    # a build no platform has stays wrong wherever the export was taken
    assert "EG118" in _codes(_lint(export.format(marker="libzlib=1.3.1=hb9d3cd8_2").replace("cuda129", "cuda126")))


def test_cuda_version_rules_follow_conda_forges_real_builds() -> None:
    """cuda-version=12.9 serves linux-64's cuda129 and win-64's cuda128 builds of 2.13; 12.6 serves neither."""
    ok = """
        channels: [conda-forge]
        dependencies:
          - python=3.11
          - pytorch=2.13.*=cuda12*
          - cuda-version={cv}
        platforms: [linux-64, win-64]
        """
    assert "EG118" not in _codes(_lint(ok.format(cv="12.9")))
    f = _one(_lint(ok.format(cv="12.6")), "EG118")
    assert f.fix == "use `cuda-version=12.9`" and "12.9 and 13.0 on linux-64" in f.message
    # a win-64-only file may ask for 12.8, a linux-64 one may not
    assert "EG118" not in _codes(_lint(ok.format(cv="12.8").replace("linux-64, win-64", "win-64")))
    assert "EG118" in _codes(_lint(ok.format(cv="12.8").replace("linux-64, win-64", "linux-64")))
    # a build string naming a line conda-forge never built for that release
    f = _one(_lint("""
        channels: [conda-forge]
        dependencies:
          - python=3.11
          - pytorch=2.13.*=cuda126*
        platforms: [linux-64]
        """), "EG118")
    assert "cuda126" in f.message and "cuda-version=12.9" in f.fix


def test_pytorch_cuda_fix_names_lines_conda_forge_builds() -> None:
    f = _one(_lint("""
        channels: [pytorch, nvidia]
        dependencies:
          - python=3.11
          - pytorch=2.6.*
          - pytorch-cuda=12.4
        """), "EG110")
    # conda-forge built 2.6 for CUDA 12.6 only: the fix must name that, not a line it lacks
    assert f.fix == "on conda-forge use `pytorch=2.6.*=cuda12*` with `cuda-version=12.6`"
