"""A fix that shows an envguard command shows one that runs: the real CLI parses it as written.

tests/test_fix_texts.py runs the commands that real broken environments produce. This file covers every
other place a command is written for a user to copy, without building anything: each backticked
``envguard ...`` in a string of the package (error and finding fixes, notes; docstrings aside), every fix of
the failure catalogue, each literal ``command=`` of an error, and the helpers that assemble commands from
paths. Each is parsed by the command-line parser itself (typer's click command, ``make_context``): the
command exists, every option exists and takes what it is given, no argument is left over. A command shown
to be run as written holds no placeholder (``PREFIX``, ``NAME``, ``...``, ``<lock>``), and a value it takes
from a variable is shell-quoted (``shlex.quote``/``shlex.join``) unless it is a word that needs none (a
platform, a command name).
"""

from __future__ import annotations

import ast
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import typer

from envguard import catalog
from envguard.cli import app

PACKAGE = Path(__file__).resolve().parents[1] / "envguard"
HOLE = "\x00"  # where an f-string puts a value
SAFE_HOLES = {"command", "platform"}  # words with no shell meaning: a command's name, a platform
PLACEHOLDER = re.compile(r"^[A-Z][A-Z_]{2,}$|\.\.\.|^<.*>$|\|")


def _group() -> Any:
    """The click group the CLI runs (typer's, vendored click: only typer's public names are used here)."""
    group = typer.main.get_command(app)
    assert "create" in group.commands  # type: ignore[attr-defined]
    return group


