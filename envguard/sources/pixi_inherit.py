"""What pixi reads against the workspace: ``{ workspace = true }`` and a build backend's location.

pixi resolves an entry written ``{ workspace = true }`` against the workspace's ``[workspace.dependencies]``
(crates/pixi_manifest/src/utils/inheritable_package_map.rs): a name the workspace does not define is refused,
and the workspace owns the version and the source location (``version``, ``path``, ``git`` and ``url`` beside
``workspace = true`` are refused on a build backend). A build backend is a binary package: a ``path``, ``git``
or ``url`` that names a source tree rather than a package file is refused ("build backends cannot be defined
as source dependencies"). A member manifest (``[package]`` alone) is judged against the workspace pixi finds
above it; with none found there is nothing to judge against, and the reader says so in a note.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from envguard.errors import UserError

_PACKAGE_FILES = (".conda", ".tar.bz2")
_OWNED = ("version", "path", "git", "url")  # the workspace's on an inherited backend
# the tables whose entries may inherit: a package's, and (pixi >= 0.73) the environment tables
_PACKAGE_TABLES = ("run-dependencies", "host-dependencies", "build-dependencies", "run-constraints",
                   "build-constraints")
_ENV_TABLES = ("dependencies", "host-dependencies", "build-dependencies", "constraints")


def _refuse(shown: str, key: str, message: str, fix: str, line: int | None) -> UserError:
    return UserError(f"{message}; pixi refuses the manifest", file=shown, key=key, line=line, fix=fix)


def workspace_dependencies(table: dict[str, Any], shown: str) -> dict[str, Any] | None:
    """``[workspace.dependencies]`` of this manifest's workspace: its own, or, for a ``[package]`` member, that of
    the workspace pixi finds above it; None when there is no workspace to read it from."""
    from envguard.sources.pixi_manifest import find_workspace, is_package_only, pixi_table

    if not is_package_only(table):
        ws = table.get("workspace") if isinstance(table.get("workspace"), dict) else table.get("project")
        deps = ws.get("dependencies") if isinstance(ws, dict) else None
        return deps if isinstance(deps, dict) else {}
    found = find_workspace(Path(shown).parent / "pixi.toml")
    if found is None:
        return None
    from envguard.sources.toml_text import parse_toml
    from envguard.yamlio import read_text

    try:
        outer = pixi_table(parse_toml(read_text(found), str(found))) or {}
    except (UserError, OSError):
        return None  # the workspace is pixi's to refuse when it is read itself
    ws = outer.get("workspace") if isinstance(outer.get("workspace"), dict) else outer.get("project")
    deps = ws.get("dependencies") if isinstance(ws, dict) else None
    return deps if isinstance(deps, dict) else {}


def resolve(name: str, value: Any, ws_deps: dict[str, Any] | None) -> Any:
    """The spec an entry stands for: an inherited one is the workspace's, with the entry's other keys over it."""
    if not (isinstance(value, dict) and value.get("workspace") is True) or not ws_deps or name not in ws_deps:
        return value
    base = ws_deps[name]
    merged: dict[str, Any] = {"version": base} if isinstance(base, str) else dict(base) if isinstance(base, dict) \
        else {}
    merged.update({k: v for k, v in value.items() if k != "workspace"})
    return merged


def _is_source(spec: dict[str, Any]) -> bool:
    """Whether a spec's location is a source tree (pixi builds it) rather than a package file."""
    if "git" in spec:
        return True
    where = spec.get("path") or spec.get("url")
    return isinstance(where, str) and not where.split("#", 1)[0].split("?", 1)[0].endswith(_PACKAGE_FILES)


def check(table: dict[str, Any], shown: str, line: Callable[..., int | None], prefix: str = "") -> None:
    """Refuse what pixi refuses when it reads the manifest against its workspace (see the module's text)."""
    ws_deps = workspace_dependencies(table, shown)
    places: list[tuple[tuple[str, ...], Any]] = []
    pkg = table.get("package") if isinstance(table.get("package"), dict) else None
    if pkg is not None:
        places += [(("package", t), pkg.get(t)) for t in _PACKAGE_TABLES]
        for sel, body in (pkg.get("target") or {}).items() if isinstance(pkg.get("target"), dict) else ():
            if isinstance(body, dict):
                places += [(("package", "target", str(sel), t), body.get(t)) for t in _PACKAGE_TABLES]
    places += [((t,), table.get(t)) for t in _ENV_TABLES]
    for name, body in (table.get("feature") or {}).items() if isinstance(table.get("feature"), dict) else ():
        if isinstance(body, dict):
            places += [(("feature", str(name), t), body.get(t)) for t in _ENV_TABLES]
    if ws_deps is not None:
        for where, deps in places:
            for name, value in (deps or {}).items() if isinstance(deps, dict) else ():
                if isinstance(value, dict) and value.get("workspace") is True and name not in ws_deps:
                    key = ".".join((*where, str(name)))
                    raise _refuse(shown, prefix + key, f"`{{ workspace = true }}`, but the workspace does not "
                                  f"define `{name}` in [workspace.dependencies]",
                                  f"add `{name}` to [workspace.dependencies] in the workspace manifest, or give "
                                  "its version here", line(*where, str(name)))
    backend = ((pkg or {}).get("build") or {}).get("backend") if isinstance((pkg or {}).get("build"), dict) else None
    if not isinstance(backend, dict):
        return
    where = ("package", "build", "backend")
    name = str(backend.get("name") or "")
    spec = backend
    if backend.get("workspace") is True:
        owned = next((k for k in _OWNED if k in backend), None)
        if owned:
            raise _refuse(shown, prefix + ".".join((*where, owned)), f"`{owned}` is mutually exclusive with "
                          "`workspace`: an inherited backend's version and location are the workspace's",
                          f"remove `{owned}`, or `workspace = true`", line(*where, owned))
        if ws_deps is not None and name not in ws_deps:
            raise _refuse(shown, prefix + ".".join((*where, "workspace")), f"`workspace = true`, but the workspace "
                          f"does not define the backend `{name}` in [workspace.dependencies]",
                          f"add `{name}` to [workspace.dependencies] in the workspace manifest",
                          line(*where, "workspace"))
        spec = resolve(name, backend, ws_deps)
    if isinstance(spec, dict) and _is_source(spec):
        loc = next(k for k in ("git", "path", "url") if k in spec)
        raise _refuse(shown, prefix + ".".join((*where, loc)), f"`{loc} = {spec[loc]!r}` names a source, and build "
                      "backends cannot be defined as source dependencies (a backend is a package pixi installs)",
                      "point it at a built package file (`.conda` or `.tar.bz2`), or give a `version` from a "
                      "channel", line(*where, loc))


__all__ = ["check", "resolve", "workspace_dependencies"]
