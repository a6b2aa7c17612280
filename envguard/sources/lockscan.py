"""The one reader of a conda-lock file's document: fast, without PyYAML, when it has the layout conda-lock's
own writer gives it; else YAML. Every command reads a conda-lock file through it (the lock wing's read_lock,
create's plan, lock --check's :func:`read_metadata`, and diff, check and lint through envguard.filekind's
read_kind), so the fast path is a detail of this module, not a second reader.

PyYAML's C loader parses in C but still builds every node and scalar in Python: about 45 ms for a
500-package lock, and importing PyYAML costs another 13 ms; together the largest part of a warm
`envguard create` after the install itself. conda-lock writes (with PyYAML's dumper) one fixed block
layout::

    version: 1
    metadata:
      content_hash:
        linux-64: 17d3...
      channels:
      - url: https://conda.anaconda.org/conda-forge
        used_env_vars: []
      platforms:
      - linux-64
    package:
    - name: x                 # an entry; its first key on the "- " line
      version: 1.0.0          # plain or quoted scalars
      dependencies:           # a mapping one level down, 4 spaces in
        python: '>=3.8'
      hash: {}                # or an empty mapping / list
      source: null

:func:`load_lock` reads the ``package:`` list line by line (each distinct line parsed once) and the small
rest of the file with a strict block parser; :func:`load_subset` is that parser alone. Anything else goes
to PyYAML: other indentation, flow or nested collections, anchors, tags, escapes, multi-line or block
scalars, comments after values, non-ASCII text, and plain scalars that YAML would read as anything but a
string, a boolean, null or a plain decimal integer (other numbers, dates).

The contract, checked by tests/test_lockscan.py on the real-world locks and on crafted edge cases: the
result is always equal to ``yamlio.load_fast(path, text)``, errors included (a file the fast reader does
not fully understand is parsed, and its errors reported, by PyYAML alone).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

_PACKAGE = re.compile(r"^package:[ ]*\n", re.M)
_TOP_LEVEL = re.compile(r"^(?![ \n]|- )", re.M)
_KEY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+\-]*")
# printable ASCII and newlines only: no tabs, CR, YAML 1.1 line breaks (NEL, LS, PS) or control characters
_UNUSUAL = re.compile(r"[^\x20-\x7e\n]")
_INDICATORS = frozenset("-?:,[]{}#&*!|>'\"%@`")

# YAML 1.1's implicit types for plain scalars, as PyYAML's SafeLoader resolves them (yaml.org/type/):
# booleans, nulls and plain decimal integers are read here; other integers, floats, timestamps, merge keys ("<<")
# and "=" send the file to PyYAML. tests/test_lockscan.py compares this with PyYAML's resolver on a corpus of scalars.
_BOOLS = {w: v for v, words in ((True, "yes Yes YES true True TRUE on On ON"),
                                (False, "no No NO false False FALSE off Off OFF")) for w in words.split()}
_NULLS = frozenset(("~", "null", "Null", "NULL"))
_DECIMAL = re.compile(r"[-+]?(?:0|[1-9][0-9]*)")
_SIGN = r"[-+]?"
_EXP = r"(?:[eE][-+][0-9]+)?"
_SEXAGESIMAL = r"(?::[0-5]?[0-9])+"
_OTHER_TYPES = re.compile("|".join((
    # int: binary, octal, decimal, hexadecimal, base 60
    rf"{_SIGN}0b[0-1_]+", rf"{_SIGN}0[0-7_]+", rf"{_SIGN}(?:0|[1-9][0-9_]*)", rf"{_SIGN}0x[0-9a-fA-F_]+",
    rf"{_SIGN}[1-9][0-9_]*{_SEXAGESIMAL}",
    # float: decimal (a dot required), base 60, infinity, not-a-number
    rf"{_SIGN}[0-9][0-9_]*\.[0-9_]*{_EXP}", rf"\.[0-9][0-9_]*{_EXP}", rf"{_SIGN}[0-9][0-9_]*{_SEXAGESIMAL}\.[0-9_]*",
    rf"{_SIGN}\.(?:inf|Inf|INF)", r"\.(?:nan|NaN|NAN)",
    # timestamp: a date, or a date and time
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}",
    r"[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}(?:[Tt]|[ \t]+)[0-9]{1,2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]*)?"
    r"(?:[ \t]*(?:Z|[-+][0-9]{1,2}(?::[0-9]{2})?))?",
    # merge key and value key
    r"<<", r"=",
)))


class _Unsure(Exception):
    """The text leaves the layout this reader knows: PyYAML must decide."""


def load_lock(path: str | Path, text: str | None = None,
              fallback: Callable[[str, str], Any] | None = None) -> Any:
    """The parsed lock file, equal to ``load_fast(path, text)``; fast for conda-lock's own layout. ``text``:
    the file's, when already read (else read here, size-limited); ``fallback(path, text)``: the caller's YAML
    loader for a file of another layout (default: yamlio.load_fast)."""
    from envguard.yamlio import load_fast, read_text

    if text is None:
        text = read_text(path)
    try:
        data = _load_fast_layout(text)
    except _Unsure:
        data = None
    if data is None:
        return (fallback or load_fast)(str(path), text)
    return data


# The format versions a conda-lock file may have. conda-lock 4.0.3 (conda_lock/lockfile/__init__.py,
# parse_conda_lock_file) reads 1 (its v1 model, what its writer writes) and 2 (its v2prelim model: one entry
# per package and platform, ``categories`` a list) and refuses any other; it refuses a file without a version
# too (MissingLockfileVersion), which envguard reads as the layout of version 1 (the files before the key).
CONDA_LOCK_VERSIONS: tuple[int | None, ...] = (1, 2, None)
# what conda-lock's LockedDependency requires of every entry (the rest has defaults)
ENTRY_KEYS = ("name", "version", "manager", "platform", "url", "hash")


def check_document(data: Any, shown: str, *, versions: tuple[int | None, ...] = CONDA_LOCK_VERSIONS,
                   entry_keys: tuple[str, ...] = ENTRY_KEYS) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A parsed conda-lock document checked as a document, for every reader of one (the lock wing's
    read_lock for installing, envguard.sources.condalock for comparing), so that they accept and refuse the
    same files with the same line: the top-level keys, the format version (``versions``: pixi's legacy
    reader passes its own), the metadata's shape, and each entry a mapping with ``entry_keys``. Returns
    the metadata mapping and the package list; what a reader needs of an entry's values it checks itself."""
    from envguard.errors import UserError

    def bad(key: str, message: str) -> UserError:
        return UserError(message, file=shown, key=key, fix="regenerate it with `conda-lock lock` or `envguard lock`")

    if not isinstance(data, dict) or "package" not in data or "metadata" not in data:
        raise bad("(file)", "not a conda-lock file (needs `metadata:` and `package:`)")
    if data["package"] is None:
        raise UserError("'package' is empty (null), and conda-lock reads only a list", file=shown,
                        key="package", fix="write `package: []` for a lock of nothing, or re-lock")
    if not isinstance(data["package"], list):
        raise bad("package", f"expected a list, found {type(data['package']).__name__}")
    version = data.get("version")
    if version not in versions:
        known = " and ".join(str(v) for v in versions if v is not None)
        raise UserError(f"unsupported conda-lock format version {version!r}", file=shown, key="version",
                        fix=f"envguard reads conda-lock format versions {known}" + (
                            " and the unversioned format before them" if None in versions else ""))
    meta = data["metadata"] or {}
    if not isinstance(meta, dict):
        raise bad("metadata", f"expected a mapping, found {type(meta).__name__}")
    for key, kind in (("content_hash", dict), ("custom_metadata", dict), ("platforms", list), ("sources", list),
                      ("channels", list)):
        if meta.get(key) is not None and not isinstance(meta[key], kind):
            raise bad(f"metadata.{key}", f"expected a {'mapping' if kind is dict else 'list'}, "
                      f"found {type(meta[key]).__name__}")
    for i, entry in enumerate(data["package"]):
        if not isinstance(entry, dict):
            raise bad(f"package[{i}]", f"expected a mapping, found {type(entry).__name__}")
        missing = [k for k in entry_keys if k not in entry]
        if missing:
            named = f" ({entry['name']})" if isinstance(entry.get("name"), str) else ""
            raise bad(f"package[{i}].{missing[0]}", f"package[{i}]{named} has no `{missing[0]}`, which conda-lock "
                      f"requires (every entry needs {', '.join(entry_keys)})")
        if entry.get("hash") is not None and not isinstance(entry["hash"], dict):
            raise bad(f"package[{i}].hash", f"expected a mapping, found {type(entry['hash']).__name__}")
    return meta, data["package"]


