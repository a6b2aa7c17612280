"""The worker process of the ``pip:`` step: conda-lock's PyPI solver, with a byte bound and progress events.

envguard.lock.pypi starts it (``python -m envguard.lock.pypi_worker``) in a session of its own, so that the
time bound is a kill of the whole process group: a resolver can spend its time anywhere (a name lookup that
ignores every timeout, a server that stalls, poetry's backtracking), and none of that can be bounded from
inside one process. The request comes pickled on stdin; events go out as JSON lines on the original stdout,
one per line, flushed as they happen:

* ``{"package": name, "version": v}``: the resolver asks for this package (``version`` "" while it lists
  the candidates);
* ``{"fetch": file name, "bytes": n}``: a distribution file is read whole (no metadata file, no ranges);
* ``{"too_large": url, "bytes": n, "declared": bool, "package": ..., "version": ...}``: a file over the
  byte bound, refused (declared: its Content-Length said so, nothing of it was read);
* ``{"result": base64 pickle}`` or ``{"error": text}``: the end.

The bound is applied where every request of poetry (vendored by conda-lock) passes: its Authenticator; the
progress where the solver asks its repository pool for a package. Both are wrapped in this process only.
"""

from __future__ import annotations

import base64
import json
import os
import pickle
import sys
from typing import IO, Any
from urllib.parse import unquote, urlsplit

_DIST_SUFFIXES = (".whl", ".tar.gz", ".zip", ".tar.bz2", ".tar.xz", ".tgz", ".tar")


class TooLarge(BaseException):
    """A file over the bound. A BaseException: poetry's ``except Exception`` fallbacks must not swallow it."""


def _file_name(url: str) -> str:
    return unquote(urlsplit(url).path.rstrip("/").rsplit("/", 1)[-1])


def _is_distribution(url: str) -> bool:
    return _file_name(url).lower().endswith(_DIST_SUFFIXES)


def _package_of(url: str) -> tuple[str, str]:
    """(name, version) a URL belongs to, as far as its file name or simple-page path says; ("", "") if not."""
    from packaging.utils import InvalidSdistFilename, InvalidWheelFilename, parse_sdist_filename, parse_wheel_filename

    name = _file_name(url)
    if name.endswith(".metadata"):
        name = name[: -len(".metadata")]
    try:
        if name.endswith(".whl"):
            dist, version, *_ = parse_wheel_filename(name)
            return str(dist), str(version)
        if name.lower().endswith(_DIST_SUFFIXES):
            dist, version = parse_sdist_filename(name)
            return str(dist), str(version)
    except (InvalidWheelFilename, InvalidSdistFilename):
        return name, ""
    path = [p for p in urlsplit(url).path.split("/") if p]
    if len(path) >= 2 and path[-2] in ("simple", "json", "pypi"):  # <index>/simple/<name>/, pypi/<name>/json
        return path[-1], ""
    return "", ""


class Events:
    """The JSON-lines channel to the parent."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        self.last: tuple[str, str] = ("", "")

    def emit(self, **event: Any) -> None:
        self.stream.write(json.dumps(event) + "\n")
        self.stream.flush()

    def package(self, name: str, version: str = "") -> None:
        if (name, version) != self.last:  # the solver asks for the same package many times in a row
            self.last = (name, version)
            self.emit(package=name, version=version)


def install_hooks(limit: int, events: Events) -> None:
    """Wrap poetry's Authenticator.request (the byte bound, the fetch events) and RepositoryPool's package and
    find_packages (which package is being resolved)."""
    from conda_lock._vendor.poetry.repositories.repository_pool import RepositoryPool
    from conda_lock._vendor.poetry.utils.authenticator import Authenticator

    request = Authenticator.request

    def too_large(url: str, size: int, declared: bool) -> TooLarge:
        name, version = _package_of(url)
        if not name:
            name, version = events.last
        events.emit(too_large=url, bytes=size, declared=declared, package=name, version=version)
        return TooLarge(url)

    def bounded(self: Any, method: str, url: str, raise_for_status: bool = True, **kwargs: Any) -> Any:
        streamed = bool(kwargs.get("stream"))
        kwargs["stream"] = True  # the body is read below, through the bound, never whole by requests itself
        response: Any = request(self, method, url, raise_for_status, **kwargs)
        if method.lower() == "head":
            return response
        declared = response.headers.get("Content-Length", "")
        if declared.isdigit() and int(declared) > limit:
            response.close()
            raise too_large(url, int(declared), True)
        ranged = "Range" in (kwargs.get("headers") or {})
        if _is_distribution(url) and not ranged and response.status_code == 200:
            events.emit(fetch=_file_name(url), bytes=int(declared) if declared.isdigit() else None)
        inner = response.iter_content

        def counted(chunk_size: int | None = 1, decode_unicode: bool = False) -> Any:
            seen = 0
            for chunk in inner(chunk_size, decode_unicode):
                seen += len(chunk)
                if seen > limit:
                    response.close()
                    raise too_large(url, seen, False)
                yield chunk

        response.iter_content = counted  # requests reads .content through iter_content too
        if not streamed:
            _ = response.content  # what a request without stream=True does: read it all now
        return response

    package = RepositoryPool.package
    find_packages = RepositoryPool.find_packages

    def package_hook(self: Any, name: str, version: Any, *args: Any, **kwargs: Any) -> Any:
        events.package(str(name), str(version))
        return package(self, name, version, *args, **kwargs)

    def find_hook(self: Any, dependency: Any) -> Any:
        events.package(str(dependency.name))
        return find_packages(self, dependency)

    Authenticator.request = bounded  # type: ignore[method-assign]
    RepositoryPool.package = package_hook  # type: ignore[method-assign]
    RepositoryPool.find_packages = find_hook  # type: ignore[method-assign]


def main() -> int:
    # stdout is the event channel; anything else that prints (a library's stray print) goes to stderr
    events = Events(os.fdopen(os.dup(1), "w", encoding="utf-8"))
    os.dup2(2, 1)
    request: dict[str, Any] = pickle.load(sys.stdin.buffer)
    limit = int(request.pop("max_bytes"))
    install_hooks(limit, events)
    from conda_lock.pypi_solver import solve_pypi

    try:
        solved = solve_pypi(**request)
    except TooLarge:
        return 3  # said already, by the event
    except Exception as e:  # noqa: BLE001 - poetry's SolverProblemError, connection errors, ...: said as text
        events.emit(error=" ".join(str(e).split()) or type(e).__name__)
        return 1
    events.emit(result=base64.b64encode(pickle.dumps(solved)).decode("ascii"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
