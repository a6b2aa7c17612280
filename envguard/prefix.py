"""Read an installed environment: conda-meta records, Python dists, files on disk.

This module has side effects (it reads the prefix and, for import origins, runs
the prefix's own interpreter) but it never writes into the prefix. The rules
that judge what it reads live in :mod:`envguard.check.checks`.

Ownership of a dist-info follows engine-notes.md: a ``*.dist-info`` or
``*.egg-info`` whose METADATA/PKG-INFO is listed in some ``conda-meta/*.json``
``files`` belongs to that conda record; otherwise INSTALLER decides (pip, uv);
otherwise the owner is unknown.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Literal

from envguard.errors import IntegrityError, UserError
from envguard.model import Package, pep503
from envguard.redact import redact

Owner = Literal["conda", "pip", "unknown"]
PIP_INSTALLERS = frozenset({"pip", "uv", "poetry", "pdm", "pipenv", "hatch"})
_CHUNK = 1 << 20  # 1 MiB reads: large enough to amortise syscalls, small enough to stay in cache


# --------------------------------------------------------------------------- records


@dataclass(frozen=True)
class FileEntry:
    """One file of a conda record, as written in its ``paths_data``."""

    path: str  # relative to the prefix, forward slashes
    path_type: str = "hardlink"
    sha256: str | None = None
    size: int | None = None
    # The installer rewrote the prefix placeholder in this file, so the
    # package's sha256/size no longer describe it (unless sha256_in_prefix says).
    rewritten: bool = False


@dataclass(frozen=True)
class CondaRecord:
    name: str
    version: str
    build: str
    channel: str  # redacted, no trailing slash
    subdir: str
    url: str  # redacted
    md5: str | None
    sha256: str | None
    depends: tuple[str, ...]
    meta_file: str  # file name inside conda-meta/
    files: tuple[str, ...]
    paths: tuple[FileEntry, ...]
    noarch: str | None = None
    # What was asked for when this record was installed (conda's ``requested_spec``, rattler's
    # ``requested_specs``), and the archive's file name: envguard export adopts both.
    requested_specs: tuple[str, ...] = ()
    fn: str = ""

    @property
    def channel_name(self) -> str:
        """``pytorch`` for https://conda.anaconda.org/pytorch, the last path part otherwise."""
        c = self.channel.rstrip("/")
        return c.rsplit("/", 1)[-1] if "/" in c else c

    def to_package(self, platform: str | None) -> Package:
        # The channel in the form every reader uses (``conda-forge``, or a redacted base URL), so that a
        # lock and this prefix compare equal.
        from envguard.channels import channel_from_url, normalise_channel

        return Package(
            name=self.name,
            version=self.version,
            manager="conda",
            build=self.build,
            channel=channel_from_url(self.url) or normalise_channel(self.channel),
            sha256=self.sha256,
            md5=self.md5,
            url=self.url or None,
            platform=platform,
            depends=self.depends,
        )


@dataclass(frozen=True)
class Dist:
    """A ``*.dist-info`` / ``*.egg-info`` found in a site-packages directory."""

    name: str  # from METADATA, falls back to the directory name
    version: str
    path: str  # the metadata directory, relative to the prefix
    installer: str | None
    owner: Owner
    conda_record: str | None = None  # conda package name when conda owns it
    import_names: tuple[str, ...] = ()  # read in conda prefixes only (the pip-over-conda rules need them)

    @property
    def key(self) -> str:
        return pep503(self.name)

    def to_package(self, platform: str | None) -> Package:
        return Package(name=self.name, version=self.version, manager="pip", platform=platform)


@dataclass(frozen=True)
class Overwritten:
    """A conda record's dist-info that vanished or now says another installer wrote it."""

    package: str
    metadata_path: str
    reason: str


