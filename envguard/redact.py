"""Keep secrets out of lockfiles and terminals.

Channel URLs may carry ``user:password@`` (or ``user@``) userinfo or anaconda.org-style ``/t/<token>/``
path segments, and query strings such as ``?token=``. ``${VAR}`` placeholders are *not* secrets: they are
kept verbatim so that the lock stays usable by whoever has the variable set; a userinfo that mixes a
placeholder with a literal (``${USER}:literalpw@``) is masked whole.

Linear time in the length of the text, whatever it holds: every message and report passes through
:func:`redact`, including ones that quote hostile input (a 100,000-character dependency, a 20 MB file).
The scan looks for ``://`` with ``str.find`` and inspects the few characters around each occurrence;
the only regular expressions used are anchored at a fixed position or start with a literal, so none of
them backtracks over the text (``tests/test_redact.py`` times 1 MB of adversarial input).
"""

from __future__ import annotations

import re

MASK = "***"

# A token or query value ends at a quote, bracket, comma or backtick (JSON, markdown, "(url)" in messages) so
# that masking never swallows the text around the URL (which broke `--format json`); userinfo, which always
# ends at "@", may contain the RFC 3986 sub-delimiters ' ( ) , ; and so only stops at a double quote or backtick.
_USERINFO_RUN = re.compile(r"[^/@\s\"`<>\[\]]*")  # matched at one position (after "://")
_URL_END = re.compile(r"[\s\"'`<>]")  # where a URL's text ends (for /t/<token>)
_TOKEN_RUN = re.compile(r"[^/\s\"'`<>()\[\],;]*")  # matched at one position (after "/t/")
_QUERY_SECRET = re.compile(r"(?P<key>[?&](?:token|access_token|api_key|apikey|password|auth)=)[^&\s#\"'`<>()\[\],;]+",
                           re.I)
_PLACEHOLDER = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*\}")
_SCHEME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-")


def _is_placeholder(text: str) -> bool:
    return _PLACEHOLDER.fullmatch(text) is not None


def _has_scheme(text: str, sep: int, floor: int) -> bool:
    """Whether a URL scheme (a letter, then letters, digits, ``+.-``) ends at ``sep`` (the index of "://").

    Walks back over scheme characters, not past ``floor``: every character is walked over at most once
    for all the separators of one text, because a run of scheme characters cannot contain "://"."""
    i = sep - 1
    letter = False
    while i >= floor and text[i] in _SCHEME_CHARS:
        letter = letter or text[i].isalpha()
        i -= 1
    return letter


def _separators(text: str) -> list[int]:
    """Indexes of every "://" that follows a URL scheme."""
    found: list[int] = []
    floor = 0
    start = text.find("://")
    while start != -1:
        if _has_scheme(text, start, floor):
            found.append(start)
        floor = start + 3
        start = text.find("://", floor)
    return found


def _mask_userinfo(text: str, seps: list[int]) -> str:
    out: list[str] = []
    last = 0
    for sep in seps:
        begin = sep + 3
        if begin < last:
            continue
        run = _USERINFO_RUN.match(text, begin)
        end = run.end() if run else begin
        if end == begin or end >= len(text) or text[end] != "@":
            continue
        userinfo = text[begin:end]
        if all(_is_placeholder(p) for p in userinfo.split(":", 1)):
            continue
        out.append(text[last:begin])
        out.append(MASK)
        last = end
    if not out:
        return text
    out.append(text[last:])
    return "".join(out)


