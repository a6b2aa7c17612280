"""conda-lock.yml in every version of its format.

* ``version: 1`` (conda-lock 1.x to 3.x): one entry per (package, platform,
  category); a package needed by several categories appears several times.
* no ``version:`` key (conda-lock before 1.0): the same entries, keys in
  another order, ``metadata.channels`` a list of plain strings.
* ``version: 2``: one entry per (package, platform) with a ``categories`` list.

conda-lock itself is the authority on the format, but importing it costs about
0.4 s and its parser rejects the old unversioned files, so the diff path reads
the YAML directly and validates only what it uses.
"""

from __future__ import annotations

from typing import Any

from envguard.channels import channel_from_url
from envguard.errors import UserError
from envguard.model import Package
from envguard.sources import Description
from envguard.sources._common import as_str, parse_conda_filename, parse_pypi_filename, redact_opt

SUPPORTED_VERSIONS = (None, 1, 2)


def _bad(shown: str, key: str, message: str) -> UserError:
    return UserError(message, file=shown, key=key,
                     fix="regenerate it with `conda-lock lock` or `envguard lock`")


def _depends(value: Any) -> tuple[str, ...]:
    if isinstance(value, dict):
        return tuple(f"{k} {v}".strip() if v not in (None, "") else str(k) for k, v in value.items())
    if isinstance(value, list):
        return tuple(str(v) for v in value)
    return ()


def read_conda_lock(data: Any, shown: str, *, platform: str | None = None) -> Description:
    """Read parsed conda-lock YAML; ``platform`` keeps only that platform (faster on large locks)."""
    if not isinstance(data, dict) or not isinstance(data.get("package"), list):
        raise _bad(shown, "package", "not a conda-lock file: no 'package' list")
    version = data.get("version")
    if version not in SUPPORTED_VERSIONS:
        raise UserError(f"unsupported conda-lock format version {version!r}", file=shown, key="version",
                        fix="envguard reads conda-lock format versions 1 and 2 and the unversioned format")
    meta = data.get("metadata") or {}
    if not isinstance(meta, dict):
        raise _bad(shown, "metadata", "'metadata' must be a mapping")
    declared = [str(p) for p in (meta.get("platforms") or [])]

    by_platform: dict[str | None, list[Package]] = {p: [] for p in declared if platform in (None, p)}
    seen: set[tuple[str, str, str]] = set()
    for i, entry in enumerate(data["package"]):
        if not isinstance(entry, dict):
            raise _bad(shown, f"package[{i}]", "each package entry must be a mapping")
        try:
            name = entry["name"]
            plat = entry["platform"]
        except KeyError as e:
            raise _bad(shown, f"package[{i}].{e.args[0]}", "missing key") from None
        plat = str(plat)
        if platform is not None and plat != platform:
            continue
        manager = entry.get("manager", "conda")
        if manager not in ("conda", "pip"):
            raise _bad(shown, f"package[{i}].manager", f"unknown manager {manager!r}")
        # v1 repeats a package once per category: keep the first.
        ident = (plat, manager, str(name))
        if ident in seen:
            continue
        seen.add(ident)
        url = str(entry.get("url") or "")
        version = entry.get("version")
        build = None
        if manager == "conda":
            parsed = parse_conda_filename(url)
            if parsed:
                build = parsed[2]
                if not isinstance(version, str):  # a YAML float such as 1.10 lost its digits
                    version = parsed[1]
        elif not isinstance(version, str):
            parsed_pip = parse_pypi_filename(url)
            if parsed_pip:
                version = parsed_pip[1]
        h = entry.get("hash") or {}
        if not isinstance(h, dict):
            raise _bad(shown, f"package[{i}].hash", "'hash' must be a mapping")
        by_platform.setdefault(plat, []).append(
            Package(
                name=str(name),
                version=as_str(version),
                manager=manager,
                build=build,
                channel=channel_from_url(url) if manager == "conda" else None,
                sha256=h.get("sha256") or None,
                md5=h.get("md5") or None,
                url=redact_opt(url),
                platform=plat,
                depends=_depends(entry.get("dependencies")),
            )
        )
    if platform is not None and not by_platform.get(platform):
        raise UserError(f"platform {platform} is not in this lock (it has {', '.join(declared) or 'none'})",
                        file=shown, key="metadata.platforms", fix="pick one of those with --platform")
    return Description(kind="conda-lock", path=shown, packages=by_platform,
                       declared_platforms=tuple(declared))
