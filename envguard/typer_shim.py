"""typer start-up without pydantic: plain options coerced directly.

typer 0.2x validates every option value with a pydantic TypeAdapter built on first use: importing
pydantic and building an adapter per option (even for an absent ``--help``) costs about 0.1 s of every
command, a third of a warm 500-package ``envguard create``. :class:`PlainGroup` is the app's command
group; it hands each plain option (bool, str, float, Path, list[str], list[Path]) a coercion that does
what those adapters do on the values they accept, and leaves anything else (a bad number, an unreadable
path, an empty value) to typer's own coercion, so errors read exactly as before.

It also fixes how options read in ``--help``: typer 0.29 prints a type for every option (``--force <bool>``,
``--platform <list[str]>``), which makes flags look as if they took a value. A flag gets no metavar, any
other option without an explicit one gets its long name in capitals (``--platform PLATFORM``), an argument
only its name.

This leans on typer internals (``TyperOption.type_descriptor``, ``_runtime_param``,
``get_runtime_param``). It steps aside for a typer without them, and pyproject.toml pins typer to the
range it was tested with; tests/test_typer_shim.py fails loudly when an upgrade changes them.
"""

from __future__ import annotations

import os
from pathlib import Path

import typer


class PlainCoercion:
    """Coerces one plain option value (bool, str, float, Path, list[str], list[Path]) without pydantic;
    anything else goes to typer's own coercion (see the module's docstring)."""

    _NUMBER = None  # compiled on first use

    def __init__(self, kind: str) -> None:
        self.kind = kind  # "bool" | "str" | "strs" | "float" | "path" | "paths"

    @classmethod
    def for_param(cls, param: "object") -> "PlainCoercion | None":
        desc = getattr(param, "type_descriptor", None)
        if desc is None or getattr(param, "_runtime_param", "absent") is not None:
            return None  # another typer: leave it alone
        info, ann = desc.parameter_info, desc.annotation
        plain_path = (not info.exists and info.file_okay
                      and info.dir_okay and not info.writable and not info.resolve_path and not info.allow_dash
                      and info.path_type is None and desc.file_annotation is None)
        if getattr(info, "parser", None) is not None:
            return None
        if ann is bool:
            return cls("bool")
        if ann is str:
            return cls("str")
        if ann == list[str]:
            return cls("strs")
        if ann is float and info.min is None and info.max is None:
            return cls("float")
        if ann is Path and plain_path:
            return cls("path")
        if ann == list[Path] and plain_path:
            return cls("paths")
        return None

    def coerce(self, value: "object", param: "typer.core.TyperOption", ctx: "object") -> "object":
        if value is None:
            return () if (param.multiple or param.nargs == -1) else None
        try:
            if self.kind == "bool" and isinstance(value, bool):
                return value
            if self.kind == "str" and isinstance(value, str):
                return value
            if self.kind == "strs" and isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
                return list(value)
            if self.kind == "float" and type(value) in (float, int):  # a default such as 120.0
                return float(value)
            if self.kind == "float" and isinstance(value, str):
                import re

                if PlainCoercion._NUMBER is None:
                    PlainCoercion._NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)")
                if PlainCoercion._NUMBER.fullmatch(value):
                    return float(value)
            if self.kind == "path":
                return self._path(value)
            if self.kind == "paths" and isinstance(value, (list, tuple)):
                return [self._path(v) for v in value]
        except _Defer:
            pass
        param._runtime_param = None  # typer's own (pydantic) coercion decides, and words any error
        return param.get_runtime_param().coerce(value, param=param, ctx=ctx)

    @staticmethod
    def _path(value: "object") -> Path:
        if isinstance(value, Path):  # a default: typer keeps the object
            path = value
        elif isinstance(value, str) and value and "\0" not in value:
            path = Path(value)
        else:
            raise _Defer
        try:
            os.stat(path)
        except OSError:
            return path  # need not exist
        if not os.access(path, os.R_OK):  # typer refuses an unreadable existing path
            raise _Defer
        return path


class _Defer(Exception):
    pass


def _lighten(command: "object", ctx: "object", *, own_ctx: bool) -> None:
    params = list(getattr(command, "params", ()))
    # get_params adds the --help option, created on first use from the context's help option names: the
    # command's own context, or the app's, which a subcommand shares unless it sets its own names
    if own_ctx or not (getattr(command, "context_settings", None) or {}).get("help_option_names"):
        try:
            params = command.get_params(ctx)  # type: ignore[attr-defined]
        except Exception:  # another typer/click: its --help keeps typer's coercion
            pass
    for param in params:
        light = PlainCoercion.for_param(param)
        if light is not None:
            param._runtime_param = light  # type: ignore[attr-defined]
        _name_in_help(param)


def _name_in_help(param: "object") -> None:
    """A flag shows no value in --help; another option without a metavar shows its name (``PLATFORM``); an
    argument shows its name only (its type column would read ``<list[Path]>``)."""
    if getattr(param, "param_type_name", None) == "argument" and hasattr(param, "display_type_rich"):
        param.display_type_rich = lambda ctx: None  # type: ignore[attr-defined]
        return
    if getattr(param, "param_type_name", None) != "option" or getattr(param, "metavar", "x") is not None:
        return
    if getattr(param, "is_flag", False):
        param.metavar = ""  # type: ignore[attr-defined]
        return
    longs = [o for o in getattr(param, "opts", ()) if o.startswith("--")]
    if longs:
        param.metavar = longs[0][2:].upper()  # type: ignore[attr-defined]


class PlainGroup(typer.core.TyperGroup):
    """The app's group: its own options and every subcommand's plain options are coerced by
    :class:`PlainCoercion`."""

    def parse_args(self, ctx: "object", args: list[str]) -> list[str]:
        _lighten(self, ctx, own_ctx=True)
        return super().parse_args(ctx, args)  # type: ignore[arg-type]

    def get_command(self, ctx: "object", cmd_name: str) -> "object":
        command = super().get_command(ctx, cmd_name)  # type: ignore[arg-type]
        if command is not None:
            _lighten(command, ctx, own_ctx=False)
        return command
