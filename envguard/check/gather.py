"""The facts ``envguard check`` gathers before its rules judge them: which environment and lock, the prefix's
records, the lock's packages and its differences from the prefix, the spec's CUDA wish and the lock's
freshness, files, the driver and what ``envguard create`` recorded. Everything here reads (files, the lock, the
driver); nothing decides a finding: that is the rule families' (checks.py)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envguard.check.facts import DEFAULT_CORE, CheckInput
from envguard.check.options import CheckOptions
from envguard.errors import PlatformNotLocked, UserError
from envguard.leftovers import OLD_TAG, interruption
from envguard.model import Package
from envguard.prefix import PrefixInfo

if TYPE_CHECKING:
    from envguard.envs import Target


def half_built_reason(prefix: Path) -> str | None:
    """Why ``prefix`` looks like the remains of an interrupted create, or None.

    The staging/building/old names and their meaning are envguard.leftovers' (envguard.leftovers.interruption);
    on top of those, a prefix whose conda-meta holds no records although it holds files is half-built (a
    transaction interrupted before it wrote them). Raises BusyError while the creating process lives.
    """
    from envguard.errors import BusyError

    prefix = Path(os.path.abspath(prefix))
    found = interruption(prefix)
    if found is not None:
        if found.running:
            raise BusyError(f"{prefix}: {found.reason}; check it when it is done")
        return found.reason
    meta = prefix / "conda-meta"
    if meta.is_dir():
        try:
            names = os.listdir(meta)
        except OSError:
            return None
        has_records = any(n.endswith(".json") and not n.startswith("envguard-") for n in names)
        populated = any((prefix / d).exists() for d in ("bin", "lib", "Lib", "include", "share"))
        if not has_records and populated:
            return "conda-meta holds no package records but the prefix holds files (an interrupted install)"
    return None


def moved_aside(prefix: Path) -> bool:
    """Whether the environment missing at ``prefix`` was moved aside by an interrupted create (EG534)."""
    found = interruption(prefix)
    return found is not None and found.tag == OLD_TAG


def target_and_lock(o: CheckOptions, env: Mapping[str, str], cwd: Path) -> tuple[Target, Any]:
    """(the environment to check, envguard.envs.LockChoice: the lock that judges it and why). A lock that is
    not a lock (an environment file, a report) is refused before anything reads it."""
    from envguard.envs import lock_for, resolve_target
    from envguard.filekind import require_lock

    if o.lockfile is not None and not o.lock_kind_known:
        require_lock(Path(o.lockfile))  # an environment file or a report read as a lock would be a lock of nothing
    target = resolve_target(o.prefix, o.name, env=env, cwd=cwd, aside=moved_aside)
    choice = lock_for(target, o.lockfile, cwd=cwd, env=env)
    if choice.path is not None and o.lockfile is None:
        require_lock(choice.path)
    return target, choice


def given_lock(o: CheckOptions, lock_path: Path | None) -> tuple[str | None, str | None]:
    """(text, sha256 of the bytes) of ``lock_path`` as the caller read it: create hands over the lock it
    installed from, so that its check reads no other bytes and opens the file no more; (None, None) when the
    caller read none (then each lock fact reads the file itself)."""
    if o.lock_text is None or o.lockfile is None or lock_path is None \
            or os.path.realpath(o.lockfile) != os.path.realpath(lock_path):
        return None, None
    return o.lock_text, o.lock_sha256


def inspect(target: Path) -> PrefixInfo:
    """The prefix's records; a directory that is no environment at all is refused (exit 2)."""
    from envguard.platforms import python_in_prefix
    from envguard.prefix import inspect_prefix

    info = inspect_prefix(target)
    if not info.is_conda and not info.is_venv and not os.path.exists(python_in_prefix(target)) \
            and half_built_reason(target) is None:
        # smoke, export and diff refuse such a directory too: a clean report of it would be a false pass
        raise UserError("not an environment (no conda-meta/, pyvenv.cfg or Python interpreter)", file=str(target),
                        key="-p/-n", fix="pass the root directory of a conda environment or virtualenv")
    return info


