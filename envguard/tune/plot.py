"""``--plot FILE``: throughput against workers, one line per setting, as PNG or SVG.

matplotlib is an optional extra (``torch-envguard[plot]``: matplotlib); without it the terminal chart
(``formats.text_chart``) is all there is, and ``--plot`` says so in one line before any trial runs.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any


def matplotlib_missing() -> str | None:
    """Why matplotlib cannot be used here, or None when it can."""
    try:
        import matplotlib  # noqa: F401
    except Exception as e:  # noqa: BLE001 - ImportError, or a broken install
        return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
    return None


def write_plot(result: Any, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")  # files only: never a window
    import matplotlib.pyplot as plt

    from envguard.tune.formats import series

    data = series(result)
    rec = result.recommended
    fig, ax = plt.subplots(figsize=(7.5, 4.5), dpi=110)
    try:
        for name, pts in sorted(data.items()):
            xs, ys = [p[0] for p in pts], [p[1] for p in pts]
            ax.plot(xs, ys, marker="o", linestyle="-" if len(pts) > 1 else "none", label=name)
        if rec is not None:  # at its mean, where its line's point is
            ax.plot([rec.num_workers], [result.results()[rec]], marker="*", markersize=16, color="black",
                    linestyle="none", label="recommended")
        ticks = sorted({x for pts in data.values() for x, _ in pts})
        if ticks:
            ax.set_xticks(ticks)
        ax.set_xlabel("num_workers")
        ax.set_ylabel("samples/s (per epoch, worker start-up included)")
        ds = (result.inspect.get("dataset") or {}).get("label", "")
        ax.set_title(f"envguard tune: {ds}, batch {result.options.get('batch_size')}, "
                     f"step {result.options.get('step_ms'):g} ms", fontsize=10)
        ax.grid(True, alpha=0.3)
        ax.set_ylim(bottom=0)
        if data:
            ax.legend(fontsize=8)
        fig.tight_layout()
        image = io.BytesIO()
        fig.savefig(image, format=path.suffix.lower().lstrip("."))
    finally:
        plt.close(fig)
    from envguard.publish import publish

    publish(path, image.getvalue())  # whole, or not at all (a full disk, a read-only file system)
    return path
