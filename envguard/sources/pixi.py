"""pixi.lock, every format version rattler reads (3 to 7).

Versions 3 and lower kept conda-lock's layout (a ``package`` list with ``platform`` and ``manager`` per
entry, one implicit environment ``default``): they are read by the conda-lock reader. The rest:

All three keep ``environments.<env>.packages.<platform>`` as a list of
locators (``- conda: URL`` / ``- pypi: URL-or-path``) pointing into one
top-level ``packages`` list:

* v5: entries carry ``kind: conda|pypi`` with ``name``, ``version``, ``build``,
  ``subdir`` and a ``url`` or ``path``;
* v6: entries are keyed by their locator (``- conda: URL`` / ``- pypi: URL``);
  conda entries usually leave name/version/build to the file name;
* v7: adds a top-level ``platforms`` list that may give a platform a custom
  name with its ``subdir``; environments use those names. Packages the project
  builds from source are ``- conda_source: NAME[HASH] @ PATH`` (no version or
  build in the file).

Source-built packages (``- conda: .``, a path rather than a URL) can be listed
once per variant under the same locator; an environment's reference then
carries discriminating fields (``build``, ``version``, ``subdir``, ``name``)
that pick the entry, the way rattler's reader does.
"""

from __future__ import annotations

import re
from typing import Any

from envguard.channels import channel_from_url
from envguard.errors import PlatformNotLocked, UserError
from envguard.model import Manager, Package
from envguard.sources import Description
from envguard.sources.common import (
    as_str,
    digest,
    hash_kind,
    number_digests_note,
    parse_conda_filename,
    parse_pypi_filename,
    redact_opt,
    refused_number,
)
from envguard.sources.yamlkeys import duplicate_keys

SUPPORTED = (4, 5, 6, 7)
LEGACY = (3,)  # conda-lock's layout; 1 and 2 are conda-lock's own version numbers and read as conda-lock

# rattler's known subdirs (rattler.Subdir.all(), tests/test_reader_conformance.py keeps them equal): a
# platform key or a v7 platform's subdir that is none of them makes rattler refuse the lock.
KNOWN_SUBDIRS = frozenset((
    "noarch", "linux-32", "linux-64", "linux-aarch64", "linux-armv6l", "linux-armv7l", "linux-loongarch64",
    "linux-ppc64le", "linux-ppc64", "linux-ppc", "linux-s390x", "linux-riscv32", "linux-riscv64",
    "freebsd-32", "freebsd-64", "freebsd-arm64", "freebsd-ppc64le", "freebsd-ppc64", "osx-64", "osx-arm64",
    "ios-arm64", "iossimulator-arm64", "iossimulator-64", "android-aarch64", "android-armv7a", "android-64",
    "android-32", "win-32", "win-64", "win-arm64", "emscripten-wasm32", "emscripten-wasm64", "wasi-wasm32",
    "zos-z",
))


def _locator(entry: dict[str, Any]) -> tuple[Manager, str] | None:
    """(manager, locator) of a packages entry or an environment entry."""
    if "conda" in entry:
        return "conda", as_str(entry["conda"])
    if "conda_source" in entry:
        return "conda", as_str(entry["conda_source"])
    if "pypi" in entry:
        return "pip", as_str(entry["pypi"])
    kind = entry.get("kind")
    loc = entry.get("url") or entry.get("path")
    if kind in ("conda", "pypi") and loc:
        return ("conda" if kind == "conda" else "pip"), as_str(loc)
    return None


# ``array-api-extra[524df11d] @ .``: a v7 source package's name, a variant hash and the path.
_SOURCE_LOCATOR = re.compile(r"^(?P<name>[^\s\[@]+)(?:\[[^\]]*\])?\s*@\s*(?P<path>.+)$")

# Fields an environment's reference may carry to tell apart entries under one locator.
_DISCRIMINATORS = ("name", "version", "build", "subdir")


