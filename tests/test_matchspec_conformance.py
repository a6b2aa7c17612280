"""Conformance of the match-spec validator: the forms conda's grammar accepts and refuses, and why.

conda's own parser answers where it can: conda-lock vendors conda's ``MatchSpec``, and every form said
here to be conda's is read by it. rattler answers for its conditional forms (``when``, ``extras``,
``flags``), which conda does not read. Package names follow CEP 26, which conda's vendored copy predates.
"""

from __future__ import annotations

import warnings

import pytest

from envguard.lint import lint_text
from envguard.lock import match_spec_problem

CONDA_READS = [
    ("bracket items separated by a space", "numpy[version=1.26 build=py311_0]"),
    ("a glob after an ordering operator", "numpy >=1.26*"),
    ("a glob after an ordering operator, in a conjunction", "numpy >=1.26.*,<2"),
    ("a parenthesised section after the brackets", "foo[build=3](optional)"),
    ("a parenthesised section after a space", "foo[build=3] (optional)"),
    ("a local package file", "./pkgs/foo-1.0-0.tar.bz2"),
    ("a remote package file", "https://conda.anaconda.org/conda-forge/linux-64/zlib-1.3.1-hb9d3cd8_2.conda"),
    ("quoted bracket values with commas", 'pytorch[version=">=2.1,<3", build="cuda*"]'),
    ("a channel and a bracket", 'pytorch::pytorch[version=">=2"]'),
    ("a leading underscore", "_libgcc_mutex"),
    ("capitals (names are case-insensitive)", "PyYAML"),
]

RATTLER_READS = [
    ("a condition", 'pkg[when="__win"]'),
    ("extras as a list", "pkg[extras=[a,b]]"),
    ("flags as a list", "pkg[flags=[cuda]]"),
    ("a condition beside conda's keys", 'pkg[version=">=1,<2", when="__linux"]'),
]

REFUSED = [
    ("two periods in a name (CEP 26)", "torch..vision", "CEP 26"),
    ("two dashes in a name (CEP 26)", "torch--vision", "CEP 26"),
    ("a name over 64 characters (CEP 26)", "x" * 65, "CEP 26"),
    ("an unknown bracket key", "pkg[unknown=3]", "unknown key `unknown`"),
    ("text after the brackets", "foo[build=3]x", "must come last"),
    ("an unclosed bracket", "foo[version=1", "closed with `]`"),
]


def _conda_reads(spec: str) -> bool:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from conda_lock._vendor.conda.models.match_spec import MatchSpec

        try:
            MatchSpec(spec)
        except Exception:  # conda's InvalidMatchSpec family
            return False
    return True


def _eg121(spec: str) -> list[str]:
    text = f'channels: [conda-forge]\ndependencies:\n  - python=3.11\n  - "{spec}"\n' if '"' not in spec else \
        f"channels: [conda-forge]\ndependencies:\n  - python=3.11\n  - '{spec}'\n"
    return [f.message for f in lint_text(text) if f.code == "EG121"]


@pytest.mark.parametrize("form, spec", CONDA_READS, ids=[f[0] for f in CONDA_READS])
def test_conda_reads_and_so_does_envguard(form: str, spec: str) -> None:
    assert _conda_reads(spec), f"conda's parser refuses {spec!r}: the form is not conda's"
    assert match_spec_problem(spec) is None
    assert _eg121(spec) == [], form


@pytest.mark.parametrize("form, spec", RATTLER_READS, ids=[f[0] for f in RATTLER_READS])
def test_rattlers_conditional_forms_are_rattlers_to_judge(form: str, spec: str) -> None:
    from rattler import MatchSpec

    MatchSpec(spec, strict=False)
    assert match_spec_problem(spec) is None
    assert _eg121(spec) == [], form


def test_a_conditional_form_rattler_refuses_is_reported_with_rattlers_reason() -> None:
    (msg,) = _eg121("pkg[extras=[]]")
    assert "invalid bracket" in msg


@pytest.mark.parametrize("form, spec, why", REFUSED, ids=[f[0] for f in REFUSED])
def test_refused_forms_say_why(form: str, spec: str, why: str) -> None:
    problem = match_spec_problem(spec)
    assert problem is not None and why in problem, (form, problem)
    assert _eg121(spec), form


def test_flow_style_lists_keep_each_items_text() -> None:
    findings = lint_text('name: x\nchannels: [conda-forge]\ndependencies: [python=3.11, "numpy >=1.26 <2", '
                         "pytorch=2.5]\n")
    assert {f.code for f in findings if f.severity.value == "error"} == {"EG121"}
    (msg,) = [f.message for f in findings if f.code == "EG121"]
    assert "numpy >=1.26 <2" in msg and "python" not in msg and "pytorch" not in msg
