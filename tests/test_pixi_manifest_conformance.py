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
    ("a platform table with its CUDA", WS.replace('["linux-64"]', '["osx-arm64", { name = "gpu", platform = '
     '"linux-64", cuda = "12" }]'), "pixi's named platforms"),
    ("the settings of every kind", WS + 'channel-priority = "strict"\nconda-pypi-map = false\npreview = true\n'
     'exclude-newer = "2025-01-31"\n[system-requirements]\ncuda = 12\nlibc = { family = "glibc", version = 2.28 }\n'
     '[activation]\nscripts = ["a.sh"]\nenv = { X = "1" }\n[pypi-options]\nno-build = true\n'
     'index-strategy = "unsafe-best-match"\n', "numbers where the schema allows them"),
    ("tasks of every form", WS + '[tasks]\na = "echo a"\nb = { cmd = ["echo", "b"], depends-on = ["a"] }\n'
     'c = [{ task = "b", args = ["x"] }]\n[tasks.d]\nargs = [{ arg = "who", choices = ["me"] }]\ncmd = "echo"\n',
     "string, table and alias tasks"),
    ("dependency tables of every form", WS + '[dependencies]\nzlib = { version = ">=1.3", build = "h*", channel = '
     '"conda-forge" }\nfoo = { git = "https://x/y.git", branch = "main" }\n'
     'bar = { version = "*", when = { any = ["__linux", "__osx"] } }\n'
     '[pypi-dependencies]\nrich = { version = ">=13", extras = ["jupyter"] }\nme = { path = ".", editable = true }\n'
     '[environments]\ndefault = { solve-group = "s" }\nlist = []\n', "pixi's spec tables"),
    ("a package with pins and run exports", PKG + '[package.host-dependencies]\npython = { pin-compatible = true }\n'
     '[package.run-exports.weak]\nlibfoo = "*"\n[package.run-dependencies]\nnumpy = { workspace = true }\n',
     "pixi-build's package tables"),
    ("a package-only member, read alone", PKG + '\n[package.run-dependencies]\nnumpy = ">= 1.26"\n',
     "a [package] manifest: read alone with a note"),
]

REFUSED = [
    ("inheritance written `workspace = false`", WS + '[package]\nname = { workspace = false }\n'
     '[package.build]\nbackend = { name = "b", version = "*" }\n', "package.name.workspace", "`workspace = false`"),
    ("an unknown top-level table", WS + "[dependecies]\nnumpy = \"*\"\n", "dependecies", "has no key 'dependecies'"),
    ("an unknown key of [workspace]", WS + 'chanels = ["x"]\n', "workspace.chanels", "has no key 'chanels'"),
    ("an unknown key of a feature", WS + '[feature.cuda]\ndependences = {}\n', "feature.cuda.dependences",
     "has no key 'dependences'"),
    ("an environment name with capitals", WS + '[environments]\nCuda = []\n', "environments.Cuda",
     "lower-case letters"),
    ("an empty version string", WS + '[dependencies]\nnumpy = ""\n', "dependencies.numpy", "empty version string"),
    ("a platform table naming no platform", WS.replace('platforms = ["linux-64"]', "platforms = [{}]"),
     "workspace.platforms.0", "names no `platform`"),
    ("a build backend with empty channels", PKG.replace('version = "*" }', 'version = "*", channels = [] }'),
     "package.build.backend.channels", "no channels for the build backend"),
    ("malformed TOML", WS + "[dependencies\n", None, "malformed TOML"),
    # the type of every known key, as pixi's schema gives it
    ("channels as a string", WS.replace('["conda-forge"]', '"conda-forge"'), "workspace.channels",
     "expected a list of"),
    ("a channel table without `channel`", WS.replace('["conda-forge"]', '[{ priority = 1 }]'),
     "workspace.channels.0", "needs `channel`"),
    ("a channel priority as a string", WS.replace('["conda-forge"]', '[{ channel = "c", priority = "1" }]'),
     "workspace.channels.0.priority", "expected an integer"),
    ("channel-priority outside its values", WS + 'channel-priority = "loose"\n', "workspace.channel-priority",
     "one of disabled, flexible, strict"),
    ("a dependency as a number", WS + "[dependencies]\nnumpy = 1\n", "dependencies.numpy",
     "expected a version string or a table, found the integer 1"),
    ("an unknown key of a dependency table", WS + '[dependencies]\nnumpy = { verison = "1" }\n',
     "dependencies.numpy.verison", "has no key 'verison'"),
    ("a sha256 that is not 64 hex digits", WS + '[dependencies]\nzlib = { version = "*", sha256 = "abc" }\n',
     "dependencies.zlib.sha256", "64 hex digits"),
    ("`workspace = true` in a PyPI dependency", WS + "[pypi-dependencies]\nrich = { workspace = true }\n",
     "pypi-dependencies.rich.workspace", "has no key 'workspace'"),
    ("no-default-feature as a string", WS + '[environments]\na = { no-default-feature = "yes" }\n',
     "environments.a.no-default-feature", "expected true or false"),
    ("an activation variable as a list", WS + '[activation.env]\nX = ["a"]\n', "activation.env.X",
     "expected a non-empty string, found a list"),
    ("a conda-pypi-map entry `true`", WS + "conda-pypi-map = { conda-forge = true }\n",
     "workspace.conda-pypi-map.conda-forge", "found `true`"),
    ("a task name with a space", WS + '[tasks]\n"run it" = "echo"\n', 'tasks.run it', "without spaces"),
    ("a task argument named `pixi`", WS + '[tasks.t]\nargs = ["pixi"]\ncmd = "echo {{ pixi }}"\n',
     "tasks.t.args.0", "reserved argument name"),
    ("empty task choices", WS + '[tasks.t]\nargs = [{ arg = "a", choices = [] }]\ncmd = "echo"\n',
     "tasks.t.args.0.choices", "at least one item"),
    ("a platform named like a selector", WS.replace('["linux-64"]', '[{ name = "linux", platform = "linux-64" }]'),
     "workspace.platforms.0", "reserved platform name"),
    ("a platform name with spaces", WS.replace('["linux-64"]', '[{ name = "my box", platform = "linux-64" }]'),
     "workspace.platforms.0.name", "a platform name"),
    ("a platform table's subdir unknown", WS.replace('["linux-64"]', '[{ name = "b", platform = "linux-65" }]'),
     "workspace.platforms.0.platform", "one of emscripten-wasm32"),
    ("a feature platform named like a selector", WS + '[feature.a]\nplatforms = ["osx"]\n',
     "feature.a.platforms.0", "reserved platform name"),
    ("[package.target] (replaced by conditional tables)", PKG + '[package.target.linux-64.host-dependencies]\n'
     'foo = "*"\n', "package.target", "has no key 'target'"),
    ("a package without [package.build]", '[package]\nname = "foo"\nversion = "1"\n', "package", "needs `build`"),
    ("a build number as a string", PKG + 'build-number = "3"\n', "package.build.build-number", "expected an integer"),
    ("a build channels list empty", PKG + "channels = []\n", "package.build.channels", "no channels for the build"),
    ("exclude-newer that is no date", WS + 'exclude-newer = "yesterday"\n', "workspace.exclude-newer",
     "a date"),
    ("an empty dependency name", WS + '[dependencies]\n"" = "*"\n', "dependencies.", "an empty key"),
]