def facts(o: CheckOptions, target: Path, info: PrefixInfo, choice: Any, platform: str, env: Mapping[str, str],
          cwd: Path) -> tuple[CheckInput, Any]:
    """(every fact the rules judge that needs no process in the environment, the driver's raw answer for the
    smoke probe). The probes' facts (import origins, the probe's torch) are added once they ran."""
    from envguard.check.facts import cuda_from_packages, gpu_facts, torch_build
    from envguard.prefix import verify_files
    from envguard.project import SPEC_NAMES, project_dir, spec_for_lock

    lock_path = choice.path
    lock_text = given_lock(o, lock_path)[0]
    installed = info.packages(platform)
    inp = CheckInput(info=info, platform=platform, lock_file=str(lock_path) if lock_path else None, env=env,
                     installed=installed,
                     core=tuple(o.core) if o.core else DEFAULT_CORE,
                     recorded_lock_problem=choice.problem,
                     recorded_lock=str(choice.recorded) if choice.recorded is not None else None,
                     recorded_lock_kept=choice.path is not None)
    if lock_path is not None:
        inp.lock_packages = _lock_facts(inp, lock_path, platform, lock_text)
        if inp.lock_packages is not None:
            from envguard.diff import diff_packages

            inp.lock_changes = diff_packages(inp.lock_packages, installed)

    wants, wants_src = cuda_from_packages(inp.lock_packages or [])
    spec_file = spec_for_lock(lock_path) if lock_path else project_dir(cwd) / SPEC_NAMES[0]
    if wants:
        wants_src = f"the lock ({wants_src})"
    elif spec_file.is_file():
        wants, wants_src = spec_wants_cuda(spec_file, platform)
    inp.wants_cuda, inp.wants_cuda_source = wants, wants_src
    if inp.lock_packages is not None and lock_path is not None and o.spec_freshness:
        inp.stale_lock, inp.stale_lock_fix, inp.lock_not_from_spec = stale_lock(lock_path, platform, target,
                                                                                 lock_text)

    inp.files_mode = "sha256" if o.deep else ("size" if o.files else "none")
    inp.file_problems = verify_files(info, deep=o.deep, workers=o.workers) if (o.files or o.deep) and info.is_conda \
        else []

    # The driver matters only to a CUDA build (or an env that should be one): skip the query otherwise.
    static_build = torch_build(info)
    inp.driver_checked = bool(wants) or (static_build.source != "none" and not static_build.cpu)
    driver_raw = (o.driver_info_fn or default_driver_info)() if inp.driver_checked else None
    inp.gpu = gpu_facts(driver_raw)
    inp.half_built = half_built_reason(target)
    if info.is_conda and inp.lock_changes is None:
        _fingerprint_facts(inp, target)
    return inp, driver_raw


def _lock_facts(inp: CheckInput, lockfile: Path, platform: str, text: str | None) -> list[Package] | None:
    """The lock's packages for ``platform`` (None: it has none); sets the facts EG513 and EG518 judge.
    ``text``: the lock's, when already read."""
    from envguard import lockwhole, sources

    try:
        desc = sources.load(str(lockfile), platform=platform, text=text)
    except PlatformNotLocked as e:
        inp.lock_not_for_platform, inp.lock_relock_fix = e.message, relock_for(lockfile, platform, text)
        return None
    # a lock that is not whole, on any platform (lint's EG159)
    holes = lockwhole.of_file(str(lockfile), desc, text=text)
    inp.lock_holes = lockwhole.summary(holes) if holes else None
    return desc.packages_for(platform)


def _fingerprint_facts(inp: CheckInput, target: Path) -> None:
    from envguard.fingerprint import read_fingerprint

    fp = read_fingerprint(target)
    if fp is not None:
        inp.fingerprint_conda, inp.fingerprint_pip = dict(fp.conda), list(fp.pip)
        inp.fingerprint_lockfile = fp.lockfile if fp.lockfile and os.path.isfile(fp.lockfile) else None


