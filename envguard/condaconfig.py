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
:func:`lock_channel_names` tells sources.condalock which listed channel serves a lock's unknown channel URL
(a mirror); :meth:`ChannelSettings.channel_members` says which channels a name such as ``defaults`` stands for.
"""

from __future__ import annotations

import dataclasses
import os
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
    """The candidate files in conda's order (missing ones too); a directory on the search path
    (``condarc.d``, or ``$CONDARC`` naming one) stands for its ``*.yml`` and ``*.yaml`` files, sorted, as
    conda's loader reads it."""
    def trio(base: Path) -> list[Path]:
        return [base / ".condarc", base / "condarc", base / "condarc.d"]

    out = trio(Path("/etc/conda")) + trio(Path("/var/lib/conda"))
    if env.get("CONDA_ROOT"):
        out += trio(Path(env["CONDA_ROOT"]))
    xdg = Path(env["XDG_CONFIG_HOME"]) if env.get("XDG_CONFIG_HOME") else home / ".config"
    out += trio(xdg / "conda") + trio(home / ".conda") + [home / ".condarc"]
    if env.get("CONDA_PREFIX"):
        out += trio(Path(env["CONDA_PREFIX"]))
    if env.get("CONDARC"):
        out.append(Path(env["CONDARC"]))
    return [f for p in out for f in (_yaml_files(p, home) if _is_dir(p) else [p])]


def _is_dir(p: Path) -> bool:
    """Whether ``p`` is a directory; a path that cannot be looked at (missing, a name too long, a parent
    without search permission) is none: conda's loader skips what it cannot stat."""
    import stat

    try:
        return stat.S_ISDIR(os.stat(p).st_mode)
    except (OSError, ValueError):
        return False


def _yaml_files(d: Path, home: Path) -> list[Path]:
    """The ``*.yml`` and ``*.yaml`` files of a directory on conda's search path, sorted (a directory of a
    million files: enough of them to be refused, envguard.condarc.MAX_FILES, not all)."""
    from envguard.condarc import MAX_FILES

    found: list[Path] = []
    try:
        with os.scandir(d) as entries:
            for e in entries:
                if e.name.endswith((".yml", ".yaml")) and len(found) <= MAX_FILES:
                    found.append(Path(e.path))
    except OSError as e:
        from envguard.errors import UserError

        raise UserError(f"cannot read the channel configuration directory: {e.strerror or e}", file=_shown(d, home),
                        fix="make it readable, or move it away: conda reads its files too") from None
    return sorted(found)


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


def _under(base: str, name: str = "") -> str:
    """``base`` and ``name`` joined by one slash (``base`` without its trailing slashes when ``name`` is empty);
    a root URL keeps the slashes of its scheme (``file:///`` and ``x``: ``file:///x``, never ``file:/x``)."""
    stem = base.rstrip("/")
    if stem.endswith(":"):
        return stem + "///" + name
    return f"{stem}/{name}" if name else stem


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
            return self._mirrored(_under(c) if "://" in c else c, "as written")
        if c == "defaults":
            if self.default_channels:
                first = self.resolve(self.default_channels[0])
                return dataclasses.replace(first, source=self.sources.get("default_channels", BUILT_IN))
            return self._mirrored(DEFAULTS_URL, BUILT_IN)
        head = c.split("/", 1)[0]
        if head in self.custom_channels:
            return self._mirrored(_under(self.custom_channels[head], c),
                                  self.sources.get(f"custom:{head}", BUILT_IN))
        return self._mirrored(_under(self.channel_alias, c), self.sources.get("channel_alias", BUILT_IN))

    def _mirrored(self, url: str, source: str) -> Resolved:
        """``url`` with the mirrors of the longest configured channel URL it starts with (rattler's rule)."""
        plain = url.rstrip("/") + "/"
        best = max((k for k in self.mirrors if self.mirrors[k] and plain.startswith(k.rstrip("/") + "/")),
                   key=len, default=None)
        if best is None:
            return Resolved(url, source)
        mirrors = self._usable(best)
        rest = plain[len(best.rstrip("/") + "/"):].rstrip("/")
        urls = tuple(_under(m, rest) for m in mirrors)
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

    def with_credentials(self) -> list[str]:
        """The configured URLs that carry a credential (``user:password@``, ``/t/<token>``): what fills in a
        lock's masked one (envguard.auth.fill_masked), the longest first."""
        from envguard.redact import has_credentials

        urls = [self.channel_alias, *self.custom_channels.values(), *self.default_channels,
                *self.mirrors, *(m for v in self.mirrors.values() for m in v)]
        return sorted({u.strip() for u in urls if "://" in u and has_credentials(u)}, key=len, reverse=True)

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

    def channel_members(self, channel: str) -> list[str]:
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
            for m in self.channel_members(c.strip()):
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
            for m in self.channel_members(c.strip()):
                r = self.resolve(m)
                name = normalise_channel(m) or m
                if r.mirrors:
                    parts.append(f"{name} from {r.local or ' or '.join(r.mirror_urls)} ({r.mirror_source})")
                elif normalise_channel(r.url) != name:
                    parts.append(f"{name} from {r.url} ({r.source})")
        return redact("mirror: " + "; ".join(dict.fromkeys(parts))) if parts else ""


