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


@pytest.mark.parametrize("columns", ["40", "120"])
def test_help_keeps_every_word_whole_at_any_width(columns: str, capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """envguard draws --help itself (envguard/cli/helptext.py): on a narrow terminal the help goes below
    the option's names rather than into a column a few letters wide, so no word of it is cut."""
    group: Any = typer.main.get_command(cli.app)
    monkeypatch.setenv("COLUMNS", columns)
    for command in COMMANDS:
        capsys.readouterr()
        assert cli.run([command, "--help"]) == 0
        words = set(re.findall(r"[\w.:/()`'$-]+", capsys.readouterr().out))
        for param in group.commands[command].params:
            if param.param_type_name == "option" and not param.hidden:
                assert {w for w in re.findall(r"[\w.:/()`'$-]+", param.help or "") if len(w) < 30} <= words, \
                    (command, param.opts)


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


# hidden spellings kept so that old scripts still run, each with the option that replaced it (they warn)
DEPRECATED_SHORT = {("export", "-o"): "--output-dir"}


def test_each_short_option_has_one_meaning_across_commands() -> None:
    """A short option means one long option with one kind of value in every command that has it: `-o` was
    init's output file and export's output directory. Hidden options (the refusal of a misused `-p`) must
    at least name the same long option; a deprecated spelling is listed in DEPRECATED_SHORT."""
    group: Any = typer.main.get_command(cli.app)
    meanings: dict[str, dict[str, set[str]]] = {}  # short -> long -> metavars of its visible uses
    for name, command in group.commands.items():
        for param in command.params:
            if param.param_type_name != "option":
                continue
            spellings = [*param.opts, *param.secondary_opts]
            shorts = [o for o in spellings if len(o) == 2 and o[0] == "-" and o[1] != "-"]
            long = next((o for o in param.opts if o.startswith("--")), "")
            for short in shorts:
                if (name, short) in DEPRECATED_SHORT:
                    assert param.hidden and "Deprecated" in (param.help or ""), (name, short)
                    assert any(DEPRECATED_SHORT[name, short] in p.opts for p in command.params), (name, short)
                    continue
                kinds = meanings.setdefault(short, {}).setdefault(long, set())
                if not param.hidden:
                    kinds.add(param.metavar or "")
    ambiguous = {s: m for s, m in meanings.items() if len(m) != 1 or any(len(k) > 1 for k in m.values())}
    assert not ambiguous, ambiguous


def test_exports_old_o_still_works_and_warns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`export -o DIR` is read as --output-dir DIR with a warning naming the new spelling; both at once is
    refused (exit 2) rather than one of them guessed."""
    capsys.readouterr()
    assert cli.run(["export", "-p", str(tmp_path / "none"), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "-o/--output is deprecated" in err and "--output-dir" in err and "no environment at" in err, err
    assert cli.run(["export", "-p", str(tmp_path / "none"), "-o", "a", "--output-dir", "b"]) == 2
    err = capsys.readouterr().err
    assert "both given" in err and "--output-dir b" in err, err


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
