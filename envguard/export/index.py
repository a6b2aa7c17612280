"""Find the artifact an installed dist came from on a package index, with its sha256.

pip records no index for what it installs from one. Given the index URLs (``--index-url``, else pip's own
configuration), each project page (PEP 691 JSON, else PEP 503 HTML) is read once and the file chosen is
the wheel of the installed version whose tags match the installed ``WHEEL`` tags; failing that, the
version's sdist (the dist was then built on this machine). Pages are untrusted: size-capped, only
http(s)/file links are taken, credentials never reach a result.
"""

from __future__ import annotations

import configparser
import json
import os
import sys
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit, urlunsplit

from envguard.model import pep503
from envguard.redact import redact
from envguard.versions import pypi_version

PYPI = "https://pypi.org/simple"
_MAX_PAGE = 64 << 20  # torch's PyPI page is a few MB
_ACCEPT = "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1"


@dataclass(frozen=True)
class Found:
    url: str  # without credentials or fragment
    sha256: str | None
    index: str  # the index it was found on (without credentials)
    sdist: bool = False  # no wheel matched the installed tags: the sdist (built on the installing machine)


@dataclass(frozen=True)
class _Link:
    filename: str
    url: str
    sha256: str | None


def strip_credentials(url: str) -> str:
    """The URL without userinfo, query secrets or ``/t/<token>/`` (what a lock may hold)."""
    parts = urlsplit(url)
    if parts.username is not None or parts.password is not None:
        host = parts.hostname or ""
        if parts.port is not None:
            host = f"{host}:{parts.port}"
        parts = parts._replace(netloc=host)
    return redact(urlunsplit(parts))


# ------------------------------------------------------------------ pip's configuration


def _pip_config_files(env: Mapping[str, str]) -> list[Path]:
    """pip's configuration files in its order (global, user, site); PIP_CONFIG_FILE=os.devnull turns them off."""
    explicit = env.get("PIP_CONFIG_FILE")
    if explicit == os.devnull:
        return []
    home = Path(env.get("HOME") or Path.home())
    xdg_dirs = (env.get("XDG_CONFIG_DIRS") or "/etc/xdg").split(os.pathsep)
    files = [Path(d) / "pip" / "pip.conf" for d in xdg_dirs if d] + [Path("/etc/pip.conf")]
    if sys.platform == "win32":
        files = [Path(env.get("ProgramData", r"C:\ProgramData")) / "pip" / "pip.ini"]
    xdg_home = Path(env.get("XDG_CONFIG_HOME") or home / ".config")
    files += [home / ".pip" / "pip.conf", xdg_home / "pip" / "pip.conf"]
    if explicit:
        files.append(Path(explicit))
    if env.get("VIRTUAL_ENV"):
        files.append(Path(env["VIRTUAL_ENV"]) / "pip.conf")
    return files


def pip_index_urls(env: Mapping[str, str] | None = None) -> list[str]:
    """The indexes pip would use: PIP_INDEX_URL/PIP_EXTRA_INDEX_URL, else its configuration, else PyPI."""
    env = os.environ if env is None else env
    index: str | None = None
    extra: list[str] = []
    for f in _pip_config_files(env):
        parser = configparser.RawConfigParser()
        try:
            parser.read(f, encoding="utf-8")
        except (configparser.Error, OSError, UnicodeDecodeError):
            continue
        for section in ("global", "install"):
            if parser.has_option(section, "index-url"):
                index = parser.get(section, "index-url").strip() or index
            if parser.has_option(section, "extra-index-url"):
                extra = parser.get(section, "extra-index-url").split()
    if env.get("PIP_INDEX_URL"):
        index = env["PIP_INDEX_URL"].strip()
    if env.get("PIP_EXTRA_INDEX_URL"):
        extra = env["PIP_EXTRA_INDEX_URL"].split()
    urls = [index or PYPI] + extra
    return list(dict.fromkeys(u.rstrip("/") for u in urls if u))


# ------------------------------------------------------------------ reading a project page


