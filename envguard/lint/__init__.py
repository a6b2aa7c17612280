"""``envguard lint``: static rules for environment files and lock files.

Pure: reads files, runs nothing. Every rule has a stable code (``EG1xx``,
listed in :data:`RULES` and in docs/commands/lint.md), a severity, a message naming the
exact line, and a fix. Release facts (which torch supports which Python and
CUDA line, which channel is frozen) come from ``envguard/data/compat.yaml``
through :mod:`envguard.compat`; structural checks of environment files
(unknown keys, credentials, ``pip:`` without ``pip``, unparseable specs) come
from :func:`envguard.lock.spec.validate`, so ``lint`` and ``lock`` agree.

Lock files (conda-lock.yml, pixi.lock, explicit files) are read by
:mod:`envguard.sources` and checked by :mod:`envguard.lint.locks`; pixi manifests
(pixi.toml, pyproject.toml with [tool.pixi]) by :mod:`envguard.lint.manifest`, with
the same rules as environment files, once per pixi environment. The mixing rules
(channels, CUDA lines across conda and pip, torch from two managers) are
:mod:`envguard.mixing`'s, for every kind. Every file's raw text is scanned for
literal credentials, whatever its kind, even one lint cannot otherwise read.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from envguard.errors import UserError
from envguard.findings import Finding
from envguard.lint.constraints import release_lines
from envguard.lint.envfile import lint_environment
from envguard.lint.reading import lint_kind, raw_credentials
from envguard.lint.rules import MIX_CODES, RULES, Rule

ENV_FILE_NAMES = ("environment.yml", "environment.yaml")


@dataclass
class LintResult:
    findings: list[Finding] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)  # one-line messages (exit 2)

    @property
    def summary(self) -> str:
        """One line; never "no findings" beside a file that could not be read."""
        from envguard.report import summary_line

        if not self.unreadable:
            return summary_line(self.findings)
        n = len(self.unreadable)
        unread = f"{n} file{'s' * (n != 1)} could not be read"
        if self.findings:
            return f"{summary_line(self.findings)}; {unread}"
        linted = len(self.files) - n
        return unread + (f"; nothing to report in the other {linted}" if linted > 0 else "")

    @property
    def exit_code(self) -> int:
        """2 a file could not be read > 1 an error finding > 0."""
        from envguard.errors import ExitCode
        from envguard.findings import has_errors

        if self.unreadable:
            return int(ExitCode.USAGE)
        return int(ExitCode.PROBLEMS) if has_errors(self.findings) else int(ExitCode.OK)

    @property
    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for f in self.findings:
            out[f.code] = out.get(f.code, 0) + 1
        return out


class LintReadError(UserError):
    """A file lint cannot read; ``findings`` holds what its raw text showed anyway (literal credentials)."""

    def __init__(self, cause: UserError, findings: list[Finding]) -> None:
        super().__init__(cause.message)
        for attr in ("file", "key", "line", "column", "problem", "reason", "fix", "command"):
            setattr(self, attr, getattr(cause, attr, None))
        self.findings = findings


def lint_text(text: str, path: str = "environment.yml", base_dir: Path | None = None) -> list[Finding]:
    """Lint file content already in memory; ``path`` is only used to name the file.

    A file lint cannot read raises :class:`LintReadError`, whose ``findings`` are what the raw text showed.
    """
    if not text.strip():
        raise UserError("empty file", file=path, fix="pass an environment file or a lock file")
    try:
        kind, data = lint_kind(path, text)
        if kind == "environment":
            from envguard.lint.workspace_rules import spec_named_as_lock

            found = spec_named_as_lock(path) + lint_environment(path, text, base_dir or Path(path).parent)
        elif kind == "pixi-manifest":
            from envguard.lint.manifest import lint_manifest

            found = lint_manifest(path, text, data)
        else:
            from envguard.lint.locks import lint_lock

            found = lint_lock(kind, path, text, data)
    except UserError as e:
        raise LintReadError(e, raw_credentials(path, text, None, [])) from None
    return found + raw_credentials(path, text, kind, found)


def lint_file(path: str | Path) -> list[Finding]:
    """Lint one file of any supported kind; an unreadable file raises :class:`UserError`."""
    from envguard.yamlio import read_text

    return lint_text(read_text(path), str(path), Path(path).parent)


def default_targets(directory: str | Path = ".") -> list[Path]:
    """environment.yml (and conda-lock.yml when present, or in a project with variants each variant's
    conda-lock.<name>.yml) in ``directory``."""
    d = Path(directory)
    if Path(directory) == Path("."):  # the project's, from a subdirectory too (envguard.project), shown from here
        from envguard.project import project_dir

        found = project_dir()
        d = Path(os.path.relpath(found)) if found != Path.cwd() else d
    env = next((d / n for n in ENV_FILE_NAMES if (d / n).is_file()), None)
    if env is None:
        raise UserError(f"no environment.yml in {d.resolve()}", fix="pass the files to lint, or run `envguard init`")
    from envguard.project import lock_for_spec
    from envguard.variants import declared_variants

    try:  # a project with variants (docs/variants.md): each variant's lock
        variant_locks = [v.lockfile for v in declared_variants(env)]
    except UserError as e:  # a file in variants/ that is no overlay: linted, so that its problem is reported
        return [env, Path(e.file)] if e.file else [env]
    locks = variant_locks or [lock_for_spec(env)]
    return [env, *(lock for lock in locks if lock.is_file())]


def lint_paths(paths: Iterable[str | Path]) -> LintResult:
    """Lint every file; unreadable ones are reported in ``unreadable``, the rest still linted."""
    result = LintResult()
    for p in paths:
        result.files.append(str(p))
        try:
            result.findings += lint_file(p)
        except UserError as e:
            result.unreadable.append(e.message)
            result.findings += getattr(e, "findings", [])  # a secret in an unreadable file is still reported
    return result


__all__ = [
    "MIX_CODES",
    "RULES",
    "LintReadError",
    "LintResult",
    "Rule",
    "default_targets",
    "lint_environment",
    "lint_file",
    "lint_paths",
    "lint_text",
    "release_lines",
]
