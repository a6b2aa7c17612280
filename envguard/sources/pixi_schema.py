"""Whether pixi reads a manifest at all: pixi's manifest schema (the rules, as data, are
:mod:`envguard.sources.pixi_rules`) and the few checks pixi makes beyond it. pixi refuses a manifest that
breaks them, so envguard does too, naming the key path and what was expected there, instead of reading a
file pixi would not.

Checked: every table's keys (pixi's tables allow no others) and the type of every value, down to tasks,
activation, pypi-options and the build tables; inheritance from the workspace (``{ workspace = true }``,
nothing else); environment, task and platform names (pixi reserves ``linux``, ``unix``, ``win``, ``osx``
and ``macos`` for target selectors); an empty version string; a build backend with ``channels = []``; a
task argument named ``pixi``. The workspace's required ``channels`` is lint's EG129, a finding rather than
a refusal, so that lint can say it with the rest.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable
from typing import Any

from envguard.errors import UserError
from envguard.sources.pixi_rules import MAX_PLATFORM_NAME, RESERVED_ARG_NAMES, RESERVED_PLATFORM_NAMES, TABLES

URL = "https://pixi.sh/latest/reference/pixi_manifest/"
_WHAT = {"str": "a non-empty string", "any-str": "a string", "version": "a version string",
         "marker": "a PEP 508 environment marker", "bool": "true or false",
         "true": "true", "false": "false", "int": "an integer", "num": "a number", "any": "anything"}


class SchemaError(UserError):
    """A manifest pixi refuses: the key and the rule of pixi's schema it breaks."""


class _Broken(Exception):
    def __init__(self, path: tuple[str, ...], message: str, fix: str | None = None) -> None:
        super().__init__(message)
        self.path, self.message, self.fix = path, message, fix


def _found(value: Any) -> str:
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, str):
        return "an empty string" if value == "" else f"the string {value[:40]!r}"
    if isinstance(value, int):
        return f"the integer {value}"
    if isinstance(value, float):
        return f"the number {value}"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, (datetime.date, datetime.time)):
        return "a date/time"
    return type(value).__name__


def _what(rule: Any) -> str:
    if isinstance(rule, str):
        return _WHAT[rule]
    kind = rule[0]
    if kind == "enum":
        return "one of " + ", ".join(rule[1])
    if kind == "re":
        return str(rule[2])
    if kind == "list":
        return f"a list of {_what(rule[1]).removeprefix('a ').removeprefix('an ')}" + (
            " (at least one)" if len(rule) > 2 else "")
    if kind == "map":
        return "a table"
    if kind == "table":
        return "a table"
    parts = list(dict.fromkeys(_what(r) for r in rule[1:]))
    return " or ".join(parts)


def _shape(rule: Any) -> str:
    """What kind of TOML value a rule takes: string, bool, number, list or table."""
    if isinstance(rule, str):
        return {"str": "string", "any-str": "string", "version": "string", "marker": "string", "bool": "bool",
                "true": "bool",
                "false": "bool", "int": "number", "num": "number", "any": "any"}[rule]
    return {"enum": "string", "re": "string", "list": "list", "map": "table", "table": "table"}.get(rule[0], "or")