@dataclass
class PrefixInfo:
    prefix: Path
    is_conda: bool
    is_venv: bool
    python_version: str | None  # "3.11" or "3.11.7"
    site_packages: list[str]  # relative to the prefix
    conda: list[CondaRecord] = field(default_factory=list)
    dists: list[Dist] = field(default_factory=list)
    overwritten: list[Overwritten] = field(default_factory=list)
    bad_records: list[tuple[str, str]] = field(default_factory=list)  # (conda-meta file, why)
    # Directories that ``*.pth`` files in site-packages add to sys.path: (pth path, owning conda
    # package or None, directory). Editable installs and conda shims resolve imports through them.
    pth_dirs: list[tuple[str, str | None, str]] = field(default_factory=list)

    def record(self, name: str) -> CondaRecord | None:
        return next((r for r in self.conda if r.name == name), None)

    def packages(self, platform: str | None = None) -> list[Package]:
        """Conda records plus the dists conda does not own, as one normalised list.

        A conda package whose dist-info another installer rewrote (``pip install --ignore-installed`` of the
        same version) is listed twice, as conda's and as pip's: both managers record it, which is what
        envguard diff and check call pip over conda."""
        pkgs = [r.to_package(platform) for r in self.conda]
        pkgs += [d.to_package(platform) for d in self.dists if d.owner != "conda"]
        rewritten = {ow.metadata_path.rsplit("/", 1)[0] for ow in self.overwritten}
        pkgs += [d.to_package(platform) for d in self.dists if d.owner == "conda" and d.path in rewritten]
        return sorted(pkgs, key=lambda p: (p.manager, p.key, p.version))


# --------------------------------------------------------------------------- reading


def _read_record(path: Path) -> CondaRecord:
    # Plain json is faster here than rattler.PrefixRecord.from_path once the
    # import of rattler is counted, and check must start fast (bench/check.py).
    data = json.loads(path.read_bytes())
    if not isinstance(data, dict) or not data.get("name") or not data.get("version"):
        raise ValueError("not a conda package record (no name/version)")
    files = tuple(str(f) for f in data.get("files") or ())
    entries: list[FileEntry] = []
    for p in (data.get("paths_data") or {}).get("paths") or ():
        rewritten = bool(p.get("prefix_placeholder")) and not p.get("sha256_in_prefix")
        entries.append(
            FileEntry(
                path=p["_path"],
                path_type=str(p.get("path_type") or "hardlink"),
                sha256=p.get("sha256_in_prefix") or p.get("sha256"),
                size=p.get("size_in_bytes"),
                rewritten=rewritten,
            )
        )
    if not entries:  # old records have no paths_data: existence is all we can check
        entries = [FileEntry(path=f) for f in files]
    return CondaRecord(
        name=str(data["name"]),
        version=str(data["version"]),
        build=str(data.get("build") or data.get("build_string") or ""),
        channel=redact(str(data.get("channel") or "")).rstrip("/"),
        subdir=str(data.get("subdir") or ""),
        url=redact(str(data.get("url") or "")),
        md5=data.get("md5"),
        sha256=data.get("sha256"),
        depends=tuple(data.get("depends") or ()),
        meta_file=path.name,
        files=files,
        paths=tuple(entries),
        noarch=(data.get("noarch") if isinstance(data.get("noarch"), str) else None),
        requested_specs=_requested_specs(data),
        fn=str(data.get("fn") or ""),
    )


