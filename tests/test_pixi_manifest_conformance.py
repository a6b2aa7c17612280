"""Conformance of the pixi manifest reader: the forms pixi accepts and refuses, and why (pixi's manifest schema,
TOML 1.1), from files written here. Every real manifest of ../shared/realworld is read too."""

from __future__ import annotations

from pathlib import Path

import pytest

from envguard.errors import UserError
from envguard.lint import lint_file
from envguard.sources import load

WS = '[workspace]\nname = "w"\nchannels = ["conda-forge"]\nplatforms = ["linux-64"]\n'
PKG = '[package]\nname = "foo"\nversion = "0.1.0"\n\n[package.build]\nbackend = { name = "pixi-build-python", version = "*" }\n'

ACCEPTED = [
    ("a workspace", WS + '[dependencies]\npython = "3.11.*"\n', "pixi's own layout"),
    ('"$schema" on the first line', '"$schema" = "https://pixi.sh/v0.50.0/schema/manifest/schema.json"\n' + WS,
     "the schema's first property; TOML, not YAML"),
    ("a newline inside an inline table (TOML 1.1)",
     WS + '[dependencies]\npython = { version = "3.11.*",\n  build = "*cpython" }\n', "pixi reads TOML 1.1"),
    ("a trailing comma in an inline table (TOML 1.1)", WS + '[dependencies]\nnumpy = { version = ">=1.26", }\n',
     "pixi reads TOML 1.1"),
    ("the older [project] table", WS.replace("[workspace]", "[project]"), "pixi still reads [project]"),
    ("inheritance from the workspace", WS + '[package]\nname = "foo"\nversion = { workspace = true }\n'
     '[package.build]\nbackend = { name = "b", version = "*" }\n', "`{ workspace = true }`"),
    ("a package-only member, read alone", PKG + '\n[package.run-dependencies]\nnumpy = ">= 1.26"\n',
     "a [package] manifest: read alone with a note"),
]

REFUSED = [
    ("inheritance written `workspace = false`", WS + '[package]\nname = { workspace = false }\n'
     '[package.build]\nbackend = { name = "b", version = "*" }\n', "package.name", "`workspace = false`"),
    ("an unknown top-level table", WS + "[dependecies]\nnumpy = \"*\"\n", "dependecies", "has no key 'dependecies'"),
    ("an unknown key of [workspace]", WS + 'chanels = ["x"]\n', "workspace.chanels", "has no key 'chanels'"),
    ("an unknown key of a feature", WS + '[feature.cuda]\ndependences = {}\n', "feature.cuda.dependences",
     "has no key 'dependences'"),
    ("an environment name with capitals", WS + '[environments]\nCuda = []\n', "environments.Cuda",
     "lower-case letters"),
    ("an empty version string", WS + '[dependencies]\nnumpy = ""\n', "dependencies.numpy", "empty version string"),
    ("a platform table naming no platform", WS.replace('platforms = ["linux-64"]', "platforms = [{}]"),
     "workspace.platforms", "names no `platform`"),
    ("a build backend with empty channels", PKG.replace('version = "*" }', 'version = "*", channels = [] }'),
     "package.build.backend.channels", "no channels for the build backend"),
    ("malformed TOML", WS + "[dependencies\n", None, "malformed TOML"),
]


@pytest.mark.parametrize("form, text, why", ACCEPTED, ids=[f[0] for f in ACCEPTED])
def test_accepted_forms(form: str, text: str, why: str, tmp_path: Path) -> None:
    f = tmp_path / "pixi.toml"
    f.write_text(text)
    d = load(str(f))
    assert d.kind == "pixi-manifest", form


@pytest.mark.parametrize("form, text, key, why", REFUSED, ids=[f[0] for f in REFUSED])
def test_refused_forms_name_the_key_and_rule(form: str, text: str, key: str | None, why: str, tmp_path: Path) -> None:
    f = tmp_path / "pixi.toml"
    f.write_text(text)
    with pytest.raises(UserError) as e:
        load(str(f))
    assert why in e.value.message and "\n" not in e.value.message, e.value.message
    if key is not None:
        assert e.value.key == key and "pixi's manifest schema" in e.value.message


