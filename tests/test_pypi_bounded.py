"""The pip: step of `envguard lock` is bounded and visible (issue 35, point 7).

A spec whose pip: section named torch ran 11 minutes with no output. Here a local PEP 503 index on 127.0.0.1
serves a project whose wheel is huge (hundreds of MB declared, or a body that never ends) and whose metadata
file (PEP 658/714) is served, missing, wrong, or dripped a byte a second. The real `envguard lock` runs in a
subprocess against it: the metadata route never touches the wheel body; a wheel read whole is refused past
ENVGUARD_LOCK_PIP_MAX_BYTES, naming the package; a stalled resolver is stopped at ENVGUARD_LOCK_PIP_TIMEOUT,
naming the package, and its process is gone (the server sees its connection closed); Ctrl-C stops it too;
on a terminal the package being resolved is shown.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.channels import HOST_PY
from support.lock_support import BIN, envguard, write_env

pytestmark = pytest.mark.slow  # every test runs the envguard CLI (and its resolver process)

PROJECT = "egbig"
WHEEL = f"{PROJECT}-1.0-py3-none-any.whl"
METADATA = f"Metadata-Version: 2.1\nName: {PROJECT}\nVersion: 1.0\nSummary: a huge test wheel\n".encode()
WHEEL_SHA256 = hashlib.sha256(b"the wheel body is never read in the metadata test").hexdigest()
CHUNK = b"\0" * 65536


class Index:
    """A simple index on 127.0.0.1 for one project, one huge wheel.

    ``metadata``: "served" (with its sha256 in data-core-metadata / data-dist-info-metadata), "absent",
    "bad-hash" (served, announced with another hash) or "drip" (a byte a second, never complete).
    ``wheel_bytes``: the Content-Length the wheel declares (its body zeros, sent until the client leaves);
    None: no Content-Length, a body that never ends. Byte ranges are never honoured. ``attributes``: the
    anchor attributes announcing the metadata file (PEP 714's name, PEP 658's, or both as PyPI does).
    """

    def __init__(self, *, metadata: str, wheel_bytes: int | None,
                 attributes: tuple[str, ...] = ("data-core-metadata", "data-dist-info-metadata")) -> None:
        self.metadata = metadata
        self.attributes = attributes
        self.wheel_bytes = wheel_bytes
        self.log: list[tuple[str, str]] = []  # (method, path) of every request
        self.sent: dict[str, int] = {}  # path -> body bytes written
        self.gone: set[str] = set()  # paths whose client closed the connection mid-body
        index = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def do_HEAD(self) -> None:
                self._answer(body=False)

            def do_GET(self) -> None:
                self._answer(body=True)

            def _headers(self, status: int, length: int | None, kind: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                if length is None:
                    self.send_header("Connection", "close")  # the body ends when the connection does
                    self.close_connection = True
                else:
                    self.send_header("Content-Length", str(length))
                self.end_headers()

            def _stream(self, path: str, limit: int | None, piece: bytes, pause: float = 0.0) -> None:
                sent = 0
                try:
                    while limit is None or sent < limit:
                        data = piece if limit is None else piece[: limit - sent]
                        self.wfile.write(data)
                        self.wfile.flush()
                        sent += len(data)
                        index.sent[path] = sent
                        if pause:
                            time.sleep(pause)
                except OSError:  # the client left (stopped, or killed)
                    index.gone.add(path)
                    self.close_connection = True

            def _answer(self, body: bool) -> None:
                path = self.path.split("?", 1)[0]
                index.log.append((self.command, path))
                if path in (f"/simple/{PROJECT}/", f"/simple/{PROJECT}"):
                    page = index.page()
                    self._headers(200, len(page), "text/html")
                    if body:
                        self.wfile.write(page)
                elif path == f"/files/{WHEEL}.metadata" and index.metadata != "absent":
                    if index.metadata == "drip":
                        self._headers(200, len(METADATA) + 10_000, "application/octet-stream")
                        if body:
                            self._stream(path, None, b"M", pause=1.0)
                        return
                    self._headers(200, len(METADATA), "application/octet-stream")
                    if body:
                        self.wfile.write(METADATA)
                elif path == f"/files/{WHEEL}":
                    self._headers(200, index.wheel_bytes, "application/octet-stream")
                    if body:
                        self._stream(path, index.wheel_bytes, CHUNK)
                else:
                    self._headers(404, 0, "text/plain")

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}/simple"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    def page(self) -> bytes:
        attr = ""
        if self.metadata != "absent":
            digest = hashlib.sha256(METADATA if self.metadata != "bad-hash" else b"other").hexdigest()
            attr = "".join(f' {a}="sha256={digest}"' for a in self.attributes)
        return (f'<!DOCTYPE html>\n<html><body><h1>Links for {PROJECT}</h1>\n'
                f'<a href="/files/{WHEEL}#sha256={WHEEL_SHA256}"{attr}>{WHEEL}</a><br/>\n'
                "</body></html>\n").encode()

    def fetched(self, path: str) -> list[str]:
        return [m for m, p in self.log if p == path]

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


@pytest.fixture
def make_index() -> Iterator[Any]:
    made: list[Index] = []

    def make(**kw: Any) -> Index:
        made.append(Index(**kw))
        return made[-1]

    yield make
    for i in made:
        i.close()


def _project(tmp_path: Path, channel_url: str, index: Index) -> Path:
    write_env(tmp_path / "environment.yml", channels=[channel_url], deps=[f"python={HOST_PY}", "pip"],
              pip=[PROJECT], platforms=["linux-64"],
              extra=f"pip-repositories:\n  - {index.url}\nallow-pypi-requests: false\n")
    return tmp_path


def _env(**settings: str) -> dict[str, str]:
    env = os.environ.copy()
    for k in ("ENVGUARD_LOCK_PIP_TIMEOUT", "ENVGUARD_LOCK_PIP_MAX_BYTES"):
        env.pop(k, None)
    env.update(settings)
    return env


def _wait_for(what: Any, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if what():
            return True
        time.sleep(0.05)
    return bool(what())


def _on_a_terminal(cwd: Path, env: dict[str, str], timeout: float = 120) -> tuple[int, str]:
    """`envguard lock` with its stdout and stderr on a pseudo-terminal: (exit code, what the terminal got)."""
    pty = pytest.importorskip("pty")
    import select

    master, slave = pty.openpty()
    proc = subprocess.Popen([str(BIN / "envguard"), "lock"], cwd=cwd, env=env, stdin=slave, stdout=slave,
                            stderr=slave, close_fds=True)
    os.close(slave)
    buf = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 1)
        if not ready:
            if proc.poll() is not None:
                break
            continue
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        buf += chunk
    os.close(master)
    try:
        return proc.wait(timeout=10), buf.decode("utf-8", "replace")
    finally:
        if proc.poll() is None:
            proc.kill()


@pytest.mark.parametrize("attribute", ["data-core-metadata", "data-dist-info-metadata"])
def test_metadata_file_is_read_and_the_huge_wheel_never_fetched(tmp_path: Path, channel_url: str,
                                                                 make_index: Any, attribute: str) -> None:
    # 3 GB declared: reading it whole would take far longer than this test allows
    index = make_index(metadata="served", wheel_bytes=3 * 1024 ** 3, attributes=(attribute,))
    cwd = _project(tmp_path, channel_url, index)
    started = time.monotonic()
    code, screen = _on_a_terminal(cwd, _env())
    took = time.monotonic() - started
    assert code == 0, screen
    assert took < 60, took
    assert index.fetched(f"/files/{WHEEL}.metadata") == ["GET"]
    assert index.fetched(f"/files/{WHEEL}") == [] and f"/files/{WHEEL}" not in index.sent, index.log
    # the terminal said which package the pip: step was resolving
    assert f"resolving pip: for linux-64 {PROJECT} 1.0" in screen, screen
    lock = yaml.safe_load((cwd / "conda-lock.yml").read_text())
    pips = [p for p in lock["package"] if p["manager"] == "pip"]
    assert [(p["name"], p["version"], p["hash"]["sha256"]) for p in pips] == [(PROJECT, "1.0", WHEEL_SHA256)]
    assert pips[0]["url"] == index.url.replace("/simple", f"/files/{WHEEL}")


@pytest.mark.parametrize(("metadata", "wheel_bytes"), [
    ("absent", 300 * 1024 ** 2),   # declared: refused on its Content-Length, before any of the body is read
    ("absent", None),              # a body that never ends: refused at the bound
    ("bad-hash", 300 * 1024 ** 2),  # a metadata file whose hash is wrong is not believed: the wheel it is
])
def test_a_wheel_read_whole_is_refused_past_the_size_bound(tmp_path: Path, channel_url: str, make_index: Any,
                                                           metadata: str, wheel_bytes: int | None) -> None:
    index = make_index(metadata=metadata, wheel_bytes=wheel_bytes)
    cwd = _project(tmp_path, channel_url, index)
    started = time.monotonic()
    proc = envguard(["lock"], cwd=cwd, env=_env(ENVGUARD_LOCK_PIP_MAX_BYTES=str(2 * 1024 ** 2)), timeout=90)
    took = time.monotonic() - started
    assert proc.returncode == 6, proc.stderr
    assert took < 60, took
    lines = proc.stderr.strip().splitlines()
    # one line (no progress either: stderr is not a terminal), naming the package, the file and the setting
    assert len(lines) == 1, proc.stderr
    assert f"pip: section for linux-64: {PROJECT} 1.0: {WHEEL}" in lines[0], lines[0]
    assert "ENVGUARD_LOCK_PIP_MAX_BYTES=" in lines[0] and "PEP 658" in lines[0], lines[0]
    assert "Traceback" not in proc.stderr + proc.stdout
    assert not (cwd / "conda-lock.yml").exists()
    sent = index.sent.get(f"/files/{WHEEL}", 0)
    if wheel_bytes is None:
        assert 2 * 1024 ** 2 <= sent < 300 * 1024 ** 2, sent  # read up to the bound, then dropped
    else:
        assert sent < 300 * 1024 ** 2, sent  # never the whole of it
    # the resolver's connection is gone: its process did not outlive the command
    assert _wait_for(lambda: sent == 0 or f"/files/{WHEEL}" in index.gone, 10), index.sent


def test_a_stalled_index_is_stopped_at_the_time_bound(tmp_path: Path, channel_url: str, make_index: Any) -> None:
    # the metadata file comes a byte a second: no read ever times out, the resolver would wait forever
    index = make_index(metadata="drip", wheel_bytes=3 * 1024 ** 3)
    cwd = _project(tmp_path, channel_url, index)
    started = time.monotonic()
    proc = envguard(["lock"], cwd=cwd, env=_env(ENVGUARD_LOCK_PIP_TIMEOUT="4"), timeout=90)
    took = time.monotonic() - started
    assert proc.returncode == 6, proc.stderr
    assert 4 <= took < 40, took
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "pip: section for linux-64 was not resolved in 4 s" in lines[0], lines[0]
    assert f"(at {PROJECT} 1.0)" in lines[0] and "ENVGUARD_LOCK_PIP_TIMEOUT=" in lines[0], lines[0]
    assert not (cwd / "conda-lock.yml").exists()
    # the resolver process was killed, not left dripping: its connection closed
    assert _wait_for(lambda: f"/files/{WHEEL}.metadata" in index.gone, 10), index.sent
    assert index.fetched(f"/files/{WHEEL}") == []


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to a process is POSIX")
def test_ctrl_c_stops_the_resolver_process(tmp_path: Path, channel_url: str, make_index: Any) -> None:
    index = make_index(metadata="drip", wheel_bytes=3 * 1024 ** 3)
    cwd = _project(tmp_path, channel_url, index)
    proc = subprocess.Popen([str(BIN / "envguard"), "lock"], cwd=cwd, env=_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert _wait_for(lambda: f"/files/{WHEEL}.metadata" in index.sent, 60), index.log
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert _wait_for(lambda: f"/files/{WHEEL}.metadata" in index.gone, 10), index.sent
    assert not (cwd / "conda-lock.yml").exists()
