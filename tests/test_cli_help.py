"""How the commands and their options read in --help, and that the CLI stays on typer's public API.

typer prints a type beside every option (``--force <bool>``, ``--platform <list[str]>``), which makes a flag
look as if it took a value: envguard's flags show no value and every other option names its value
(``--platform PLATFORM``). The options several commands share (``--prefix/-p``, ``--name/-n``, ``--format``,
``--lockfile``, ``--file/-f``) are declared once and read the same everywhere.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer.main

from envguard import cli

COMMANDS = sorted(c.name for c in cli.app.registered_commands if c.name)
SHARED = {  # long name: (every spelling, the value's name in --help)
    "--prefix": (["--prefix", "-p"], "PREFIX"),
    "--name": (["--name", "-n"], "NAME"),
    "--format": (["--format"], "FORMAT"),
    "--lockfile": (["--lockfile"], "FILE"),
    "--file": (["--file", "-f"], "FILE"),
    "--platform": (["--platform"], "PLATFORM"),
}
PACKAGE = Path(cli.__file__).parent.parent  # envguard/ (cli is a package in it)


def _help(argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("COLUMNS", "250")  # one row per option
    capsys.readouterr()
    assert cli.run([*argv, "--help"]) == 0
    return capsys.readouterr().out


def _option_rows(text: str) -> dict[str, str]:
    """``--long`` -> its row in a rich help panel."""
    rows = {}
    for line in text.splitlines():
        m = re.match(r"\W*(--[a-z-]+)", line)
        if m:
            rows[m.group(1)] = line
    return rows


@pytest.mark.parametrize("command", ["", *COMMANDS])
def test_help_rows_show_no_typer_type(command: str, capsys: pytest.CaptureFixture[str],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A flag shows no value, an option the name of its value, an argument its name only."""
    group: Any = typer.main.get_command(cli.app)
    click_command = group.commands[command] if command else group
    text = _help([command] if command else [], capsys, monkeypatch)
    rows = _option_rows(text)
    options = [p for p in click_command.params if p.param_type_name == "option" and not p.hidden]
    assert options
    for param in [*options, click_command.get_help_option(typer.Context(click_command))]:
        long = next(o for o in param.opts if o.startswith("--"))
        row = rows[long]
        if param.is_flag:
            assert not re.search(r"<\w+>", row), (long, row)
        else:
            assert param.metavar and param.metavar in row and not re.search(r"<[\w\[\]]+>", row), (long, row)
    for param in click_command.params:  # an argument's row: its name only, not typer's <list[Path]>
        if param.param_type_name == "argument":
            row = next(line for line in text.splitlines() if f" {param.metavar} " in line)
            assert not re.search(r"<[\w\[\]]+>", row), row


def test_the_shared_options_read_the_same_in_every_command() -> None:
    group: Any = typer.main.get_command(cli.app)
    seen: dict[str, list[str]] = {}
    for name, command in group.commands.items():
        for param in command.params:
            long = next((o for o in param.opts if o.startswith("--")), "")
            if long not in SHARED or param.hidden:
                continue
            spellings, metavar = SHARED[long]
            if long == "--name" and name == "init":  # the name written into the file, not an environment's
                continue
            seen.setdefault(long, []).append(name)
            assert (sorted(param.opts), param.metavar) == (sorted(spellings), metavar), (name, long)
    assert all(len(commands) >= 2 for commands in seen.values()), seen


def test_bare_envguard_prints_the_help_and_exits_2(capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "250")
    capsys.readouterr()
    assert cli.run([]) == 2
    out, err = capsys.readouterr()
    assert "Usage: envguard" in out and all(f" {c} " in out for c in COMMANDS), out
    assert not err.strip() and "error:" not in out, err


@pytest.mark.slow
def test_help_read_by_a_reader_that_stops_early_is_no_failure(tmp_path: Path) -> None:
    """`envguard --help | head -1`: the reader closes the pipe before the help is written."""
    for argv in (["--help"], ["lint", "--help"]):
        proc = subprocess.Popen([sys.executable, "-m", "envguard", *argv], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, cwd=tmp_path)
        assert proc.stdout is not None
        proc.stdout.close()
        _out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0 and b"Traceback" not in err, (argv, err)


def _private_uses(path: Path) -> list[str]:
    """`module._name` of an imported module, and imports from a private module."""
    tree = ast.parse(path.read_text())
    modules = {alias.asname or alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
               for alias in node.names}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module not in (None, "__future__") and any(
                part.startswith("_") for part in str(node.module).split(".")):
            found.append(f"from {node.module} import")
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            base = node.value
            while isinstance(base, ast.Attribute):
                base = base.value
            if isinstance(base, ast.Name) and base.id in modules:
                found.append(ast.unparse(node))
    # os._exit is public and documented (leaving without finalising is what it is for)
    return [use for use in found if use != "os._exit"]


@pytest.mark.parametrize("module", [*(f"cli/{p.name}" for p in sorted((PACKAGE / "cli").glob("*.py"))),
                                    "__main__.py", "render.py"])
def test_the_cli_uses_no_private_name_of_typer_click_or_the_standard_library(module: str) -> None:
    assert _private_uses(PACKAGE / module) == []