def _pick(candidates: list[dict[str, Any]], ref: dict[str, Any], subdir: str) -> list[dict[str, Any]]:
    """The entries an environment reference means, narrowed by its own fields, then by platform."""
    wanted = {k: as_str(ref[k]) for k in _DISCRIMINATORS if k in ref}
    picked = [c for c in candidates if all(as_str(c.get(k)) == v for k, v in wanted.items())] or candidates
    if len(picked) > 1:
        same_platform = [c for c in picked if as_str(c.get("subdir")) in (subdir, "noarch")]
        picked = same_platform or picked
    return picked


def _package(entry: dict[str, Any], manager: Manager, loc: str, platform: str) -> Package:
    url = as_str(entry.get("url") or loc)
    name, version, build = entry.get("name"), entry.get("version"), entry.get("build")
    source = _SOURCE_LOCATOR.match(as_str(entry.get("conda_source"))) if "conda_source" in entry else None
    if source:
        name, url = name or source["name"], source["path"]
    if manager == "conda":
        parsed = parse_conda_filename(url)
        if parsed:
            name = name or parsed[0]
            version = version if isinstance(version, str) else parsed[1]
            build = build or parsed[2]
        depends = tuple(as_str(d) for d in entry.get("depends") or ())
        channel = channel_from_url(url) if "://" in url else None
    else:
        parsed_pip = parse_pypi_filename(url)
        if parsed_pip:
            name = name or parsed_pip[0]
            version = version if isinstance(version, str) else parsed_pip[1]  # a YAML float lost digits
        depends = tuple(as_str(d) for d in entry.get("requires_dist") or ())
        channel, build = None, None
    if not name:
        raise ValueError(loc)
    return Package(name=as_str(name), version=as_str(version), manager=manager,
                   build=as_str(build) if build else None, channel=channel,
                   sha256=digest(entry.get("sha256"), "sha256"), md5=digest(entry.get("md5"), "md5"),
                   url=redact_opt(url), platform=platform, depends=depends)


def _refuse(shown: str, message: str, key: str | None = None, line: int | None = None) -> UserError:
    return UserError(f"{message}; pixi's reader (rattler) refuses the lock", file=shown, key=key, line=line,
                     fix="re-lock with `pixi lock`, or correct the file by hand")


def _read_legacy(data: dict[str, Any], shown: str, environment: str | None, platform: str | None) -> Description:
    from envguard.sources.condalock import read_conda_lock

    if environment not in (None, "default"):
        raise UserError(f"no environment {environment!r} (a version {data.get('version')} lock has only "
                        "'default')", file=shown, key="environments", fix="drop --environment")
    for i, entry in enumerate(data.get("package") or []):
        plat = entry.get("platform") if isinstance(entry, dict) else None
        if plat is not None and as_str(plat) not in KNOWN_SUBDIRS:
            raise _refuse(shown, f"{as_str(plat)!r} is not a known platform", key=f"package[{i}].platform")
    d = read_conda_lock(data, shown, platform=platform, versions=LEGACY)
    # rattler lists a legacy lock's platforms from its packages, not from metadata.platforms
    packages = {p: pkgs for p, pkgs in d.packages.items() if pkgs}
    return Description(kind="pixi", path=shown, packages=packages, environments=("default",),
                       environment="default", notes=d.notes)


