"""The command line: every command and its options.

Each command parses its arguments, calls a plain function that returns a
result, renders that result and maps it onto an exit code. Errors derived from
:class:`envguard.errors.EnvguardError` become one line on stderr; anything
else is a bug, shown in full only with ``--verbose``.

No ``from __future__ import annotations`` here: typer would evaluate every option's annotation string on
every run (about 30 ms for the ~90 options); evaluated once at import they cost nothing.
"""

import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
import typer.core

from envguard import __version__, render, settings
from envguard.errors import EnvguardError, ExitCode
from envguard.render import escape as _escape
from envguard.render import is_terminal, print_plain, warn


class _Group(typer.core.TyperGroup):
    """The app's command group, which finishes how --help reads where typer's parameters take no setting for
    it: ``-h, --help`` shows no value, like every other flag (typer prints ``<bool>``; see "options shared by
    the commands" below), and an argument's row shows its name only (``FILE``, not ``FILE <list[Path]>``)."""

    def get_help_option(self, ctx: Any) -> Any:
        return _shown_as_flag(super().get_help_option(ctx))

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command: Any = super().get_command(ctx, cmd_name)
        if command is not None:  # the subcommand's --help, made once from the names this app sets (-h, --help)
            _shown_as_flag(command.get_help_option(ctx))
            for param in command.params:
                if param.param_type_name == "argument":
                    param.display_type_rich = _no_type  # the column typer fills from display_type_rich
        return command


def _shown_as_flag(help_option: Any) -> Any:
    if help_option is not None:
        help_option.metavar = ""
    return help_option


def _no_type(ctx: Any) -> None:
    return None


