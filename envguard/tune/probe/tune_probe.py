"""envguard tune probe: measure the user's own DataLoader inside an environment.

Standalone on purpose: the standard library and torch only. The target environment does not have
envguard, so this file must never import it. It is run by path with the environment's own interpreter
(``<prefix>/bin/python tune_probe.py --serve ...``), never with ``python -c``: spawn and forkserver workers
re-import ``__main__`` by path, which is why the demo dataset and the wrappers the workers unpickle live
at module level (of an importable sibling), and why torch is imported at module level as a training script
would (a forkserver preloads ``__main__``, so its workers start with torch already imported, exactly as the
user's would).

Its parts sit beside it and obey the same rule: ``tune_probe_shared.py`` (torch, events, error texts),
``tune_probe_host.py`` (CPUs, cgroups, memory, /dev/shm, file descriptors), ``tune_probe_dataset.py`` (the
user's factory and the wrappers workers unpickle), ``tune_probe_trial.py`` (one trial's measurements and the
host-to-device copy), ``tune_probe_isolation.py`` (fork/exec, process groups, reaping). This file is the
protocol: argument parsing, ``--serve`` and ``--one-trial``.

``--serve``: load the dataset once (import the module, call the factory), inspect it, print one JSON line
(``{"type": "inspect", ...}``), then read trial requests as JSON lines on stdin and answer each with one
JSON line. Every trial runs in a fresh process: a child forked from this one (Linux), in a process group of
its own, killed with its workers when it outlives its limit, so that leaks, crashes and hangs of one trial
cannot spoil another. Elsewhere (no fork, or macOS where forking after importing torch is unsafe) a trial
is a fresh interpreter running this file with ``--one-trial``.

While it runs, file descriptor 1 points at stderr, so nothing a library prints corrupts the protocol.
The probe reports facts and real error texts; the runner in envguard decides what they mean.
"""

from __future__ import annotations

import json
import os
import sys
import time

# The probe's parts sit beside it (tune_probe_*.py). Its directory is sys.path[0] when it runs by path, but
# not under PYTHONSAFEPATH nor when it is imported as a module (tests); spawn and forkserver workers inherit
# this sys.path and unpickle the dataset wrappers from those modules by name.
_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from tune_probe_dataset import _Stage, describe, load_factory, sample_items  # noqa: E402
from tune_probe_host import inspect  # noqa: E402
from tune_probe_isolation import _subreaper, run_exec, run_forked  # noqa: E402
from tune_probe_shared import (  # noqa: E402
    _EVENTS_ENV,
    TORCH_ERROR,
    TORCH_IMPORT_S,
    _err,
    _tb,
    event,
    mp_temp_dir,
    torch,
)
from tune_probe_trial import Trial  # noqa: E402

PROBE_VERSION = 1


# --------------------------------------------------------------------------
# Module level: re-imported (spawn, forkserver) or inherited (fork) by the workers. The demo dataset is
# defined here, in ``__main__``, as a training script's own dataset would be (its class reads
# ``__main__.DemoDataset`` in the report).


class DemoDataset:
    """``--demo``: the classic slow dataset. Each sample sleeps (I/O, decoding) and is a 3x64x64 image."""

    def __init__(self, length: int = 500, sleep_s: float = 0.010, shape: tuple = (3, 64, 64)) -> None:
        self.length, self.sleep_s, self.shape = length, sleep_s, tuple(shape)

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, i: int):
        if not 0 <= i < self.length:
            raise IndexError(i)
        time.sleep(self.sleep_s)
        return torch.full(self.shape, float(i % 251)), i


def load_user(spec: str | None, demo: bool, path: str | None) -> dict:
    """The demo, or MODULE:FACTORY imported and called. Raises _Stage(stage, error) on the first thing that fails."""
    if demo:
        return {"dataset": DemoDataset(), "label": "envguard demo (500 samples, 10 ms each, 3x64x64)"}
    return load_factory(spec, path)


# --------------------------------------------------------------------------
# Entry points.


def _parse(argv: list[str]) -> dict:
    import argparse

    ap = argparse.ArgumentParser(prog="tune_probe.py", description="envguard tune probe (JSON lines on stdout)")
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--serve", action="store_true", help="inspect, then answer trial requests read from stdin")
    mode.add_argument("--one-trial", metavar="JSON", help="run one trial request and print its result")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--dataset", metavar="MODULE:FACTORY", help="the user's dataset factory")
    src.add_argument("--demo", action="store_true", help="the built-in sleeping dataset")
    ap.add_argument("--path", default=None, help="directory put first on sys.path (the user's working directory)")
    ap.add_argument("--batch-size", type=int, default=None)
    ap.add_argument("--step-ms", type=float, default=0.0, help="simulated training step per batch")
    ap.add_argument("--busy", action="store_true", help="the simulated step spins a CPU instead of sleeping")
    ap.add_argument("--h2d", choices=("auto", "cuda", "cpu", "off"), default="auto",
                    help="copy each batch to the device (auto: when CUDA is available; cpu: the fallback path)")
    ap.add_argument("--isolation", choices=("auto", "fork", "exec"), default="auto")
    ap.add_argument("--workdir", default=None, help="where per-trial stderr files go (default: a temp dir)")
    ap.add_argument("--events", default=None, help="append progress events (JSON lines) to this file")
    ns = ap.parse_args(argv)
    return {"serve": ns.serve, "one_trial": ns.one_trial, "dataset": ns.dataset, "demo": ns.demo, "path": ns.path,
            "batch_size": ns.batch_size, "step_ms": ns.step_ms, "busy": ns.busy, "h2d": ns.h2d,
            "isolation": ns.isolation, "workdir": ns.workdir, "events": ns.events}


