"""The commands about files: init and lint (an environment file), lock (a file into a lock), why (a package
of a lock, traced to the spec) and diff (any two descriptions). Registered on the app, in the order --help
lists them, by envguard/cli/__init__.py."""

import sys
from pathlib import Path
from typing import Annotated

import typer

from envguard import render, settings
from envguard.cli.app import (
    check_format,
    env_files_option,
    fail,
    flag,
    format_option,
    lockfile_option,
    misused_prefix_option,
    name_option,
    no_prefix_here,
    option,
    platforms_option,
)
from envguard.errors import ExitCode
from envguard.render import warn

# ---------------------------------------------------------------- lock


def _say_channel_config() -> None:
    """One line on stderr naming the conda/pixi channel configuration a solve follows, when there is any."""
    from envguard import condaconfig
    from envguard.redact import redact

    used = condaconfig.load().used
    if used:
        render.err.print(f"channel configuration: {redact(', '.join(used))}", markup=False, highlight=False)


def lock_cmd(
    files: Annotated[list[Path] | None, env_files_option(
        help="Environment file, repeatable (default: environment.yml).")] = None,
    platforms: Annotated[list[str] | None, platforms_option(
        help="Platform to lock, repeatable (default: the file's platforms:, else linux-64, osx-arm64, "
             "win-64).")] = None,
    misused_p: Annotated[str | None, misused_prefix_option()] = None,
    cuda: Annotated[str | None, option("--cuda", metavar="X.Y",
        help="Assume this CUDA driver version (__cuda) when solving. Default: the spec's CUDA line (cuda-version, a "
             "cudaXY build), none for a CPU build guard, else the lock's, else conda-lock's default.")] = None,
    no_cuda: Annotated[bool, flag("--no-cuda", help="Assume no CUDA driver (no __cuda).")] = False,
    lockfile: Annotated[Path | None, lockfile_option(
        help="Lock file (default: conda-lock.yml beside the first file).")] = None,
    check: Annotated[bool, flag("--check",
        help="Only test freshness: exit 0 if fresh, 4 if stale or missing. Read-only.")] = False,
    update: Annotated[list[str] | None, option("--update", metavar="NAME",
        help="Move this package (conda or pip; repeatable, or comma-separated) to the newest the spec allows. "
             "Everything else keeps its locked version unless the spec forces a move.")] = None,
    update_all: Annotated[bool, flag("--update-all",
        help="Re-solve everything from scratch, ignoring the existing lock's versions.")] = False,
    fmt: Annotated[str, format_option(
        help="text, or json (the change report, schema envguard.lock-changes/1).")] = "text",
    offline: Annotated[bool, flag("--offline",
        help="No network: cached repodata and local channels only.")] = False,
) -> None:
    """Solve environment.yml for several platforms into a conda-lock.yml (no conda needed)."""
    import re

    from envguard.errors import UserError

    no_prefix_here("lock", misused_p)
    settings.set_offline(offline)
    _say_channel_config()
    if cuda is not None and no_cuda:
        raise UserError("--cuda and --no-cuda exclude each other", key="--cuda", fix="pass only one of them")
    if cuda is not None and not re.fullmatch(r"\d+(\.\d+){0,2}", cuda):
        raise UserError(f"invalid CUDA version {cuda!r}", key="--cuda", fix="pass a version such as 12.4")
    cuda_opt: str | bool | None = False if no_cuda else cuda
    if fmt not in ("text", "json"):
        raise UserError(f"unknown format {fmt!r}", key="--format", fix="use text or json")
    names = [n.strip() for item in update or [] for n in item.split(",") if n.strip()]
    if check and (names or update_all):
        raise UserError("--check is read-only and moves nothing", key="--update" if names else "--update-all",
                        fix="run `envguard lock --check` alone, or the update without --check")
    from envguard.filekind import require_lock, require_spec

    for f in files or ():
        require_spec(f)
    if check and lockfile is not None and lockfile.exists():  # never judge an environment file as a lock
        require_lock(lockfile, accept={"conda-lock"}, unknown_ok=True)
    # (what a lock may be written over, --lockfile or the default, envguard.lock.lock decides before its solve)
    if not files and lockfile is None:  # a project with variants/*.yml: every variant, together (#37)
        from envguard.lock import default_files
        from envguard.variants import declared_variants

        spec = default_files(None)[0]
        if declared_variants(spec):
            if cuda_opt is not None:
                raise UserError("each variant names its own CUDA line (variants/*.yml); --cuda/--no-cuda would "
                                "override them all", key="--cuda" if cuda is not None else "--no-cuda",
                                fix="drop it, or lock one variant alone: envguard lock -f environment.yml -f "
                                    "variants/NAME.yml --lockfile conda-lock.NAME.yml --cuda X.Y")
            from envguard.lock.render import lock_variants_cmd

            lock_variants_cmd(spec, platforms or None, check=check, update=names, update_all=update_all, fmt=fmt)
            return
    if check:
        from envguard.lock import check_fresh, check_whole, default_files
        from envguard.project import lock_for_spec

        fresh = check_fresh(files or None, lockfile, platforms=platforms or None, cuda=cuda_opt)
        # fresh or stale, a lock that is not whole is an integrity failure (exit 3): the hash covers the spec only
        check_whole(lock_for_spec(default_files(files or None)[0], lockfile), fresh=fresh.fresh)
        if fresh.fresh:
            render.out.print(fresh.message, markup=False)
            raise typer.Exit(int(ExitCode.OK))
        raise fail(fresh.message, ExitCode.STALE)

    from envguard.lock import lock
    from envguard.lock.render import lock_with_progress, show

    show(lock_with_progress(lock, files or None, platforms or None, cuda_opt, lockfile, update=names,
                            update_all=update_all), fmt)

