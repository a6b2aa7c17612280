"""Read an installed environment: conda-meta records, Python dists, files on disk.

This package has side effects (it reads the prefix and, for import origins, runs
the prefix's own interpreter) but it never writes into the prefix. The rules
that judge what it reads live in :mod:`envguard.check.checks`.

Ownership of a dist-info follows engine-notes.md: a ``*.dist-info`` or
``*.egg-info`` whose METADATA/PKG-INFO is listed in some ``conda-meta/*.json``
``files`` belongs to that conda record; otherwise INSTALLER decides (pip, uv);
otherwise the owner is unknown.

The parts: records.py (the data), condameta.py (conda-meta records), sitepackages.py (site-packages, dists,
``*.pth``), files.py (files against their records), origins.py (import origins in the prefix's interpreter).
"""

from __future__ import annotations

from pathlib import Path

from envguard.errors import UserError
from envguard.model import Package
from envguard.prefix.condameta import overwritten, read_record
from envguard.prefix.files import FileProblem, verify_files
from envguard.prefix.origins import import_origins
from envguard.prefix.records import CondaRecord, Dist, FileEntry, Overwritten, PrefixInfo
from envguard.prefix.sitepackages import find_site_packages, prefix_python_version, pth_dirs, scan_dists


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
                records.append(read_record(f))
            except (OSError, ValueError, KeyError, TypeError) as e:
                bad.append((f.name, f"{type(e).__name__}: {e}"))
    conda_files: dict[str, str] = {}
    for r in records:
        for rel in r.files:
            conda_files[rel] = r.name
    site_packages = find_site_packages(prefix)
    dists = scan_dists(prefix, site_packages, conda_files, with_imports=is_conda)
    info = PrefixInfo(
        prefix=prefix,
        is_conda=is_conda,
        is_venv=(prefix / "pyvenv.cfg").is_file(),
        python_version=prefix_python_version(prefix, records, site_packages),
        site_packages=site_packages,
        conda=records,
        dists=dists,
        bad_records=bad,
    )
    info.overwritten = overwritten(prefix, records)
    info.pth_dirs = pth_dirs(prefix, site_packages, conda_files)
    return info


def installed_packages(prefix: Path, platform: str | None = None) -> list[Package]:
    """The live prefix as a normalised package list (conda records + non-conda dists).

    ``platform`` defaults to the host's: a prefix is built for the machine it is on,
    and locks name the target platform even for noarch packages.
    """
    if platform is None:
        from envguard.platforms import host_platform

        platform = host_platform()
    return inspect_prefix(Path(prefix)).packages(platform)


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
