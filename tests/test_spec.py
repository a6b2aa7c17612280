"""Reading and validating environment.yml (envguard.lock.spec)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.lock_support import envguard

from envguard.errors import ExitCode, UserError
from envguard.lock.spec import KNOWN_KEYS, SpecIssue, read_spec, validate
from envguard.yamlio import load_with_lines


def _write(tmp_path: Path, text: str, name: str = "environment.yml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_reads_name_channels_dependencies_pip_platforms(tmp_path: Path) -> None:
    p = _write(tmp_path, """\
name: demo
channels:
  - conda-forge
  - nodefaults
dependencies:
  - python=3.11
  - pytorch>=2.5  # [linux]
  - pytorch-cpu   # [osx]
  - pip
  - pip:
    - requests>=2
    - egdemo; sys_platform == 'linux'
platforms: [linux-64, osx-arm64]
""")
    spec = read_spec([p])
    assert spec.name == "demo"
    assert spec.channels == ["conda-forge", "nodefaults"]
    assert spec.conda_dependencies == ["python=3.11", "pytorch>=2.5", "pytorch-cpu", "pip"]
    assert spec.pip_dependencies == ["requests>=2", "egdemo; sys_platform == 'linux'"]
    assert spec.platforms == ["linux-64", "osx-arm64"] == spec.platforms_from_files
    assert spec.warnings == []
    assert spec.dependencies_for("linux-64")[0] == ["python=3.11", "pytorch>=2.5", "pip"]
    assert spec.dependencies_for("osx-arm64")[0] == ["python=3.11", "pytorch-cpu", "pip"]
    # platforms: argument beats the file; without either, envguard's defaults apply
    assert read_spec([p], ["win-64"]).platforms == ["win-64"]


def test_default_platforms_when_file_has_none(tmp_path: Path) -> None:
    from envguard.platforms import DEFAULT_PLATFORMS

    p = _write(tmp_path, "channels: [conda-forge]\ndependencies: [python]\n")
    assert read_spec([p]).platforms == list(DEFAULT_PLATFORMS)


def test_malformed_yaml_names_file_line_and_column(tmp_path: Path) -> None:
    p = _write(tmp_path, "name: demo\ndependencies:\n  - python\n   - numpy: [\n")
    with pytest.raises(UserError) as e:
        read_spec([p])
    assert e.value.exit_code == ExitCode.USAGE
    assert e.value.line is not None and e.value.column is not None
    assert e.value.message.startswith(f"{p}:{e.value.line}:{e.value.column}: ")
    assert "malformed YAML" in e.value.message


def test_unknown_top_level_key_gets_did_you_mean(tmp_path: Path) -> None:
    p = _write(tmp_path, "name: demo\nchannels: [conda-forge]\ndependancies:\n  - python\n")
    with pytest.raises(UserError) as e:
        read_spec([p])
    msg = e.value.message
    assert f"{p}:3:1: dependancies: unknown top-level key" in msg
    assert "did you mean 'dependencies'?" in msg
    assert "\n" not in msg


def test_every_invalid_spec_is_listed_at_once(tmp_path: Path) -> None:
    p = _write(tmp_path, """\
channels: [conda-forge]
dependencies:
  - python=3.11
  - numpy>>1.0
  - scipy>=1,,
  - pip
  - pip:
    - requests>=2
    - -r requirements.txt
    - "!!bad"
platform: [linux-64]
""")
    with pytest.raises(UserError) as e:
        read_spec([p])
    msg = e.value.message
    assert msg.startswith("5 problems: ")
    for where in (f"{p}:4:5: dependencies[1]", f"{p}:5:5: dependencies[2]", f"{p}:9:7: dependencies[4].pip[1]",
                  f"{p}:10:8: dependencies[4].pip[2]", f"{p}:11:1: platform"):
        assert where in msg, where
    assert "did you mean 'platforms'?" in msg
    assert "includes another requirements file" in msg
    assert "\n" not in msg


def test_pip_section_without_pip_is_a_warning(tmp_path: Path) -> None:
    p = _write(tmp_path, "channels: [conda-forge]\ndependencies:\n  - python\n  - pip:\n    - requests\n")
    spec = read_spec([p])
    assert len(spec.warnings) == 1
    assert f"{p}:4" in spec.warnings[0] and "add `- pip`" in spec.warnings[0]


def test_credentials_are_redacted_and_placeholders_kept(tmp_path: Path) -> None:
    p = _write(tmp_path, """\
channels:
  - https://alice:s3cret@repo.example.com/t/tok-123/private
  - https://${REPO_USER}:${REPO_PASSWORD}@repo.example.com/t/${REPO_TOKEN}/other
  - conda-forge
