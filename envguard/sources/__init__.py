"""Read any environment description into one normalised model.

A description is an ``environment.yml``, a pixi manifest (``pixi.toml``, or a
``pyproject.toml`` with ``[tool.pixi]``), a ``conda-lock.yml`` (every version of
its format), an explicit ``@EXPLICIT`` file, a ``conda env export`` YAML, a
``pixi.lock`` (v3 to v7), a live prefix (a path, or ``name:NAME``) or an
``envguard check --format json`` report. :func:`load` detects the kind from
the content, never from the file name (envguard.filekind decides it, for every
command), and returns a :class:`Description`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envguard.envs import find_env
from envguard.errors import UserError
from envguard.filekind import detect_kind, read_kind  # the one decision of a file's kind (re-exported)
from envguard.model import Manager, Package, canonical_name
from envguard.redact import redact

KINDS = ("environment", "pixi-manifest", "conda-lock", "explicit", "export", "pixi", "prefix", "report")
SPEC_KINDS = ("environment", "pixi-manifest")  # what was asked for, not what was installed
NAME_PREFIX = "name:"
# the top-level keys of an environment file, as conda (and conda-lock) read them
ENVIRONMENT_KEYS = frozenset(("name", "channels", "dependencies", "prefix", "variables", "platforms", "category",
                              "pip-repositories", "allow-pypi-requests"))


@dataclass(frozen=True)
class RequestedSpec:
    """One entry of an environment file's ``dependencies`` (or its ``pip:`` section)."""

    name: str
    spec: str  # as written (redacted), e.g. "pytorch~=2.1.0 *cuda12*"
    manager: Manager = "conda"
    channel: str | None = None  # "pytorch" for "pytorch::pytorch=2.1"
    platforms: tuple[str, ...] | None = None  # a "# [linux]" selector: only these; None = all
    line: int | None = None

    @property
    def key(self) -> str:
        return canonical_name(self.name, self.manager)

    def applies_to(self, platform: str | None) -> bool:
        """Whether the spec is asked for on ``platform``; ``platforms == ()`` (a selector conda-lock cannot
        read) means on none."""
        if self.platforms is None:
            return True
        return bool(self.platforms) and (platform is None or platform in self.platforms)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "spec": self.spec, "manager": self.manager, "channel": self.channel,
                "platforms": list(self.platforms) if self.platforms is not None else None, "line": self.line}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RequestedSpec:
        p = d.get("platforms")
        return cls(name=d["name"], spec=d["spec"], manager=d.get("manager", "conda"), channel=d.get("channel"),
                   platforms=tuple(p) if p is not None else None, line=d.get("line"))


@dataclass
class Description:
    """What one side of a diff holds.

    ``packages`` maps a platform to its packages. Kinds that describe a single
    machine without saying which (an export, a report without a platform) use
    the key ``None``, which pairs with any platform.
    """

    kind: str
    path: str  # for display, redacted
    packages: dict[str | None, list[Package]] = field(default_factory=dict)
    requested: list[RequestedSpec] = field(default_factory=list)
    declared_platforms: tuple[str, ...] = ()  # an environment.yml's "platforms:" section
    environments: tuple[str, ...] = ()  # pixi: every environment in the file
    environment: str | None = None  # pixi: the one read
    notes: list[str] = field(default_factory=list)  # what the reader skipped, for the user
    # pixi: a platform's subdir and the virtual packages that tell named platforms apart (cuda, macos),
    # so that a manifest's `cuda-linux-64` pairs with the lock's `p2` (both linux-64 with __cuda=12)
    platform_info: dict[str, dict[str, str]] = field(default_factory=dict)
    # a lock's mirrors: a package channel URL -> the listed channel it serves (envguard.condaconfig's
    # lock_channel_names), already applied to ``packages``; diff and check apply it to the other side too
    channel_names: dict[str, str] = field(default_factory=dict)
    # a conda-lock file's metadata.custom_metadata: whether envguard wrote it (envguard.lockwhole.judges_versions)
    custom_metadata: dict[str, str] = field(default_factory=dict)

    @property
    def platforms(self) -> list[str | None]:
        if self.kind in SPEC_KINDS:
            return list(self.declared_platforms) or [None]
        return list(self.packages)

    @property
    def is_spec(self) -> bool:
        return self.kind in SPEC_KINDS

    def packages_for(self, platform: str | None) -> list[Package]:
        if platform in self.packages:
            return self.packages[platform]
        if None in self.packages:
            return self.packages[None]
        if platform is None and len(self.packages) == 1:
            return next(iter(self.packages.values()))
        return []


def named_channels(packages: list[Package], names: dict[str, str]) -> list[Package]:
    """``packages`` with every channel URL that ``names`` knows (a mirror of a listed channel) replaced by
    that channel's name: a package read from a lock through a mirror and the same one read from a prefix
    built from it, or from a lock written against the channel itself, compare equal."""
    if not names or not any(p.channel in names for p in packages):
        return packages
    from dataclasses import replace

    return [replace(p, channel=names[p.channel]) if p.channel in names else p for p in packages]


