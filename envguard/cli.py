"""The command line. The only module that imports typer and rich.

Each command parses its arguments, calls a plain function that returns a
result, renders that result and maps it onto an exit code. Errors derived from
:class:`envguard.errors.EnvguardError` become one line on stderr; anything
else is a bug, shown in full only with ``--verbose``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Optional

import typer

try:  # recent typer vendors click; older releases use the click package
    from typer._click.exceptions import ClickException as _ClickException
except ImportError:  # pragma: no cover - depends on the installed typer
    from click.exceptions import ClickException as _ClickException

from envguard import __version__
from envguard.errors import EnvguardError, ExitCode

# ---------------------------------------------------------------- option coercion without pydantic (#3 perf)


class _PlainCoercion:
    """Coerces one plain option value (bool, str, float, Path, list[str], list[Path]) without pydantic.

    typer 0.2x validates every option value with a pydantic TypeAdapter built on first use: importing
    pydantic and building an adapter per option (even for an absent ``--help``) is ~0.1 s of every command
    (a third of a warm 500-package `envguard create`). This does what those adapters do on the values they accept, and hands anything else (a bad
    number, an unreadable path, an empty value) to typer's own coercion, so errors read exactly as before.
    """

    _NUMBER = None  # compiled on first use

    def __init__(self, kind: str) -> None:
        self.kind = kind  # "bool" | "str" | "strs" | "float" | "path" | "paths"

    @classmethod
    def for_param(cls, param: "object") -> "_PlainCoercion | None":
        desc = getattr(param, "type_descriptor", None)
        if desc is None or getattr(param, "_runtime_param", "absent") is not None:
            return None  # another typer: leave it alone
        info, ann = desc.parameter_info, desc.annotation
        plain_path = (not info.exists and info.file_okay
                      and info.dir_okay and not info.writable and not info.resolve_path and not info.allow_dash
                      and info.path_type is None and desc.file_annotation is None)
        if getattr(info, "parser", None) is not None:
            return None
        if ann is bool:
            return cls("bool")
        if ann is str:
            return cls("str")
        if ann == list[str]:
            return cls("strs")
        if ann is float and info.min is None and info.max is None:
            return cls("float")
        if ann is Path and plain_path:
            return cls("path")
        if ann == list[Path] and plain_path:
            return cls("paths")
        return None

    def coerce(self, value: "object", param: "typer.core.TyperOption", ctx: "object") -> "object":
        if value is None:
            return () if (param.multiple or param.nargs == -1) else None
        try:
            if self.kind == "bool" and isinstance(value, bool):
                return value
            if self.kind == "str" and isinstance(value, str):
                return value
            if self.kind == "strs" and isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
                return list(value)
            if self.kind == "float" and type(value) in (float, int):  # a default such as 120.0
                return float(value)
            if self.kind == "float" and isinstance(value, str):
                import re

                if _PlainCoercion._NUMBER is None:
                    _PlainCoercion._NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)")
                if _PlainCoercion._NUMBER.fullmatch(value):
                    return float(value)
            if self.kind == "path":
                return self._path(value)
            if self.kind == "paths" and isinstance(value, (list, tuple)):
                return [self._path(v) for v in value]
        except _Defer:
            pass
        param._runtime_param = None  # typer's own (pydantic) coercion decides, and words any error
        return param.get_runtime_param().coerce(value, param=param, ctx=ctx)

    @staticmethod
    def _path(value: "object") -> Path:
        if isinstance(value, Path):  # a default: typer keeps the object
            path = value
        elif isinstance(value, str) and value and "\0" not in value:
            path = Path(value)
        else:
            raise _Defer
        try:
            os.stat(path)
        except OSError:
            return path  # need not exist
        if not os.access(path, os.R_OK):  # typer refuses an unreadable existing path
            raise _Defer
        return path


class _Defer(Exception):
    pass


def _lighten(command: "object", ctx: "object", *, own_ctx: bool) -> None:
    params = list(getattr(command, "params", ()))
    # get_params adds the --help option, created on first use from the context's help option names: the
    # command's own context, or the app's, which a subcommand shares unless it sets its own names
    if own_ctx or not (getattr(command, "context_settings", None) or {}).get("help_option_names"):
        try:
            params = command.get_params(ctx)  # type: ignore[attr-defined]
        except Exception:  # another typer/click: its --help keeps typer's coercion
            pass
    for param in params:
        light = _PlainCoercion.for_param(param)
        if light is not None:
            param._runtime_param = light  # type: ignore[attr-defined]


class _PlainGroup(typer.core.TyperGroup):
    """The app's group: its own options and every subcommand's plain options are coerced by
    :class:`_PlainCoercion`."""

    def parse_args(self, ctx: "object", args: list[str]) -> list[str]:
        _lighten(self, ctx, own_ctx=True)
        return super().parse_args(ctx, args)  # type: ignore[arg-type]

    def get_command(self, ctx: "object", cmd_name: str) -> "object":
        command = super().get_command(ctx, cmd_name)  # type: ignore[arg-type]
        if command is not None:
            _lighten(command, ctx, own_ctx=False)
        return command


app = typer.Typer(
    name="envguard",
    cls=_PlainGroup,
    help="Declared, locked, verified and explainable PyTorch environments.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

_state = {"verbose": False}


class _LazyConsole:
    """A rich Console built on first use. Importing rich and building a console costs ~20 ms, which a
    `envguard create` writing into a log or a pipe never needs (see :func:`print_plain`)."""

    def __init__(self, **options: "object") -> None:
        object.__setattr__(self, "_options", options)
        object.__setattr__(self, "_console", None)

    def get(self) -> "object":
        if self._console is None:
            from rich.console import Console

            object.__setattr__(self, "_console", Console(**self._options))
        return self._console

    def __getattr__(self, name: str) -> "object":
        return getattr(self.get(), name)

    def __setattr__(self, name: str, value: "object") -> None:
        setattr(self.get(), name, value)


def rich_console(console: "object") -> "object":
    """The rich Console itself, for rich objects that take one (Progress, Live)."""
    return console.get() if isinstance(console, _LazyConsole) else console


def print_plain(console: "object", text: str) -> None:
    """``console.print(text, markup=False, emoji=False)``, without rich when the console is still unbuilt,
    surely no terminal (rich would write the text as it is) and the text is plain printable ASCII."""
    if isinstance(console, _LazyConsole) and console._console is None and text.isascii() and text.isprintable() \
            and not is_terminal(console, build=False):
        stream = sys.stderr if console._options.get("stderr") else sys.stdout  # type: ignore[attr-defined]
        stream.write(text + "\n")
        return
    console.print(text, markup=False, emoji=False)  # type: ignore[attr-defined]


def is_terminal(console: "object", *, build: bool = True) -> bool:
    """``console.is_terminal``, answered without rich for an unbuilt console when surely no terminal.
    With ``build=False`` an unbuilt console that may be a terminal is not built: the answer is True."""
    if isinstance(console, _LazyConsole) and console._console is None:
        if not _maybe_terminal(sys.stderr if console._options.get("stderr") else sys.stdout):
            return False
        if not build:
            return True
    return bool(console.is_terminal)  # type: ignore[attr-defined]


def _maybe_terminal(stream: "object") -> bool:
    """False only where rich's Console.is_terminal is surely False (it also honours these variables)."""
    if os.environ.get("TTY_COMPATIBLE") == "1" or os.environ.get("FORCE_COLOR") is not None:
        return True
    if "ipykernel" in sys.modules or "idlelib" in sys.modules:
        return True
    try:
        return bool(stream.isatty())  # type: ignore[attr-defined]
    except (AttributeError, ValueError):
        return True


