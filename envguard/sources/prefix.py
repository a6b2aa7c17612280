"""A live prefix (a conda environment or a virtualenv), through envguard.prefix.

Reading the prefix is :func:`envguard.prefix.installed_packages`, which already gives
channels in envguard.channels' form and redacted URLs, so that a prefix compares
equal to the lock it was created from; this adapter only checks the path.
"""

from __future__ import annotations

from pathlib import Path

from envguard.errors import UserError
from envguard.sources import Description


def read_prefix(path: Path, shown: str) -> Description:
    from envguard.platforms import host_platform
    from envguard.prefix import installed_packages

    if not path.is_dir():
        raise UserError("no environment here", file=shown, fix="pass the prefix directory or name:NAME")
    if not (path / "conda-meta").is_dir() and not (path / "pyvenv.cfg").is_file():
        raise UserError("not an environment prefix (no conda-meta/ or pyvenv.cfg)", file=shown,
                        fix="pass the environment's root directory")
    platform = host_platform()
    return Description(kind="prefix", path=shown, packages={platform: installed_packages(path, platform)})
