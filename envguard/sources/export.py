"""``conda env export`` YAML: what one machine has installed.

Entries are ``name=version=build``, ``name=version`` (``--no-builds``) and
``channel::name=version=build`` (``--channel-subdir`` style); hand-edited
exports mix in loose specs (``hhsuite``). The ``pip:`` section holds
``name==version`` lines and direct URLs. An export names no platform, so its
packages pair with any platform of the other side.

An export and an environment.yml share their shape; :func:`looks_like_export`
tells them apart by content: a ``prefix:`` key, or dependencies that are
nearly all exact pins, most with build strings, or all pinned and including
the low-level packages that only a solver (never a person) writes down.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from envguard.channels import normalise_channel
from envguard.errors import UserError
from envguard.model import Package
from envguard.sources import Description
from envguard.sources.common import as_str, parse_pypi_filename, redact_opt

_PIN = re.compile(r"^(?:(?P<chan>[^\s:]+)::)?(?P<name>[A-Za-z0-9_.+-]+)"
                  r"==?(?P<ver>[^=<>!~*,|\s]+)(?:=(?P<build>[^=\s]+))?$")
_LOOSE = re.compile(r"^(?:(?P<chan>[^\s:]+)::)?(?P<name>[A-Za-z0-9_.+-]+)$")
_PIP_PIN = re.compile(r"^(?P<name>[A-Za-z0-9_.-]+)(?:\[[^\]]*\])?\s*===?\s*(?P<ver>[^\s;#]+)")
_EGG = re.compile(r"[#&]egg=(?P<name>[A-Za-z0-9_.-]+)")
# Solver-only plumbing: present in nearly every export, almost never requested by hand.
_PLUMBING = frozenset({
    "_libgcc_mutex", "_openmp_mutex", "ca-certificates", "ld_impl_linux-64", "libgcc-ng", "libstdcxx-ng",
    "libgomp", "libffi", "ncurses", "readline", "tk", "xz", "zlib", "openssl", "libzlib", "bzip2", "libuuid",
    "libsqlite", "tzdata", "libnsl", "libxcrypt", "vc", "vs2015_runtime", "ucrt", "libcxx", "libgcc",
})


def _conda_entries(data: dict[str, Any]) -> list[str]:
    deps = data.get("dependencies") or []
    return [d.strip() for d in deps if isinstance(d, str)] if isinstance(deps, list) else []


def looks_like_export(data: dict[str, Any]) -> bool:
    if "prefix" in data:
        return True
    entries = _conda_entries(data)
    if len(entries) < 5:
        return False
    pins = [m for m in (_PIN.match(e) for e in entries) if m]
    if len(pins) < 0.75 * len(entries):
        return False
    with_build = sum(1 for m in pins if m.group("build"))
    if with_build >= 0.5 * len(entries):
        return True
    # --no-builds: exact pins on everything, solver plumbing included
    plumbing = sum(1 for m in pins if m.group("name") in _PLUMBING)
    return len(pins) >= 0.9 * len(entries) and plumbing >= 3


# Packages that exist for one platform only, and what they say about the exported environment.
_PLATFORM_NAME = re.compile(r"_(?P<plat>linux-(?:64|aarch64|ppc64le)|osx-(?:64|arm64)|win-(?:64|arm64))$")
_WINDOWS_ONLY = frozenset({"vc", "vs2015_runtime", "vc14_runtime", "ucrt", "msys2-conda-epoch", "pywin32",
                           "win_inet_pton", "menuinst"})
_SUBDIR_PREFIX = re.compile(r"^[^\s:]+/(?P<plat>(?:linux|osx|win)-[a-z0-9]+)::")


def export_platform(data: dict[str, Any]) -> str | None:
    """The platform an export was taken on, when the file says so unambiguously; None otherwise.

    ``conda env export`` writes no platform, but a Windows ``prefix:`` (``C:\\...``), a
    ``channel/subdir::`` entry, or a package that exists for one platform only (``ld_impl_linux-64``,
    ``vs2015_runtime``, ``clang_osx-arm64``) gives it away.
    """
    found: set[str] = set()
    prefix = data.get("prefix")
    if isinstance(prefix, str) and re.match(r"^[A-Za-z]:[\\/]", prefix.strip()):
        found.add("win-64")
    for entry in _conda_entries(data):
        m = _SUBDIR_PREFIX.match(entry)
        if m:
            found.add(m.group("plat"))
        name = (_PIN.match(entry) or _LOOSE.match(entry))
        n = name.group("name") if name else ""
        m = _PLATFORM_NAME.search(n)
        if m:
            found.add(m.group("plat"))
        elif n in _WINDOWS_ONLY or n.startswith("m2w64-"):
            found.add("win-64")
    return found.pop() if len(found) == 1 else None


def _pip_package(item: str, shown: str) -> Package | None:
    item = item.strip()
    if not item or item.startswith("-"):
        return None  # pip options (-r, --extra-index-url, -e): not an installed package
    m = _PIP_PIN.match(item)
    if m:
        return Package(name=m.group("name"), version=m.group("ver"), manager="pip")
    url = item.split(" @ ", 1)[-1].strip()
    egg = _EGG.search(url)
    if " @ " in item:
        name = item.split(" @ ", 1)[0].strip()
    elif egg:
        name = egg.group("name")
    else:
        parsed = parse_pypi_filename(url)
        name = parsed[0] if parsed else url.rstrip("/").rsplit("/", 1)[-1].removesuffix(".git")
    parsed = parse_pypi_filename(url)
    if not name:
        raise UserError(f"cannot read pip entry {redact_opt(item)!r}", file=shown, key="dependencies.pip")
    return Package(name=name, version=parsed[1] if parsed else "", manager="pip",
                   url=redact_opt(url) if "://" in url or url.startswith("git+") else None)


def read_export(data: Any, shown: str) -> Description:
    if not isinstance(data, dict) or not isinstance(data.get("dependencies"), list):
        raise UserError("no 'dependencies' list", file=shown, key="dependencies",
                        fix="an export has name, channels and a dependencies list")
    packages: list[Package] = []
    for i, dep in enumerate(data["dependencies"]):
        if isinstance(dep, dict):
            pip_items = dep.get("pip")
            if not isinstance(pip_items, list):
                raise UserError("only a 'pip:' list may appear as a mapping", file=shown, key=f"dependencies[{i}]")
            for item in pip_items:
                p = _pip_package(as_str(item), shown)
                if p is not None:
                    packages.append(p)
            continue
        text = as_str(dep).strip()
        m = _PIN.match(text) or _LOOSE.match(text)
        if m is None:
            raise UserError(f"cannot read entry {text!r}", file=shown, key=f"dependencies[{i}]",
                            fix="export entries look like name=version=build")
        g = m.groupdict()
        packages.append(Package(name=g["name"], version=g.get("ver") or "", manager="conda",
                                build=g.get("build"), channel=normalise_channel(g.get("chan"))))
    platform = export_platform(data)
    if platform is not None:
        packages = [replace(p, platform=platform) for p in packages]
    return Description(kind="export", path=shown, packages={platform: packages})
