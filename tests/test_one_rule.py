"""One rule, one place (issue 40): each of these decisions is made by one named function that every command calls.

* The lock that belongs to an environment file: :func:`envguard.project.lock_for_spec` (and its converses
  ``spec_for_lock`` and ``lock_sources``). No other module builds a path from the literal ``conda-lock.yml``,
  nor puts ``environment.yml`` beside some file's ``.parent`` itself.
* The platforms of a command (the argument, else the files', else the default):
  :func:`envguard.platforms.command_platforms`. No other module falls back to ``DEFAULT_PLATFORMS`` itself;
  the platforms of a re-lock (the files', else the lock's): :func:`envguard.lock.relock_platforms`.
* The kind of a file: :func:`envguard.filekind.detect_kind` (from text and document) and
  :func:`envguard.filekind.read_kind` (parsed as its kind wants, then judged), which diff's reader
  (envguard.sources.load), lint and ``filekind.kind_of`` (every command handed a lock) call. No other module
  calls detect_kind itself, and all three readers give every real file the same kind.
* One reader of a conda-lock document, envguard.sources.lockscan (its fast path inside; tests/test_lockscan.py
  shows every command reads conda-lock's layout without PyYAML), and ``create --lockfile X`` opens X once, the
  check after the build included. Both readers' models (read_lock's for installing, sources.condalock's for
  comparing) come from a document checked by one function, envguard.sources.lockscan.check_document.

The scans look at the syntax tree, not at text, so a message that names conda-lock.yml to the user is no
re-derivation; each scan is shown to find a planted copy of the rule, so that it can fail.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

import pytest

from envguard.filekind import MALFORMED, detect_kind, kind_of, read_kind
from envguard.lock import relock_platforms
from envguard.platforms import DEFAULT_PLATFORMS, command_platforms
from envguard.project import lock_for_spec, lock_sources, spec_for_lock

PACKAGE = Path(__file__).resolve().parents[1] / "envguard"
LOCK_RULE_HOME = PACKAGE / "project.py"
PLATFORMS_RULE_HOME = PACKAGE / "platforms.py"
KIND_RULE_HOME = PACKAGE / "filekind.py"
SPEC_NAMES = {"environment.yml", "environment.yaml"}


@functools.cache
def _walked(path: Path, package: Path) -> list[tuple[str, ast.AST]]:
    """("envguard/x.py:LINE", node) for every node of a module, parsed once for every scan of the session."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return [(f"{path.relative_to(package.parent)}:{getattr(node, 'lineno', 0)}", node) for node in ast.walk(tree)]


def _nodes(package: Path, home: Path) -> Iterator[tuple[str, ast.AST]]:
    """Every node of every module of ``package`` but ``home``, with where it is."""
    for path in sorted(p for p in package.rglob("*.py") if "__pycache__" not in p.parts and p != home):
        yield from _walked(path, package)


def _is_const(node: ast.AST, values: set[str]) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in values


def _lock_path_made_here(node: ast.AST) -> str | None:
    lock = {"conda-lock.yml"}
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        if _is_const(node.right, lock) or _is_const(node.left, lock):
            return "a path joined with 'conda-lock.yml'"
        if _is_const(node.right, SPEC_NAMES) and isinstance(node.left, ast.Attribute) and node.left.attr == "parent":
            return "an environment file put beside a file's .parent"
    elif isinstance(node, ast.Call) and any(_is_const(a, lock) for a in node.args):
        return "a call given 'conda-lock.yml'"
    elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
        values = node.value.elts if isinstance(node.value, (ast.Tuple, ast.List)) else [node.value]
        if any(_is_const(v, lock) for v in values):
            return "a name bound to 'conda-lock.yml'"
    return None


def lock_path_derivations(package: Path = PACKAGE, home: Path = LOCK_RULE_HOME) -> list[str]:
    """Places outside ``home`` that make a lock's path from the literal ``conda-lock.yml`` (``d / "conda-lock.yml"``,
    ``Path("conda-lock.yml")``, a constant holding it), or a spec's path beside a file (``x.parent / "environment.yml"``)."""
    return [f"{where}: {why}" for where, node in _nodes(package, home) if (why := _lock_path_made_here(node))]


