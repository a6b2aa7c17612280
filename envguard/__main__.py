"""The ``envguard`` command (``python -m envguard`` and the console script).

Ctrl-C at any moment is one line and exit 130 (README, "Exit codes"). While the CLI is still being imported
(typer, rich: the first tenth of a second) a KeyboardInterrupt would surface as a traceback from the middle
of an import, so until then SIGINT ends the process directly; from then on it is a KeyboardInterrupt that
the commands handle (create reports the state its target is in) and envguard.cli.main turns into exit 130.
SIGTERM is handled the same way, with "terminated" and exit 143.
"""

import os
import signal


def _interrupted(signum: int, _frame: object) -> None:
    # no command has begun: what remains is what was there (issue #38 point 8: a bare line said nothing)
    if signum == signal.SIGTERM:  # SIGTERM is handled like Ctrl-C, with the shell's code for it (143)
        os.write(2, b"terminated (SIGTERM) while envguard was starting: nothing was changed\n")
        os._exit(143)
    os.write(2, b"interrupted while envguard was starting: nothing was changed\n")
    os._exit(130)


def main() -> None:
    signal.signal(signal.SIGINT, _interrupted)
    signal.signal(signal.SIGTERM, _interrupted)
    from envguard.cli import main as cli_main

    cli_main()


if __name__ == "__main__":
    main()
