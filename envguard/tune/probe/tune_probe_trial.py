"""One trial of the tune probe, in its own process: the user's DataLoader with one set of settings, a warm-up
epoch and a measured one (rate, waits, CPU, memory, /dev/shm, file descriptors), and the host-to-device copy.

Standalone like its entry point: the standard library and torch only, never envguard (the target
environment does not have it).
"""

from __future__ import annotations

import math
import os
import time

from tune_probe_dataset import Indexed, Prefix, _Chain
from tune_probe_host import cpu_seconds, mem_of, open_fds, shm_state
from tune_probe_isolation import progress
from tune_probe_shared import _err, _tb, batch_len, event, is_pinned, tensors_in, torch

MEASURE_S = 3.0  # the measured epoch stops after this long (once every worker delivered twice)

_KEEP: list = []


class Trial:
    def __init__(self, user: dict, info: dict, req: dict, opts: dict) -> None:
        self.user, self.info, self.req, self.opts = user, info, req, opts
        self.s = req["settings"]
        self.result: dict = {"type": "trial", "id": req.get("id"), "settings": self.s, "status": "ok"}
        self.phase = "setup"

    def loader(self):
        from torch.utils.data import DataLoader, SequentialSampler

        s, user = self.s, self.user
        ds = user["dataset"]
        iterable = self.info["kind"] == "iterable"
        kw: dict = {"num_workers": s["num_workers"], "pin_memory": bool(s.get("pin_memory")),
                    "collate_fn": user.get("collate_fn"), "drop_last": bool(user.get("drop_last", False)),
                    "batch_size": self.opts["batch_size"]}
        self.prefix = None
        if not iterable:
            sampler = user.get("sampler") or SequentialSampler(ds)
            kw["sampler"] = self.prefix = Prefix(sampler, int(self.req["samples"]))
            ds = Indexed(ds)
        if s["num_workers"] > 0:
            kw.update(prefetch_factor=s.get("prefetch_factor") or 2,
                      persistent_workers=bool(s.get("persistent_workers")),
                      multiprocessing_context=s.get("multiprocessing_context"),
                      timeout=float(self.req.get("dl_timeout") or 0), worker_init_fn=_Chain(user.get("worker_init_fn")))
        elif user.get("worker_init_fn") is not None:
            kw["worker_init_fn"] = user["worker_init_fn"]
        return DataLoader(ds, **kw)

    def run(self) -> dict:
        import warnings

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                self.measure()
            except BaseException as e:  # noqa: BLE001 - every failure is the trial's result
                self.result.update(status="failed", error=_err(e), traceback=_tb(e)[-3000:], phase=self.phase,
                                   worker_signals=self.worker_signals())
        msgs = []
        for w in caught:
            text = f"{w.category.__name__}: {w.message}"[:300]
            if text not in msgs:
                msgs.append(text)
        self.result["warnings"] = msgs[:5]
        # Keep the loader alive: its finaliser would join stuck workers (5 s each) before the result is
        # sent. The trial process exits without finalising; its process group is stopped as a whole.
        _KEEP.append(self)
        return self.result

    def worker_signals(self) -> list[str]:
        import signal

        names = []
        for w in getattr(getattr(self, "it", None), "_workers", []) or []:
            try:
                if w.exitcode is None and not w.is_alive():
                    w.join(1.0)
                code = w.exitcode
            except Exception:  # noqa: BLE001
                continue
            if code is not None and code < 0:
                try:
                    names.append(signal.Signals(-code).name)
                except ValueError:
                    names.append(f"signal {-code}")
        return names

    def sample(self, pids: list[int]) -> dict:
        snap: dict = {"t": time.perf_counter(), "cpu": {}, "mem": {}}
        for pid in [os.getpid()] + pids:
            snap["cpu"][pid] = cpu_seconds(pid)
            snap["mem"][pid] = mem_of(pid)
        return snap

    def measure(self) -> None:
        """Epoch 1 warms up (worker start-up, spawn's imports; every worker delivers twice), epoch 2 is
        measured: its time to the first batch (what each later epoch pays again) and its steady rate."""
        opts, s, req = self.opts, self.s, self.req
        w, b = s["num_workers"], opts["batch_size"]
        h2d = H2D(opts["h2d"], opts["step_ms"] / 1000.0, opts["busy"]) if opts.get("h2d") else None
        self.phase = "build"
        loader = self.loader()
        total = int(req["samples"])
        shm0 = shm_state()
        self.shm_peak = shm0["used"] if shm0 else None
        self.fd_peak = open_fds()
        if self.prefix is not None:
            self.prefix.n = min(total, 2 * max(w, 1) * b)
        self.phase = "warm-up epoch"
        t0 = time.perf_counter()
        self.it = iter(loader)  # starts the workers
        pids = [p.pid for p in getattr(self.it, "_workers", []) or []]
        event(trial=req.get("id"), pids=pids)
        warm = self.epoch(self.it, h2d=None, pids=pids, snapshots=False,
                          stop_samples=total if self.prefix is None else None)
        if not warm["arrivals"]:
            raise RuntimeError("the DataLoader yielded no batch")
        if self.prefix is not None:
            self.prefix.n = total
        self.phase = "measured epoch"
        t1 = time.perf_counter()
        self.it = iter(loader)  # persistent workers: the same processes; otherwise new ones
        pids = [p.pid for p in getattr(self.it, "_workers", []) or []]
        event(trial=req.get("id"), pids=pids)
        # The last epoch may stop early (nothing is left to drain): at MEASURE_S, once every worker
        # has delivered twice, so that slow settings cost no more than they tell.
        ep = self.epoch(self.it, h2d=h2d, pids=pids, snapshots=True, stop_samples=total,
                        stop_after_s=MEASURE_S, min_batches=2 * w + 2)
        if not ep["arrivals"]:
            raise RuntimeError("the DataLoader yielded no batch in the second epoch")
        self.phase = "done"
        r = self.result
        r.update(first_batch_s=round(warm["arrivals"][0] - t0, 4), warmup_s=round(warm["arrivals"][-1] - t0, 4),
                 warmup_samples=sum(warm["sizes"]))
        self.finish(t1, ep, pids)
        r["shm"] = {"free": shm0["free"] if shm0 else None,
                    "peak_delta": (self.shm_peak - shm0["used"]) if shm0 and self.shm_peak is not None else None}
        r["fds_peak"] = self.fd_peak
        r["h2d"] = h2d.report() if h2d is not None else None
        for one in (self.it, getattr(loader, "_iterator", None)):
            if one is not None and hasattr(one, "_shutdown_workers"):
                try:
                    one._shutdown_workers()
                except Exception:  # noqa: BLE001
                    pass

    def epoch(self, it, *, h2d, pids: list[int], snapshots: bool, stop_samples: int | None = None,
              stop_after_s: float | None = None, min_batches: int = 0) -> dict:
        """Consume one epoch the way a training loop does (the simulated step after each batch)."""
        opts = self.opts
        step_s, busy = opts["step_ms"] / 1000.0, opts["busy"]
        w = self.s["num_workers"]
        try:
            nb: int | None = len(self.it)
        except TypeError:
            nb = None
        k0 = max(1, min(w, (nb or 0) - 2)) if nb is not None else max(1, w)  # the steady window starts after
        ep: dict = {"arrivals": [], "sizes": [], "waits": [], "first": None, "last": None, "k0": k0}
        last_report = 0.0
        k = seen = 0
        while True:
            tw = time.perf_counter()
            try:
                batch = next(it)
            except StopIteration:
                break
            now = time.perf_counter()
            ep["arrivals"].append(now)
            ep["waits"].append(now - tw)
            ep["sizes"].append(batch_len(batch, opts["batch_size"]))
            if "batch_bytes" not in self.result:
                ts = tensors_in(batch, [])
                self.result["batch_bytes"] = sum(t.numel() * t.element_size() for t in ts)
                self.result["tensors_per_batch"] = len(ts)
            shm = shm_state()
            if shm and self.shm_peak is not None:
                self.shm_peak = max(self.shm_peak, shm["used"])
            seen += ep["sizes"][-1]
            done = (stop_samples is not None and seen >= stop_samples) or (nb is not None and k == nb - 1) \
                or (stop_after_s is not None and now - ep["arrivals"][0] >= stop_after_s and k + 1 >= min_batches)
            # Two snapshots only: reading /proc/<pid>/smaps_rollup of many large workers takes milliseconds.
            if snapshots and (k == k0 or done):
                snap = self.sample(pids)
                if ep["first"] is None:
                    ep["first"] = snap
                ep["last"] = snap
                self.fd_peak = max(self.fd_peak or 0, open_fds() or 0) or None
            if now - last_report >= 0.25:
                progress(trial=self.req.get("id"), phase=self.phase, batches=k + 1)
                last_report = now
            if h2d is not None:
                h2d.consume(batch)
            else:
                _step(step_s, busy)
            k += 1
            if done:
                break
        return ep

    def finish(self, t1: float, ep: dict, pids: list[int]) -> None:
        r = self.result
        arrivals, sizes, waits, k0 = ep["arrivals"], ep["sizes"], ep["waits"], ep["k0"]
        n, samples = len(arrivals), sum(sizes)
        start, span_all = arrivals[0] - t1, arrivals[-1] - t1
        r.update(batches=n, samples=samples, epoch_start_s=round(start, 4), measured_s=round(span_all, 4),
                 worker_pids=pids)
        lo = k0 if n - k0 >= 3 else (1 if n >= 3 else 0)
        span = arrivals[-1] - arrivals[lo]
        steady = sum(sizes[lo + 1:]) / span if span > 0 and n > lo + 1 else None
        r["steady_samples_per_s"] = round(steady, 3) if steady else None
        r["steady_batches_per_s"] = round((n - lo - 1) / span, 3) if span > 0 and n > lo + 1 else None
        r["wait_fraction"] = round(min(1.0, sum(waits[lo + 1:]) / span), 4) if span > 0 and n > lo + 1 else None
        # The repeated-epoch regime: each epoch pays its start (worker start-up again, unless persistent),
        # then delivers the rest at the rate measured after its first batch.
        epoch_n = self.info.get("length")
        epoch_n = samples if epoch_n is None or self.info["kind"] == "iterable" else self.epoch_samples(epoch_n)
        rest, b1 = span_all - start, sizes[0]
        if samples > b1 and rest > 0:
            epoch_s = start + rest * (epoch_n - b1) / (samples - b1)
        else:
            epoch_s = start * epoch_n / max(samples, 1)
        r["epoch_samples"] = epoch_n
        r["epoch_s"] = round(epoch_s, 4)
        r["samples_per_s"] = round(epoch_n / epoch_s, 3) if epoch_s > 0 else None
        r["batches_per_s"] = round(math.ceil(epoch_n / max(b1, 1)) / epoch_s, 3) if epoch_s > 0 else None
        first, last = ep["first"], ep["last"]
        if first is not None and last is not None and last is not first:
            window = max(last["t"] - first["t"], 1e-9)

            def cores(pid_list: list[int]) -> float | None:
                used = [last["cpu"][p] - first["cpu"][p] for p in pid_list
                        if last["cpu"].get(p) is not None and first["cpu"].get(p) is not None]
                return round(sum(used) / window, 3) if used else None

            main = os.getpid()
            r["cpu"] = {"main_cores": cores([main]), "workers_cores": cores(pids), "window_s": round(window, 3)}
            r["memory"] = {"main": {"start": first["mem"].get(main), "end": last["mem"].get(main)},
                           "workers": [{"pid": p, "start": first["mem"].get(p), "end": last["mem"].get(p)}
                                       for p in pids]}

    def epoch_samples(self, length: int) -> int:
        """Samples in one full epoch of the user's loader (its sampler, batch size and drop_last)."""
        sampler = self.user.get("sampler")
        try:
            n = len(sampler) if sampler is not None else length
        except TypeError:
            n = length
        if self.user.get("drop_last"):
            b = self.opts["batch_size"]
            n = (n // b) * b
        return max(n, 1)


def _step(step_s: float, busy: bool) -> None:
    """The simulated training step: sleeping (a GPU step: the host waits) or spinning a CPU."""
    if step_s <= 0:
        return
    if busy:
        end = time.perf_counter() + step_s
        while time.perf_counter() < end:
            pass
    else:
        time.sleep(step_s)


class H2D:
    """Each batch copied to the device with non_blocking=True, overlapped with the simulated step.

    On CUDA the copy is timed with CUDA events, and the host time ``.to()`` blocks is measured apart:
    from pinned memory the copy runs during the step; from pageable memory the host stages it and waits.
    ``mode == "cpu"`` is the fallback on machines without a GPU: the same path, with the copy made into
    host memory and timed on the host, so the code is exercised (not the hardware).
    """

    def __init__(self, mode: str, step_s: float, busy: bool) -> None:
        self.cuda = mode == "cuda"
        self.device = torch.device("cuda") if self.cuda else torch.device("cpu")
        self.step_s, self.busy = step_s, busy
        self.copy_s: list[float] = []
        self.block_s: list[float] = []
        self.exposed_s: list[float] = []
        self.bytes = 0
        self.pinned: bool | None = None
        self.batches = 0
        if self.cuda:
            # CUDA's start-up belongs to no batch: pay it before the workers start, as a training script
            # does when it moves its model to the GPU (fork workers never touch CUDA).
            torch.ones(1).to(self.device).sum().item()

    def consume(self, batch) -> None:
        tensors = tensors_in(batch, [])
        if self.pinned is None and tensors:
            self.pinned = is_pinned(tensors[0])
        self.bytes += sum(t.numel() * t.element_size() for t in tensors)
        self.batches += 1
        if self.cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            t = time.perf_counter()
            start.record()
            moved = [x.to(self.device, non_blocking=True) for x in tensors]
            end.record()
            self.block_s.append(time.perf_counter() - t)
            _step(self.step_s, self.busy)  # the step overlaps the copy
            t = time.perf_counter()
            end.synchronize()  # the step needs its data
            self.exposed_s.append(self.block_s[-1] + time.perf_counter() - t)
            self.copy_s.append(start.elapsed_time(end) / 1000.0)
        else:
            t = time.perf_counter()
            moved = [x.to(self.device, non_blocking=True, copy=True) for x in tensors]
            self.block_s.append(time.perf_counter() - t)
            self.copy_s.append(self.block_s[-1])
            self.exposed_s.append(self.block_s[-1])
            _step(self.step_s, self.busy)
        del moved

    def report(self) -> dict:
        n = max(len(self.copy_s), 1)
        copy = sum(self.copy_s)
        return {"device": str(self.device) if self.cuda else "cpu (fallback: no CUDA device)", "cuda": self.cuda,
                "pinned": self.pinned, "batches": self.batches, "bytes_per_batch": self.bytes // max(self.batches, 1),
                "copy_ms": round(1000 * copy / n, 4), "host_blocked_ms": round(1000 * sum(self.block_s) / n, 4),
                "exposed_ms": round(1000 * sum(self.exposed_s) / n, 4),
                "gbps": round(self.bytes / copy / 1e9, 3) if copy > 0 else None}
