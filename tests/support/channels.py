"""Test channel library: local conda channels, PyPI indexes and HTTP serving for tests.

Plain functions, no pytest (the fixtures live in tests/support/channel_fixtures.py). Only py-rattler,
packaging and the standard library. Nothing here touches the network or ``~/.cache``.

Public functions
================
=====================================================  ==========================================================
``build_package(channel_dir, name, version, build,     Write one conda package into ``channel_dir/<subdir>/`` and
  *, build_number, depends, constrains, subdir,        return its Path. ``files`` maps relative path -> bytes|str;
  noarch, files, symlinks, prefix_placeholder_files,   files containing ``PLACEHOLDER`` get a text-mode prefix
  entry_points, fmt, extra_bytes, timestamp, ...)``    placeholder automatically; ``symlinks`` maps path -> target.
                                                       ``noarch="python"`` puts files under ``site-packages/``;
                                                       ``entry_points=["tool = mod:func"]`` writes info/link.json.
                                                       ``fmt="tar.bz2"|"conda"``. ``extra_bytes`` changes the
                                                       archive bytes only (info/salt): a "tampered" rebuild.
``PackageSpec(...)`` / ``.build_in(channel_dir)``       Same arguments as a dataclass, for lists of packages.
``make_channel(dir, packages) -> Path``                 Create subdirs (linux-64, osx-arm64, win-64, noarch), build
                                                       every PackageSpec (or kwargs dict), index, return ``dir``.
``index_channel(dir)``                                  (Re)index with rattler (repodata.json only, no zst/shards).
``strip_indexed_timestamps(dir)``                       Remove ``indexed_timestamp`` from every repodata.json (the
                                                       indexer stamps "now"; make_channel does it by default).
``copy_channel(src, dst) -> Path``                      Copy a channel (e.g. the standard one) before tampering.
``tamper_package(path, *, files=None, salt=...)``       Rewrite a package in place (valid archive, new sha256, not
  ``-> (old_sha256, new_sha256)``                       reindexed). ``files`` replaces payload contents.
``channel_url(dir) -> str``                             ``file://`` URL of a channel directory.
``package_path(channel_dir, subdir, filename)``         Path of a built package (for tampering tests).
``build_standard_channel(root) -> StandardChannel``     The standard channel (see below) under ``root/channel``, shims
                                                       under ``root/shims``. ``StandardChannel`` has ``path``,
                                                       ``url``, ``host_platform``, ``python_version``,
                                                       ``python312_version`` (None if no 3.12 interpreter),
                                                       ``torch_version``, ``numpy_version``, ``pip_version``.
``serve_directory(dir, *, prefix="", auth=None,         Threaded HTTP server on 127.0.0.1 (free port). Returns an
  token=None) -> HttpServer``                           ``HttpServer``: ``.url`` (base URL incl. prefix, or
                                                       ``/t/<token>`` path), ``.requests`` (paths served),
                                                       ``.close()``. Context manager. ``auth=(user, pw)`` = Basic.
``build_wheel(dir, name, version, files=None,           Pure-python wheel written with zipfile (METADATA, WHEEL,
  requires=(), *, requires_python=None) -> Path``      RECORD with sha256). Default file: ``<pkg>/__init__.py``.
``build_pypi_index(root, wheels) -> PypiIndex``         PEP 503 simple index (``#sha256=`` fragments, PEP 658
                                                       ``.metadata``) over ``wheels`` (list of (name, version,
                                                       requires) or Paths); ``.simple_dir``, ``.wheels``.
``standard_pypi_index(root) -> PypiIndex``              egdemo-a 1.0 + 2.0, egdemo-b 1.0 (requires egdemo-a).
``generate_channel(dir, n_packages, platforms=...,      Synthetic channel for benchmarks: ``n_packages`` records per
  seed=0) -> GeneratedChannel``                         platform, realistic DAG of depends; ``.root_specs`` pull in
                                                       much of it. About 1 s per 1,000 packages on our machines.
``generate_repodata(dir, n_records, platforms=...)``    Write repodata.json directly (no package files), e.g. 30,000
                                                       records for solver benchmarks. Fake hashes: solve-only.
(tests/support/metadata_channel.py)                    ``build_metadata_channel(locks, root)``: a metadata-only
                                                       channel from the package records of REAL lock files (pixi.lock,
                                                       conda-lock.yml), to ask "does this solve on conda-forge" of
                                                       conda-forge's own records; fixture ``realdata_channel``.
``run(coro)``                                           Run a coroutine from sync code, even inside a running loop.
=====================================================  ==========================================================

Standard channel (built once per session by the ``test_channel`` fixture)
==========================================================================
Subdirs linux-64, osx-arm64, win-64, noarch. "host" = this machine's platform (linux-64 here): only there
do packages actually work; on the other platforms python/pytorch/numpy are metadata-only records
(same depends, no usable files) so multi-platform solves succeed.
The versions below are a 3.11 host's: python's line, the ``py311`` of the builds and the depends follow the host
interpreter (tests name them ``HOST_PY`` "3.11", ``HOST_PY_TAG`` "py311", ``HOST_PY_NEXT`` "3.12").

* ``python 3.11.x`` (host version, build ``h0_0_cpython``): a venv around the test interpreter's base
  interpreter: ``bin/python3.11`` -> host interpreter (absolute symlink), ``bin/python3``, ``bin/python``,
  ``pyvenv.cfg`` (home = host bin, include-system-site-packages = false), ``lib/python3.11/site-packages/``
  (holds only README.txt). ``<prefix>/bin/python`` runs with ``sys.prefix == prefix``. Depends
  ``__glibc >=2.17,<3.0.a0`` on linux-64 and ``__osx >=11.0`` on osx-arm64 (pass virtual packages!).
* ``python 3.12.x`` the same around /root/.pyenv/versions/3.12.* when present (``python312_version``).
* ``numpy <real numpy version>`` ``py311_h0_0``: ``numpy-X.dist-info`` (METADATA, RECORD, INSTALLER=conda) +
  ``_envguard_numpy.pth`` -> ``shims/numpy`` (symlinks to the real numpy, numpy.libs).
* ``pytorch 2.13.0`` builds ``cpu_generic_py311_h0_0`` (bn 0), ``cuda126_generic_py311_h0_200`` (bn 200,
  depends ``__cuda``, ``cuda-version >=12.6,<13``), ``cuda128_generic_py311_h0_201`` (bn 201, ``cuda-version
  >=12.8,<13``); ``pytorch 2.12.0 cpu_generic_py311_h0_0``. osx-arm64 has cpu builds only; win-64 cpu+cuda126.
  All depend on ``python >=3.11,<3.12.0a0`` and ``numpy >=1.23,<3``. Files: ``torch-<conda version>.dist-info``
  (METADATA Name: torch, RECORD, INSTALLER=conda) + ``_envguard_torch.pth`` -> ``shims/torch`` (symlinks to the
  real torch, torchgen, functorch and torch's runtime requirements, with their dist-infos; not numpy, not
  torch's own dist-info). ``import torch`` gives the REAL torch (``torch.__version__`` is the dev venv's, e.g.
  2.13.0+cpu, even for the 2.12.0 or cuda records; ``torch.version.cuda`` is None).
* ``cuda-version 12.6 / 12.8 / 13.0`` noarch generic, no files, constrains ``__cuda >=X`` (the major line only,
  as conda-forge's real records do: ``cuda-version 12.9`` constrains ``__cuda >=12``) and ``cudatoolkit X.Y``.
  So ``__cuda=12.6`` admits the cuda128 build (minor-version compatibility); ``cuda-version`` picks the line.
* ``pip <real pip version>`` noarch python: ``pip-X.dist-info`` + ``_envguard_pip.pth`` -> ``shims/pip``, entry
  points ``pip``/``pip3``. ``<prefix>/bin/python -m pip install ...`` works and installs into the prefix.
* ``egtool 1.0.0`` noarch python: ``site-packages/egtool/__init__.py`` + dist-info; entry point ``egtool =
  egtool:main`` (prints ``egtool <sys.prefix>``).
* ``egplaceholder 1.0.0`` noarch generic: ``etc/egplaceholder.conf`` = ``prefix=<PLACEHOLDER>`` + newline, and executable
  ``bin/egplaceholder`` (``#!/bin/sh`` echo of the prefix), both text-mode placeholders.
* ``eglink 1.0.0`` noarch generic: ``share/eglink/target.txt`` and symlinks ``share/eglink/link.txt ->
  target.txt``, ``bin/eglink-data -> ../share/eglink/target.txt``.

Fixtures (tests/support/channel_fixtures.py)
============================================
Session: ``standard_channel`` (StandardChannel), ``test_channel`` (Path), ``channel_url`` (file:// str),
``http_channel`` (str, ``http://127.0.0.1:<port>/channel``), ``http_channel_server`` (HttpServer, ``.requests``),
``python312_available`` / ``host_python_pkg_available`` (bool), ``pypi_index`` (PypiIndex, ``.url`` = served
``.../simple``). Function: ``channel_factory`` (``(packages, name=None) -> Path``, ``.copy``, ``.package``,
``.tamper``, ``.reindex``, ``.serve``), ``pkg_cache`` (empty dir).

Good to know
============
* Package timestamps are fixed (2025-01-01) and archives reproducible, but python/pytorch/numpy/pip embed
  session paths (host interpreter, shim dirs): their sha256 is stable within a session, not across sessions.
* rattler does not hash-check ``file://`` packages; over http it does. A fresh ``PackageCache`` with
  ``ValidationMode.full()`` catches a tampered cache entry; a reused PackageCache object remembers it validated.
* noarch:python packages need python in the same install transaction (rattler derives site-packages from it).
* Solve with explicit virtual packages (``__glibc`` on linux, ``__osx`` on osx-arm64, ``__cuda`` for GPU builds).
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import hashlib
import html
import importlib.metadata
import io
import json
import os
import random
import re
import shutil
import struct
import sys
import tarfile
import threading
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

PLACEHOLDER = "/opt/anaconda1anaconda2anaconda3"
PLATFORMS: tuple[str, ...] = ("linux-64", "osx-arm64", "win-64")
SUBDIRS: tuple[str, ...] = PLATFORMS + ("noarch",)
DEFAULT_TIMESTAMP_MS = 1_735_689_600_000  # 2025-01-01T00:00:00Z: fixed so builds are reproducible
_TAR_MTIME = 1_735_689_600
_ZIP_DATE = (2025, 1, 1, 0, 0, 0)
# The standard channel's python is a venv around this interpreter, so its line is the host's: tests name it
# through these instead of a literal, and run on any Python the suite supports.
HOST_PY = f"{sys.version_info[0]}.{sys.version_info[1]}"  # "3.11"
HOST_PY_NEXT = f"{sys.version_info[0]}.{sys.version_info[1] + 1}"  # "3.12", the first line its builds exclude
HOST_PY_TAG = f"py{sys.version_info[0]}{sys.version_info[1]}"  # "py311", in the standard builds' names

__all__ = [
    "HOST_PY",
    "HOST_PY_NEXT",
    "HOST_PY_TAG",
    "PLACEHOLDER",
    "PLATFORMS",
    "SUBDIRS",
    "GeneratedChannel",
    "HttpServer",
    "PackageSpec",
    "PypiIndex",
    "StandardChannel",
    "build_package",
    "build_pypi_index",
    "build_standard_channel",
    "build_wheel",
    "channel_url",
    "copy_channel",
    "generate_channel",
    "generate_repodata",
    "host_platform",
    "index_channel",
    "make_channel",
    "package_path",
    "run",
    "serve_directory",
    "standard_pypi_index",
    "strip_indexed_timestamps",
    "tamper_package",
]


def host_platform() -> str:
    """The conda platform of this machine (mirrors envguard.platforms, kept local to avoid a dependency)."""
    import platform as _pf

    machine = _pf.machine().lower()
    if sys.platform.startswith("linux"):
        return {"x86_64": "linux-64", "amd64": "linux-64", "aarch64": "linux-aarch64"}.get(machine, f"linux-{machine}")
    if sys.platform == "darwin":
        return "osx-arm64" if machine in ("arm64", "aarch64") else "osx-64"
    return "win-64"


def run(coro: Any) -> Any:
    """Run a coroutine to completion from synchronous code, also when an event loop is already running."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    result: list[Any] = []
    error: list[BaseException] = []

    def _target() -> None:
        try:
            result.append(asyncio.run(coro))
        except BaseException as exc:  # re-raised in the caller's thread
            error.append(exc)

    thread = threading.Thread(target=_target)
    thread.start()
    thread.join()
    if error:
        raise error[0]
    return result[0]


