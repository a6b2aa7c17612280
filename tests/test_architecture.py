"""The layout rule of docs/architecture.md, checked on every import in the package.

* The core (``envguard/*.py``, ``envguard/sources/``, ``envguard/prefix/``, ``envguard/in_process/``) imports no wing.
* A wing imports another wing only through that wing's public entry (``envguard.<wing>``, its
  ``__init__``), never one of its private modules, and only along the edges the document lists.
* Those edges form no cycle: a wing never reaches back, through others, to one that imports it.
* Only ``cli.py``, the typer start-up shim and the rendering modules (``render.py``) import typer or rich.
* The probes run by path in another interpreter import nothing from envguard.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "envguard"
NOT_WINGS = {"cli", "sources", "in_process", "prefix", "templates"}  # the command layer, core packages, package data
CORE_PACKAGES = {"sources", "in_process", "prefix"}

# who may call whom: a command that really runs another, or reads what another one owns (docs/architecture.md)
ALLOWED_EDGES = {
    ("create", "lock"),     # create locks a missing or stale lock first
    ("check", "smoke"),     # check runs the smoke probe
    ("check", "lock"),      # check tests the lock's freshness against the spec
    ("lint", "lock"),       # lint applies lock's own spec validation, so both agree
    ("init", "lint"),       # init lints the file it writes
    ("export", "lock"),     # export writes a lock with lock's writer
    ("export", "check"),    # export names what cannot be reproduced with check's rules
    ("export", "lint"),     # export reports channel mixing with lint's rule
    ("tune", "smoke"),      # tune words host limits and probe failures with smoke's thresholds and wording
    ("fleet", "diff"),      # fleet names differences in diff's change classes
    ("check", "diff"),      # check classifies lock differences with diff's engine
    ("activate", "create"),  # run and shell make the environment its lock through create first
    ("activate", "lock"),   # run tests the lock's freshness against the spec, as check does
    ("check", "activate"),  # check runs its probes in the environment activated as run activates it
}
RENDERING = {"cli.py", "render.py"}  # and every module of the cli package
# above every wing: may use any wing's public entry (cli/workflow.py runs create, then check)
TOP = {"cli.py", "__main__.py"}
TOP_PACKAGES = {"cli"}  # envguard/cli/: the commands and their options
_IMPORTERS = {"import_module", "__import__"}  # importlib.import_module("envguard.x.y"), __import__(...)


def _is_top(path: Path, package: Path = PACKAGE) -> bool:
    """Whether the module sits above every wing: cli.py, __main__.py or the cli package (cli/workflow.py too)."""
    rel = path.relative_to(package).parts
    return (len(rel) == 1 and rel[0] in TOP) or (len(rel) > 1 and rel[0] in TOP_PACKAGES)


def _wings(package: Path) -> set[str]:
    return {p.name for p in package.iterdir() if p.is_dir() and (p / "__init__.py").is_file()} - NOT_WINGS


WINGS = _wings(PACKAGE)


def _modules(package: Path = PACKAGE) -> list[Path]:
    return sorted(p for p in package.rglob("*.py") if "__pycache__" not in p.parts)


def _is_module(package: Path, dotted: str) -> bool:
    """Whether ``dotted`` (``envguard.check.checks``) names a module or package of the package tree."""
    parts = dotted.split(".")
    if parts[0] != package.name or len(parts) < 2:
        return False
    base = package.parent.joinpath(*parts)
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def _imports(path: Path, package: Path = PACKAGE) -> list[tuple[str, int]]:
    """Every module the file imports: import statements (function-level and relative ones included),
    names of a ``from`` import that are modules themselves (``from envguard.check import checks``), and
    module names given to ``importlib.import_module``/``__import__`` as strings (an f-string's literal
    head counts as one of that package's modules)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[tuple[str, int]] = []
    pkg_parts = list(path.relative_to(package.parent).with_suffix("").parts[:-1])
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
            found += [(f"{mod}.{a.name}", node.lineno) for a in node.names if _is_module(package, f"{mod}.{a.name}")]
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            arg = node.args[0]
            if name not in _IMPORTERS:
                continue
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                found.append((arg.value, node.lineno))
            elif isinstance(arg, ast.JoinedStr) and arg.values and isinstance(arg.values[0], ast.Constant):
                head = str(arg.values[0].value)
                found.append((head + "<dynamic>" if head.endswith(".") else head, node.lineno))
    return found


def _wing_of(path: Path, package: Path = PACKAGE) -> str | None:
    parts = path.relative_to(package).parts
    return parts[0] if len(parts) > 1 and parts[0] in _wings(package) else None


def layout_problems(package: Path = PACKAGE, edges: set[tuple[str, str]] = ALLOWED_EDGES) -> list[str]:
    """Breaks of rules 1-3 of docs/architecture.md, one line each with file and line."""
    wings = _wings(package)
    problems = []
    for path in _modules(package):
        mine = _wing_of(path, package)
        where = path.relative_to(package.parent)
        for mod, line in _imports(path, package):
            parts = mod.split(".")
            if parts[0] != package.name or len(parts) < 2 or parts[1] not in wings:
                continue
            theirs = parts[1]
            if _is_top(path, package):
                if len(parts) > 2 and parts[2] != "render":
                    problems.append(f"{where}:{line}: {mod} is private to the {theirs} wing; use envguard.{theirs}")
            elif mine is None:
                problems.append(f"{where}:{line}: the core imports the {theirs} wing ({mod})")
            elif theirs != mine:
                if len(parts) > 2:
                    problems.append(f"{where}:{line}: {mod} is private to the {theirs} wing; use envguard.{theirs}")
                elif (mine, theirs) not in edges:
                    problems.append(f"{where}:{line}: {mine} -> {theirs} is not an edge of docs/architecture.md")
    return problems


def find_cycle(edges: set[tuple[str, str]]) -> list[str]:
    """A cycle of the directed graph ``edges`` as the wings along it (``[a, b, a]``), or [] when it has none."""
    graph: dict[str, list[str]] = {}
    for a, b in sorted(edges):
        graph.setdefault(a, []).append(b)
    done: set[str] = set()

    def walk(node: str, path: list[str]) -> list[str]:
        if node in path:
            return path[path.index(node):] + [node]
        if node in done:
            return []
        for nxt in graph.get(node, []):
            cycle = walk(nxt, path + [node])
            if cycle:
                return cycle
        done.add(node)
        return []

    for start in sorted(graph):
        cycle = walk(start, [])
        if cycle:
            return cycle
    return []


def ui_problems(package: Path = PACKAGE) -> list[str]:
    """typer, rich or click imported outside cli.py and the render.py modules."""
    problems = []
    for path in _modules(package):
        if path.name in RENDERING or _is_top(path, package):
            continue
        for mod, line in _imports(path, package):
            if mod.split(".")[0] in ("typer", "rich", "click"):
                problems.append(f"{path.relative_to(package.parent)}:{line}: imports {mod}")
    return problems


def test_the_wings_exist() -> None:
    assert {"lock", "create", "check", "smoke", "diff", "lint", "init", "export", "tune", "fleet"} <= WINGS


def test_core_imports_no_wing_and_wings_use_only_public_entries() -> None:
    problems = layout_problems()
    assert not problems, "\n".join(problems)


def test_only_the_cli_and_rendering_import_typer_or_rich() -> None:
    problems = ui_problems()
    assert not problems, "\n".join(problems)


def test_the_wing_graph_has_no_cycle() -> None:
    """Two wings that reach each other (directly or through others) cannot be read, tested or split apart
    one at a time: what both need belongs to the core, and a command that runs two wings is the command
    layer's (envguard/cli/workflow.py)."""
    cycle = find_cycle(ALLOWED_EDGES)
    assert not cycle, f"the wings form a cycle: {' -> '.join(cycle)}"


@pytest.mark.parametrize(("edges", "cycle"), [
    ({("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")}, ["a", "b", "c", "a"]),  # through a third wing
    ({("create", "check"), ("check", "create"), ("check", "lock")}, ["check", "create", "check"]),
    ({("a", "a")}, ["a", "a"]),
    ({("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")}, []),  # two paths to one wing are no cycle
    (set(), []),
])
def test_find_cycle_finds_a_cycle_and_only_a_cycle(edges: set[tuple[str, str]], cycle: list[str]) -> None:
    assert find_cycle(edges) == cycle


def test_every_allowed_edge_is_used() -> None:
    """An edge nobody uses is a false statement in docs/architecture.md: remove it from both places."""
    used = set()
    for path in _modules():
        mine = _wing_of(path)
        for mod, _line in _imports(path):
            parts = mod.split(".")
            if mine and parts[0] == "envguard" and len(parts) >= 2 and parts[1] in WINGS and parts[1] != mine:
                used.add((mine, parts[1]))
    assert used >= ALLOWED_EDGES, f"listed but unused: {sorted(ALLOWED_EDGES - used)}"


def test_the_checks_find_what_they_are_meant_to_find(tmp_path: Path) -> None:
    """The rules above, on a small package with one break of each kind (each must be reported)."""
    pkg = tmp_path / "envguard"
    files = {
        "__init__.py": "",
        "errors.py": "import envguard.smoke.probe as p\n",                       # core -> wing (aliased)
        "report.py": "import importlib\nm = importlib.import_module('envguard.check')\n",  # core -> wing (string)
        "cli.py": "from envguard.check import checks\n",                         # top -> private (module name)
        "check/__init__.py": "from envguard.smoke import run_smoke\n",           # allowed edge, public entry
        "check/checks.py": "from ..smoke import probe\n",                        # relative, private module
        "check/rules.py": "from ..smoke.probe import x\n",                       # relative, private module
        "check/dyn.py": "import importlib\nimportlib.import_module(f'envguard.smoke.{1}')\n",
        "check/ui.py": "from rich.table import Table\n",                         # rich outside render.py
        "check/render.py": "import rich\n",                                       # fine
        "smoke/__init__.py": "__import__('envguard.lint')\n",                    # not an edge
        "smoke/probe/__init__.py": "",
        "smoke/probe/x.py": "",
        "lint/__init__.py": "",
    }
    for rel, text in files.items():
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_text(text)
    found = layout_problems(pkg, {("check", "smoke")})
    expected = ["envguard/errors.py:1: the core imports the smoke wing (envguard.smoke.probe)",
                "envguard/report.py:2: the core imports the check wing (envguard.check)",
                "envguard/cli.py:1: envguard.check.checks is private to the check wing",
                "envguard/check/checks.py:1: envguard.smoke.probe is private to the smoke wing",
                "envguard/check/rules.py:1: envguard.smoke.probe is private to the smoke wing",
                "envguard/check/dyn.py:2: envguard.smoke.<dynamic> is private to the smoke wing",
                "envguard/smoke/__init__.py:1: smoke -> lint is not an edge"]
    for want in expected:
        assert any(p.startswith(want) for p in found), (want, found)
    assert not [p for p in found if p.startswith("envguard/check/__init__.py")], found
    assert ui_problems(pkg) == ["envguard/check/ui.py:1: imports rich.table"]


@pytest.mark.parametrize("probe", sorted(p for p in PACKAGE.rglob("*.py")
                                         if "probe" in p.parent.name or p.parent.name == "in_process"))
def test_probes_are_standalone(probe: Path) -> None:
    """A probe runs by path with the target interpreter, where envguard is not installed."""
    assert not [m for m, _ in _imports(probe) if m.split(".")[0] == "envguard"], probe


def test_the_document_lists_exactly_the_edges() -> None:
    """Rule 3's list in docs/architecture.md ("- create → lock: ...") and ALLOWED_EDGES are the same set."""
    doc = (PACKAGE.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    listed = {(a, b) for a, b in re.findall(r"^\s*- (\w+) → (\w+):", doc, flags=re.M)}
    assert listed == ALLOWED_EDGES, (f"in the document only: {sorted(listed - ALLOWED_EDGES)}; "
                                     f"in ALLOWED_EDGES only: {sorted(ALLOWED_EDGES - listed)}")
    missing = [w for w in sorted(WINGS) if f"\n  {w}/" not in doc]
    assert not missing, f"docs/architecture.md's tree does not show the wings {missing}"


MAX_MODULE_LINES = 600
PROBE_DIRS = ("smoke/probe", "tune/probe", "in_process")  # standalone files run by path: one file a probe


def long_modules(package: Path = PACKAGE, limit: int = MAX_MODULE_LINES) -> list[str]:
    """Modules over ``limit`` lines outside the standalone probes: a module that long has seams to split along."""
    found = []
    for path in _modules(package):
        rel = path.relative_to(package).as_posix()
        if rel.startswith(PROBE_DIRS):
            continue
        n = len(path.read_text(encoding="utf-8").splitlines())
        if n > limit:
            found.append(f"{path.relative_to(package.parent)}: {n} lines")
    return found


def test_no_module_outside_the_probes_is_over_600_lines() -> None:
    assert long_modules() == []


def test_long_modules_finds_a_long_module(tmp_path: Path) -> None:
    pkg = tmp_path / "envguard"
    (pkg / "lint").mkdir(parents=True)
    (pkg / "smoke" / "probe").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "lint" / "__init__.py").write_text("x = 1\n" * 601)
    (pkg / "smoke" / "probe" / "smoke_probe.py").write_text("x = 1\n" * 900)  # a probe may be long
    assert long_modules(pkg) == ["envguard/lint/__init__.py: 601 lines"]


def private_crossings(package: Path = PACKAGE) -> list[str]:
    """Imports of another module's ``_private`` name, and modules whose own name is private: what a module
    shares is public and documented there (#40); an underscore means "local to this file"."""
    problems = []
    for path in _modules(package):
        rel = path.relative_to(package.parent)
        if path.stem.startswith("_") and not path.stem.startswith("__"):
            problems.append(f"{rel}: a private module name (other modules import it)")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == package.name:
                problems += [f"{rel}:{node.lineno}: imports {a.name} from {node.module}" for a in node.names
                             if a.name.startswith("_") and not a.name.startswith("__")]
    return problems


def test_no_private_name_crosses_a_module_boundary() -> None:
    assert private_crossings() == []


def test_private_crossings_finds_an_import_and_a_private_module(tmp_path: Path) -> None:
    pkg = tmp_path / "envguard"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def _helper():\n    return 1\n")
    (pkg / "b.py").write_text("from envguard.a import _helper\n")
    (pkg / "_c.py").write_text("")
    found = private_crossings(pkg)
    assert any("b.py:1: imports _helper from envguard.a" in p for p in found), found
    assert any("_c.py: a private module name" in p for p in found), found