app = typer.Typer(
    name="envguard",
    cls=_Group,
    help="Declared, locked, verified and explainable PyTorch environments.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

# ---------------------------------------------------------------- options shared by the commands
# Declared once, each with its default beside it (``prefix: Annotated[Path | None, prefix_option(...)] =
# None``). typer's --help prints a type beside every option (``--force <bool>``, ``--platform <list[str]>``),
# which makes a flag look as if it took a value: each option here names its value (``--platform PLATFORM``)
# and a flag shows none, through typer's own ``metavar``.


def option(*decls: str, help: str, metavar: str | None = None, **kwargs: Any) -> Any:
    """An option taking a value; --help shows it as ``metavar``, by default the long name in capitals."""
    if metavar is None:
        metavar = next(d for d in decls if d.startswith("--"))[2:].upper()
    return typer.Option(*decls, metavar=metavar, help=help, **kwargs)


def flag(*decls: str, help: str, **kwargs: Any) -> Any:
    """An on/off option: nothing after it in --help."""
    return typer.Option(*decls, metavar="", help=help, **kwargs)


def prefix_option(help: str) -> Any:
    """``--prefix``/``-p``: the environment's directory (conda's convention)."""
    return option("--prefix", "-p", metavar="PREFIX", help=help)


def name_option(help: str) -> Any:
    """``--name``/``-n``: an environment by name, in the envs directory."""
    return option("--name", "-n", metavar="NAME", help=help)


def lockfile_option(help: str) -> Any:
    return option("--lockfile", metavar="FILE", help=help)


def env_files_option(help: str) -> Any:
    """``--file``/``-f``: environment files, repeatable."""
    return option("--file", "-f", metavar="FILE", help=help)


def platforms_option(help: str) -> Any:
    """``--platform``, repeatable."""
    return option("--platform", metavar="PLATFORM", help=help)


def format_option(help: str = "text, json or markdown.") -> Any:
    return option("--format", metavar="FORMAT", help=help)


def misused_prefix_option() -> Any:
    """A hidden ``-p`` for the commands that take no prefix, so that ``-p`` gets a one-line explanation
    (:func:`_no_prefix_here`) instead of "no such option"."""
    return typer.Option("-p", "--prefix", hidden=True)


def check_format(fmt: str, fix: str = "use text, json or markdown") -> None:
    """The report formats every reporting command accepts."""
    from envguard.errors import UserError

    if fmt not in ("text", "json", "markdown"):
        raise UserError(f"unknown format {fmt!r}", key="--format", fix=fix)


_state = {"verbose": False, "interrupt_reported": False}

def _version(value: bool) -> None:
    if value:
        render.out.print(f"envguard {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    verbose: Annotated[bool, flag("--verbose", "-v", help="Show tracebacks and debug detail.")] = False,
    version: Annotated[bool, flag("--version", callback=_version, is_eager=True, help="Print the version.")] = False,
) -> None:
    _state["verbose"] = verbose
    settings.set_verbose(verbose)  # native code's output too (rattler_backend)

def fail(message: str, code: ExitCode) -> typer.Exit:
    from envguard.redact import redact

    render.err.print(f"[red]error:[/red] {_escape(redact(message))}", markup=True)
    return typer.Exit(int(code))


def _no_prefix_here(command: str, value: str | None) -> None:
    """``-p`` means ``--prefix`` in every envguard command (conda's convention); ``lock`` and ``init`` take
    platforms with ``--platform`` only. Say so in one line rather than "no such option"."""
    if value is None:
        return
    from envguard.errors import UserError
    from envguard.platforms import KNOWN_PLATFORMS

    if value in KNOWN_PLATFORMS:
        raise UserError(f"-p means --prefix in envguard and {command} takes no prefix: the platform flag of "
                        f"{command} is --platform", key="-p", fix=f"`envguard {command} --platform {value}`")
    if "/" in value or "\\" in value or value.startswith((".", "~")) or os.path.exists(value):
        raise UserError(f"{value!r} looks like a path: the platform flag of {command} is --platform, and -p "
                        f"(--prefix) belongs to the commands that act on an environment", key="-p",
                        fix=f"`envguard create -p {value}` builds an environment there")
    raise UserError(f"-p {value}: -p means --prefix in envguard and {command} takes no prefix", key="-p",
                    fix=f"name platforms with --platform, e.g. `envguard {command} --platform linux-64`")

# ---------------------------------------------------------------- lock (#2)


@app.command("lock")
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
) -> None:
    """Solve environment.yml for several platforms into a conda-lock.yml (no conda needed)."""
    import re

    from envguard.errors import UserError

    _no_prefix_here("lock", misused_p)
    if cuda is not None and no_cuda:
        raise UserError("--cuda and --no-cuda exclude each other", key="--cuda", fix="pass only one of them")
    if cuda is not None and not re.fullmatch(r"\d+(\.\d+){0,2}", cuda):
        raise UserError(f"invalid CUDA version {cuda!r}", key="--cuda", fix="pass a version such as 12.4")
    cuda_opt: str | bool | None = False if no_cuda else cuda
    if check:
        from envguard.lock import check_fresh

        fresh = check_fresh(files or None, lockfile, platforms=platforms or None, cuda=cuda_opt)
        if fresh.fresh:
            render.out.print(fresh.message, markup=False)
            raise typer.Exit(int(ExitCode.OK))
        raise fail(fresh.message, ExitCode.STALE)

    from envguard.lock import lock
    from envguard.lock.render import lock_with_progress, print_locked

    print_locked(lock_with_progress(lock, files or None, platforms or None, cuda_opt, lockfile))

# ---------------------------------------------------------------- create (#3)


