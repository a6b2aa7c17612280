"""The requested dependencies as lint's environment-file rules see them (one :class:`Dep` per spec,
conda or pip), read from envguard.sources' requests, and the channel and selector helpers the rules share.

:func:`parse_conda` and :func:`parse_pip` make a :class:`Dep` (linter.py gathers them); :func:`channel_name`,
:func:`is_conda_forge` and :func:`is_defaults` judge a channel as written (name or URL); :func:`overlap` says
whether two selectors' platforms meet."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from envguard.model import Manager


@dataclass
class Dep:
    name: str  # as written, lower case
    manager: Manager
    spec: str  # as written (redacted)
    version: str | None
    build: str | None
    channel: str | None
    line: int | None
    platforms: tuple[str, ...] | None  # from a # [selector]; None = every platform
    via: str | None = None  # "requirements.txt" when read through a pip -r include


def parse_conda(req: Any, raw: str | None) -> Dep | None:
    from rattler import MatchSpec

    from envguard.lock import rattler_form

    spec = raw or req.spec
    try:
        ms = MatchSpec(rattler_form(spec), strict=False)
    except Exception:  # noqa: BLE001 - reported by spec.validate as EG121
        return None
    version = str(ms.version) if ms.version is not None else None
    build = str(ms.build) if ms.build is not None else None
    return Dep(req.name.lower(), "conda", spec, version, build, req.channel, req.line, req.platforms)


def parse_pip(req: Any, fallback_line: int | None) -> Dep:
    from packaging.requirements import InvalidRequirement, Requirement

    version = None
    try:
        version = str(Requirement(req.spec).specifier) or None
    except InvalidRequirement:
        pass
    return Dep(req.name.lower(), "pip", req.spec, version, None, None, req.line or fallback_line, req.platforms,
                via=None if req.line else "a -r requirements file")


def channel_name(ch: str) -> str:
    from envguard.channels import normalise_channel

    return (normalise_channel(ch.strip()) or "").lower()


def is_conda_forge(ch: str) -> bool:
    from envguard.mixing import channel_family

    return channel_family(ch.strip()) == "conda-forge"


def is_defaults(ch: str) -> bool:
    from envguard.mixing import channel_family

    return channel_family(ch.strip()) == "defaults"


def overlap(a: tuple[str, ...] | None, b: tuple[str, ...] | None) -> bool:
    """Whether two selectors' platforms meet (None: every platform)."""
    if a is None or b is None:
        return a != () and b != ()
    return bool(set(a) & set(b))
