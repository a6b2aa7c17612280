"""The entry point: argv in, an exit code out, with every failure turned into one line (a usage error, an
:class:`envguard.errors.EnvguardError`, Ctrl-C) and only a bug shown as "internal error" (a traceback with
--verbose); the process then ends without finalising (py-rattler's runtime, engine-notes.md).

:func:`main` and :func:`run` are what envguard.cli exposes; :func:`verbose_anywhere` (``-v`` after the
subcommand too) is public for the tests that pin what it moves."""

import os
import signal
import sys
from typing import Any

import typer

from envguard import render, settings
from envguard.cli.app import app, run_state, say_interrupted
from envguard.errors import EnvguardError, ExitCode
from envguard.render import escape as _escape

# ---------------------------------------------------------------- entry point


def verbose_anywhere(argv: list[str]) -> list[str]:
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
    # `envguard run python -v x.py`: from the command's first argument on, everything is the command's
    interspersed = (getattr(command, "context_settings", None) or {}).get("allow_interspersed_args", True)
    i = cmd_at + 1
    while i < len(argv):
        arg = argv[i]
        if arg == "--" or (not interspersed and not arg.startswith("-")):
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
    run_state.update(verbose=False, interrupt_reported=False, began=False)
    output = _OutputFile.install()
    try:
        code = _run(verbose_anywhere(list(argv if argv is not None else sys.argv[1:])))
        return output.finish(code) if output is not None else code
    finally:
        if output is not None:
            output.uninstall()
        settings.set_verbose(False)
        settings.set_offline(False)


class _OutputFile:
    """Standard output when it is a regular file (``envguard check --format json > report.json``). A write
    that fails there (a full disk, a quota, the file size limit) is one line naming the file, exit 6, instead
    of an "internal error" (or, when the last bytes only fail at exit, nothing at all); what the command had
    written is cut off again, so the file is what it was before the command started, never half a report, and
    standard output goes to the null device from then on (nothing stale is flushed into the file later)."""

    def __init__(self, stream: Any, fd: int, start: int | None) -> None:
        self.stream, self.fd, self.start = stream, fd, start
        self.failure: OSError | None = None
        try:  # the file's name, read now: after a failure the descriptor is the null device's
            self.path = os.readlink(f"/proc/self/fd/{fd}") if sys.platform.startswith("linux") else ""
        except OSError:
            self.path = ""

    @classmethod
    def install(cls) -> "_OutputFile | None":
        import stat

        stream = sys.stdout
        try:
            fd = stream.fileno()
            info = os.fstat(fd)
        except (AttributeError, OSError, ValueError):  # captured (a test), closed, or no descriptor
            return None
        if not stat.S_ISREG(info.st_mode):  # a terminal or a pipe: neither fills up
            return None
        try:
            import fcntl

            appending = bool(fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_APPEND)
            # `>>`: the offset only moves at the first write, so where this run starts is the file's end
            start: int | None = info.st_size if appending else os.lseek(fd, 0, os.SEEK_CUR)
        except (ImportError, OSError):  # no fcntl (Windows): the file is left as the failure leaves it
            start = None
        output = cls(stream, fd, start)
        sys.stdout = output
        _output["now"] = output
        return output

    def uninstall(self) -> None:
        _output.pop("now", None)
        if sys.stdout is self:
            sys.stdout = self.stream

    def write(self, text: str) -> int:
        """Straight to the descriptor: a buffered text stream drops the rest of a write the disk took only
        part of (the bytes that fitted are written, the count returned is ignored) and reports nothing."""
        if self.failure is not None:  # the null device's now
            return len(text)
        try:
            self.stream.flush()  # whatever reached the stream some other way goes first
            data = (text if os.linesep == "\n" else text.replace("\n", os.linesep)).encode(
                self.stream.encoding or "utf-8", self.stream.errors or "strict")
            view = memoryview(data)
            while view:
                view = view[os.write(self.fd, view):]
        except OSError as e:
            self._failed(e)
            raise
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        try:
            self.stream.flush()
        except OSError as e:
            self._failed(e)
            raise

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, encoding, ...: the stream's own
        return getattr(self.stream, name)

    def _failed(self, error: OSError) -> None:
        if self.failure is not None:
            return
        self.failure = error
        try:
            if self.start is not None and os.fstat(self.fd).st_size > self.start:
                os.ftruncate(self.fd, self.start)
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, self.fd)
            os.close(null)
        except OSError:
            pass

    def finish(self, code: int) -> int:
        """``code``, unless standard output could not be written: then its line, and exit 6."""
        if self.failure is None:
            try:
                self.flush()  # what is still buffered fails here, not unseen at exit
            except OSError:
                pass
        if self.failure is None or code in (ExitCode.INTERRUPTED, ExitCode.TERMINATED):
            return code
        from envguard.errors import os_error
        from envguard.redact import redact

        e = os_error(self.failure, "cannot write the output to",
                     f"{self.path} (standard output)" if self.path else "standard output")
        render.err.print(f"[red]error:[/red] {_escape(redact(e.message))}", markup=True)
        return int(ExitCode.BACKEND)