def _falls_back_to_default_platforms(node: ast.AST) -> bool:
    fallback = (node.values[-1] if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or)
                else node.orelse if isinstance(node, ast.IfExp) else None)
    return fallback is not None and any((isinstance(n, ast.Name) and n.id == "DEFAULT_PLATFORMS")
                                        or (isinstance(n, ast.Attribute) and n.attr == "DEFAULT_PLATFORMS")
                                        for n in ast.walk(fallback))


def platform_fallbacks(package: Path = PACKAGE, home: Path = PLATFORMS_RULE_HOME) -> list[str]:
    """Places outside ``home`` that fall back to DEFAULT_PLATFORMS themselves: ``x or DEFAULT_PLATFORMS``,
    ``x if x else list(DEFAULT_PLATFORMS)``."""
    return [f"{where}: falls back to DEFAULT_PLATFORMS" for where, node in _nodes(package, home)
            if _falls_back_to_default_platforms(node)]


def _judges_a_kind(node: ast.AST) -> str | None:
    if isinstance(node, ast.FunctionDef) and node.name == "detect_kind":
        return "a detect_kind of its own"
    if isinstance(node, ast.Call) and ((isinstance(node.func, ast.Name) and node.func.id == "detect_kind")
                                       or (isinstance(node.func, ast.Attribute) and node.func.attr == "detect_kind")):
        return "judges a kind itself"
    return None


def kind_judges(package: Path = PACKAGE, home: Path = KIND_RULE_HOME) -> list[str]:
    """Places outside ``home`` that define or call ``detect_kind`` (a reader judging a kind by itself)."""
    return [f"{where}: {why}" for where, node in _nodes(package, home) if (why := _judges_a_kind(node))]


def test_no_module_but_filekind_judges_the_kind_of_a_file() -> None:
    assert kind_judges() == []


def test_no_module_but_project_decides_which_lock_belongs_to_a_spec() -> None:
    assert lock_path_derivations() == []


def test_no_module_but_platforms_falls_back_to_the_default_platforms() -> None:
    assert platform_fallbacks() == []


def test_the_scans_find_a_planted_copy_of_each_rule(tmp_path: Path) -> None:
    package = tmp_path / "envguard"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "project.py").write_text('LOCK = "conda-lock.yml"\n')
    (package / "platforms.py").write_text("def f(p, d):\n    return p or (d or list(DEFAULT_PLATFORMS))\n")
    (package / "fine.py").write_text(
        'def f(spec, lock):\n'
        '    raise ValueError("pass the path of conda-lock.yml")  # a message, not a path\n'
        'KINDS = {"conda-lock": "conda-lock.yml"}\n')
    (package / "copy.py").write_text(
        'from pathlib import Path\n'
        'def f(spec, lock, platforms, declared):\n'
        '    a = spec.parent / "conda-lock.yml"\n'
        '    b = Path("conda-lock.yml")\n'
        '    c = lock.parent / "environment.yml"\n'
        '    d = platforms if platforms else (declared or list(DEFAULT_PLATFORMS))\n'
        '    return a, b, c, d, platforms or envguard.platforms.DEFAULT_PLATFORMS\n'
        'NAME = "conda-lock.yml"\n')
    assert sorted(s.split(": ", 1)[0] for s in lock_path_derivations(package, package / "project.py")) == [
        "envguard/copy.py:3", "envguard/copy.py:4", "envguard/copy.py:5", "envguard/copy.py:8"]
    assert sorted({s.split(": ", 1)[0] for s in platform_fallbacks(package, package / "platforms.py")}) == [
        "envguard/copy.py:6", "envguard/copy.py:7"]
    (package / "filekind.py").write_text("def detect_kind(text, data=None):\n    return None\n")
    (package / "reader.py").write_text("from envguard.filekind import detect_kind\n"
                                       "def kind(text, data):\n    return detect_kind(text, data)\n")
    (package / "other.py").write_text("def detect_kind(text):\n    return 'conda-lock'\n")
    assert sorted(s.split(": ", 1)[0] for s in kind_judges(package, package / "filekind.py")) == ["envguard/other.py:1", "envguard/reader.py:3"]


