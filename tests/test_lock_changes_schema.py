"""`envguard lock --format json` (envguard.lock-changes/1) and `envguard why --format json` (envguard.why/1)
against the shapes documented in docs/commands/lock.md and docs/commands/why.md: real solves, real CLI."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from support import channels
from support.lock_support import envguard, write_env
from support.relock_channel import base_packages, noarch, publish

REPO = Path(__file__).resolve().parent.parent
LOCK_DOC = REPO / "docs" / "commands" / "lock.md"
WHY_DOC = REPO / "docs" / "commands" / "why.md"
TYPES = {"string": str, "boolean": bool, "list": list, "object": dict, "integer": int, "null": type(None)}


def _section(doc: Path, heading: str) -> str:
    text = doc.read_text(encoding="utf-8")
    start = text.index(f"\n## {heading}")
    end = text.find("\n## ", start + 1)
    return text[start: end if end > 0 else len(text)]


def _tables(section: str) -> list[dict[str, tuple[type, ...]]]:
    """Every `| key | type | meaning |` table of a doc section: key -> the Python types its type column allows."""
    out: list[dict[str, tuple[type, ...]]] = []
    for block in re.split(r"\n(?!\|)", section):
        rows = [r for r in block.splitlines() if r.startswith("| `")]
        if rows:
            table = {}
            for r in rows:
                key, kind = (c.strip() for c in r.strip("|").split("|")[:2])
                table[key.strip("`")] = tuple(TYPES[t.strip()] for t in kind.split(" or "))
            out.append(table)
    return out


def _conforms(obj: dict, table: dict[str, tuple[type, ...]], where: str) -> None:
    assert set(obj) == set(table), f"{where}: keys {sorted(set(obj) ^ set(table))} differ from the documented shape"
    for key, types in table.items():
        value = obj[key]
        ok = isinstance(value, types) and not (isinstance(value, bool) and bool not in types)
        assert ok, f"{where}.{key} = {value!r} is not {types}"


def _reason_kinds() -> set[str]:
    return {m.group(1) for m in re.finditer(r"^\| `([a-z-]+)` \| (?!string|boolean)", _section(LOCK_DOC, "Reasons"),
                                            re.MULTILINE)}


def _validate_lock_report(doc: dict) -> list[dict]:
    report, platform, change, reason = _tables(_section(LOCK_DOC, "JSON change report"))
    _conforms(doc, report, "report")
    assert doc["schema"] == "envguard.lock-changes/1"
    assert doc["mode"] in ("new", "minimal", "update", "update-all")
    assert set(doc["cuda"]) == {"before", "after"} and isinstance(doc["cuda"]["after"], str)
    changes = []
    for i, p in enumerate(doc["platforms"]):
        _conforms(p, platform, f"platforms[{i}]")
        for j, c in enumerate(p["changes"]):
            _conforms(c, change, f"platforms[{i}].changes[{j}]")
            _conforms(c["reason"], reason, f"platforms[{i}].changes[{j}].reason")
            assert c["change"] in ("added", "removed", "upgraded", "downgraded", "rebuilt")
            assert c["reason"]["kind"] in _reason_kinds(), c["reason"]
            for side in ("before", "after"):
                assert c[side] is None or set(c[side]) == {"version", "build"}
            changes.append(c)
    return changes


def test_the_documented_tables_are_what_the_test_reads() -> None:
    """The parser above must see the tables: four for the report, the twelve reason kinds."""
    tables = _tables(_section(LOCK_DOC, "JSON change report"))
    assert len(tables) == 4 and "schema" in tables[0] and tables[2]["before"] == (dict, type(None))
    assert {"spec", "dependency", "update", "requested", "solver"} <= _reason_kinds() and len(_reason_kinds()) == 12


@pytest.mark.slow  # four `envguard lock` processes, each a real solve
def test_lock_json_report_matches_the_documented_shape(tmp_path: Path, channel_factory) -> None:
    ch = channel_factory(base_packages(), name="cf")
    url = channels.channel_url(ch)
    write_env(tmp_path / "environment.yml", channels=[url], deps=["python 3.11.*", "filelock", "ipython"],
              platforms=["linux-64", "osx-arm64"])
    proc = envguard(["lock", "--no-cuda", "--format", "json"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    first = json.loads(proc.stdout)
    assert _validate_lock_report(first) == [] and first["mode"] == "new" and first["cuda"]["before"] is None

    pygments_rebuild = channels.PackageSpec("pygments", "2.18.0", "pyhd8ed1ab_1", build_number=1,
                                            depends=["python >=3.8"], noarch="python")
    publish(ch, noarch("filelock", "3.17.0"), pygments_rebuild)
    write_env(tmp_path / "environment.yml", channels=[url], deps=["python 3.11.*", "filelock", "rich"],
              platforms=["linux-64", "osx-arm64"])
    proc = envguard(["lock", "--no-cuda", "--format", "json", "--update", "filelock,pygments"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    changes = _validate_lock_report(doc)
    kinds = {(c["name"], c["change"], c["reason"]["kind"]) for c in changes}
    assert {("filelock", "upgraded", "update"), ("pygments", "rebuilt", "update"), ("ipython", "removed",
            "not-requested"), ("rich", "added", "requested"), ("mdurl", "added", "dependency")} <= kinds, kinds
    assert doc["update"] == ["filelock", "pygments"] and doc["cuda"] == {"before": "none", "after": "none"}

    write_env(tmp_path / "environment.yml", channels=[url], deps=["python 3.11.*", "filelock <3.17", "rich"],
              platforms=["linux-64", "osx-arm64"])
    proc = envguard(["lock", "--no-cuda", "--format", "json"], cwd=tmp_path)
    changes = _validate_lock_report(json.loads(proc.stdout))
    down = [c for c in changes if c["name"] == "filelock"]
    assert down and all(c["change"] == "downgraded" and c["reason"]["kind"] == "spec" for c in down)
    assert down[0]["reason"]["line"] == 6 and down[0]["reason"]["spec"] == "filelock <3.17"

    proc = envguard(["lock", "--no-cuda", "--format", "json"], cwd=tmp_path)
    doc = json.loads(proc.stdout)
    assert _validate_lock_report(doc) == [] and doc["current"] and not doc["written"]


def test_why_json_matches_the_documented_shape(tmp_path: Path, channel_factory) -> None:
    ch = channel_factory(base_packages(), name="cf")
    write_env(tmp_path / "environment.yml", channels=[channels.channel_url(ch)], deps=["python 3.11.*", "rich"],
              platforms=["linux-64"])
    assert envguard(["lock", "--no-cuda"], cwd=tmp_path).returncode == 0
    proc = envguard(["why", "mdurl", "--format", "json"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    (top,) = _tables(_section(WHY_DOC, "JSON (envguard.why/1)"))
    _conforms(doc, top, "why")
    assert doc["schema"] == "envguard.why/1"
    (plat,) = doc["platforms"]
    assert set(plat) == {"platform", "found", "package", "paths"} and plat["found"]
    (path,) = plat["paths"]
    assert set(path) == {"request", "file", "line", "steps"}
    assert [s["name"] for s in path["steps"]] == ["rich", "markdown-it-py", "mdurl"]
    assert all(set(s) == {"name", "version", "build", "manager", "constraint"} for s in path["steps"])
