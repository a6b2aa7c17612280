"""One command that runs another: `envguard create` checks the environment it built.

create and check are wings of their own and neither imports the other (docs/architecture.md: the wing
graph has no cycle). This module of the command layer runs them in sequence; it renders nothing (the
command in environments.py does).
"""

from __future__ import annotations

from dataclasses import replace

from envguard.create import CreateOptions, CreateReporter, CreateResult, create
from envguard.errors import Interrupted
from envguard.leftovers import interrupt_report


def create_and_check(options: CreateOptions, *, check: bool = True) -> CreateResult:
    """:func:`envguard.create.create` with ``options``, then `envguard check` on the environment it built
    or rebuilt (``check``; an environment left unchanged is not checked again). The environment stays
    whatever the check says; its findings decide the exit code (:attr:`CreateResult.exit_code`).

    A Ctrl-C during the check says that the new environment is in place, as one during the create says
    what the target holds then.
    """
    rep = options.reporter or CreateReporter()
    result = create(replace(options, reporter=rep))
    if not check or result.status == "unchanged":
        return result
    # lazily: `envguard create --no-check` does not pay for check's imports (bench/create.py times it)
    from envguard.check import CheckOptions, run_check

    rep.stage(f"checking the new environment (envguard check -p {result.prefix})")
    try:
        # --frozen: the lock as it is was asked for, so its spec's freshness is not held against it here
        result.check = run_check(CheckOptions(prefix=result.prefix, lockfile=result.lockfile,
                                              spec_freshness=not options.frozen, lock_kind_known=True,
                                              lock_text=result.lock_text, lock_sha256=result.lock_sha256))
    except Interrupted:
        raise
    except KeyboardInterrupt:
        raise Interrupted(interrupt_report(result.prefix, True)) from None
    return result
