"""Two variants' locks compared in a reviewer's terms (#37, docs/variants.md "Verify"): does only what a variant
forces differ (the torch family, the CUDA libraries, records that need ``__cuda``, and what depends on those),
or does something else differ too, which a lock of the variants together should have kept the same record?

Applies when either side is a lock envguard wrote for a declared variant (``envguard.variant`` in its
``custom_metadata``, envguard.variants)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

_TORCH = re.compile(r"^(pytorch|torch|libtorch|torchvision|torchaudio|pytorch-.*|torch-.*|triton)$")


def _forced_kind(change: Any) -> str | None:
    """Why a change is one a variant forces, from the package alone; None when the package alone does not say."""
    from envguard.diff.facts import core_rank
    from envguard.mixing import conda_cuda_library

    names = {change.name.lower(), change.key}
    if any(_TORCH.match(n) for n in names):
        return "torch family"
    if core_rank(change.key) == 2 or any(conda_cuda_library(n) for n in names):
        return "CUDA library"
    if any(d.split()[0] == "__cuda" for p in (change.old, change.new) if p is not None for d in p.depends if d):
        return "needs __cuda"
    return None


def forced(changes: Sequence[Any]) -> dict[str, str]:
    """key -> why, for every change a variant forces: the package's own kind, or a dependency (either side's
    record) on one that is forced."""
    why = {c.key: k for c in changes if (k := _forced_kind(c)) is not None}
    grown = True
    while grown:
        grown = False
        names = set(why) | {c.name.lower() for c in changes if c.key in why}
        for c in changes:
            if c.key in why:
                continue
            deps = {d.split()[0].lower() for p in (c.old, c.new) if p is not None for d in p.depends if d}
            if deps & names:
                why[c.key], grown = "depends on them", True
            elif (c.old is None or c.new is None) and _needed_by(c, changes, why):
                why[c.key], grown = "needed by them", True  # on one side only, pulled in by a forced record
            elif c.old is not None and c.new is not None and _pinned_by(c, changes, why):
                why[c.key], grown = "pinned by them", True  # a forced record's range excludes the other record
    return why


def _requires(change: Any, name: str) -> list[str]:
    """The ranges that either side's record of ``change`` puts on ``name`` (``""``: any)."""
    out = []
    for p in (change.old, change.new):
        for d in p.depends if p is not None else ():
            parts = d.split()
            if parts and parts[0].lower() == name:
                out.append(parts[1] if len(parts) > 1 else "")
    return out


def _needed_by(c: Any, changes: Sequence[Any], why: Mapping[str, str]) -> bool:
    """``c`` is on one side only and every record of that side that needs it is forced. A record that did not
    change needs it on both sides, so the records that pull it in are among the changes; one unforced record
    among them (an extra package of one environment) and ``c`` is that record's, not the variant's."""
    name, side = c.name.lower(), ("old" if c.old is not None else "new")
    needers = [o for o in changes if o.key != c.key and getattr(o, side) is not None
               and any(d.split()[0].lower() == name for d in getattr(o, side).depends if d.split())]
    return bool(needers) and all(o.key in why for o in needers)


def _pinned_by(c: Any, changes: Sequence[Any], why: Mapping[str, str]) -> bool:
    """A forced record of one side pins ``c`` to a range the other side's record of ``c`` is outside (conda-forge's
    CUDA and CPU builds of one pytorch release built against different libabseil releases)."""
    from rattler import Version, VersionSpec

    name = c.name.lower()
    for o in changes:
        if o.key not in why or o.key == c.key:
            continue
        for mine, theirs in ((o.old, c.new), (o.new, c.old)):
            for d in mine.depends if mine is not None and theirs is not None else ():
                parts = d.split()
                if len(parts) > 1 and parts[0].lower() == name:
                    try:
                        if not VersionSpec(parts[1], strict=False).matches(Version(theirs.version)):
                            return True
                    except Exception:  # noqa: BLE001 - a range rattler cannot read: not counted as a pin
                        continue
    return False


def verdict(meta_a: Mapping[str, str], meta_b: Mapping[str, str], platforms: Sequence[Any], *,
            names: tuple[str, str] | None = None, label: str = "variants") -> dict[str, Any] | None:
    """The comparison of two variants: their names, what is forced and what is not, and the one line that says
    it; None when neither side is a variant's lock. ``names`` gives the two names where no lock metadata does
    (two environments of a pixi.lock: ``label`` "environments")."""
    from envguard.variants import lock_variant

    va, vb = names if names is not None else (lock_variant(meta_a), lock_variant(meta_b))
    if va is None and vb is None:
        return None
    changes = [c for pd in platforms for c in pd.changes]
    why = forced(changes)
    unforced = sorted({c.name for c in changes if c.key not in why})
    n_forced = len({c.key for c in changes if c.key in why})
    a, b = va or "no variant", vb or "no variant"
    if not changes:
        line = f"{label} {a} and {b}: the same records"
    elif not unforced:
        line = (f"{label} {a} and {b}: only the torch family and CUDA libraries differ ({n_forced} package"
                f"{'s' * (n_forced != 1)}); every other package is the same record")
    else:
        shown = ", ".join(unforced[:5]) + (f", … (+{len(unforced) - 5})" if len(unforced) > 5 else "")
        verb = "packages differ" if len(unforced) != 1 else "package differs"
        line = (f"{label} {a} and {b}: {len(unforced)} {verb} outside the torch family and CUDA libraries "
                f"({shown}): not forced by the {label}")
    return {"a": va, "b": vb, "only_forced": not unforced, "forced": sorted(why), "unforced": unforced,
            "summary": line}