def test_lock_for_spec_is_the_named_lock_else_conda_lock_yml_beside_the_spec(tmp_path: Path) -> None:
    spec = tmp_path / "proj" / "environment.yml"
    assert lock_for_spec(spec) == tmp_path / "proj" / "conda-lock.yml"
    assert lock_for_spec(Path("environment.yml")) == Path("conda-lock.yml")  # relative stays relative
    assert lock_for_spec(spec, tmp_path / "elsewhere.yml") == tmp_path / "elsewhere.yml"  # the named file, as named
    assert lock_for_spec(spec, variant="cuda-12.6") == tmp_path / "proj" / "conda-lock.cuda-12.6.yml"
    assert spec_for_lock(lock_for_spec(spec)) == spec
    assert lock_sources(tmp_path / "conda-lock.yml", ["a.yml", "b/c.yml"]) == [tmp_path / "a.yml", tmp_path / "b/c.yml"]
    assert lock_sources(tmp_path / "conda-lock.yml", []) == [tmp_path / "environment.yml"]


@pytest.mark.parametrize(("given", "declared", "expected"), [
    (["osx-64"], ["linux-64"], ["osx-64"]),        # the command line wins
    (None, ["linux-64", "win-64"], ["linux-64", "win-64"]),  # else the files' platforms:
    ([], [], list(DEFAULT_PLATFORMS)),             # else the default
    (None, (), list(DEFAULT_PLATFORMS)),
])
def test_command_platforms_is_the_argument_else_the_files_else_the_default(
        given: list[str] | None, declared: list[str], expected: list[str]) -> None:
    assert command_platforms(given, declared) == expected
    assert command_platforms(given, lambda: declared) == expected


def test_the_files_platforms_are_read_only_when_no_platform_is_given() -> None:
    """`create` (lock --check for this platform) parses no spec for its platforms: no PyYAML on its path."""
    def unread() -> list[str]:
        raise AssertionError("the files' platforms were read although --platform was given")

    assert command_platforms(["linux-64"], unread) == ["linux-64"]


def test_a_relock_keeps_the_files_platforms_else_the_locks(tmp_path: Path) -> None:
    lock = tmp_path / "conda-lock.yml"
    lock.write_text("version: 1\nmetadata:\n  platforms: [linux-64, osx-arm64]\n  sources: [environment.yml]\n"
                    "package: []\n")
    declares = tmp_path / "environment.yml"
    declares.write_text("channels: [conda-forge]\nplatforms: [linux-64]\ndependencies: [python]\n")
    silent = tmp_path / "other.yml"
    silent.write_text("channels: [conda-forge]\ndependencies: [python]\n")
    assert relock_platforms([declares], lock) is None  # the file's platforms: decide
    assert relock_platforms([silent], lock) == ["linux-64", "osx-arm64"]  # never narrowed to this machine's
    assert relock_platforms([silent], tmp_path / "missing.yml") is None


LOCKS_BY_KEYS = {
    # conda-lock's own `version: 1` and the older files without a version: conda-lock files
    "version: 1\nmetadata:\n  platforms: [linux-64]\npackage: []\n": "conda-lock",
    "metadata:\n  platforms: [linux-64]\npackage: []\n": "conda-lock",
    # pixi's legacy v3 has conda-lock's layout: told by its version, as diff's reader tells it
    "version: 3\nmetadata:\n  channels: []\npackage: []\n": "pixi",
    "version: 6\nenvironments: {}\npackages: []\n": "pixi",
}


@pytest.mark.parametrize(("text", "kind"), list(LOCKS_BY_KEYS.items()))
def test_a_lock_told_by_its_keys_gets_the_kind_its_parsed_document_gets(tmp_path: Path, text: str, kind: str) -> None:
    import yaml

    path = tmp_path / "some.lock"
    path.write_text(text)
    assert detect_kind(text, yaml.safe_load(text)) == kind  # the document's verdict
    assert kind_of(path) == kind  # what `create --lockfile`, check and fleet are told, without a parse