def read_pixi(data: Any, shown: str, *, environment: str | None = None, platform: str | None = None,  # noqa: C901, PLR0912 - pixi.lock's layout refused key by key as rattler does
              first: bool = False) -> Description:
    """Read a parsed pixi.lock: one environment (``environment``; default: ``default``, or the only one; with
    ``first``, the first one of several rather than an error: a caller that reads them all starts there)."""
    version = data.get("version") if isinstance(data, dict) else None
    repeated = duplicate_keys(data)
    if repeated:
        key, line = repeated[0]
        raise _refuse(shown, f"key {key!r} is written twice in one mapping", line=line)
    if version in LEGACY and isinstance(data.get("package"), list):
        return _read_legacy(data, shown, environment, platform)
    if version not in SUPPORTED:
        raise UserError(f"unsupported pixi.lock version {version!r}", file=shown, key="version",
                        fix="envguard reads pixi.lock versions 3 to 7; re-lock with a recent pixi")
    envs = data.get("environments")
    if not isinstance(envs, dict):
        raise UserError("no environments", file=shown, key="environments", fix="re-lock with `pixi lock`")
    if not isinstance(data.get("packages"), list):
        raise _refuse(shown, "no 'packages' list", key="packages")
    for name, env in envs.items():
        for required in ("channels", "packages"):
            if not isinstance(env, dict) or required not in env:
                raise _refuse(shown, f"environment {as_str(name)!r} has no {required!r}",
                              key=f"environments.{as_str(name)}.{required}")
        if not isinstance(env["channels"], list):
            raise _refuse(shown, "'channels' must be a list", key=f"environments.{as_str(name)}.channels")
        if env["packages"] is not None and not isinstance(env["packages"], dict):
            raise _refuse(shown, "'packages' must map platforms to lists", key=f"environments.{as_str(name)}.packages")
        for plat, refs in (env["packages"] or {}).items():
            if refs is not None and not isinstance(refs, list):
                raise _refuse(shown, "a platform's packages must be a list",
                              key=f"environments.{as_str(name)}.packages.{as_str(plat)}")
    if data.get("platforms") is not None and not (isinstance(data["platforms"], list)
                                                  and all(isinstance(p, dict) for p in data["platforms"])):
        raise _refuse(shown, "'platforms' must be a list of platform tables (name, subdir, virtual-packages)",
                      key="platforms")
    names = tuple(as_str(n) for n in envs)
    if not envs:  # rattler reads a lock of no environments: nothing is locked
        if environment is not None:
            raise UserError(f"no environment {environment!r} (the lock has none)", file=shown,
                            key="environments", fix="drop --environment")
        return Description(kind="pixi", path=shown, notes=["the lock has no environments: nothing is locked"])
    if environment is None:
        environment = "default" if "default" in envs else (names[0] if len(names) == 1 or first else None)
        if environment is None:
            raise UserError(f"several environments ({', '.join(names)})", file=shown, key="environments",
                            fix="pick one with --environment")
    if environment not in envs:
        raise UserError(f"no environment {environment!r} (it has {', '.join(names)})", file=shown,
                        key="environments", fix="pick one of those with --environment")

    # v7: custom platform names map to a subdir
    subdir_of: dict[str, str] = {}
    info: dict[str, dict[str, str]] = {}
    for k, p in enumerate(data.get("platforms") or []):
        # rattler's platform table: `name` required (a string; an empty one is no subdir), `virtual-packages` a
        # list of strings; it refuses the lock otherwise, and so do lint and diff
        if not isinstance(p.get("name"), str):
            raise _refuse(shown, "a platform table needs a `name` (a string)", key=f"platforms[{k}].name")
        vps = p.get("virtual-packages")
        if vps is not None and not (isinstance(vps, list) and all(isinstance(v, str) for v in vps)):
            raise _refuse(shown, "'virtual-packages' must be a list of strings (`__cuda=12`, `__glibc=2.28`)",
                          key=f"platforms[{k}].virtual-packages")
        if isinstance(p, dict):
            name = as_str(p["name"])
            if name in subdir_of:
                raise _refuse(shown, f"platform name {name!r} is declared twice", key=f"platforms[{k}].name")
            subdir_of[name] = as_str(p.get("subdir") or name)
            if subdir_of[name] not in KNOWN_SUBDIRS:
                raise _refuse(shown, f"{subdir_of[name]!r} is not a known subdir",
                              key=f"platforms[{k}].{'subdir' if p.get('subdir') else 'name'}")
            info[name] = {"subdir": subdir_of[name], **_virtual_facts(p.get("virtual-packages"))}

    index: dict[tuple[str, str], list[dict[str, Any]]] = {}
    numbers: list[str] = []
    for i, entry in enumerate(data.get("packages") or []):
        if not isinstance(entry, dict):
            raise UserError("each package must be a mapping", file=shown, key=f"packages[{i}]")
        for algo in ("md5", "sha256"):
            if refused_number(entry.get(algo), algo, "pixi"):
                numbers.append(f"packages[{i}].{algo}")
            elif entry.get(algo) is not None and hash_kind(digest(entry.get(algo), algo) or "") != algo:
                raise _refuse(shown, f"{redact_opt(as_str(entry.get(algo)))!r} is not a {algo} digest",
                              key=f"packages[{i}].{algo}")
        loc = _locator(entry)
        if loc is not None:
            index.setdefault(loc, []).append(entry)

    env = envs[environment] or {}
    per_platform = env.get("packages") or {}
    if not isinstance(per_platform, dict):
        raise UserError("'packages' must map platforms to lists", file=shown,
                        key=f"environments.{environment}.packages")
    out: dict[str | None, list[Package]] = {}
    notes: list[str] = [number_digests_note(numbers, "pixi")] if numbers else []
    # v7 names its platforms in the table: a platform no table declares is unknown to rattler, table or not
    v7 = isinstance(data.get("version"), int) and not isinstance(data.get("version"), bool) and data["version"] >= 7
    for key in per_platform:
        name = as_str(key)
        if name not in (subdir_of if subdir_of or v7 else KNOWN_SUBDIRS):
            raise _refuse(shown, f"{name!r} is not a known platform"
                          + (" (nor one of the lock's 'platforms')" if subdir_of else
                             " (a version 7 lock names its platforms in a 'platforms' table, and this one has none)"
                             if v7 else ""),
                          key=f"environments.{environment}.packages.{name}")
    for key, refs in per_platform.items():
        plat = str(key)
        if platform is not None and plat != platform:
            continue
        subdir = subdir_of.get(plat, plat)
        pkgs: list[Package] = []
        for j, ref in enumerate(refs or []):
            loc = _locator(ref) if isinstance(ref, dict) else None
            if loc is None:
                raise UserError("unreadable package reference", file=shown,
                                key=f"environments.{environment}.packages.{plat}[{j}]")
            candidates = index.get(loc)
            if not candidates:
                raise UserError(f"refers to {redact_opt(loc[1])}, which is not in 'packages'", file=shown,
                                key=f"environments.{environment}.packages.{plat}[{j}]",
                                fix="the lock is inconsistent; re-lock with `pixi lock`")
            candidates = _pick(candidates, ref, subdir)
            # v5 can list one git URL or local path twice with two versions; the file does not
            # say which one an environment uses. Take the last, as rattler's own reader does.
            if len(candidates) > 1 and len({as_str(c.get("version")) for c in candidates}) > 1:
                notes.append(f"{plat}: {redact_opt(loc[1])} is listed with several versions; read as the last")
            try:
                pkgs.append(_package(candidates[-1], loc[0], loc[1], subdir))
            except ValueError:
                raise UserError(f"cannot tell the package name of {redact_opt(loc[1])}", file=shown,
                                key=f"environments.{environment}.packages.{plat}[{j}]") from None
        out[plat] = pkgs
    if platform is not None and platform not in out:
        raise PlatformNotLocked(f"platform {platform} is not in this lock (environment {environment!r} has "
                                f"{', '.join(map(str, per_platform)) or 'none'})", file=shown,
                                fix="pick one of those with --platform")
    return Description(kind="pixi", path=shown, packages=out, environments=names, environment=environment,
                       notes=notes, platform_info=info)


def _virtual_facts(virtual: Any) -> dict[str, str]:
    """``__cuda=12`` -> {"cuda": "12"}, ``__osx=13.5`` -> {"macos": "13.5"}: what names a custom platform."""
    out: dict[str, str] = {}
    for v in virtual if isinstance(virtual, list) else []:
        name, _, rest = as_str(v).partition("=")
        key = {"__cuda": "cuda", "__osx": "macos"}.get(name.strip())
        if key:
            out[key] = rest.split("=", 1)[0].strip()
    return out