out = _LazyConsole(highlight=False, soft_wrap=True)
err = _LazyConsole(stderr=True, highlight=False, soft_wrap=True)


def _version(value: bool) -> None:
    if value:
        out.print(f"envguard {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Show tracebacks and debug detail."),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    _state["verbose"] = verbose


def warn(message: str) -> None:
    from envguard.redact import redact

    err.print(f"[yellow]warning:[/yellow] {_escape(redact(message))}", markup=True)


def fail(message: str, code: ExitCode) -> "typer.Exit":
    from envguard.redact import redact

    err.print(f"[red]error:[/red] {_escape(redact(message))}", markup=True)
    return typer.Exit(int(code))


def _escape(text: str) -> str:
    """Text shown inside a markup string: "torch[cuda]" or "# [linux]" must not be read as rich tags."""
    from rich.markup import escape

    return escape(text)


def print_findings(findings: "list", title: str | None = None) -> None:
    """A rich table of findings grouped by severity, then a one-line summary."""
    from rich.table import Table

    from envguard.findings import sort_findings
    from envguard.redact import redact
    from envguard.report import summary_line

    fs = sort_findings(list(findings))
    if fs:
        table = Table(title=title, show_lines=False, expand=False)
        for col in ("severity", "code", "where", "message", "fix"):
            table.add_column(col, overflow="fold")
        style = {"error": "red", "warning": "yellow", "info": "blue"}
        for f in fs:
            sev = f.severity.value
            table.add_row(f"[{style[sev]}]{sev}[/]", _escape(f.code), _escape(redact(f.location or f.package or "")),
                          _escape(redact(f.message)), _escape(redact(f.fix)))
        out.print(table)
    out.print(summary_line(fs))