# read, where pixi's schema says no: what envguard reports instead, and why
DIFFERS = [
    ("a workspace without `channels`", '[workspace]\nname = "w"\nplatforms = ["linux-64"]\n',
     "pixi refuses it; lint names it (EG129) beside the other findings, which a refusal would hide"),
]


@pytest.mark.parametrize("form, text, why", DIFFERS, ids=[f[0] for f in DIFFERS])
def test_differs_from_pixi_with_a_finding(form: str, text: str, why: str, tmp_path: Path) -> None:
    f = tmp_path / "pixi.toml"
    f.write_text(text + '[dependencies]\npython = "3.11.*"\n')
    assert "EG129" in {x.code for x in lint_file(f)}, form


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


@pytest.mark.parametrize("pep621, conda, provided", [
    ("dask", "dask-core", True),  # the mapping: conda's dask-core is PyPI's dask
    ("torch", "pytorch", True),
    ("tzdata", "tzdata", False),  # conda's tzdata is the time zone database; PyPI's is conda's python-tzdata
    ("tzdata", "python-tzdata", True),
    ("rich", "numpy", False),
])
def test_which_project_dependencies_pixi_takes_from_conda(pep621: str, conda: str, provided: bool,
                                                           tmp_path: Path) -> None:
    f = tmp_path / "pyproject.toml"
    f.write_text(f'[project]\nname = "p"\nversion = "0.1"\ndependencies = ["{pep621}"]\n'
                 '[tool.pixi.workspace]\nchannels = ["conda-forge"]\nplatforms = ["linux-64"]\n'
                 f'[tool.pixi.dependencies]\n{conda} = "*"\n')
    got = {(r.name, r.manager) for r in load(str(f)).requested}
    assert ((pep621, "pip") not in got) is provided, got


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

    from envguard.sources import toml_text

    toml_text.toml_reader.cache_clear()  # as in a fresh process that imported conda-lock first
    before = sys.modules.get("tomli")
    assert toml_text.parse_toml('a = { b = 1,\n  c = 2, }\n', "x.toml") == {"a": {"b": 1, "c": 2}}
    assert sys.modules.get("tomli") is before  # poetry-core keeps the copy it imported