_TOP_KEY = re.compile(r"^[^\s#][^:]*:", re.M)


def metadata_block(text: str) -> str | None:
    """The ``metadata:`` block of a lock's text, up to the next top-level key (None when there is none): parsed
    alone, it costs nothing beside the package list of a lock of thousands of packages."""
    m = re.search(r"^metadata:", text, re.M)
    if m is None:
        return None
    nxt = _TOP_KEY.search(text, m.end())
    return text[m.start(): nxt.start() if nxt else len(text)]


def read_metadata(path: str | Path, text: str | None = None) -> dict[str, Any] | None:
    """Only the ``metadata:`` block of a lock, parsed without the (large) package list.

    None when the file has no readable metadata block.
    """
    from envguard.errors import UserError
    from envguard.yamlio import read_text

    if text is None:
        text = read_text(path)
    block = metadata_block(text)
    if block is None:
        return None
    try:
        data = load_subset(path, block)  # == load_fast, without importing PyYAML for conda-lock's layout
    except UserError:
        return None
    meta = data.get("metadata") if isinstance(data, dict) else None
    return meta if isinstance(meta, dict) else None


def load_subset(path: str | Path, text: str) -> Any:
    """A small YAML document (a lock's ``metadata:`` block), equal to ``load_fast(path, text)``."""
    try:
        if not _UNUSUAL.search(text):
            return _Block(text.split("\n")).document()
    except _Unsure:
        pass
    from envguard.yamlio import load_fast

    return load_fast(path, text)