# ---------------------------------------------------------------- lock (#2)


@app.command("lock")
def lock_cmd(
    files: Optional[list[Path]] = typer.Option(
        None, "--file", "-f", help="Environment file(s) (default: environment.yml)."),
    platforms: Optional[list[str]] = typer.Option(
        None, "--platform", "-p", help="Platform(s) to lock (default: the file's platforms:, else linux-64, "
        "osx-arm64, win-64)."),
    cuda: Optional[str] = typer.Option(
        None, "--cuda", metavar="X.Y", help="Assume this CUDA driver version (__cuda) when solving. Default: the "
        "assumption recorded in the existing lock, else conda-lock's default."),
    no_cuda: bool = typer.Option(False, "--no-cuda", help="Assume no CUDA driver (no __cuda)."),
    lockfile: Optional[Path] = typer.Option(
        None, "--lockfile", help="Lock file (default: conda-lock.yml beside the first file)."),
    check: bool = typer.Option(
        False, "--check", help="Only test freshness: exit 0 if fresh, 4 if stale or missing. Read-only."),
) -> None:
    """Solve environment.yml for several platforms into a conda-lock.yml (no conda needed)."""
    import re

    from envguard.errors import UserError

    if cuda is not None and no_cuda:
        raise UserError("--cuda and --no-cuda exclude each other", key="--cuda", fix="pass only one of them")
    if cuda is not None and not re.fullmatch(r"\d+(\.\d+){0,2}", cuda):
        raise UserError(f"invalid CUDA version {cuda!r}", key="--cuda", fix="pass a version such as 12.4")
    cuda_opt: "str | bool | None" = False if no_cuda else cuda
    if check:
        from envguard.lock import check_fresh

        fresh = check_fresh(files or None, lockfile, platforms=platforms or None, cuda=cuda_opt)
        if fresh.fresh:
            out.print(fresh.message, markup=False)
            raise typer.Exit(int(ExitCode.OK))
        raise fail(fresh.message, ExitCode.STALE)

    from envguard.lock import lock

    result = _lock_with_progress(lock, files or None, platforms or None, cuda_opt, lockfile)
    for w in result.warnings:
        warn(w)
    counts = ", ".join(f"{p}: {n}" for p, n in result.packages.items())
    verb = "wrote" if result.changed else "unchanged:"
    cuda_note = "no CUDA" if result.cuda == "none" else f"__cuda={result.cuda}"
    out.print(f"{verb} {result.lockfile} ({counts} packages; {cuda_note}) in {result.seconds:.1f} s", markup=False)


def _lock_with_progress(lock: "object", files: "list[Path] | None", platforms: "list[str] | None",
                        cuda: "str | bool | None", lockfile: "Path | None") -> "object":
    """Run the lock with a rich status line on a terminal; silently otherwise."""
    if not err.is_terminal:
        return lock(files, platforms=platforms, cuda=cuda, lockfile=lockfile)  # type: ignore[operator]
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    labels = {"spec": "reading {detail}", "solve": "solving {platform}",
              "pip": "resolving pip: for {platform}", "write": "writing {detail}", "done": "done"}
    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn())
    with Progress(*columns, console=rich_console(err), transient=True) as progress:
        task = progress.add_task("locking", total=None)

        def reporter(p: "object") -> None:
            fields = vars(p)
            done = max(0, fields["index"] - 1) if fields["stage"] in ("solve", "pip") else None
            if fields["stage"] == "write":
                done = progress.tasks[0].total
            # refresh now: a solve can take less than one refresh period
            progress.update(task, description=labels.get(fields["stage"], fields["stage"]).format(**fields),
                            total=fields["total"] or progress.tasks[0].total, completed=done, refresh=True)

        return lock(files, platforms=platforms, cuda=cuda, lockfile=lockfile,  # type: ignore[operator]
                    reporter=reporter)

# ---------------------------------------------------------------- create (#3)