_output: dict[str, _OutputFile] = {}  # the standard output file of the run under way, when it is a file


def _run(argv: list[str]) -> int:
    try:
        # With standalone_mode=False click *returns* the code of a typer.Exit instead of raising it.
        rv = app(args=argv, prog_name="envguard", standalone_mode=False)
        if rv == ExitCode.INTERRUPTED and not run_state.get("interrupt_reported"):
            return say_interrupted("interrupted")  # typer turns Ctrl-C into a silent `return 130`
        return int(rv) if isinstance(rv, int) else 0
    except typer.Exit as e:
        if isinstance(e.__cause__, KeyboardInterrupt):  # typer's silent exit 130 for Ctrl-C: say it
            return say_interrupted("interrupted")
        return int(e.exit_code)
    except typer.Abort:  # click's form of a KeyboardInterrupt
        return say_interrupted("interrupted")
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
        from envguard.redact import escape_controls

        message = escape_controls(" ".join(e.format_message().split()))
        from envguard.errors import with_fix

        line = with_fix(f"{_escape(redact(where))}: {_escape(redact(message))}", f"see `{_escape(where)} --help`")
        render.err.print(f"[red]error:[/red] {line}", markup=True, highlight=False)
        _json_error(argv, int(ExitCode.USAGE), f"{where}: {message}", reason=message, fix=f"see `{where} --help`")
        return int(ExitCode.USAGE)
    except EnvguardError as e:
        return _envguard_error(e, argv)
    except KeyboardInterrupt:
        return say_interrupted("interrupted")
    except Exception as e:  # noqa: BLE001 - a bug: one line, unless asked for more
        return _unexpected(e)


def _envguard_error(e: EnvguardError, argv: list[str]) -> int:
    """A command's one-line error, with its documented exit code; a Ctrl-C that a command's broad handler
    turned into its own error (from a library call it wraps) is still an interrupt."""
    from envguard.redact import redact

    if _caused_by_interrupt(e):
        return say_interrupted("interrupted")
    if run_state["verbose"]:
        _print_traceback()
    render.err.print(f"[red]error:[/red] {_escape(redact(e.message))}", markup=True)
    _json_error(argv, int(e.exit_code), e.message, reason=getattr(e, "problem", None) or e.reason, fix=e.fix,
                file=getattr(e, "file", None), key=getattr(e, "key", None), line=getattr(e, "line", None))
    return int(e.exit_code)


def _unexpected(e: Exception) -> int:
    """An exception no command turned into its own line: a bug ("internal error", exit 6), unless a Ctrl-C
    lies under it (Python 3.11 reports one raised in a class body's ``__set_name__`` as a RuntimeError)."""
    if _caused_by_interrupt(e):
        return say_interrupted("interrupted")
    output = _output.get("now")
    if output is not None and output.failure is not None and _in_chain(e, output.failure):
        return int(ExitCode.BACKEND)  # standard output could not be written: run() says so in its own line
    if run_state["verbose"]:
        _print_traceback()
    from envguard.redact import redact, shorten_words

    detail = _escape(redact(shorten_words(" ".join(str(e).split()))))
    hint = "" if run_state["verbose"] else " (rerun with --verbose for a traceback)"
    render.err.print(f"[red]internal error:[/red] {type(e).__name__}: {detail}{hint}")
    return int(ExitCode.BACKEND)


