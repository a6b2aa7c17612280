"""``envguard diff``: read both sides, pick the platforms, run the pure diff.

Errors reading a side become one :class:`UserError` (exit 2) that says which
side (A or B), its path and why.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from envguard import lockwhole
from envguard.diff import DiffResult, PlatformDiff, Side, diff_packages, diff_requested, spec_vs_lock
from envguard.errors import EnvguardError, UserError
from envguard.redact import redact
from envguard.sources import Description, load, named_channels


@dataclass(frozen=True)
class SideArgs:
    spec: str  # a path, a prefix directory or name:NAME
    kind: str | None = None
    platform: str | None = None
    environment: str | None = None


def _load_side(label: str, args: SideArgs) -> Description:
    shown = redact(args.spec)
    try:
        # several pixi environments, none named: start at the first; compare() then reads every one
        side = load(args.spec, kind=args.kind, environment=args.environment, first_environment=True)
    except EnvguardError as e:
        msg = e.message
        raise UserError(f"side {label}: {msg}" if shown in msg else f"side {label} ({shown}): {msg}") from None
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as e:
        # A structurally odd file that got past the readers' checks: still the input's fault.
        raise UserError(f"side {label} ({shown}): cannot read it as {args.kind or 'detected kind'}: "
                        f"{type(e).__name__}: {e}",) from None
    holes = lockwhole.of_description(side)[0]
    if holes:  # a lock that is not whole describes no environment anyone solved: exit 3, as every command says
        raise lockwhole.error(f"side {label} ({side.path})", holes)
    return side


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
    else:  # several shared platforms and none is this host's: every one is as much the answer
        return choose_platforms(a, b, all_platforms=True)
    return [(chosen if ka else None, chosen if kb else None)], [], []


def align_platform_names(spec: Description, other: Description) -> dict[str, str]:
    """Rename a pixi manifest's platforms to the lock's names for the same platform; returns the renames.

    pixi gives a named platform of the manifest (``{name = "cuda-linux-64", platform = "linux-64",
    cuda = "12"}``) a name of its own in pixi.lock v7 (``p2``, with ``__cuda=12``): pair them by subdir,
    then by the virtual packages that tell two platforms of one subdir apart.
    """
    if spec.kind != "pixi-manifest" or not other.platform_info:
        return {}
    theirs = {p: other.platform_info.get(p, {"subdir": p}) for p in other.platforms if p is not None}
    mine = {p: spec.platform_info.get(p, {"subdir": p}) for p in spec.declared_platforms}
    renames: dict[str, str] = {}
    taken = {p for p in mine if p in theirs and theirs[p]["subdir"] == mine[p]["subdir"]}
    for name, facts in mine.items():
        if name in taken:
            continue
        cands = [t for t, tf in theirs.items() if t not in taken and tf["subdir"] == facts["subdir"]]
        if len(cands) > 1:
            want = {k: v for k, v in facts.items() if k != "subdir"}
            cands = [t for t in cands if {k: v for k, v in theirs[t].items() if k != "subdir"} == want]
        if len(cands) == 1:
            renames[name] = cands[0]
            taken.add(cands[0])
    if renames:
        spec.declared_platforms = tuple(renames.get(p, p) for p in spec.declared_platforms)
        spec.requested = [replace(r, platforms=tuple(renames.get(p, p) for p in r.platforms))
                          if r.platforms else r for r in spec.requested]
        spec.notes.append("platforms paired with the lock's names: "
                          + ", ".join(f"{k} = {v}" for k, v in renames.items()))
    return renames


def _environment_pairs(a: SideArgs, b: SideArgs, da: Description, db: Description
                       ) -> list[tuple[str | None, Description, Description]]:
    """Two pixi files (manifest or lock), no environment named: every environment both have, each read.

    A manifest against its lock compares each environment; so does a lock against itself or another
    version of it (``diff pixi.lock pixi.lock``, ``diff old/pixi.lock pixi.lock``).
    """
    kinds = {da.kind, db.kind}
    if not kinds <= {"pixi-manifest", "pixi"} or kinds == {"pixi-manifest"} or a.environment or b.environment:
        for d, args in ((da, a), (db, b)):
            if d.kind == "pixi" and not args.environment and len(d.environments) > 1:
                d.notes.append(f"environment {d.environment!r} of {len(d.environments)} compared "
                               f"({', '.join(d.environments[:6])}{', ...' if len(d.environments) > 6 else ''}): "
                               "pick another with --environment")
        return [(None, da, db)]
    two_locks = kinds == {"pixi"}
    first, second = (db, da) if db.kind == "pixi-manifest" else (da, db)  # a manifest's names lead
    shared = [e for e in first.environments if e in second.environments]
    if not shared:
        if two_locks and da.environments and db.environments:
            raise UserError(f"A ({da.path}) and B ({db.path}) share no environment (A: "
                            f"{', '.join(da.environments)}; B: {', '.join(db.environments)})",
                            fix="pick one per side with --a-environment and --b-environment")
        return [(None, da, db)]
    if len(shared) == 1 and len(first.environments) == 1 and (not two_locks or len(second.environments) == 1):
        return [(None, da, db)]
    out: list[tuple[str | None, Description, Description]] = []
    for env in shared:
        ea = da if da.environment == env else _load_side("A", replace(a, environment=env))
        eb = db if db.environment == env else _load_side("B", replace(b, environment=env))
        out.append((env, ea, eb))
    if two_locks:
        first_a, first_b = out[0][1], out[0][2]
        for target, mine, theirs in ((first_a, da, db), (first_b, db, da)):
            alone = [e for e in mine.environments if e not in theirs.environments]
            if alone:
                target.notes.append(f"environments the other side does not have: {', '.join(alone)}")
    else:
        missing = [e for e in first.environments if e not in second.environments]
        if missing:
            out[0][1].notes.append(f"environments of the manifest that the lock does not have: {', '.join(missing)}")
    return out


def compare(a: SideArgs, b: SideArgs, *, platform: str | None = None, all_platforms: bool = False,
            host: str | None = None) -> DiffResult:
    """Read A and B, choose platforms, diff. Raises :class:`UserError` (exit 2) when a side can't be read."""
    da = _load_side("A", a)
    db = _load_side("B", b)
    runs = _environment_pairs(a, b, da, db)
    if len(runs) > 1 and (platform or a.platform or b.platform):  # only the environments that have it
        def has(d: Description, p: str | None) -> bool:
            return p is None or not _known(d) or p in _known(d)

        kept = [r for r in runs if has(r[1], a.platform or platform) and has(r[2], b.platform or platform)]
        skipped = [r[0] for r in runs if r not in kept]
        runs = kept or runs[:1]  # none: the first one says why
        if kept and skipped:
            runs[0][1].notes.append(f"environments without the platform asked for: {', '.join(map(str, skipped))}")
    result: DiffResult | None = None
    for env, ea, eb in runs:
        if ea.is_spec != eb.is_spec:
            align_platform_names(ea if ea.is_spec else eb, eb if ea.is_spec else ea)
        pairs, only_a, only_b = choose_platforms(ea, eb, platform=platform, a_platform=a.platform,
                                                 b_platform=b.platform, all_platforms=all_platforms, host=host)
        single = len(pairs) == 1 and len(runs) == 1
        if result is None:
            result = DiffResult(
                a=Side("A", ea.kind, ea.path, pairs[0][0] if single else None, ea.environment if env is None else None),
                b=Side("B", eb.kind, eb.path, pairs[0][1] if single else None, eb.environment if env is None else None),
            )
            for label, d in (("A", ea), ("B", eb)):
                result.notes += [f"{label}: {n}" for n in d.notes]
        result.only_in_a += [p for p in only_a if p not in result.only_in_a]
        result.only_in_b += [p for p in only_b if p not in result.only_in_b]
        for pa, pb in pairs:
            if ea.is_spec and eb.is_spec:
                result.platforms.append(PlatformDiff(pa, pb, diff_requested(ea.requested, eb.requested, pa or pb),
                                                     env))
            elif ea.is_spec or eb.is_spec:
                spec, other, plat = (ea, eb, pb) if ea.is_spec else (eb, ea, pa)
                result.spec_side = "A" if ea.is_spec else "B"
                report = spec_vs_lock(spec.requested, other.packages_for(plat), plat or (pa or pb))
                report.environment = env
                result.spec_reports.append(report)
            else:
                notes: list[str] = []
                # a lock read through a mirror names its channel; the other side's copies of its URLs do too
                names = {**ea.channel_names, **eb.channel_names}
                result.platforms.append(PlatformDiff(pa, pb, diff_packages(
                    named_channels(ea.packages_for(pa), names), named_channels(eb.packages_for(pb), names),
                    notes), env))
                where = f"{env}: " if env else ""
                result.notes += [f"{where}{pa or pb or 'any platform'}: {n}" if len(pairs) > 1 else where + n
                                 for n in notes]
    assert result is not None
    if da.kind == "environment" and db.kind == "environment":
        from envguard.diff.specmeta import spec_changes

        result.spec_changes = spec_changes(a.spec, b.spec)
    if da.kind == "conda-lock" and db.kind == "conda-lock":  # two variants' locks: forced differences or not
        from envguard.diff.variantdiff import verdict

        result.variants = verdict(da.custom_metadata, db.custom_metadata, result.platforms)
    elif (da.kind == "pixi" and db.kind == "pixi" and len(runs) == 1 and da.environment and db.environment
          and da.environment != db.environment):  # two environments of pixi locks: variants in the same sense
        from envguard.diff.variantdiff import verdict

        result.variants = verdict({}, {}, result.platforms, names=(da.environment, db.environment),
                                  label="environments")
    va, vb = _variables(da, a), _variables(db, b)
    if va is not None and vb is not None:  # variables: (CEP 24) of a spec, an envguard lock, an environment
        from envguard.variables import changes

        result.spec_changes += changes(va, vb)
    return result


def _variables(d: Description, args: SideArgs) -> dict[str, str] | None:
    """The variables a side sets on activation: an environment file's ``variables:``, those a lock envguard
    wrote records, an environment's ``conda-meta/state``; None for a side that cannot say (a lock conda-lock
    wrote records none, whatever its spec said)."""
    import os

    from envguard import variables

    if d.kind == "environment" and os.path.isfile(args.spec):
        return variables.of_files([args.spec])
    if d.kind == "conda-lock":
        return variables.from_metadata(d.custom_metadata) if "envguard.cuda" in d.custom_metadata else None
    if d.kind == "prefix":
        where = next((p for p in (d.path, args.spec) if os.path.isdir(p)), None)
        return variables.state_variables(where) if where is not None else None
    return None
