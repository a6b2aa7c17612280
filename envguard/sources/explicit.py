"""Explicit ``@EXPLICIT`` files: ``conda list --explicit`` and conda-lock's rendering.

One URL a line, optionally followed by ``#<md5>``, ``#<sha256>`` or
``#md5:...``/``#sha256:...``. conda-lock appends its pip packages as comment
lines ``# pip NAME @ URL#sha256=HEX`` (or ``# pip NAME @ URL`` for URL
sources); those are read as pip packages. The platform comes from the
``# platform:`` header, else from the package URLs.
"""

from __future__ import annotations

import re

from envguard.channels import channel_from_url
from envguard.errors import UserError
from envguard.model import Package
from envguard.sources import Description
from envguard.sources.common import (
    hash_kind,
    parse_conda_filename,
    parse_pypi_filename,
    redact_opt,
)

_PLATFORM = re.compile(r"^#\s*platform:\s*(\S+)")
_PIP = re.compile(r"^#\s*pip\s+(?P<name>[A-Za-z0-9._-]+)(?:\[[^\]]*\])?\s*@\s*(?P<url>\S+)")


def _split_fragment(line: str) -> tuple[str, dict[str, str]]:
    url, _, frag = line.partition("#")
    hashes: dict[str, str] = {}
    frag = frag.strip()
    if frag:
        for part in re.split(r"[&,]", frag):
            k, sep, v = part.partition(":") if ":" in part else part.partition("=")
            if sep and k.strip().lower() in ("md5", "sha256"):
                hashes[k.strip().lower()] = v.strip()
            elif hash_kind(part):
                hashes[hash_kind(part) or ""] = part.strip()
    return url.strip(), hashes


def _platform_from_url(url: str) -> str | None:
    parts = url.split("#", 1)[0].rstrip("/").split("/")
    if len(parts) >= 2 and parts[-2] != "noarch" and "-" in parts[-2]:
        return parts[-2]
    return None


def read_explicit(text: str, shown: str) -> Description:
    platform: str | None = None
    conda: list[tuple[str, dict[str, str], int]] = []
    pip: list[tuple[str, str, int]] = []
    started = False
    for n, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        if line == "@EXPLICIT":
            started = True
            continue
        if line.startswith("#"):
            m = _PLATFORM.match(line)
            if m and platform is None:
                platform = m.group(1)
            m = _PIP.match(line)
            if m:
                pip.append((m.group("name"), m.group("url"), n))
            continue
        if not started:
            raise UserError("package line before @EXPLICIT", file=shown, line=n,
                            fix="an explicit file starts with comments and an @EXPLICIT line")
        conda.append((*_split_fragment(line), n))

    if platform is None:
        platform = next((p for p in (_platform_from_url(u) for u, _, _ in conda) if p), None)

    packages: list[Package] = []
    seen: set[str] = set()
    for url, hashes, n in conda:
        parsed = parse_conda_filename(url)
        if parsed is None:
            raise UserError(f"not a conda package URL: {redact_opt(url)}", file=shown, line=n,
                            fix="each line must end in NAME-VERSION-BUILD.conda or .tar.bz2")
        name, version, build = parsed
        if name in seen:  # some files list a package twice
            continue
        seen.add(name)
        packages.append(Package(name=name, version=version, manager="conda", build=build,
                                channel=channel_from_url(url), sha256=hashes.get("sha256"), md5=hashes.get("md5"),
                                url=redact_opt(url), platform=platform))
    for name, url_frag, _n in pip:
        url, hashes = _split_fragment(url_frag)
        parsed_pip = parse_pypi_filename(url)
        packages.append(Package(name=name, version=parsed_pip[1] if parsed_pip else "", manager="pip",
                                sha256=hashes.get("sha256"), url=redact_opt(url), platform=platform))
    return Description(kind="explicit", path=shown, packages={platform: packages})