def test_every_reader_gives_a_real_file_the_same_kind(realworld: Path, tmp_path: Path) -> None:
    """diff's reader, lint's and the lock commands' (kind_of) name every real file of the corpus alike."""
    from envguard.lint.reading import lint_kind
    from envguard.sources import load
    from envguard.yamlio import load_fast, read_text

    files = [p for d in ("environment", "explicit", "export") for p in sorted((realworld / d).iterdir())
             if not p.name.startswith("Project-MONAI__MONAI__requirements")]  # pip's files: no kind of ours
    files += sorted((realworld / "conda-lock").glob("conda__conda-lock__tests__*"))
    files += sorted((realworld / "pixi").glob("*.toml"))
    pixi_toml = tmp_path / "pixi.toml"  # written by hand: the corpus's manifests are real projects'
    pixi_toml.write_text('[workspace]\nname = "x"\nchannels = ["conda-forge"]\nplatforms = ["linux-64"]\n')
    files.append(pixi_toml)
    assert len(files) > 30
    for path in files:
        text = read_text(path)
        kind = kind_of(path)
        assert kind not in (None, MALFORMED), path
        assert read_kind(path, text, load_fast)[0] == kind, path
        assert load(str(path)).kind == kind, path
        # lint reads an export as the environment file it is
        assert lint_kind(str(path), text)[0] == ("environment" if kind == "export" else kind), path


def test_diff_reads_a_conda_lock_file_with_the_one_reader_and_gets_what_yaml_gives(realworld: Path) -> None:
    """sources.load (diff, check's lock facts) parses a conda-lock file with envguard.sources.lockscan, the reader
    the lock wing uses, and reads the same packages as from PyYAML's document."""
    from envguard.sources import load
    from envguard.sources.condalock import read_conda_lock
    from envguard.sources.lockscan import load_lock
    from envguard.yamlio import load_fast

    for path in sorted((realworld / "conda-lock").glob("conda__conda-lock__tests__*")):
        assert load_lock(path) == load_fast(path), path.name
        assert load(str(path)) == read_conda_lock(load_fast(path), str(path)), path.name


# The conda-lock document as each reader sees it: read_lock (the lock wing, for installing) and sources.condalock
# (diff, check, lint, for comparing) build different models from it, but one function checks the document.
SMALL_REAL = "conda__conda-lock__tests__test-lockfile__conda-lock.yml"


def _both_verdicts(path: Path) -> tuple[str, str]:
    """What each conda-lock reader says of a file: "ok", or its one line."""
    from envguard.errors import UserError
    from envguard.lock.lockfile import read_lock
    from envguard.sources.condalock import read_conda_lock
    from envguard.sources.lockscan import load_lock

    verdicts = []
    for read in (lambda: read_lock(path), lambda: read_conda_lock(load_lock(path), str(path))):
        try:
            read()
            verdicts.append("ok")
        except UserError as e:
            verdicts.append(str(e))
    return verdicts[0], verdicts[1]


def test_both_conda_lock_readers_read_every_real_file_to_the_same_packages(realworld: Path) -> None:
    from envguard.lock.lockfile import read_lock
    from envguard.sources.condalock import read_conda_lock
    from envguard.sources.lockscan import load_lock

    files = sorted((realworld / "conda-lock").glob("*.yml"))
    assert len(files) >= 10
    for path in files:
        assert _both_verdicts(path) == ("ok", "ok"), path.name
        installed = {(p.platform, p.manager, p.name, p.sha256) for p in read_lock(path).packages}
        compared = {(p.platform, p.manager, p.name, p.sha256)
                    for pk in read_conda_lock(load_lock(path), str(path)).packages.values() for p in pk}
        assert installed == compared, path.name


def _variant(realworld: Path, tmp_path: Path, name: str, change) -> Path:  # type: ignore[no-untyped-def]
    import yaml

    data = yaml.safe_load((realworld / "conda-lock" / SMALL_REAL).read_text())
    change(data)
    out = tmp_path / f"{name}.yml"
    out.write_text(yaml.safe_dump(data, sort_keys=False))
    return out


def _set(key: str, value: object):  # type: ignore[no-untyped-def]
    return lambda d: d.__setitem__(key, value)


