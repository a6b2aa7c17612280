"""What two environment files say besides their dependencies: ``channels:`` (and their order, which is
priority), ``platforms:`` and ``name:``. A review gate that compares only dependencies passes the most
dangerous edit there is: a channel moved ahead of conda-forge, whose packages then win under strict
priority. Each change comes with what it means."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from envguard.channels import normalise_channel

_CONDA_FORGE = "conda-forge"


def _meta(path: str) -> dict[str, Any]:
    from envguard.errors import EnvguardError
    from envguard.yamlio import load_fast

    try:
        data = load_fast(Path(path))
    except (EnvguardError, OSError):
        return {}
    return data if isinstance(data, dict) else {}


def _names(value: Any) -> list[str]:
    if not isinstance(value, list):
        return []
    return [n for n in (normalise_channel(str(v)) for v in value) if n]


def spec_changes(a_path: str, b_path: str) -> list[str]:
    """The channel, platform and name changes from environment file A to B, each with its meaning."""
    a, b = _meta(a_path), _meta(b_path)
    out: list[str] = []
    ca, cb = _names(a.get("channels")), _names(b.get("channels"))
    for ch in [c for c in cb if c not in ca]:
        ahead = _CONDA_FORGE in cb and cb.index(ch) < cb.index(_CONDA_FORGE)
        out.append(f"channel {ch} added in B" + (
            f", ahead of {_CONDA_FORGE}: under strict priority every package it has shadows {_CONDA_FORGE}'s"
            if ahead else ": packages only it has can now be picked"))
    for ch in [c for c in ca if c not in cb]:
        out.append(f"channel {ch} removed in B: packages only it had no longer solve, or come from elsewhere")
    shared_a, shared_b = [c for c in ca if c in cb], [c for c in cb if c in ca]
    if shared_a != shared_b:
        out.append(f"channel order (priority) changed: A {' > '.join(shared_a)}; B {' > '.join(shared_b)}: under "
                   "strict priority the first channel that has a package wins")
    pa, pb = [str(p) for p in a.get("platforms") or []], [str(p) for p in b.get("platforms") or []]
    for p in [p for p in pa if p not in pb]:
        out.append(f"platform {p} dropped in B: it is no longer locked, and machines on it cannot create the env")
    for p in [p for p in pb if p not in pa]:
        out.append(f"platform {p} added in B: it is locked from now on")
    na, nb = a.get("name"), b.get("name")
    if na != nb:
        out.append(f"name changed: A {na!r}, B {nb!r}: `envguard create` without -p/-n builds another environment")
    return out
