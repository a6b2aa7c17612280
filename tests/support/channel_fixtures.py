"""Pytest fixtures around the test channel library (tests/support/channels.py).

Session-scoped (built once): ``standard_channel`` (StandardChannel), ``test_channel`` (Path),
``channel_url`` (file:// URL), ``http_channel`` (http://127.0.0.1:<port>/channel serving the same directory;
the HttpServer itself is ``http_channel_server``), ``python312_available`` (bool), ``host_python_pkg_available``
(bool), ``pypi_index`` (PypiIndex served over HTTP; ``.url`` is the simple index URL), ``realdata_channel``
(a metadata-only channel of conda-forge's real records from ../shared/realworld's locks) and
``realdata_environments`` (the real solutions it was drawn from).
Function-scoped: ``channel_factory`` (ChannelFactory: ``channel_factory(packages, name=None) -> Path`` builds and
indexes a channel in tmp_path; ``.copy(src)``, ``.package(dir, name, version, build, ...)``, ``.tamper(pkg_path)``,
``.reindex(dir)``, ``.serve(dir, **kw) -> HttpServer``), ``pkg_cache`` (an empty package cache dir in tmp_path).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from support import channels, metadata_channel


@pytest.fixture(scope="session")
def standard_channel(session_tmp: Path) -> channels.StandardChannel:
    return channels.build_standard_channel(session_tmp / "channels" / "standard")


@pytest.fixture(scope="session")
def test_channel(standard_channel: channels.StandardChannel) -> Path:
    return standard_channel.path


@pytest.fixture(scope="session")
def channel_url(standard_channel: channels.StandardChannel) -> str:
    return standard_channel.url


@pytest.fixture(scope="session")
def http_channel_server(standard_channel: channels.StandardChannel) -> Iterator[channels.HttpServer]:
    server = channels.serve_directory(standard_channel.path, prefix="channel")
    yield server
    server.close()


@pytest.fixture(scope="session")
def http_channel(http_channel_server: channels.HttpServer) -> str:
    return http_channel_server.url


@pytest.fixture(scope="session")
def python312_available(standard_channel: channels.StandardChannel) -> bool:
    return standard_channel.python312_available


@pytest.fixture(scope="session")
def host_python_pkg_available(standard_channel: channels.StandardChannel) -> bool:
    """True when the standard channel's python for the host platform is a working interpreter (Linux/macOS)."""
    return standard_channel.host_platform in ("linux-64", "osx-arm64")


@pytest.fixture(scope="session")
def realdata_channel(realworld: Path, session_tmp: Path) -> metadata_channel.MetadataChannel:
    """conda-forge's real records from every lock of ../shared/realworld, as a metadata-only file:// channel
    (tests/support/metadata_channel.py). It solves and locks; it cannot install."""
    return metadata_channel.build_metadata_channel(metadata_channel.realworld_locks(realworld),
                                                   session_tmp / "channels" / "realdata")


@pytest.fixture(scope="session")
def realdata_environments(realworld: Path) -> list[metadata_channel.SampledEnvironment]:
    """The real solutions that channel was drawn from: what it covers in full."""
    return metadata_channel.sampled_environments(metadata_channel.realworld_locks(realworld))


@pytest.fixture(scope="session")
def pypi_index(session_tmp: Path) -> Iterator[channels.PypiIndex]:
    index = channels.standard_pypi_index(session_tmp / "pypi")
    server = channels.serve_directory(index.root)
    index.url = f"{server.url}/simple"
    yield index
    server.close()


class ChannelFactory:
    """``channel_factory(packages, name="extra") -> Path``: build and index a channel under tmp_path.

    ``channel_factory.package(channel_dir, name, version, ...)`` is build_package; ``.reindex(dir)`` reindexes
    after tampering; ``.serve(dir)`` returns an HttpServer closed at test end.
    """

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self._servers: list[channels.HttpServer] = []
        self._count = 0

    def __call__(
        self, packages: Iterable[channels.PackageSpec | Mapping[str, Any]] = (), name: str | None = None
    ) -> Path:
        self._count += 1
        return channels.make_channel(self.tmp_path / (name or f"channel{self._count}"), packages)

    package: Callable[..., Path] = staticmethod(channels.build_package)
    reindex: Callable[..., Path] = staticmethod(channels.index_channel)
    tamper: Callable[..., tuple[str, str]] = staticmethod(channels.tamper_package)

    def copy(self, src: Path, name: str | None = None) -> Path:
        """Copy a channel (e.g. ``test_channel``) into tmp_path, to tamper with it."""
        self._count += 1
        return channels.copy_channel(src, self.tmp_path / (name or f"channel{self._count}"))

    def serve(self, directory: Path, **kwargs: Any) -> channels.HttpServer:
        server = channels.serve_directory(directory, **kwargs)
        self._servers.append(server)
        return server

    def close(self) -> None:
        for server in self._servers:
            server.close()


@pytest.fixture
def channel_factory(tmp_path: Path) -> Iterator[ChannelFactory]:
    factory = ChannelFactory(tmp_path)
    yield factory
    factory.close()


@pytest.fixture
def pkg_cache(tmp_path: Path) -> Path:
    path = tmp_path / "pkgs"
    path.mkdir()
    return path
