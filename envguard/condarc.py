"""The channel configuration read as input: conda's .condarc files (``condarc.d`` included, ``CONDARC``), the
``CONDA_*`` variables and pixi's config.toml, bounded and checked like every other file envguard reads.

These files decide which server a channel name is fetched from. One that cannot be read, or a value of the
wrong shape, is refused in one line naming the file, the key and the fix (exit 2), as conda refuses it
(``LoadError`` for a file it cannot parse, ``ValidationError`` for a value of the wrong type): solving
without it would resolve names against another server than the configuration says, in silence: a company
that routes through a mirror would send its package names to the public server. A setting envguard does not
apply (``custom_multichannels``, ``proxy_servers``...) is a warning that names the file and the setting.

Bounds, all configuration files of one run together (docs/reliability.md): ``ENVGUARD_MAX_INPUT_BYTES`` bytes
(32 MiB), the node share of an environment file (``ENVGUARD_MAX_YAML_NODES`` / 10: 100,000), the nesting and
alias limits of envguard.yamlio, :data:`MAX_FILES` files; a pixi config.toml at most :data:`MAX_TOML_BYTES`.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from envguard.errors import UserError
from envguard.redact import escape_controls, redact, shorten

#: the most configuration files one run reads (conda's search path holds about 15; condarc.d adds its own)
MAX_FILES = 256
#: pixi's config.toml: a few lines; refused above this
MAX_TOML_BYTES = 1 << 20
#: conda settings that change where a name points or how it is fetched and that envguard does not apply
NOT_APPLIED = {
    "custom_multichannels": "the names it defines resolve through channel_alias as single channels",
    "allowlist_channels": "envguard does not restrict the channels to that list",
    "denylist_channels": "envguard does not refuse the channels on that list",
    "proxy_servers": "requests do not go through these proxies (set HTTPS_PROXY / HTTP_PROXY for envguard)",
}
PIXI_NOT_APPLIED = {
    "proxy-config": "requests do not go through these proxies (set HTTPS_PROXY / HTTP_PROXY for envguard)",
}
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*\Z")
# WHATWG's forbidden domain code points (ASCII), which rattler's URL parser refuses in a host
_BAD_HOST = frozenset(" \t\n\r#/:<>?@[\\]^|%\x7f") | frozenset(chr(c) for c in range(0x20))
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*(?:/[A-Za-z0-9_.+-]+)*/?\Z")
_WHAT = {list: "a list", tuple: "a list", dict: "a mapping", bool: "true/false", int: "a number", float: "a number"}


def _what(value: Any) -> str:
    return next((w for t, w in _WHAT.items() if isinstance(value, t)), type(value).__name__) if value is not None \
        else "empty"


#: the schemes rattler reads a channel over (a mirror's are checked by envguard.condaconfig, with its own words)
CHANNEL_SCHEMES = ("http", "https", "file", "s3", "gcs", "oci")


def url_problem(value: Any, schemes: tuple[str, ...] | None = CHANNEL_SCHEMES) -> str | None:
    """Why ``value`` is not a URL rattler can use as a channel (``schemes``: None for a mirror, whose scheme
    envguard.condaconfig checks); None when it is one."""
    if not isinstance(value, str):
        return f"is {_what(value)}, not a URL"
    if not value.strip():
        return "is empty, not a URL"
    if any(c.isspace() or ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in value.strip()):
        return "holds a space or a control character"
    if "\ufffd" in value:
        return "holds bytes that are not UTF-8"
    scheme, sep, _rest = value.strip().partition("://")
    if not sep or not _SCHEME.match(scheme):
        return "is not a URL (no scheme://)"
    if schemes is not None and scheme.lower() not in schemes:
        return f"is not a channel URL: rattler reads channels over {', '.join(schemes)}, not {shorten(scheme, 20)}"
    try:
        parts = urlsplit(value.strip())
        parts.port  # noqa: B018 - raises ValueError for a port that is no number or out of range
        host = parts.hostname or ""
    except ValueError as e:
        return f"is not a valid URL ({e})"
    if scheme.lower() == "file":
        ok = parts.path.startswith("/") and host in ("", "localhost")
        return None if ok else "names no absolute folder (file:///absolute/folder)"
    return _host_problem(host)


def _host_problem(host: str) -> str | None:
    """Why rattler's URL parser would refuse ``host`` (None when it would not)."""
    if not host:
        return "names no host"
    if any(c in _BAD_HOST for c in host):
        return "names a host with a character no host name holds"
    if not host.isascii():
        try:
            host.encode("idna")
        except UnicodeError:
            return "names a host that is no valid international domain name"
    return None