def _setup(args: dict) -> tuple[dict | None, dict]:
    """Load and describe the dataset. Returns (user, doc); user is None when something fatal happened."""
    doc: dict = {"type": "inspect", "probe_version": PROBE_VERSION, "pid": os.getpid(),
                 "python": {"executable": sys.executable, "version": sys.version.split()[0],
                            "platform": sys.platform},
                 "torch_import_s": round(TORCH_IMPORT_S, 3), "errors": []}
    if torch is None:
        doc["torch"] = None
        doc["errors"].append({"stage": "torch", "error": TORCH_ERROR})
        return None, doc
    doc["torch"] = {"version": torch.__version__, "cuda": torch.version.cuda, "file": getattr(torch, "__file__", None)}
    event(phase="loading the dataset")
    try:
        user = load_user(args["dataset"], args["demo"], args["path"])
        info = describe(user)
    except _Stage as e:
        doc["errors"].append({"stage": e.stage, "error": _err(e.error), "traceback": _tb(e.error)})
        return None, doc
    if args["batch_size"] is None:
        args["batch_size"] = int(user.get("batch_size") or 32)
    doc["dataset"] = info
    doc["batch_size"] = args["batch_size"]
    return user, doc


def _opts(args: dict, cuda_available: bool) -> dict:
    h2d = args["h2d"]
    if h2d == "auto":
        h2d = "cuda" if cuda_available else "off"
    return {"batch_size": args["batch_size"], "step_ms": args["step_ms"], "busy": args["busy"],
            "h2d": None if h2d == "off" else h2d}


def serve(args: dict, out_fd: int) -> int:
    def emit(doc: dict) -> None:
        data = (json.dumps(doc, default=str) + "\n").encode()
        while data:
            data = data[os.write(out_fd, data):]

    if args["workdir"]:
        return _serve(args, args["workdir"], out_fd, emit)
    import shutil
    import tempfile

    workdir = tempfile.mkdtemp(prefix="envguard-tune-probe-")
    try:
        return _serve(args, workdir, out_fd, emit)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _serve(args: dict, workdir: str, out_fd: int, emit) -> int:
    user, doc = _setup(args)
    if user is None:
        emit(doc)
        return 1
    doc.update(inspect(doc["dataset"]))
    isolation = args["isolation"]
    if isolation == "auto":
        isolation = "fork" if sys.platform.startswith("linux") and hasattr(os, "fork") else "exec"
    doc["isolation"] = isolation
    opts = _opts(args, doc["cuda"]["available"])
    doc["h2d"] = opts["h2d"]
    if isolation == "fork":
        _subreaper()
    # Fetching items runs the user's code: do it in a child, so this process stays as the factory left it.
    event(phase="sampling items")
    req = {"id": "sample", "limit_s": 120}
    if isolation == "fork":
        doc["sample"] = run_forked(lambda: sample_items(user, doc["dataset"], opts), req, workdir, out_fd)
    else:
        doc["sample"] = sample_items(user, doc["dataset"], opts)
    if doc["sample"].get("status") in ("failed", "timeout", "crashed"):
        doc["errors"].append({"stage": "sample", "error": doc["sample"].get("error"),
                              "traceback": doc["sample"].get("traceback"), "index": doc["sample"].get("index")})
    emit(doc)
    while True:
        line = sys.stdin.buffer.readline()
        if not line:
            break
        try:
            req = json.loads(line)
        except ValueError:
            continue
        if req.get("op") == "quit":
            break
        if req.get("op") != "trial":
            continue
        event(phase=f"trial {req.get('id')}")
        if isolation == "fork":
            # run_forked calls it before this iteration ends, so it sees this iteration's req
            res = run_forked(lambda: Trial(user, doc["dataset"], req, opts).run(), req, workdir, out_fd)  # noqa: B023
        else:
            res = run_exec(req, args)
        res.setdefault("settings", req.get("settings"))
        emit(res)
    return 0


def one_trial(args: dict, out_fd: int) -> int:
    req = json.loads(args["one_trial"])
    user, doc = _setup(args)
    if user is None:
        err = doc["errors"][0]
        res = {"type": "trial", "id": req.get("id"), "settings": req.get("settings"), "status": "failed",
               "error": err.get("traceback") or err["error"], "headline": err["error"], "phase": err["stage"]}
    else:
        cuda = False
        if args["h2d"] == "auto":
            os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
            cuda = bool(torch.cuda.is_available())
        res = Trial(user, doc["dataset"], req, _opts(args, cuda)).run()
    data = (json.dumps(res, default=str) + "\n").encode()
    while data:
        data = data[os.write(out_fd, data):]
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parse(sys.argv[1:] if argv is None else argv)
    if args["events"]:
        os.environ[_EVENTS_ENV] = os.path.abspath(args["events"])  # inherited by every trial and worker
    real_stdout = os.dup(1)
    os.dup2(2, 1)
    event(probe_pid=os.getpid(), tmp=mp_temp_dir())
    try:
        return serve(args, real_stdout) if args["serve"] else one_trial(args, real_stdout)
    finally:
        sys.stdout.flush()
        os.close(real_stdout)


if __name__ == "__main__":
    sys.exit(main())