def _requested_specs(data: dict) -> tuple[str, ...]:
    specs = data.get("requested_specs")
    out = [str(s) for s in specs if isinstance(s, str) and s.strip()] if isinstance(specs, list) else []
    one = data.get("requested_spec")
    if isinstance(one, str) and one.strip() and one not in out:
        out.append(one)
    return tuple(out)


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
        with open(path, encoding="utf-8", errors="replace") as fh:
            for line in fh:
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
    try:
        with open(os.path.join(meta_dir, "top_level.txt"), encoding="utf-8") as fh:
            names = {n.strip() for n in fh if n.strip()}
        if names:
            return tuple(sorted(names))
    except OSError:
        pass
    names_set: set[str] = set()
    try:
        with open(os.path.join(meta_dir, "RECORD"), encoding="utf-8", errors="replace") as fh:
            for line in fh:
                first = line.split(",", 1)[0].split("/", 1)[0]
                if not first or first.startswith("..") or first.endswith((".dist-info", ".data", ".pth")) \
                        or first == "__pycache__":
                    continue
                names_set.add(first[:-3] if first.endswith(".py") else first.split(".", 1)[0])
    except OSError:
        pass
    if names_set:
        return tuple(sorted(names_set))
    return (pep503(name).replace("-", "_"),)


