"""pixi manifests: ``pixi.toml`` and a ``pyproject.toml`` with ``[tool.pixi]``. What each environment asks for.

Read with a real TOML 1.1 parser (``tomli`` >= 2.4, as pixi reads TOML 1.1). A manifest holds:

* a workspace table (``[workspace]``, or ``[project]`` in older pixi.toml files; ``[tool.pixi.workspace]``
  in a pyproject.toml): ``channels`` (names, URLs or ``{channel, priority}`` tables) and ``platforms``
  (subdirs, or ``{name, platform, cuda}`` tables that give a platform a name of its own);
* the default feature: ``[dependencies]`` (with ``[host-dependencies]`` and ``[build-dependencies]``,
  installed too), ``[pypi-dependencies]``, ``[system-requirements]`` (``cuda``, ``libc``, ``macos``);
  in a pyproject.toml also ``[project].dependencies`` (PyPI) and ``requires-python`` (the python
  dependency when none is written);
* ``[feature.NAME.*]`` with the same tables plus its own ``channels`` and ``platforms``;
  ``[target.PLATFORM.*]`` (a platform, its custom name, or a selector: ``linux``, ``osx``, ``win``,
  ``unix``) narrows a table to some platforms, at the top level or inside a feature;
* ``[environments]``: ``NAME = [features]`` or ``{features, solve-group, no-default-feature}``. The
  ``default`` environment is the default feature alone unless it is redefined there.

An environment's platforms are the workspace's, narrowed by every feature that names its own; its
channels are the workspace's plus its features'. Lines are found by a small scan of the text (the TOML
parser keeps none), so lint can name ``pixi.toml:LINE``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envguard.errors import UserError
from envguard.model import Manager
from envguard.platforms import SELECTOR_PLATFORMS
from envguard.redact import redact
from envguard.sources import Description, RequestedSpec
from envguard.sources.pixi_names import satisfied_by_pixi
from envguard.sources.toml_text import parse_toml

_DEP_TABLES = ("dependencies", "host-dependencies", "build-dependencies")
DEFAULT = "default"


def _table(value: Any) -> dict[str, Any]:
    """``value`` when it is a TOML table, else an empty one."""
    return value if isinstance(value, dict) else {}


def pixi_table(data: Any) -> dict[str, Any] | None:
    """The pixi part of a parsed TOML file: the whole pixi.toml, or pyproject's ``[tool.pixi]``; else None."""
    if not isinstance(data, dict):
        return None
    tool = data.get("tool")
    if isinstance(tool, dict) and isinstance(tool.get("pixi"), dict):
        return tool["pixi"]
    ws = data.get("workspace")
    if not isinstance(ws, dict):
        ws = data.get("project") if "build-system" not in data else None  # pyproject's [project] is PEP 621
    if isinstance(ws, dict) and ("channels" in ws or "platforms" in ws):
        return data
    if isinstance(data.get("package"), dict) and "build-system" not in data:  # a workspace member's manifest
        return data
    return None


def is_package_only(table: dict[str, Any]) -> bool:
    """A ``[package]`` manifest without a workspace of its own: a member of a workspace further up."""
    return isinstance(table.get("package"), dict) and not any(isinstance(table.get(k), dict)
                                                               for k in ("workspace", "project"))


def find_workspace(start: Path) -> Path | None:
    """The manifest of the workspace a member in ``start`` belongs to, as pixi finds it: the nearest parent
    directory with a ``pixi.toml`` that has a workspace table, or a ``pyproject.toml`` with
    ``[tool.pixi.workspace]``."""
    for folder in list(start.resolve().parents):
        for name in ("pixi.toml", "pyproject.toml"):
            candidate = folder / name
            if not candidate.is_file():
                continue
            try:
                data = parse_toml(candidate.read_text(encoding="utf-8"), str(candidate))
            except (UserError, OSError, UnicodeDecodeError):
                continue
            table = pixi_table(data)
            if table is not None and not is_package_only(table):
                return candidate
    return None


def is_manifest(data: Any) -> bool:
    return pixi_table(data) is not None


# --------------------------------------------------------------------------- lines


def _key_parts(text: str) -> list[str]:
    parts, buf, quote = [], "", ""
    for ch in text:
        if quote:
            if ch == quote:
                quote = ""
            else:
                buf += ch
        elif ch in "\"'":
            quote = ch
        elif ch == ".":
            parts.append(buf.strip())
            buf = ""
        else:
            buf += ch
    parts.append(buf.strip())
    return [p for p in parts if p]


