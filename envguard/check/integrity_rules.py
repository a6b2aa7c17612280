"""Rules on the prefix against its own records, its lock and what create recorded: half-built or moved-aside
prefixes and unreadable records (EG533, EG534), changed files (EG530-EG532, EG535-EG539), lock differences
(EG510-EG514), a lock without this platform or not whole (EG513, EG518), changes since create (EG515), a stale
lock (EG516), the lock create built from changed or gone (EG517)."""

from __future__ import annotations

import shlex
from pathlib import Path

from envguard.check.facts import CheckInput
from envguard.check.fixes import E, I, W, create_command
from envguard.findings import Finding
from envguard.model import Package
from envguard.prefix import FileProblem
from envguard.redact import shorten

# Codes whose findings mean the prefix no longer matches its own records, or the lock is not whole (EG518,
# envguard.lockwhole): exit code 3 instead of 1 (README, exit codes).
INTEGRITY_CODES = frozenset({"EG514", "EG518", "EG530", "EG531", "EG532", "EG533", "EG534", "EG535", "EG536", "EG537",
                             "EG538", "EG539"})
MAX_FILES_PER_FINDING = 5


def rule_integrity(inp: CheckInput) -> list[Finding]:
    out: list[Finding] = []
    if inp.half_built:
        out.append(Finding("EG534", E, f"the prefix is half-built: {inp.half_built}",
                           f"run `{create_command(inp.info.prefix, inp.lock_file)}` again: it removes what an "
                           "interrupted run left and rebuilds from the lock",
                           file=str(inp.info.prefix)))
    for name, why in inp.info.bad_records:
        out.append(Finding("EG533", E, f"unreadable conda-meta record: {why}",
                           f"rebuild the environment: `{create_command(inp.info.prefix, inp.lock_file)}`; the "
                           "record cannot be trusted", file=f"conda-meta/{name}"))
    return out


def moved_aside(target: Path, lock_file: str | None, reason: str) -> Finding:
    """EG534 for an environment missing at ``target``: an interrupted `create --force` moved it aside."""
    return Finding("EG534", E, f"no environment at {target}: {reason}",
                   f"run `{create_command(target, lock_file)}` again: it puts the previous environment back",
                   file=str(target))


def rule_files(inp: CheckInput) -> list[Finding]:
    if not inp.file_problems:
        return []
    code = {"missing": "EG530", "size": "EG531", "sha256": "EG532", "unreadable": "EG535", "outside": "EG536",
            "type": "EG537", "target": "EG538", "mode": "EG539"}
    what = {"missing": "missing", "size": "changed size", "sha256": "changed content (sha256)",
            "unreadable": "unreadable", "outside": "outside the prefix (a path leaving it, or a symlink out)",
            "type": "changed type (a symlink where a file belongs, or the reverse)",
            "target": "re-pointed (a symlink with another target than it was installed with)",
            "mode": "with a setuid, setgid or sticky bit, which no conda package installs"}
    grouped: dict[tuple[str, str], list[FileProblem]] = {}
    for p in inp.file_problems:
        grouped.setdefault((p.package, p.problem), []).append(p)
    out: list[Finding] = []
    for (pkg, problem), items in sorted(grouped.items()):
        if problem in {"type", "target", "mode"}:
            shown = ", ".join(f"{shorten(p.path, 120)} ({p.actual})" for p in items[:MAX_FILES_PER_FINDING])
            fix = (f"{pkg}'s files were edited in place (in the environment, or in the package cache it is "
                   "hard-linked to); rebuild the environment from the lock "
                   f"(`{create_command(inp.info.prefix, inp.lock_file, force=True)}`): create extracts a cache "
                   "entry that differs from its verified archive again")
        elif problem == "outside":
            shown = ", ".join(f"{shorten(p.path, 120)} ({p.actual})" for p in items[:MAX_FILES_PER_FINDING])
            fix = (f"{pkg} puts or points files outside the environment: remove it, or rebuild the environment "
                   f"with `{create_command(inp.info.prefix, inp.lock_file)}`, which refuses such packages unless "
                   "ENVGUARD_SYMLINK_ALLOW names a trusted symlink")
        else:
            shown = ", ".join(shorten(p.path, 120) for p in items[:MAX_FILES_PER_FINDING])
            force = problem == "sha256"  # the size is the same: a sync, which compares sizes, would keep it
            fix = (f"another installer (often pip) or a manual edit changed {pkg}'s files; rebuild the environment "
                   f"from the lock (`{create_command(inp.info.prefix, inp.lock_file, force=force)}`) and install "
                   "leaves with `pip install --no-deps`")
        more = f" and {len(items) - MAX_FILES_PER_FINDING} more" if len(items) > MAX_FILES_PER_FINDING else ""
        n = len(items)
        out.append(Finding(
            code[problem], E,
            f"{n} file{'s' * (n != 1)} of conda package {pkg} {what[problem]}: {shown}{more}", fix,
            file=items[0].path, package=pkg))
    return out


