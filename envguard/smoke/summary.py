"""What a smoke test proved, in one line a person reads: the checks that passed, and those that did not
with why (``envguard check``'s report says it after its title). Pure text: no rich, no I/O."""

from __future__ import annotations

from typing import Any

_CHECKS = {"import-torch": "import torch", "numpy-interop": "NumPy interop", "pinned-memory": "pinned memory",
           "cuda": "CUDA", "cuda-matmul": "CUDA matmul", "distributed": "torch.distributed",
           "dataloader-fd-limit": "DataLoader with many live batches"}


def check_label(name: str) -> str:
    """A probe check's name as a reader says it: ``dataloader:spawn`` is "DataLoader workers (spawn)"."""
    kind, _, method = name.partition(":")
    if kind == "dataloader" and method:
        return f"DataLoader workers ({method})"
    if kind == "dataloader-timeout" and method:
        return f"DataLoader timeout ({method})"
    return _CHECKS.get(name, name)


def proved_line(smoke: dict[str, Any] | None) -> str:
    """What the smoke test of ``envguard check`` ran and what each part came to, in one line:
    ``smoke test passed in 5.1 s: import torch, DataLoader workers (fork, spawn) · not exercised: pinned memory
    (no CUDA device)``. ``smoke`` is the report's summary (docs/check-schema.md)."""
    if smoke is None:  # --no-smoke, or no interpreter to run it in (a finding says which)
        return "smoke test: not run: DataLoader workers, pinned memory and CUDA are unproven"
    checks = [c for c in smoke.get("checks") or [] if isinstance(c, dict)]
    state = "timed out" if smoke.get("timed_out") else ("failed" if smoke.get("exit_code") else "passed")
    took = f" in {smoke['duration_s']:.1f} s" if isinstance(smoke.get("duration_s"), (int, float)) else ""
    groups: dict[str, list[str]] = {}
    for c in checks:
        why = f" ({c['reason']})" if c.get("reason") and c.get("status") != "pass" else ""
        groups.setdefault(str(c.get("status")), []).append(check_label(str(c.get("name"))) + why)
    words = {"pass": "", "fail": "failed: ", "not-exercised": "not exercised: ", "skip": "skipped: "}
    parts = [words.get(k, f"{k}: ") + _joined(v) for k, v in sorted(groups.items(), key=lambda kv: (
        list(words).index(kv[0]) if kv[0] in words else len(words)))]
    if not checks:
        parts = ["no check reported"]
    head = f"smoke test {state}{took}"
    if "pass" in groups:  # the checks that passed lead, after a colon
        head += f": {parts.pop(0)}"
    return " · ".join([head, *parts])


def _joined(labels: list[str]) -> str:
    """``DataLoader workers (fork)``, ``DataLoader workers (spawn)`` read as ``DataLoader workers (fork, spawn)``."""
    out: list[str] = []
    merged: dict[str, int] = {}
    for label in labels:
        if label.startswith("DataLoader workers (") and label.endswith(")"):
            if "workers" in merged:
                out[merged["workers"]] = out[merged["workers"]][:-1] + ", " + label[len("DataLoader workers ("):]
                continue
            merged["workers"] = len(out)
        out.append(label)
    return ", ".join(out)
