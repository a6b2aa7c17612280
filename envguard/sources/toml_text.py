"""TOML as pixi reads it (TOML 1.1), bounded: the one reader of pixi.toml and pyproject.toml for every command.

A manifest under the 32 MiB input limit parses in seconds, but what reads it then works per entry: one of
1.4 million dependencies took `lint` four minutes and 1.6 GB. So a parsed document holds at most as many
values as an environment.yml may hold nodes (a tenth of ``ENVGUARD_MAX_YAML_NODES``); real manifests hold a
few hundred.

:func:`parse_toml` and :func:`looks_like_toml` serve filekind and the manifest readers;
:func:`structure_count` (the linear bound checked before parsing) is public for the tests that pin it.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from envguard import settings
from envguard.errors import UserError
from envguard.yamlio import environment_node_limit


def looks_like_toml(text: str) -> bool:
    """Whether a file's first meaningful line is a TOML table header or ``key = value``."""
    for raw in text.lstrip("\ufeff").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        return bool(re.match(r"^\[\[?\s*[A-Za-z0-9_\"'.-][^\],]*\]\]?\s*(#.*)?$", line)
                    or re.match(r"""^(?:"[^"\n]*"|'[^'\n]*'|[A-Za-z0-9_.-]+)(?:\s*\.\s*(?:"[^"\n]*"|'[^'\n]*'|"""
                                r"""[A-Za-z0-9_-]+))*\s*=""", line))
    return False


def _reads_toml_11(module: Any) -> bool:
    try:
        module.loads("a = { b = 1,\n}")
    except Exception:  # noqa: BLE001 - a TOML 1.0 reader's own decode error
        return False
    return True


@lru_cache(maxsize=1)
def toml_reader() -> Any:
    """tomli >= 2.4, the TOML 1.1 reader envguard depends on.

    conda-lock's vendored poetry-core puts its own directory first on ``sys.path`` when it is imported, and
    its tomli reads TOML 1.0 only: after a lock or a freshness test in the same process, ``import tomli``
    finds that copy. The installed distribution is then imported from beyond that directory, and the
    vendored copy left in place for poetry-core.
    """
    import os
    import sys

    import tomli

    if not _reads_toml_11(tomli):
        shadowing = os.path.dirname(os.path.dirname(os.path.abspath(tomli.__file__ or "")))
        saved = {k: m for k, m in sys.modules.items() if k == "tomli" or k.startswith("tomli.")}
        saved_path = sys.path[:]
        for k in saved:
            del sys.modules[k]
        sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != shadowing]
        try:
            import tomli as installed
        finally:
            sys.path[:] = saved_path
            for k in [k for k in sys.modules if k == "tomli" or k.startswith("tomli.")]:
                del sys.modules[k]
            sys.modules.update(saved)
        tomli = installed
    return tomli


def parse_toml(text: str, shown: str) -> Any:
    """TOML 1.1, as pixi reads it (tomli >= 2.4; the standard library's tomllib reads 1.0 before 3.15)."""
    tomli = toml_reader()
    limit = environment_node_limit()
    tokens = max(2 * limit, _MIN_TOKENS)
    if structure_count(text, tokens) > tokens:
        # before parsing, in linear time and no more memory than the text: 3 million empty tables (30 MiB)
        # took tomli past the memory there was, 1.2 million took 8 s and 1.1 GB (issue #38 point 6); under
        # this count the parse is bounded, and the exact count of values below decides
        raise UserError(f"TOML document has more than {tokens:,} keys, dotted-key parts, tables and array "
                        f"items", file=shown, fix=f"pass the right file (real pixi manifests hold a few hundred), "
                                                  f"or raise {settings.MAX_YAML_NODES.name}")
    try:
        data = tomli.loads(text.lstrip("\ufeff"))
    except tomli.TOMLDecodeError as e:
        msg = str(e)
        m = re.search(r"\(at line (\d+), column (\d+)\)", msg)
        problem = re.sub(r"\s*\(at line.*$", "", msg)
        raise UserError(f"malformed TOML: {problem}", file=shown,
                        line=int(m.group(1)) if m else None, column=int(m.group(2)) if m else None,
                        fix="correct the TOML syntax at that position") from None
    except RecursionError:  # thousands of nested arrays or inline tables: no manifest nests that deep
        raise UserError("malformed TOML: arrays or tables nested too deeply", file=shown,
                        fix="flatten the nesting (a pixi manifest needs a few levels)") from None
    if holds_more_than(data, limit):
        # parsing 32 MiB is seconds; what reads a manifest then works per entry (1.4 million dependencies
        # took lint four minutes and 1.6 GB): refused like an environment.yml of as many nodes
        raise UserError(f"TOML document holds more than {limit:,} values", file=shown,
                        fix=f"pass the right file (real pixi manifests hold a few hundred), or raise "
                            f"{settings.MAX_YAML_NODES.name}")
    return data


# Strings and comments, as TOML 1.1 reads them once escaped backslashes and escaped quotes are gone (below): a
# multi-line string ends at its first three quotes, with up to two more, and one never closed takes the rest (tomli
# stops there: nothing after it is built, and the text is scanned once); what they hold is no structure. Only
# characters are repeated, never a group: a group repeated over a 30 MiB string kept a frame per repetition.
_STRINGS_AND_COMMENTS = re.compile(r'"""(?:[\s\S]*?"{3,5}|[\s\S]*)|\'\'\'(?:[\s\S]*?\'{3,5}|[\s\S]*)'
                                   r'|"[^"\n]*"|\'[^\'\n]*\'|#[^\n]*')
_STRUCTURE = "=[,.{"
#: below this many the parse is cheap whatever the value limit (a small ENVGUARD_MAX_YAML_NODES keeps its message)
_MIN_TOKENS = 20_000


def structure_count(text: str, limit: int) -> int:
    """How many of ``= [ , . {`` stand outside strings and comments (a key, a table or array, an array item or
    inline-table entry, a dotted-key part, an inline table; a float's dot too), counted exactly only where the
    plain count passes ``limit`` (0 below it). Every table a parse builds is one of them (a header's ``[``, a
    dotted part), so the count bounds what tomli would build."""
    if sum(text.count(c) for c in _STRUCTURE) <= limit:
        return 0
    if "\\" in text:  # an escaped backslash, then an escaped quote (what is left of an odd run): neither ends a
        text = text.replace("\\\\", "").replace('\\"', "")  # string, and a literal string ends at its quote anyway
    bare = _STRINGS_AND_COMMENTS.sub("", text)
    return sum(bare.count(c) for c in _STRUCTURE)


def holds_more_than(data: Any, limit: int) -> bool:
    """Whether a parsed document holds more than ``limit`` values (tables, arrays and scalars, each table's
    keys with their values), counted without recursion and stopped at the limit."""
    todo = [data]
    count = 0
    while todo:
        value = todo.pop()
        count += 1
        if count > limit:
            return True
        if isinstance(value, dict):
            todo.extend(value.values())
        elif isinstance(value, list):
            todo.extend(value)
    return False
