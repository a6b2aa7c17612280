"""envguard/typer_shim.py leans on typer internals: these tests fail loudly when a typer upgrade moves them.

The shim must (1) take over every plain option of every command, since a silent step-aside would only
cost start-up time and nobody would notice, and (2) give exactly what typer's own coercion gives.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import typer
import typer.main
from packaging.version import Version

from envguard import cli
from envguard.typer_shim import PlainCoercion

PLAIN_KINDS = {"bool", "str", "strs", "float", "path", "paths"}


def _group_and_ctx():
    group = typer.main.get_command(cli.app)
    return group, group.context_class(group, info_name="envguard")


def test_typer_is_in_the_tested_range() -> None:
    """pyproject.toml pins typer to the range the shim was tested with; an install outside it is a bug."""
    v = Version(typer.__version__)
    assert Version("0.29") <= v < Version("0.30"), f"typer {v}: re-test envguard/typer_shim.py, then widen the pin"


def test_the_internals_it_uses_still_exist() -> None:
    group, _ = _group_and_ctx()
    param = next(p for c in group.commands.values() for p in c.params if p.name == "quiet")
    desc = getattr(param, "type_descriptor", None)
    assert desc is not None, "typer.core.TyperOption lost type_descriptor"
    for field in ("parameter_info", "annotation", "file_annotation"):
        assert hasattr(desc, field), f"type_descriptor lost {field}"
    assert hasattr(param, "_runtime_param") and hasattr(param, "get_runtime_param")


def test_every_plain_option_is_taken_over() -> None:
    """Each kind the shim knows is met among envguard's options, and no bool/str option is left to pydantic."""
    group, _ = _group_and_ctx()
    kinds: set[str] = set()
    left: list[str] = []
    for name, command in group.commands.items():
        for param in command.params:
            light = PlainCoercion.for_param(param)
            if light is not None:
                kinds.add(light.kind)
            elif getattr(getattr(param, "type_descriptor", None), "annotation", None) in (bool, str):
                left.append(f"{name} {param.name}")
    assert kinds == PLAIN_KINDS
    assert not left, f"plain options left to typer's pydantic coercion: {left}"


def test_plain_option_coercion_matches_typers_own(tmp_path: Path) -> None:
    """PlainCoercion (no pydantic) gives what typer's coercion gives, for every kind it takes over."""
    group, ctx = _group_and_ctx()
    (tmp_path / "file").write_text("x")
    samples = {"bool": [True, False], "str": ["x", "", "a b"], "strs": [("a", "b"), []],
               "float": ["1", "1.5", ".5", "-2", "+3.", 120.0, 5],
               "path": [str(tmp_path / "file"), str(tmp_path / "missing"), ".", tmp_path],
               "paths": [(str(tmp_path), "rel/x"), []]}
    seen: set[str] = set()
    for command in [group, *group.commands.values()]:
        for param in command.params:
            light = PlainCoercion.for_param(param)
            if light is None or light.kind in seen:
                continue
            seen.add(light.kind)
            for value in samples[light.kind]:
                param._runtime_param = None
                theirs = param.get_runtime_param().coerce(value, param=param, ctx=ctx)
                mine = light.coerce(value, param=param, ctx=ctx)
                assert (type(mine), mine) == (type(theirs), theirs), (light.kind, value)
    assert seen == set(samples)


def test_a_plain_command_never_imports_pydantic() -> None:
    """What the shim is for: `envguard lint --help`-style start-up without pydantic."""
    code = ("import sys\nfrom envguard.cli import run\nrun(['lint', '--format', 'json', '/nonexistent.yml'])\n"
            "print('pydantic' in sys.modules)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip().splitlines()[-1] == "False", proc.stdout + proc.stderr
