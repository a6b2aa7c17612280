"""conda's match-spec grammar, as conda (and conda-lock's parser) reads a dependency line.

rattler parses environment files leniently (``strict=False``) and so accepts lines that conda rejects or
reads otherwise than written: ``torchvision>=*=*cuda112*`` (an operator compared against nothing),
``foo >=1 <2`` (two constraints separated by a space, which conda reads as the single version ``1<2``),
``x=1.0=a=b`` (a third ``=``). Such a line passes a quick look and surfaces at solve time. This module
says what is wrong with a spec in conda's terms, in one sentence, or nothing. Pure: no imports beyond re.

The shape conda reads (conda/models/match_spec.py, ``_parse_spec_str``; CEP 29, the MatchSpec query
language; CEP 26 for package names)::

    [channel[/subdir]::]name[ version[ build]][[key=value, ...]][(key=value, ...)]
    name=version=build        name==version        name>=1,<2|==3

where the version/build separator is a space, or an ``=`` that does not belong to an operator, and the
bracket items are separated by commas (or, historically, spaces). rattler's conditional forms
(``pkg[when="__win"]``, ``pkg[extras=[a,b]]``, ``pkg[flags=[cuda]]``) pass here: rattler, which
envguard solves with, judges them (``lock.spec`` asks its parser after this grammar).
"""

from __future__ import annotations

import re

_OPERATORS = ("==", "!=", "<=", ">=", "~=", "<", ">", "=")
_OPERATOR_CHARS = frozenset("=!<>~")
_NAME_CHARS = re.compile(r"^(?:\*|[A-Za-z0-9_][A-Za-z0-9_.+-]*)$")
# CEP 26 (conda's package names): letters, digits and single separators; one leading `_` at most, or the
# `__` of a virtual package; at most 64 characters. Case-insensitive.
_CEP26_NAME = re.compile(r"^(?:__)?(?:[a-z0-9]|[a-z0-9_](?!_))[._-]?(?:[a-z0-9]+(?:[._-]|$))*$", re.IGNORECASE)
_MAX_NAME = 64
_BUILD = re.compile(r"^[A-Za-z0-9_.*+!]+$")
_VERSION_CHARS = re.compile(r"^[A-Za-z0-9_.+!*-]+$")
# conda (and CEP 29) separate bracket items with `,`, or historically with spaces
_BRACKET_ITEM = re.compile(r"""\s*([A-Za-z0-9_-]+)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^,\s'"\[\]]+))\s*(?:,|\s|$)""")
_BRACKET_KEYS = frozenset({
    "version", "build", "build_number", "channel", "subdir", "md5", "sha256", "fn", "url", "license",
    "license_family", "track_features", "features", "name", "namespace",
})
# rattler's conditional forms, which conda does not read: `pkg[when="__win"]`, `pkg[extras=[a,b]]`,
# `pkg[flags=[cuda]]`. Their values are rattler's to judge (lock.spec asks its MatchSpec parser next).
RATTLER_KEYS = frozenset({"when", "extras", "flags"})
_PACKAGE_FILE = (".conda", ".tar.bz2")


def version_problem(text: str) -> str | None:
    """What conda rejects in a version expression (``>=1.2,<2|3.*``), or None."""
    if text.count("(") != text.count(")"):
        return f"unbalanced parentheses in `{text}`"
    flat = text.replace("(", "").replace(")", "")
    for alternative in flat.split("|"):
        for atom in alternative.split(","):
            problem = _atom_problem(atom.strip(), text)
            if problem:
                return problem
    return None


def _atom_problem(atom: str, whole: str) -> str | None:
    if not atom:
        return f"an empty constraint in `{whole}` (a stray `,` or `|`)"
    op = next((o for o in _OPERATORS if atom.startswith(o)), "")
    value = atom[len(op):]
    if op and not value:
        return f"`{atom}`: an operator needs a version"
    if op and value[0] in _OPERATOR_CHARS:
        return f"`{atom}` has no valid operator (write ==, !=, <=, >=, <, >, ~= or =)"
    if op not in ("", "=", "==") and value.lstrip(".").startswith("*"):
        return f"`{atom}` compares against nothing: an operator needs a version, `*` is not one"
    if op == "~=" and value.endswith("*"):
        return f"`{atom}`: conda does not take `~=` with a wildcard"
    if op in ("", "=", "==", "!="):
        core = value.replace("*", "0")  # a glob: 1.2.*, 1.*, *
    else:
        # ">=1.2.*" and ">=1.2*" are read as ">=1.2" (conda drops the superfluous trailing glob)
        core = value[:-2] if value.endswith(".*") else value.removesuffix("*")
        if "*" in core:
            return f"`{atom}`: a wildcard inside a compared version"
    return _plain_version_problem(core, atom)


