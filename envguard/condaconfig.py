"""Where channel names point: conda's channel configuration and pixi's mirrors, read as those tools read them.

Teams on clusters reach conda-forge through a company mirror or proxy, configured once for conda
(``channel_alias``, ``custom_channels``, ``default_channels``, ``mirrored_channels`` in ``.condarc``) or pixi
(``[mirrors]`` in its config.toml). envguard solves with the same routes, so that ``envguard lock`` works
where ``conda`` does, and says which files it used (docs/offline.md).

conda's search order (conda/base/constants.py SEARCH_PATH): the system files, ``$CONDA_ROOT``, the user's
XDG and home files, the active environment's, then ``$CONDARC``; a later file wins for a single value, maps
are merged with the later file's entries winning. ``CONDA_CHANNEL_ALIAS`` and ``CONDA_DEFAULT_CHANNELS``
(comma-separated) override the files, as in conda. Reading only: no file is written, nothing is fetched.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_ALIAS = "https://conda.anaconda.org/"


def condarc_paths(env: Mapping[str, str], home: Path) -> list[Path]:
    """The candidate files and ``condarc.d`` directories' YAML files, in conda's order (missing ones too)."""
    def trio(base: Path) -> list[Path]:
        d = base / "condarc.d"
        extra = sorted(p for p in d.iterdir() if p.suffix in (".yml", ".yaml")) if d.is_dir() else []
        return [base / ".condarc", base / "condarc", *extra]

    out = trio(Path("/etc/conda")) + trio(Path("/var/lib/conda"))
    if env.get("CONDA_ROOT"):
        out += trio(Path(env["CONDA_ROOT"]))
    xdg = Path(env["XDG_CONFIG_HOME"]) if env.get("XDG_CONFIG_HOME") else home / ".config"
    out += trio(xdg / "conda") + trio(home / ".conda") + [home / ".condarc"]
    if env.get("CONDA_PREFIX"):
        out += trio(Path(env["CONDA_PREFIX"]))
    if env.get("CONDARC"):
        out.append(Path(env["CONDARC"]))
    return out


def pixi_config_paths(env: Mapping[str, str], home: Path) -> list[Path]:
    """pixi's global config files, lowest priority first (its docs: system, XDG, ~/.pixi, $PIXI_HOME)."""
    xdg = Path(env["XDG_CONFIG_HOME"]) if env.get("XDG_CONFIG_HOME") else home / ".config"
    out = [Path("/etc/pixi/config.toml"), xdg / "pixi" / "config.toml", home / ".pixi" / "config.toml"]
    if env.get("PIXI_HOME"):
        out.append(Path(env["PIXI_HOME"]) / "config.toml")
    return out


@dataclass
class ChannelSettings:
    """The merged channel configuration and where each part came from."""

    channel_alias: str = DEFAULT_ALIAS
    custom_channels: dict[str, str] = field(default_factory=dict)  # name -> base URL (the name is appended)
    default_channels: list[str] = field(default_factory=list)  # what `defaults` means
    mirrors: dict[str, list[str]] = field(default_factory=dict)  # channel URL -> mirror URLs, tried in order
    used: list[str] = field(default_factory=list)  # "~/.condarc: channel_alias", one per setting read

    def url_for(self, channel: str) -> str:
        """A channel name as conda resolves it: custom_channels first, else the alias; URLs stay as they are."""
        c = channel.strip()
        if "://" in c or c.startswith(("/", "./", "../", "~")):
            return c
        head = c.split("/", 1)[0]
        if head in self.custom_channels:
            return self.custom_channels[head].rstrip("/") + "/" + c
        return self.channel_alias.rstrip("/") + "/" + c

    def expand(self, channels: list[str]) -> list[str]:
        """``defaults`` replaced by default_channels (when configured), every name made a URL only when the
        configuration changes where it points (so that an unconfigured machine solves exactly as before)."""
        out: list[str] = []
        for c in channels:
            if c == "defaults" and self.default_channels:
                out += [self.url_for(d) for d in self.default_channels]
            elif self.channel_alias != DEFAULT_ALIAS or c.split("/", 1)[0] in self.custom_channels:
                out.append(self.url_for(c))
            else:
                out.append(c)
        return out

    def mirror_map(self) -> dict[str, list[str]]:
        """rattler's MirrorMiddleware form: every key and mirror ending in ``/``."""
        return {k.rstrip("/") + "/": [m.rstrip("/") + "/" for m in v] for k, v in self.mirrors.items() if v}


def _read_yaml(p: Path) -> dict[str, Any] | None:
    import yaml

    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except (OSError, ValueError, yaml.YAMLError):
        return None  # conda stops on a broken file; envguard solves as if it were absent, and lint has no say
    return data if isinstance(data, dict) else None


def _read_toml(p: Path) -> dict[str, Any] | None:
    if sys.version_info >= (3, 11):
        import tomllib
    else:
        import tomli as tomllib
    try:
        return tomllib.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _shown(p: Path, home: Path) -> str:
    try:
        return "~/" + str(p.relative_to(home))
    except ValueError:
        return str(p)


def load(env: Mapping[str, str] | None = None, home: Path | None = None) -> ChannelSettings:
    """The channel configuration this user's conda and pixi would use."""
    env = os.environ if env is None else env
    home = Path(env.get("HOME") or Path.home()) if home is None else home
    cfg = ChannelSettings()
    for p in condarc_paths(env, home):
        data = _read_yaml(p) if p.is_file() else None
        if not data:
            continue
        where = _shown(p, home)
        if isinstance(data.get("channel_alias"), str) and data["channel_alias"].strip():
            cfg.channel_alias = data["channel_alias"].strip()
            cfg.used.append(f"{where}: channel_alias")
        if isinstance(data.get("custom_channels"), dict):
            cfg.custom_channels.update({str(k): str(v) for k, v in data["custom_channels"].items() if v})
            cfg.used.append(f"{where}: custom_channels")
        if isinstance(data.get("default_channels"), list):
            cfg.default_channels = [str(c) for c in data["default_channels"] if c]
            cfg.used.append(f"{where}: default_channels")
        if isinstance(data.get("mirrored_channels"), dict):
            for k, v in data["mirrored_channels"].items():
                mirrors = [str(m) for m in (v if isinstance(v, list) else [v]) if m]
                cfg.mirrors[cfg.url_for(str(k))] = mirrors
            cfg.used.append(f"{where}: mirrored_channels")
    for p in pixi_config_paths(env, home):
        data = _read_toml(p) if p.is_file() else None
        if data and isinstance(data.get("mirrors"), dict):
            for k, v in data["mirrors"].items():
                cfg.mirrors[str(k)] = [str(m) for m in (v if isinstance(v, list) else [v]) if m]
            cfg.used.append(f"{_shown(p, home)}: mirrors")
    if env.get("CONDA_CHANNEL_ALIAS"):
        cfg.channel_alias = env["CONDA_CHANNEL_ALIAS"]
        cfg.used.append("CONDA_CHANNEL_ALIAS")
    if env.get("CONDA_DEFAULT_CHANNELS"):
        cfg.default_channels = [c.strip() for c in env["CONDA_DEFAULT_CHANNELS"].split(",") if c.strip()]
        cfg.used.append("CONDA_DEFAULT_CHANNELS")
    return cfg