def why_not(command: str, group: Any = None) -> str | None:
    """None when ``command`` (``envguard SUB ...``) parses as written, else why not."""
    group = group or _group()
    try:
        words = shlex.split(command)
    except ValueError as e:
        return f"not a shell command line: {e}"
    if words[:1] != ["envguard"] or len(words) < 2:
        return "not an envguard command"
    held = [w for w in words[1:] if PLACEHOLDER.search(w)]
    if held:
        return f"placeholder {held[0]!r}: not runnable as written"
    sub = group.commands.get(words[1])
    if sub is None:
        return f"no command {words[1]!r}"
    try:
        sub.make_context(words[1], words[2:])
    except typer.TyperException as e:  # click's usage errors, as typer raises them
        return e.format_message()
    return None


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def shown_commands(source: str) -> list[tuple[int, str, list[ast.expr]]]:
    """(line, command with each f-string value as HOLE, those values' expressions) for every backticked
    ``envguard ...`` in a string of ``source`` that is not a docstring."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    inside_f = {id(v) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for v in node.values}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            parts = node.values
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
              and id(node) not in inside_f):
            parts = [node]
        else:
            continue
        text, values = "", []
        for part in parts:
            if isinstance(part, ast.Constant):
                text += str(part.value)
            else:
                assert isinstance(part, ast.FormattedValue)
                text += HOLE
                values.append(part.value)
        for m in re.finditer(r"`(envguard [^`]*)`", text):
            before = text[:m.start(1)].count(HOLE)
            found.append((node.lineno, m.group(1), values[before:before + m.group(1).count(HOLE)]))
    return found


def _quoting(expr: ast.expr) -> bool:
    if isinstance(expr, ast.Call):
        fn = expr.func
        name = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else ""
        return name in ("quote", "join")
    return False


def quoted_names(source: str) -> set[str]:
    """Names the module assigns from ``shlex.quote``/``shlex.join`` (``shown = shlex.quote(str(target))``)."""
    return {t.id for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Assign) and _quoting(node.value)
            for t in node.targets if isinstance(t, ast.Name)}


def check_source(source: str, group: Any) -> list[str]:
    problems = []
    safe = SAFE_HOLES | quoted_names(source)
    for line, command, values in shown_commands(source):
        if command.startswith("envguard " + HOLE):  # the command's name from a variable: each it can be
            continue
        if not all(_quoting(v) or (isinstance(v, ast.Name) and v.id in safe) for v in values):
            problems.append(f"{line}: `{command.replace(HOLE, '{}')}`: a value not shell-quoted")
            continue
        why = why_not(command.replace(HOLE, "1"), group)  # "1" reads as any option's value: path, word, number
        if why:
            problems.append(f"{line}: `{command.replace(HOLE, '{}')}`: {why}")
    return problems


def test_the_scan_finds_what_a_user_could_not_run() -> None:
    group = _group()
    bad = '''
import shlex
a = f"create it with `envguard create -p PREFIX`"
b = f"run `envguard lock --no-such-option`"
c = f"run `envguard create -p {prefix}`"
d = f"run `envguard create -p {shlex.quote(prefix)}` or `envguard lock --platform {platform}`"
e = "`envguard sync`"
shown = shlex.quote(prefix)
f = f"run `envguard create -p {shown}`"
'''
    problems = check_source(bad, group)
    assert [p.split(":")[0] for p in problems] == ["3", "4", "5", "7"], problems
    assert "placeholder 'PREFIX'" in problems[0] and "No such option" in problems[1], problems
    assert "not shell-quoted" in problems[2] and "no command 'sync'" in problems[3], problems
    assert why_not("envguard create -p '/a b' --lockfile x.yml --frozen --force", group) is None
    assert why_not("envguard check -p x extra-argument", group) is not None


def test_every_command_a_fix_or_message_shows_parses_as_written() -> None:
    group = _group()
    problems = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for p in check_source(path.read_text(encoding="utf-8"), group):
            problems.append(f"{path.relative_to(PACKAGE.parent)}:{p}")
    assert not problems, "\n".join(problems)


def test_every_literal_command_field_parses() -> None:
    """``command=`` of an error: the fix as data, ready to run."""
    group = _group()
    problems = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.keyword) and node.arg == "command" and isinstance(node.value, ast.Constant) \
                    and isinstance(node.value.value, str):
                why = why_not(node.value.value, group)
                if why:
                    problems.append(f"{path.relative_to(PACKAGE.parent)}:{node.value.lineno}: {why}")
    assert not problems, problems


def test_every_catalogue_fix_parses_aimed_at_an_environment_with_spaces() -> None:
    group = _group()
    for case in catalog.cases():
        for command in catalog.commands(catalog.aim(case.fix, ["-p", shlex.quote("/envs/my env")])):
            assert why_not(command, group) is None, (case.id, command, why_not(command, group))


@pytest.mark.parametrize("where", ["/tmp/envs/plain", "/tmp/my envs/it's here"])
def test_commands_assembled_from_paths_parse(where: str) -> None:
    from envguard.check.checks import create_command
    from envguard.lock import fix_command

    group = _group()
    prefix, lock, spec = Path(where) / "env", Path(where) / "conda-lock.yml", Path(where) / "environment.yml"
    for command in (create_command(prefix), create_command(prefix, str(lock), force=True),
                    fix_command([spec], lock, ["linux-64", "osx-arm64"])):
        assert why_not(command, group) is None, command
        assert str(prefix) in shlex.split(command) or str(lock) in shlex.split(command), command
    aimed = catalog.aim("rebuild it (`envguard create --force`)", ["-p", shlex.quote(str(prefix))])
    assert catalog.forced(aimed, str(prefix)) == aimed  # --force already there: said once
    [command] = catalog.commands(catalog.forced(catalog.aim("`envguard create`", ["-p", shlex.quote(str(prefix))]),
                                                str(prefix)))
    assert shlex.split(command) == ["envguard", "create", "-p", str(prefix), "--force"]
    assert why_not(command, group) is None


def test_a_mistyped_update_name_offers_the_nearest_locked_one_as_a_command_that_runs(realworld: Path, capsys) -> None:
    """`lock --update numpyy`: the fix was "`envguard why NAME`"; now the nearest locked name, as a command that
    answers as written."""
    from envguard import cli
    from envguard.errors import UserError
    from envguard.lock import relock

    lock = realworld / "conda-lock" / "01-ai__Yi__conda-lock.yml"
    with pytest.raises(UserError) as e:
        relock.plan(lock, update=["numpyy"])
    [command] = catalog.commands(e.value.fix or "")
    assert shlex.split(command) == ["envguard", "why", "numpy", "--lockfile", str(lock)], command
    assert why_not(command) is None
    capsys.readouterr()
    assert cli.run(shlex.split(command)[1:]) == 0, capsys.readouterr().err