def rule_lock(inp: CheckInput) -> list[Finding]:
    """Lock (old) against installed (new), classified by envguard.diff.diff_packages."""
    if inp.lock_changes is None:
        return []
    out: list[Finding] = []
    fix_sync = f"rebuild the environment from the lock: `{create_command(inp.info.prefix, inp.lock_file)}`"
    changes = list(inp.lock_changes)
    if not inp.info.is_conda:  # a virtualenv or plain directory can hold none of the lock's conda packages
        missing: list[Package] = [
            ch.old for ch in changes if "removed" in (getattr(ch, "kinds", ()) or ())
            and getattr(ch, "old", None) is not None and ch.old.manager == "conda"]
        if missing:
            kind = "a virtualenv" if inp.info.is_venv else "not a conda environment"
            prefix = Path(inp.info.prefix)
            # create does not replace a directory that is not a conda environment: a new prefix beside it
            fix_sync = ("create the environment from the lock at a new prefix: "
                        f"`{create_command(prefix.with_name(prefix.name + '-conda'), inp.lock_file)}`")
            names = ", ".join(p.name for p in missing[:5]) + (", ..." if len(missing) > 5 else "")
            several = len(missing) != 1
            out.append(Finding(
                "EG510", E, f"the lock's {len(missing)} conda package{'s' * several} ({names}) "
                f"{'are' if several else 'is'} not installed: {prefix} is {kind} (no conda-meta), which cannot "
                "hold them", fix_sync, file=inp.lock_file))
            changes = [ch for ch in changes if getattr(ch, "old", None) not in missing]
    for ch in changes:
        kinds = tuple(getattr(ch, "kinds", ()) or ())
        old, new = getattr(ch, "old", None), getattr(ch, "new", None)
        detail = str(getattr(ch, "detail", "") or "")
        if "removed" in kinds and old is not None:
            out.append(Finding("EG510", E, f"{old.manager} package {old.name} {old.version} is in the lock but "
                               "not installed", fix_sync, file=inp.lock_file, package=old.name))
        elif "added" in kinds and new is not None:
            out.append(Finding("EG511", W, f"{new.manager} package {new.name} {new.version} is installed but "
                               "not in the lock", f"add it to the spec and relock, or remove it; {fix_sync}",
                               file=inp.lock_file, package=new.name))
        elif old is not None and new is not None:
            code = "EG514" if "hash-changed" in kinds else "EG512"
            out.append(Finding(code, E, f"{_desc(old)} in the lock, {_desc(new)} installed "
                               f"({', '.join(kinds)}{': ' + detail if detail else ''})",
                               fix_sync, file=inp.lock_file, package=new.name))
    return out