def _uncommented(line: str) -> str:
    """The line without a comment after its value, when no quote comes before the comment (then nothing
    before it is a quoted scalar a ``#`` could be part of)."""
    at = line.find(" #")
    if at < 0 or "'" in line[:at] or '"' in line[:at]:
        return line
    return line[:at].rstrip(" ")


def load_small(path: str | Path, text: str) -> Any:
    """A small hand-written environment-shaped file (a variant overlay, an environment.yml), equal to
    ``load_fast(path, text)``, errors and limits included, without importing PyYAML where the block parser
    reads it. Such files carry comments after values (``- nodefaults  # never mix ...``): outside a quoted
    scalar, a space and ``#`` always open a comment in YAML, so the block parser reads the line without it;
    a construct that spans lines (block, quoted or plain multi-line scalars, flow collections) starts on a
    line the block parser refuses, and the file as written then goes to PyYAML."""
    from envguard.yamlio import check_limits, load_fast

    check_limits(path, text)  # load_fast's limits, before any parse: without PyYAML for ordinary files
    try:
        if not _UNUSUAL.search(text):
            return _Block([_uncommented(line) for line in text.split("\n")]).document()
    except _Unsure:
        pass
    return load_fast(path, text)


def _load_fast_layout(text: str) -> dict[str, Any] | None:
    heads = list(_PACKAGE.finditer(text))
    if len(heads) != 1 or _UNUSUAL.search(text):
        return None
    head = heads[0]
    m = _TOP_LEVEL.search(text, head.end())
    end = m.start() if m else len(text)
    packages = _scan(text[head.end():end])
    if not packages:
        return None
    # The rest, with the list replaced by an empty one that proves "package:" was a top-level key (inside a
    # multi-line scalar it would not come back as []).
    data = _Block((text[:head.start()] + "package: []\n" + text[end:]).split("\n")).document()
    if not isinstance(data, dict) or data.get("package") != []:
        return None
    data["package"] = packages
    return data


# --------------------------------------------------------------------------- the package list

_EMPTY = object()  # "key:" with nothing after it: null, or a nested mapping on the next lines
_NEW_DICT = object()  # "{}": a fresh dict for every use
_NEW_LIST = object()


def _scan(block: str) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = []
    entry: dict[str, Any] | None = None
    pending: str | None = None  # an entry key with an empty value: a nested mapping may follow
    nested: dict[str, Any] | None = None
    seen: dict[str, tuple[int, str, Any]] = {}  # most lines repeat ("  manager: conda"): parse each once
    for line in block.split("\n"):
        hit = seen.get(line)
        if hit is None:
            hit = seen[line] = _line(line)
        level, key, value = hit
        if value is _NEW_DICT:
            value = {}
        elif value is _NEW_LIST:
            value = []
        if level == 2:  # "    key: value" inside an entry's mapping
            if pending is not None and entry is not None:  # pending is only set under an entry
                nested = entry[pending] = {}
                pending = None
            if nested is None or value is _EMPTY:  # not under a "key:"; or a deeper level
                raise _Unsure
            nested[key] = value
            continue
        if level == 0:  # "- key: value" starts an entry
            entry = {}
            entries.append(entry)
        elif level == 3:  # blank
            continue
        elif entry is None:
            raise _Unsure
        nested = None
        if value is _EMPTY:
            entry[key] = None
            pending = key
        else:
            entry[key] = value
            pending = None
    return entries


