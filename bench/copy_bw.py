"""Best host<->device copy bandwidth this machine reaches (the reference for the smoke probe's pinned copy).

Standalone (torch only), run with the interpreter under test: prints one JSON document.
Pinned and pageable host->device copies of 4 MiB to 1 GiB, plus pinned device->host, each timed with
CUDA events over several repetitions; ``best_h2d_gbps`` is the maximum over all of them.
"""

from __future__ import annotations

import json
import sys


def _gbps(torch, src, dst, reps: int) -> float:  # torch passed in to keep imports local
    dst.copy_(src, non_blocking=True)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        dst.copy_(src, non_blocking=True)
    end.record()
    torch.cuda.synchronize()
    ms = start.elapsed_time(end)
    return src.numel() * src.element_size() * reps / (ms / 1000.0) / 1e9 if ms > 0 else 0.0


def main() -> int:
    import torch

    if not torch.cuda.is_available():
        print(json.dumps({"available": False, "torch": torch.__version__, "cuda": torch.version.cuda}))
        return 1
    rows = []
    for mib in (4, 16, 64, 256, 1024):
        n = mib * 1024 * 1024
        dev = torch.empty(n, dtype=torch.uint8, device="cuda")
        pinned = torch.empty(n, dtype=torch.uint8).pin_memory()
        pageable = torch.empty(n, dtype=torch.uint8)
        reps = max(3, 2048 // mib)
        rows.append({"mib": mib, "reps": reps,
                     "h2d_pinned_gbps": round(_gbps(torch, pinned, dev, reps), 2),
                     "h2d_pageable_gbps": round(_gbps(torch, pageable, dev, max(2, reps // 4)), 2),
                     "d2h_pinned_gbps": round(_gbps(torch, dev, pinned, reps), 2)})
        del dev, pinned, pageable
    best = max(max(r["h2d_pinned_gbps"], r["h2d_pageable_gbps"]) for r in rows)
    print(json.dumps({"available": True, "device": torch.cuda.get_device_name(0), "torch": torch.__version__,
                      "cuda": torch.version.cuda, "rows": rows, "best_h2d_gbps": best}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