def _plain_version_problem(version: str, atom: str) -> str | None:
    if not _VERSION_CHARS.match(version):
        return f"`{atom}` has characters a conda version cannot hold"
    if "-" in version and "_" in version:
        return f"`{atom}` mixes `-` and `_` in one version"
    epoch, _, rest = version.rpartition("!")
    if "!" in epoch or (epoch and not epoch.isdigit()):
        return f"`{atom}`: the epoch before `!` must be one integer"
    public, plus, local = rest.partition("+")
    if plus and (not public or "+" in local or not local):
        return f"`{atom}`: a local version needs one `+` between two non-empty parts"
    for part in (public, local):
        # a trailing "_" is conda's way to order 1.0.1_ before 1.0.1a (openssl)
        if part and any(c == "" for c in re.split(r"[._-]", part.removesuffix("_"))):
            return f"`{atom}` has an empty version component"
    return None


def _split_version_build(rest: str) -> tuple[str, str | None] | str:
    """(version, build) of what follows the name, or why conda cannot read it."""
    # "pip>= 21.3.1", "1.0 , < 2.0": spaces after an operator and around , and | belong to the version
    rest = re.sub(r"(==|!=|<=|>=|~=|<|>|=)\s+", r"\1", rest)
    rest = re.sub(r"\s*([,|])\s*", r"\1", rest)
    tokens = rest.split()
    if len(tokens) >= 2 and tokens[1][:1] in _OPERATOR_CHARS:
        joined = ",".join(tokens)
        return (f"two constraints separated by a space (`{' '.join(tokens)}`): conda reads them as one version; "
                f"join them with a comma: `{joined}`")
    if len(tokens) > 2:
        return f"too many space-separated parts (`{rest}`): conda reads NAME VERSION BUILD"
    if len(tokens) == 2:
        return tokens[0], tokens[1]
    token = tokens[0]
    for i in range(1, len(token)):
        # an "=" that is not part of an operator separates the build: 2.1=cuda*, >=2.7=cuda12*, =2.1=py_0
        if token[i] == "=" and token[i - 1] not in "=!<>~,|" and token[i + 1:i + 2] != "=":
            return token[:i], token[i + 1:]
    return token, None


def _name_problem(name: str) -> str | None:
    """Why ``name`` is no package name conda's grammar reads (CEP 26 for its characters), or None."""
    if not _NAME_CHARS.match(name):
        return f"`{name}` is not a package name (letters, digits, `_`, `.`, `+`, `-`)"
    if name != "*" and "*" not in name and (len(name) > _MAX_NAME or not _CEP26_NAME.match(name)):
        return (f"`{name}` is not a conda package name (CEP 26: letters, digits and single `.`, `-` or `_` "
                f"between them, at most {_MAX_NAME} characters)")
    return None


def match_spec_problem(spec: str) -> str | None:
    """Why conda's match-spec grammar rejects ``spec``, or reads it otherwise than written; None when fine."""
    s = spec.split("#", 1)[0].strip()
    if not s:
        return "an empty spec"
    if s.endswith(_PACKAGE_FILE) or ("://" in s and "::" not in s):
        return None  # a package URL or file: conda reads name, version and build from the file name
    head, bracketed = s.partition("[")[0], s[len(s.partition("[")[0]):]
    if "://" in head:
        # a channel given as a URL (`https://conda.anaconda.org/conda-forge::python=3.11`): the spec after it is
        # judged like any other, as conda and rattler read the channel off first
        s = head.rpartition("::")[2] + bracketed
    bracket = ""
    if "[" in s or _TRAILING_PARENS.search(s):
        sections = _split_sections(s)
        if isinstance(sections, str):
            return sections
        s, bracket, parens = sections
        if parens:
            problem = _bracket_problem(parens, "(", ")")
            if problem and parens.strip() != "optional":
                return problem
    if "::" in s:
        channel, _, s = s.rpartition("::")
        if not channel.strip() or ":" in s:
            return "write the channel as `channel::name`"
    elif ":" in s:
        return "a single `:`; write the channel as `channel::name`"
    m = re.match(r"^([^\s=<>!~]+)(.*)$", s)
    if m is None:
        return "no package name"
    name, rest = m.group(1), m.group(2).strip()
    problem = _name_problem(name)
    if problem:
        return problem
    problem = _positional_problem(rest) if rest else None
    if problem:
        return problem
    if bracket:
        return _bracket_problem(bracket)
    return None


def _positional_problem(rest: str) -> str | None:
    """What conda rejects in the version and build that follow the name, or None."""
    split = _split_version_build(rest)
    if isinstance(split, str):
        return split
    version, build = split
    if version.startswith("=") and not version.startswith("=="):
        if version[1:2] in _OPERATOR_CHARS and version[1:]:
            return f"`{version}` has no valid operator (did you mean `{version[1]}=`?)"
        version = version[1:] or "*"  # "name=1.2" is the fuzzy "1.2.*"
    problem = version_problem(version)
    if problem:
        return problem
    if build is not None and not _BUILD.match(build):
        extra = " (a third `=`?)" if "=" in build else ""
        return f"`{build}` is not a build string{extra}: letters, digits, `_`, `.` and `*` only"
    return None