# ---------------------------------------------------------------- why


def why_cmd(
    name: Annotated[str, typer.Argument(metavar="NAME",
        help="A locked package, conda or pip (pytorch, cudatoolkit...).")],
    files: Annotated[list[Path] | None, env_files_option(
        help="Environment file whose lines start the paths (default: the lock's own sources).")] = None,
    lockfile: Annotated[Path | None, lockfile_option(
        help="Lock to read (default: conda-lock.yml beside the first file).")] = None,
    platforms: Annotated[list[str] | None, platforms_option(
        help="Platform to answer for, repeatable (default: every locked one).")] = None,
    misused_p: Annotated[str | None, misused_prefix_option()] = None,
    fmt: Annotated[str, format_option(help="text, or json (schema envguard.why/1).")] = "text",
) -> None:
    """Why a package is in the lock: the path from each spec line to it, per platform (no solve)."""
    from envguard.errors import UserError

    no_prefix_here("why", misused_p)
    if fmt not in ("text", "json"):
        raise UserError(f"unknown format {fmt!r}", key="--format", fix="use text or json")
    from envguard.lock import why_locked
    from envguard.lock.render import show_why

    show_why(why_locked(name, lockfile=lockfile, files=files or None, platforms=platforms or None), fmt)

# ---------------------------------------------------------------- diff


