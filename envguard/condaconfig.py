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
#: the schemes rattler's HTTP client fetches a mirror over (its OCI, GCS and S3 middlewares included); a
#: ``file://`` mirror is a folder that rattler's gateway reads itself, as it reads a local channel
CLIENT_SCHEMES = ("http", "https", "oci", "gcs", "s3")
#: ``custom_metadata`` key of a conda-lock file (CEP 37: a tool's own keys live there) + a channel's name:
#: the URL its packages were locked from when that is not the URL the name means on a machine without
#: channel configuration (a mirror, custom_channels, channel_alias), so that whoever reads the lock
#: knows those URLs are that channel's
LOCK_MIRROR_KEY = "envguard.mirror."


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
    #: the channel's URL on each mirror (the mirror's base with the channel's path below the mirrored URL)
    mirror_urls: tuple[str, ...] = ()

    @property
    def local(self) -> str | None:
        """The folder (``file://``) this channel is read from when its mirror is one: rattler's HTTP client
        refuses that scheme ("URL scheme is not allowed"), its gateway reads the folder as a local channel."""
        first = self.mirror_urls[0] if self.mirror_urls else ""
        return first if first.lower().startswith("file://") else None

    @property
    def read_from(self) -> str:
        """The URL a solve reads the channel from, and so the URLs its records carry."""
        return self.local or self.url

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
        mirrors = self._usable(best)
        rest = plain[len(best.rstrip("/") + "/"):].rstrip("/")
        urls = tuple(m.rstrip("/") + ("/" + rest if rest else "") for m in mirrors)
        return Resolved(url, source, mirrors, self.sources.get(f"mirror:{best}", BUILT_IN), urls)

    def _usable(self, key: str) -> tuple[str, ...]:
        """The mirrors of ``key``, refused in one line (exit 2) where rattler cannot use them: a scheme its
        client has no handler for, or a ``file://`` folder beside other mirrors (the folder is read in the
        channel's place, so there is nothing to fall back to or from)."""
        from envguard.errors import UserError
        from envguard.redact import redact

        mirrors = tuple(self.mirrors[key])
        where, _, setting = self.sources.get(f"mirror:{key}", BUILT_IN).rpartition(": ")
        for m in mirrors:
            scheme = m.split("://", 1)[0].lower() if "://" in m else ""
            if scheme == "file" and len(mirrors) > 1:
                raise UserError(f"the mirrors of {redact(key)} mix a file:// folder ({redact(m)}) with others: "
                                "a folder is read in the channel's place, with no other mirror to fall back on",
                                file=where or None, key=setting or None,
                                fix=f"list {redact(m)} alone, or only network mirrors, for {redact(key)}")
            if scheme not in (*CLIENT_SCHEMES, "file"):
                raise UserError(f"mirror {redact(m)} of {redact(key)}: rattler reads mirrors over "
                                f"{', '.join(CLIENT_SCHEMES)} or from a file:// folder, not {scheme or 'a bare path'}",
                                file=where or None, key=setting or None,
                                fix=f"write the mirror as https://... or file://{'/' if scheme else ''}... "
                                    f"(an absolute folder)")
        return mirrors

    def url_for(self, channel: str) -> str:
        """:meth:`resolve`'s URL."""
        return self.resolve(channel).url

    def expand(self, channels: list[str]) -> list[str]:
        """``defaults`` replaced by default_channels (when configured), every name made a URL only when the
        configuration changes where it points (so that an unconfigured machine solves exactly as before);
        a channel mirrored by a ``file://`` folder is read from that folder."""
        out: list[str] = []
        for c in channels:
            if c == "defaults" and self.default_channels:
                out += [self.resolve(d).read_from for d in self.default_channels]
                continue
            r = self.resolve(c)
            if r.local:
                out.append(r.local)
            elif self.channel_alias.rstrip("/") != DEFAULT_ALIAS.rstrip("/") or \
                    c.split("/", 1)[0] in self.custom_channels:
                out.append(r.url)
            else:
                out.append(c)
        return out

    def mirror_map(self) -> dict[str, list[str]]:
        """rattler's MirrorMiddleware form: every key and mirror ending in ``/``; ``file://`` mirrors are left
        out (:meth:`expand` reads those folders in their channel's place, :meth:`local_url` maps a download)."""
        return {k.rstrip("/") + "/": [m.rstrip("/") + "/" for m in usable] for k, v in self.mirrors.items()
                if v and (usable := self._usable(k)) and not usable[0].lower().startswith("file://")}

    def local_url(self, url: str) -> str | None:
        """A package URL under a channel mirrored by a ``file://`` folder: the same file in that folder."""
        r = self._mirrored(url, BUILT_IN)
        return r.local

    def served_note(self, urls: list[str]) -> str:
        """One line naming the mirrors these package URLs are read from here ("" for none): create's downloads."""
        from envguard.redact import redact

        counts: dict[str, int] = {}
        for u in urls:
            r = self._mirrored(u, BUILT_IN)
            if r.mirrors:
                where = f"{' or '.join(r.mirrors)} ({r.mirror_source})"
                counts[where] = counts.get(where, 0) + 1
        return redact("mirror: " + "; ".join(f"{n} archive{'s' * (n != 1)} from {w}" for w, n in counts.items())
                      ) if counts else ""

    def _members(self, channel: str) -> list[str]:
        """The channels a name stands for: ``defaults`` is its default_channels (none configured: not a
        mirror question, anaconda's own URLs are what the name means everywhere)."""
        return list(self.default_channels) if channel == "defaults" else [channel]

    def locked_from(self, channels: list[str]) -> dict[str, str]:
        """Channel name -> the URL a solve here reads it from, for the channels whose URL is not the one the
        name means without configuration: what a lock records under :data:`LOCK_MIRROR_KEY` (redacted)."""
        from envguard.channels import normalise_channel
        from envguard.redact import redact

        out: dict[str, str] = {}
        for c in channels:
            for m in self._members(c.strip()):
                name = normalise_channel(m)
                if not name or "${" in m:
                    continue
                read = self.resolve(m).read_from.rstrip("/")
                if normalise_channel(read) != name:
                    out[name] = redact(read)
        return out

    def mirror_note(self, channels: list[str]) -> str:
        """One line naming, per channel, the mirror (or configured URL) it was read from; "" when none."""
        from envguard.channels import normalise_channel
        from envguard.redact import redact

        parts: list[str] = []
        for c in channels:
            for m in self._members(c.strip()):
                r = self.resolve(m)
                name = normalise_channel(m) or m
                if r.mirrors:
                    parts.append(f"{name} from {r.local or ' or '.join(r.mirror_urls)} ({r.mirror_source})")
                elif normalise_channel(r.url) != name:
                    parts.append(f"{name} from {r.url} ({r.source})")
        return redact("mirror: " + "; ".join(dict.fromkeys(parts))) if parts else ""


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