def _closing(text: str, start: int) -> int:
    """The index of the bracket closing the one at ``start`` (quotes and nested lists skipped), or -1."""
    pair = {"[": "]", "(": ")"}[text[start]]
    depth, quote = 0, ""
    for i in range(start, len(text)):
        ch = text[i]
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch == text[start]:
            depth += 1
        elif ch == pair:
            depth -= 1
            if depth == 0:
                return i
    return -1


# a trailing `(optional)` or `(key=value, ...)` section, not the parentheses of a version expression
_TRAILING_PARENS = re.compile(r"\(\s*(?:optional\b|[A-Za-z_][A-Za-z0-9_-]*\s*=[^=])[^()]*\)\s*$")


def _split_sections(s: str) -> tuple[str, str, str] | str:
    """(positional part, ``[...]`` body, ``(...)`` body) of a spec, as conda strips them off: the keyword
    section last, once, optionally followed by a parenthesised one (``foo[build=3](optional)``)."""
    trailing = _TRAILING_PARENS.search(s)
    start = s.find("[") if "[" in s else trailing.start() if trailing else len(s)
    head, rest, bracket, parens = s[:start].strip(), s[start:], "", ""
    if rest.startswith("["):
        end = _closing(rest, 0)
        if end < 0:
            return "a `[key=value]` section must be closed with `]`"
        bracket, rest = rest[1:end], rest[end + 1:].strip()
    if rest.startswith("("):
        end = _closing(rest, 0)
        if end < 0:
            return "a `(...)` section must be closed with `)`"
        parens, rest = rest[1:end], rest[end + 1:].strip()
    if rest:
        return "a `[key=value]` section must come last, once (conda's match-spec grammar)"
    return head, bracket, parens


def _bracket_problem(text: str, opening: str = "[", closing: str = "]") -> str | None:
    pos = 0
    while pos < len(text):
        if text[pos] in ", \t":
            pos += 1
            continue
        rattler = re.match(r"\s*([A-Za-z0-9_-]+)\s*=\s*", text[pos:])
        if rattler and rattler.group(1) in RATTLER_KEYS:  # rattler's form: up to the next top-level item
            at = pos + rattler.end()
            end = _closing(text, at) if text[at:at + 1] == "[" else -1
            if end >= 0:
                pos = end + 1
            else:
                item = _BRACKET_ITEM.match(text, pos)
                pos = item.end() if item is not None and item.end() > pos else len(text)
            continue
        m = _BRACKET_ITEM.match(text, pos)
        if m is None or m.end() == pos:
            return f"cannot read `{opening}{text}{closing}`: write `{opening}key=value, ...{closing}`"
        key = m.group(1)
        value = next(g for g in m.groups()[1:] if g is not None)
        if key not in _BRACKET_KEYS:
            return f"unknown key `{key}` in `{opening}...{closing}` (conda's match-spec keys: " \
                   f"{', '.join(sorted(_BRACKET_KEYS))}; rattler's: {', '.join(sorted(RATTLER_KEYS))})"
        if key == "version":
            problem = version_problem(value)
            if problem:
                return problem
        if key == "build" and not _BUILD.match(value):
            return f"`{value}` is not a build string"
        pos = m.end()
    return None


def rattler_form(spec: str) -> str:
    """``spec`` as rattler's parser reads the same request, for a spec conda's grammar accepts.

    rattler reads a narrower grammar than conda: bracket items separated by commas only, no trailing
    ``(optional)`` section, no superfluous glob after an ordering operator (``>=1.26*``), and a package
    file as a URL. conda reads each of these; this writes them the way rattler does, so that rattler judges
    what it must (its own conditional keys, its version parser) and not what conda's grammar allows.
    """
    s = spec.split("#", 1)[0].strip()
    if s.endswith(_PACKAGE_FILE) and "://" not in s:
        return "file://" + ("" if s.startswith("/") else "/") + s.lstrip("./")  # a path: any absolute URL
    if "[" in s or _TRAILING_PARENS.search(s):
        sections = _split_sections(s)
        if isinstance(sections, str):
            return s
        head, bracket, _ = sections
        items = []
        pos = 0
        while bracket and pos < len(bracket):
            if bracket[pos] in ", \t":
                pos += 1
                continue
            m = _BRACKET_ITEM.match(bracket, pos)
            key = re.match(r"\s*([A-Za-z0-9_-]+)\s*=\s*", bracket[pos:])
            if (key and key.group(1) in RATTLER_KEYS) or m is None or m.end() == pos:
                items.append(bracket[pos:].strip().rstrip(","))  # rattler's own forms: as written, last
                break
            items.append(bracket[pos:m.end()].strip().rstrip(","))
            pos = m.end()
        s = head + (f"[{', '.join(items)}]" if items else "")
    return re.sub(r"((?:>=|<=|>|<|~=)\s*[^\s,|*]+?)\.?\*(?=$|[\s,|\]])", r"\1", s)


__all__ = ["RATTLER_KEYS", "match_spec_problem", "rattler_form", "version_problem"]