def _json_error(argv: list[str], code: int, message: str, **parts: Any) -> None:
    """Under ``--format json`` an error is a JSON document on stdout as well as the line on stderr
    (docs/json.md, ``envguard.error/1``); text and markdown keep stdout empty."""
    from envguard.jsonout import error_document, json_requested

    if not json_requested(argv):
        return
    import json

    from envguard.redact import redact

    names = {c.name for c in app.registered_commands}
    command = next((a for a in argv if a in names), "")
    doc = error_document(command, code, redact(message),
                         **{k: redact(v) if isinstance(v, str) else v for k, v in parts.items()})
    try:
        sys.stdout.write(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
        sys.stdout.flush()
    except (OSError, ValueError):  # a closed stdout: the line on stderr has said it
        pass


def _asks_for_help(argv: list[str]) -> bool:
    options = argv[:argv.index("--")] if "--" in argv else argv
    return bool({"-h", "--help", "--version"} & set(options))




def _caused_by_interrupt(error: BaseException) -> bool:
    """Whether a KeyboardInterrupt (Ctrl-C, or SIGTERM: envguard raises one for it) is in the chain of causes
    that ended in ``error``: Python reports some exceptions raised inside its own machinery as another one."""
    return _in_chain(error, KeyboardInterrupt)


def _in_chain(error: BaseException, wanted: BaseException | type[BaseException]) -> bool:
    """Whether ``wanted`` (an exception, or any of a type) is ``error`` or in its chain of causes."""
    seen: set[int] = set()
    cause: BaseException | None = error
    while cause is not None and id(cause) not in seen:
        if cause is wanted or (isinstance(wanted, type) and isinstance(cause, wanted)):
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return False


def _exit_interrupted(signum: int, _frame: object) -> None:
    if signum == signal.SIGTERM:
        os.write(2, b"terminated (SIGTERM)\n")
        os._exit(int(ExitCode.TERMINATED))
    os.write(2, b"interrupted\n")
    os._exit(int(ExitCode.INTERRUPTED))


def _terminated(_signum: int, _frame: object) -> None:
    """SIGTERM is Ctrl-C's twin: raised as a KeyboardInterrupt, so that every command stops and cleans up the
    same way (create reports its target, smoke ends the probe's process group and removes its work dir);
    say_interrupted then writes "terminated" and exit code 143."""
    run_state["terminated"] = True
    raise KeyboardInterrupt


def _print_traceback() -> None:
    """The traceback --verbose asks for, with credentials masked like every other message."""
    import traceback

    from envguard.redact import redact

    sys.stderr.write(redact(traceback.format_exc()))


def main() -> None:
    import atexit

    # py-rattler's async runtime can crash during interpreter finalisation (SIGSEGV/SIGABRT in ~1-3% of runs,
    # see engine-notes.md): the process ends in an exit handler instead, registered first so that it runs
    # last, after every handler the run registers (exit handlers run last-in, first-out), before finalising.
    atexit.register(_leave_unfinalised)
    try:
        # envguard.__main__ ends the process on SIGINT while the CLI is imported; from here on Ctrl-C is a
        # KeyboardInterrupt that the commands handle (run() turns it into one line and exit 130)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, _terminated)
        code = run(sys.argv[1:])
    except KeyboardInterrupt:  # between the lines above and run()'s own handler
        terminated = bool(run_state.get("terminated"))
        code = int(ExitCode.TERMINATED if terminated else ExitCode.INTERRUPTED)
        os.write(2, b"terminated (SIGTERM)\n" if terminated else b"interrupted\n")
    # leaving anyway: no traceback from the last steps
    signal.signal(signal.SIGINT, _exit_interrupted)
    signal.signal(signal.SIGTERM, _exit_interrupted)
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
