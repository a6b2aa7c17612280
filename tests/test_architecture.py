"""The layout rule of docs/architecture.md, checked on every import in the package.

* The core (``envguard/*.py``, ``envguard/sources/``, ``envguard/in_process/``) imports no wing.
* A wing imports another wing only through that wing's public entry (``envguard.<wing>``, its
  ``__init__``), never one of its private modules, and only along the edges the document lists.
* Only ``cli.py``, the typer start-up shim and the rendering modules (``render.py``) import typer or rich.
* The probes run by path in another interpreter import nothing from envguard.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "envguard"
WINGS = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").is_file()} - {"sources", "in_process", "templates"}
CORE_PACKAGES = {"sources", "in_process"}

# who may call whom: a command that really runs another, or reads what another one owns (docs/architecture.md)
ALLOWED_EDGES = {
    ("create", "lock"),     # create locks a missing or stale lock first
    ("create", "check"),    # create checks the environment it built
    ("check", "smoke"),     # check runs the smoke probe
    ("check", "lock"),      # check tests the lock's freshness against the spec
    ("check", "create"),    # check reads create's fingerprint and interrupted-create state
    ("lint", "lock"),       # lint applies lock's own spec validation, so both agree
    ("init", "lint"),       # init lints the file it writes
    ("init", "lock"),       # init confirms its choice with a real solve when asked
    ("export", "lock"),     # export writes a lock with lock's writer
    ("export", "check"),    # export names what cannot be reproduced with check's rules
    ("export", "lint"),     # export reports channel mixing with lint's rule
    ("tune", "smoke"),      # tune runs its probe the way smoke does
    ("fleet", "diff"),      # fleet names differences in diff's change classes
    ("fleet", "check"),     # fleet reads check reports
    ("check", "diff"),      # check classifies lock differences with diff's engine
}
RENDERING = {"cli.py", "typer_shim.py", "render.py"}
TOP = {"cli.py", "__main__.py", "typer_shim.py"}  # above every wing: may use any wing's public entry


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def _imports(path: Path) -> list[tuple[str, int]]:
    """Every module an import statement names (function-level lazy imports included)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[tuple[str, int]] = []
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    pkg_parts = list(rel.parts[:-1]) if rel.name != "__init__" else list(rel.parts[:-1])
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg_parts[: len(pkg_parts) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            found.append((mod, node.lineno))
            # "from envguard import check" names a wing through its public entry
            if mod == "envguard":
                found += [(f"envguard.{a.name}", node.lineno) for a in node.names]
    return found


def _wing_of(path: Path) -> str | None:
    parts = path.relative_to(PACKAGE).parts
    return parts[0] if len(parts) > 1 and parts[0] in WINGS else None


def test_the_wings_exist() -> None:
    assert {"lock", "create", "check", "smoke", "diff", "lint", "init"} <= WINGS


def test_core_imports_no_wing_and_wings_use_only_public_entries() -> None:
    problems = []
    for path in _modules():
        mine = _wing_of(path)
        where = path.relative_to(PACKAGE.parent)
        for mod, line in _imports(path):
            parts = mod.split(".")
            if parts[0] != "envguard" or len(parts) < 2 or parts[1] not in WINGS:
                continue
            theirs = parts[1]
            if path.parent == PACKAGE and path.name in TOP:
                if len(parts) > 2 and not parts[2] == "render":
                    problems.append(f"{where}:{line}: {mod} is private to the {theirs} wing; use envguard.{theirs}")
            elif mine is None:
                problems.append(f"{where}:{line}: the core imports the {theirs} wing ({mod})")
            elif theirs != mine:
                if len(parts) > 2:
                    problems.append(f"{where}:{line}: {mod} is private to the {theirs} wing; use envguard.{theirs}")
                elif (mine, theirs) not in ALLOWED_EDGES:
                    problems.append(f"{where}:{line}: {mine} -> {theirs} is not an edge of docs/architecture.md")
    assert not problems, "\n".join(problems)


def test_only_the_cli_and_rendering_import_typer_or_rich() -> None:
    problems = []
    for path in _modules():
        if path.name in RENDERING:
            continue
        for mod, line in _imports(path):
            if mod.split(".")[0] in ("typer", "rich", "click"):
                problems.append(f"{path.relative_to(PACKAGE.parent)}:{line}: imports {mod}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("probe", sorted(p for p in PACKAGE.rglob("*.py")
                                         if "probe" in p.parent.name or p.parent.name == "in_process"))
def test_probes_are_standalone(probe: Path) -> None:
    """A probe runs by path with the target interpreter, where envguard is not installed."""
    assert not [m for m, _ in _imports(probe) if m.split(".")[0] == "envguard"], probe


def test_the_document_lists_every_edge() -> None:
    doc = (PACKAGE.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    missing = [f"{a} -> {b}" for a, b in sorted(ALLOWED_EDGES) if f"{a} → {b}" not in doc]
    assert not missing, f"docs/architecture.md does not name: {missing}"