def _scan_dists(prefix: Path, site_packages: list[str], conda_files: dict[str, str], *,
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
                try:
                    with open(os.path.join(e.path, "INSTALLER"), encoding="utf-8") as fh:
                        installer = fh.read().strip() or None
                except OSError:
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


def _python_version(prefix: Path, records: list[CondaRecord], site_packages: list[str]) -> str | None:
    py = next((r for r in records if r.name == "python"), None)
    if py is not None:
        return py.version
    cfg = prefix / "pyvenv.cfg"
    try:
        for line in cfg.read_text(encoding="utf-8").splitlines():
            k, _, v = line.partition("=")
            if k.strip() in ("version", "version_info"):
                return v.strip()
    except OSError:
        pass
    for sp in site_packages:
        part = sp.split("/")[1] if sp.startswith("lib/") else ""
        if part.startswith("python3"):
            return part[len("python"):].rstrip("t")
    return None


def inspect_prefix(prefix: Path) -> PrefixInfo:
    """Everything check needs to know about ``prefix``, read without writing anything."""
    prefix = Path(prefix)
    if not prefix.is_dir():
        raise UserError(f"no environment at {prefix}", fix="pass an existing prefix with -p, or a name with -n")
    meta = prefix / "conda-meta"
    is_conda = meta.is_dir()
    records: list[CondaRecord] = []
    bad: list[tuple[str, str]] = []
    if is_conda:
        for f in sorted(meta.glob("*.json")):
            if f.name.startswith("envguard-"):  # envguard's own files (the create fingerprint)
                continue
            try:
                records.append(_read_record(f))
            except (OSError, ValueError, KeyError, TypeError) as e:
                bad.append((f.name, f"{type(e).__name__}: {e}"))
    conda_files: dict[str, str] = {}
    for r in records:
        for f in r.files:
            conda_files[f] = r.name
    site_packages = find_site_packages(prefix)
    dists = _scan_dists(prefix, site_packages, conda_files, with_imports=is_conda)
    info = PrefixInfo(
        prefix=prefix,
        is_conda=is_conda,
        is_venv=(prefix / "pyvenv.cfg").is_file(),
        python_version=_python_version(prefix, records, site_packages),
        site_packages=site_packages,
        conda=records,
        dists=dists,
        bad_records=bad,
    )
    info.overwritten = _overwritten(prefix, records)
    info.pth_dirs = _pth_dirs(prefix, site_packages, conda_files)
    return info


def _pth_dirs(prefix: Path, site_packages: list[str], conda_files: dict[str, str]) -> list[tuple[str, str | None, str]]:
    out: list[tuple[str, str | None, str]] = []
    for sp in site_packages:
        try:
            pths = sorted(n for n in os.listdir(prefix / sp) if n.endswith(".pth"))
        except OSError:
            continue
        for n in pths:
            rel = f"{sp}/{n}"
            try:
                lines = (prefix / rel).read_text(encoding="utf-8", errors="replace").splitlines()
            except OSError:
                continue
            for line in lines:
                line = line.strip()
                if not line or line.startswith(("#", "import ", "import\t")):
                    continue
                d = line if os.path.isabs(line) else os.path.normpath(os.path.join(prefix, sp, line))
                out.append((rel, conda_files.get(rel), d))
    return out


def _overwritten(prefix: Path, records: list[CondaRecord]) -> list[Overwritten]:
    """Conda records whose dist-info was removed or rewritten by another installer."""
    out: list[Overwritten] = []
    for r in records:
        for f in r.files:
            if not (f.endswith(".dist-info/METADATA") or f.endswith(".egg-info/PKG-INFO")):
                continue
            if not os.path.exists(prefix / f):
                out.append(Overwritten(r.name, f, "its metadata is gone (another installer removed it)"))
                continue
            installer_rel = f.rsplit("/", 1)[0] + "/INSTALLER"
            if installer_rel in r.files:
                try:
                    who = (prefix / installer_rel).read_text(encoding="utf-8").strip()
                except OSError:
                    who = ""
                if who.lower() in PIP_INSTALLERS:
                    out.append(Overwritten(r.name, f, f"its INSTALLER now says {who!r}"))
    return out


def installed_packages(prefix: Path, platform: str | None = None) -> list[Package]:
    """The live prefix as a normalised package list (conda records + non-conda dists).

    ``platform`` defaults to the host's: a prefix is built for the machine it is on,
    and locks name the target platform even for noarch packages.
    """
    if platform is None:
        from envguard.platforms import host_platform

        platform = host_platform()
    return inspect_prefix(Path(prefix)).packages(platform)


# --------------------------------------------------------------------------- files


@dataclass(frozen=True)
class FileProblem:
    path: str
    package: str
    problem: Literal["missing", "size", "sha256", "unreadable", "outside"]
    expected: str = ""
    actual: str = ""


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb", buffering=0) as fh:
        buf = bytearray(_CHUNK)
        view = memoryview(buf)
        while True:
            n = fh.readinto(buf)
            if not n:
                break
            h.update(view[:n])  # hashlib releases the GIL for large updates
    return h.hexdigest()


def verify_files(info: PrefixInfo, *, deep: bool = False, workers: int | None = None,
                 only: Iterable[str] | None = None) -> list[FileProblem]:
    """Every file in conda-meta exists with its size; with ``deep``, its sha256 too. A recorded path that
    leaves the prefix, or a symlink pointing outside it (envguard.pathsafety), is an ``outside`` problem."""
    from envguard.pathsafety import allow_list, allowed, path_problem

    wanted = set(only) if only is not None else None
    problems: list[FileProblem] = []
    to_hash: list[tuple[str, str, str]] = []  # (absolute path, relative path, expected sha256)
    owners: list[str] = []
    prefix = os.fspath(info.prefix)
    real_prefix = os.path.realpath(prefix)
    allow = allow_list()
    parents: dict[str, bool] = {}  # directory -> whether it really lies inside the prefix

    def inside(path: str, *, real: bool = True) -> bool:
        path = os.path.realpath(path) if real else os.path.normpath(path)
        return path == real_prefix or path.startswith(real_prefix.rstrip(os.sep) + os.sep)

    # symlinks the allow-list lets point outside (envguard.pathsafety): a link *to* one of them is fine
    allowed_links = {os.path.join(real_prefix, e.path) for r in info.conda for e in r.paths
                     if e.path_type == "softlink" and allow and allowed(r.name, e.path, allow)}

    def link_out(full: str) -> str | None:
        """The target of a symlink chain starting at ``full`` that leads outside the prefix, else None."""
        cur = os.path.join(os.path.realpath(os.path.dirname(full)), os.path.basename(full))
        for _hop in range(40):
            if cur in allowed_links or not os.path.islink(cur):
                return None
            target = os.readlink(cur)
            nxt = os.path.join(os.path.dirname(cur), target)
            if not inside(nxt, real=False):
                return target
            nxt = os.path.normpath(nxt)
            cur = os.path.join(os.path.realpath(os.path.dirname(nxt)), os.path.basename(nxt))
            if not inside(os.path.dirname(cur)):
                return target
        return "a chain of more than 40 symlinks"

    for r in info.conda:
        if wanted is not None and r.name not in wanted:
            continue
        for e in r.paths:
            unsafe = path_problem(e.path)
            if unsafe:  # never stat or hash it: it names a file outside the prefix
                problems.append(FileProblem(e.path, r.name, "outside", actual=unsafe))
                continue
            full = os.path.join(prefix, e.path)
            parent = os.path.dirname(full)
            if parent not in parents:
                parents[parent] = inside(parent)
            if not parents[parent]:
                problems.append(FileProblem(e.path, r.name, "outside",
                                            actual="lies under a symlink that leads outside the prefix"))
                continue
            if e.path_type == "directory":
                if not os.path.isdir(full):
                    problems.append(FileProblem(e.path, r.name, "missing"))
                continue
            try:
                lst = os.lstat(full)
                st = os.stat(full) if e.path_type != "softlink" and stat.S_ISLNK(lst.st_mode) else lst
            except FileNotFoundError:
                problems.append(FileProblem(e.path, r.name, "missing"))
                continue
            except OSError as ex:
                problems.append(FileProblem(e.path, r.name, "unreadable", actual=str(ex)))
                continue
            if stat.S_ISLNK(lst.st_mode) and not inside(full):
                out = link_out(full)
                if out is not None:
                    problems.append(FileProblem(e.path, r.name, "outside",
                                                actual=f"a symlink to {out}, outside the prefix"))
                    continue
            if e.path_type == "softlink" or e.rewritten:
                continue
            if not stat.S_ISREG(st.st_mode):  # a FIFO or device in its place: never opened
                problems.append(FileProblem(e.path, r.name, "unreadable", actual="not a regular file"))
                continue
            if e.size is not None and st.st_size != e.size:
                problems.append(FileProblem(e.path, r.name, "size", str(e.size), str(st.st_size)))
                continue
            if deep and e.sha256:
                to_hash.append((full, e.path, e.sha256))
                owners.append(r.name)
    if to_hash:
        n = workers or os.cpu_count() or 1

        def one(item: tuple[str, str, str]) -> str:
            try:
                return _sha256(item[0])
            except OSError as ex:
                return f"!{ex}"

        with ThreadPoolExecutor(max_workers=n) as pool:
            for (full, rel, want), owner, got in zip(to_hash, owners, pool.map(one, to_hash, chunksize=16)):
                if got.startswith("!"):
                    problems.append(FileProblem(rel, owner, "unreadable", actual=got[1:]))
                elif got != want:
                    problems.append(FileProblem(rel, owner, "sha256", want, got))
    return problems


# --------------------------------------------------------------------------- import origins

PROBE_DIR = Path(__file__).resolve().parent / "in_process"


def import_origins(python: str | os.PathLike[str], modules: Iterable[str] = ("torch", "numpy"),
                   *, timeout: float = 60.0) -> dict[str, dict]:
    """Where ``import <module>`` resolves inside the target interpreter (without importing it).

    Runs envguard/in_process/import_origin.py by path with that interpreter; returns
    ``{module: {"origin": path | None, "dist": ..., "version": ...}}``.
    """
    script = PROBE_DIR / "import_origin.py"
    try:
        proc = subprocess.run([os.fspath(python), "-I", os.fspath(script), *modules], capture_output=True,
                              text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise IntegrityError(f"cannot run {python}: {e}") from e
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise IntegrityError(f"{python} {script.name} failed (exit {proc.returncode}): {tail[0]}")
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError) as e:
        raise IntegrityError(f"{script.name} printed no JSON: {proc.stdout[-200:]!r}") from e


__all__ = [
    "CondaRecord",
    "Dist",
    "FileEntry",
    "FileProblem",
    "Overwritten",
    "PrefixInfo",
    "find_site_packages",
    "import_origins",
    "inspect_prefix",
    "installed_packages",
    "verify_files",
]