class _Anchors(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[tuple[str, str]] = []  # (href, text)
        self._href: str | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self._href = dict(attrs).get("href")
            self._text = []

    def handle_data(self, data: str) -> None:
        if self._href is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._href is not None:
            self.links.append((self._href, "".join(self._text).strip()))
            self._href = None


def _sha256_fragment(url: str) -> str | None:
    frag = urlsplit(url).fragment
    for part in frag.split("&"):
        k, _, v = part.partition("=")
        if k == "sha256" and len(v) == 64:
            return v.lower()
    return None


def _links(page_url: str, body: bytes, content_type: str) -> list[_Link]:
    out: list[_Link] = []
    if "json" in content_type:
        try:
            data = json.loads(body)
        except ValueError:
            return []
        for f in data.get("files") or [] if isinstance(data, dict) else []:
            if not isinstance(f, dict) or not isinstance(f.get("url"), str) or not isinstance(f.get("filename"), str):
                continue
            listed = f.get("hashes")
            hashes = listed if isinstance(listed, dict) else {}
            sha = hashes.get("sha256") if isinstance(hashes.get("sha256"), str) else None
            url = urljoin(page_url, f["url"])
            out.append(_Link(f["filename"], url, (sha or _sha256_fragment(url) or "").lower() or None))
        return out
    parser = _Anchors()
    try:
        parser.feed(body.decode("utf-8", "replace"))
    except Exception:  # noqa: BLE001 - html.parser gives up on some malformed pages; keep what it found
        pass
    for href, text in parser.links:
        url = urljoin(page_url, href)
        name = text or unquote(urlsplit(url).path.rsplit("/", 1)[-1])
        out.append(_Link(name, url, _sha256_fragment(url)))
    return out


class Unreachable(Exception):
    """The index itself cannot be reached (not: the project is missing)."""


def _fetch(url: str, timeout: float) -> tuple[bytes, str] | None:
    """(body, content type) of a project page; None when the project is not on the index."""
    if url.startswith("file:"):
        path = Path(unquote(urlsplit(url).path))
        for candidate in (path / "index.html", path):
            if candidate.is_file():
                with open(candidate, "rb") as fh:
                    return fh.read(_MAX_PAGE), "text/html"
        if not path.parent.is_dir():
            raise Unreachable(f"{path.parent} is not a directory")
        return None
    import urllib.error
    import urllib.request

    headers = {"Accept": _ACCEPT, "User-Agent": "envguard-export"}
    parts = urlsplit(url)
    if parts.username is not None:  # pip's user:password@ in an index URL: HTTP basic auth, never in the URL
        import base64

        pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
        headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
        host = (parts.hostname or "") + (f":{parts.port}" if parts.port is not None else "")
        url = urlunsplit(parts._replace(netloc=host))
    req = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:  # http(s) only, checked below
            return resp.read(_MAX_PAGE), resp.headers.get("Content-Type", "")
    except urllib.error.HTTPError as e:
        if e.code in (404, 410):
            return None
        raise Unreachable(f"HTTP {e.code}") from None
    except (urllib.error.URLError, OSError, ValueError) as e:
        reason = getattr(e, "reason", e)
        raise Unreachable(str(reason)) from None


# ------------------------------------------------------------------ choosing the file


def _matches(link: _Link, name: str, version: str, tags: frozenset[str]) -> str | None:
    """"wheel" or "sdist" when the link is this name and version (and, for a wheel, one of the tags)."""
    from packaging.utils import InvalidSdistFilename, InvalidWheelFilename, parse_sdist_filename, parse_wheel_filename
    from packaging.version import InvalidVersion  # a wheel file name with a bad version raises it

    fn = link.filename
    want = pypi_version(version)
    if want is None:
        return None
    if fn.endswith(".whl"):
        try:
            wname, wversion, _build, wtags = parse_wheel_filename(fn)
        except (InvalidWheelFilename, InvalidVersion):
            return None
        if wname != pep503(name) or wversion != want:
            return None
        return "wheel" if not tags or {str(t) for t in wtags} & tags else None
    try:
        sname, sversion = parse_sdist_filename(fn)
    except (InvalidSdistFilename, InvalidVersion):
        return None
    return "sdist" if sname == pep503(name) and sversion == want else None


class IndexClient:
    """Look dists up on a list of indexes; an index that cannot be reached is asked nothing more."""

    def __init__(self, urls: Sequence[str], *, timeout: float = 15.0) -> None:
        self.urls = [u.rstrip("/") for u in urls if u.startswith(("http://", "https://", "file:"))]
        self.timeout = timeout
        self.unreachable: dict[str, str] = {}  # index (without credentials) -> why

    def find(self, name: str, version: str, tags: Sequence[str]) -> Found | None:
        wanted = frozenset(tags)
        for base in self.urls:
            shown = strip_credentials(base)
            if shown in self.unreachable:
                continue
            page = f"{base}/{pep503(name)}/"
            try:
                got = _fetch(page, self.timeout)
            except Unreachable as e:
                self.unreachable[shown] = str(e)
                continue
            if got is None:
                continue
            links = [lk for lk in _links(page, *got) if lk.url.startswith(("http://", "https://", "file:"))]
            for kind in ("wheel", "sdist"):
                for lk in links:
                    if _matches(lk, name, version, wanted) == kind:
                        clean = strip_credentials(lk.url.split("#", 1)[0])
                        return Found(clean, lk.sha256, shown, sdist=kind == "sdist")
        return None

    def find_all(self, wanted: Sequence[tuple[str, str, Sequence[str]]], workers: int = 8) -> list[Found | None]:
        """``find`` for many (name, version, tags), a few pages at a time."""
        if not wanted or not self.urls:
            return [None] * len(wanted)
        with ThreadPoolExecutor(max_workers=max(1, min(workers, len(wanted)))) as pool:
            return list(pool.map(lambda w: self.find(*w), wanted))
