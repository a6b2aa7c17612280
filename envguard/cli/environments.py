"""The commands about one environment: create (from the lock), check and smoke (the installed environment)
and export (an environment that works, into a spec and a lock). Registered by envguard/cli/__init__.py."""

import sys
from pathlib import Path
from typing import Annotated

import typer

from envguard import render, settings
from envguard.cli.app import (
    check_format,
    env_files_option,
    flag,
    format_option,
    lockfile_option,
    name_option,
    option,
    prefix_option,
    run_state,
    say_interrupted,
)
from envguard.errors import ExitCode
from envguard.render import is_terminal, print_plain

# ---------------------------------------------------------------- create


def create_cmd(
    prefix: Annotated[Path | None, prefix_option(help="Create the environment at this path.")] = None,
    name: Annotated[str | None, name_option(
        help="Create it in the envs directory (ENVGUARD_ENVS_DIR, else conda's). Default: the environment file's "
             "name:.")] = None,
    lockfile: Annotated[Path | None, lockfile_option(
        help="Lock to install exactly as written: a stale one is refused (exit 4), never re-locked (default: "
             "conda-lock.yml beside the -f file, else the project's).")] = None,
    files: Annotated[list[Path] | None, env_files_option(
        help="environment.yml (default: the one beside the lock): lock it when there is no lock, re-lock its own "
             "default lock when stale.")] = None,
    force: Annotated[bool, flag("--force",
        help="Rebuild even when the environment already matches the lock, and replace a conda environment envguard "
             "did not build (the old one is kept until the new one is in place).")] = False,
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
    offline: Annotated[bool, flag("--offline",
        help="No network: packages from the package cache and local channels only; names what is missing "
             "(exit 6).")] = False,
    variant: Annotated[str | None, option("--variant", metavar="NAME",
        help="In a project with variants (variants/*.yml): build this one (default: the one this machine runs; "
             "docs/variants.md).")] = None,
) -> None:
    """Make an environment exactly the lock: create it, rebuild it if it drifted, atomic, every hash verified."""
    from envguard.errors import Interrupted

    reporter = None
    try:
        # the imports too (a few tenths of a second): a Ctrl-C or SIGTERM there is one before the create began
        from envguard.cli.workflow import create_and_check
        from envguard.create import CreateOptions
        from envguard.create.render import CreateRenderer, print_created

        settings.set_offline(offline)  # a (re-)lock create makes solves offline too
        reporter = CreateRenderer(quiet=quiet, live=not quiet and is_terminal(render.out))
        result = create_and_check(CreateOptions(prefix=prefix, name=name, lockfile=lockfile, env_files=files or (),
                                                force=force, locked=locked, frozen=frozen, backend=backend,
                                                timeout=timeout, reporter=reporter, offline=offline,
                                                variant=variant),
                                  check=not no_check)
    except KeyboardInterrupt as e:  # typer would turn it into a silent exit 130; say what the target holds
        run_state["interrupt_reported"] = True
        # create turns every interrupt after it began into an Interrupted that says what the target holds; any
        # other came before it touched anything (issue #38 point 8: a bare "terminated (SIGTERM)")
        said = str(e) if isinstance(e, Interrupted) and str(e) else "interrupted before the create began: nothing " \
                                                                     "was changed"
        raise typer.Exit(say_interrupted(said)) from None
    finally:
        if reporter is not None:
            reporter.close()
    try:
        print_created(result)
    except KeyboardInterrupt:  # the create is over: say so, not a bare "interrupted"
        from envguard.leftovers import interrupt_report

        run_state["interrupt_reported"] = True
        raise typer.Exit(say_interrupted(interrupt_report(result.prefix, result.status != "unchanged"))) from None
    raise typer.Exit(result.exit_code)

# ---------------------------------------------------------------- smoke


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
    from envguard.envs import Target
    from envguard.errors import UserError
    from envguard.smoke import resolve_python, run_smoke
    from envguard.smoke.render import SmokeProgress, show

    check_format(fmt)
    if timeout <= 0:
        raise UserError(f"timeout must be positive, got {timeout:g}", key="--timeout", fix="e.g. --timeout 120")
    exe = resolve_python(prefix, name, python)
    env_prefix = exe.prefix if isinstance(exe, Target) else None
    activated = None
    if env_prefix is not None and (env_prefix / "conda-meta").is_dir():  # what a job run by `envguard run` sees
        from envguard.activate import activated_environ

        activated = activated_environ(env_prefix)
    with SmokeProgress(enabled=fmt == "text" and is_terminal(render.err)) as progress:
        result = run_smoke(exe, quick=quick, distributed=distributed, require_cuda=require_cuda, timeout=timeout,
                           only_distributed=only_distributed, progress=progress.phase if progress.enabled else None,
                           env=activated)
    if env_prefix is not None:  # fixes name the environment probed (not with --python)
        from envguard.catalog import aim_findings

        result.findings = aim_findings(result.findings, env_prefix)
    show(result, fmt, getattr(exe, "why", ""))
    raise typer.Exit(result.exit_code)

