#!/usr/bin/env bash
# The smoke probe on a machine with an NVIDIA GPU, in under 3 minutes.
#
#   bench/gpu_smoke.sh            # uses $PYTHON, else python3; results in $OUT (else /tmp/gpu_smoke)
#
# 1. driver facts (nvidia-smi), 2. the standalone probe with CUDA, pinned memory and
# torch.distributed (NCCL with >= 2 GPUs, else gloo), 3. the best host->device copy bandwidth
# (bench/copy_bw.py), 4. envguard's own classification when envguard's dependencies import,
# 5. `envguard tune`'s pinned against pageable host-to-device copy of the demo's batches (bench/tune.py --h2d).
# Prints the probe's pinned host->device bandwidth as a fraction of the best copy measured.
# Installs nothing heavy: torch must already be importable (or set TORCH_WHEEL=/path/to/torch.whl to
# install that wheel into a throwaway venv; no network is needed or used).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu_smoke}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
deadline=$((SECONDS + 170))
left() { local l=$((deadline - SECONDS)); [ "$l" -lt 5 ] && l=5; echo "$l"; }

if ! "$PY" -c "import torch" >/dev/null 2>&1; then
  if [ -n "${TORCH_WHEEL:-}" ] && [ -f "$TORCH_WHEEL" ]; then
    "$PY" -m venv --system-site-packages /tmp/gpu_smoke_venv
    /tmp/gpu_smoke_venv/bin/python -m pip install -q --no-index --no-deps "$TORCH_WHEEL"
    PY=/tmp/gpu_smoke_venv/bin/python
  else
    echo "torch is not importable with $PY; set PYTHON=... or TORCH_WHEEL=..." >&2
    exit 2
  fi
fi

echo "== nvidia-smi"
timeout 20 nvidia-smi --query-gpu=driver_version,name,compute_cap,memory.total --format=csv,noheader \
  | tee "$OUT/nvidia-smi.csv" || echo "(nvidia-smi unavailable)"

echo "== probe (default mode, --distributed)"
t0=$SECONDS
timeout "$(left)" "$PY" envguard/smoke/probe/smoke_probe.py --distributed --dl-timeout 60 \
  --events "$OUT/events.jsonl" >"$OUT/probe.json" 2>"$OUT/probe.stderr"
probe_rc=$?
echo "probe exit $probe_rc in $((SECONDS - t0)) s"

echo "== distributed smoke as one torchrun node, one rank per GPU (NCCL)"
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if [ "${ngpu:-0}" -ge 1 ] && "$PY" -c "import torch.distributed.run" >/dev/null 2>&1; then
  timeout "$(left)" "$PY" -m torch.distributed.run --standalone --nproc-per-node "$ngpu" --log-dir "$OUT/torchrun" \
    --redirects 3 envguard/smoke/probe/smoke_probe.py --distributed --only-distributed --join-timeout 30 \
    >"$OUT/torchrun.out" 2>&1
  echo "torchrun exit $? ($ngpu ranks; per-rank JSON in $OUT/torchrun/*/attempt_0/*/stdout.log)"
fi

echo "== best copy bandwidth"
timeout "$(left)" "$PY" bench/copy_bw.py >"$OUT/copy_bw.json" 2>"$OUT/copy_bw.stderr"
echo "copy_bw exit $?"

echo "== envguard classification"
if timeout "$(left)" "$PY" -m envguard smoke --python "$PY" --require-cuda --format json \
     >"$OUT/envguard_smoke.json" 2>"$OUT/envguard_smoke.stderr"; then
  echo "envguard smoke --require-cuda: exit 0"
else
  echo "envguard smoke --require-cuda: exit $? (see $OUT/envguard_smoke.*; exit 1/2 = envguard deps missing here)"
fi

echo "== envguard tune: the pinned-memory gain of the host-to-device copy (bench/tune.py --h2d)"
if [ "$(left)" -gt 45 ]; then
  timeout "$(left)" "$PY" bench/tune.py --python "$PY" --h2d --budget 25 --repeats 2 --step-ms 20 \
    2>&1 | tee "$OUT/tune_h2d.txt" || echo "(bench/tune.py --h2d: exit $?; envguard's dependencies needed)"
else
  echo "(skipped: under 45 s left)"
fi

"$PY" - "$OUT" <<'EOF'
import json, sys, pathlib
out = pathlib.Path(sys.argv[1])
def load(name):
    try:
        return json.loads((out / name).read_text())
    except Exception as e:  # a missing or partial file is reported, not fatal
        return {"_error": f"{name}: {e}"}
probe, bw, eg = load("probe.json"), load("copy_bw.json"), load("envguard_smoke.json")
for c in probe.get("checks", []):
    extra = c.get("error", "")[:200]
    print(f"  {c['name']:24} {c['status']:14} {c.get('seconds', 0) or 0:7.2f}s {extra}")
cuda = probe.get("cuda") or {}
print("torch", (probe.get("torch") or {}).get("version"), "cuda", (probe.get("torch") or {}).get("cuda"),
      "devices", [(d["name"], d["capability"]) for d in cuda.get("devices", [])])
if probe.get("distributed"):
    print("distributed backend", probe["distributed"].get("backend"))
pinned = next((c for c in probe.get("checks", []) if c["name"] == "pinned-memory"), {})
best = bw.get("best_h2d_gbps")
if pinned.get("status") == "pass" and best:
    d = pinned["detail"]
    print(f"pinned H2D in the probe: {d['pinned_gbps']:.1f} GB/s = {d['pinned_gbps'] / best:.0%} of the best copy "
          f"measured ({best:.1f} GB/s); pageable {d['pageable_gbps']:.1f} GB/s "
          f"({d['pageable_gbps'] / best:.0%})")
else:
    print("pinned copy:", pinned.get("status"), pinned.get("error", ""), bw.get("_error", ""))
for r in bw.get("rows", []):
    print(f"  {r['mib']:5} MiB  H2D pinned {r['h2d_pinned_gbps']:7.1f}  pageable {r['h2d_pageable_gbps']:7.1f}"
          f"  D2H pinned {r['d2h_pinned_gbps']:7.1f} GB/s")
for log in sorted(out.glob("torchrun/*/attempt_0/*/stdout.log")):
    try:
        d = json.loads(log.read_text()).get("distributed") or {}
    except Exception as e:
        print("torchrun rank", log, e)
        continue
    print(f"  rank {d.get('rank')}/{d.get('world_size')} {d.get('backend')} stage {d.get('stage')} rendezvous "
          f"{d.get('rendezvous_s')} s busbw", [(b["bytes"], b["busbw_gbps"]) for b in d.get("bandwidth", [])])
if "findings" in eg:
    print("envguard findings:", [(f["severity"], f["code"]) for f in eg["findings"]], "exit", eg.get("exit_code"))
EOF
echo "total $SECONDS s; files in $OUT"
exit $probe_rc
