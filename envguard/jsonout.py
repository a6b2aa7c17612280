"""What every command's ``--format json`` document has in common (docs/json.md).

Each document carries ``schema`` (``envguard.<command>/<version>``), ``exit_code`` (the code this run exits
with) and ``counts`` (named integers: how many of what the command looked at and found), so that CI can act
on any command's output without knowing its details. Bad input under ``--format json`` is a document too
(``envguard.error/1``): CI that redirects stdout to a file gets the error there, not an empty file.
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from envguard.findings import Finding, Severity

ERROR_SCHEMA = "envguard.error/1"


def severity_counts(findings: Iterable[Finding]) -> dict[str, int]:
    """``{"errors", "warnings", "info"}``: the part of ``counts`` every command with findings shares."""
    fs = list(findings)
    return {"errors": sum(f.severity is Severity.ERROR for f in fs),
            "warnings": sum(f.severity is Severity.WARNING for f in fs),
            "info": sum(f.severity is Severity.INFO for f in fs)}


def json_requested(argv: Sequence[str]) -> bool:
    """Whether the command line asks for ``--format json`` (``--json`` for export, whose ``--format`` names
    the files it writes; read before the options are parsed, so that
    a usage error, too, can answer in JSON)."""
    for i, arg in enumerate(argv):
        if arg == "--":
            break
        if arg in ("--format=json", "--json") or (arg == "--format" and i + 1 < len(argv) and argv[i + 1] == "json"):
            return True
    return False


def error_document(command: str, exit_code: int, message: str, *, reason: Any = None, fix: Any = None,
                   file: Any = None, key: Any = None, line: Any = None) -> dict[str, Any]:
    """The ``envguard.error/1`` document: the same one line stderr gets, and its parts as data."""
    return {"schema": ERROR_SCHEMA, "command": command, "exit_code": int(exit_code),
            "counts": {"errors": 1},
            "error": {"message": message, "reason": reason, "file": file, "key": key, "line": line, "fix": fix}}
