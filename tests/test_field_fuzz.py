"""Type changes of every field of real inputs (issue 27, point 6): one real file of each kind from the corpus
(../shared/realworld), every field path walked (a list: its first element of each type), each value replaced by a
list, a mapping, null, an integer, a bool, a very long string and an unquoted YAML date (``2024-01-01``, a
``!!timestamp``); the mutated file is read by the commands a user runs (``diff``, ``lint``, ``fleet``) through
the CLI's own entry. Each answer is a documented exit code and never ``internal error`` or a traceback.

Bounded: a fixed seed, at most SAMPLE mutations per file; lock files are trimmed to their first packages
(the structure is what matters, not the bulk).
"""

from __future__ import annotations

import contextlib
import io
import json
import random
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from envguard.cli.entry import run

DOCUMENTED = {0, 1, 2, 3, 4}
SAMPLE = 150
KEEP = 6  # packages kept of a lock file
TIMESTAMP = "__envguard_fuzz_timestamp__"  # written unquoted as 2024-01-01 after dumping
VARIANTS: list[Any] = [["a", "b"], {"a": "b"}, None, 5, True, "x" * 20_000, TIMESTAMP]
Path_ = tuple[Any, ...]


def _corpus_file(kind: str, name: str) -> Path:
    from conftest import REALWORLD

    path = REALWORLD / kind / name
    if not path.is_file():
        pytest.skip(f"real-world corpus file {kind}/{name} not found (set ENVGUARD_REALWORLD)")
    return path


def _paths(node: Any, at: Path_ = ()) -> list[Path_]:
    """Every field path under ``node``: each key of a mapping, a list's first element of each type."""
    found: list[Path_] = []
    if isinstance(node, dict):
        for key, value in node.items():
            found.append((*at, key))
            found.extend(_paths(value, (*at, key)))
    elif isinstance(node, list):
        seen: set[type] = set()
        for i, item in enumerate(node):  # the first element of each type (a pip: mapping among strings)
            if type(item) not in seen:
                seen.add(type(item))
                found.append((*at, i))
                found.extend(_paths(item, (*at, i)))
    return found


def _replace(data: Any, path: Path_, value: Any) -> Any:
    import copy

    out = copy.deepcopy(data)
    node = out
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = copy.deepcopy(value)
    return out


def _dump_yaml(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False, width=1 << 30).replace(f"'{TIMESTAMP}'", "2024-01-01") \
        .replace(TIMESTAMP, "2024-01-01")


def _dump_json(data: Any) -> str:
    return json.dumps(data).replace(f'"{TIMESTAMP}"', '"2024-01-01"')


def _dep_name(spec: str) -> str:
    return re.split(r"[\s=<>!~\[]", spec.strip(), maxsplit=1)[0]


def _needs_python(locator: str) -> bool:
    """A pip record, or a noarch: python one (conda-build's pyh... or py_N build string)."""
    if not locator.endswith((".conda", ".tar.bz2")):
        return True
    return re.search(r"/noarch/[^/]*-py(h[0-9a-f]*)?_\d+\.(conda|tar\.bz2)$", locator) is not None


def _is_python(locator: str) -> bool:
    return re.search(r"/python-\d[^/]*\.(conda|tar\.bz2)$", locator) is not None


# A trimmed lock stays whole (envguard.lockwhole; else every command reading it stops at exit 3): the python
# record joins the first records when one of them needs it, and each record keeps only the dependencies that
# the records kept beside it satisfy.


def _trim_conda_lock(data: dict[str, Any]) -> dict[str, Any]:
    full, kept = data["package"], data["package"][:KEEP]
    for plat in dict.fromkeys(p["platform"] for p in kept):
        if any(_needs_python(p["url"]) for p in kept if p["platform"] == plat):
            kept += [p for p in full[KEEP:] if p["platform"] == plat and _is_python(p["url"])][:1]
    names = {(p["platform"], p["name"]) for p in kept}
    for p in kept:
        p["dependencies"] = {k: v for k, v in (p.get("dependencies") or {}).items()
                             if k.startswith("__") or (p["platform"], k) in names}
    data["package"] = kept
    return data


