"""A project's variants: one spec, several builds of it (``cpu``, ``cuda-12.6``, ...), locked together.

The declaration (docs/variants.md) is files the ecosystem already reads: ``environment.yml`` is a complete
environment file (the common packages plus the default variant's own lines, so ``conda env create -f
environment.yml`` builds the default variant), and ``variants/<name>.yml`` beside it holds what one variant
forces (the pytorch build line, ``cuda-version``), in environment-file shape. A variant is ``environment.yml``
merged with its overlay by conda-lock's own rule (``conda-lock -f environment.yml -f variants/<name>.yml``:
the later file wins per package), so conda-lock reproduces each variant's lock from the same files. The
variant's name is the overlay's file stem; its lock is ``conda-lock.<name>.yml`` beside the spec.

Nothing else is recorded: which variant is the default is derivable (the overlay whose lines the spec
already holds), and a project without ``variants/*.yml`` is a single-variant project (``[]``).

A lock says which variant it is in its ``custom_metadata`` (CEP 37 leaves a lock no other place), in
envguard's key style (``envguard.cuda``, ``envguard.cuda-from``): ``envguard.variant``,
``envguard.variant-cuda`` and ``envguard.variants`` (every declared name, so that check and fleet know the
alternatives from the lock alone).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envguard.errors import UserError

VARIANTS_DIR = "variants"
META_VARIANT = "envguard.variant"  # this lock's variant: "cuda-12.6"
META_VARIANT_CUDA = "envguard.variant-cuda"  # its CUDA line: "12.6"; "" for a CPU variant
META_VARIANTS = "envguard.variants"  # every declared variant, comma-separated, the default first

# A name that is a file stem on every platform and a word in a command line: no spaces, no separators.
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_CUDA_LINE = re.compile(r"(\d+)\.(\d+)")
_CUDA_VERSION_LINE = re.compile(r"^(?:[^\s:]+::)?cuda-version(?![\w.-])(.*)$", re.I)
_OVERLAY_KEYS = ("dependencies", "channels", "platforms", "name", "variables", "pip-repositories", "category",
                 "allow-pypi-requests")


@dataclass(frozen=True)
class Variant:
    """One declared variant: its overlay file, the lock it is locked into, its CUDA line (None: CPU) and the
    platforms it is locked for (the overlay's ``platforms:``, else the spec's)."""

    name: str
    overlay: Path
    lockfile: Path
    cuda: str | None
    platforms: tuple[str, ...]
    default: bool = False  # the variant environment.yml builds on its own


def variants_dir(spec: Path) -> Path:
    return Path(spec).parent / VARIANTS_DIR


def lockfile_of(spec: Path, name: str) -> Path:
    """The lock of variant ``name`` of ``spec``: ``conda-lock.<name>.yml`` beside it (envguard.project decides)."""
    from envguard.project import lock_for_spec

    return lock_for_spec(spec, variant=name)


def overlay_files(spec: Path) -> list[Path]:
    """The ``variants/*.yml`` files beside ``spec``, sorted by name (none: a single-variant project)."""
    d = variants_dir(spec)
    if not d.is_dir():
        return []
    return sorted((p for p in d.iterdir() if p.suffix in (".yml", ".yaml") and not p.name.startswith(".")),
                  key=lambda p: p.name)


def _load_small(path: Path) -> Any:
    """An overlay or the spec, as load_fast reads it; without PyYAML for the plain files init writes: every
    variant create reads them all (envguard.sources.lockscan.load_small, bench/variant_pick.py)."""
    from envguard.sources.lockscan import load_small
    from envguard.yamlio import read_text

    return load_small(path, read_text(path))


def _load_mapping(path: Path) -> dict[str, Any]:
    data = _load_small(path)
    if not isinstance(data, dict) or not isinstance(data.get("dependencies"), list):
        raise UserError("is not a variant overlay: an environment-file mapping with a `dependencies:` list",
                        file=str(path), key="dependencies",
                        fix=f"write the variant's own lines under `dependencies:`, or move the file out of "
                            f"{path.parent.name}/")
    unknown = [str(k) for k in data if k not in _OVERLAY_KEYS]
    if unknown:
        raise UserError(f"unknown key {unknown[0]!r} in a variant overlay", file=str(path), key=unknown[0],
                        fix=f"use only {', '.join(_OVERLAY_KEYS[:3])} (environment-file keys)")
    return data


def _conda_lines(data: Mapping[str, Any]) -> list[str]:
    return [" ".join(d.split()) for d in data.get("dependencies") or [] if isinstance(d, str)]


def _platforms(path: Path, data: Mapping[str, Any]) -> tuple[str, ...] | None:
    from envguard.platforms import LOCKABLE_PLATFORMS

    listed = data.get("platforms")
    if listed is None:
        return None
    if not isinstance(listed, list) or not listed:
        raise UserError("`platforms:` must be a non-empty list", file=str(path), key="platforms",
                        fix="list the platforms, e.g. platforms: [linux-64]")
    for p in listed:
        if p not in LOCKABLE_PLATFORMS:
            raise UserError(f"unsupported platform {p!r}", file=str(path), key="platforms",
                            fix=f"use some of {', '.join(LOCKABLE_PLATFORMS)}")
    return tuple(str(p) for p in listed)


def cuda_of(lines: list[str], name: str = "") -> str | None:
    """A variant's CUDA line (``"12.6"``) from its ``cuda-version`` line, else from a ``cuda-X.Y`` name;
    None for a CPU variant."""
    for line in lines:
        m = _CUDA_VERSION_LINE.match(line)
        line_m = _CUDA_LINE.search(m.group(1)) if m else None
        if line_m:
            return f"{line_m.group(1)}.{line_m.group(2)}"
    m = re.fullmatch(r"cuda-?(\d+)\.(\d+)", name)
    return f"{m.group(1)}.{m.group(2)}" if m else None


def declared_variants(spec: Path) -> list[Variant]:
    """The variants declared beside ``spec``, the default first, the others by name; ``[]`` for a
    single-variant project. Raises UserError (exit 2) naming the file for an overlay that is not one."""
    overlays = overlay_files(spec)
    if not overlays:
        return []
    from envguard.platforms import command_platforms

    base = _load_small(Path(spec)) if Path(spec).is_file() else {}
    base = base if isinstance(base, dict) else {}
    base_lines = set(_conda_lines(base))
    base_platforms = tuple(command_platforms(None, _platforms(Path(spec), base) or ()))
    found: list[tuple[Variant, bool]] = []
    seen: dict[str, Path] = {}
    for path in overlays:
        name = path.stem
        if not _NAME.match(name):
            raise UserError(f"variant name {name!r} is not a plain word", file=str(path), key="name",
                            fix="rename the file to letters, digits, '.', '-' or '_', e.g. variants/cuda-12.6.yml")
        if name in seen:
            raise UserError(f"variant {name!r} is declared twice ({seen[name].name} and {path.name})",
                            file=str(path), key="name", fix="keep one of the two files")
        seen[name] = path
        data = _load_mapping(path)
        lines = _conda_lines(data)
        found.append((Variant(name=name, overlay=path, lockfile=lockfile_of(spec, name),
                              cuda=cuda_of(lines, name), platforms=_platforms(path, data) or base_platforms),
                      bool(lines) and set(lines) <= base_lines))
    default = next((v.name for v, in_base in found if in_base), found[0][0].name)
    out = [Variant(v.name, v.overlay, v.lockfile, v.cuda, v.platforms, v.name == default) for v, _ in found]
    return sorted(out, key=lambda v: not v.default)


def default_variant(variants: list[Variant]) -> Variant | None:
    return next((v for v in variants if v.default), variants[0] if variants else None)


def find_variant(variants: list[Variant], name: str) -> Variant:
    """The declared variant called ``name``; UserError (exit 2) naming the declared ones otherwise."""
    for v in variants:
        if v.name == name:
            return v
    names = ", ".join(v.name for v in variants) or "none"
    raise UserError(f"no variant {name!r} is declared (declared: {names})", key="--variant",
                    fix="pass one of the declared names, or add variants/" + name + ".yml")


def machine_variant(spec: Path) -> tuple[Variant, str] | None:
    """The declared variant this machine runs, picked as ``envguard create`` picks it (envguard.variantpick: the
    driver, ``CONDA_OVERRIDE_CUDA*``), and the line saying why; None in a single-variant project, for overlays
    that are not (lint names them), or when no declared variant runs here."""
    import os

    try:
        declared = declared_variants(spec)
    except UserError:
        return None
    if not declared:
        return None
    from envguard.driver import get_driver_info
    from envguard.variantpick import pick

    chosen = pick(declared, get_driver_info(), os.environ)
    if not chosen.runs or chosen.name is None:
        return None
    return find_variant(declared, chosen.name), chosen.reason


def variant_files(spec: Path, variant: Variant) -> list[Path]:
    """The files a variant is locked from, in conda-lock's ``-f`` order: the spec, then the overlay."""
    return [Path(spec), variant.overlay]


def variant_metadata(variant: Variant, variants: list[Variant]) -> dict[str, str]:
    """The custom_metadata keys a variant's lock carries."""
    return {META_VARIANT: variant.name, META_VARIANT_CUDA: variant.cuda or "",
            META_VARIANTS: ",".join(v.name for v in variants)}


def _custom(lock_metadata: Mapping[str, Any]) -> Mapping[str, Any]:
    inner = lock_metadata.get("custom_metadata") if isinstance(lock_metadata, Mapping) else None
    return inner if isinstance(inner, Mapping) else lock_metadata if isinstance(lock_metadata, Mapping) else {}


def lock_variant(lock_metadata: Mapping[str, Any]) -> str | None:
    """The variant a lock was locked for, from its ``metadata`` (or its ``custom_metadata`` itself);
    None for a single-variant lock."""
    v = _custom(lock_metadata).get(META_VARIANT)
    return str(v) if v else None


def lock_variant_cuda(lock_metadata: Mapping[str, Any]) -> str | None:
    """The CUDA line a variant lock records; None for a CPU variant or a single-variant lock."""
    v = _custom(lock_metadata).get(META_VARIANT_CUDA)
    return str(v) if v else None


def lock_variants(lock_metadata: Mapping[str, Any]) -> list[str]:
    """Every variant declared when the lock was written (the alternatives a machine could have)."""
    v = _custom(lock_metadata).get(META_VARIANTS)
    return [n for n in str(v).split(",") if n] if v else []
