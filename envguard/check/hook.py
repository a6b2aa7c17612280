"""When the `envguard-check` git hook has something to check: only when a checkout or merge changed the
environment file or the lock.

pre-commit runs post-checkout and post-merge hooks without file names, so the hook cannot be filtered by
``files:``; it tells the refs instead (``PRE_COMMIT_FROM_REF``/``PRE_COMMIT_TO_REF`` after a checkout,
``PRE_COMMIT_IS_SQUASH_MERGE`` after a merge). A file checkout (``git checkout -- environment.yml``) has equal
refs: nothing changed between commits, nothing to check. Runs git; read-only.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path


def changed_refs(env: Mapping[str, str]) -> tuple[str, str] | None:
    """The (old, new) commits of the checkout or merge that started this hook; None when not in such a hook."""
    old, new = env.get("PRE_COMMIT_FROM_REF"), env.get("PRE_COMMIT_TO_REF")
    if old and new:
        return old, new
    if env.get("PRE_COMMIT_IS_SQUASH_MERGE") is not None:  # post-merge: HEAD moved from ORIG_HEAD
        return "ORIG_HEAD", "HEAD"
    return None


def watched_changed(paths: Sequence[Path], env: Mapping[str, str] | None = None,
                    cwd: Path | None = None) -> tuple[bool, str]:
    """(whether any of ``paths`` changed in this checkout or merge, why). Outside a hook, or when git cannot
    tell (a first checkout has no old commit), the answer is yes: better one check too many than none."""
    env = os.environ if env is None else env
    refs = changed_refs(env)
    if refs is None:
        return True, "not run by a checkout or merge hook"
    old, new = refs
    if env.get("PRE_COMMIT_IS_SQUASH_MERGE") == "1":  # a squash merge leaves its changes uncommitted
        cmd = ["git", "diff", "--name-only", "HEAD", "--"]
    elif old == new:
        return False, "the checkout moved no commit (a new branch, or a file checkout)"
    else:
        cmd = ["git", "diff", "--name-only", old, new, "--"]
    try:
        proc = subprocess.run(cmd + [os.fspath(p) for p in paths], cwd=cwd, capture_output=True, text=True,
                              timeout=60, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return True, "git could not tell"
    if proc.returncode != 0:
        return True, "git could not tell"
    names = [n for n in proc.stdout.splitlines() if n.strip()]
    if names:
        return True, f"{', '.join(names)} changed"
    return False, f"{' and '.join(p.name for p in paths)} unchanged"


def watched_files(lockfile: Path | None, prefix: Path | None = None, name: str | None = None) -> list[Path]:
    """What ``check --if-changed`` watches, relative to the root a hook runs at: the lock (``--lockfile``, else
    the one beside environment.yml) and the environment file. In a project with variants (docs/variants.md) the
    lock and overlay of the variant the environment was built from (its fingerprint records it); when that is not
    known, every variant's: better one check too many than none."""
    from envguard.errors import EnvguardError
    from envguard.project import lock_for_spec, spec_for_lock
    from envguard.variants import declared_variants, variants_dir

    spec = Path("environment.yml")
    if lockfile is not None:
        return [Path(lockfile), spec_for_lock(Path(lockfile))]
    try:
        declared = declared_variants(spec)
    except EnvguardError:  # a file in variants/ that is no overlay: any change there is worth a check
        return [lock_for_spec(spec), spec, variants_dir(spec)]
    if not declared:
        return [lock_for_spec(spec), spec]
    built = _built_variant(prefix, name)
    chosen = [v for v in declared if v.name == built] or declared
    return [spec] + [p for v in chosen for p in (v.overlay, v.lockfile)]


def _built_variant(prefix: Path | None, name: str | None) -> str | None:
    """The variant the environment ``check`` would check was built from; None when there is none or no record."""
    from envguard.envs import resolve_target
    from envguard.errors import EnvguardError
    from envguard.fingerprint import read_fingerprint

    try:
        fp = read_fingerprint(resolve_target(prefix, name))
    except (EnvguardError, OSError):
        return None
    return fp.variant if fp is not None else None