# --------------------------------------------------------------------------------------------------------------
# Conda packages
# --------------------------------------------------------------------------------------------------------------

def _as_bytes(content: bytes | str) -> bytes:
    return content.encode() if isinstance(content, str) else content


def _platform_fields(subdir: str) -> dict[str, str]:
    if subdir == "noarch":
        return {}
    osname, _, arch = subdir.partition("-")
    arch = {"64": "x86_64", "arm64": "arm64", "aarch64": "aarch64", "32": "x86"}.get(arch, arch)
    return {"platform": {"osx": "osx", "win": "win", "linux": "linux"}.get(osname, osname), "arch": arch}


def _tar_bytes(members: list[tuple[str, bytes | None, str | None, int]]) -> bytes:
    """Deterministic uncompressed tar of (path, content, symlink_target, mode)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path, content, target, mode in members:
            info = tarfile.TarInfo(path)
            info.mtime = _TAR_MTIME
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mode = mode
            if target is not None:
                info.type = tarfile.SYMTYPE
                info.linkname = target
                tar.addfile(info)
            else:
                assert content is not None
                info.size = len(content)
                tar.addfile(info, io.BytesIO(content))
    return buf.getvalue()


def _zstd_stored(data: bytes) -> bytes:
    """A valid zstd frame holding ``data`` in raw (uncompressed) blocks.

    The standard library of Python 3.11 has no zstd; a .conda only needs a decodable zstd stream, and raw
    blocks are part of the format (RFC 8878 section 3.1.1.2), so any zstd decoder (rattler's included) reads it.
    """
    block_max = 128 * 1024
    out = bytearray(struct.pack("<I", 0xFD2FB528))
    out.append(0x00)  # frame header descriptor: no content size, no checksum, no dictionary, window descriptor
    out.append(7 << 3)  # window log 10 + 7 = 17 -> 128 KiB window, equal to the largest block
    chunks = [data[i:i + block_max] for i in range(0, len(data), block_max)] or [b""]
    for index, chunk in enumerate(chunks):
        last = 1 if index == len(chunks) - 1 else 0
        header = last | (0 << 1) | (len(chunk) << 3)  # block type 0 = raw
        out += header.to_bytes(3, "little")
        out += chunk
    return bytes(out)


@dataclasses.dataclass
class PackageSpec:
    """Arguments of :func:`build_package` as data; ``build(channel_dir)`` builds it."""

    name: str
    version: str
    build: str = "h0_0"
    build_number: int = 0
    depends: Sequence[str] = ()
    constrains: Sequence[str] = ()
    subdir: str = "noarch"
    noarch: str | None = None
    files: Mapping[str, bytes | str] = dataclasses.field(default_factory=dict)
    symlinks: Mapping[str, str] = dataclasses.field(default_factory=dict)
    prefix_placeholder_files: Mapping[str, str] | Iterable[str] | None = None
    entry_points: Sequence[str] = ()
    fmt: str = "tar.bz2"
    extra_bytes: bytes = b""
    timestamp: int | None = DEFAULT_TIMESTAMP_MS
    track_features: str = ""
    license: str = "BSD-3-Clause"
    compresslevel: int = 9

    def build_in(self, channel_dir: str | os.PathLike[str]) -> Path:
        return build_package(channel_dir, **dataclasses.asdict(self))

    @property
    def filename(self) -> str:
        return f"{self.name}-{self.version}-{self.build}.{self.fmt}"


def build_package(
    channel_dir: str | os.PathLike[str],
    name: str,
    version: str,
    build: str = "h0_0",
    *,
    build_number: int = 0,
    depends: Sequence[str] = (),
    constrains: Sequence[str] = (),
    subdir: str = "linux-64",
    noarch: str | None = None,
    files: Mapping[str, bytes | str] | None = None,
    symlinks: Mapping[str, str] | None = None,
    prefix_placeholder_files: Mapping[str, str] | Iterable[str] | None = None,
    entry_points: Sequence[str] = (),
    fmt: str = "tar.bz2",
    extra_bytes: bytes = b"",
    timestamp: int | None = DEFAULT_TIMESTAMP_MS,
    track_features: str = "",
    license: str = "BSD-3-Clause",
    compresslevel: int = 9,
) -> Path:
    """Write ``<channel_dir>/<subdir>/<name>-<version>-<build>.<fmt>`` and return its path.

    * ``noarch`` ("python" or "generic") forces subdir ``noarch``. For noarch python, paths start with
      ``site-packages/`` or ``python-scripts/`` (the installer relocates them).
    * A file whose content contains :data:`PLACEHOLDER` is registered as a text-mode prefix placeholder.
      ``prefix_placeholder_files`` overrides that: an iterable of paths (text mode) or a {path: "text"|"binary"}.
    * Files under ``bin/`` and ``python-scripts/`` are executable.
    * The archive is byte-for-byte reproducible; ``extra_bytes`` lands in ``info/salt`` so a rebuild with the
      same name and different bytes has a different sha256 (tampering tests).
    """
    files = dict(files or {})
    symlinks = dict(symlinks or {})
    if noarch:
        subdir = "noarch"
    if fmt not in ("tar.bz2", "conda"):
        raise ValueError(f"fmt must be 'tar.bz2' or 'conda', not {fmt!r}")
    out_dir = Path(channel_dir) / subdir
    out_dir.mkdir(parents=True, exist_ok=True)

    placeholders: dict[str, str] = {}
    for path, content in files.items():
        if PLACEHOLDER.encode() in _as_bytes(content):
            placeholders[path] = "text"
    if prefix_placeholder_files is not None:
        if isinstance(prefix_placeholder_files, Mapping):
            placeholders.update(prefix_placeholder_files)
        else:
            placeholders.update({p: "text" for p in prefix_placeholder_files})

    index: dict[str, Any] = {
        "name": name,
        "version": version,
        "build": build,
        "build_number": build_number,
        "depends": list(depends),
        "constrains": list(constrains),
        "license": license,
        "subdir": subdir,
        **_platform_fields(subdir),
    }
    if timestamp is not None:
        index["timestamp"] = timestamp
    if noarch:
        index["noarch"] = noarch
    if track_features:
        index["track_features"] = track_features

    paths: list[dict[str, Any]] = []
    payload: list[tuple[str, bytes | None, str | None, int]] = []
    for path in sorted(set(files) | set(symlinks)):
        if path in symlinks:
            target = symlinks[path]
            entry: dict[str, Any] = {"_path": path, "path_type": "softlink"}
            resolved = os.path.normpath(os.path.join(os.path.dirname(path), target))
            if resolved in files:  # conda-build records the hash of what the link points to
                data = _as_bytes(files[resolved])
                entry["sha256"] = hashlib.sha256(data).hexdigest()
                entry["size_in_bytes"] = len(data)
            paths.append(entry)
            payload.append((path, None, target, 0o777))
            continue
        data = _as_bytes(files[path])
        entry = {
            "_path": path,
            "path_type": "hardlink",
            "sha256": hashlib.sha256(data).hexdigest(),
            "size_in_bytes": len(data),
        }
        if path in placeholders:
            entry["file_mode"] = placeholders[path]
            entry["prefix_placeholder"] = PLACEHOLDER
        paths.append(entry)
        executable = path.startswith(("bin/", "python-scripts/", "Scripts/"))
        payload.append((path, data, None, 0o755 if executable else 0o644))

    info: dict[str, bytes] = {
        "info/index.json": json.dumps(index, indent=2, sort_keys=True).encode(),
        "info/paths.json": json.dumps({"paths": paths, "paths_version": 1}, indent=2, sort_keys=True).encode(),
        "info/files": "".join(f"{p['_path']}\n" for p in paths).encode(),
        "info/about.json": json.dumps({"summary": f"{name} test package", "license": license}).encode(),
    }
    if noarch == "python" or entry_points:
        link: dict[str, Any] = {"package_metadata_version": 1, "noarch": {"type": noarch or "generic"}}
        if entry_points:
            link["noarch"]["entry_points"] = list(entry_points)
        info["info/link.json"] = json.dumps(link, indent=2, sort_keys=True).encode()
    if extra_bytes:
        info["info/salt"] = extra_bytes
    info_members = [(p, d, None, 0o644) for p, d in sorted(info.items())]

    stem = f"{name}-{version}-{build}"
    target_path = out_dir / f"{stem}.{fmt}"
    tmp_path = target_path.with_name(target_path.name + ".part")
    if fmt == "tar.bz2":
        raw = _tar_bytes(info_members + payload)
        import bz2

        tmp_path.write_bytes(bz2.compress(raw, compresslevel))
    else:
        with zipfile.ZipFile(tmp_path, "w", compression=zipfile.ZIP_STORED) as zf:
            for arcname, data in (
                ("metadata.json", json.dumps({"conda_pkg_format_version": 2}).encode()),
                (f"pkg-{stem}.tar.zst", _zstd_stored(_tar_bytes(payload))),
                (f"info-{stem}.tar.zst", _zstd_stored(_tar_bytes(info_members))),
            ):
                zi = zipfile.ZipInfo(arcname, date_time=_ZIP_DATE)
                zi.compress_type = zipfile.ZIP_STORED
                zf.writestr(zi, data)
    os.replace(tmp_path, target_path)
    return target_path


def package_path(channel_dir: str | os.PathLike[str], subdir: str, filename: str) -> Path:
    return Path(channel_dir) / subdir / filename


def index_channel(channel_dir: str | os.PathLike[str]) -> Path:
    """Index every subdir with rattler's indexer (repodata.json only). Creates ``noarch/`` if missing."""
    import rattler.index

    channel_dir = Path(channel_dir)
    (channel_dir / "noarch").mkdir(parents=True, exist_ok=True)
    run(rattler.index.index_fs(channel_dir, write_zst=False, write_shards=False, force=True))
    return channel_dir


def strip_indexed_timestamps(channel_dir: str | os.PathLike[str]) -> None:
    for repodata in Path(channel_dir).glob("*/repodata.json"):
        data = json.loads(repodata.read_text())
        for key in ("packages", "packages.conda"):
            for record in data.get(key, {}).values():
                record.pop("indexed_timestamp", None)
        repodata.write_text(json.dumps(data, separators=(",", ":"), sort_keys=True))


def channel_url(channel_dir: str | os.PathLike[str]) -> str:
    return Path(channel_dir).resolve().as_uri()


def make_channel(
    channel_dir: str | os.PathLike[str],
    packages: Iterable[PackageSpec | Mapping[str, Any]],
    *,
    subdirs: Iterable[str] = SUBDIRS,
    index: bool = True,
    keep_indexed_timestamps: bool = False,
) -> Path:
    """Build ``packages`` (PackageSpec or build_package kwargs) into ``channel_dir`` and index it.

    The indexer's ``indexed_timestamp`` (= now) is removed unless ``keep_indexed_timestamps``: the repodata then
    depends only on the packages, and ``exclude_newer`` sees the packages' own ``timestamp``."""
    channel_dir = Path(channel_dir)
    for sub in subdirs:
        (channel_dir / sub).mkdir(parents=True, exist_ok=True)
    for pkg in packages:
        if isinstance(pkg, PackageSpec):
            pkg.build_in(channel_dir)
        else:
            build_package(channel_dir, **pkg)
    if index:
        index_channel(channel_dir)
        if not keep_indexed_timestamps:
            strip_indexed_timestamps(channel_dir)
    return channel_dir


def copy_channel(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> Path:
    """Copy a channel directory (e.g. the standard channel before tampering with it); symlinks stay symlinks."""
    shutil.copytree(src, dst, symlinks=True)
    return Path(dst)


def _pack_directory(src: Path, out_path: Path) -> None:
    """Re-pack an extracted package directory (info/ + payload) as .tar.bz2 or .conda (by suffix)."""
    members: list[tuple[str, bytes | None, str | None, int]] = []
    for path in sorted(src.rglob("*")):
        rel = path.relative_to(src).as_posix()
        if path.is_symlink():
            members.append((rel, None, os.readlink(path), 0o777))
        elif path.is_file():
            members.append((rel, path.read_bytes(), None, path.stat().st_mode & 0o777))
    info = [m for m in members if m[0].startswith("info/")]
    payload = [m for m in members if not m[0].startswith("info/")]
    tmp = out_path.with_name(out_path.name + ".part")
    if out_path.name.endswith(".tar.bz2"):
        import bz2

        tmp.write_bytes(bz2.compress(_tar_bytes(info + payload), 9))
    else:
        stem = out_path.name[: -len(".conda")]
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_STORED) as zf:
            for arcname, data in (
                ("metadata.json", json.dumps({"conda_pkg_format_version": 2}).encode()),
                (f"pkg-{stem}.tar.zst", _zstd_stored(_tar_bytes(payload))),
                (f"info-{stem}.tar.zst", _zstd_stored(_tar_bytes(info))),
            ):
                zi = zipfile.ZipInfo(arcname, date_time=_ZIP_DATE)
                zf.writestr(zi, data)
    os.replace(tmp, out_path)


def tamper_package(
    package: str | os.PathLike[str],
    *,
    files: Mapping[str, bytes | str] | None = None,
    salt: bytes = b"tampered",
) -> tuple[str, str]:
    """Rewrite a built package in place so its sha256 changes, without reindexing; return (old, new) sha256.

    It stays a valid archive. ``files`` replaces payload contents (paths.json keeps the old hashes, as a
    real tampered package would); otherwise only ``info/tampered`` is added. Works on .tar.bz2 and .conda.
    """
    import tempfile

    import rattler.package_streaming

    package = Path(package)
    old = hashlib.sha256(package.read_bytes()).hexdigest()
    with tempfile.TemporaryDirectory(prefix="envguard-tamper-") as tmp:
        root = Path(tmp)
        rattler.package_streaming.extract(package, root)
        (root / "info" / "tampered").write_bytes(salt)
        for rel, content in (files or {}).items():
            target = root / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(_as_bytes(content))
        _pack_directory(root, package)
    return old, hashlib.sha256(package.read_bytes()).hexdigest()


# --------------------------------------------------------------------------------------------------------------
# The standard channel
# --------------------------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class StandardChannel:
    path: Path
    shims: Path
    host_platform: str
    python_version: str  # the host interpreter's version, e.g. "3.11.7"
    python312_version: str | None
    torch_version: str  # conda record version of the newest pytorch ("2.13.0")
    real_torch_version: str | None  # what ``import torch`` gives ("2.13.0+cpu"), None if torch is not installed
    numpy_version: str | None
    pip_version: str | None

    @property
    def url(self) -> str:
        return channel_url(self.path)

    @property
    def python312_available(self) -> bool:
        return self.python312_version is not None


def _site_packages(subdir: str, pyver: str) -> str:
    return "Lib/site-packages" if subdir.startswith("win") else f"lib/python{pyver}/site-packages"


def _base_interpreter() -> Path:
    """The real interpreter behind the test interpreter (resolving venvs and symlinks)."""
    base = getattr(sys, "_base_executable", None) or sys.executable
    return Path(os.path.realpath(base))


def _find_python312() -> tuple[Path, str] | None:
    if sys.version_info[:2] == (3, 12):  # the host's own line: a second python 3.12 record would clash with it
        return None
    pyenv = Path("/root/.pyenv/versions")
    candidates = sorted(pyenv.glob("3.12*/bin/python3.12"), reverse=True) if pyenv.is_dir() else []
    for exe in candidates:
        if exe.exists():
            return Path(os.path.realpath(exe)), exe.parent.parent.name
    return None


def _python_spec(subdir: str, version: str, exe: Path | None, *, host: bool) -> PackageSpec:
    major_minor = ".".join(version.split(".")[:2])
    depends: list[str] = []
    if subdir.startswith("linux"):
        depends.append("__glibc >=2.17,<3.0.a0")
    elif subdir.startswith("osx"):
        depends.append("__osx >=11.0")
    files: dict[str, bytes | str] = {}
    symlinks: dict[str, str] = {}
    if host and exe is not None:
        files = {
            "pyvenv.cfg": (
                f"home = {exe.parent}\n"
                "include-system-site-packages = false\n"
                f"version = {version}\n"
                f"executable = {exe}\n"
            ),
            f"lib/python{major_minor}/site-packages/README.txt": "Site-packages of an envguard test python.\n",
        }
        symlinks = {
            f"bin/python{major_minor}": str(exe),
            "bin/python3": f"python{major_minor}",
            "bin/python": f"python{major_minor}",
        }
    return PackageSpec(
        name="python", version=version, build="h0_0_cpython", subdir=subdir, depends=depends,
        constrains=[f"python_abi {major_minor}.* *_cp{major_minor.replace('.', '')}"],
        files=files, symlinks=symlinks, license="Python-2.0",
    )


def _dist(name: str) -> importlib.metadata.Distribution | None:
    try:
        return importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _top_level_entries(dist: importlib.metadata.Distribution, *, with_dist_info: bool) -> set[Path]:
    """Absolute paths of a distribution's top-level entries in site-packages (packages, modules, .libs)."""
    base = Path(str(dist.locate_file("")))
    out: set[Path] = set()
    for f in dist.files or ():
        parts = f.parts
        if not parts or parts[0] in ("..", "__pycache__") or parts[0].endswith(".pth"):
            continue
        if parts[0].endswith((".dist-info", ".egg-info")) and not with_dist_info:
            continue
        out.add(base / parts[0])
    return {p for p in out if p.exists()}


def _requirement_closure(root: str, exclude: set[str]) -> list[importlib.metadata.Distribution]:
    """The installed runtime requirements of ``root`` (transitively, no extras), except ``exclude``."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    seen: dict[str, importlib.metadata.Distribution] = {}
    todo = [root]
    while todo:
        name = canonicalize_name(todo.pop())
        if name in seen or (name in exclude and name != canonicalize_name(root)):
            continue
        dist = _dist(name)
        if dist is None:
            continue
        seen[name] = dist
        for line in dist.requires or ():
            req = Requirement(line)
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue
            todo.append(req.name)
    seen.pop(canonicalize_name(root), None)
    return list(seen.values())


def _make_shim(shim_dir: Path, entries: Iterable[Path]) -> None:
    shim_dir.mkdir(parents=True, exist_ok=True)
    for entry in sorted(entries):
        link = shim_dir / entry.name
        if not link.exists() and not link.is_symlink():
            link.symlink_to(entry)


_WHEEL_FILE = "Wheel-Version: 1.0\nGenerator: envguard-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"


def _dist_info_files(
    project: str, version: str, site: str, extra: Mapping[str, str], *, entry_points: Sequence[str] = ()
) -> dict[str, bytes | str]:
    """A conda-installed-looking dist-info (INSTALLER=conda) plus ``extra`` files, with a RECORD of them all."""
    dist_info = f"{site}/{project.replace('-', '_')}-{version}.dist-info"
    files: dict[str, bytes | str] = {
        f"{dist_info}/METADATA": f"Metadata-Version: 2.1\nName: {project}\nVersion: {version}\n",
        f"{dist_info}/INSTALLER": "conda\n",
        f"{dist_info}/WHEEL": _WHEEL_FILE,
        **{f"{site}/{k}": v for k, v in extra.items()},
    }
    if entry_points:
        body = "".join(f"{ep}\n" for ep in entry_points)
        files[f"{dist_info}/entry_points.txt"] = "[console_scripts]\n" + body
    record_lines = []
    for path, content in sorted(files.items()):
        data = _as_bytes(content)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record_lines.append(f"{path[len(site) + 1:]},sha256={digest},{len(data)}")
    record_lines.append(f"{dist_info[len(site) + 1:]}/RECORD,,")
    files[f"{dist_info}/RECORD"] = "\n".join(record_lines) + "\n"
    return files


def _real_version(name: str) -> str | None:
    dist = _dist(name)
    return dist.version if dist is not None else None


def standard_packages(shims: Path) -> tuple[list[PackageSpec], dict[str, Any]]:
    """PackageSpecs of the standard channel plus facts about it; creates the shim directories in ``shims``."""
    host = host_platform()
    exe = _base_interpreter()
    pyver = ".".join(str(v) for v in sys.version_info[:3])
    py312 = _find_python312()
    numpy_dist, torch_dist, pip_dist = _dist("numpy"), _dist("torch"), _dist("pip")
    numpy_version = numpy_dist.version if numpy_dist else "2.0.0"
    pip_version = pip_dist.version if pip_dist else "24.0"

    if numpy_dist is not None:
        _make_shim(shims / "numpy", _top_level_entries(numpy_dist, with_dist_info=False))
    if torch_dist is not None:
        entries = _top_level_entries(torch_dist, with_dist_info=False)
        for dep in _requirement_closure("torch", exclude={"torch", "numpy"}):
            entries |= _top_level_entries(dep, with_dist_info=True)
        _make_shim(shims / "torch", entries)
    if pip_dist is not None:
        _make_shim(shims / "pip", _top_level_entries(pip_dist, with_dist_info=False))

    pkgs: list[PackageSpec] = []
    py_tag = "py" + "".join(pyver.split(".")[:2])
    py_mm = ".".join(pyver.split(".")[:2])
    python_dep = f"python >={py_mm},<{py_mm.split('.')[0]}.{int(py_mm.split('.')[1]) + 1}.0a0"
    for subdir in PLATFORMS:
        is_host = subdir == host
        pkgs.append(_python_spec(subdir, pyver, exe, host=is_host))
        if py312 is not None:
            pkgs.append(_python_spec(subdir, py312[1], py312[0], host=is_host))
        site = _site_packages(subdir, py_mm)

        pkgs.append(PackageSpec(
            name="numpy", version=numpy_version, build=f"{py_tag}_h0_0", subdir=subdir, depends=[python_dep],
            files=_dist_info_files("numpy", numpy_version, site, {"_envguard_numpy.pth": f"{shims / 'numpy'}\n"}),
        ))
        torch_builds: list[tuple[str, str, int, list[str]]] = [
            ("2.13.0", "cpu", 0, []),
            ("2.12.0", "cpu", 0, []),
        ]
        if not subdir.startswith("osx"):
            torch_builds.append(("2.13.0", "cuda126", 200, ["__cuda", "cuda-version >=12.6,<13"]))
        if subdir.startswith("linux"):
            torch_builds.append(("2.13.0", "cuda128", 201, ["__cuda", "cuda-version >=12.8,<13"]))
        for version, flavour, bn, extra_deps in torch_builds:
            pkgs.append(PackageSpec(
                name="pytorch", version=version, build=f"{flavour}_generic_{py_tag}_h0_{bn}", build_number=bn,
                subdir=subdir, depends=[python_dep, "numpy >=1.23,<3", *extra_deps],
                files=_dist_info_files("torch", version, site, {"_envguard_torch.pth": f"{shims / 'torch'}\n"}),
            ))

    for cuda in ("12.6", "12.8", "13.0"):
        # As conda-forge's real cuda-version records do: the driver must support the major line only
        # (minor-version compatibility), and cudatoolkit follows the exact line.
        pkgs.append(PackageSpec(
            name="cuda-version", version=cuda, build="h0_3", build_number=3, noarch="generic",
            constrains=[f"__cuda >={cuda.split('.')[0]}", f"cudatoolkit {cuda}|{cuda}.*"],
        ))
    pkgs.append(PackageSpec(
        name="pip", version=pip_version, build="pyh0_0", noarch="python", depends=["python >=3.9"],
        files=_dist_info_files(
            "pip", pip_version, "site-packages", {"_envguard_pip.pth": f"{shims / 'pip'}\n"},
            entry_points=["pip = pip._internal.cli.main:main", "pip3 = pip._internal.cli.main:main"],
        ),
        entry_points=["pip = pip._internal.cli.main:main", "pip3 = pip._internal.cli.main:main"],
    ))
    pkgs.append(PackageSpec(
        name="egtool", version="1.0.0", build="pyh0_0", noarch="python", depends=["python >=3.8"],
        files=_dist_info_files("egtool", "1.0.0", "site-packages", {
            "egtool/__init__.py": "import sys\n\n\ndef main():\n    print('egtool', sys.prefix)\n    return 0\n",
        }, entry_points=["egtool = egtool:main"]),
        entry_points=["egtool = egtool:main"],
    ))
    pkgs.append(PackageSpec(
        name="egplaceholder", version="1.0.0", build="h0_0", noarch="generic",
        files={
            "etc/egplaceholder.conf": f"prefix={PLACEHOLDER}\n",
            "bin/egplaceholder": f"#!/bin/sh\necho {PLACEHOLDER}\n",
        },
    ))
    pkgs.append(PackageSpec(
        name="eglink", version="1.0.0", build="h0_0", noarch="generic",
        files={"share/eglink/target.txt": "eglink target\n"},
        symlinks={"share/eglink/link.txt": "target.txt", "bin/eglink-data": "../share/eglink/target.txt"},
    ))
    facts = {
        "host_platform": host,
        "python_version": pyver,
        "python312_version": py312[1] if py312 else None,
        "torch_version": "2.13.0",
        "real_torch_version": torch_dist.version if torch_dist else None,
        "numpy_version": numpy_dist.version if numpy_dist else None,
        "pip_version": pip_dist.version if pip_dist else None,
    }
    return pkgs, facts


def build_standard_channel(root: str | os.PathLike[str]) -> StandardChannel:
    """Build the standard channel into ``root/channel`` (shims in ``root/shims``) and index it."""
    root = Path(root)
    shims = root / "shims"
    pkgs, facts = standard_packages(shims)
    make_channel(root / "channel", pkgs)
    return StandardChannel(path=root / "channel", shims=shims, **facts)


# --------------------------------------------------------------------------------------------------------------
# HTTP serving
# --------------------------------------------------------------------------------------------------------------

class HttpServer:
    """A directory served on 127.0.0.1 by a daemon thread. ``url`` has no trailing slash."""

    def __init__(self, directory: Path, *, prefix: str = "", auth: tuple[str, str] | None = None,
                 token: str | None = None) -> None:
        self.directory = Path(directory)
        self.requests: list[str] = []
        prefix = prefix.strip("/")
        mount = "/".join(p for p in (f"t/{token}" if token else "", prefix) if p)
        expected_auth = (
            "Basic " + base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode() if auth else None
        )
        server_self = self

        class Handler(SimpleHTTPRequestHandler):
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, directory=str(server_self.directory), **kwargs)

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def _allowed(self) -> bool:
                if expected_auth and self.headers.get("Authorization") != expected_auth:
                    self.send_response(401)
                    self.send_header("WWW-Authenticate", 'Basic realm="envguard-tests"')
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return False
                path = self.path.split("?", 1)[0]
                if mount:
                    if not (path == f"/{mount}" or path.startswith(f"/{mount}/")):
                        self.send_error(404)
                        return False
                    self.path = self.path[len(mount) + 1:] or "/"
                server_self.requests.append(self.path.split("?", 1)[0])
                return True

            def do_GET(self) -> None:
                if self._allowed():
                    super().do_GET()

            def do_HEAD(self) -> None:
                if self._allowed():
                    super().do_HEAD()

            def end_headers(self) -> None:
                self.send_header("Cache-Control", "no-store")
                super().end_headers()

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.url = self.base_url + (f"/{mount}" if mount else "")
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="envguard-test-http", daemon=True)
        self._thread.start()

    def url_with_auth(self, user: str, password: str) -> str:
        return self.url.replace("http://", f"http://{user}:{password}@", 1)

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> HttpServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def serve_directory(directory: str | os.PathLike[str], *, prefix: str = "", auth: tuple[str, str] | None = None,
                    token: str | None = None) -> HttpServer:
    """Serve ``directory`` at ``http://127.0.0.1:<free port>/[t/<token>/][<prefix>]``."""
    return HttpServer(Path(directory), prefix=prefix, auth=auth, token=token)


# --------------------------------------------------------------------------------------------------------------
# Wheels and a PEP 503 index
# --------------------------------------------------------------------------------------------------------------

def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _wheel_metadata(name: str, version: str, requires: Sequence[str], requires_python: str | None) -> str:
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}", f"Summary: {name} test wheel"]
    if requires_python:
        lines.append(f"Requires-Python: {requires_python}")
    # as a build backend writes them: every extra a requirement's marker names is provided (pip installs
    # `name[extra]` only for an extra the METADATA provides)
    extras = dict.fromkeys(re.findall(r"""extra\s*==\s*['"]([^'"]+)['"]""", " ".join(requires)))
    lines += [f"Provides-Extra: {e}" for e in extras]
    lines += [f"Requires-Dist: {r}" for r in requires]
    return "\n".join(lines) + "\n"


