#!/usr/bin/env bash
# One prepared run for a session lent an NVIDIA GPU (the `device` tool), in about 5 minutes:
# envguard's own GPU paths against a real driver, a real CUDA build of torch and a real GPU.
#
#   bash bench/gpu_session.sh      # on the GPU machine, from the repository root; results in $OUT
#
# TORCH_PY (default: python3) must import a CUDA build of torch; its environment is the one checked, and
# envguard is installed into it (the machine is thrown away after the session). envguard's dependencies
# travel as wheels in .whl/ (pip download --python-version <that Python> ..., see bench/README.md)
# because that machine reaches no index.
#   1. envguard check -p <that environment>: torch build, driver against CUDA runtime, smoke with
#      pinned memory and worker processes (text and JSON)
#   2. the same check as one torchrun node with --distributed (NCCL on the GPU)
#   3. the GPU-facing test files (the real-GPU tests run instead of skipping)
#   2b. one rank more than the GPUs under torchrun: ranks sharing a GPU (gloo, a dist-gpus warning)
#   4. bench/gpu_smoke.sh (probe, torchrun, copy bandwidth, tune's pinned-memory gain; GPU_SMOKE=0 skips it)
#   5. envguard tune --demo in that environment
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu_session}
mkdir -p "$OUT"
TORCH_PY=${TORCH_PY:-$(command -v python3)}
TORCH_PREFIX=$("$TORCH_PY" -c 'import sys; print(sys.prefix)')
log() { echo "== $* ($SECONDS s)"; }

log "setup"
nvidia-smi --query-gpu=driver_version,name,compute_cap,memory.total --format=csv,noheader
"$TORCH_PY" -c 'import torch, sys; print(sys.version.split()[0], torch.__version__, torch.version.cuda, torch.cuda.is_available())'
EG=$TORCH_PY
if [ -d .whl ]; then
  $EG -m pip install -q --no-index --no-deps --no-compile .whl/*.whl || exit 2
fi
$EG -m pip install -q --no-index --no-deps --no-build-isolation -e . >/dev/null 2>&1 \
  || export PYTHONPATH=$PWD  # envguard itself, from the tree, if setuptools cannot build it here
$EG -m envguard --version || exit 2

log "1. envguard check -p $TORCH_PREFIX"
timeout 120 $EG -m envguard check -p "$TORCH_PREFIX" 2>&1 | tee "$OUT/check.txt"
echo "exit ${PIPESTATUS[0]}"
timeout 120 $EG -m envguard check -p "$TORCH_PREFIX" --format json >"$OUT/check.json" 2>/tmp/check.stderr
echo "json exit $?"

log "2. envguard check --distributed as one torchrun node (1 rank)"
timeout 120 $EG -m torch.distributed.run --standalone --nproc-per-node 1 -m envguard check -p "$TORCH_PREFIX" \
  --distributed --format json >"$OUT/check_distributed.json" 2>"$OUT/check_distributed.stderr"
echo "exit $?"
$EG - "$OUT/check_distributed.json" <<'EOF'
import json, sys
try:
    doc = json.loads(open(sys.argv[1]).read())
except Exception as e:
    print("not JSON:", e); raise SystemExit
print("distributed:", json.dumps(doc.get("distributed"), default=str)[:800])
print("findings:", [(f.get("severity"), f.get("code")) for f in doc.get("findings", [])])
EOF

ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
log "2b. more ranks than GPUs: --nproc-per-node $((ngpu + 1)) (gloo proves the wiring, a dist-gpus warning)"
rm -rf /tmp/shared_gpu
timeout 120 $EG -m torch.distributed.run --standalone --nproc-per-node $((ngpu + 1)) --log-dir /tmp/shared_gpu \
  --redirects 3 -m envguard check -p "$TORCH_PREFIX" --no-smoke --distributed --format json \
  >/dev/null 2>"$OUT/shared_gpu.stderr"
echo "exit $?"
for f in /tmp/shared_gpu/*/attempt_0/*/stdout.log; do
  $EG - "$f" <<'EOF'
import json, sys
doc = json.loads(open(sys.argv[1]).read())
d = doc.get("distributed") or {}
print(f"rank {d.get('rank')}/{d.get('world_size')} backend {d.get('backend')} ok {d.get('ok')} exit {doc.get('exit_code')}")
for f in doc.get("findings", []):
    if f["code"] == "dist-gpus":
        print(f"  {f['severity']}: {f['message']}")
EOF
done

log "3. GPU-facing tests"
timeout 240 $EG -m pytest -q -rfEs -p no:cacheprovider tests/test_smoke.py tests/test_probe.py \
  tests/test_smoke_env.py tests/test_check.py tests/test_driver.py tests/test_tune_probe.py \
  tests/test_distributed.py tests/test_tune_search.py 2>&1 | tee "$OUT/pytest.txt" | tail -40

if [ "${GPU_SMOKE:-1}" = 1 ]; then
  log "4. bench/gpu_smoke.sh"
  OUT=/tmp/gpu_smoke PYTHON=$EG timeout 200 bash bench/gpu_smoke.sh 2>&1 | tee "$OUT/gpu_smoke.txt" | tail -40
fi

log "5. envguard tune --demo"
timeout 90 $EG -m envguard tune -p "$TORCH_PREFIX" --demo --budget 30 2>&1 | tee "$OUT/tune.log" | tail -30
log "done"
