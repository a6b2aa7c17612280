"""Exit codes and the errors that carry them.

Every command maps its failures onto one small, documented set of exit codes
(see README.md). The CLI catches :class:`EnvguardError` and prints its one-line
message; anything else is a bug and is shown with a traceback only under
``--verbose``.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    PROBLEMS = 1  # findings (lint errors, check findings, diff differences)
    USAGE = 2  # bad input or usage
    INTEGRITY = 3  # hash mismatch, tampering, half-built prefix
    STALE = 4  # lock missing or stale
    BUSY = 5  # another envguard holds the prefix lock
    BACKEND = 6  # solver, installer or backend failure; permissions; full disk
    SMOKE_FAILED = 7
    SMOKE_TIMEOUT = 124
    INTERRUPTED = 130
    TERMINATED = 143  # SIGTERM (Kubernetes, Slurm, `timeout`): handled like Ctrl-C, 128 + 15 like a shell


def with_fix(text: str, fix: str | None) -> str:
    """The one place that writes a fix after what went wrong: ``text (fix: fix)``, or ``text`` alone."""
    return f"{text} (fix: {fix})" if fix else text


class EnvguardError(Exception):
    """An expected failure, reported as one line with an exit code.

    What went wrong (``reason``), what to do about it (``fix``) and, where there is one, the ready-to-run
    command that does it (``command``) are kept apart, so that code deciding what to do reads fields, never
    the line; ``message`` (and ``str()``) is the line a user sees, written by :func:`with_fix`.
    """

    exit_code: ExitCode = ExitCode.BACKEND

    def __init__(self, message: str, *, fix: str | None = None, command: str | None = None,
                 exit_code: ExitCode | None = None, lines: bool = False) -> None:
        from envguard.redact import shorten_words

        # What it quotes from hostile input stays one line with its control characters escaped; ``lines``
        # keeps the line breaks of a message written as several lines on purpose (a solver's explanation).
        self.reason = shorten_words(message, keep_newlines=lines)
        self.fix = shorten_words(fix) if fix else fix
        self.command = command
        super().__init__(shorten_words(with_fix(message, fix), keep_newlines=lines))
        if exit_code is not None:
            self.exit_code = exit_code

    @property
    def message(self) -> str:
        return str(self.args[0])


class UserError(EnvguardError):
    """Bad input: names the file, the key (with line:column for YAML) and the fix."""

    exit_code = ExitCode.USAGE

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        key: str | None = None,
        line: int | None = None,
        column: int | None = None,
        fix: str | None = None,
    ) -> None:
        self.file, self.key, self.line, self.column = file, key, line, column
        from envguard.redact import shorten_words

        self.problem = shorten_words(message)  # without the file, key and fix around it
        where = ""
        if file:
            where = str(file)
            if line is not None:
                where += f":{line}"
                if column is not None:
                    where += f":{column}"
            where += ": "
        super().__init__(where + (f"{key}: " if key else "") + message, fix=fix)


class PlatformNotLocked(UserError):
    """A lock asked for a platform it holds no packages for (a conda-lock file or a pixi environment)."""


class IntegrityError(EnvguardError):
    exit_code = ExitCode.INTEGRITY


class StaleLockError(EnvguardError):
    exit_code = ExitCode.STALE


class BusyError(EnvguardError):
    exit_code = ExitCode.BUSY


class BackendError(EnvguardError):
    exit_code = ExitCode.BACKEND


def os_error(e: OSError, what: str, path: object) -> BackendError:
    """A failed write or rename as one line (exit 6): ``what`` and the path the user knows (the target, never
    a temporary name beside it), the system's reason (errno's strerror: "No space left on device",
    "Read-only file system", "Permission denied") and what to do about it."""
    import errno

    hint = {
        errno.ENOSPC: "free some space",
        errno.EDQUOT: "free some space (disk quota)",
        errno.EFBIG: "free some space, or choose a file system that takes files this large",
        errno.EACCES: "choose a writable location",
        errno.EPERM: "choose a writable location",
        errno.EROFS: "choose a location on a writable filesystem",
    }.get(e.errno or 0, "check the path")
    return BackendError(f"{what} {path}: {e.strerror or e}", fix=hint)


class Interrupted(KeyboardInterrupt):
    """Ctrl-C, carrying what the interrupted command left behind: one line, exit 130."""
