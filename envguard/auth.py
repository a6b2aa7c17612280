"""Channel credentials handed to rattler through its authentication mechanism, never inside a URL.

rattler writes the URLs it is given into its caches (``rattler/cache/repodata/*.info.json``, mode 0644, and
the shard caches), so a channel URL with ``user:password@`` or ``/t/<token>/`` in it would leave the secret
on disk. envguard therefore strips the credentials from every channel and package URL before rattler sees
it (:meth:`Credentials.strip`) and hands them to rattler's HTTP client instead (:meth:`Credentials.client`):

* ``user:password@`` becomes an ``Authorization: Basic`` header that an ``AddHeadersMiddleware`` adds to each
  request for that host (and channel path): the credential stays in this process's memory;
* a ``/t/<token>`` first path segment (anaconda.org style) becomes a ``CondaToken`` entry of rattler's
  authentication storage, which puts it back into each request's path. rattler reads that storage from the
  file named by ``RATTLER_AUTH_FILE`` when the client is built; envguard writes it, merged with the user's
  own ``RATTLER_AUTH_FILE`` if any, into an anonymous in-memory file (``memfd_create``) that the kernel drops
  with the process, builds the client, and closes it. Where there is no memfd_create the file lives in a
  private (0700) directory named after the process, and the next run removes it if its owner was killed.

``${VAR}`` placeholders are expanded by the callers before the URLs get here; what goes into a lock or a
conda-meta record is always the URL as the user wrote it, with placeholders (envguard.redact masks literals).
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import tempfile
import threading
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from envguard.errors import UserError
from envguard.leftovers import remove_dead_owners
from envguard.redact import redact

AUTH_FILE_ENV = "RATTLER_AUTH_FILE"
AUTH_DIR_TAG = "envguard-auth-"  # + "<pid>-": where a system without memfd_create keeps the file
_TOKEN_SEGMENT = re.compile(r"^/t/(?P<token>[^/]+)(?P<rest>/.*)?$")
_auth_file_lock = threading.Lock()  # RATTLER_AUTH_FILE is process-wide while a client is built


@dataclass(frozen=True)
class Split:
    """A URL without its credentials, and what was taken out of it."""

    url: str
    host: str
    user: str | None = None
    password: str | None = None
    token: str | None = None


def split_credentials(url: str) -> Split:
    """``https://u:p@host/t/tok/chan/x`` -> ``https://host/chan/x`` with user u, password p, token tok.

    Only a ``/t/<token>`` that is the first path segment is taken out: rattler's token authentication puts
    the token back there, and nowhere else. URLs without a network location (``file://``) are unchanged.
    """
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
    except ValueError:  # a malformed host: nothing rattler could reach either; left as it is
        return Split(url, "")
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return Split(url, host)
    user = password = token = None
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, hostport = netloc.rpartition("@")
        name, sep, secret = userinfo.partition(":")
        user = unquote(name)
        password = unquote(secret) if sep else ""
        netloc = hostport
    path = parts.path
    m = _TOKEN_SEGMENT.match(path)
    if m:
        token = unquote(m["token"])
        path = m["rest"] or ""
    if user is None and token is None:
        return Split(url, host)
    return Split(urlunsplit((parts.scheme, netloc, path, parts.query, parts.fragment)), host, user, password, token)


def fill_masked(url: str) -> str | None:
    """A lock's URL whose credential is masked (``***``: envguard never writes one) made usable again here:
    with the credential of the configured URL (.condarc, ``CONDA_*``, pixi's config: envguard.condaconfig)
    that, masked, is its prefix; else without the masked part where rattler's authentication file
    (``RATTLER_AUTH_FILE``, ``~/.rattler/credentials.json``) holds a credential for its host, which rattler's
    client then sends. None when neither supplies one."""
    from envguard import condaconfig
    from envguard.redact import MASK

    for known in condaconfig.load().with_credentials():
        masked = redact(known).rstrip("/")
        if url == masked or url.startswith(masked + "/"):
            return known.rstrip("/") + url[len(masked):]
    host = split_credentials(url.replace(MASK, "x")).host
    if host and _rattler_knows(host):
        parts = urlsplit(url)
        netloc = parts.netloc.rpartition("@")[2] if parts.netloc.startswith(MASK + "@") else parts.netloc
        path = parts.path[len("/t/" + MASK):] if parts.path.startswith(f"/t/{MASK}/") else parts.path
        return urlunsplit((parts.scheme, netloc, path, parts.query, parts.fragment))
    return None


def _rattler_knows(host: str) -> bool:
    """Whether rattler's authentication file holds an entry for ``host`` (exact, or a ``*.domain`` pattern)."""
    from pathlib import Path

    from envguard.safeio import read_small_text

    path = os.environ.get(AUTH_FILE_ENV) or str(Path.home() / ".rattler" / "credentials.json")
    text = read_small_text(path, 16 << 20)  # a FIFO named there must not block
    try:
        entries = json.loads(text) if text is not None else None
    except (ValueError, RecursionError):
        return False
    if not isinstance(entries, dict):
        return False
    return any(isinstance(k, str) and (k == host or (k.startswith("*.") and host.endswith(k[1:])))
               for k in entries)


@dataclass
class Credentials:
    """The credentials taken out of a set of URLs, and a rattler client that sends them."""

    basic: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # host -> [(path prefix, header)]
    tokens: dict[str, str] = field(default_factory=dict)  # host -> token

    def strip(self, url: str) -> str:
        """The URL without credentials; its credentials are remembered for :meth:`client`."""
        if "@" not in url and "/t/" not in url:  # the usual URL (and every file:// one): nothing to take out
            return url
        s = split_credentials(url)
        if s.user is not None:
            raw = f"{s.user}:{s.password or ''}".encode()
            header = "Basic " + base64.b64encode(raw).decode("ascii")
            prefix = urlsplit(s.url).path.rstrip("/")
            entries = self.basic.setdefault(s.host, [])
            if (prefix, header) not in entries:
                entries.append((prefix, header))
                entries.sort(key=lambda e: -len(e[0]))  # the longest matching channel path wins
        if s.token is not None:
            known = self.tokens.setdefault(s.host, s.token)
            if known != s.token:
                raise UserError(f"two different /t/<token>/ credentials for the host {s.host} ({redact(url)})",
                                key="channels",
                                fix="use one token per host: rattler's token authentication holds one per host")
        return s.url

    def __bool__(self) -> bool:
        return bool(self.basic or self.tokens)

    def _headers(self, host: str, path: str) -> dict[str, str] | None:
        entries = self.basic.get(host)
        if not entries:
            return None
        m = _TOKEN_SEGMENT.match(path)  # the token middleware has already put /t/<token> back
        plain = (m["rest"] or "/") if m else path
        for prefix, header in entries:
            if not prefix or plain == prefix or plain.startswith(prefix + "/"):
                return {"Authorization": header}
        return None

    def client(self, mirrors: dict[str, list[str]] | None = None) -> Any:
        """A rattler ``Client`` with the standard middleware, these credentials and ``mirrors`` (channel URL ->
        mirror URLs, envguard.condaconfig); None when there are neither (rattler's default client is then
        used, exactly as before)."""
        if not self and not mirrors:
            return None
        # A mirror's own credentials (https://user:pw@mirror/...) are sent to that mirror only, as headers
        # like a channel's: rattler's mirror middleware does not carry a URL's userinfo over to its request.
        mirrors = {self.strip(k): [self.strip(m) for m in v] for k, v in (mirrors or {}).items()}
        from rattler.networking import (
            AddHeadersMiddleware,
            AuthenticationMiddleware,
            Client,
            GCSMiddleware,
            MirrorMiddleware,
            OciMiddleware,
            RetryMiddleware,
            S3Middleware,
        )

        def middlewares() -> list[Any]:
            # The mirror first, so that the credentials sent are those of the host the request goes to (a
            # channel's never reach its mirror); then the authentication middleware, before the headers one:
            # it leaves a request alone once it carries a header. The mirror before the OCI/GCS/S3 handlers:
            # a mirror may itself be one of those.
            chain: list[Any] = [RetryMiddleware(3)]
            if mirrors:
                chain.append(MirrorMiddleware(mirrors))
            chain.append(AuthenticationMiddleware())
            if self.basic:
                chain.append(AddHeadersMiddleware(self._headers))
            return chain + [OciMiddleware(), GCSMiddleware(), S3Middleware()]

        if not self.tokens:
            return Client(middlewares())
        with _auth_file_lock, _private_auth_file(self.tokens):
            return Client(middlewares())


class _private_auth_file:
    """RATTLER_AUTH_FILE pointing at a 0600 file in a fresh 0700 directory while the client is built."""

    def __init__(self, tokens: dict[str, str]) -> None:
        self.tokens = tokens
        self.dir: str | None = None
        self.fd: int | None = None
        self.previous: str | None = None

    def __enter__(self) -> None:
        entries: dict[str, Any] = {}
        self.previous = os.environ.get(AUTH_FILE_ENV)
        if self.previous:
            from envguard.safeio import read_small_text

            text = read_small_text(self.previous, 16 << 20)  # a FIFO named there must not block
            try:
                loaded = json.loads(text) if text is not None else None
            except (ValueError, RecursionError):
                loaded = None  # rattler would not have read it either
            if isinstance(loaded, dict):
                entries.update(loaded)
        entries.update({host: {"CondaToken": token} for host, token in self.tokens.items()})
        data = json.dumps(entries).encode()
        if hasattr(os, "memfd_create"):
            # A file with no name on any filesystem, which the kernel drops with the process: a SIGKILL while
            # the client is built leaves no token on disk. rattler opens it by this process's /proc path.
            self.fd = os.memfd_create("envguard-auth", os.MFD_CLOEXEC)
            os.write(self.fd, data)
            os.environ[AUTH_FILE_ENV] = f"/proc/{os.getpid()}/fd/{self.fd}"
            return
        remove_dead_owners(tempfile.gettempdir(), AUTH_DIR_TAG)  # what a killed run left
        self.dir = tempfile.mkdtemp(prefix=f"{AUTH_DIR_TAG}{os.getpid()}-")  # mkdtemp: mode 0700, owned by us
        path = os.path.join(self.dir, "auth.json")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.environ[AUTH_FILE_ENV] = path

    def __exit__(self, *exc: object) -> None:
        if self.previous is None:
            os.environ.pop(AUTH_FILE_ENV, None)
        else:
            os.environ[AUTH_FILE_ENV] = self.previous
        if self.fd is not None:
            os.close(self.fd)
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)
