"""The Python side of a prefix: its site-packages directories, every dist-info/egg-info with its owner
(engine-notes.md) and import names, the directories ``*.pth`` files add, and the Python version; for
envguard.prefix's scan: :func:`find_site_packages`, :func:`scan_dists`, :func:`pth_dirs` and
:func:`prefix_python_version`."""

from __future__ import annotations

import itertools
import os
import stat
from pathlib import Path

from envguard.errors import UserError
from envguard.model import pep503
from envguard.prefix.records import PIP_INSTALLERS, CondaRecord, Dist, Owner
from envguard.safeio import read_small_text
from envguard.yamlio import read_bytes

#: top_level.txt, RECORD, pyvenv.cfg, a .pth file: torch's RECORD, among the largest, is ~2 MB
_MAX_DIST_FILE = 64 << 20


def find_site_packages(prefix: Path) -> list[str]:
    found: list[str] = []
    lib = prefix / "lib"
    try:
        for d in sorted(lib.iterdir()):
            if d.name.startswith("python") and (d / "site-packages").is_dir():
                found.append(f"lib/{d.name}/site-packages")
    except OSError:
        pass
    if (prefix / "Lib" / "site-packages").is_dir():
        found.append("Lib/site-packages")
    return found


def _read_headers(path: str) -> dict[str, str]:
    """Name and Version from an RFC 822 METADATA header, stopping at the body."""
    out: dict[str, str] = {}
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # a FIFO or a link to /dev/zero is never opened
            return out
        with open(path, encoding="utf-8", errors="replace") as fh:
            for line in itertools.islice(fh, 10_000):  # the headers come first; a huge file is not read through
                if not line.strip():
                    break
                k, sep, v = line.partition(":")
                if sep and k in ("Name", "Version") and k not in out:
                    out[k] = v.strip()
                    if len(out) == 2:
                        break
    except OSError:
        pass
    return out


def _import_names(meta_dir: str, name: str) -> tuple[str, ...]:
    """Top-level import names a dist provides, without namespace packages (a directory with no
    ``__init__.py``, such as ``nvidia`` or ``google``, is shared by design)."""
    site = os.path.dirname(meta_dir)
    return tuple(n for n in _raw_import_names(meta_dir, name)
                 if not (os.path.isdir(os.path.join(site, n))
                         and not os.path.exists(os.path.join(site, n, "__init__.py"))))


def _raw_import_names(meta_dir: str, name: str) -> tuple[str, ...]:
    top_level = read_small_text(os.path.join(meta_dir, "top_level.txt"), _MAX_DIST_FILE)
    names = {n.strip() for n in (top_level or "").splitlines() if n.strip()}
    if names:
        return tuple(sorted(names))
    names_set: set[str] = set()
    for line in (read_small_text(os.path.join(meta_dir, "RECORD"), _MAX_DIST_FILE) or "").splitlines():
        first = line.split(",", 1)[0].split("/", 1)[0]
        if not first or first.startswith("..") or first.endswith((".dist-info", ".data", ".pth")) \
                or first == "__pycache__":
            continue
        names_set.add(first[:-3] if first.endswith(".py") else first.split(".", 1)[0])
    if names_set:
        return tuple(sorted(names_set))
    return (pep503(name).replace("-", "_"),)


def scan_dists(prefix: Path, site_packages: list[str], conda_files: dict[str, str], *,
                with_imports: bool) -> list[Dist]:
    """Every dist-info/egg-info, with its owner. ``with_imports`` also reads each one's import names
    (top_level.txt or RECORD): only the pip-over-conda rules need them."""
    dists: list[Dist] = []
    for sp in site_packages:
        try:
            entries = sorted(os.scandir(os.path.join(prefix, sp)), key=lambda e: e.name)
        except OSError:
            continue
        for e in entries:
            if e.name.endswith(".dist-info"):
                meta_name = "METADATA"
            elif e.name.endswith(".egg-info"):
                meta_name = "PKG-INFO"
            else:
                continue
            rel = f"{sp}/{e.name}"
            is_dir = e.is_dir()
            if is_dir:
                meta = os.path.join(e.path, meta_name)
                owner_pkg = conda_files.get(f"{rel}/{meta_name}")
            else:  # a bare egg-info file (distutils)
                meta = e.path
                owner_pkg = conda_files.get(rel)
            headers = _read_headers(meta)
            stem = e.name.rsplit(".", 1)[0]
            dir_name, _, dir_version = stem.partition("-")
            name = headers.get("Name") or dir_name
            version = headers.get("Version") or dir_version.split("-", 1)[0]
            installer = None
            if is_dir:
                try:  # a regular file of a few bytes; another installer's name that is not UTF-8 is unknown
                    raw = read_bytes(os.path.join(e.path, "INSTALLER"), limit=4096)
                    installer = raw.decode("utf-8", errors="replace").strip() or None
                except UserError:
                    installer = None
            if owner_pkg is not None:
                owner: Owner = "conda"
            elif installer and installer.lower() in PIP_INSTALLERS:
                owner = "pip"
            else:
                owner = "unknown"
            if not with_imports:
                imports: tuple[str, ...] = ()
            elif is_dir:
                imports = _import_names(e.path, name)
            else:
                imports = (pep503(name).replace("-", "_"),)
            dists.append(Dist(name=name, version=version, path=rel, installer=installer, owner=owner,
                              conda_record=owner_pkg, import_names=imports))
    return dists


def prefix_python_version(prefix: Path, records: list[CondaRecord], site_packages: list[str]) -> str | None:
    py = next((r for r in records if r.name == "python"), None)
    if py is not None:
        return py.version
    for line in (read_small_text(prefix / "pyvenv.cfg", _MAX_DIST_FILE) or "").splitlines():
        k, _, v = line.partition("=")
        if k.strip() in ("version", "version_info"):
            return v.strip()
    for sp in site_packages:
        part = sp.split("/")[1] if sp.startswith("lib/") else ""
        if part.startswith("python3"):
            return part[len("python"):].rstrip("t")
    return None


def pth_dirs(prefix: Path, site_packages: list[str], conda_files: dict[str, str]) -> list[tuple[str, str | None, str]]:
    out: list[tuple[str, str | None, str]] = []
    for sp in site_packages:
        try:
            pths = sorted(n for n in os.listdir(prefix / sp) if n.endswith(".pth"))
        except OSError:
            continue
        for n in pths:
            rel = f"{sp}/{n}"
            text = read_small_text(prefix / rel, _MAX_DIST_FILE)
            if text is None:
                continue
            for raw in text.splitlines():
                line = raw.strip()
                if not line or line.startswith(("#", "import ", "import\t")):
                    continue
                d = line if os.path.isabs(line) else os.path.normpath(os.path.join(prefix, sp, line))
                out.append((rel, conda_files.get(rel), d))
    return out