# Parsed documents (and their kinds) by (path, mtime, size): comparing two platforms or two environments
# of one large lock parses it once. Readers never mutate the parsed data.
_PARSED: dict[tuple[Any, ...], Any] = {}
_PARSED_MAX = 8


def _stat_key(path: Path) -> tuple[str, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (str(path.resolve()), st.st_mtime_ns, st.st_size)


def _cached(path: Path, what: str, make: Callable[[], Any]) -> Any:
    stat = _stat_key(path)
    if stat is None:
        return make()
    key = (*stat, what)
    if key in _PARSED:
        return _PARSED[key]
    value = make()
    if len(_PARSED) >= _PARSED_MAX:
        _PARSED.pop(next(iter(_PARSED)))
    _PARSED[key] = value
    return value


def _parse(path: Path, text: str) -> Any:
    return _cached(path, f"document {hash(text)}", lambda: _parse_text(path, text))


def _parse_text(path: Path, text: str) -> Any:
    from envguard.sources import yamlkeys
    from envguard.sources.toml_text import looks_like_toml, parse_toml

    if looks_like_toml(text):  # pixi.toml, pyproject.toml: YAML would call them malformed
        return parse_toml(text, redact(str(path)))
    stripped = text.lstrip("\ufeff \t\r\n")
    if stripped.startswith("{"):
        try:
            return json.loads(stripped)
        except json.JSONDecodeError:
            # JSON is the fast path for a file that is JSON; a flow mapping, or a `{% ... %}` template, is YAML's
            # to read or refuse, with the one message lint gives for the same file
            pass
        except RecursionError:  # 100,000 nested arrays: no report or lock nests more than a few levels
            raise UserError("malformed JSON: nested too deeply", file=str(path), fix="correct the file") from None
    return yamlkeys.load(path, text)


def load(spec: str, *, kind: str | None = None, platform: str | None = None,
         environment: str | None = None, first_environment: bool = False, text: str | None = None) -> Description:
    """Read one environment description.

    ``spec`` is a file path, a prefix directory, or ``name:NAME`` for a named
    environment. ``kind`` overrides the detection. ``platform`` only narrows
    what is kept for multi-platform kinds; ``environment`` picks a pixi
    environment (default: ``default``, or the only one; with ``first_environment``
    the first of several instead of an error, for a caller that reads every one). ``text``: the file's,
    when the caller read it already (it is not read again).
    """
    from envguard.yamlio import read_text

    if kind is not None and kind not in KINDS:
        raise UserError(f"unknown kind {kind!r}", key="--kind", fix=f"use one of {', '.join(KINDS)}")
    if spec.startswith(NAME_PREFIX):
        path = find_env(spec[len(NAME_PREFIX):])
        kind = kind or "prefix"
    else:
        path = Path(spec)
    shown = redact(str(path))
    if kind == "prefix" or (kind is None and path.is_dir()):
        from envguard.sources.prefix import read_prefix

        return read_prefix(path, shown)
    if text is None:
        text = read_text(path)
    if not text.strip():
        raise UserError("empty file", file=shown, fix="pass an environment file, lock, export, pixi.lock or report")
    if kind is None:
        # the kind and the document, decided and parsed once (a conda-lock file by its one reader)
        # keyed by the text too: a caller's text (create's, for its check) is never answered with another read's
        found, data = _cached(path, f"kind {hash(text)}",
                              lambda: read_kind(shown, text, lambda _shown, t: _parse_text(path, t)))
    else:
        found, data = kind, (None if kind == "explicit" else _parse(path, text))
    if found == "explicit":
        from envguard.sources.explicit import read_explicit

        return read_explicit(text, shown)
    if found is None:
        raise UserError("cannot tell what kind of environment description this is", file=shown,
                        fix=f"pass --kind ({', '.join(KINDS)})")
    if found == "conda-lock":
        from envguard.sources.condalock import read_conda_lock

        return read_conda_lock(data, shown, platform=platform)
    if found == "pixi":
        from envguard.sources.pixi import read_pixi

        return read_pixi(data, shown, environment=environment, platform=platform, first=first_environment)
    if found == "pixi-manifest":
        from envguard.sources.pixi_manifest import read_manifest

        return read_manifest(text, data, shown, environment=environment, base_dir=path.parent)
    if found == "environment":
        from envguard.sources.envfile import read_environment

        return read_environment(text, data, shown, base_dir=path.parent)
    if found == "export":
        from envguard.sources.export import read_export

        return read_export(data, shown)
    if found == "report":
        from envguard.sources.report import read_report

        return read_report(data, shown)
    raise UserError(f"kind {found!r} cannot be read from a file", file=shown)  # "explicit" handled above


__all__ = ["KINDS", "NAME_PREFIX", "SPEC_KINDS", "Description", "RequestedSpec", "detect_kind", "load"]
