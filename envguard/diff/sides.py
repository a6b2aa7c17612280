"""``envguard diff``: read both sides, pick the platforms, run the pure diff.

Errors reading a side become one :class:`UserError` (exit 2) that says which
side (A or B), its path and why.
"""

from __future__ import annotations

from dataclasses import dataclass

from envguard.diff import DiffResult, PlatformDiff, Side, diff_packages, diff_requested, spec_vs_lock
from envguard.errors import EnvguardError, UserError
from envguard.redact import redact
from envguard.sources import Description, load


@dataclass(frozen=True)
class SideArgs:
    spec: str  # a path, a prefix directory or name:NAME
    kind: str | None = None
    platform: str | None = None
    environment: str | None = None


def _load_side(label: str, args: SideArgs) -> Description:
    shown = redact(args.spec)
    try:
        return load(args.spec, kind=args.kind, environment=args.environment)
    except EnvguardError as e:
        msg = e.message
        raise UserError(f"side {label}: {msg}" if shown in msg else f"side {label} ({shown}): {msg}") from None
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as e:
        # A structurally odd file that got past the readers' checks: still the input's fault.
        raise UserError(f"side {label} ({shown}): cannot read it as {args.kind or 'detected kind'}: "
                        f"{type(e).__name__}: {e}",) from None


def _known(d: Description) -> list[str]:
    return [p for p in d.platforms if p is not None]


def _check_platform(label: str, d: Description, platform: str | None) -> None:
    known = _known(d)
    if platform is not None and known and platform not in known:
        raise UserError(f"side {label} ({d.path}): has no platform {platform} (it has {', '.join(known)})",
                        fix="pick one of those with --platform, --a-platform or --b-platform")


def choose_platforms(a: Description, b: Description, *, platform: str | None = None,
                     a_platform: str | None = None, b_platform: str | None = None,
                     all_platforms: bool = False, host: str | None = None
                     ) -> tuple[list[tuple[str | None, str | None]], list[str], list[str]]:
    """The (A platform, B platform) pairs to compare, and the platforms found in only one side.

    A side that names no platform (an export, an environment file without a
    ``platforms:`` section) pairs with any platform of the other side.
    """
    ka, kb = _known(a), _known(b)
    pa, pb = a_platform or platform, b_platform or platform
    if pa or pb:
        if pa is None:
            pa = pb if (not ka or pb in ka) else (ka[0] if len(ka) == 1 else None)
        if pb is None:
            pb = pa if (not kb or pa in kb) else (kb[0] if len(kb) == 1 else None)
        for label, d, p in (("A", a, pa), ("B", b, pb)):
            if p is None:
                raise UserError(f"side {label} ({d.path}) has platforms {', '.join(_known(d))}",
                                fix=f"pick one with --{label.lower()}-platform")
            _check_platform(label, d, p)
        return [(pa, pb)], [], []
    if not ka and not kb:
        return [(None, None)], [], []
    common = [p for p in ka if p in kb] if ka and kb else (ka or kb)
    if all_platforms:
        only_a = [p for p in ka if kb and p not in kb]
        only_b = [p for p in kb if ka and p not in ka]
        return [(p if ka else None, p if kb else None) for p in common], only_a, only_b
    if host is None:
        from envguard.platforms import host_platform

        host = host_platform()
    if host in common:
        chosen = host
    elif len(common) == 1:
        chosen = common[0]
    elif not common:
        raise UserError(f"A ({a.path}) and B ({b.path}) share no platform (A: {', '.join(ka)}; B: {', '.join(kb)})",
                        fix="pick one per side with --a-platform and --b-platform")
    else:
        raise UserError(f"A and B share several platforms ({', '.join(common)}) and this host's {host} is not one",
                        fix="pick one with --platform, or compare all with --all-platforms")
    return [(chosen if ka else None, chosen if kb else None)], [], []


def compare(a: SideArgs, b: SideArgs, *, platform: str | None = None, all_platforms: bool = False,
            host: str | None = None) -> DiffResult:
    """Read A and B, choose platforms, diff. Raises :class:`UserError` (exit 2) when a side can't be read."""
    da = _load_side("A", a)
    db = _load_side("B", b)
    pairs, only_a, only_b = choose_platforms(da, db, platform=platform, a_platform=a.platform,
                                             b_platform=b.platform, all_platforms=all_platforms, host=host)
    single = len(pairs) == 1
    result = DiffResult(
        a=Side("A", da.kind, da.path, pairs[0][0] if single else None, da.environment),
        b=Side("B", db.kind, db.path, pairs[0][1] if single else None, db.environment),
        only_in_a=only_a, only_in_b=only_b,
    )
    for label, d in (("A", da), ("B", db)):
        result.notes += [f"{label}: {n}" for n in d.notes]
    for pa, pb in pairs:
        if da.is_spec and db.is_spec:
            result.platforms.append(PlatformDiff(pa, pb, diff_requested(da.requested, db.requested, pa or pb)))
        elif da.is_spec or db.is_spec:
            spec, other, plat = (da, db, pb) if da.is_spec else (db, da, pa)
            result.spec_side = "A" if da.is_spec else "B"
            report = spec_vs_lock(spec.requested, other.packages_for(plat), plat or (pa or pb))
            result.spec_reports.append(report)
        else:
            result.platforms.append(PlatformDiff(pa, pb, diff_packages(da.packages_for(pa), db.packages_for(pb))))
    return result