dependencies: [python]
""")
    spec = read_spec([p])
    joined = " ".join(spec.channels + spec.warnings)
    assert "s3cret" not in joined and "tok-123" not in joined and "alice" not in joined
    assert spec.channels[1] == "https://${REPO_USER}:${REPO_PASSWORD}@repo.example.com/t/${REPO_TOKEN}/other"
    assert len(spec.warnings) == 1 and "literal credential" in spec.warnings[0]


def test_requirements_txt_is_rejected_clearly(tmp_path: Path) -> None:
    p = _write(tmp_path, "torch>=2.4\nnumpy\n", name="requirements.txt")
    with pytest.raises(UserError) as e:
        read_spec([p])
    assert "pip requirements file" in e.value.message and "dependencies: - pip:" in e.value.message


def test_bad_platforms_in_file_and_argument(tmp_path: Path) -> None:
    p = _write(tmp_path, "channels: [conda-forge]\ndependencies: [python]\nplatforms: [linux64]\n")
    with pytest.raises(UserError) as e:
        read_spec([p])
    assert "platforms[0]" in e.value.message and "did you mean 'linux-64'?" in e.value.message
    ok = _write(tmp_path, "channels: [conda-forge]\ndependencies: [python]\n", name="ok.yml")
    with pytest.raises(UserError) as e:
        read_spec([ok], ["win-arm64"])
    assert "unsupported platform 'win-arm64'" in e.value.message


def test_empty_and_non_mapping_files(tmp_path: Path) -> None:
    for text, expect in (("", "empty"), ("- python\n", "expected a mapping"),
                         ("@EXPLICIT\nhttps://x/linux-64/a-1-0.conda\n", "explicit lock file"),
                         ("name: x\n", "no dependencies declared")):
        p = _write(tmp_path, text, name="e.yml")
        with pytest.raises(UserError) as e:
            read_spec([p])
        assert expect in e.value.message, (text, e.value.message)


def test_validate_is_reusable_and_reports_positions(tmp_path: Path) -> None:
    text = "name: demo\nchanels: [conda-forge]\ndependencies:\n  - python\n  - pip:\n    - -e .\n"
    p = _write(tmp_path, text)
    data, pos = load_with_lines(p, text)
    errors, warnings = validate(data, pos, p, text)
    assert [(e.key, e.line, e.column) for e in errors] == [("chanels", 2, 1)]
    assert all(isinstance(w, SpecIssue) and w.severity == "warning" for w in warnings)
    assert {w.key for w in warnings} == {"dependencies[1].pip[0]", "dependencies[1].pip"}  # editable, no pip
    assert "channels" in KNOWN_KEYS and "platforms" in KNOWN_KEYS


def test_multiple_files_merge_in_order(tmp_path: Path) -> None:
    a = _write(tmp_path, "name: a\nchannels: [conda-forge]\ndependencies: [python]\nplatforms: [linux-64]\n",
               "a.yml")
    b = _write(tmp_path, "channels: [pytorch, conda-forge]\ndependencies: [pytorch]\nplatforms: [win-64]\n",
               "b.yml")
    spec = read_spec([a, b])
    assert spec.name == "a"
    assert spec.channels == ["conda-forge", "pytorch"]
    assert spec.conda_dependencies == ["python", "pytorch"]
    assert spec.platforms == ["linux-64", "win-64"]


def test_conda_lock_parser_runs_on_valid_specs(tmp_path: Path) -> None:
    p = _write(tmp_path, "channels: [conda-forge]\ndependencies:\n  - python\n  - pip\n  - pip:\n"
                         "    - name @ git+https://example.com/x.git@v1\n")
    lock_spec = read_spec([p], ["linux-64"]).lock_spec()
    assert {(d.name, d.manager) for d in lock_spec.dependencies["linux-64"]} == {
        ("python", "conda"), ("pip", "conda"), ("name", "pip")}


def test_conda_lock_parser_failures_become_user_errors(tmp_path: Path) -> None:
    # rattler's matchspec parser accepts this version; conda's (inside conda-lock) does not. Now our own
    # validation speaks conda's grammar and stops it first; conda-lock's parser still fails in one line.
    from envguard.lock.spec import conda_lock_spec

    p = _write(tmp_path, "channels: [conda-forge]\ndependencies:\n  - numpy >=abc<\n")
    with pytest.raises(UserError) as first:
        read_spec([p], ["linux-64"])
    assert "numpy >=abc<" in first.value.message and first.value.line == 3
    with pytest.raises(UserError) as e:
        conda_lock_spec([p], ["linux-64"])
    assert "conda-lock cannot parse the spec" in e.value.message and "numpy >=abc<" in e.value.message
    assert str(p) in e.value.message and "\n" not in e.value.message


def test_every_realworld_environment_file_is_accepted_or_rejected_in_one_line(realworld: Path) -> None:
    files = sorted((realworld / "environment").iterdir())
    assert len(files) >= 20
    outcome: dict[str, str] = {}
    for f in files:
        try:
            spec = read_spec([f])
            spec.lock_spec()  # conda-lock's own parser must agree that it is lockable
            outcome[f.name] = "ok"
        except UserError as e:
            assert "\n" not in e.message and str(f) in e.message, e.message
            assert "(fix: " in e.message, e.message
            outcome[f.name] = "rejected"
    rejected = sorted(n for n, o in outcome.items() if o == "rejected")
    # The companion requirement files, -r includes, pip options and a bare '.' cannot be locked.
    assert all(n.endswith(".txt") for n in rejected if "requirements" in n)
    for name in ("Project-MONAI__MONAI__requirements.txt", "Project-MONAI__MONAI__environment-dev.yml",
                 "facebookresearch__dinov2__conda.yaml", "NCAR__miles-credit__environment_gpu@60e3802.yml"):
        assert outcome[name] == "rejected", name
    for name in ("Clay-foundation__model__environment@32518ce.yml", "facebookresearch__drqv2__conda_env.yml",
                 "graphdeeplearning__benchmarking-gnns__environment_gpu.yml",
                 "rapidsai__cugraph__conda__environments__all_cuda-129_arch-x86_64@e792dc6.yaml",
                 "conda__conda-lock__tests__test-env-filter-platform__environment.yml"):
        assert outcome[name] == "ok", name
    assert sum(o == "ok" for o in outcome.values()) >= 15


@pytest.mark.slow
def test_cli_bad_spec_is_one_line_exit_2(tmp_path: Path) -> None:
    _write(tmp_path, "channels: [conda-forge]\ndependencies:\n  - numpy>>1\n  - scipy<<2\n")
    proc = envguard(["lock"], cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: 2 problems:"), proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "conda-lock.yml").exists()
