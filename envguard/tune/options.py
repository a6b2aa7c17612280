"""What one ``envguard tune`` is asked to do: every option of :func:`envguard.tune.tune`, with its default,
in one frozen value that the command layer (envguard/cli/), bench/ and the tests build."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from envguard.tune.search import Settings

DEFAULT_BUDGET = 60.0


@dataclass(frozen=True)
class TuneOptions:
    """``python`` (else ``prefix``/``name``, else the active environment) is the interpreter to tune in.
    ``dataset`` (``MODULE:FACTORY``) or ``demo``. ``batch_size``: default the factory's, else 32. ``step_ms``:
    the simulated training step (``busy``: spinning a CPU instead of sleeping). ``budget`` bounds the search
    (seconds, from the start); ``timeout`` (default: budget + 120 s, at least twice the budget) is the hard
    limit after which everything is stopped (exit 124). ``trial_timeout`` (default 60 s) is the longest one
    trial may take before it counts as hung. ``current``: the present settings, to measure the gain against.
    ``h2d``: ``auto`` copies batches to the GPU when CUDA is available, ``cpu`` runs the same path into host
    memory (no GPU), ``off`` never. ``strategy="grid"`` measures the whole space (the benchmark's peer);
    ``candidates`` measures exactly those settings after the current ones, in order and repeats included,
    with no search. ``cwd``: where the dataset module is found. ``on_trial`` is called with each result."""

    python: str | os.PathLike[str] | None = None
    prefix: str | os.PathLike[str] | None = None
    name: str | None = None
    dataset: str | None = None
    demo: bool = False
    batch_size: int | None = None
    step_ms: float = 0.0
    busy: bool = False
    budget: float = DEFAULT_BUDGET
    current: str | Settings | None = None
    max_workers: int | None = None
    timeout: float | None = None
    trial_timeout: float | None = None
    strategy: str = "adaptive"
    h2d: str = "auto"
    cwd: str | os.PathLike[str] | None = None
    candidates: list[Settings] | None = None
    on_trial: Callable[[dict[str, Any]], None] | None = None