def diff_cmd(
    a: Annotated[str | None, typer.Argument(metavar="A",
        help="environment.yml, pixi.toml, conda-lock.yml, explicit file, export, pixi.lock, check report, prefix "
             "directory or name:NAME.")] = None,
    b: Annotated[str | None, typer.Argument(metavar="B", help="The other side, in any of the same forms.")] = None,
    name: Annotated[list[str] | None, name_option(
        help="A named environment; fills side B (or A and B when given twice). With one side only, B is the "
             "environment `envguard check` would check here.")] = None,
    platform: Annotated[str | None, option("--platform",
        help="Platform to compare (default: this host's when both sides have it, else the only common one).")] = None,
    all_platforms: Annotated[bool, flag("--all-platforms", help="Compare every platform both sides have.")] = False,
    a_platform: Annotated[str | None, option("--a-platform",
        help="Platform of side A (overrides --platform).")] = None,
    b_platform: Annotated[str | None, option("--b-platform",
        help="Platform of side B (overrides --platform).")] = None,
    kind: Annotated[str | None, option("--kind",
        help="Kind of both sides instead of detecting it: environment, pixi-manifest, conda-lock, explicit, export, "
             "pixi, prefix, report.")] = None,
    a_kind: Annotated[str | None, option("--a-kind", help="Kind of side A only.")] = None,
    b_kind: Annotated[str | None, option("--b-kind", help="Kind of side B only.")] = None,
    environment: Annotated[str | None, option("--environment", "-e",
        help="pixi environment (both sides; default: every one a manifest and its pixi.lock share).")] = None,
    a_environment: Annotated[str | None, option("--a-environment",
        help="pixi.lock environment of side A.")] = None,
    b_environment: Annotated[str | None, option("--b-environment",
        help="pixi.lock environment of side B.")] = None,
    fmt: Annotated[str, format_option(help="text, markdown (for a pull-request comment) or json.")] = "text",
    exit_zero: Annotated[bool, flag("--exit-zero", help="Exit 0 even when the sides differ.")] = False,
) -> None:
    """Compare two environment descriptions: what changed, and which changes matter. With no side: the
    environment here against the lock that belongs to it (the project's, found upward)."""
    from envguard.diff import SideArgs, compare
    from envguard.diff.render import show
    from envguard.errors import UserError
    from envguard.sources import NAME_PREFIX

    check_format(fmt, fix="use text, markdown or json")
    if platform and all_platforms:
        raise UserError("--platform and --all-platforms exclude each other", key="--platform",
                        fix="give one of them")
    sides = [s for s in (a, b) if s] + [NAME_PREFIX + n for n in (name or [])]
    chosen = ""
    if not sides:  # the environment every command would act on here, against the lock that belongs to it
        sides, chosen = _project_sides()
        a_kind, b_kind = a_kind or kind, b_kind or "prefix"
    elif len(sides) == 1:  # the other side is the environment every command would act on here
        from envguard.envs import resolve_target

        target = resolve_target(None, None)
        sides.append(str(target))
        chosen = f"B is {target.why}"
        b_kind = b_kind or "prefix"
    if len(sides) != 2:
        raise UserError(f"need two sides to compare, got {len(sides)}", key="A B",
                        fix="envguard diff OLD NEW (a file, a prefix directory, name:NAME or -n NAME)")
    result = compare(
        SideArgs(sides[0], a_kind or kind, a_platform, a_environment or environment),
        SideArgs(sides[1], b_kind or kind, b_platform, b_environment or environment),
        platform=platform, all_platforms=all_platforms,
    )
    if chosen:
        result.notes.insert(0, chosen)
    result.exit_code = 0 if result.equal or exit_zero else int(ExitCode.PROBLEMS)
    show(result, fmt)
    raise typer.Exit(result.exit_code)

def _project_sides() -> tuple[list[str], str]:
    """``envguard diff`` alone: A is the lock that belongs to the environment (the project's, found upward
    from here as git finds its repository: envguard.project; or the one given to check), B that environment."""
    import os

    from envguard.envs import lock_for, resolve_target
    from envguard.errors import UserError
    from envguard.project import lock_for_spec, spec_file

    target = resolve_target(None, None)
    lock, why = lock_for(target, None)
    if lock is None:
        spec = spec_file()
        where = (f"{os.path.relpath(lock_for_spec(spec))} does not exist" if spec.is_file() else
                 "no environment.yml here or above (up to the repository root)")
        from envguard.variants import machine_variant, overlay_files

        mine = machine_variant(spec) if spec.is_file() else None
        if mine is not None:  # a project with variants: the lock of the variant this machine runs
            where = f"{os.path.relpath(mine[0].lockfile)} (variant {mine[0].name}, this machine's) does not exist"
        elif spec.is_file() and overlay_files(spec):
            where = f"no declared variant of {os.path.relpath(spec)} runs on this machine"
        raise UserError(f"no lock to compare {target} with: {where}, and no lock belongs to that environment",
                        key="A B", fix="name both sides: envguard diff LOCK PREFIX (or run `envguard lock` first)")
    shown = os.path.relpath(lock) if Path(os.path.abspath(lock)).is_relative_to(Path.cwd().parent) else str(lock)
    return [str(lock), str(target)], f"A is {shown} ({why}); B is {target} ({target.why})"


# ---------------------------------------------------------------- init, lint


