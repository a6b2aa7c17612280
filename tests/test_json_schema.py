"""Every command's `--format json` against docs/json.md: the common fields (`schema`, `exit_code`, `counts`),
each schema's documented top-level fields and types, and the `envguard.error/1` document bad input writes on
stdout beside its line on stderr. The tables are read from docs/json.md itself, so the documentation and the
output cannot drift apart."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
TESTS = Path(__file__).resolve().parent / "support"  # tune_datasets.py is there
DOC = REPO / "docs" / "json.md"
ENVGUARD = [sys.executable, "-m", "envguard"]
TYPES: dict[str, tuple[type, ...]] = {"string": (str,), "integer": (int,), "number": (int, float),
                                      "boolean": (bool,), "object": (dict,), "array": (list,)}


def documented() -> dict[str, dict[str, Any]]:
    """schema -> {"fields": {name: (types, nullable)}, "counts": [keys] or None (free keys)}."""
    text = DOC.read_text(encoding="utf-8")
    out: dict[str, dict[str, Any]] = {}
    for m in re.finditer(r"^## `(envguard\.[a-z]+/\d+)`\n(.*?)(?=^## |\Z)", text, re.DOTALL | re.MULTILINE):
        fields: dict[str, tuple[tuple[type, ...], bool]] = {}
        counts: list[str] | None = None
        for row in re.finditer(r"^\| `(\w+)` \| ([a-z ]+) \| (.*) \|$", m.group(2), re.MULTILINE):
            name, kind, meaning = row.groups()
            base, _, null = kind.partition(" or ")
            fields[name] = (TYPES[base.strip()], null.strip() == "null")
            if name == "counts":
                counts = re.findall(r"`(\w[\w-]*)`", meaning)
        out[m.group(1)] = {"fields": fields, "counts": counts}
    return out


def validate(doc: dict[str, Any]) -> None:
    schemas = documented()
    assert doc.get("schema") in schemas, f"schema {doc.get('schema')!r} is not documented in docs/json.md"
    spec = schemas[doc["schema"]]
    for name in ("schema", "exit_code", "counts"):
        assert name in spec["fields"], f"docs/json.md: {doc['schema']} does not list {name}"
    for name, (types, nullable) in spec["fields"].items():
        assert name in doc, f"{doc['schema']}: no {name!r}"
        value = doc[name]
        ok = (value is None and nullable) or (isinstance(value, types) and not (
            isinstance(value, bool) and bool not in types))
        assert ok, f"{doc['schema']}: {name} = {value!r} is not {types} (nullable: {nullable})"
    # every top-level field is in the table, except check's, whose full report is check-schema.md
    undocumented = sorted(set(doc) - set(spec["fields"])) if doc["schema"] != "envguard.check/1" else []
    assert not undocumented, f"docs/json.md: {doc['schema']} does not list {undocumented}"
    counts = doc["counts"]
    assert all(isinstance(v, int) and not isinstance(v, bool) for v in counts.values()), counts
    if doc["schema"] == "envguard.diff/1":  # the change classes present: a subset of the documented ones
        assert set(counts) <= set(spec["counts"] or []), counts
    else:
        assert sorted(counts) == sorted(spec["counts"] or []), (doc["schema"], counts, spec["counts"])


def run_json(*args: str, cwd: Path = TESTS) -> tuple[int, dict[str, Any], str]:
    asked = [] if "--json" in args else ["--format", "json"]
    proc = subprocess.run([*ENVGUARD, *args, *asked], capture_output=True, text=True, cwd=cwd,
                          timeout=300, check=False)
    assert proc.stdout.strip(), f"envguard {' '.join(args)} --format json wrote nothing on stdout: {proc.stderr}"
    doc = json.loads(proc.stdout)
    assert doc["exit_code"] == proc.returncode, (doc["exit_code"], proc.returncode, proc.stderr)
    return proc.returncode, doc, proc.stderr


def test_the_document_lists_every_schema() -> None:
    assert set(documented()) >= {"envguard.error/1", "envguard.lint/1", "envguard.check/1", "envguard.smoke/1",
                                 "envguard.diff/1", "envguard.tune/1", "envguard.fleet/1",
                                 "envguard.export/1"}


def test_validation_can_fail() -> None:
    with pytest.raises(AssertionError):
        validate({"schema": "envguard.lint/1", "exit_code": 0, "counts": {"files": 1}})
    with pytest.raises(AssertionError):
        validate({"files": []})


def test_lint_json() -> None:
    _, doc, _ = run_json("lint", str(REPO / "environment.yml"))
    validate(doc)
    assert doc["counts"]["files"] == 1 and isinstance(doc["summary"], str)


def test_check_and_fleet_json(tmp_path: Path) -> None:
    _, doc, _ = run_json("check", "-p", sys.prefix, "--no-smoke")
    validate(doc)
    assert doc["counts"]["packages"] == len(doc["packages"])
    (tmp_path / "n1.json").write_text(json.dumps({**doc, "host": "n1"}))
    _, fleet, _ = run_json("fleet", str(tmp_path))
    validate(fleet)
    assert fleet["counts"]["nodes"] == 1


@pytest.mark.slow  # envguard, then the smoke probe
def test_smoke_json() -> None:
    _, doc, _ = run_json("smoke", "--python", sys.executable, "--quick")
    validate(doc)
    assert doc["counts"]["checks"] == len(doc["probe"]["checks"]) and doc["counts"]["passed"] >= 1


def test_diff_json(tmp_path: Path) -> None:
    a = tmp_path / "a.yml"
    b = tmp_path / "b.yml"
    a.write_text("name: x\nchannels: [conda-forge]\ndependencies:\n  - python=3.11\n  - numpy\n")
    b.write_text("name: x\nchannels: [conda-forge]\ndependencies:\n  - python=3.12\n  - numpy\n")
    rc, doc, _ = run_json("diff", str(a), str(b))
    validate(doc)
    assert rc == doc["exit_code"] == 1 and doc["equal"] is False
    _, same, _ = run_json("diff", str(a), str(a))
    validate(same)
    assert same["exit_code"] == 0 and same["equal"] is True


@pytest.mark.slow
def test_export_json(tmp_path: Path) -> None:
    proc = subprocess.run([*ENVGUARD, "export", "-p", sys.prefix, "--no-index", "--output-dir", str(tmp_path), "--json"],
                          capture_output=True, text=True, timeout=300, check=False)
    doc = json.loads(proc.stdout)
    validate(doc)
    assert doc["exit_code"] == proc.returncode and doc["counts"]["files"] == len(doc["files"]) >= 1
    assert all(Path(f["path"]).is_file() for f in doc["files"])


@pytest.mark.slow
def test_tune_json() -> None:
    _, doc, _ = run_json("tune", "-p", sys.prefix, "--dataset", "tune_datasets:tiny", "--batch-size", "8",
                          "--step-ms", "2", "--budget", "8", "--max-workers", "1")
    validate(doc)
    assert doc["counts"]["trials"] == len(doc["trials"])


@pytest.mark.parametrize("argv", [
    ["lint", "/nonexistent/environment.yml"],  # lint's own document: the unreadable file is in it
    ["check", "-p", "/nonexistent/env"],
    ["check", "--no-such-option"],
    ["smoke", "--python", "/nonexistent/python"],
    ["diff", "/nonexistent/a.yml", "/nonexistent/b.yml"],
    ["fleet", "/nonexistent/reports"],
    ["tune", "-p", "/nonexistent/env"],
    ["export", "-p", "/nonexistent/env", "--json"],
    ["lint", "--format", "xml"],
])
def test_bad_input_is_a_json_document_and_one_line(argv: list[str], tmp_path: Path) -> None:
    """Bad input under --format json: a document on stdout (never an empty file in CI), the line on stderr."""
    if "--format" in argv:  # a bad --format: no JSON was asked for, stdout stays empty
        proc = subprocess.run([*ENVGUARD, *argv], capture_output=True, text=True, cwd=tmp_path, timeout=120,
                              check=False)
        assert proc.returncode == 2 and proc.stdout == "" and proc.stderr.count("\n") == 1
        return
    rc, doc, stderr = run_json(*argv, cwd=tmp_path)
    validate(doc)
    assert rc == 2, (rc, doc, stderr)
    assert stderr.strip().startswith("error:") and "Traceback" not in stderr
    if doc["schema"] == "envguard.error/1":
        assert doc["command"] == argv[0]
        assert doc["error"]["message"]
        assert doc["error"]["message"] in stderr.replace("\n", " ") or doc["error"]["reason"] in stderr
