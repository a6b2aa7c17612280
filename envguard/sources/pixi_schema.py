"""The parts of pixi's manifest schema (https://pixi.sh/latest/reference/pixi_manifest/, its schema.json)
that decide whether pixi reads a manifest at all: pixi refuses a manifest that breaks them, so envguard
does too, naming the key and the rule, instead of reading a file pixi would not.

Checked: the keys each table may hold (pixi's tables allow no others) and the type of their values,
inheritance from the workspace (``{ workspace = true }``, nothing else), environment names,
platform entries, empty version strings, and a build backend with ``channels = []``. Not checked: task
definitions, activation, pypi-options and the rest of the build-backend tables (envguard reads none of
them). The workspace's required ``channels`` is lint's EG129, a finding rather than a refusal.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from envguard.errors import UserError

TOP = frozenset(("$schema", "activation", "build-dependencies", "constraints", "dependencies", "dev",
                 "environments", "exclude-newer", "feature", "host-dependencies", "package", "project",
                 "pypi-dependencies", "pypi-exclude-newer", "pypi-options", "system-requirements", "target", "tasks",
                 "tool", "workspace"))
WORKSPACE = frozenset(("authors", "build-variants", "build-variants-files", "channel-priority", "channels",
                       "conda-pypi-map", "dependencies", "description", "documentation", "exclude-newer", "homepage",
                       "license", "license-file", "name", "platforms", "preview", "pypi-options", "readme",
                       "repository", "requires-pixi", "s3-options", "solve-strategy", "target", "version"))
FEATURE = frozenset(("activation", "build-dependencies", "channel-priority", "channels", "constraints",
                     "dependencies", "dev", "host-dependencies", "platforms", "pypi-dependencies", "pypi-options",
                     "solve-strategy", "system-requirements", "target", "tasks"))
PACKAGE = frozenset(("authors", "build", "build-dependencies", "description", "documentation", "extra-dependencies",
                     "homepage", "host-dependencies", "license", "license-file", "name", "publish", "readme",
                     "repository", "run-constraints", "run-dependencies", "run-exports", "version"))
ENVIRONMENT = frozenset(("activation", "channel-priority", "channels", "constraints", "dependencies", "dev",
                         "features", "no-default-feature", "platforms", "pypi-dependencies", "pypi-options",
                         "solve-group", "solve-strategy", "target", "tasks"))
TARGET = frozenset(("activation", "build-dependencies", "constraints", "dependencies", "dev", "host-dependencies",
                    "pypi-dependencies", "tasks"))
_ENV_NAME = re.compile(r"^[a-z\d\-]+$")
_PLATFORM_NAME = re.compile(r"^[a-zA-Z][a-zA-Z0-9-]*[a-zA-Z0-9]$|^[a-zA-Z]$")
_DEP_TABLES = ("dependencies", "host-dependencies", "build-dependencies", "pypi-dependencies", "constraints",
               "run-dependencies", "run-constraints")
URL = "https://pixi.sh/latest/reference/pixi_manifest/"
# keys whose value the schema makes a table, or a list, wherever they appear
_TABLES = frozenset(("dependencies", "host-dependencies", "build-dependencies", "pypi-dependencies", "constraints",
                     "run-dependencies", "run-constraints", "target", "feature", "environments",
                     "system-requirements", "workspace", "package", "activation", "tasks", "pypi-options", "build"))
_LISTS = frozenset(("channels", "platforms"))


class SchemaError(UserError):
    """A manifest pixi refuses: the key and the rule of pixi's schema it breaks."""