def name_problem(value: Any) -> str | None:
    """Why ``value`` is neither a channel name nor a URL (None when it is one)."""
    if not isinstance(value, str):
        return f"is {_what(value)}, not a channel name or URL"
    if "://" in value:
        return url_problem(value)
    v = value.strip()
    if any(c.isspace() or ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 or c == "\ufffd" for c in v):
        return "holds a space or a control character"
    if v.startswith(("/", "./", "../", "~/")) or _NAME.match(v):
        return None  # a folder, or a name (conda-forge, pkgs/main, conda-forge/label/rc)
    return "is no channel name (letters, digits, - _ . + and / between labels), URL or folder"


@dataclass
class Budget:
    """What the configuration files of one run may still hold, all together."""

    files: int = MAX_FILES
    size: int = 0
    nodes: int = 0
    node_limit: int = 0
    size_limit: int = 0
    #: the variables ``${VAR}`` in a .condarc's URLs expand from (conda expands them in these settings)
    env: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        from envguard.settings import max_input_bytes
        from envguard.yamlio import environment_node_limit

        self.size = self.size or max_input_bytes()
        self.nodes = self.nodes or environment_node_limit()
        self.node_limit, self.size_limit = self.nodes, self.size


def _refuse_fix(fix: str | None) -> str:
    """A configuration file's fix: what the reader said, and that conda refuses the file too."""
    base = (fix or "correct the file").rstrip(".")
    return f"{base}, or move the file away: conda refuses it too, and envguard does not guess where channels point"


def _read(path: Path, shown: str, budget: Budget, limit: int) -> str:
    """The UTF-8 text of a configuration file, within the budget's files and bytes (refused in one line)."""
    from envguard.settings import MAX_INPUT_BYTES
    from envguard.yamlio import read_bytes

    budget.files -= 1
    if budget.files < 0:
        raise UserError(f"more than {MAX_FILES} channel configuration files to read (condarc.d?)", file=shown,
                        fix="merge the files of condarc.d into fewer: conda's search path holds about 15")
    cap = min(limit, budget.size)
    try:
        data = read_bytes(path, limit=cap)
    except UserError as e:
        if "more than envguard reads" in e.problem:
            what = (f"the channel configuration files together hold more than {budget.size_limit:,} bytes"
                    if cap < limit else f"channel configuration file of more than {cap:,} bytes")
            raise UserError(f"{what} (a .condarc holds a few lines)", file=shown,
                            fix=f"shorten or remove the file, or raise {MAX_INPUT_BYTES.name}") from None
        raise UserError(f"channel configuration file {e.problem}", file=shown, fix=_refuse_fix(e.fix)) from None
    budget.size -= len(data)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise UserError("not UTF-8 text (conda and pixi read UTF-8)", file=shown, line=line,
                        fix=_refuse_fix("save the file as UTF-8")) from None
    return text.replace("\r\n", "\n") if "\r" in text else text


def _count_nodes(data: Any, limit: int) -> int:
    """The nodes of a parsed document (aliases counted each time they are used), counting stops past ``limit``."""
    count, stack = 0, [data]
    while stack and count <= limit:
        item = stack.pop()
        count += 1
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return count


def charge(nodes: int, shown: str, budget: Budget) -> None:
    """Count ``nodes`` against what the configuration files may hold together; refused past the bound."""
    from envguard.settings import MAX_YAML_NODES

    if nodes > budget.nodes:
        raise UserError(f"the channel configuration files hold more than {budget.node_limit:,} nodes together "
                        "(a .condarc holds a few dozen)", file=shown,
                        fix=f"shorten or remove the file, or raise {MAX_YAML_NODES.name}")
    budget.nodes -= nodes


