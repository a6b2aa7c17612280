"""Spec validation in conda's match-spec grammar, each issue carrying its lint code."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from envguard.errors import UserError
from envguard.lint import lint_text
from envguard.lock import read_spec, validate
from envguard.yamlio import load_with_lines


@pytest.mark.parametrize("spec,why", [
    ("torchvision>=*=*cuda112*", "compares against nothing"),
    ("foo >=1 <2", "join them with a comma: `>=1,<2`"),
    ("x=1.0=a=b", "a third `=`"),
    ("x 1.0 b c", "too many space-separated parts"),
    ("numpy ~=1.26.*", "`~=` with a wildcard"),
    ("numpy=>1.26", "did you mean `>=`"),
    ("numpy==", "an operator needs a version"),
    ("numpy >=1..2", "empty version component"),
    ("numpy >=1.*.2", "wildcard inside a compared version"),
    ("numpy 1,,2", "stray `,`"),
    ("numpy[foo=1]", "unknown key `foo`"),
    ("numpy[version=1] 2", "must come last"),
    ("conda-forge:numpy", "channel::name"),
])
def test_conda_rejects(spec: str, why: str) -> None:
    from envguard.lock import match_spec_problem

    problem = match_spec_problem(spec)
    assert problem and why in problem, problem


@pytest.mark.parametrize("spec", ["torchvision>=*=*cuda112*", "foo >=1 <2", "x=1.0=a=b", "x 1.0 b c",
                                  "numpy ~=1.26.*", "python=3.11 - bad"])
def test_rattler_lets_through_what_lint_now_stops(spec: str) -> None:
    from rattler import MatchSpec

    MatchSpec(spec, strict=False)  # the parser the solve uses: no error, the mistake surfaced at solve time
    text = f"channels: [conda-forge]\ndependencies:\n  - python=3.11\n  - {spec}\n"
    assert [(f.code, f.line) for f in lint_text(text, "environment.yml") if f.code == "EG121"] == [("EG121", 4)]


@pytest.mark.parametrize("spec", [
    "python=3.11", "pytorch=2.15.*=cuda12*", "pytorch=*=cuda124*", "pytorch~=2.1.0 *cuda12*", "pip>= 21.3.1",
    "pangeo-dask =2024.03.18", "python>=3.8,<3.10", "pytorch>=2.7.0=cuda12*", "python <3.11", "pytorch::pytorch=2.0.0",
    "nvidia::cudatoolkit=11.1", "numpy 1.26.*", "x 1.0|2.0", 'a[version=">1"]', "conda-forge/linux-64::numpy",
    "python=3.8.17=he550d4f_0_cpython", "libcugraph==26.6.*,>=0.0.0a0", "x >=1.0 , <2.0 py34_0", "openssl 1.0.1_",
    "x * openblas_0", "x 1!2.0", "x 1.0+local", "x (>=1|<0.5),!=0.7",
    "https://conda.anaconda.org/conda-forge/linux-64/x-1-0.conda",
])
def test_conda_accepts(spec: str) -> None:
    from envguard.lock import match_spec_problem

    assert match_spec_problem(spec) is None


def test_no_false_positive_on_real_files(realworld: Path) -> None:
    """Every conda dependency of the corpus' environment files and exports reads in conda's grammar."""
    import yaml

    from envguard.lock import match_spec_problem

    n = 0
    for f in sorted([*(realworld / "environment").glob("*.y*ml"), *(realworld / "export").glob("*.yml")]):
        for dep in (yaml.safe_load(f.read_text()) or {}).get("dependencies") or []:
            if isinstance(dep, str):
                n += 1
                assert match_spec_problem(dep) is None, (f.name, dep)
    assert n > 500


def _issues(text: str, tmp_path: Path) -> list:
    p = tmp_path / "environment.yml"
    p.write_text(textwrap.dedent(text))
    data, pos = load_with_lines(p, p.read_text())
    errors, warnings = validate(data, pos, p, p.read_text())
    return errors + warnings


def test_issues_carry_their_code_where_found(tmp_path: Path) -> None:
    issues = _issues("""\
        name: x
        chanels: [conda-forge]
        prefix: /opt/env
        platforms: [linux-65]
        dependencies:
          - python=3.11
          - torchvision>=*=*cuda112*
          - numpy  # [nonsense]
          - pip:
            - -r requirements.txt
            - psutil  # [linux and x86_64]
        """, tmp_path)
    codes = {(i.key, i.code) for i in issues}
    assert ("chanels", "EG117") in codes and ("prefix", "EG126") in codes and ("platforms[0]", "EG127") in codes
    assert ("dependencies[1]", "EG121") in codes and ("dependencies[2]", "EG125") in codes
    assert ("dependencies[3].pip[0]", "EG124") in codes and ("dependencies[3].pip[1]", "EG125") in codes
    assert ("dependencies[3].pip", "EG116") in codes  # pip: without pip
    assert "channels" not in {i.key for i in issues}  # chanels is the typo of channels, reported once
    # lint reports what validate found, with that code, on that line
    lint = {(f.code, f.line) for f in lint_text((tmp_path / "environment.yml").read_text(), "environment.yml")}
    assert {("EG121", 7), ("EG125", 8), ("EG125", 11), ("EG124", 10), ("EG117", 2)} <= lint


def test_lint_module_maps_no_message_text() -> None:
    from envguard import lint

    assert not hasattr(lint, "_SPEC_RULES") and not hasattr(lint, "_spec_code")


def test_folded_list_items(tmp_path: Path) -> None:
    text = "channels: [conda-forge]\ndependencies:\n  - python=3.11\n   - bad\n  - pip\n  - pip:\n    - rich\n     - tqdm\n"
    fs = lint_text(text, "environment.yml")
    folded = sorted((f.line, f.message) for f in fs if f.code == "EG128")
    assert [line for line, _ in folded] == [3, 7]
    assert "`- bad`" in folded[0][1] and "python=3.11 - bad" in folded[0][1]
    assert "EG121" not in {f.code for f in fs}  # one finding for one mistake
    (tmp_path / "environment.yml").write_text(text)
    with pytest.raises(UserError) as e:
        read_spec([tmp_path / "environment.yml"])
    assert "YAML folded the next line" in e.value.message  # lock refuses it before any solve (exit 2)
    # an item that merely contains " - " on its own line is not folded
    ok = "channels: [conda-forge]\ndependencies:\n  - python=3.11\n  - pip\n  - pip:\n    - 'weird - name @ https://x/y.whl'\n"
    assert "EG128" not in {f.code for f in lint_text(ok, "environment.yml")}


@pytest.mark.parametrize("channels", ["", "channels: []\n", "channels: [nodefaults]\n"])
def test_no_channels_says_which_would_be_used(channels: str, tmp_path: Path) -> None:
    text = f"name: x\n{channels}dependencies:\n  - python=3.11\n"
    (f,) = [f for f in lint_text(text, "environment.yml") if f.code == "EG129"]
    assert "defaults" in f.message and ".condarc" in f.message and "a lock finds no packages" in f.message
    p = tmp_path / "environment.yml"
    p.write_text(text)
    from envguard.lock import lock

    with pytest.raises(UserError) as e:  # was: exit 6 "No candidates were found for python 3.11.*"
        lock([p], platforms=["linux-64"])
    assert "channels" in e.value.message and "EG129" not in e.value.message
    # a second file naming the channels is enough
    extra = tmp_path / "channels.yml"
    extra.write_text("channels: [conda-forge]\ndependencies: [numpy]\n")
    assert "conda-forge" in read_spec([p, extra], ["linux-64"]).channels