def rule_lock_file(inp: CheckInput) -> list[Finding]:
    """The lock itself: no records for this platform (EG513), or not whole (EG518, lint's EG159, exit 3)."""
    if inp.lock_not_for_platform:
        return [Finding("EG513", E, inp.lock_not_for_platform, inp.lock_relock_fix, file=inp.lock_file)]
    if inp.lock_holes:
        from envguard import lockwhole

        return [Finding("EG518", E, f"the lock is not whole: {inp.lock_holes}", lockwhole.FIX, file=inp.lock_file)]
    return []


def rule_recorded_lock(inp: CheckInput) -> list[Finding]:
    """EG517: the lock envguard built the environment from changed since (info: it still judges the
    environment, as it is now) or is gone (warning: the fingerprint alone judges it; no other lock does)."""
    if not inp.recorded_lock_problem:
        return []
    if inp.recorded_lock_kept:
        return [Finding("EG517", I, inp.recorded_lock_problem,
                        f"`{create_command(inp.info.prefix, inp.recorded_lock)}` rebuilds it from that lock where it "
                        "differs and records the lock as it is now", file=inp.recorded_lock)]
    return [Finding("EG517", W, inp.recorded_lock_problem,
                    "restore that lock, or name the lock to judge the environment by with --lockfile (and "
                    "rebuild it from that one with envguard create and the same --lockfile)",
                    file=inp.recorded_lock)]


def _desc(p: Package) -> str:
    return " ".join(x for x in (p.manager, p.name, p.version, p.build or "") if x)


def rule_fingerprint(inp: CheckInput) -> list[Finding]:
    """Without a lock, compare with what `envguard create` recorded when it built the prefix."""
    if inp.fingerprint_conda is None or inp.lock_changes is not None:
        return []
    recs = {r.name: r for r in inp.info.conda}
    problems: list[str] = []
    for name, digest in sorted(inp.fingerprint_conda.items()):
        r = recs.get(name)
        if r is None:
            problems.append(f"{name} missing")
        elif digest.startswith("md5:"):
            if r.md5 and r.md5 != digest[4:]:
                problems.append(f"{name} replaced")
        elif r.sha256 and r.sha256 != digest:
            problems.append(f"{name} replaced")
    problems += [f"{n} added" for n in sorted(set(recs) - set(inp.fingerprint_conda))]
    pip_now = {d.key for d in inp.info.dists if d.owner != "conda"}
    want_pip = set(inp.fingerprint_pip or ())
    problems += [f"pip {n} missing" for n in sorted(want_pip - pip_now)]
    problems += [f"pip {n} added" for n in sorted(pip_now - want_pip)]
    if not problems:
        return []
    shown = ", ".join(problems[:8]) + (f" and {len(problems) - 8} more" if len(problems) > 8 else "")
    sev = W if all(p.endswith(" added") for p in problems) else E
    if inp.fingerprint_lockfile:
        fix = (f"compare with its lock (`envguard check -p {shlex.quote(str(inp.info.prefix))} --lockfile "
               f"{shlex.quote(inp.fingerprint_lockfile)}`) and rebuild it "
               f"(`{create_command(inp.info.prefix, inp.fingerprint_lockfile)}`)")
    else:
        fix = "rebuild it from its lock: envguard create with -p and --lockfile naming that lock"
    return [Finding("EG515", sev, f"the environment changed since `envguard create` built it: {shown}", fix,
                    file=f"{inp.info.prefix}/conda-meta/envguard-fingerprint.json")]


def rule_stale_lock(inp: CheckInput) -> list[Finding]:
    """The lock no longer says what the environment file asks for: the environment matches a stale lock; or,
    for an environment built from it with --frozen, the lock is another spec's (not called stale)."""
    if not inp.stale_lock:
        return []
    if inp.lock_not_from_spec:  # a colleague's lock, built with --frozen: it never came from this file
        return [Finding("EG516", E, inp.stale_lock, inp.stale_lock_fix, file=inp.lock_file)]
    return [Finding("EG516", E, f"{inp.stale_lock}: the environment may match its lock, but the lock no longer "
                    "matches the environment file", inp.stale_lock_fix, file=inp.lock_file)]