#: (kind, digest of the text) -> (what it parsed to, its nodes): the configuration is parsed once per process,
#: however many steps of a command read it (lock: for the solve, the lock's records and its message)
_parsed: dict[tuple[str, bytes], tuple[Any, int]] = {}


def _cached(kind: str, text: str, shown: str, budget: Budget) -> tuple[tuple[str, bytes], Any]:
    """The cache key of ``text`` and what it parsed to before (None when it was not), charged to the budget:
    the bounds hold for the files together, read before or not."""
    import hashlib

    key = (kind, hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest())
    known = _parsed.get(key)
    if known is None:
        return key, None
    charge(known[1], shown, budget)
    return key, known[0]


def _remember(key: tuple[str, bytes], data: Any, nodes: int) -> None:
    if len(_parsed) >= 64:  # a long-lived process reading many configurations: keep the memory bounded
        _parsed.clear()
    _parsed[key] = data, nodes


@lru_cache(maxsize=1)
def _loader() -> type:
    """envguard.yamlio's safe loader, refusing a key written twice in one mapping, as conda's YAML reader
    (ruamel.yaml) does: which of two ``channel_alias`` lines wins is not for envguard to guess."""
    import yaml

    from envguard import yamlio

    class CondarcLoader(yamlio.FastLoader):
        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            seen: set[str] = set()
            for key, _value in node.value if isinstance(node, yaml.MappingNode) else ():
                if isinstance(key, yaml.ScalarNode) and key.value != "<<":
                    if key.value in seen:
                        raise yaml.constructor.ConstructorError(
                            "while reading a mapping", node.start_mark,
                            f"the key {shorten(key.value, 60)!r} is written twice (conda refuses it too)",
                            key.start_mark)
                    seen.add(key.value)
            return super().construct_mapping(node, deep=deep)

    return CondarcLoader


def read_condarc(path: Path, shown: str, budget: Budget) -> dict[str, Any] | None:
    """A .condarc (or a condarc.d file): its mapping, None when empty; anything else refused (exit 2)."""
    import yaml

    from envguard.settings import max_input_bytes
    from envguard.yamlio import check_limits

    text = _read(path, shown, budget, max_input_bytes())
    key, known = _cached("yaml", text, shown, budget)
    if known is not None:
        return dict(known)
    try:
        check_limits(shown, text, max_nodes=max(1, budget.nodes))
        data = yaml.load(text, Loader=_loader())  # a safe loader
    except UserError as e:
        if "nodes" in e.problem and "alias" not in e.problem:
            charge(budget.nodes + 1, shown, budget)
        raise UserError(e.problem.replace("malformed YAML", "malformed YAML in a channel configuration file"),
                        file=shown, line=e.line, column=e.column, fix=_refuse_fix(e.fix)) from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
        problem = getattr(e, "problem", None) or (str(e).splitlines() or [type(e).__name__])[0]
        raise UserError(f"malformed YAML in a channel configuration file: {shorten(problem)}", file=shown,
                        line=mark.line + 1 if mark else None, column=mark.column + 1 if mark else None,
                        fix=_refuse_fix("correct the YAML at that position")) from None
    except (ValueError, TypeError, AttributeError, OverflowError, RecursionError, KeyError, IndexError) as e:
        # a tag on a value of another type (!!timestamp on a word), a number PyYAML cannot build
        what = ("nested too deeply" if isinstance(e, RecursionError) else "an explicit tag on a value of another "
                "type?" if isinstance(e, (AttributeError, TypeError)) else shorten(" ".join(str(e).split()), 120))
        raise UserError(f"a value in a channel configuration file cannot be read as YAML ({what})", file=shown,
                        fix=_refuse_fix("remove the explicit tag (!!...) or correct the value")) from None
    if data is None:
        return None
    if not isinstance(data, dict):
        raise UserError(f"a channel configuration file is {_what(data)}, not a mapping of settings", file=shown,
                        fix=_refuse_fix("write settings as `key: value` lines (channel_alias: https://...)"))
    nodes = _count_nodes(data, budget.nodes)
    charge(nodes, shown, budget)
    _remember(key, data, nodes)
    return data


