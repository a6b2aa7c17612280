"""A live prefix (a conda environment or a virtualenv), through envguard.prefix.

Reading the prefix is the check engineer's :func:`envguard.prefix.installed_packages`;
this adapter only normalises channel names so that a prefix compares equal to
the lock it was created from.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from envguard.errors import UserError
from envguard.sources import Description
from envguard.sources._common import normalise_channel, redact_opt


def read_prefix(path: Path, shown: str) -> Description:
    from envguard.platforms import host_platform
    from envguard.prefix import installed_packages

    if not path.is_dir():
        raise UserError("no environment here", file=shown, fix="pass the prefix directory or name:NAME")
    if not (path / "conda-meta").is_dir() and not (path / "pyvenv.cfg").is_file():
        raise UserError("not an environment prefix (no conda-meta/ or pyvenv.cfg)", file=shown,
                        fix="pass the environment's root directory")
    platform = host_platform()
    pkgs = [
        dataclasses.replace(p, channel=normalise_channel(p.channel) if p.manager == "conda" else None,
                            url=redact_opt(p.url))
        for p in installed_packages(path, platform)
    ]
    return Description(kind="prefix", path=shown, packages={platform: pkgs})