def check(table: dict[str, Any], *, pyproject: bool, shown: str, line: Callable[..., int | None],  # noqa: C901 - pixi's manifest schema, table by table
          prefix: str = "") -> None:
    """Raise :class:`SchemaError` for the first rule ``table`` (the pixi part of the manifest) breaks."""

    def fail(key: tuple[str, ...], message: str, fix: str = f"see {URL}") -> SchemaError:
        return SchemaError(f"{message} (pixi's manifest schema)", file=shown, key=prefix + ".".join(key),
                           line=line(*key), fix=fix)

    def keys(body: Any, allowed: frozenset[str], where: tuple[str, ...], what: str) -> None:
        if not isinstance(body, dict):
            raise fail(where, f"expected a table, found {type(body).__name__}")
        for k, v in body.items():
            if k not in allowed:
                raise fail(where + (str(k),), f"{what} has no key {k!r}",
                           f"remove it or use one of {', '.join(sorted(allowed))}")
            if k in _TABLES and not isinstance(v, dict):
                raise fail(where + (str(k),), f"`{k}` must be a table, found {type(v).__name__}")
            if k in _LISTS and not isinstance(v, list):
                raise fail(where + (str(k),), f"`{k}` must be a list, found {type(v).__name__}")

    def deps(body: dict[str, Any], where: tuple[str, ...]) -> None:
        for t in _DEP_TABLES:
            entries = body.get(t)
            if not isinstance(entries, dict):
                continue
            for name, value in entries.items():
                if value == "" or name == "":
                    raise fail(where + (t, str(name)), "an empty version string", "write \"*\" for any version")
                if isinstance(value, dict):
                    inherit(value, where + (t, str(name)))

    def inherit(value: Any, where: tuple[str, ...]) -> None:
        if isinstance(value, dict) and "workspace" in value and value.get("workspace") is not True:
            raise fail(where, f"`workspace = {str(value['workspace']).lower()}`: inheritance from the workspace "
                       "is written `{ workspace = true }`, nothing else", "write `{ workspace = true }` or a value")

    def targets(body: dict[str, Any], where: tuple[str, ...], allowed: frozenset[str]) -> None:
        for name, t in (body.get("target") or {}).items() if isinstance(body.get("target"), dict) else ():
            keys(t, allowed, where + ("target", str(name)), f"target table {name!r}")
            deps(t, where + ("target", str(name)))

    keys(table, TOP, (), "[tool.pixi]" if pyproject else "a pixi manifest")
    ws_key = "workspace" if "workspace" in table else ("project" if "project" in table else None)
    if ws_key is not None:
        ws = table[ws_key]
        keys(ws, WORKSPACE, (ws_key,), f"[{ws_key}]")
        for p in ws.get("platforms") or []:
            if isinstance(p, str) and not _PLATFORM_NAME.match(p):
                raise fail((ws_key, "platforms"), f"{p!r} is not a platform name")
            if isinstance(p, dict) and not (p.get("platform") or p.get("name")):
                raise fail((ws_key, "platforms"), "a platform table names no `platform` (or `name`)",
                           "write `{ name = \"...\", platform = \"linux-64\" }`")
    pkg = table.get("package")
    if pkg is not None:
        keys(pkg, PACKAGE, ("package",), "[package]")
        for k in ("name", "version", "license", "description", "homepage", "repository", "documentation",
                  "authors", "readme", "license-file"):
            inherit(pkg.get(k), ("package", k))
        deps(pkg, ("package",))
        build: dict[str, Any] = pkg["build"] if isinstance(pkg.get("build"), dict) else {}
        backend: dict[str, Any] = build["backend"] if isinstance(build.get("backend"), dict) else {}
        for where, chans in ((("package", "build", "backend", "channels"), backend.get("channels")),
                             (("package", "build", "channels"), build.get("channels"))):
            if chans == []:  # pixi's own check: the backend's dependencies need a channel to come from
                raise fail(where, "no channels for the build backend's dependencies",
                           "name one, e.g. `channels = [\"conda-forge\"]`, or drop the key")
        if isinstance(pkg.get("target"), dict):
            for name, t in pkg["target"].items():
                deps(t if isinstance(t, dict) else {}, ("package", "target", str(name)))
    deps(table, ())
    targets(table, (), TARGET)
    for name, body in (table.get("feature") or {}).items() if isinstance(table.get("feature"), dict) else ():
        keys(body, FEATURE, ("feature", str(name)), f"feature {name!r}")
        deps(body, ("feature", str(name)))
        targets(body, ("feature", str(name)), TARGET)
    envs = table.get("environments")
    if isinstance(envs, dict):
        for name, body in envs.items():
            if not _ENV_NAME.match(str(name)):
                raise fail(("environments", str(name)), f"environment name {name!r} is not lower-case letters, "
                           "digits and dashes", "rename it, e.g. `cuda-12`")
            if isinstance(body, dict):
                keys(body, ENVIRONMENT, ("environments", str(name)), f"environment {name!r}")
