"""Where channel names point: conda's channel configuration and pixi's mirrors, read as those tools read them.

Teams on clusters reach conda-forge through a company mirror or proxy, configured once for conda
(``channel_alias``, ``custom_channels``, ``default_channels``, ``mirrored_channels`` in ``.condarc``) or pixi
(``[mirrors]`` in its config.toml). envguard solves with the same routes, so that ``envguard lock`` works
where ``conda`` does, and says which files it used (docs/offline.md).

conda's search order (conda/base/constants.py SEARCH_PATH): the system files, ``$CONDA_ROOT``, the user's
XDG and home files, the active environment's, then ``$CONDARC``; a later file wins for a single value, maps
are merged with the later file's entries winning. ``CONDA_CHANNEL_ALIAS`` and ``CONDA_DEFAULT_CHANNELS``
(comma-separated) override the files, as in conda; ``ENVGUARD_CHANNEL_ALIAS`` (envguard.settings) overrides
them all, for envguard only. Reading only: no file is written, nothing is fetched.

:func:`resolve_channel` is the one place a channel name becomes a URL, for every command (init, lint through
channelfacts, lock, create's downloads): it says which setting decided the URL and which mirrors serve it.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_ALIAS = "https://conda.anaconda.org/"
#: what ``defaults`` means when no default_channels is configured (anaconda's main channel)
DEFAULTS_URL = "https://repo.anaconda.com/pkgs/main"
#: the source of a URL that no configuration decided
BUILT_IN = "built-in"


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


def pixi_config_paths(env: Mapping[str, str], home: Path, project: Path | None = None) -> list[Path]:
    """pixi's config files, lowest priority first (pixi's "configuration of pixi itself": /etc/pixi,
    ~/.config/pixi, $XDG_CONFIG_HOME/pixi, ~/.pixi, $PIXI_HOME, then the project's ``.pixi/config.toml``)."""
    out = [Path("/etc/pixi/config.toml"), home / ".config" / "pixi" / "config.toml"]
    if env.get("XDG_CONFIG_HOME"):
        out.append(Path(env["XDG_CONFIG_HOME"]) / "pixi" / "config.toml")
    out.append(home / ".pixi" / "config.toml")
    if env.get("PIXI_HOME"):
        out.append(Path(env["PIXI_HOME"]) / "config.toml")
    if project is not None:
        out.append(project / ".pixi" / "config.toml")
    return list(dict.fromkeys(out))


@dataclass(frozen=True)
class Resolved:
    """Where a channel name points: ``url``, the setting that decided it (``source``: "~/.condarc:
    custom_channels", "ENVGUARD_CHANNEL_ALIAS", "as written" for a URL, :data:`BUILT_IN`), and the mirrors
    its requests go to, with the setting that named them."""

    url: str
    source: str
    mirrors: tuple[str, ...] = ()
    mirror_source: str | None = None

    def describe(self) -> str:
        """``URL, from SOURCE, mirrored by MIRROR per SOURCE`` for reports; only the URL when nothing
        configured it."""
        parts = [self.url] if self.source in (BUILT_IN, "as written") else [self.url, f"from {self.source}"]
        if self.mirrors:
            parts.append(f"mirrored by {' '.join(self.mirrors)} per {self.mirror_source}")
        return ", ".join(parts)


@dataclass
class ChannelSettings:
    """The merged channel configuration and where each part came from."""

    channel_alias: str = DEFAULT_ALIAS
    custom_channels: dict[str, str] = field(default_factory=dict)  # name -> base URL (the name is appended)
    default_channels: list[str] = field(default_factory=list)  # what `defaults` means
    mirrors: dict[str, list[str]] = field(default_factory=dict)  # channel URL -> mirror URLs, tried in order
    used: list[str] = field(default_factory=list)  # "~/.condarc: channel_alias", one per setting read
    # which setting each value came from: "channel_alias", "default_channels", "custom:NAME", "mirror:URL"
    sources: dict[str, str] = field(default_factory=dict)

    def resolve(self, channel: str) -> Resolved:
        """A channel name as conda resolves it: custom_channels first, else the alias; URLs stay as they are.
        ``defaults`` is the first of default_channels (:meth:`expand` takes them all), else anaconda's main."""
        c = channel.strip()
        if "://" in c or c.startswith(("/", "./", "../", "~")):
            return self._mirrored(c.rstrip("/") if "://" in c else c, "as written")
        if c == "defaults":
            if self.default_channels:
                first = self.resolve(self.default_channels[0])
                return dataclasses.replace(first, source=self.sources.get("default_channels", BUILT_IN))
            return self._mirrored(DEFAULTS_URL, BUILT_IN)
        head = c.split("/", 1)[0]
        if head in self.custom_channels:
            return self._mirrored(self.custom_channels[head].rstrip("/") + "/" + c,
                                  self.sources.get(f"custom:{head}", BUILT_IN))
        return self._mirrored(self.channel_alias.rstrip("/") + "/" + c, self.sources.get("channel_alias", BUILT_IN))

    def _mirrored(self, url: str, source: str) -> Resolved:
        """``url`` with the mirrors of the longest configured channel URL it starts with (rattler's rule)."""
        plain = url.rstrip("/") + "/"
        best = max((k for k in self.mirrors if self.mirrors[k] and plain.startswith(k.rstrip("/") + "/")),
                   key=len, default=None)
        if best is None:
            return Resolved(url, source)
        return Resolved(url, source, tuple(self.mirrors[best]), self.sources.get(f"mirror:{best}", BUILT_IN))

    def url_for(self, channel: str) -> str:
        """:meth:`resolve`'s URL."""
        return self.resolve(channel).url

    def expand(self, channels: list[str]) -> list[str]:
        """``defaults`` replaced by default_channels (when configured), every name made a URL only when the
        configuration changes where it points (so that an unconfigured machine solves exactly as before)."""
        out: list[str] = []
        for c in channels:
            if c == "defaults" and self.default_channels:
                out += [self.url_for(d) for d in self.default_channels]
            elif self.channel_alias.rstrip("/") != DEFAULT_ALIAS.rstrip("/") or \
                    c.split("/", 1)[0] in self.custom_channels:
                out.append(self.url_for(c))
            else:
                out.append(c)
        return out

    def mirror_map(self) -> dict[str, list[str]]:
        """rattler's MirrorMiddleware form: every key and mirror ending in ``/``."""
        return {k.rstrip("/") + "/": [m.rstrip("/") + "/" for m in v] for k, v in self.mirrors.items() if v}