def _line(line: str) -> tuple[int, str, Any]:
    """(level, key, value) of one line: level 0 "- k: v", 1 "  k: v", 2 "    k: v", 3 blank."""
    if line.startswith("- "):
        level, body = 0, line[2:]
    elif line.startswith("    "):
        level, body = 2, line[4:]
        if body[:1] == "-":
            raise _Unsure
    elif line.startswith("  "):
        level, body = 1, line[2:]
    elif not line.strip():
        return 3, "", None
    else:
        raise _Unsure
    if body[:1] in ("", " "):
        if not body.strip():
            return 3, "", None
        raise _Unsure
    key, value = _key_value(body)
    if value == "":
        return level, key, _EMPTY
    if value == "{}":
        return level, key, _NEW_DICT
    if value == "[]":
        return level, key, _NEW_LIST
    return level, key, _scalar(value)


# --------------------------------------------------------------------------- the rest of the file


class _Block:
    """Block mappings and sequences the way PyYAML's dumper writes them: nested mappings indented, a
    sequence in a mapping at the key's own indentation ("indentless") or deeper, one "key: value" or
    scalar per line. Blank lines and whole-line comments are skipped; anything else raises _Unsure."""

    def __init__(self, lines: list[str]) -> None:
        self.items: list[tuple[int, str]] = []
        for line in lines:
            body = line.lstrip(" ")
            if body and not body.startswith("#"):
                self.items.append((len(line) - len(body), body))
        self.i = 0

    def document(self) -> dict[str, Any]:
        if not self.items or self.items[0][0] != 0 or self.items[0][1].startswith("- "):
            raise _Unsure  # an empty document, or not a mapping at the top
        data = self._mapping(0)
        if self.i != len(self.items):
            raise _Unsure  # lines left over: indentation this reader does not follow
        return data

    def _peek(self) -> tuple[int, str] | None:
        return self.items[self.i] if self.i < len(self.items) else None

    def _mapping(self, col: int, first: str | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if first is not None:  # the first pair sits on the "- " line of a sequence item
            self._pair(out, col, first)
        while (item := self._peek()) is not None and item[0] == col and not item[1].startswith("-"):
            self.i += 1
            self._pair(out, col, item[1])
        return out

    def _pair(self, out: dict[str, Any], col: int, body: str) -> None:
        key, value = _key_value(body)
        if value:
            out[key] = _value(value)
            return
        nxt = self._peek()
        if nxt is not None and nxt[0] > col:
            out[key] = self._sequence(nxt[0]) if nxt[1].startswith("- ") else self._mapping(nxt[0])
        elif nxt is not None and nxt[0] == col and nxt[1].startswith("- "):
            out[key] = self._sequence(col)
        else:
            out[key] = None

    def _sequence(self, col: int) -> list[Any]:
        out: list[Any] = []
        while (item := self._peek()) is not None and item[0] == col and item[1].startswith("- "):
            self.i += 1
            rest = item[1][2:].rstrip(" ")
            if not rest or rest[0] == " ":
                raise _Unsure
            _, sep, after = rest.partition(":")
            if sep and (not after or after[0] == " "):
                out.append(self._mapping(col + 2, first=rest))
            else:
                out.append(_value(rest))
        return out


# --------------------------------------------------------------------------- keys and scalars


def _key_value(body: str) -> tuple[str, str]:
    key, sep, value = body.partition(":")
    if not sep or not _KEY.fullmatch(key) or (value and value[0] != " ") or _plain(key) is not key:
        raise _Unsure
    return key, value.strip()


def _value(value: str) -> Any:
    if value == "{}":
        return {}
    if value == "[]":
        return []
    return _scalar(value)


def _scalar(value: str) -> Any:
    first = value[0]
    if first == "'":
        inner = value[1:-1]
        if len(value) < 2 or value[-1] != "'" or "'" in inner.replace("''", ""):
            raise _Unsure
        return inner.replace("''", "'")
    if first == '"':
        inner = value[1:-1]
        if len(value) < 2 or value[-1] != '"' or '"' in inner or "\\" in inner:
            raise _Unsure
        return inner
    if first in _INDICATORS or ": " in value or " #" in value or value.endswith(":"):
        raise _Unsure
    return _plain(value)


def _plain(value: str) -> Any:
    """A plain scalar's value: the string itself, a boolean, None or a decimal int; _Unsure for other types."""
    if value in _BOOLS:
        return _BOOLS[value]
    if value in _NULLS:
        return None
    if value[0] in "-+.0123456789<=":
        if _DECIMAL.fullmatch(value):
            if len(value) > 4000:  # past int()'s digit limit (4300): PyYAML refuses it with its position
                raise _Unsure
            return int(value)  # "version: 1"
        if _OTHER_TYPES.fullmatch(value):
            raise _Unsure
    return value
