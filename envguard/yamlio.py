"""YAML loading with positions, for one-line errors that point at file:line:col.

Uses the C loader when PyYAML has it (large locks parse several times faster).
``load_with_lines`` additionally records where each mapping key and sequence
item starts, so that lint and spec validation can name exact lines.
:func:`load_fast`, :func:`read_text` and :func:`read_bytes` are what every reader of a user's YAML file uses
(bounded: :func:`check_limits`, with :func:`node_bound` the cheap count checked before parsing).
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envguard.errors import UserError
from envguard.redact import shorten
from envguard.settings import MAX_YAML_NODES, max_input_bytes, max_yaml_nodes

if TYPE_CHECKING:
    import yaml

# PyYAML is imported on first use (it costs ~13 ms): `envguard create` reads conda-lock's own layout
# without it (envguard.sources.lockscan).


@lru_cache(maxsize=1)
def _fast_loader() -> type:
    """PyYAML's safe C loader (SafeLoader where PyYAML was built without libyaml), whose scalar types refuse a
    value they cannot read as a YAML error with its position: an explicit tag on a value of another type
    (``!!timestamp x``, ``!!int ""``, ``!!bool maybe``) made PyYAML's own constructors fail with
    AttributeError, IndexError or KeyError, an internal error (issue #38 point 6)."""
    import yaml

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    def guarded(tag: str, construct: Any) -> Any:
        def construct_scalar_of_type(loader: Any, node: Any) -> Any:
            try:
                return construct(loader, node)
            except (ValueError, TypeError, AttributeError, IndexError, KeyError, OverflowError) as e:
                what = " ".join(str(node.value).split()) if isinstance(node.value, str) else "this node"
                raise yaml.constructor.ConstructorError(
                    None, None, f"{shorten(what, 40)!r} is not a valid {tag.rsplit(':', 1)[-1]} value"
                    + (f" ({shorten(str(e).split(':')[0], 80)})" if isinstance(e, ValueError) else ""),
                    node.start_mark) from None
        return construct_scalar_of_type

    class GuardedLoader(base):  # type: ignore[misc,valid-type]
        pass

    for name in ("bool", "int", "float", "timestamp"):
        tag = f"tag:yaml.org,2002:{name}"
        GuardedLoader.add_constructor(tag, guarded(tag, base.yaml_constructors[tag]))
    return GuardedLoader


def __getattr__(name: str) -> Any:
    if name == "FastLoader":  # the C loader when PyYAML has it
        return _fast_loader()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _raise_yaml_error(path: str | Path, e: yaml.YAMLError) -> None:
    mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
    problem = getattr(e, "problem", None) or (str(e).splitlines() or [type(e).__name__])[0]
    raise UserError(
        f"malformed YAML: {shorten(problem)}",
        file=str(path),
        line=(mark.line + 1) if mark else None,
        column=(mark.column + 1) if mark else None,
        fix="correct the YAML syntax at that position",
    ) from None


# conda-build's meta.yaml style: Jinja statements and expressions, which neither conda nor conda-lock renders
_JINJA = re.compile(r"\{%.*?%\}|\{\{.*?\}\}")


def _raise_template_error(path: str | Path, e: yaml.YAMLError) -> None:
    """YAML that fails where it holds Jinja (``{% set ... %}``, ``{{ version }}``): one message for every reader,
    naming what the file is."""
    mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
    raise UserError(
        "malformed YAML: the file holds Jinja templating (`{% ... %}`, `{{ ... }}`), as a conda-build recipe "
        "(meta.yaml) does; conda and conda-lock read plain YAML, not templates",
        file=str(path),
        line=(mark.line + 1) if mark else None,
        column=(mark.column + 1) if mark else None,
        fix="pass an environment file or a lock file; a recipe is conda-build's to render",
    ) from None


def _raise_value_error(path: str | Path, e: Exception) -> None:
    """A YAML scalar PyYAML cannot turn into a value (an integer of 100,000 digits) or a structure that
    recursion cannot build: bad input like any other, never a traceback."""
    what = "nested too deeply" if isinstance(e, RecursionError) else shorten(" ".join(str(e).split()), 120)
    raise UserError(f"malformed YAML: {what}", file=str(path), fix="correct the file") from None


# ------------------------------------------------------------------------------------------------ limits
# Hostile input must not make envguard hang or eat memory (docs/reliability.md). Every YAML, lock and
# requirements file is read through read_bytes/read_text (regular files only, size-limited) and every YAML
# document is parsed through load_fast/load_with_lines, which refuse deep nesting and alias expansion first.

#: the deepest nesting of YAML collections accepted; real environment files and locks nest fewer than 10
MAX_DEPTH = 100
#: how many nodes YAML aliases may add once expanded (a 367-byte "billion laughs" adds billions)
MAX_ALIAS_NODES = 100_000
#: environment files (read with positions, then linted entry by entry) may hold this share of
#: ENVGUARD_MAX_YAML_NODES: 100,000 by default, 100 times the largest real one
ENVIRONMENT_NODES_SHARE = 10


def environment_node_limit() -> int:
    """The most nodes an environment file (or a TOML manifest, in values) may hold: a tenth of
    ``ENVGUARD_MAX_YAML_NODES``; real ones hold a few hundred."""
    return max(1, max_yaml_nodes() // ENVIRONMENT_NODES_SHARE)


_FILE_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
               (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"))


def _not_regular(mode: int) -> str:
    return next((what for test, what in _FILE_KINDS if test(mode)), "not a regular file")


def kind_of(path: str | Path) -> str:
    """``a file``, ``a directory``, ``a FIFO (named pipe)``, ``a character device``... (symlinks followed)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return "not readable"
    return "a file" if stat.S_ISREG(mode) else _not_regular(mode)


def special_file(path: str | Path) -> str | None:
    """``is a FIFO (named pipe), not a regular file`` (and so on) for something that exists but is neither a
    regular file nor a directory; else None. For callers that test a path with ``is_file()`` before reading
    it: they must not call a FIFO or a device "not found"."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    return f"is {_not_regular(mode)}, not a regular file"


def read_bytes(path: str | Path, *, limit: int | None = None) -> bytes:
    """The bytes of a regular file, at most ``limit`` (default ``ENVGUARD_MAX_INPUT_BYTES``, else 32 MiB);
    one-line errors.

    FIFOs, devices (a symlink to /dev/zero included), sockets and directories are refused before anything
    is read from them: opening a FIFO waits for a writer, a device never ends. The file is opened without
    blocking and checked again through its descriptor, so one swapped in after the first look is refused
    too, and no more than ``limit`` + 1 bytes are ever read.
    """
    limit = max_input_bytes() if limit is None else limit
    shown = str(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise UserError("file not found", file=shown, fix="check the path") from None
    except NotADirectoryError:
        raise UserError("file not found (a parent is not a directory)", file=shown, fix="check the path") from None
    except PermissionError:
        raise UserError("permission denied", file=shown, fix="make the file readable") from None
    except OSError as e:
        raise UserError(f"cannot read: {e.strerror or e}", file=shown, fix="check the path") from None
    if stat.S_ISDIR(st.st_mode):
        raise UserError("is a directory, expected a file", file=shown, fix="pass the file inside it")
    if not stat.S_ISREG(st.st_mode):
        raise UserError(f"is {_not_regular(st.st_mode)}, not a regular file", file=shown,
                        fix="pass a regular file (envguard does not read from pipes or devices)")
    if st.st_size > limit:
        raise UserError(f"is {st.st_size} bytes, more than envguard reads ({limit} bytes)", file=shown,
                        fix="pass the right file, or raise ENVGUARD_MAX_INPUT_BYTES")
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except PermissionError:
        raise UserError("permission denied", file=shown, fix="make the file readable") from None
    except OSError as e:
        raise UserError(f"cannot read: {e.strerror or e}", file=shown, fix="check the path") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UserError(f"is {_not_regular(st.st_mode)}, not a regular file", file=shown,
                            fix="pass a regular file (envguard does not read from pipes or devices)")
        chunks: list[bytes] = []
        total = 0
        while total <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    except OSError as e:
        raise UserError(f"cannot read: {e.strerror or e}", file=shown, fix="check the path") from None
    finally:
        os.close(fd)
    if total > limit:
        raise UserError(f"is more than envguard reads ({limit} bytes)", file=shown,
                        fix="pass the right file, or raise ENVGUARD_MAX_INPUT_BYTES")
    return b"".join(chunks)


def read_text(path: str | Path) -> str:
    """A UTF-8 text file through :func:`read_bytes`, newlines translated as ``open()`` does."""
    return decode_text(read_bytes(path), path)


def decode_text(data: bytes, path: str | Path) -> str:
    """The bytes of ``path`` (read once, by :func:`read_bytes`) as :func:`read_text` gives them: for a reader
    that also needs the bytes themselves (create hashes the lock it parses, from the same read)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise UserError("not UTF-8 text", file=str(path), fix="save the file as UTF-8") from None
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


# An alias (``*name``) starts a node: at the start of a line or after whitespace, "[", "{" or ",". A "*" in
# a plain scalar (``pytorch *cuda*``) matches too; that only means the exact scan below runs.
_ALIAS_HINT = re.compile(r"(?:^|[\s\[\{,])\*[^\s,\[\]\{\}]", re.M)
_FLOW = re.compile(r"[\[\]\{\}]")
_LEADING = re.compile(r"^[ \t?:-]{%d,}" % MAX_DEPTH, re.M)  # noqa: UP031 - a regex's braces


def node_bound(text: str) -> int:
    """A cheap, linear upper bound on the nodes of a document: every node but the first starts after a line
    break or one of ``, [ { : - ?`` and each of those starts at most two (a key and its implicit null)."""
    return 2 * sum(text.count(c) for c in "\n,[{:-?") + 2


def _may_exceed_limits(text: str, max_nodes: int) -> bool:
    """A cheap, linear over-estimate: False means the text has no alias, cannot nest MAX_DEPTH deep and
    cannot hold more than ``max_nodes`` nodes."""
    if node_bound(text) > max_nodes or _ALIAS_HINT.search(text) or _LEADING.search(text):
        return True
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return False
    depth = 0
    for m in _FLOW.finditer(text):  # brackets inside quotes count too: an over-estimate; fewer than max_nodes
        depth = depth + 1 if m.group() in "[{" else max(0, depth - 1)
        if depth > MAX_DEPTH:
            return True
    return False


def check_limits(path: str | Path, text: str, loader: type | None = None, *, max_nodes: int | None = None) -> None:
    """Refuse (exit 2, ``file:line:col``) a document that nests deeper than MAX_DEPTH, holds more than
    ``ENVGUARD_MAX_YAML_NODES`` nodes or whose aliases expand to more than MAX_ALIAS_NODES extra nodes,
    before anything builds or walks it.

    Exact, on the parser's event stream (no recursion, no expansion, stopped at the first limit passed, so
    bounded by the node limit whatever the file's size), and only run when the cheap scan says the text
    could exceed a limit: ordinary files pay a few linear passes of ``str.count`` and regular expressions.
    """
    if len(text) > max_input_bytes():
        raise UserError(f"is more than envguard reads ({max_input_bytes()} bytes)", file=str(path),
                        fix="pass the right file, or raise ENVGUARD_MAX_INPUT_BYTES")
    max_nodes = max_yaml_nodes() if max_nodes is None else max_nodes
    if not _may_exceed_limits(text, max_nodes):
        return
    import yaml

    def refuse(message: str, mark: Any, fix: str) -> None:
        raise UserError(message, file=str(path), line=mark.line + 1 if mark else None,
                        column=mark.column + 1 if mark else None, fix=fix)

    sizes: dict[str, int] = {}
    frames: list[list[Any]] = []  # [nodes so far, anchor] of every open collection
    extra = 0
    nodes = 0
    try:
        for ev in yaml.parse(text, Loader=loader or _fast_loader()):
            if isinstance(ev, (yaml.CollectionStartEvent, yaml.ScalarEvent, yaml.AliasEvent)):
                nodes += 1
                if nodes > max_nodes:
                    refuse(f"YAML document holds more than {max_nodes:,} nodes", ev.start_mark,
                           f"pass the right file (real locks hold under 100,000, environment files under "
                           f"1,000), or raise {MAX_YAML_NODES.name}")
            if isinstance(ev, yaml.CollectionStartEvent):
                if len(frames) >= MAX_DEPTH:
                    refuse(f"YAML nested more than {MAX_DEPTH} levels deep", ev.start_mark,
                           "flatten the document; no environment file or lock nests this deep")
                frames.append([1, ev.anchor])
            elif isinstance(ev, yaml.CollectionEndEvent):
                count, anchor = frames.pop()
                if anchor is not None:
                    sizes[anchor] = count
                if frames:
                    frames[-1][0] += count
            elif isinstance(ev, yaml.ScalarEvent):
                if ev.anchor is not None:
                    sizes[ev.anchor] = 1
                if frames:
                    frames[-1][0] += 1
            elif isinstance(ev, yaml.AliasEvent):
                anchor = ev.anchor or ""  # an alias always names its anchor
                size = sizes.get(anchor)
                if size is None:
                    if any(f[1] == anchor for f in frames):
                        refuse(f"YAML alias *{shorten(anchor, 40)} refers to a node that contains it",
                               ev.start_mark, "remove the recursive alias")
                    continue  # an undefined alias: the parser proper reports it with its position
                extra += size
                if extra > MAX_ALIAS_NODES:
                    refuse(f"YAML aliases expand to more than {MAX_ALIAS_NODES} nodes (an alias bomb?)",
                           ev.start_mark, "write the repeated parts out, or remove the aliases")
                if frames:
                    frames[-1][0] += size
    except yaml.YAMLError as e:
        _raise_yaml_error(path, e)


def load_fast(path: str | Path, text: str | None = None, loader: type | None = None) -> Any:
    """Parse YAML quickly (C loader, or ``loader``: a subclass of it); errors become a :class:`UserError`
    with line:col."""
    import yaml

    if text is None:
        text = read_text(path)
    check_limits(path, text)
    try:
        return yaml.load(text, Loader=loader or _fast_loader())  # a safe loader
    except yaml.YAMLError as e:
        if _JINJA.search(text):
            _raise_template_error(path, e)
        _raise_yaml_error(path, e)
    except (ValueError, RecursionError) as e:
        _raise_value_error(path, e)


@dataclass
class Positions:
    """1-based line numbers: ``keys[("dependencies", 3)]`` is the 4th dependency's line."""

    lines: dict[tuple[Any, ...], int] = field(default_factory=dict)

    def line(self, *path: Any) -> int | None:
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return None


def load_with_lines(path: str | Path, text: str | None = None) -> tuple[Any, Positions]:
    """Parse an environment file and record the line of every mapping key and sequence item; at most a
    tenth of ``ENVGUARD_MAX_YAML_NODES`` nodes (every entry is then checked on its own)."""
    import yaml

    if text is None:
        text = read_text(path)
    check_limits(path, text, max_nodes=environment_node_limit())
    parser = _fast_loader()(text)  # one parse: the nodes (with their marks) are composed once and built
    try:
        node = parser.get_single_node()
        data = None if node is None else parser.construct_document(node)
    except yaml.YAMLError as e:
        _raise_yaml_error(path, e)
    except (ValueError, RecursionError) as e:
        _raise_value_error(path, e)
    finally:
        parser.dispose()
    pos = Positions()
    seen: set[int] = set()  # an alias shares its anchor's node: walk each once (`a: &x [*x]` recursed forever)

    def walk(n: yaml.Node | None, prefix: tuple[Any, ...]) -> None:
        if n is None or id(n) in seen:
            return
        seen.add(id(n))
        if isinstance(n, yaml.MappingNode):
            for k, v in n.value:
                key = prefix + (k.value,)
                pos.lines[key] = k.start_mark.line + 1
                walk(v, key)
        elif isinstance(n, yaml.SequenceNode):
            for i, item in enumerate(n.value):
                key = prefix + (i,)
                pos.lines[key] = item.start_mark.line + 1
                walk(item, key)

    walk(node, ())
    return data, pos