def lock_channel_names(listed: list[str], recorded: Mapping[str, str], unknown: set[str],
                       config: ChannelSettings | None = None) -> dict[str, str]:
    """Which listed channel serves each of ``unknown`` (channel base URLs of a lock's packages, in
    envguard.channels' form, that no listed channel is): ``{url: channel name}``.

    First what the lock records (``recorded``: its custom_metadata, :data:`LOCK_MIRROR_KEY` + name -> URL),
    so that a colleague without the mirror reads the lock as it was written; then this machine's
    configuration, :meth:`ChannelSettings.resolve` applied to every listed name (read only when the record
    does not answer). A name the lock does not list is never the answer: a record cannot launder a channel
    the lock does not name."""
    from envguard.channels import normalise_channel
    from envguard.errors import UserError

    names: dict[str, str] = {}
    for raw in listed:
        n = normalise_channel(raw)
        if n:
            names.setdefault(n, raw.strip())
    via_defaults = "defaults" in names

    def listed_name(n: str | None) -> str | None:
        return n if n and (n in names or (via_defaults and n.startswith("pkgs/"))) else None

    out: dict[str, str] = {}
    for key, url in recorded.items():
        n = listed_name(normalise_channel(key[len(LOCK_MIRROR_KEY):])) if key.startswith(LOCK_MIRROR_KEY) else None
        u = normalise_channel(url)
        if n and u and u in unknown:
            out.setdefault(u, n)
    if set(unknown) - set(out):
        cfg = config if config is not None else load()
        for raw in names.values():
            for m in cfg._members(raw):
                try:
                    r = cfg.resolve(m)
                except UserError:  # a mirror entry envguard refuses to use: it answers nothing here
                    continue
                member = listed_name(normalise_channel(m))
                for u in (r.url, *r.mirror_urls):
                    k = normalise_channel(u.rstrip("/"))
                    if k and k in unknown and member:
                        out.setdefault(k, member)
    return out