def stale_lock(lock_path: Path, platform: str, target: Path, text: str | None = None) -> tuple[str | None, str, bool]:
    """(why the lock is stale for the environment file(s) it was made from, the fix, whether the lock does not
    come from them at all), or (None, "", False) when it is fresh or its spec is not here. The verdict is
    `envguard lock --check`'s, for this platform only. An environment built from this lock with --frozen
    (create checked it against no spec: a colleague's lock) is not called stale: nothing says the lock was
    ever made from the environment file beside it. ``text``: the lock's, when already read."""
    from envguard.errors import EnvguardError
    from envguard.lock import check_fresh, read_lock
    from envguard.project import lock_for_spec, lock_sources

    try:
        sources = lock_sources(lock_path, read_lock(lock_path, text=text).sources)
    except EnvguardError:
        return None, "", False  # a lock this broken gives its own findings
    if not all(s.is_file() for s in sources):
        return None, "", False
    try:
        fresh = check_fresh(sources, lock_path, platforms=[platform], lock_text=text)
    except EnvguardError:
        return None, "", False  # a spec that cannot be read: lint says why, with line and column
    if fresh.fresh or fresh.missing:
        return None, "", False
    import shlex

    from envguard.check.fixes import create_command
    from envguard.lock import relock_command

    relock = relock_command(sources, lock_path)  # for the platforms it covers, not this machine's alone
    own_spec = shlex.join(["envguard", "create", "-p", str(target), *[a for s in sources for a in ("-f", str(s))]])
    if built_frozen_from(target, lock_path):
        spec = " and ".join(str(s) for s in sources)
        return (f"{lock_path} does not come from {spec} (its content hash for {platform} is another spec's): the "
                "environment was built from it with --frozen, as written, without reading the environment file",
                f"keep that lock beside the environment file it was made from; to build this project's spec "
                f"instead: `{own_spec}`", True)

    if os.path.abspath(lock_for_spec(sources[0])) == os.path.abspath(lock_path):
        # the spec's own default lock: create re-locks it when it is read through -f (never a --lockfile one)
        fix = f"`{own_spec}` re-locks it, then rebuilds the environment; or only re-lock: `{relock}`"
    else:
        fix = (f"re-lock it on purpose with `{relock}`, then rebuild the environment with "
               f"`{create_command(target, str(lock_path))}`")
    return fresh.reason, fix, False


def built_frozen_from(target: Path, lock_path: Path) -> bool:
    """Whether `envguard create --frozen` built ``target`` from ``lock_path``: its last block in
    conda-meta/history names that lock and records no spec (create recorded none, having read none)."""
    from envguard.history import read_built

    built = read_built(target)
    return (built is not None and built.conda_specs is None and built.lockfile is not None
            and os.path.realpath(built.lockfile) == os.path.realpath(lock_path))


def relock_for(lockfile: Path, platform: str, text: str | None = None) -> str:
    """The fix of a lock without this platform: re-lock its environment file(s) for its platforms and this one
    (an environment file's own `platforms:` then needs it too). ``text``: the lock's, when already read."""
    from envguard.errors import EnvguardError
    from envguard.lock import fix_command, read_lock

    try:
        lock = read_lock(lockfile, text=text)
    except EnvguardError:
        import shlex

        relock = shlex.join(["envguard", "lock", "--platform", platform, "--lockfile", str(lockfile)])
        return f"re-lock for {platform}: `{relock}`"
    from envguard.project import lock_sources

    sources = lock_sources(lockfile, lock.sources)
    cmd = fix_command(sources, lockfile, [*[p for p in lock.platforms if p != platform], platform])
    return f"re-lock for {platform} as well (and add it to `platforms:` of the environment file if it has one): `{cmd}`"


def spec_wants_cuda(spec_file: Path, platform: str) -> tuple[str | None, str]:
    from envguard.check.facts import cuda_from_spec
    from envguard.errors import EnvguardError
    from envguard.lock import read_spec

    try:
        spec = read_spec([spec_file], [platform])
    except EnvguardError:
        return None, ""  # lint reports a broken spec; check judges the installed env
    conda, pip = spec.dependencies_for(platform)
    return cuda_from_spec(conda, pip, str(spec_file))


def library_path_libs(env: Mapping[str, str], prefix: Path) -> list[tuple[str, list[str]]]:
    """(directory on LD_LIBRARY_PATH outside the prefix, the libcudnn*/libnccl* it holds) for EG560."""
    out: list[tuple[str, list[str]]] = []
    inside = str(prefix).rstrip("/") + "/"
    for d in (env.get("LD_LIBRARY_PATH") or "").split(os.pathsep):
        if not d or (d.rstrip("/") + "/").startswith(inside):
            continue
        try:
            names = os.listdir(d)
        except OSError:
            continue
        libs = sorted({n.split(".so")[0] for n in names if n.startswith(("libcudnn", "libnccl")) and ".so" in n})
        if libs:
            out.append((d, libs))
    return out


def default_driver_info() -> Any:
    from envguard.driver import get_driver_info  # lazily: only a CUDA build needs the driver

    return get_driver_info()


def hostname() -> str:
    """The machine's name, as gethostname(2) gives it (the kernel's nodename): fleet's node name."""
    if hasattr(os, "uname"):
        return os.uname().nodename  # the same answer as socket.gethostname(), without importing socket
    import socket  # Windows: no uname

    return socket.gethostname()


def sha256_of(path: Path) -> str | None:
    import hashlib

    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None