def read_pixi_config(path: Path, shown: str, budget: Budget) -> dict[str, Any] | None:
    """pixi's config.toml: its table, refused (exit 2) where pixi cannot read it either."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:
        import tomli as tomllib

    text = _read(path, shown, budget, MAX_TOML_BYTES)
    key, known = _cached("toml", text, shown, budget)
    if known is not None:
        return dict(known)
    try:
        data = tomllib.loads(text)
    except (ValueError, RecursionError) as e:
        what = "nested too deeply" if isinstance(e, RecursionError) else shorten(" ".join(str(e).split()), 160)
        raise UserError(f"malformed TOML in pixi's configuration: {what}", file=shown,
                        fix=_refuse_fix("correct the TOML (pixi refuses this file too)")) from None
    nodes = _count_nodes(data, budget.nodes)
    charge(nodes, shown, budget)
    _remember(key, data, nodes)
    return data


def _bad(shown: str, key: str, value: Any, problem: str, fix: str) -> UserError:
    return UserError(f"{shorten(redact(escape_controls(repr(value))), 120)} {problem}", file=shown, key=key, fix=fix)


def _mapping(data: Mapping[str, Any], key: str, shown: str, example: str) -> dict[str, Any]:
    value = data.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise UserError(f"is {_what(value)}, not a mapping", file=shown, key=key,
                        fix=f"write it as a mapping: {key}: {{{example}}}")
    return value


_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _expanded(value: Any, shown: str, key: str, budget: Budget) -> Any:
    """``value`` with its ``${VAR}`` expanded from the environment, as conda expands them in a .condarc's
    channel settings (a credential kept out of the file); a variable that is not set is refused in one line."""
    if not isinstance(value, str) or "${" not in value:
        return value

    def sub(m: re.Match[str]) -> str:
        found = budget.env.get(m[1])
        if found is None:
            raise UserError(f"needs ${{{m[1]}}}, which is not set", file=shown, key=key,
                            fix=f"export {m[1]}=... (conda expands it in this setting), or write the value out")
        return found

    return _VAR.sub(sub, value)


def check_condarc(data: Mapping[str, Any], shown: str, budget: Budget) -> dict[str, Any]:
    """The channel settings of one .condarc, each checked for type and shape (conda's ValidationError refuses
    the same), as ``{"channel_alias": str, "custom_channels": {name: url}, "default_channels": [..],
    "mirrored_channels": {name or url: [urls]}}`` (the keys that are set); warns of NOT_APPLIED settings."""
    out: dict[str, Any] = {}
    alias = _expanded(data.get("channel_alias"), shown, "channel_alias", budget)
    if isinstance(alias, str) and not alias.strip():
        alias = None  # `channel_alias: ""`: not set, as before
    if alias is not None:
        problem = url_problem(alias)
        if problem:
            raise _bad(shown, "channel_alias", alias, problem,
                       "write one URL: channel_alias: https://mirror.example/conda/")
        out["channel_alias"] = alias.strip()
    custom: dict[str, str] = {}
    for name, written in _mapping(data, "custom_channels", shown, "conda-forge: https://mirror.example/").items():
        problem = name_problem(name) if not isinstance(name, str) or "://" not in name else "is a URL, not a name"
        if problem:
            raise _bad(shown, "custom_channels", name, problem, "key each entry by a channel name (conda-forge)")
        if written is None:
            continue
        url = _expanded(written, shown, f"custom_channels.{name}", budget)
        if not (isinstance(url, str) and url.startswith("/")):
            problem = url_problem(url)
            if problem:
                raise _bad(shown, f"custom_channels.{name}", url, problem,
                           f"write one base URL: {name}: https://mirror.example/ (the channel name is appended)")
        custom[name] = url
    if custom:
        out["custom_channels"] = custom
    defaults = data.get("default_channels")
    if defaults is not None:
        if not isinstance(defaults, list):
            raise UserError(f"is {_what(defaults)}, not a list", file=shown, key="default_channels",
                            fix="write it as a list: default_channels: [https://mirror.example/pkgs/main]")
        defaults = [_expanded(c, shown, "default_channels", budget) for c in defaults]
        for c in defaults:
            problem = name_problem(c) if c is not None else None
            if problem:
                raise _bad(shown, "default_channels", c, problem, "list channel names or URLs")
        out["default_channels"] = [c for c in defaults if c]
    mirrored: dict[str, list[str]] = {}
    for name, mirrors in _mapping(data, "mirrored_channels", shown, "conda-forge: [https://m.example/cf]").items():
        problem = name_problem(name)
        if problem:
            raise _bad(shown, "mirrored_channels", name, problem, "key each entry by a channel name or URL")
        mirrored[name] = mirror_list(mirrors, shown, f"mirrored_channels.{name}", budget)
    if mirrored:
        out["mirrored_channels"] = mirrored
    for key, consequence in NOT_APPLIED.items():
        if data.get(key) not in (None, {}, [], ""):
            _warn_once(f"{shown}: {key} is not applied: {consequence}")
    return out


def mirror_list(mirrors: Any, shown: str, key: str, budget: Budget | None = None) -> list[str]:
    """A mirror entry's URLs: a list of URLs (one URL alone is taken as that list); ``budget``: a .condarc's,
    whose ``${VAR}`` are expanded as conda expands them."""
    if mirrors is None:
        return []
    if isinstance(mirrors, dict):
        raise _bad(shown, key, mirrors, "is a mapping, not a list of mirror URLs",
                   "write the mirrors as a list of URLs: [https://mirror.example/conda-forge]")
    items = mirrors if isinstance(mirrors, list) else [mirrors]
    if budget is not None:
        items = [_expanded(m, shown, key, budget) for m in items]
    for m in items:
        problem = url_problem(m, None) if m else None
        if problem:
            raise _bad(shown, key, m, problem, "write each mirror as a URL: https://mirror.example/conda-forge "
                                               "or file:///absolute/folder")
    return [m.strip() for m in items if m]


def check_pixi(data: Mapping[str, Any], shown: str, budget: Budget) -> dict[str, list[str]]:
    """pixi's ``[mirrors]``: channel URL -> mirror URLs, each checked (pixi refuses the same)."""
    table = data.get("mirrors")
    out: dict[str, list[str]] = {}
    if table is not None and not isinstance(table, dict):
        raise UserError(f"is {_what(table)}, not a table", file=shown, key="mirrors",
                        fix='write it as a table: [mirrors] "https://conda.anaconda.org/conda-forge" = [...]')
    for url, mirrors in (table or {}).items():
        problem = url_problem(url)
        if problem:
            raise _bad(shown, "mirrors", url, problem, "key each entry by the channel's URL, in quotes: "
                                                       '"https://conda.anaconda.org/conda-forge" = [...]')
        out[url] = mirror_list(mirrors, shown, f"mirrors.{url}")
    for key, consequence in PIXI_NOT_APPLIED.items():
        if data.get(key):
            _warn_once(f"{shown}: {key} is not applied: {consequence}")
    return out


def check_variable(name: str, value: str, *, names: bool = False) -> list[str]:
    """A ``CONDA_*`` / ``ENVGUARD_*`` variable's value: one URL, or (``names``) comma-separated names or URLs."""
    items = [c.strip() for c in value.split(",") if c.strip()] if names else [value.strip()]
    for item in items:
        problem = name_problem(item) if names else url_problem(item)
        if problem:
            raise UserError(f"{shorten(redact(escape_controls(item)), 120)} {problem}", key=name,
                            fix=f"export {name}=" + ("name,https://mirror.example/channel" if names else
                                                     "https://mirror.example/conda/") + f", or unset {name}")
    return items


_warned: set[str] = set()  # a warning is said once per process, however often the configuration is read


def _warn_once(message: str) -> None:
    if message in _warned:
        return
    _warned.add(message)
    from envguard.render import warn

    warn(message)