@app.command("create")
def create_cmd(
    prefix: Annotated[Path | None, prefix_option(help="Create the environment at this path.")] = None,
    name: Annotated[str | None, name_option(
        help="Create it in the envs directory (ENVGUARD_ENVS_DIR, else conda's). Default: the environment file's "
             "name:.")] = None,
    lockfile: Annotated[Path | None, lockfile_option(
        help="Lock to install (default: conda-lock.yml beside the -f file, else here).")] = None,
    files: Annotated[list[Path] | None, env_files_option(
        help="environment.yml (default: the one beside the lock): lock it when there is no lock, re-lock a stale "
             "lock.")] = None,
    force: Annotated[bool, flag("--force",
        help="Rebuild even when the environment already matches the lock (the old one is kept until the new one is "
             "in place).")] = False,
    locked: Annotated[bool, flag("--locked",
        help="Refuse a missing or stale lock (exit 4) instead of locking it first.")] = False,
    frozen: Annotated[bool, flag("--frozen",
        help="Install the lock as it is, without reading the environment file.")] = False,
    backend: Annotated[str | None, option("--backend", metavar="NAME",
        help="rattler (default), micromamba, mamba or conda; else $ENVGUARD_BACKEND.")] = None,
    timeout: Annotated[float | None, option("--timeout", metavar="SECONDS",
        help="Seconds to wait for another envguard creating the same prefix (default: forever), then exit "
             "5.")] = None,
    quiet: Annotated[bool, flag("--quiet", "-q", help="No progress display and no step messages.")] = False,
    no_check: Annotated[bool, flag("--no-check", help="Do not run `envguard check` on the new environment.")] = False,
) -> None:
    """Make an environment exactly the lock: create it, rebuild it if it drifted, atomic, every hash verified."""
    from envguard.create.render import CreateRenderer, print_created
    from envguard.workflow import create_and_check

    reporter = CreateRenderer(quiet=quiet, live=not quiet and is_terminal(render.out))
    try:
        result = create_and_check(prefix, name=name, lockfile=lockfile, env_files=files or (), force=force,
                                  locked=locked, frozen=frozen, backend=backend, timeout=timeout,
                                  check=not no_check, reporter=reporter)
    except KeyboardInterrupt as e:  # typer would turn it into a silent exit 130; say what the target holds
        _state["interrupt_reported"] = True
        raise typer.Exit(_interrupted(str(e) or "interrupted")) from None
    finally:
        reporter.close()
    print_created(result)
    raise typer.Exit(result.exit_code)

# ---------------------------------------------------------------- smoke (#4)


@app.command("smoke")
def smoke_cmd(
    prefix: Annotated[Path | None, prefix_option(help="Conda prefix or virtualenv to probe.")] = None,
    name: Annotated[str | None, name_option(
        help="Named environment (ENVGUARD_ENVS_DIR, else conda's envs directories).")] = None,
    python: Annotated[Path | None, option("--python", metavar="PATH", help="Interpreter to probe.")] = None,
    quick: Annotated[bool, flag("--quick", help="One start method and small batches.")] = False,
    distributed: Annotated[bool, flag("--distributed",
        help="Also torch.distributed: this rank of the world a launcher (torchrun, srun) describes in "
             "RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT, else 2 local processes.")] = False,
    only_distributed: Annotated[bool, flag("--only-distributed", help="Only the torch.distributed check.")] = False,
    require_cuda: Annotated[bool, flag("--require-cuda", help="Fail when CUDA is not usable, and say why.")] = False,
    fmt: Annotated[str, format_option()] = "text",
    timeout: Annotated[float, option("--timeout", metavar="SECONDS",
        help="Seconds before the probe is stopped (exit 124).")] = 120.0,
) -> None:
    """Prove in the environment's own interpreter that DataLoader workers, pinned memory and CUDA work."""
    from envguard.errors import UserError
    from envguard.smoke import resolve_python, run_smoke
    from envguard.smoke.render import SmokeProgress, show

    check_format(fmt)
    if timeout <= 0:
        raise UserError(f"timeout must be positive, got {timeout:g}", key="--timeout", fix="e.g. --timeout 120")
    exe = resolve_python(prefix, name, python)
    with SmokeProgress(enabled=fmt == "text" and is_terminal(render.err)) as progress:
        result = run_smoke(exe, quick=quick, distributed=distributed, require_cuda=require_cuda, timeout=timeout,
                           only_distributed=only_distributed, progress=progress.phase if progress.enabled else None)
    if getattr(exe, "prefix", None) is not None:  # fixes name the environment probed (not with --python)
        from envguard.catalog import aim_findings

        result.findings = aim_findings(result.findings, exe.prefix)
    show(result, fmt, getattr(exe, "why", ""))
    raise typer.Exit(result.exit_code)

# ---------------------------------------------------------------- check (#5)


