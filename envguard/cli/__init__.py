"""The command line: every command and its options.

Each command parses its arguments, calls a plain function that returns a
result, renders that result and maps it onto an exit code. Errors derived from
:class:`envguard.errors.EnvguardError` become one line on stderr; anything
else is a bug, shown in full only with ``--verbose``.

The package: app.py (the group, shared options, --verbose/--version), one module per family of commands
(specs.py, environments.py, measure.py, live.py), workflow.py (a command that runs two wings: create, then
check) and entry.py (argv to exit code). The commands are registered here,
in one list, so --help lists them in this order.
"""

from envguard.cli import environments, live, measure, specs
from envguard.cli.app import Command, app, fail
from envguard.cli.entry import main, run

# the order a project meets them (README, "The workflow")
for _name, _command in (
    ("init", specs.init_cmd), ("lint", specs.lint_cmd), ("lock", specs.lock_cmd), ("why", specs.why_cmd),
    ("create", environments.create_cmd), ("check", environments.check_cmd), ("smoke", environments.smoke_cmd),
    ("diff", specs.diff_cmd), ("export", environments.export_cmd), ("tune", measure.tune_cmd),
    ("fleet", measure.fleet_cmd), ("run", live.run_cmd), ("shell", live.shell_cmd),
    ("shell-hook", live.shell_hook_cmd),
):
    # run: what follows the command's name is the command's own (`envguard run python -c ...`), not envguard's
    app.command(_name, cls=Command,
                context_settings={"allow_interspersed_args": False} if _name == "run" else None)(_command)

__all__ = ["app", "fail", "main", "run"]