def build_wheel(
    out_dir: str | os.PathLike[str],
    name: str,
    version: str,
    files: Mapping[str, bytes | str] | None = None,
    requires: Sequence[str] = (),
    *,
    requires_python: str | None = None,
) -> Path:
    """Write ``<out_dir>/<name>-<version>-py3-none-any.whl`` (pure python) and return its path.

    ``files`` are paths inside the wheel's root (purelib); the default is ``<name>/__init__.py`` defining
    ``__version__``. The METADATA is also written next to the wheel as ``<wheel>.metadata`` (PEP 658).
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    dist_name = re.sub(r"[-_.]+", "_", name)
    module = dist_name.lower()
    if files is None:
        files = {f"{module}/__init__.py": f"__version__ = {version!r}\n"}
    dist_info = f"{dist_name}-{version}.dist-info"
    metadata = _wheel_metadata(name, version, requires, requires_python)
    contents: dict[str, bytes] = {p: _as_bytes(c) for p, c in files.items()}
    contents[f"{dist_info}/METADATA"] = metadata.encode()
    contents[f"{dist_info}/WHEEL"] = _WHEEL_FILE.encode()
    record = "".join(f"{p},{_record_hash(d)},{len(d)}\n" for p, d in contents.items())
    record += f"{dist_info}/RECORD,,\n"
    contents[f"{dist_info}/RECORD"] = record.encode()
    wheel = out_dir / f"{dist_name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for path, data in contents.items():
            zi = zipfile.ZipInfo(path, date_time=_ZIP_DATE)
            zi.compress_type = zipfile.ZIP_DEFLATED
            zi.external_attr = 0o644 << 16
            zf.writestr(zi, data)
    Path(str(wheel) + ".metadata").write_text(metadata)
    return wheel


@dataclasses.dataclass
class PypiIndex:
    root: Path  # served directory; the simple index is root/"simple"
    wheels: dict[tuple[str, str], Path]  # (normalized name, version) -> wheel
    sha256: dict[str, str]  # wheel file name -> sha256 hex
    url: str = ""  # set when served: ".../simple"

    @property
    def simple_dir(self) -> Path:
        return self.root / "simple"


def build_pypi_index(
    root: str | os.PathLike[str],
    wheels: Iterable[Path | tuple[str, str] | tuple[str, str, Sequence[str]]],
    *,
    bad_hash_for: Iterable[str] = (),
) -> PypiIndex:
    """Build ``root/simple/`` (PEP 503) and ``root/files/`` for ``wheels``.

    Entries are wheel Paths or (name, version[, requires]) tuples built with :func:`build_wheel`. Links carry
    ``#sha256=`` fragments and PEP 658/714 metadata attributes. ``bad_hash_for`` (wheel file names) gets a
    wrong fragment, for integrity tests.
    """
    root = Path(root)
    files_dir = root / "files"
    files_dir.mkdir(parents=True, exist_ok=True)
    bad = set(bad_hash_for)
    built: list[Path] = []
    for entry in wheels:
        if isinstance(entry, Path):
            target = files_dir / entry.name
            if entry.resolve() != target.resolve():
                shutil.copy2(entry, target)
                meta = Path(str(entry) + ".metadata")
                if meta.exists():
                    shutil.copy2(meta, Path(str(target) + ".metadata"))
            built.append(target)
        else:
            name, version, *rest = entry
            built.append(build_wheel(files_dir, name, version, requires=tuple(rest[0]) if rest else ()))
    by_project: dict[str, list[Path]] = {}
    index = PypiIndex(root=root, wheels={}, sha256={})
    for wheel in built:
        name, version = wheel.name.split("-")[:2]
        project = _normalize(name)
        by_project.setdefault(project, []).append(wheel)
        index.wheels[(project, version)] = wheel
        index.sha256[wheel.name] = hashlib.sha256(wheel.read_bytes()).hexdigest()
    simple = root / "simple"
    simple.mkdir(parents=True, exist_ok=True)
    links = "".join(f'<a href="{p}/">{p}</a>\n' for p in sorted(by_project))
    (simple / "index.html").write_text(f"<!DOCTYPE html>\n<html><body>\n{links}</body></html>\n")
    for project, project_wheels in by_project.items():
        rows = []
        for wheel in sorted(project_wheels):
            digest = index.sha256[wheel.name]
            if wheel.name in bad:
                digest = hashlib.sha256(b"tampered" + digest.encode()).hexdigest()
            meta_attr = ""
            meta = Path(str(wheel) + ".metadata")
            if meta.exists():
                meta_hash = hashlib.sha256(meta.read_bytes()).hexdigest()
                meta_attr = f' data-dist-info-metadata="sha256={meta_hash}" data-core-metadata="sha256={meta_hash}"'
            href = html.escape(f"../../files/{wheel.name}#sha256={digest}")
            rows.append(f'<a href="{href}"{meta_attr}>{wheel.name}</a><br/>\n')
        page = simple / project
        page.mkdir(parents=True, exist_ok=True)
        (page / "index.html").write_text(
            f"<!DOCTYPE html>\n<html><body><h1>Links for {project}</h1>\n{''.join(rows)}</body></html>\n"
        )
    return index


STANDARD_WHEELS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("egdemo-a", "1.0", ()),
    ("egdemo-a", "2.0", ()),
    ("egdemo-b", "1.0", ("egdemo-a>=1.0",)),
)


def standard_pypi_index(root: str | os.PathLike[str]) -> PypiIndex:
    return build_pypi_index(root, STANDARD_WHEELS)


# --------------------------------------------------------------------------------------------------------------
# Synthetic channels for benchmarks
# --------------------------------------------------------------------------------------------------------------

@dataclasses.dataclass
class GeneratedChannel:
    path: Path
    platforms: tuple[str, ...]
    names: list[str]
    root_specs: list[str]  # a handful of top-level specs whose closure covers much of the channel

    @property
    def url(self) -> str:
        return channel_url(self.path)


def _synthetic_graph(n_packages: int, seed: int) -> list[tuple[str, str, list[str], bool]]:
    """(name, version, depends, noarch) for a layered DAG: every package depends on 0-4 lower ones."""
    rng = random.Random(seed)
    out: list[tuple[str, str, list[str], bool]] = []
    n_names = max(1, n_packages // 2)  # about two versions per name
    versions: dict[str, list[str]] = {}
    names = [f"synth-{i:05d}" for i in range(n_names)]
    count = 0
    for i, name in enumerate(names):
        for v in range(1 + (i % 3 == 0) + (i % 7 == 0)):
            if count >= n_packages:
                break
            version = f"{1 + v}.{rng.randint(0, 9)}.0"
            versions.setdefault(name, []).append(version)
            deps = []
            if i:
                for j in sorted(set(rng.sample(range(max(0, i - 50), i), k=min(i, rng.randint(0, 4))))):
                    dep = names[j]
                    deps.append(f"{dep} >={versions[dep][0]}" if rng.random() < 0.7 else dep)
            out.append((name, version, deps, rng.random() < 0.2))
            count += 1
    i = 0
    while count < n_packages:  # top up with extra versions of the most recent names
        name, version, deps, noarch = out[-1 - (i % len(out))]
        out.append((name, f"{version}.post{i}", deps, noarch))
        count += 1
        i += 1
    return out


def generate_channel(
    channel_dir: str | os.PathLike[str],
    n_packages: int,
    platforms: Sequence[str] = PLATFORMS,
    *,
    seed: int = 0,
    fmt: str = "tar.bz2",
) -> GeneratedChannel:
    """A channel of ``n_packages`` synthetic records per platform (20% of them noarch, shared) with a realistic
    dependency DAG, indexed. Packages are empty (index.json + paths.json) and built at compresslevel 1."""
    channel_dir = Path(channel_dir)
    for sub in (*platforms, "noarch"):
        (channel_dir / sub).mkdir(parents=True, exist_ok=True)
    graph = _synthetic_graph(n_packages, seed)
    for name, version, deps, noarch in graph:
        subdirs = ["noarch"] if noarch else list(platforms)
        for sub in subdirs:
            build_package(
                channel_dir, name, version, "h0_0", subdir=sub, noarch="generic" if noarch else None,
                depends=deps, fmt=fmt, compresslevel=1,
            )
    index_channel(channel_dir)
    names = sorted({g[0] for g in graph})
    tops = names[-5:] if len(names) >= 5 else names
    return GeneratedChannel(path=channel_dir, platforms=tuple(platforms), names=names, root_specs=tops)


def generate_repodata(
    channel_dir: str | os.PathLike[str],
    n_records: int,
    platforms: Sequence[str] = ("linux-64",),
    *,
    seed: int = 0,
) -> Path:
    """Write ``<channel_dir>/<platform>/repodata.json`` with ``n_records`` synthetic records each (plus an empty
    noarch), without package files: for solver/lock benchmarks on large repodata. Hashes are fake."""
    channel_dir = Path(channel_dir)
    graph = _synthetic_graph(n_records, seed)
    for sub in (*platforms, "noarch"):
        (channel_dir / sub).mkdir(parents=True, exist_ok=True)
        packages: dict[str, Any] = {}
        if sub != "noarch":
            for k, (name, version, deps, _noarch) in enumerate(graph):
                digest = hashlib.sha256(f"{sub}/{name}/{version}/{k}".encode()).hexdigest()
                packages[f"{name}-{version}-h0_0.tar.bz2"] = {
                    "name": name, "version": version, "build": "h0_0", "build_number": 0, "depends": deps,
                    "subdir": sub, "md5": digest[:32], "sha256": digest, "size": 1024,
                    "timestamp": DEFAULT_TIMESTAMP_MS, "license": "BSD-3-Clause",
                }
        (channel_dir / sub / "repodata.json").write_text(json.dumps(
            {"info": {"subdir": sub}, "packages": packages, "packages.conda": {}, "removed": [],
             "repodata_version": 1}
        ))
    return channel_dir