def toml_lines(text: str) -> dict[tuple[str, ...], int]:
    """1-based line of every table header and ``key =`` line, by its full key path."""
    out: dict[tuple[str, ...], int] = {}
    table: tuple[str, ...] = ()
    in_string = False
    for n, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if line.count('"""') % 2 == 1 or line.count("'''") % 2 == 1:
            in_string = not in_string
            if not in_string:
                continue
        if in_string or not line or line.startswith("#"):
            continue
        m = re.match(r"^\[\[?([^\[\]]+)\]\]?\s*(#.*)?$", line)
        if m:
            table = tuple(_key_parts(m.group(1)))
            out.setdefault(table, n)
            continue
        m = re.match(r"""^((?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*')(?:\s*\.\s*(?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*'))*)\s*=""",
                     line)
        if m:
            out.setdefault(table + tuple(_key_parts(m.group(1))), n)
    return out


# --------------------------------------------------------------------------- the model


@dataclass
class ManifestDep:
    name: str
    manager: Manager
    spec: str  # as a match spec / PEP 508 requirement: "pytorch >=2.5 cuda12*", "torch>=2.0"
    version: str | None  # the version constraint as written ("*" or None for any)
    build: str | None
    channel: str | None
    platforms: tuple[str, ...] | None  # from a target table: only these platform names; None = all
    line: int | None
    feature: str  # "default" or the feature's name
    source: bool = False  # git/path/url: built from a source, no version to check
    # a pyproject's [project] dependency: pixi installs it from conda when a conda dependency provides it
    # (the conda-PyPI name mapping), from PyPI only otherwise; it stays for the package's own metadata
    pep621: bool = False


@dataclass
class Feature:
    name: str
    deps: list[ManifestDep] = field(default_factory=list)
    channels: list[str] | None = None
    platforms: list[str] | None = None
    system: dict[str, str] = field(default_factory=dict)  # system-requirements
    system_line: int | None = None