def _shape_of(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "list" if isinstance(value, list) else "table" if isinstance(value, dict) else "other"


def _marker_problem(text: str) -> str | None:
    """Why ``text`` is no PEP 508 environment marker (pixi reads ``env-markers`` with uv's marker parser, which
    refuses what packaging's does: an unknown variable, an unquoted value), or None."""
    from packaging.markers import InvalidMarker, Marker

    try:
        Marker(text)
    except InvalidMarker as e:
        return str(e).splitlines()[0]
    return None


def _check(value: Any, rule: Any, path: tuple[str, ...]) -> None:
    if isinstance(rule, str):
        ok = {"str": lambda v: isinstance(v, str) and v != "", "any-str": lambda v: isinstance(v, str),
              "version": lambda v: isinstance(v, str) and v.strip() != "", "bool": lambda v: isinstance(v, bool),
              "true": lambda v: v is True, "false": lambda v: v is False,
              "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
              "num": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
              "marker": lambda v: isinstance(v, str) and _marker_problem(v) is None,
              "any": lambda v: True}[rule](value)
        if ok:
            return
        if rule == "marker" and isinstance(value, str):
            raise _Broken(path, f"{_found(value)} is not an environment marker ({_marker_problem(value)})",
                          "write a PEP 508 marker such as \"sys_platform == 'linux'\"")
        if rule == "version" and isinstance(value, str):
            raise _Broken(path, "an empty version string", "write \"*\" for any version")
        if rule == "true" and path[-1:] == ("workspace",):
            raise _Broken(path, f"`workspace = {_found(value).strip('`')}`: inheritance from the workspace is "
                          "written `{ workspace = true }`, nothing else", "write `{ workspace = true }` or a value")
        raise _Broken(path, f"expected {_what(rule)}, found {_found(value)}")
    kind = rule[0]
    if kind == "enum":
        if value not in rule[1]:
            raise _Broken(path, f"expected {_what(rule)}, found {_found(value)}")
    elif kind == "re":
        if not isinstance(value, str) or not re.search(rule[1], value):
            raise _Broken(path, f"expected {rule[2]}, found {_found(value)}")
    elif kind == "list":
        if not isinstance(value, list):
            raise _Broken(path, f"expected {_what(rule)}, found {_found(value)}")
        if len(rule) > 2 and len(value) < rule[2]:
            raise _Broken(path, "expected at least one item, found an empty list")
        for i, item in enumerate(value):
            _check(item, rule[1], (*path, str(i)))
    elif kind == "map":
        if not isinstance(value, dict):
            raise _Broken(path, f"expected a table, found {_found(value)}")
        for k, v in value.items():
            if k == "":
                raise _Broken((*path, k), "an empty key")
            if len(rule) > 2:
                _check(k, rule[2], (*path, str(k)))
            _check(v, rule[1], (*path, str(k)))
    elif kind == "table":
        _table(value, rule[1], path)
    else:  # "or": the alternatives of the value's own shape decide, the first failure named
        alts = [r for r in rule[1:] if _shape(r) in (_shape_of(value), "any")]
        if not alts:
            raise _Broken(path, f"expected {_what(rule)}, found {_found(value)}")
        first: _Broken | None = None
        for alt in alts:
            try:
                _check(value, alt, path)
                return
            except _Broken as e:
                first = first or e
        assert first is not None
        scalar = all(_shape(a) in ("string", "bool", "number") for a in alts)
        if scalar and len(alts) < len(rule) - 1 and first.message.startswith("expected"):
            # a scalar that fits none: name every alternative, not only those of its shape
            raise _Broken(path, f"expected {_what(rule)}, found {_found(value)}")
        raise first


def _table(value: Any, name: str, path: tuple[str, ...]) -> None:
    spec = TABLES[name]
    if not isinstance(value, dict):
        raise _Broken(path, f"expected a table, found {_found(value)}")
    keys: dict[str, Any] = spec["keys"]
    where = f"[{'.'.join(path)}]" if path else "a pixi manifest"
    for k, v in value.items():
        if k not in keys:
            if spec.get("open"):
                continue
            raise _Broken((*path, str(k)), f"{where} has no key {k!r}",
                          f"remove it or use one of {', '.join(sorted(keys))}")
        _check(v, keys[k], (*path, str(k)))
    for k in spec.get("required", ()):
        if k not in value and not (name == "Workspace"):  # the workspace's channels: lint's EG129
            raise _Broken(path, f"{where} needs `{k}`", f"add `{k} = ...` (see {URL})")


def _beyond_schema(table: dict[str, Any]) -> None:
    """What pixi checks beyond its schema."""
    lists: list[tuple[tuple[str, ...], Any]] = [((k,), table.get(k)) for k in ("workspace", "project")]
    for group in ("feature", "environments"):
        for fname, f in (table.get(group) or {}).items() if isinstance(table.get(group), dict) else ():
            lists.append(((group, str(fname)), f))
    for at, body in lists:
        for i, p in enumerate(body.get("platforms") or [] if isinstance(body, dict) else []):
            where: tuple[str, ...] = (*at, "platforms", str(i))
            if isinstance(p, dict) and not (p.get("platform") or p.get("name")):
                raise _Broken(where, "a platform table names no `platform` (or `name`)",
                              "write `{ name = \"...\", platform = \"linux-64\" }`")
            name = p.get("name") if isinstance(p, dict) else p
            if isinstance(name, str) and name in RESERVED_PLATFORM_NAMES:
                raise _Broken(where, f"{name!r} is a reserved platform name (a target selector)",
                              "name the platform something else, e.g. `linux-cuda`")
            if isinstance(name, str) and len(name.encode()) > MAX_PLATFORM_NAME:
                raise _Broken(where, f"a platform name can not be longer than {MAX_PLATFORM_NAME} bytes")
    pkg = table.get("package")
    if isinstance(pkg, dict) and isinstance(pkg.get("build"), dict):
        build = pkg["build"]
        backend = build.get("backend") if isinstance(build.get("backend"), dict) else {}
        for where, chans in ((("package", "build", "backend", "channels"), backend.get("channels")),
                             (("package", "build", "channels"), build.get("channels"))):
            if chans == []:  # pixi's own check: the backend's dependencies need a channel to come from
                raise _Broken(where, "no channels for the build backend's dependencies",
                              "name one, e.g. `channels = [\"conda-forge\"]`, or drop the key")
    tasks: list[tuple[tuple[str, ...], Any]] = [(("tasks",), table.get("tasks"))]
    for fname, f in (table.get("feature") or {}).items() if isinstance(table.get("feature"), dict) else ():
        tasks.append((("feature", str(fname), "tasks"), f.get("tasks") if isinstance(f, dict) else None))
    for where, body in tasks:
        for tname, task in body.items() if isinstance(body, dict) else ():
            for i, arg in enumerate(task.get("args") or [] if isinstance(task, dict) else []):
                name = arg.get("arg") if isinstance(arg, dict) else arg
                if name in RESERVED_ARG_NAMES:
                    raise _Broken((*where, str(tname), "args", str(i)), f"{name!r} is a reserved argument name",
                                  "rename the argument")
    if not any(isinstance(table.get(k), dict) for k in ("workspace", "project", "package")):
        raise _Broken((), "no [workspace] (or [project], or [package]) table",
                      "add a [workspace] table with `channels` and `platforms`")


def check(table: dict[str, Any], *, pyproject: bool, shown: str, line: Callable[..., int | None],
          prefix: str = "") -> None:
    """Raise :class:`SchemaError` for the first rule ``table`` (the pixi part of the manifest) breaks."""
    try:
        _table(table, "Top", ())
        _beyond_schema(table)
    except _Broken as e:
        path = e.path
        while path and path[-1].isdigit() and not line(*path):  # a list item: the line of its list
            path = path[:-1]
        key = prefix + ".".join(e.path) if e.path else prefix.rstrip(".") or None
        message = e.message.replace("a pixi manifest has", "[tool.pixi] has") if pyproject else e.message
        raise SchemaError(f"{message} (pixi's manifest schema)", file=shown, key=key, line=line(*path),
                          fix=e.fix or f"see {URL}") from None