def init_cmd(
    python: Annotated[str | None, option("--python", metavar="X.Y",
        help="Python release: 3.11 (default) or 3.10 (legacy).")] = None,
    torch: Annotated[str | None, option("--torch", metavar="X.Y",
        help="PyTorch release (default: the newest released one in the data for the channel).")] = None,
    cuda: Annotated[list[str] | None, option("--cuda", metavar="X.Y|X|cpu",
        help="CUDA line such as 12.9 or 13.0, a major line such as 12 (the newest every platform's build accepts), "
             "or cpu (default: cpu). Repeat it for a project with variants (docs/variants.md): environment.yml "
             "is the first one's, variants/<name>.yml each one's.")] = None,
    channel: Annotated[str | None, option("--channel",
        help="conda-forge (default) or pytorch (legacy, torch <= 2.5).")] = None,
    platforms: Annotated[list[str] | None, platforms_option(
        help="Platform to lock, repeatable (default: linux-64, osx-arm64, win-64; CUDA: linux-64, win-64).")] = None,
    misused_p: Annotated[str | None, misused_prefix_option()] = None,
    name: Annotated[str | None, option("--name", help="Environment name (default: the directory's name).")] = None,
    force: Annotated[bool, flag("--force", help="Overwrite an existing file.")] = False,
    output: Annotated[Path, option("--output", "-o", metavar="FILE",
        help="File to write; - prints it instead (nothing is written).")] = Path("environment.yml"),
) -> None:
    """Write an environment.yml for PyTorch from templates; refuses combinations that do not exist."""
    from envguard.init import init

    no_prefix_here("init", misused_p)
    if cuda and len(cuda) > 1:
        from envguard.init import init_variants

        made = init_variants(cuda, python=python, torch=torch, channel=channel, platforms=platforms or None,
                             name=name, output=output, force=force)
        for w in dict.fromkeys(w for _n, _p, r in made.variants for w in r.warnings):
            warn(w)
        s = made.spec
        render.out.print(f"wrote {s.path}: the {made.variants[0][0]} variant (the default), Python {s.python}, "
                         f"torch {s.torch} from {s.channel}", markup=False)
        for n, path, r in made.variants:
            build = "CPU" if r.cuda == "cpu" else f"CUDA {r.cuda}"
            render.out.print(f"wrote {path}: variant {n} ({build}) for {', '.join(r.platforms)}", markup=False)
        if s.evidence:
            render.out.print(s.evidence, markup=False)
        if s.stale:
            warn(s.stale)
        render.out.print("next: envguard lock (every variant, together: docs/variants.md)", markup=False)
        return
    result = init(python=python, torch=torch, cuda=cuda[0] if cuda else None, channel=channel,
                  platforms=platforms or None, name=name, output=output, force=force)
    for w in result.warnings:
        warn(w)
    build = "CPU" if result.cuda == "cpu" else f"CUDA {result.cuda}"
    what = (f"Python {result.python}, torch {result.torch} ({build}) from {result.channel} for "
            f"{', '.join(result.platforms)}")
    if result.path is None:  # -o -: the file on stdout, the summary where it does not mix with it
        sys.stdout.write(result.text)
        render.err.print(f"printed: {what}; save it with -o environment.yml", markup=False)
        if result.evidence:
            render.err.print(result.evidence, markup=False)
        if result.stale:
            warn(result.stale)
        return
    render.out.print(f"wrote {result.path}: {what}", markup=False)
    if result.evidence:  # "checked against conda-forge records (URL)" or "from envguard's table of <date>"
        render.out.print(result.evidence, markup=False)
    if result.stale:
        warn(result.stale)
    render.out.print("next: envguard lock", markup=False)


def lint_cmd(
    files: Annotated[list[Path] | None, typer.Argument(metavar="FILE",
        help="Environment files, pixi manifests or lock files (default: environment.yml and conda-lock.yml "
             "here).")] = None,
    fmt: Annotated[str, format_option()] = "text",
) -> None:
    """Check environment files and lock files for known-bad PyTorch setups (exit 1 on errors)."""
    from envguard.findings import has_errors
    from envguard.lint import default_targets, lint_paths
    from envguard.lint.render import show

    check_format(fmt)
    targets = list(files) if files else default_targets(Path("."))
    result = lint_paths(targets)
    show(result, fmt)
    if result.unreadable:
        raise typer.Exit(int(ExitCode.USAGE))
    raise typer.Exit(int(ExitCode.PROBLEMS) if has_errors(result.findings) else int(ExitCode.OK))