def test_package_member_is_read_as_its_workspace(tmp_path: Path) -> None:
    (tmp_path / "pixi.toml").write_text(WS + 'preview = ["pixi-build"]\n\n[dependencies]\nfoo = { path = "pkgs/foo" }\n'
                                        'python = "3.11.*"\n\n[feature.gpu.dependencies]\ncuda-version = "12.9.*"\n'
                                        '\n[environments]\ngpu = ["gpu"]\n')
    member = tmp_path / "pkgs" / "foo" / "pixi.toml"
    member.parent.mkdir(parents=True)
    member.write_text(PKG + '\n[package.run-dependencies]\nnumpy = ">=1.26"\n')
    d = load(str(member))
    assert d.path == str(tmp_path / "pixi.toml") and d.environments == ("default", "gpu")
    assert {r.name for r in d.requested} == {"foo", "python"}
    assert "is a package of the workspace" in d.notes[0]
    alone = tmp_path / "elsewhere"
    alone.mkdir()
    # read alone: no workspace above it (tmp_path's own parents hold none either)
    f = alone / "pixi.toml"
    f.write_text(member.read_text())
    d = load(str(f))
    if d.path == str(f):  # a pixi.toml with a workspace in a parent of tmp_path would be found instead
        assert [r.spec for r in d.requested] == ["numpy >=1.26"] and "read alone" in d.notes[0]
    assert [x.code for x in lint_file(member)] == []  # a member is not linted as a workspace (no EG129)


def test_requires_python_with_a_space_is_no_invalid_spec(tmp_path: Path) -> None:
    f = tmp_path / "pyproject.toml"
    f.write_text('[project]\nname = "p"\nversion = "0.1"\nrequires-python = ">= 3.11"\n'
                 '[tool.pixi.workspace]\nchannels = ["conda-forge"]\nplatforms = ["linux-64"]\n')
    assert "EG121" not in {x.code for x in lint_file(f)}
    py = next(r for r in load(str(f)).requested if r.name == "python")
    assert py.spec == "python >=3.11"
    f.write_text(f.read_text().replace('">= 3.11"', '"three"'))
    with pytest.raises(UserError, match="not a PEP 440 version specifier"):
        load(str(f))


def test_pyproject_dependencies_that_conda_provides_are_not_requested_twice(tmp_path: Path) -> None:
    """pixi installs a [project] dependency from conda when a conda dependency provides it: not EG123; a
    [tool.pixi.pypi-dependencies] entry beside the conda one still is."""
    f = tmp_path / "pyproject.toml"
    f.write_text('[project]\nname = "p"\nversion = "0.1"\ndependencies = ["numpy>=1.26", "requests"]\n'
                 '[tool.pixi.workspace]\nchannels = ["conda-forge"]\nplatforms = ["linux-64"]\n'
                 '[tool.pixi.dependencies]\npython = "3.11.*"\nnumpy = ">=1.26"\n')
    assert "EG123" not in {x.code for x in lint_file(f)}
    f.write_text(f.read_text() + '[tool.pixi.pypi-dependencies]\nnumpy = ">=1.26"\n')
    assert "EG123" in {x.code for x in lint_file(f)}


def test_every_real_manifest_is_accepted(realworld: Path) -> None:
    for f in sorted((realworld / "pixi").glob("*.toml")):
        assert load(str(f)).kind == "pixi-manifest", f.name


def test_diff_reads_pyproject_dependencies_conda_provides_as_conda_requests(tmp_path: Path) -> None:
    f = tmp_path / "pyproject.toml"
    f.write_text('[project]\nname = "p"\nversion = "0.1"\ndependencies = ["numpy>=1.26", "rich"]\n'
                 '[tool.pixi.workspace]\nchannels = ["conda-forge"]\nplatforms = ["linux-64"]\n'
                 '[tool.pixi.dependencies]\nnumpy = ">=1.26"\n')
    got = {(r.name, r.manager) for r in load(str(f)).requested}
    assert got == {("numpy", "conda"), ("rich", "pip")}


@pytest.mark.parametrize("text", [WS + 'target = "x"\n', WS + "[feature.a]\ntarget = 3\n", WS + "[feature.a]\nchannels = 1\n",
                                  WS.replace('platforms = ["linux-64"]', "platforms = 7")])
def test_mis_typed_tables_are_named_not_a_traceback(text: str, tmp_path: Path) -> None:
    from envguard.cli import run

    f = tmp_path / "pixi.toml"
    f.write_text(text)
    with pytest.raises(UserError, match="pixi's manifest schema"):
        load(str(f))
    assert run(["lint", str(f)]) == 2  # unreadable, one line; an internal error is exit 6


def test_toml_11_after_conda_lock_was_imported() -> None:
    """conda-lock's vendored poetry-core puts a TOML 1.0 tomli first on sys.path; the reader still reads 1.1."""
    import sys

    import conda_lock.conda_lock  # noqa: F401 - imported for its sys.path side effect

    from envguard.sources import pixi_manifest

    pixi_manifest._toml_reader.cache_clear()  # as in a fresh process that imported conda-lock first
    before = sys.modules.get("tomli")
    assert pixi_manifest.parse_toml('a = { b = 1,\n  c = 2, }\n', "x.toml") == {"a": {"b": 1, "c": 2}}
    assert sys.modules.get("tomli") is before  # poetry-core keeps the copy it imported
