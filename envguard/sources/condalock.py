"""conda-lock.yml in every version of its format.

* ``version: 1`` (conda-lock 1.x to 3.x): one entry per (package, platform,
  category); a package needed by several categories appears several times.
* no ``version:`` key (conda-lock before 1.0): the same entries, keys in
  another order, ``metadata.channels`` a list of plain strings.
* ``version: 2``: one entry per (package, platform) with a ``categories`` list.

Across conda-lock 1.x to 3.x the same packages are written differently, and the reader gives one model:
a pip package locked from a URL carries its hash in the URL's ``#sha256=`` fragment (and, from 3.x, a
``source:`` mapping), and conda-lock 3.x writes the placeholder version ``0.0.0`` for it when it re-locks;
the version is then read from the artifact's file name, as older conda-lock wrote it (a note says so).

conda-lock itself is the authority on the format, but importing it costs about
0.4 s and its parser rejects the old unversioned files, so the diff path reads
the YAML directly and validates only what it uses.
"""

from __future__ import annotations

from typing import Any

from envguard.channels import channel_from_url, normalise_channel
from envguard.errors import PlatformNotLocked, UserError
from envguard.model import Package
from envguard.sources import Description, named_channels
from envguard.sources.common import (
    as_str,
    digest,
    number_digests_note,
    parse_conda_filename,
    parse_pypi_filename,
    redact_opt,
    refused_number,
)
from envguard.sources.lockscan import CONDA_LOCK_VERSIONS

SUPPORTED_VERSIONS = CONDA_LOCK_VERSIONS  # decided once, in lockscan (read_lock asks the same)
_PLACEHOLDER = "0.0.0"  # conda-lock 3.x's version for a pip package locked from a URL (pypi_solver.get_package)


def _bad(shown: str, key: str, message: str) -> UserError:
    return UserError(message, file=shown, key=key,
                     fix="regenerate it with `conda-lock lock` or `envguard lock`")


def _depends(value: Any) -> tuple[str, ...]:
    if isinstance(value, dict):
        return tuple(f"{k} {v}".strip() if v not in (None, "") else str(k) for k, v in value.items())
    if isinstance(value, list):
        return tuple(str(v) for v in value)
    return ()


# pixi.lock up to version 3 kept conda-lock's layout and wrote PyPI packages as ``manager: pypi``;
# rattler reads ``pip`` and ``pypi`` alike there.
_MANAGERS = {"conda": "conda", "pip": "pip", "pypi": "pip"}


def read_conda_lock(data: Any, shown: str, *, platform: str | None = None,
                    versions: tuple[Any, ...] = SUPPORTED_VERSIONS) -> Description:
    """Read parsed conda-lock YAML; ``platform`` keeps only that platform (faster on large locks).

    ``versions``: the format versions accepted (the pixi.lock reader passes pixi's conda-lock-like ones).
    """
    from envguard.sources.lockscan import ENTRY_KEYS, check_document

    tool = "conda-lock" if versions == SUPPORTED_VERSIONS else "pixi"
    # the document's checks are read_lock's too (one function); pixi's legacy reader asks only what rattler does
    meta, entries = check_document(data, shown, versions=versions,
                                   entry_keys=ENTRY_KEYS if tool == "conda-lock" else ("name", "platform"))
    declared = [str(p) for p in (meta.get("platforms") or [])]

    by_platform: dict[str | None, list[Package]] = {p: [] for p in declared if platform in (None, p)}
    seen: set[tuple[str, str, str]] = set()
    placeholders: dict[str, str] = {}
    numbers: list[str] = []  # digests YAML read as numbers
    for i, entry in enumerate(entries):
        name = entry["name"]
        plat = str(entry["platform"])
        if platform is not None and plat != platform:
            continue
        manager = _MANAGERS.get(as_str(entry.get("manager", "conda")))
        if manager is None:
            raise _bad(shown, f"package[{i}].manager", f"unknown manager {entry.get('manager')!r}")
        # v1 repeats a package once per category: keep the first.
        ident = (plat, manager, str(name))
        if ident in seen:
            continue
        seen.add(ident)
        source = entry.get("source")
        url = str(entry.get("url") or (source.get("url") if isinstance(source, dict) else "") or "")
        version = entry.get("version")
        build = None
        if manager == "conda":
            parsed = parse_conda_filename(url)
            if parsed:
                build = parsed[2]
                if not isinstance(version, str):  # a YAML float such as 1.10 lost its digits
                    version = parsed[1]
        else:
            parsed_pip = parse_pypi_filename(url)
            if parsed_pip and (not isinstance(version, str) or (version == _PLACEHOLDER and parsed_pip[1] != version)):
                if version == _PLACEHOLDER:
                    placeholders[str(name)] = parsed_pip[1]
                version = parsed_pip[1]
        raw = entry.get("hash") or {}
        h = {k: digest(raw.get(k), k) for k in ("md5", "sha256")}
        numbers += [f"package[{i}].hash.{k}" for k in ("md5", "sha256") if refused_number(raw.get(k), k, tool)]
        if not h.get("sha256") and "#sha256=" in url:  # a URL dependency: the hash in the fragment only
            h = {**h, "sha256": url.split("#sha256=", 1)[1].split("&", 1)[0]}
        by_platform.setdefault(plat, []).append(
            Package(
                name=str(name),
                version=as_str(version),
                manager=manager,  # type: ignore[arg-type]  # "conda" or "pip", from _MANAGERS
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
        raise PlatformNotLocked(f"platform {platform} is not in this lock (it has {', '.join(declared) or 'none'})",
                                file=shown, key="metadata.platforms", fix="pick one of those with --platform")
    notes = [f"{n}: conda-lock's placeholder version {_PLACEHOLDER} read as {v}, the version in its file name"
             for n, v in sorted(placeholders.items())]
    if numbers:
        notes.append(number_digests_note(numbers, tool))
    names = _mirrored_channels(meta, by_platform)
    if names:
        by_platform = {p: named_channels(pk, names) for p, pk in by_platform.items()}
    custom = meta.get("custom_metadata")
    return Description(kind="conda-lock", path=shown, packages=by_platform,
                       declared_platforms=tuple(declared), notes=notes, channel_names=names,
                       custom_metadata={str(k): str(v) for k, v in custom.items()} if isinstance(custom, dict) else {})


def _mirrored_channels(meta: dict[str, Any], by_platform: dict[str | None, list[Package]]) -> dict[str, str]:
    """The package channel URLs that are a listed channel's mirror (envguard.condaconfig.lock_channel_names:
    what the lock records, else this machine's configuration), for a lock written through one. Nothing is
    read unless some package comes from a URL no listed channel is."""
    listed_raw = [c.get("url") if isinstance(c, dict) else c for c in meta.get("channels") or []]
    listed = [str(c) for c in listed_raw if c]
    plain = {normalise_channel(c) for c in listed}
    unknown = {p.channel for pk in by_platform.values() for p in pk
               if p.channel and p.channel not in plain and ("://" in p.channel or p.channel.startswith("/"))}
    if not unknown or not listed:
        return {}
    from envguard.condaconfig import lock_channel_names

    custom = meta.get("custom_metadata")
    recorded = {str(k): str(v) for k, v in custom.items()} if isinstance(custom, dict) else {}
    return lock_channel_names(listed, recorded, unknown)