def _trim_pixi(data: dict[str, Any]) -> dict[str, Any]:
    kept: set[str] = set()
    names_of: dict[str, list[set[str]]] = {}  # a kept package's locator -> the names kept beside it, per list
    for env in data.get("environments", {}).values():
        for platform, entries in env.get("packages", {}).items():
            head = entries[:KEEP]
            if any(_needs_python(v) for e in head for v in e.values() if isinstance(v, str)):
                head += [e for e in entries[KEEP:] if any(isinstance(v, str) and _is_python(v) for v in e.values())][:1]
            env["packages"][platform] = head
            locators = [v for e in head for v in e.values() if isinstance(v, str)]
            names = {loc.rsplit("/", 1)[-1].rsplit("-", 2)[0] for loc in locators}
            kept.update(locators)
            for loc in locators:
                names_of.setdefault(loc, []).append(names)
    data["packages"] = [p for p in data["packages"] if (p.get("conda") or p.get("pypi")) in kept]
    for p in data["packages"]:
        allowed = set.intersection(*names_of.get(p.get("conda") or p.get("pypi"), [set()]))
        if isinstance(p.get("depends"), list):
            p["depends"] = [d for d in p["depends"] if d.startswith("__") or _dep_name(d) in allowed]
    return data


def _cli(argv: list[str]) -> tuple[int, str]:
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        code = run(argv)
    return code, out.getvalue() + err.getvalue()


def _assert_answers(argv: list[str], what: str) -> None:
    code, text = _cli(argv)
    assert code in DOCUMENTED, (what, argv, code, text[-1500:])
    assert "internal error" not in text and "Traceback" not in text, (what, argv, text[-1500:])


def _mutations(data: Any) -> list[tuple[Path_, Any]]:
    pairs = [(p, v) for p in _paths(data) for v in VARIANTS]
    rng = random.Random(27)
    return rng.sample(pairs, min(SAMPLE, len(pairs)))


def _fuzz_structured(tmp_path: Path, data: Any, suffix: str, dump, commands) -> int:
    original = tmp_path / f"original{suffix}"
    original.write_text(dump(data))
    for argv in commands(original, original):
        code, text = _cli(argv)
        assert code in {0, 1}, (argv, code, text[-1500:])  # the unmutated file reads cleanly
    mutated = tmp_path / f"mutated{suffix}"
    count = 0
    for path, value in _mutations(data):
        mutated.write_text(dump(_replace(data, path, value)))
        for argv in commands(mutated, original):
            _assert_answers(argv, f"{'.'.join(map(str, path))} = {str(value)[:40]!r}")
        count += 1
    return count


def _reads(mutated: Path, original: Path) -> list[list[str]]:
    return [["diff", str(mutated), str(original)], ["diff", str(original), str(mutated)]]


def _reads_and_lints(mutated: Path, original: Path) -> list[list[str]]:
    return [*_reads(mutated, original), ["lint", str(mutated)]]


@pytest.mark.slow
def test_every_field_of_an_environment_yml(tmp_path: Path) -> None:
    source = _corpus_file("environment", "FSadrieh__BERTchen__environment.yml")
    data = yaml.safe_load(source.read_text())
    assert _fuzz_structured(tmp_path, data, ".yml", _dump_yaml, _reads_and_lints) > 40


@pytest.mark.slow
def test_every_field_of_a_conda_lock(tmp_path: Path) -> None:
    source = _corpus_file("conda-lock", "01-ai__Yi__conda-lock.yml")
    data = _trim_conda_lock(yaml.safe_load(source.read_text()))
    (tmp_path / "lock").mkdir()
    assert _fuzz_structured(tmp_path / "lock", data, ".conda-lock.yml", _dump_yaml, _reads) > 100


@pytest.mark.slow
def test_every_field_of_a_pixi_lock(tmp_path: Path) -> None:
    source = _corpus_file("pixi", "matthewfeickert__pytorch-gpu-pixi-example__pixi@d74f5d1.lock")
    data = _trim_pixi(yaml.safe_load(source.read_text()))
    (tmp_path / "p").mkdir()

    def commands(mutated: Path, original: Path) -> list[list[str]]:
        # pixi.lock is known by its name: each side in a folder of its own
        side = mutated.parent / mutated.stem
        side.mkdir(exist_ok=True)
        (side / "pixi.lock").write_bytes(mutated.read_bytes())
        return _reads(side / "pixi.lock", original)

    assert _fuzz_structured(tmp_path / "p", data, ".lock", _dump_yaml, commands) > 100