def _read_yaml(p: Path) -> dict[str, Any] | None:
    from envguard.errors import UserError
    from envguard.yamlio import load_fast

    try:  # regular files only, size, nesting and alias limits: a .condarc of "billion laughs" must not hang
        data = load_fast(p)
    except (UserError, OSError, ValueError):
        return None  # conda stops on a broken file; envguard solves as if it were absent, and lint has no say
    return data if isinstance(data, dict) else None


def _read_toml(p: Path) -> dict[str, Any] | None:
    if sys.version_info >= (3, 11):
        import tomllib
    else:
        import tomli as tomllib
    from envguard.safeio import read_small_text

    text = read_small_text(p, 1 << 20)  # pixi's config: a few lines
    try:
        return tomllib.loads(text) if text is not None else None
    except (ValueError, RecursionError):
        return None


def _shown(p: Path, home: Path) -> str:
    try:
        return "~/" + str(p.relative_to(home))
    except ValueError:
        return str(p)


def load(env: Mapping[str, str] | None = None, home: Path | None = None,
         project: Path | None = None) -> ChannelSettings:
    """The channel configuration this user's conda and pixi would use; ``project``: the directory whose
    ``.pixi/config.toml`` counts (default: the current directory)."""
    env = os.environ if env is None else env
    home = Path(env.get("HOME") or Path.home()) if home is None else home
    if project is None:
        try:
            project = Path.cwd()
        except OSError:  # the working directory was removed: no project config to read
            project = None
    cfg = ChannelSettings()

    def note(key: str, where: str) -> None:
        cfg.sources[key] = where
        if where not in cfg.used:
            cfg.used.append(where)

    for p in condarc_paths(env, home):
        data = _read_yaml(p) if p.is_file() else None
        if not data:
            continue
        where = _shown(p, home)
        if isinstance(data.get("channel_alias"), str) and data["channel_alias"].strip():
            cfg.channel_alias = data["channel_alias"].strip()
            note("channel_alias", f"{where}: channel_alias")
        if isinstance(data.get("custom_channels"), dict):
            for k, v in data["custom_channels"].items():
                if v:
                    cfg.custom_channels[str(k)] = str(v)
                    note(f"custom:{k}", f"{where}: custom_channels")
        if isinstance(data.get("default_channels"), list):
            cfg.default_channels = [str(c) for c in data["default_channels"] if c]
            note("default_channels", f"{where}: default_channels")
        if isinstance(data.get("mirrored_channels"), dict):
            for k, v in data["mirrored_channels"].items():
                url = cfg.url_for(str(k))
                cfg.mirrors[url] = [str(m) for m in (v if isinstance(v, list) else [v]) if m]
                note(f"mirror:{url}", f"{where}: mirrored_channels")
    for p in pixi_config_paths(env, home, project):
        data = _read_toml(p) if p.is_file() else None
        if data and isinstance(data.get("mirrors"), dict):
            for k, v in data["mirrors"].items():
                cfg.mirrors[str(k)] = [str(m) for m in (v if isinstance(v, list) else [v]) if m]
                note(f"mirror:{k}", f"{_shown(p, home)}: mirrors")
    if env.get("CONDA_CHANNEL_ALIAS"):
        cfg.channel_alias = env["CONDA_CHANNEL_ALIAS"]
        note("channel_alias", "CONDA_CHANNEL_ALIAS")
    if env.get("CONDA_DEFAULT_CHANNELS"):
        cfg.default_channels = [c.strip() for c in env["CONDA_DEFAULT_CHANNELS"].split(",") if c.strip()]
        note("default_channels", "CONDA_DEFAULT_CHANNELS")
    from envguard import settings

    override = settings.text(settings.CHANNEL_ALIAS, env).strip()
    if override:  # envguard's own, over conda's: for a mirror only envguard is to use
        cfg.channel_alias = override
        note("channel_alias", settings.CHANNEL_ALIAS.name)
    return cfg


def resolve_channel(channel: str, env: Mapping[str, str] | None = None, home: Path | None = None,
                    project: Path | None = None) -> Resolved:
    """The one way envguard turns a channel name into a URL: this user's conda and pixi configuration
    (:func:`load`) applied to it, saying which setting decided and which mirrors serve it."""
    return load(env, home, project).resolve(channel)