REFUSED = {  # conda-lock 4.0.3 refuses each (UnknownLockfileVersion, or its pydantic models)
    "version 0": (_set("version", 0), "version: unsupported conda-lock format version 0"),
    "version 3": (_set("version", 3), "version: unsupported conda-lock format version 3"),
    "version 9": (_set("version", 9), "version: unsupported conda-lock format version 9"),
    "version '1'": (_set("version", "1"), "version: unsupported conda-lock format version '1'"),
    "no metadata": (lambda d: d.pop("metadata"), "(file): not a conda-lock file"),
    "package null": (_set("package", None), "package: 'package' is empty (null)"),
    "package a mapping": (_set("package", {}), "package: expected a list, found dict"),
    "metadata a list": (_set("metadata", ["linux-64"]), "metadata: expected a mapping, found list"),
    "platforms a string": (lambda d: d["metadata"].__setitem__("platforms", "linux-64"),
                           "metadata.platforms: expected a list, found str"),
    "entry without url": (lambda d: d["package"][0].pop("url"), "package[0].url: package[0] (_libgcc_mutex) has no `url`"),
    "entry without hash": (lambda d: d["package"][0].pop("hash"), "package[0].hash: package[0] (_libgcc_mutex) has no `hash`"),
    "entry without version": (lambda d: d["package"][0].pop("version"), "package[0].version: package[0] (_libgcc_mutex) has no `version`"),
    "entry a string": (lambda d: d["package"].__setitem__(0, "x"), "package[0]: expected a mapping, found str"),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_both_conda_lock_readers_refuse_a_file_with_one_line(realworld: Path, tmp_path: Path, case: str) -> None:
    """Installing and comparing refuse the same files with the same line: the format versions conda-lock
    reads (1 and 2, and the files before the version key) and the keys it requires are decided once
    (envguard.sources.lockscan.check_document)."""
    change, expected = REFUSED[case]
    path = _variant(realworld, tmp_path, "refused", change)
    for_install, for_compare = _both_verdicts(path)
    assert for_install == for_compare, case
    assert f"{path}: {expected}" in for_install, for_install


def test_both_conda_lock_readers_read_the_versions_conda_lock_reads(realworld: Path, tmp_path: Path) -> None:
    """Version 2 (conda-lock's v2prelim model: ``categories`` a list) is read by conda-lock 4.0.3, so by both
    readers, to the packages of its version-1 original; the unversioned layout before 1 by both too."""
    import yaml
    from conda_lock.lockfile import parse_conda_lock_file

    from envguard.lock.lockfile import read_lock

    src = realworld / "conda-lock" / SMALL_REAL
    v2 = tmp_path / "v2.yml"
    v2.write_text(yaml.safe_dump({"version": 2, **parse_conda_lock_file(src).model_dump(mode="json")},
                                 sort_keys=False))
    parse_conda_lock_file(v2)  # the authority reads it
    unversioned = _variant(realworld, tmp_path, "unversioned", lambda d: d.pop("version"))
    for path in (v2, unversioned):
        assert _both_verdicts(path) == ("ok", "ok"), path.name

    def entries(path: Path) -> list[tuple[str, ...]]:
        return sorted((p.platform, p.manager, p.name, p.version, p.url, str(p.sha256), ",".join(p.categories))
                      for p in read_lock(path).packages)

    assert entries(v2) == entries(src) == entries(unversioned)


@pytest.mark.slow
@pytest.mark.parametrize("then", [["--no-check"], []], ids=["create", "create and its check"])
def test_create_reads_the_lock_it_is_given_once(tmp_path: Path, channel_url: str, then: list[str]) -> None:
    """`create --lockfile X` opens X once: its kind is checked, it is parsed, hashed for the fingerprint and
    judged fresh against its spec from that one read (the bytes hashed are the bytes parsed); the check that
    follows the build judges the same text (packages, wholeness, freshness, the lock's sha256) and opens X
    no more."""
    import json
    import subprocess
    import sys

    from support.create_fixtures import BASE_DEPS, make_lock, write_env

    lock = make_lock(write_env(tmp_path / "proj", channel_url, BASE_DEPS))
    script = tmp_path / "probe.py"
    script.write_text(
        "import json, os, sys\n"
        f"lock = os.path.realpath({str(lock)!r})\n"
        "opened = []\n"
        "def hook(event, args):\n"
        "    if event == 'open' and isinstance(args[0], (str, bytes, os.PathLike)) \\\n"
        "            and os.path.realpath(os.fsdecode(args[0])) == lock:\n"
        "        opened.append(event)\n"
        "sys.addaudithook(hook)\n"
        "from envguard.cli import run\n"
        f"rc = run(['create', '-p', {str(tmp_path / 'env')!r}, '--lockfile', lock, *{then!r}, '--quiet'])\n"
        "print(json.dumps({'rc': rc, 'opened': len(opened)}))\n")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == {"rc": 0, "opened": 1}