@app.command("create")
def create_cmd(
    prefix: Optional[Path] = typer.Option(None, "--prefix", "-p", help="Create the environment at this path."),
    name: Optional[str] = typer.Option(
        None, "--name", "-n", help="Create it in the envs directory (ENVGUARD_ENVS_DIR, else conda's)."),
    lockfile: Optional[Path] = typer.Option(
        None, "--lockfile", help="Lock to install (default: conda-lock.yml beside the -f file, else here)."),
    files: Optional[list[Path]] = typer.Option(
        None, "--file", "-f", help="environment.yml: lock it first when there is no lock; else test freshness."),
    force: bool = typer.Option(False, "--force", help="Replace an existing environment (kept until the new one "
                               "is in place)."),
    locked: bool = typer.Option(False, "--locked", help="Refuse a missing or stale lock (exit 4)."),
    backend: Optional[str] = typer.Option(
        None, "--backend", help="rattler (default), micromamba, mamba or conda; else $ENVGUARD_BACKEND."),
    timeout: Optional[float] = typer.Option(
        None, "--timeout", help="Seconds to wait for another envguard creating the same prefix (default: "
        "forever), then exit 5."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress display and no step messages."),
    no_check: bool = typer.Option(False, "--no-check", help="Do not run `envguard check` on the new environment."),
) -> None:
    """Build the environment from the lock, without solving: atomic, every hash verified."""
    from envguard.create import create
    from envguard.redact import redact

    reporter = _CreateRenderer(quiet=quiet, live=not quiet and is_terminal(out))
    try:
        result = create(prefix, name=name, lockfile=lockfile, env_files=files or (), force=force, locked=locked,
                        backend=backend, timeout=timeout, check=not no_check, reporter=reporter)
    except KeyboardInterrupt:  # typer would turn it into a silent exit 130
        raise fail("interrupted: the target was left as it was; the next `envguard create` removes what this "
                   "run left beside it", ExitCode.INTERRUPTED) from None
    finally:
        reporter.close()
    shown = redact(str(result.prefix))
    if result.status == "unchanged":
        how = " (built by the envguard run we waited for)" if result.waited else ""
        print_plain(out, f"unchanged: {shown} already matches {redact(str(result.lockfile))}{how}; "
                    f"fingerprint {result.fingerprint.digest[:12]}")
    else:
        pip = f" + {result.pip_count} pip" if result.pip_count else ""
        print_plain(out, f"{result.status} {shown}: {result.conda_count} conda{pip} packages from "
                    f"{redact(str(result.lockfile))} with {result.backend} in {result.seconds:.1f} s; "
                    f"fingerprint {result.fingerprint.digest[:12]}")
    if result.check is not None:
        print_findings(result.check.findings, title=f"envguard check {shown}")
    raise typer.Exit(result.exit_code)


class _CreateRenderer:
    """envguard.create.CreateReporter rendered with rich: on a terminal, step lines and a progress display;
    otherwise only the summary line. Waiting for another create and cleaning up after an interrupted one
    are said on stderr in both cases; --quiet silences everything but warnings, errors and the summary."""

    def __init__(self, *, quiet: bool, live: bool) -> None:
        self.quiet = quiet
        self.progress: "object | None" = None
        self._tasks: dict[str, object] = {}
        self._live = live
        self.wants_events = live  # no display, no per-package events from the installer

    def _bar(self) -> "object":
        if self.progress is None:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self.progress = Progress(TextColumn("{task.description:>8}"), BarColumn(), MofNCompleteColumn(),
                                     TimeElapsedColumn(), console=rich_console(out), transient=True)
            self.progress.start()  # type: ignore[attr-defined]
        return self.progress

    def stage(self, text: str) -> None:
        if self._live:  # step lines only on a terminal: logs get the summary line
            out.print(f"[dim]·[/dim] {_escape(text)}", markup=True, highlight=False)

    def note(self, text: str) -> None:
        if not self.quiet:
            err.print(f"envguard: {text}", markup=False)

    def waiting(self, holder_pid: "int | None", waited_s: float) -> None:
        if self.quiet:
            return
        who = f"envguard process {holder_pid}" if holder_pid else "another envguard process"
        err.print(f"waiting for {who}, which is creating this environment ({waited_s:.0f} s)", markup=False)

    def install_start(self, total: int) -> None:
        if not self._live:
            return
        bar = self._bar()
        for key in ("cached", "linked"):
            if key in self._tasks:
                bar.update(self._tasks[key], total=total)  # type: ignore[attr-defined]
            else:
                self._tasks[key] = bar.add_task(key, total=total)  # type: ignore[attr-defined]

    def _advance(self, key: str) -> None:
        if self._live and key in self._tasks:
            self.progress.advance(self._tasks[key])  # type: ignore[union-attr]

    def cached(self, name: str) -> None:
        self._advance("cached")

    def linked(self, name: str) -> None:
        self._advance("linked")

    def warning(self, text: str) -> None:
        warn(text)

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()  # type: ignore[attr-defined]
            self.progress = None

# ---------------------------------------------------------------- smoke (#4)


@app.command("smoke")
def smoke_cmd(
    prefix: Optional[Path] = typer.Option(None, "--prefix", "-p", help="Conda prefix or virtualenv to probe."),
    name: Optional[str] = typer.Option(None, "--name", "-n", help="Named environment (ENVGUARD_ENVS_DIR, else "
                                       "conda's envs directories)."),
    python: Optional[Path] = typer.Option(None, "--python", help="Interpreter to probe (default: this one)."),
    quick: bool = typer.Option(False, "--quick", help="One start method and small batches."),
    distributed: bool = typer.Option(False, "--distributed", help="Also all-reduce across 2 local processes."),
    require_cuda: bool = typer.Option(False, "--require-cuda", help="Fail when CUDA is not usable, and say why."),
    fmt: str = typer.Option("text", "--format", help="text, json or markdown."),
    timeout: float = typer.Option(120.0, "--timeout", help="Seconds before the probe is stopped (exit 124)."),
) -> None:
    """Prove in the environment's own interpreter that DataLoader workers, pinned memory and CUDA work."""
    import json

    from envguard.errors import UserError
    from envguard.smoke import resolve_python, run_smoke

    if fmt not in ("text", "json", "markdown"):
        raise UserError(f"unknown format {fmt!r}", key="--format", fix="use text, json or markdown")
    if timeout <= 0:
        raise UserError(f"timeout must be positive, got {timeout:g}", key="--timeout", fix="e.g. --timeout 120")
    exe = resolve_python(prefix, name, python)
    result = run_smoke(exe, quick=quick, distributed=distributed, require_cuda=require_cuda, timeout=timeout)
    if fmt == "json":
        from envguard.redact import redact

        sys.stdout.write(redact(json.dumps(result.to_dict(), indent=2, default=str)) + "\n")
    elif fmt == "markdown":
        from envguard.report import findings_to_markdown

        sys.stdout.write(findings_to_markdown(_smoke_title(result), result.findings))
        sys.stdout.write(_smoke_checks_markdown(result))
    else:
        out.print(_smoke_title(result), markup=False)
        _print_smoke_checks(result)
        print_findings(result.findings)
    raise typer.Exit(result.exit_code)


def _smoke_title(result: "object") -> str:
    from envguard.redact import redact

    r = result  # envguard.smoke.SmokeResult
    tv = r.probe.get("torch") or {}
    build = f"CUDA {tv['cuda']}" if tv.get("cuda") else "CPU build"
    what = f"torch {tv['version']} ({build})" if tv.get("version") else "torch not imported"
    state = "timed out" if r.timed_out else ("passed" if r.exit_code == 0 else "failed")
    return f"envguard smoke {redact(r.python)} · {what} · {state} in {r.duration:.1f} s"


def _print_smoke_checks(result: "object") -> None:
    from rich.table import Table

    checks = result.probe.get("checks") or []
    if not checks:
        return
    style = {"pass": "green", "fail": "red", "not-exercised": "yellow", "skip": "dim"}
    table = Table(show_lines=False, expand=False)
    for col in ("check", "status", "seconds"):
        table.add_column(col)
    for c in checks:
        st = str(c.get("status"))
        secs = c.get("seconds")
        table.add_row(str(c.get("name")), f"[{style.get(st, 'white')}]{st}[/]",
                      f"{secs:.2f}" if isinstance(secs, (int, float)) else "")
    out.print(table)


def _smoke_checks_markdown(result: "object") -> str:
    checks = result.probe.get("checks") or []
    if not checks:
        return ""
    lines = ["", "| check | status | seconds |", "|---|---|---|"]
    for c in checks:
        secs = c.get("seconds")
        lines.append(f"| {c.get('name')} | {c.get('status')} | {f'{secs:.2f}' if isinstance(secs, (int, float)) else ''} |")
    return "\n".join(lines) + "\n"

# ---------------------------------------------------------------- check (#5)


@app.command("check")
def check_cmd(
    prefix: Optional[Path] = typer.Option(None, "--prefix", "-p", help="Environment prefix to check."),
    name: Optional[str] = typer.Option(None, "--name", "-n", help="Named environment to check."),
    lockfile: Optional[Path] = typer.Option(
        None, "--lockfile", help="Lock to compare against (default: conda-lock.yml beside environment.yml here)."),
    files: bool = typer.Option(False, "--files", help="Check every conda-meta file exists with its recorded size."),
    deep: bool = typer.Option(False, "--deep", help="Also re-hash every file against its recorded sha256."),
    no_smoke: bool = typer.Option(False, "--no-smoke", help="Skip the smoke test (runs no interpreter)."),
    fmt: str = typer.Option("text", "--format", help="text, json or markdown."),
    core: Optional[str] = typer.Option(
        None, "--core", help="Comma-separated core package patterns for pip-over-conda (default: torch, numpy, "
        "nvidia-*, cuda-*, mkl, ...)."),
    strict: bool = typer.Option(False, "--strict", help="Exit 1 on warnings too."),
    smoke_timeout: float = typer.Option(300.0, "--smoke-timeout", help="Seconds before the smoke test is killed."),
) -> None:
    """Verify an installed environment against its lock, its policy and its hardware."""
    import json

    from envguard.check import run_check
    from envguard.errors import UserError

    if fmt not in ("text", "json", "markdown"):
        raise UserError(f"unknown format {fmt!r}", key="--format", fix="use text, json or markdown")
    if smoke_timeout <= 0:
        raise UserError(f"timeout must be positive, got {smoke_timeout:g}", key="--smoke-timeout",
                        fix="e.g. --smoke-timeout 300")
    core_list = [c.strip() for c in core.split(",") if c.strip()] if core else None
    report = run_check(prefix, name=name, lockfile=lockfile, files=files, deep=deep, smoke=not no_smoke,
                       core=core_list, strict=strict, smoke_timeout=smoke_timeout)
    if fmt == "json":
        sys.stdout.write(json.dumps(report.to_json(), indent=2) + "\n")
    elif fmt == "markdown":
        from envguard.report import findings_to_markdown

        sys.stdout.write(findings_to_markdown(_check_title(report), report.findings))
    else:
        out.print(_check_title(report), markup=False)
        print_findings(report.findings)
    raise typer.Exit(report.exit_code)


def _check_title(report: "object") -> str:
    from envguard.redact import redact

    r = report  # envguard.check.CheckReport
    parts = [f"envguard check {redact(str(r.prefix))}", f"{r.kind}", f"python {r.python_version or '?'}",
             r.platform]
    if r.torch is not None and r.torch.source != "none":
        build = f"CUDA {r.torch.cuda}" if r.torch.cuda else ("CPU" if r.torch.cpu else "build unknown")
        parts.append(f"torch {r.torch.version} ({build})")
    parts.append(f"lock {redact(r.lock_file)}" if r.lock_file else "no lock")
    return " · ".join(parts)
# ---------------------------------------------------------------- diff (#6)


@app.command("diff")
def diff_cmd(
    a: Optional[str] = typer.Argument(None, metavar="A", help="environment.yml, conda-lock.yml, explicit file, "
                                      "export, pixi.lock, check report, prefix directory or name:NAME."),
    b: Optional[str] = typer.Argument(None, metavar="B", help="The other side, in any of the same forms."),
    name: Optional[list[str]] = typer.Option(
        None, "--name", "-n", help="A named environment; fills side B (or A and B when given twice)."),
    platform: Optional[str] = typer.Option(None, "--platform", help="Platform to compare (default: this host's "
                                           "when both sides have it, else the only common one)."),
    all_platforms: bool = typer.Option(False, "--all-platforms", help="Compare every platform both sides have."),
    a_platform: Optional[str] = typer.Option(None, "--a-platform", help="Platform of side A (overrides --platform)."),
    b_platform: Optional[str] = typer.Option(None, "--b-platform", help="Platform of side B (overrides --platform)."),
    kind: Optional[str] = typer.Option(None, "--kind", help="Kind of both sides instead of detecting it: "
                                       "environment, conda-lock, explicit, export, pixi, prefix, report."),
    a_kind: Optional[str] = typer.Option(None, "--a-kind", help="Kind of side A only."),
    b_kind: Optional[str] = typer.Option(None, "--b-kind", help="Kind of side B only."),
    environment: Optional[str] = typer.Option(None, "--environment", "-e", help="pixi.lock environment (both sides)."),
    a_environment: Optional[str] = typer.Option(None, "--a-environment", help="pixi.lock environment of side A."),
    b_environment: Optional[str] = typer.Option(None, "--b-environment", help="pixi.lock environment of side B."),
    fmt: str = typer.Option("text", "--format", help="text, markdown (for a pull-request comment) or json."),
    exit_zero: bool = typer.Option(False, "--exit-zero", help="Exit 0 even when the sides differ."),
) -> None:
    """Compare two environment descriptions: what changed, and which changes matter."""
    import json

    from envguard.errors import UserError
    from envguard.redact import redact
    from envguard.sources import NAME_PREFIX
    from envguard.sources.compare import SideArgs, compare

    if fmt not in ("text", "json", "markdown"):
        raise UserError(f"unknown format {fmt!r}", key="--format", fix="use text, markdown or json")
    if platform and all_platforms:
        raise UserError("--platform and --all-platforms exclude each other", key="--platform",
                        fix="give one of them")
    sides = [s for s in (a, b) if s] + [NAME_PREFIX + n for n in (name or [])]
    if len(sides) != 2:
        raise UserError(f"need two sides to compare, got {len(sides)}", key="A B",
                        fix="envguard diff OLD NEW (a file, a prefix directory, name:NAME or -n NAME)")
    result = compare(
        SideArgs(sides[0], a_kind or kind, a_platform, a_environment or environment),
        SideArgs(sides[1], b_kind or kind, b_platform, b_environment or environment),
        platform=platform, all_platforms=all_platforms,
    )
    if fmt == "json":
        sys.stdout.write(redact(json.dumps(result.to_dict(), indent=2, ensure_ascii=False)) + "\n")
    elif fmt == "markdown":
        from envguard.diff import to_markdown

        sys.stdout.write(redact(to_markdown(result)))
    else:
        _print_diff(result)
    raise typer.Exit(0 if result.equal or exit_zero else int(ExitCode.PROBLEMS))


def _print_diff(result: "object", max_unrequested: int = 25) -> None:
    from rich.table import Table
    from rich.text import Text

    from envguard.diff import LABELS, describe
    from envguard.redact import redact

    r = result  # envguard.diff.DiffResult
    out.print(Text(f"A: {redact(r.a.describe())}\nB: {redact(r.b.describe())}"))
    style = {"error": "bold red", "warning": "yellow", "info": ""}
    for pd in r.platforms:
        if not pd.changes:
            continue
        table = Table(title=Text(redact(pd.label)), expand=False)
        for col in ("package", "change", "A", "B", "note"):
            table.add_column(col, overflow="fold")
        for c in pd.changes:
            a = describe(c.old) if c.old or c.old_spec is None else redact(c.old_spec)
            b = describe(c.new) if c.new or c.new_spec is None else redact(c.new_spec)
            table.add_row(Text(c.name, style="bold" if c.core else ""),
                          Text(", ".join(LABELS[k] for k in c.kinds), style=style[c.severity]),
                          Text(a), Text(b), Text(redact(c.detail)))
        out.print(table)
    for rep in r.spec_reports:
        where = f" on {rep.platform}" if rep.platform else ""
        table = Table(title=Text(f"requested specs ({r.spec_side}) against the lock{where}"), expand=False)
        for col in ("", "spec", "locked", "note"):
            table.add_column(col, overflow="fold")
        for chk in rep.checks:
            ok = chk.status == "satisfied"
            table.add_row(Text("ok" if ok else chk.status, style="green" if ok else "bold red"),
                          Text(redact(chk.spec.spec)), Text(describe(chk.locked)), Text(redact(chk.reason)))
        out.print(table)
        if rep.unrequested:
            names = [p.name for p in rep.unrequested]
            more = f", … (+{len(names) - max_unrequested})" if len(names) > max_unrequested else ""
            out.print(Text(f"{len(names)} locked packages nobody asked for directly{where}: "
                           f"{', '.join(names[:max_unrequested])}{more}", style="dim"))
    for n in r.notes:
        out.print(Text(f"note: {redact(n)}", style="dim"))
    out.print(Text(redact(r.summary()), style="bold" if not r.equal else "green"))


# ---------------------------------------------------------------- init, lint (#7)


@app.command("init")
def init_cmd(
    python: Optional[str] = typer.Option(None, "--python", help="Python release: 3.11 (default) or 3.10 (legacy)."),
    torch: Optional[str] = typer.Option(None, "--torch", metavar="X.Y",
                                        help="PyTorch release (default: the newest in the data for the channel)."),
    cuda: Optional[str] = typer.Option(None, "--cuda", metavar="X.Y|cpu",
                                       help="CUDA line such as 12.6 or 13.0, or cpu (default: cpu)."),
    channel: Optional[str] = typer.Option(None, "--channel",
                                          help="conda-forge (default) or pytorch (legacy, torch <= 2.5)."),
    platforms: Optional[list[str]] = typer.Option(
        None, "--platform", "-p", help="Platform(s) to lock (default: linux-64, osx-arm64, win-64; CUDA: "
        "linux-64, win-64)."),
    name: Optional[str] = typer.Option(None, "--name", help="Environment name (default: the directory's name)."),
    force: bool = typer.Option(False, "--force", help="Overwrite an existing file."),
    output: Path = typer.Option(Path("environment.yml"), "--output", "-o", help="File to write."),
) -> None:
    """Write an environment.yml for PyTorch from templates; refuses combinations that do not exist."""
    from envguard.init import init

    result = init(python=python, torch=torch, cuda=cuda, channel=channel, platforms=platforms or None, name=name,
                  output=output, force=force)
    for w in result.warnings:
        warn(w)
    build = "CPU" if result.cuda == "cpu" else f"CUDA {result.cuda}"
    out.print(f"wrote {result.path}: Python {result.python}, torch {result.torch} ({build}) from "
              f"{result.channel} for {', '.join(result.platforms)}", markup=False)
    out.print("next: envguard lock", markup=False)


@app.command("lint")
def lint_cmd(
    files: Optional[list[Path]] = typer.Argument(
        None, help="Environment or lock files (default: environment.yml and conda-lock.yml here)."),
    fmt: str = typer.Option("text", "--format", help="text, json or markdown."),
) -> None:
    """Check environment files and lock files for known-bad PyTorch setups (exit 1 on errors)."""
    import json

    from envguard.errors import UserError
    from envguard.findings import has_errors
    from envguard.lint import default_targets, lint_paths

    if fmt not in ("text", "json", "markdown"):
        raise UserError(f"unknown format {fmt!r}", key="--format", fix="use text, json or markdown")
    targets = list(files) if files else default_targets(Path("."))
    result = lint_paths(targets)
    for message in result.unreadable:
        err.print(f"[red]error:[/red] {_escape(_lint_redact(message))}", markup=True)
    if fmt == "json":
        from envguard.report import findings_to_json, summary_line

        doc = {"files": [_lint_redact(f) for f in result.files], "findings": findings_to_json(result.findings),
               "unreadable": [_lint_redact(m) for m in result.unreadable], "summary": summary_line(result.findings)}
        sys.stdout.write(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    elif fmt == "markdown":
        from envguard.report import findings_to_markdown

        sys.stdout.write(findings_to_markdown(f"envguard lint: {', '.join(result.files)}", result.findings))
    else:
        print_findings(result.findings, title=f"envguard lint: {', '.join(result.files)}")
    if result.unreadable:
        raise typer.Exit(int(ExitCode.USAGE))
    raise typer.Exit(int(ExitCode.PROBLEMS) if has_errors(result.findings) else int(ExitCode.OK))


def _lint_redact(text: str) -> str:
    from envguard.redact import redact

    return redact(str(text))

# ---------------------------------------------------------------- entry point


def run(argv: list[str] | None = None) -> int:
    """Run the CLI and return its exit code (never raises, never exits)."""
    try:
        # With standalone_mode=False click *returns* the code of a typer.Exit instead of raising it.
        rv = app(args=argv, prog_name="envguard", standalone_mode=False)
        return int(rv) if isinstance(rv, int) else 0
    except typer.Exit as e:
        return int(e.exit_code)
    except typer.Abort:
        err.print("interrupted")
        return int(ExitCode.INTERRUPTED)
    except _ClickException as e:
        if type(e).__name__ == "NoArgsIsHelpError":  # bare `envguard`: the help text
            e.show(file=sys.stderr)
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
        err.print(f"[red]error:[/red] {_escape(redact(where))}: {_escape(redact(message))} "
                  f"(fix: see `{_escape(where)} --help`)",
                  markup=True, highlight=False)
        return int(ExitCode.USAGE)
    except EnvguardError as e:
        from envguard.redact import redact

        if _state["verbose"]:
            import traceback

            traceback.print_exc()
        err.print(f"[red]error:[/red] {_escape(redact(e.message))}", markup=True)
        return int(e.exit_code)
    except KeyboardInterrupt:
        err.print("interrupted")
        return int(ExitCode.INTERRUPTED)
    except Exception as e:  # a bug: one line, unless asked for more
        if _state["verbose"]:
            import traceback

            traceback.print_exc()
        from envguard.redact import redact

        detail = _escape(redact(" ".join(str(e).split())))
        err.print(f"[red]internal error:[/red] {type(e).__name__}: {detail} (rerun with --verbose for a traceback)")
        return int(ExitCode.BACKEND)


def main() -> None:
    code = run(sys.argv[1:])
    # py-rattler's async runtime can crash during interpreter finalisation
    # (SIGSEGV/SIGABRT in ~1-3% of runs, see engine-notes.md). Run the atexit
    # handlers and flush ourselves, then leave without finalising.
    import atexit

    try:
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(code)
