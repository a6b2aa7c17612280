"""Keep secrets out of lockfiles and terminals.

Channel URLs may carry ``user:password@`` userinfo or anaconda.org-style
``/t/<token>/`` path segments, and query strings such as ``?token=``.
``${VAR}`` placeholders are *not* secrets: they are kept verbatim so that the
lock stays usable by whoever has the variable set.
"""

from __future__ import annotations

import re

# A token or query value ends at a quote, bracket, comma or backtick (JSON, markdown, "(url)" in messages) so
# that masking never swallows the text around the URL (which broke `--format json`); userinfo, which always
# ends at "@", may contain the RFC 3986 sub-delimiters ' ( ) , ; and so only stops at a double quote or backtick.
_USERINFO = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<userinfo>[^/@\s\"`<>\[\]]+)@")
# Only inside a URL (after "scheme://", with no space or quote in between): a local path such as
# /srv/t/envs is not a token.
_TOKEN_PATH = re.compile(r"(?P<pre>[a-zA-Z][a-zA-Z0-9+.-]*://[^\s\"'`<>]*?)/t/(?P<tok>[^/\s\"'`<>()\[\],;]+)")
_QUERY_SECRET = re.compile(r"(?P<key>[?&](?:token|access_token|api_key|apikey|password|auth)=)[^&\s#\"'`<>()\[\],;]+",
                           re.I)
_PLACEHOLDER = re.compile(r"^\$\{[A-Za-z_][A-Za-z0-9_]*\}$")

MASK = "***"


def _mask_userinfo(m: re.Match[str]) -> str:
    userinfo = m.group("userinfo")
    parts = userinfo.split(":", 1)
    if all(_PLACEHOLDER.match(p) for p in parts):
        return m.group(0)
    return f"{m.group('scheme')}{MASK}@"


def _mask_token(m: re.Match[str]) -> str:
    tok = m.group("tok")
    return m.group(0) if _PLACEHOLDER.match(tok) else f"{m.group('pre')}/t/{MASK}"


def redact(text: str) -> str:
    """Mask credentials in every URL found in ``text``; keep ``${VAR}`` placeholders."""
    text = _USERINFO.sub(_mask_userinfo, text)
    text = _TOKEN_PATH.sub(_mask_token, text)
    return _QUERY_SECRET.sub(lambda m: m.group("key") + MASK, text)


def has_credentials(url: str) -> bool:
    """True when ``url`` carries a literal secret (not a ``${VAR}`` placeholder)."""
    return redact(url) != url
