"""The commands that measure: fleet (one verdict over many nodes' check reports) and tune (the user's
DataLoader). Registered by envguard/cli/__init__.py."""

from pathlib import Path
from typing import Annotated

import typer

from envguard.cli.app import (
    check_format,
    flag,
    format_option,
    lockfile_option,
    name_option,
    option,
    prefix_option,
)

# ---------------------------------------------------------------- fleet


def fleet_cmd(
    reports: Annotated[list[str], typer.Argument(metavar="REPORT... | DIR",
        help="`envguard check --format json` reports, or directories of them.")],
    lockfile: Annotated[Path | None, lockfile_option(
        help="The lock the nodes should match (default: compare with the majority).")] = None,
    fmt: Annotated[str, format_option()] = "text",
    details: Annotated[bool, flag("--details",
        help="Text: every package change and finding of each group (default: counts per change class and "
             "per finding code).")] = False,
) -> None:
    """One verdict over many nodes' check reports: groups, their nodes and what differs."""
    from envguard.fleet import run_fleet
    from envguard.fleet.render import show

    check_format(fmt)
    result = run_fleet(reports, lockfile=lockfile)
    show(result, fmt, details=details)
    raise typer.Exit(result.exit_code)


# ---------------------------------------------------------------- tune


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
    from envguard.tune import TuneOptions, check_plot, tune
    from envguard.tune.render import progress, show

    check_format(fmt)
    plot_path = check_plot(plot) if plot is not None else None  # before any trial runs
    result = tune(TuneOptions(prefix=prefix, name=name, dataset=dataset, demo=demo, batch_size=batch_size,
                              step_ms=step_ms, busy=busy, budget=budget, current=current, max_workers=max_workers,
                              timeout=timeout, on_trial=progress if fmt == "text" else None))
    show(result, fmt, plot_path)
    raise typer.Exit(result.exit_code)

