"""Which kind a file given to lint is (environment file, pixi manifest, lock, explicit file), and the
credential scan of its raw text, for a file of any kind, even one lint cannot otherwise read:
:func:`lint_kind` and :func:`raw_credentials`, both called by envguard.lint."""

from __future__ import annotations

import re
from typing import Any

from envguard.errors import UserError
from envguard.findings import Finding, Severity

_PACKAGE_URL_LINE = re.compile(r"^\s*\S+://\S+\.(?:conda|tar\.bz2)(?:#\S*)?\s*$")


def lint_kind(path: str, text: str) -> tuple[str, Any]:
    """The kind lint reads a file as (envguard.filekind decides; an export is linted as the environment file
    it is), and the parsed document."""
    from envguard.filekind import read_kind
    from envguard.yamlio import load_fast

    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    if lines and all(_PACKAGE_URL_LINE.match(ln) for ln in lines):
        raise UserError("package URLs without an @EXPLICIT line: conda and envguard read such a file only "
                        "after that marker", file=path, fix="add a line `@EXPLICIT` before the first URL")
    kind, data = read_kind(path, text, load_fast)
    if kind in ("environment", "export"):
        return "environment", data
    if kind in ("explicit", "pixi-manifest", "conda-lock", "pixi"):
        return kind, data
    if isinstance(data, dict) and ("channels" in data or "name" in data):
        return "environment", data  # an environment file without dependencies: spec.validate says so
    raise UserError("neither an environment file nor a lock file", file=path,
                    fix="pass environment.yml, pixi.toml, conda-lock.yml, pixi.lock or an @EXPLICIT file")


def raw_credentials(path: str, text: str, kind: str | None, found: list[Finding]) -> list[Finding]:
    """The credential scan of the raw text, for lines no other finding already named (EG115 for a spec)."""
    from envguard.lint.locks import credential_finding, credential_lines

    if kind in ("conda-lock", "pixi", "explicit"):
        return []  # lint_lock scanned the same raw text (EG155)
    code = "EG115" if kind in ("environment", "pixi-manifest") else "EG155"
    named = {f.line for f in found if f.code in ("EG115", "EG155")}
    if not any(n not in named for n in credential_lines(text)):
        return []
    if kind in ("environment", "pixi-manifest"):
        return [Finding("EG115", Severity.ERROR, "a literal credential in a URL", "use ${VAR} placeholders, e.g. "
                        "https://${USER}:${TOKEN}@host/..., and revoke the one committed", path, n)
                for n in credential_lines(text) if n not in named]
    return credential_finding(path, text, code) if not named else []