@pytest.mark.slow
def test_every_line_of_an_explicit_file(tmp_path: Path) -> None:
    source = _corpus_file("explicit", "conda__conda-lock__tests__zlib__conda-linux-64.lock")
    lines = source.read_text().splitlines()
    texts = ["[a, b]", "{a: b}", "", "5", "true", "x" * 20_000, "2024-01-01", "null"]
    original = tmp_path / "original.lock"
    original.write_text(source.read_text())
    mutated = tmp_path / "mutated.lock"
    for i, _line in enumerate(lines):
        for text in texts:
            mutated.write_text("\n".join([*lines[:i], text, *lines[i + 1:]]) + "\n")
            for argv in _reads(mutated, original):
                _assert_answers(argv, f"line {i + 1} = {text[:40]!r}")


@pytest.mark.slow
def test_environment_yml_timestamps_are_text_or_one_line(tmp_path: Path) -> None:
    """``!!timestamp`` in environment.yml (an unquoted date as the name, a dependency, a channel): read as
    text or one line naming the file, exit 2."""
    cases = {  # what: (file, the key lint names)
        "name": ("name: 2024-01-01\ndependencies:\n  - python=3.11\n", "name:"),
        "dependency": ("name: x\ndependencies:\n  - 2024-01-01\n  - python=3.11\n", "dependencies[0]:"),
        "channel": ("name: x\nchannels:\n  - 2024-01-01\ndependencies:\n  - python=3.11\n", "channels[0]:"),
        "pip": ("name: x\ndependencies:\n  - pip\n  - pip:\n    - 2024-01-01\n", "dependencies[1].pip[0]:"),
        "tagged": ("name: !!timestamp 2024-01-01\ndependencies:\n  - python=3.11\n", "name:"),
    }
    for what, (text, key) in cases.items():
        path = tmp_path / f"{what}.yml"
        path.write_text(text)
        for argv in (["lint", str(path)], ["diff", str(path), str(path)]):
            code, out = _cli(argv)
            assert code in DOCUMENTED, (what, argv, code, out)
            assert "internal error" not in out and "Traceback" not in out, (what, argv, out)
            if code == 2:
                errors = [line for line in out.splitlines() if line.strip()]
                assert len(errors) == 1 and str(path.name) in errors[0], (what, argv, out)
        _code, out = _cli(["lint", str(path)])  # lint names the key and what it found (never a Python repr)
        assert any(key in line and "found date" in line for line in out.splitlines()), (what, out)
        assert "datetime" not in out, (what, out)


@pytest.mark.slow
def test_every_field_of_a_check_report(tmp_path: Path) -> None:
    """A real ``check --format json`` report (of a tiny conda prefix), read back by ``fleet``."""
    prefix = tmp_path / "env"
    (prefix / "conda-meta").mkdir(parents=True)
    record = {"name": "zlib", "version": "1.3", "build": "h0", "build_number": 0, "subdir": "linux-64",
              "channel": "https://conda.anaconda.org/conda-forge", "depends": [], "files": [],
              "paths_data": {"paths": [], "paths_version": 1}, "md5": "0" * 32, "sha256": "0" * 64,
              "url": "https://conda.anaconda.org/conda-forge/linux-64/zlib-1.3-h0.conda"}
    (prefix / "conda-meta" / "zlib-1.3-h0.json").write_text(json.dumps(record))
    code, text = _cli(["check", "-p", str(prefix), "--no-smoke", "--format", "json"])
    assert code == 0, text
    report = json.loads(text[text.index("{"): text.rindex("}") + 1])
    assert report["packages"][0]["name"] == "zlib"
    nodes = tmp_path / "nodes"
    nodes.mkdir()

    def commands(mutated: Path, original: Path) -> list[list[str]]:
        return [["fleet", str(mutated), str(original)], ["fleet", "--format", "json", str(mutated)]]

    assert _fuzz_structured(nodes, report, ".json", _dump_json, commands) > 100