@app.command("check")
def check_cmd(
    prefix: Annotated[Path | None, prefix_option(help="Environment prefix to check.")] = None,
    name: Annotated[str | None, name_option(help="Named environment to check.")] = None,
    lockfile: Annotated[Path | None, lockfile_option(
        help="Lock to compare against (default: conda-lock.yml beside environment.yml here).")] = None,
    files: Annotated[bool, flag("--files",
        help="Check every conda-meta file exists with its recorded size.")] = False,
    deep: Annotated[bool, flag("--deep", help="Also re-hash every file against its recorded sha256.")] = False,
    no_smoke: Annotated[bool, flag("--no-smoke", help="Skip the smoke test (runs no interpreter).")] = False,
    fmt: Annotated[str, format_option()] = "text",
    core: Annotated[str | None, option("--core", metavar="PATTERNS",
        help="Comma-separated core package patterns for pip-over-conda (default: torch, numpy, nvidia-*, cuda-*, "
             "mkl, ...).")] = None,
    strict: Annotated[bool, flag("--strict", help="Exit 1 on warnings too.")] = False,
    smoke_timeout: Annotated[float, option("--smoke-timeout", metavar="SECONDS",
        help="Seconds before the smoke test is killed.")] = 300.0,
    skip_missing: Annotated[bool, flag("--skip-missing",
        help="No environment to check: say so and exit 0 (for git hooks on a fresh clone).")] = False,
    if_changed: Annotated[bool, flag("--if-changed",
        help="In a post-checkout/post-merge hook: check only when the checkout or merge changed environment.yml or "
             "the lock.")] = False,
    distributed: Annotated[bool, flag("--distributed",
        help="Also torch.distributed across the nodes a launcher started (RANK, WORLD_SIZE, MASTER_ADDR, "
             "MASTER_PORT; torchrun or srun); the result goes into the report.")] = False,
) -> None:
    """Verify an installed environment against its lock, its policy and its hardware."""
    from envguard.check import run_check
    from envguard.check.render import show
    from envguard.envs import NoTargetError
    from envguard.errors import UserError

    check_format(fmt)
    if smoke_timeout <= 0:
        raise UserError(f"timeout must be positive, got {smoke_timeout:g}", key="--smoke-timeout",
                        fix="e.g. --smoke-timeout 300")
    if if_changed:
        from envguard.check import watched_changed

        watched = [lockfile or Path("conda-lock.yml"), (lockfile.parent if lockfile else Path(".")) / "environment.yml"]
        changed, why = watched_changed(watched)
        if not changed:
            print_plain(render.out, f"envguard check: skipped: {why}")
            raise typer.Exit(int(ExitCode.OK))
    core_list = [c.strip() for c in core.split(",") if c.strip()] if core else None
    from envguard.smoke.render import SmokeProgress

    try:
        with SmokeProgress(enabled=fmt == "text" and not no_smoke and is_terminal(render.err)) as progress:
            report = run_check(prefix, name=name, lockfile=lockfile, files=files, deep=deep, smoke=not no_smoke,
                               core=core_list, strict=strict, smoke_timeout=smoke_timeout, distributed=distributed,
                               progress=progress.phase if progress.enabled else None)
    except NoTargetError as e:
        if not skip_missing:
            raise
        from envguard.redact import redact

        print_plain(render.out, f"envguard check: skipped: {redact(e.message)}")
        raise typer.Exit(int(ExitCode.OK)) from None
    show(report, fmt)
    raise typer.Exit(report.exit_code)

# ---------------------------------------------------------------- diff (#6)


@app.command("diff")
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
    """Compare two environment descriptions: what changed, and which changes matter."""
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
    if len(sides) == 1:  # the other side is the environment every command would act on here
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
    show(result, fmt)
    raise typer.Exit(0 if result.equal or exit_zero else int(ExitCode.PROBLEMS))

# ---------------------------------------------------------------- init, lint (#7)