# ---------------------------------------------------------------- check


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
    from envguard.check import CheckOptions, run_check
    from envguard.check.render import show
    from envguard.envs import NoTargetError
    from envguard.errors import UserError

    check_format(fmt)
    if smoke_timeout <= 0:
        raise UserError(f"timeout must be positive, got {smoke_timeout:g}", key="--smoke-timeout",
                        fix="e.g. --smoke-timeout 300")
    if if_changed:
        from envguard.check import watched_changed, watched_files

        # the files here, as a hook runs at the root; in a project with variants, the built variant's (#37)
        changed, why = watched_changed(watched_files(lockfile, prefix, name))
        if not changed:
            print_plain(render.out, f"envguard check: skipped: {why}")
            raise typer.Exit(int(ExitCode.OK))
    core_list = [c.strip() for c in core.split(",") if c.strip()] if core else None
    from envguard.smoke.render import SmokeProgress

    try:
        with SmokeProgress(enabled=fmt == "text" and not no_smoke and is_terminal(render.err)) as progress:
            report = run_check(CheckOptions(prefix=prefix, name=name, lockfile=lockfile, files=files, deep=deep,
                                            smoke=not no_smoke, core=core_list, strict=strict,
                                            smoke_timeout=smoke_timeout, distributed=distributed,
                                            progress=progress.phase if progress.enabled else None))
    except NoTargetError as e:
        if not skip_missing:
            raise
        from envguard.redact import redact

        print_plain(render.out, f"envguard check: skipped: {redact(e.message)}")
        raise typer.Exit(int(ExitCode.OK)) from None
    show(report, fmt)
    raise typer.Exit(report.exit_code)

# ---------------------------------------------------------------- export


def export_cmd(
    prefix: Annotated[Path | None, prefix_option(help="Environment prefix to export.")] = None,
    name: Annotated[str | None, name_option(help="Named environment to export.")] = None,
    output_dir: Annotated[Path | None, option("--output-dir", metavar="DIR",
        help="Directory to write into (default: here).")] = None,
    # -o is the file a command writes (init -o FILE); export writes several files into a directory, so its
    # directory is --output-dir. The old spelling still works, hidden, with a warning (docs/commands/export.md).
    old_output: Annotated[Path | None, option("--output", "-o", metavar="DIR", hidden=True,
        help="Deprecated spelling of --output-dir.")] = None,
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
    as_json: Annotated[bool, flag("--json",
        help="Report what was written as JSON on stdout (envguard.export/1; --format names the files' "
             "format).")] = False,
) -> None:
    """Adopt an environment that already works: environment.yml and conda-lock.yml from what is installed."""
    from envguard.export import export
    from envguard.export.render import export_json, print_export

    output = deprecated_output_dir(output_dir, old_output)
    result = export(prefix, name=name, output=output, fmt=fmt, pinned=pinned, force=force, deep=deep,
                    index_urls=index_url or None, use_index=not no_index)
    if as_json:
        import json

        sys.stdout.write(json.dumps(export_json(result), indent=2, ensure_ascii=False) + "\n")
    else:
        print_export(result)
    raise typer.Exit(result.exit_code)


def deprecated_output_dir(output_dir: Path | None, old_output: Path | None) -> Path | None:
    """export's directory: ``--output-dir``, or the old ``-o/--output`` with a warning that names the new
    spelling (``-o`` is the output file of every command that writes one). Both at once: which one was
    meant is not known, so neither is guessed (exit 2)."""
    if old_output is None:
        return output_dir
    from envguard.errors import UserError

    if output_dir is not None:
        raise UserError("export takes its directory once: --output-dir and the deprecated -o/--output were "
                        "both given", key="-o", fix=f"pass --output-dir {output_dir} only")
    render.warn(f"export's -o/--output is deprecated (-o names the file a command writes, as init's -o does): "
                f"use --output-dir {old_output}")
    return old_output


