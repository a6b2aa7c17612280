"""Which variant ``envguard create`` builds in a project that declares several (docs/variants.md, "Pick").

The machine decides (envguard.variantpick: one driver query, the CONDA_OVERRIDE_CUDA* variables), unless
``--variant NAME`` does; a variant that cannot run here is built only when named that way, with a warning. The
chosen variant's lock (``conda-lock.<name>.yml``) is then installed as any lock is, and the fingerprint records
the variant. A variant lock is never re-locked here on its own: the variants are solved together, so a missing
or stale one is `envguard lock`'s to make (exit 4), as under ``--locked``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from envguard.errors import StaleLockError, UserError
from envguard.variants import Variant


@dataclass(frozen=True)
class VariantChoice:
    variant: Variant
    line: str  # which variant and why, one line
    warning: str | None  # the cpu fallback on a GPU machine, or a --variant that cannot run here
    files: list[Path]  # the files its lock is made from: the spec, then the overlay


def choose_variant(variant: str | None, specs: Sequence[Path], *, lockfile: Path | None, env_files: Sequence[Path],
                   platform: str, locked: bool, frozen: bool) -> VariantChoice | None:
    """The variant to build, or None for a single-variant project (and whenever ``--lockfile`` names the lock:
    the file a user names is the file used). ``variant``: ``--variant``'s value."""
    spec = Path(specs[0]) if len(specs) == 1 else None
    from envguard.variants import declared_variants, find_variant, variant_files

    declared = declared_variants(spec) if spec is not None and lockfile is None and len(env_files) <= 1 else []
    if not declared:
        if variant is not None:
            why = ("--lockfile names the lock to install" if lockfile is not None else
                   f"{spec or 'the project'} declares no variants (no variants/*.yml beside it)")
            raise UserError(f"--variant {variant}: {why}", key="--variant",
                            fix="leave --variant out, or declare variants with `envguard init --cuda cpu --cuda 12.6`")
        return None
    assert spec is not None
    from envguard.driver import get_driver_info
    from envguard.variantpick import pick

    # the one driver query of a variant create; the platform's own arch rows judge its GPUs
    chosen = pick(declared, get_driver_info(), os.environ, platform=platform)
    names = ", ".join(v.name for v in declared)
    if variant is not None:
        v = find_variant(declared, variant)
        verdict = chosen.verdict(v.name)
        line = f"variant {v.name}: named with --variant (this machine's pick: {chosen.name})"
        warning = None
        if verdict is not None and not verdict.runs:
            warning = f"variant {v.name} cannot run on this machine ({verdict.why}); built because --variant names it"
    else:
        if not chosen.runs or chosen.name is None:
            raise UserError(chosen.reason, key="--variant",
                            fix=f"pass --variant NAME to build one anyway (declared: {names})")
        v = find_variant(declared, chosen.name)
        line, warning = chosen.reason, chosen.warning
    if platform not in v.platforms:
        raise UserError(f"variant {v.name} is not locked for {platform} (its platforms: {', '.join(v.platforms)})",
                        key="--variant", fix=f"pass --variant with one of {names} that lists {platform}")
    files = variant_files(spec, v)
    _require_lock(v, files, platform, locked=locked, frozen=frozen)
    return VariantChoice(v, line, warning, files)


def _require_lock(v: Variant, files: list[Path], platform: str, *, locked: bool, frozen: bool) -> None:
    """The variant's lock exists and (unless ``frozen``) is fresh for its files; else exit 4 naming
    `envguard lock`, which solves every variant together."""
    if not v.lockfile.is_file():
        flag = " (--frozen installs an existing lock)" if frozen else ""
        raise StaleLockError(f"lock file not found: {v.lockfile}, the lock of variant {v.name}{flag}",
                             fix="run `envguard lock` (it locks every variant together)", command="envguard lock")
    if frozen:
        return
    from envguard.lock import check_fresh

    verdict = check_fresh(list(files), v.lockfile, platforms=[platform])
    if not verdict.fresh:
        how = "--locked: " if locked else ""
        raise StaleLockError(f"{how}{verdict.reason}; a variant's lock is re-locked with the others, never alone",
                             fix="run `envguard lock` (it re-locks every variant together), or install it as it is "
                                 "with --frozen", command="envguard lock")