def _shown(p: Path, home: Path) -> str:
    """The path as messages show it (``~/`` for the home directory), control characters escaped."""
    from envguard.redact import escape_controls

    try:
        return escape_controls("~/" + str(p.relative_to(home)))
    except ValueError:
        return escape_controls(str(p))


def _exists(p: Path) -> bool:
    """Whether a configuration file is there to read: a directory is not one (conda skips it); a FIFO or a
    device is, and is refused when read (envguard.condarc), never waited on or skipped in silence."""
    import stat

    try:
        return not stat.S_ISDIR(os.stat(p).st_mode)
    except (OSError, ValueError):
        return False  # missing, or a path conda cannot stat either (it skips those): nothing configured there


def _read_config(p: Path, where: str, budget: Any, toml: bool) -> dict[str, Any]:
    """The checked settings of one file (envguard.condarc), refused in one line when it cannot be read;
    a pixi config as ``{"mirrors": {...}}``."""
    from envguard import condarc

    if toml:
        raw = condarc.read_pixi_config(p, where, budget)
        return {"mirrors": condarc.check_pixi(raw, where, budget) if raw else {}}
    raw = condarc.read_condarc(p, where, budget)
    return condarc.check_condarc(raw, where, budget) if raw else {}


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

    from envguard import condarc

    budget = condarc.Budget(env=env)  # every file of this reading together (envguard.condarc's bounds)
    for p in condarc_paths(env, home):
        if not _exists(p):
            continue
        where = _shown(p, home)
        data = _read_config(p, where, budget, toml=False)
        if "channel_alias" in data:
            cfg.channel_alias = data["channel_alias"]
            note("channel_alias", f"{where}: channel_alias")
        for k, v in data.get("custom_channels", {}).items():
            cfg.custom_channels[k] = v
            note(f"custom:{k}", f"{where}: custom_channels")
        if "default_channels" in data:
            cfg.default_channels = list(data["default_channels"])
            note("default_channels", f"{where}: default_channels")
        for k, v in data.get("mirrored_channels", {}).items():
            url = cfg.url_for(k)
            cfg.mirrors[url] = list(v)
            note(f"mirror:{url}", f"{where}: mirrored_channels")
    for p in pixi_config_paths(env, home, project):
        if not _exists(p):
            continue
        where = _shown(p, home)
        for k, v in _read_config(p, where, budget, toml=True)["mirrors"].items():
            cfg.mirrors[k] = list(v)
            note(f"mirror:{k}", f"{where}: mirrors")
    if env.get("CONDA_CHANNEL_ALIAS"):
        cfg.channel_alias = condarc.check_variable("CONDA_CHANNEL_ALIAS", env["CONDA_CHANNEL_ALIAS"])[0]
        note("channel_alias", "CONDA_CHANNEL_ALIAS")
    if env.get("CONDA_DEFAULT_CHANNELS"):
        cfg.default_channels = condarc.check_variable("CONDA_DEFAULT_CHANNELS", env["CONDA_DEFAULT_CHANNELS"],
                                                      names=True)
        note("default_channels", "CONDA_DEFAULT_CHANNELS")
    from envguard import settings

    override = settings.text(settings.CHANNEL_ALIAS, env).strip()
    if override:  # envguard's own, over conda's: for a mirror only envguard is to use
        cfg.channel_alias = condarc.check_variable(settings.CHANNEL_ALIAS.name, override)[0]
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
            for m in cfg.channel_members(raw):
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