@dataclass
class Environment:
    name: str
    features: list[Feature]
    platforms: tuple[str, ...]
    channels: tuple[str, ...]
    line: int | None = None

    @property
    def deps(self) -> list[ManifestDep]:
        return [d for f in self.features for d in f.deps]

    @property
    def system(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for f in self.features:
            out.update(f.system)
        return out

    @property
    def system_line(self) -> int | None:
        return next((f.system_line for f in reversed(self.features) if f.system_line), None)


@dataclass
class Manifest:
    path: str
    prefix: tuple[str, ...]  # ("tool", "pixi") in a pyproject.toml
    channels: list[tuple[str, int | None]]  # workspace channels and their lines
    platforms: dict[str, str]  # platform name -> subdir
    features: dict[str, Feature]
    environments: dict[str, Environment]
    workspace_line: int | None
    notes: list[str] = field(default_factory=list)
    platform_info: dict[str, dict[str, str]] = field(default_factory=dict)
    member: bool = False  # a [package] manifest read alone: no workspace, channels or environments of its own


def _channel_name(value: Any) -> str | None:
    if isinstance(value, dict):
        value = value.get("channel")
    return str(value).strip() if value is not None and str(value).strip() else None


def _bad(shown: str, key: str, message: str, line: int | None = None) -> UserError:
    return UserError(message, file=shown, key=key, line=line,
                     fix="see https://pixi.sh/latest/reference/pixi_manifest/ for the table's shape")


class _Reader:
    def __init__(self, text: str, data: dict[str, Any], shown: str) -> None:
        self.shown = shown
        self.lines = toml_lines(text)
        table = pixi_table(data)
        if table is None:
            raise UserError("not a pixi manifest: no [workspace] with channels, and no [tool.pixi]", file=shown,
                            fix="pass a pixi.toml, or a pyproject.toml with a [tool.pixi] table")
        self.table = table
        self.pyproject = table is not data
        self.prefix: tuple[str, ...] = ("tool", "pixi") if self.pyproject else ()
        self.data = data
        self.notes: list[str] = []
        from envguard.sources.pixi_schema import check

        check(table, pyproject=self.pyproject, shown=shown, line=self.line,
              prefix="tool.pixi." if self.pyproject else "")
        from envguard.sources import pixi_inherit

        # { workspace = true } and a build backend's location, read against the workspace as pixi reads them
        pixi_inherit.check(table, shown, self.line, "tool.pixi." if self.pyproject else "")
        self.ws_deps = pixi_inherit.workspace_dependencies(table, shown)

    def line(self, *key: str) -> int | None:
        path = self.prefix + key
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return None

    def _platform_names(self, subdir_of: dict[str, str], key: str) -> tuple[str, ...]:
        """The platform names a target key means: a name, a subdir, or a selector (linux, osx, win, unix)."""
        if key in subdir_of:
            return (key,)
        by_subdir = tuple(n for n, s in subdir_of.items() if s == key)
        if by_subdir:
            return by_subdir
        plats = SELECTOR_PLATFORMS.get(key)
        if plats is not None:
            return tuple(n for n, s in subdir_of.items() if s in plats)
        return (key,)

    def _deps(self, tables: dict[str, Any], where: tuple[str, ...], feature: str,
              platforms: tuple[str, ...] | None) -> list[ManifestDep]:
        out: list[ManifestDep] = []
        for table in (*_DEP_TABLES, "pypi-dependencies"):
            entries = tables.get(table)
            if entries is None:
                continue
            if not isinstance(entries, dict):
                raise _bad(self.shown, ".".join(self.prefix + where + (table,)),
                           f"expected a table of packages, found {type(entries).__name__}",
                           self.line(*where, table))
            for name, value in entries.items():
                line = self.line(*where, table, str(name))
                out.append(self._dep(str(name), value, "pip" if table == "pypi-dependencies" else "conda",
                                     line, feature, platforms, where + (table,)))
        return out

    def _dep(self, name: str, value: Any, manager: Manager, line: int | None, feature: str,
             platforms: tuple[str, ...] | None, where: tuple[str, ...]) -> ManifestDep:
        key = ".".join(self.prefix + where + (name,))
        from envguard.sources.pixi_inherit import resolve

        value = resolve(name, value, self.ws_deps)  # { workspace = true }: the workspace's spec
        version: str | None
        build = channel = None
        source = False
        extras = ""
        if isinstance(value, str):
            version = value.strip()
        elif isinstance(value, dict):
            version = value.get("version")
            version = str(version).strip() if version is not None else None
            build = str(value["build"]).strip() if value.get("build") is not None else None
            channel = _channel_name(value.get("channel"))
            source = any(k in value for k in ("git", "path", "url"))
            if isinstance(value.get("extras"), list):
                extras = "[" + ",".join(str(e) for e in value["extras"]) + "]"
        else:
            raise _bad(self.shown, key, f"expected a version string or a table, found {type(value).__name__}", line)
        any_version = version in (None, "", "*")
        if manager == "conda":
            version = re.sub(r"\s+", "", version) if version else version  # ">=1.5, <3": spaces mean nothing
            parts = [name, version if not any_version else ("*" if build else "")]
            spec = " ".join(p for p in parts + [build or ""] if p)
        elif source:
            src = value.get("git") or value.get("url") or value.get("path")
            spec = f"{name}{extras} @ {redact(str(src))}"
        else:
            pin = "" if any_version or version is None else version if version[:1] in "<>=!~" else "==" + version
            spec = f"{name}{extras}{pin}"
        marker = value.get("env-markers") if manager == "pip" and isinstance(value, dict) else None
        if isinstance(marker, str) and marker.strip():
            spec = f"{spec} ; {marker.strip()}"  # pixi's env-markers is the requirement's PEP 508 marker
        return ManifestDep(name=name, manager=manager, spec=spec, version=None if any_version else version,
                           build=build, channel=channel, platforms=platforms, line=line, feature=feature,
                           source=source)

    def _feature(self, name: str, body: dict[str, Any], where: tuple[str, ...],
                 subdir_of: dict[str, str]) -> Feature:
        f = Feature(name=name)
        f.deps = self._deps(body, where, name, None)
        for target_key, tables in (body.get("target") or {}).items():
            if not isinstance(tables, dict):
                continue
            plats = self._platform_names(subdir_of, str(target_key))
            f.deps += self._deps(tables, where + ("target", str(target_key)), name, plats)
        chans = body.get("channels")
        if isinstance(chans, list):
            f.channels = [c for c in (_channel_name(x) for x in chans) if c]
        listed = body.get("platforms")
        if isinstance(listed, list):
            f.platforms = [str(p.get("name") or p.get("platform")) if isinstance(p, dict) else str(p) for p in listed]
        sysreq = body.get("system-requirements")
        if isinstance(sysreq, dict):
            f.system = {str(k): str(v.get("version") if isinstance(v, dict) else v) for k, v in sysreq.items()}
            f.system_line = self.line(*where, "system-requirements", "cuda") or self.line(*where, "system-requirements")
        return f

    def _package_alone(self) -> Manifest:
        """A ``[package]`` manifest read on its own: what the package needs at run time is what it asks for."""
        pkg = self.table["package"]
        default = Feature(name=DEFAULT)
        run = {"dependencies": pkg.get("run-dependencies") or {}}
        for name, value in run["dependencies"].items():
            default.deps.append(self._dep(str(name), value, "conda", self.line("package", "run-dependencies",
                                                                              str(name)),
                                          DEFAULT, None, ("package", "run-dependencies")))
        for target_key, tables in (pkg.get("target") or {}).items():
            if isinstance(tables, dict) and isinstance(tables.get("run-dependencies"), dict):
                for name, value in tables["run-dependencies"].items():
                    where = ("package", "target", str(target_key), "run-dependencies")
                    default.deps.append(self._dep(str(name), value, "conda", self.line(*where, str(name)), DEFAULT,
                                                  self._platform_names({}, str(target_key)), where))
        self.notes.append("a package manifest ([package]) with no workspace found above it: read alone, its "
                          "[package.run-dependencies] as what it asks for (pixi itself needs the workspace)")
        env = Environment(DEFAULT, [default], (), (), None)
        return Manifest(path=self.shown, prefix=self.prefix, channels=[], platforms={}, features={DEFAULT: default},
                        environments={DEFAULT: env}, workspace_line=self.line("package"), notes=self.notes,
                        member=True)

    def read(self) -> Manifest:
        t = self.table
        if is_package_only(t):
            return self._package_alone()
        ws_key = "workspace" if isinstance(t.get("workspace"), dict) else "project"
        ws = _table(t.get(ws_key))
        chans = ws.get("channels")
        if chans is not None and not isinstance(chans, list):
            raise _bad(self.shown, f"{ws_key}.channels", "expected a list of channels", self.line(ws_key, "channels"))
        channels = [(c, self.line(ws_key, "channels")) for c in (_channel_name(x) for x in chans or []) if c]
        subdir_of: dict[str, str] = {}
        self.platform_info: dict[str, dict[str, str]] = {}
        for p in ws.get("platforms") or []:
            if isinstance(p, dict):
                sub = str(p.get("platform") or p.get("subdir") or p.get("name") or "")
                if sub:
                    name = str(p.get("name") or sub)
                    subdir_of[name] = sub
                    self.platform_info[name] = {"subdir": sub, **{k: str(p[k]) for k in ("cuda", "macos") if k in p}}
            else:
                subdir_of[str(p)] = str(p)
                self.platform_info[str(p)] = {"subdir": str(p)}
        default = self._feature(DEFAULT, t, (), subdir_of)
        if self.pyproject:
            default.deps += self._pyproject_deps()
        features = {DEFAULT: default}
        for name, body in (t.get("feature") or {}).items():
            if isinstance(body, dict):
                features[str(name)] = self._feature(str(name), body, ("feature", str(name)), subdir_of)
        if self.pyproject:
            for name, reqs in self._optional_groups().items():
                features.setdefault(name, Feature(name=name)).deps += reqs
        envs: dict[str, Environment] = {}
        defs = t.get("environments") or {}
        if not isinstance(defs, dict):
            raise _bad(self.shown, "environments", "expected a table of environments", self.line("environments"))
        if DEFAULT not in defs:
            defs = {DEFAULT: [], **defs}
        for env_name, spec in defs.items():
            names: list[str]
            no_default = False
            if isinstance(spec, list):
                names = [str(x) for x in spec]
            elif isinstance(spec, dict):
                names = [str(x) for x in spec.get("features") or []]
                no_default = bool(spec.get("no-default-feature"))
            else:
                raise _bad(self.shown, f"environments.{env_name}", "expected a list of features or a table",
                           self.line("environments", str(env_name)))
            missing = [n for n in names if n not in features]
            if missing:
                raise _bad(self.shown, f"environments.{env_name}",
                           f"uses feature {missing[0]!r}, which the manifest does not define",
                           self.line("environments", str(env_name)))
            chosen = ([] if no_default else [default]) + [features[n] for n in names if n != DEFAULT]
            plats = list(subdir_of)
            for f in chosen:
                if f.platforms is not None:
                    plats = [p for p in plats if p in f.platforms]
            chan_list = [c for c, _ in channels]
            for f in chosen:
                for c in f.channels or []:
                    if c not in chan_list:
                        chan_list.append(c)
            envs[str(env_name)] = Environment(str(env_name), chosen, tuple(plats), tuple(chan_list),
                                              self.line("environments", str(env_name)))
        return Manifest(path=self.shown, prefix=self.prefix, channels=channels, platforms=subdir_of,
                        features=features, environments=envs, workspace_line=self.line(ws_key), notes=self.notes,
                        platform_info=self.platform_info)

    def _pyproject_deps(self) -> list[ManifestDep]:
        """PEP 621 ``dependencies`` (PyPI) and ``requires-python`` (python, unless pixi's tables name it)."""
        project = _table(self.data.get("project"))
        out = [self._pep508(req, ("project", "dependencies"), DEFAULT) for req in project.get("dependencies") or []]
        pixi_deps = self.table.get("dependencies") or {}
        rp = project.get("requires-python")
        if rp and "python" not in pixi_deps:
            from packaging.specifiers import InvalidSpecifier, SpecifierSet

            try:  # PEP 440 (">= 3.11", ">=3.10, <3.13"): the conda spec pixi makes of it has no spaces
                rp = ",".join(str(s) for s in SpecifierSet(str(rp)))
            except InvalidSpecifier:
                raise _bad(self.shown, "project.requires-python", f"{str(rp)!r} is not a PEP 440 version specifier",
                           self.lines.get(("project", "requires-python"))) from None
            out.append(ManifestDep(name="python", manager="conda", spec=f"python {rp}", version=str(rp), build=None,
                                   channel=None, platforms=None, line=self.lines.get(("project", "requires-python")),
                                   feature=DEFAULT))
        return [d for d in out if d is not None]

    def _optional_groups(self) -> dict[str, list[ManifestDep]]:
        project = _table(self.data.get("project"))
        groups: dict[str, list[ManifestDep]] = {}
        for table, where in ((project.get("optional-dependencies"), ("project", "optional-dependencies")),
                             (self.data.get("dependency-groups"), ("dependency-groups",))):
            if not isinstance(table, dict):
                continue
            for name, reqs in table.items():
                for req in reqs if isinstance(reqs, list) else []:
                    d = self._pep508(req, where + (str(name),), str(name)) if isinstance(req, str) else None
                    if d is not None:
                        groups.setdefault(str(name), []).append(d)
        return groups

    def _pep508(self, req: Any, where: tuple[str, ...], feature: str) -> ManifestDep | None:
        from packaging.requirements import InvalidRequirement, Requirement

        try:
            r = Requirement(str(req))
        except InvalidRequirement:
            self.notes.append(f"{'.'.join(where)}: skipped {redact(str(req))!r} (not a PEP 508 requirement)")
            return None
        return ManifestDep(name=r.name, manager="pip", spec=redact(str(req)), version=str(r.specifier) or None,
                           build=None, channel=None, platforms=None, line=self.lines.get(where), feature=feature,
                           source=r.url is not None, pep621=True)


def parse_manifest(text: str, data: Any, shown: str) -> Manifest:
    return _Reader(text, data, shown).read()


def read_manifest(text: str, data: Any, shown: str, *, environment: str | None = None,
                  base_dir: Path | None = None) -> Description:
    """The requested specs of one environment (``default`` unless named) as a spec side for diff.

    A workspace member (a ``[package]`` manifest) is read as its workspace, found the way pixi finds it from
    ``base_dir``; with none found, alone (a note says which)."""
    table = pixi_table(data)
    if table is not None and is_package_only(table) and base_dir is not None:
        ws = find_workspace(base_dir / "pixi.toml")
        if ws is not None:
            from envguard.yamlio import read_text

            ws_text = read_text(ws)
            whole = read_manifest(ws_text, parse_toml(ws_text, redact(str(ws))), redact(str(ws)),
                                  environment=environment)
            whole.notes.insert(0, f"{shown} is a package of the workspace {redact(str(ws))}: its environments are read")
            return whole
    m = parse_manifest(text, data, shown)
    names = tuple(m.environments)
    env_name = environment or DEFAULT
    if env_name not in m.environments:
        raise UserError(f"no environment {env_name!r} (it has {', '.join(names)})", file=shown,
                        key="environments", fix="pick one of those with --environment")
    env = m.environments[env_name]
    requested: list[RequestedSpec] = []
    for d in satisfied_by_pixi(env.deps):  # what pixi takes from conda is asked for once, from conda
        plats = None if d.platforms is None else tuple(p for p in d.platforms if p in env.platforms)
        requested.append(RequestedSpec(name=d.name, spec=redact(d.spec), manager=d.manager,
                                       channel=d.channel, platforms=plats, line=d.line))
    return Description(kind="pixi-manifest", path=shown, requested=requested, declared_platforms=env.platforms,
                       environments=names, environment=env_name, notes=list(m.notes), platform_info=m.platform_info)


__all__ = [
    "Environment",
    "Feature",
    "Manifest",
    "ManifestDep",
    "find_workspace",
    "is_manifest",
    "is_package_only",
    "parse_manifest",
    "pixi_table",
    "read_manifest",
    "satisfied_by_pixi",
    "toml_lines",
]