@app.command("init")
def init_cmd(
    python: Annotated[str | None, option("--python", metavar="X.Y",
        help="Python release: 3.11 (default) or 3.10 (legacy).")] = None,
    torch: Annotated[str | None, option("--torch", metavar="X.Y",
        help="PyTorch release (default: the newest released one in the data for the channel).")] = None,
    cuda: Annotated[str | None, option("--cuda", metavar="X.Y|X|cpu",
        help="CUDA line such as 12.9 or 13.0, a major line such as 12 (the newest every platform's build accepts), "
             "or cpu (default: cpu).")] = None,
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

    _no_prefix_here("init", misused_p)
    result = init(python=python, torch=torch, cuda=cuda, channel=channel, platforms=platforms or None, name=name,
                  output=output, force=force)
    for w in result.warnings:
        warn(w)
    build = "CPU" if result.cuda == "cpu" else f"CUDA {result.cuda}"
    what = (f"Python {result.python}, torch {result.torch} ({build}) from {result.channel} for "
            f"{', '.join(result.platforms)}")
    if result.path is None:  # -o -: the file on stdout, the summary where it does not mix with it
        sys.stdout.write(result.text)
        render.err.print(f"printed: {what}; save it with -o environment.yml", markup=False)
        return
    render.out.print(f"wrote {result.path}: {what}", markup=False)
    render.out.print("next: envguard lock", markup=False)


@app.command("lint")
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

# ---------------------------------------------------------------- export (#15)


@app.command("export")
def export_cmd(
    prefix: Annotated[Path | None, prefix_option(help="Environment prefix to export.")] = None,
    name: Annotated[str | None, name_option(help="Named environment to export.")] = None,
    output: Annotated[Path | None, option("--output", "-o",
        help="Directory to write into (default: here).")] = None,
    fmt: Annotated[str, option("--format",
        help="lock (environment.yml + conda-lock.yml), environment (environment.yml only) or explicit (@EXPLICIT "
             "file + hashed requirements file).")] = "lock",
    pinned: Annotated[bool, flag("--pinned/--from-history",
        help="Pin every requested package to its installed version and build (default: the specs as they were "
             "requested).")] = False,
    force: Annotated[bool, flag("--force", help="Replace existing output files (atomically).")] = False,
    deep: Annotated[bool, flag("--deep",
        help="Also re-hash every conda file: name files changed since install.")] = False,
    index_url: Annotated[list[str] | None, option("--index-url",
        help="Index to look pip hashes up on (repeatable; default: pip's own configuration, else PyPI).")] = None,
    no_index: Annotated[bool, flag("--no-index",
        help="Ask no index: pip dists without a recorded hash are written without one.")] = False,
) -> None:
    """Adopt an environment that already works: environment.yml and conda-lock.yml from what is installed."""
    from envguard.export import export
    from envguard.export.render import print_export

    result = export(prefix, name=name, output=output, fmt=fmt, pinned=pinned, force=force, deep=deep,
                    index_urls=index_url or None, use_index=not no_index)
    print_export(result)
    raise typer.Exit(result.exit_code)


# ---------------------------------------------------------------- fleet (#17)


@app.command("fleet")
def fleet_cmd(
    reports: Annotated[list[str], typer.Argument(metavar="REPORT... | DIR",
        help="`envguard check --format json` reports, or directories of them.")],
    lockfile: Annotated[Path | None, lockfile_option(
        help="The lock the nodes should match (default: compare with the majority).")] = None,
    fmt: Annotated[str, format_option()] = "text",
) -> None:
    """One verdict over many nodes' check reports: groups, their nodes and what differs."""
    from envguard.fleet import run_fleet
    from envguard.fleet.render import show

    check_format(fmt)
    result = run_fleet(reports, lockfile=lockfile)
    show(result, fmt)
    raise typer.Exit(result.exit_code)


# ---------------------------------------------------------------- tune (#16)


@app.command("tune")
def tune_cmd(
    prefix: Annotated[Path | None, prefix_option(help="Environment to tune in (default: the active one).")] = None,
    name: Annotated[str | None, name_option(help="Named environment to tune in.")] = None,
    dataset: Annotated[str | None, option("--dataset", metavar="MODULE:FACTORY",
        help="A function that returns your Dataset (or a dict with dataset, collate_fn, sampler).")] = None,
    demo: Annotated[bool, flag("--demo", help="Tune the built-in slow dataset (500 samples, 10 ms each).")] = False,
    batch_size: Annotated[int | None, option("--batch-size",
        help="Batch size (default: the factory's, else 32).")] = None,
    step_ms: Annotated[float, option("--step-ms", help="Simulated training step per batch, in ms.")] = 0.0,
    busy: Annotated[bool, flag("--busy",
        help="The simulated step spins a CPU instead of sleeping (a CPU training loop, not a GPU one).")] = False,
    budget: Annotated[float, option("--budget", help="Seconds the search may take.")] = 60.0,
    current: Annotated[str | None, option("--current", metavar="'num_workers=0,pin_memory=False'",
        help="Your present DataLoader settings, to measure the gain against.")] = None,
    max_workers: Annotated[int | None, option("--max-workers",
        help="Largest num_workers to try (default: 4 x the usable CPUs, at least 8).")] = None,
    timeout: Annotated[float | None, option("--timeout",
        help="Seconds before everything is stopped (exit 124; default: the budget + 120, at least twice the "
             "budget).")] = None,
    fmt: Annotated[str, format_option()] = "text",
    plot: Annotated[Path | None, option("--plot", metavar="FILE",
        help="Write throughput against workers as PNG or SVG (needs matplotlib: the plot extra).")] = None,
) -> None:
    """Measure your DataLoader inside the environment and recommend its settings, with evidence."""
    from envguard.tune import check_plot, tune
    from envguard.tune.render import progress, show

    check_format(fmt)
    plot_path = check_plot(plot) if plot is not None else None  # before any trial runs
    result = tune(prefix=prefix, name=name, dataset=dataset, demo=demo, batch_size=batch_size, step_ms=step_ms,
                  busy=busy, budget=budget, current=current, max_workers=max_workers, timeout=timeout,
                  on_trial=progress if fmt == "text" else None)
    show(result, fmt, plot_path)
    raise typer.Exit(result.exit_code)

# ---------------------------------------------------------------- entry point


def _verbose_anywhere(argv: list[str]) -> list[str]:
    """``--verbose``/``-v`` is the app's option; accept it after the subcommand too (``envguard check -v``)
    by moving it in front. Values of the subcommand's options are skipped, and ``--`` ends the options."""
    names = {c.name for c in app.registered_commands}
    cmd_at = next((i for i, arg in enumerate(argv) if arg in names), None)
    if cmd_at is None or not {"-v", "--verbose"} & set(argv[cmd_at + 1:]):
        return argv  # the common case: no click command is built for nothing
    import typer.main

    command = typer.main.get_command(app).commands.get(argv[cmd_at])  # type: ignore[attr-defined]
    takes_value = {o for p in getattr(command, "params", ()) if not getattr(p, "is_flag", False)
                   for o in getattr(p, "opts", ())}
    own = {o for p in getattr(command, "params", ()) for o in getattr(p, "opts", ())}
    if own & {"-v", "--verbose"}:
        return argv
    head, rest, moved = argv[:cmd_at], [], False
    i = cmd_at + 1
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            rest += argv[i:]
            break
        if arg in ("-v", "--verbose"):
            moved = True
        else:
            rest.append(arg)
            if arg in takes_value and i + 1 < len(argv):
                rest.append(argv[i + 1])
                i += 1
        i += 1
    return head + (["--verbose"] if moved else []) + [argv[cmd_at]] + rest


def run(argv: list[str] | None = None) -> int:
    """Run the CLI and return its exit code (never raises, never exits)."""
    _state.update(verbose=False, interrupt_reported=False)
    try:
        return _run(_verbose_anywhere(list(argv if argv is not None else sys.argv[1:])))
    finally:
        settings.set_verbose(False)


def _run(argv: list[str]) -> int:
    try:
        # With standalone_mode=False click *returns* the code of a typer.Exit instead of raising it.
        rv = app(args=argv, prog_name="envguard", standalone_mode=False)
        if rv == ExitCode.INTERRUPTED and not _state.get("interrupt_reported"):
            return _interrupted("interrupted")  # typer turns Ctrl-C into a silent `return 130`
        return int(rv) if isinstance(rv, int) else 0
    except typer.Exit as e:
        if isinstance(e.__cause__, KeyboardInterrupt):  # typer's silent exit 130 for Ctrl-C: say it
            return _interrupted("interrupted")
        return int(e.exit_code)
    except typer.Abort:  # click's form of a KeyboardInterrupt
        return _interrupted("interrupted")
    except SystemExit as e:
        # typer's answer to a reader that closed the pipe (`envguard --help | head -1`) is exit 1; the help
        # or version a reader stopped reading did not fail, anything else was cut short and keeps the 1
        if isinstance(e.__context__, BrokenPipeError):
            return int(ExitCode.OK) if _asks_for_help(argv) else 1
        raise
    except typer.TyperException as e:  # typer's usage errors (click's, vendored)
        if not argv:  # bare `envguard` (the app's no_args_is_help): the help text
            typer.echo(e.format_message(), err=True)
            return int(ExitCode.USAGE)
        # one line, like every other bad input, instead of click's Usage/Try/Error block
        from envguard.redact import redact

        ctx = getattr(e, "ctx", None)
        if ctx is not None:
            where = ctx.command_path
        else:  # raised by the option parser, which keeps no context: the command named in argv
            names = {c.name for c in app.registered_commands}
            where = " ".join(["envguard"] + [a for a in (argv if argv is not None else sys.argv[1:])
                                             if a in names][:1])
        message = " ".join(e.format_message().split())
        from envguard.errors import with_fix

        line = with_fix(f"{_escape(redact(where))}: {_escape(redact(message))}", f"see `{_escape(where)} --help`")
        render.err.print(f"[red]error:[/red] {line}", markup=True, highlight=False)
        return int(ExitCode.USAGE)
    except EnvguardError as e:
        from envguard.redact import redact

        if _state["verbose"]:
            _print_traceback()
        render.err.print(f"[red]error:[/red] {_escape(redact(e.message))}", markup=True)
        return int(e.exit_code)
    except KeyboardInterrupt:
        return _interrupted("interrupted")
    except Exception as e:  # a bug: one line, unless asked for more
        if _state["verbose"]:
            _print_traceback()
        from envguard.redact import redact

        detail = _escape(redact(" ".join(str(e).split())))
        hint = "" if _state["verbose"] else " (rerun with --verbose for a traceback)"
        render.err.print(f"[red]internal error:[/red] {type(e).__name__}: {detail}{hint}")
        return int(ExitCode.BACKEND)


def _asks_for_help(argv: list[str]) -> bool:
    options = argv[:argv.index("--")] if "--" in argv else argv
    return bool({"-h", "--help", "--version"} & set(options))


def _interrupted(message: str) -> int:
    """One plain line (rich may be the very import that was interrupted), exit code 130."""
    from envguard.redact import redact

    try:
        sys.stderr.write(redact(message) + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    return int(ExitCode.INTERRUPTED)


def _exit_interrupted(_signum: int, _frame: object) -> None:
    os.write(2, b"interrupted\n")
    os._exit(int(ExitCode.INTERRUPTED))


def _print_traceback() -> None:
    """The traceback --verbose asks for, with credentials masked like every other message."""
    import traceback

    from envguard.redact import redact

    sys.stderr.write(redact(traceback.format_exc()))


def main() -> None:
    import atexit
    import signal

    # py-rattler's async runtime can crash during interpreter finalisation (SIGSEGV/SIGABRT in ~1-3% of runs,
    # see engine-notes.md): the process ends in an exit handler instead, registered first so that it runs
    # last, after every handler the run registers (exit handlers run last-in, first-out), before finalising.
    atexit.register(_leave_unfinalised)
    try:
        # envguard.__main__ ends the process on SIGINT while the CLI is imported; from here on Ctrl-C is a
        # KeyboardInterrupt that the commands handle (run() turns it into one line and exit 130)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        code = run(sys.argv[1:])
    except KeyboardInterrupt:  # between the lines above and run()'s own handler
        code = int(ExitCode.INTERRUPTED)
        os.write(2, b"interrupted\n")
    signal.signal(signal.SIGINT, _exit_interrupted)  # leaving anyway: no traceback from the last steps
    _leaving["code"] = code
    sys.exit(code)


_leaving: dict[str, int] = {}  # main()'s exit code, for _leave_unfinalised


def _leave_unfinalised() -> None:
    """The last exit handler: flush and end the process with main()'s code, without finalising."""
    if "code" not in _leaving:  # main() did not get as far as its code: the interpreter's own exit
        return
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: nothing more can be said there
            pass
    os._exit(_leaving["code"])