def _mask_tokens(text: str) -> str:
    """Mask ``/t/<token>`` path segments that lie inside a URL (after "scheme://", before its end): a local
    path such as /srv/t/envs is not a token."""
    if "/t/" not in text:
        return text
    out: list[str] = []
    last = 0
    url_from = -1  # start of the URL text the current position lies in, -1 when none
    url_to = -1  # where that URL's text ends
    seps = _separators(text)
    k = 0
    pos = text.find("/t/")
    while pos != -1:
        # the last URL that starts before this /t/ and has not ended before it
        if k < len(seps) and seps[k] < pos:
            while k < len(seps) and seps[k] < pos:
                k += 1
            url_from = seps[k - 1]
            if url_from >= url_to:  # a URL of its own; else it lies inside the previous one's text
                end = _URL_END.search(text, url_from)
                url_to = end.start() if end else len(text)
        nxt = pos + 3
        if url_from != -1 and pos >= url_from + 3 and pos < url_to:
            run = _TOKEN_RUN.match(text, nxt)
            tok_end = run.end() if run else nxt
            token = text[nxt:tok_end]
            if token and not _is_placeholder(token):
                out.append(text[last:nxt])
                out.append(MASK)
                last = tok_end
            nxt = max(nxt, tok_end)
        pos = text.find("/t/", nxt)
    if not out:
        return text
    out.append(text[last:])
    return "".join(out)


def redact(text: str) -> str:
    """Mask credentials in every URL found in ``text``; keep ``${VAR}`` placeholders. Linear time."""
    if "://" in text:
        text = _mask_userinfo(text, _separators(text))
        text = _mask_tokens(text)
    if "=" in text:
        text = _QUERY_SECRET.sub(lambda m: m.group("key") + MASK, text)
    return text


def has_credentials(url: str) -> bool:
    """True when ``url`` carries a literal secret (not a ``${VAR}`` placeholder)."""
    return redact(url) != url


def shorten(text: str, limit: int = 200) -> str:
    """``text`` cut to about ``limit`` characters for quoting in a one-line message (hostile input can be
    megabytes long): the head, an ellipsis and how much was left out."""
    text = str(text)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit} more characters)"


# What a message must never pass on raw from the text it quotes: C0 and C1 controls and DEL (a newline that
# forges a second line, ESC starting a terminal's OSC/CSI sequence), line and paragraph separators, and the
# bidirectional overrides that reorder what a terminal shows. Each is written as its escape (\n, \x1b,
# \u202e), so the message stays one line and says what the input held.
_SHOWN_AS = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_CONTROLS = [*range(0x20), 0x7F, *range(0x80, 0xA0), 0x200E, 0x200F, 0x2028, 0x2029, *range(0x202A, 0x202F),
             *range(0x2066, 0x206A)]
_ESCAPED = {cp: _SHOWN_AS.get(chr(cp)) or (f"\\x{cp:02x}" if cp < 0x100 else f"\\u{cp:04x}") for cp in _CONTROLS}
_ESCAPED_BUT_NEWLINES = {cp: text for cp, text in _ESCAPED.items() if cp != 0x0A}


def escape_controls(text: str, *, keep_newlines: bool = False) -> str:
    """``text`` with every control character written as its escape (see ``_CONTROLS``); linear time.
    ``keep_newlines`` keeps the line breaks of a message written as several lines on purpose."""
    return text.translate(_ESCAPED_BUT_NEWLINES if keep_newlines else _ESCAPED)


WORD_LIMIT = 200
_LONG_WORD = re.compile(r"(?<!\S)\S{%d,}" % (WORD_LIMIT + 1))  # noqa: UP031 - a regex's braces; only tried where a word starts: linear


def shorten_words(text: str, limit: int = WORD_LIMIT, *, keep_newlines: bool = False) -> str:
    """Every word (a run without whitespace) longer than ``limit`` cut to its head, and every control
    character escaped (:func:`escape_controls`): what a message quotes from hostile input (a 100,000-character
    dependency, a path holding a newline and a terminal escape) stays a line, not a screenful."""
    text = escape_controls(text, keep_newlines=keep_newlines)
    if len(text) <= limit:
        return text
    pattern = _LONG_WORD if limit == WORD_LIMIT else re.compile(r"(?<!\S)\S{%d,}" % (limit + 1))  # noqa: UP031
    return pattern.sub(lambda m: f"{m.group()[:limit]}… ({len(m.group()) - limit} more characters)", text)
