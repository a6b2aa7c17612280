"""envguard tune probe: measure the user's own DataLoader inside an environment.

Standalone on purpose: the standard library and torch only. The target environment does not have
envguard, so this file must never import it. It is run by path with the environment's own interpreter
(``<prefix>/bin/python tune_probe.py --serve ...``), never with ``python -c``: spawn and forkserver workers
re-import ``__main__`` by path, which is why the demo dataset and the wrappers the workers unpickle live
at module level, and why torch is imported at module level as a training script would (a forkserver
preloads ``__main__``, so its workers start with torch already imported, exactly as the user's would).

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
import math
import os
import sys
import time
import traceback

_T0 = time.perf_counter()
try:
    import torch  # at module level on purpose: see the module docstring
except BaseException as _e:  # noqa: BLE001 - ImportError, OSError (undefined symbol), ...
    torch = None  # type: ignore[assignment]  # an optional import: _setup() reports it and stops
    TORCH_ERROR: str | None = f"{type(_e).__name__}: {_e}"
else:
    TORCH_ERROR = None
TORCH_IMPORT_S = time.perf_counter() - _T0

PROBE_VERSION = 1
_EVENTS_ENV = "ENVGUARD_PROBE_EVENTS"  # declared in envguard.settings (this file cannot import it)
_MAX_ERROR = 6000
METHODS = ("fork", "forkserver", "spawn")


# --------------------------------------------------------------------------
# Module level: re-imported (spawn, forkserver) or inherited (fork) by the workers.


def event(**fields: object) -> None:
    """Append one JSON line to the events file (which processes are ours; where we are)."""
    path = os.environ.get(_EVENTS_ENV)
    if not path:
        return
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, (json.dumps(fields) + "\n").encode())
        finally:
            os.close(fd)
    except OSError:
        pass


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


class ItemError(Exception):
    """``__getitem__`` raised: the message names the index and keeps the original error (chained)."""


class Indexed:
    """Wraps a map-style dataset so that an exception names the index it happened at.

    ``__getitems__`` (batched fetching, torch >= 2.1) is forwarded only when the dataset has one.
    """

    def __init__(self, dataset) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, i):
        try:
            return self.dataset[i]
        except Exception as e:
            raise ItemError(f"{type(e).__name__} in __getitem__({i}): {e}") from e

    @property
    def __getitems__(self):  # looked up by torch's fetcher as an attribute
        inner = getattr(self.dataset, "__getitems__", None)
        if not inner:
            return None

        def fetch(indices):
            try:
                return inner(indices)
            except Exception as e:
                raise ItemError(f"{type(e).__name__} in __getitems__({list(indices)[:8]}...): {e}") from e

        return fetch


class Prefix:
    """The first ``n`` indices of a sampler: a trial's epoch is a prefix of the real one and ends naturally."""

    def __init__(self, sampler, n: int) -> None:
        self.sampler, self.n = sampler, n

    def __iter__(self):
        for k, i in enumerate(self.sampler):
            if k >= self.n:
                return
            yield i

    def __len__(self) -> int:
        try:
            return min(self.n, len(self.sampler))
        except TypeError:
            return self.n


class _Chain:
    """The user's worker_init_fn, after reporting the worker's pid (for the runner's clean-up)."""

    def __init__(self, user) -> None:
        self.user = user

    def __call__(self, worker_id: int) -> None:
        event(worker_pid=os.getpid(), worker_id=worker_id)
        if self.user is not None:
            self.user(worker_id)


_PROGRESS_FD: int | None = None  # set in a trial process: its pipe to the serving process
MEASURE_S = 3.0  # the measured epoch stops after this long (once every worker delivered twice)


def progress(**fields: object) -> None:
    """A line on the trial's pipe while it runs, so a trial still loading at its limit is told from a hung one."""
    if _PROGRESS_FD is None:
        return
    try:
        os.write(_PROGRESS_FD, (json.dumps({"progress": True, **fields}) + "\n").encode())
    except OSError:
        pass


def _err(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"[:_MAX_ERROR]


def _tb(e: BaseException) -> str:
    return "".join(traceback.format_exception(type(e), e, e.__traceback__))[-_MAX_ERROR:]


# --------------------------------------------------------------------------
# Facts about the machine (Linux /proc and cgroups; harmless elsewhere).


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def _mounts(root: str) -> list[tuple[str, str, str, str]]:
    """(mount root, mount point, fstype, super options) of every cgroup mount in mountinfo."""
    out = []
    for line in (_read(root + "/proc/self/mountinfo") or "").splitlines():
        left, _, right = line.partition(" - ")
        f, r = left.split(), right.split()
        if len(f) >= 5 and len(r) >= 3 and r[0] in ("cgroup", "cgroup2"):
            out.append((f[3], f[4], r[0], r[2]))
    return out


def _cgroup_dirs(root: str) -> list[tuple[str, str, str]]:
    """(version, directory of this process's cgroup, mount point) for the cpu controller, v1 and v2."""
    found = []
    mounts = _mounts(root)
    for line in (_read(root + "/proc/self/cgroup") or "").splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "":
            wanted = [m for m in mounts if m[2] == "cgroup2"]
            version = "v2"
        elif "cpu" in controllers.split(","):
            wanted = [m for m in mounts if m[2] == "cgroup" and "cpu" in m[3].split(",")]
            version = "v1"
        else:
            continue
        for mroot, point, _, _ in wanted:
            rel = path
            if mroot != "/" and (path == mroot or path.startswith(mroot + "/")):
                rel = path[len(mroot):] or "/"
            found.append((version, root + point.rstrip("/") + rel.rstrip("/"), root + point.rstrip("/")))
    return found


def cgroup_cpu_quota(root: str = "") -> tuple[float | None, str | None]:
    """The tightest CPU quota (in CPUs) over this process's cgroup and its ancestors, and where it is set."""
    best: tuple[float | None, str | None] = (None, None)
    for version, leaf, top in _cgroup_dirs(root):
        d = leaf  # walks up from the process's own cgroup to the mount's top
        while True:
            quota = None
            if version == "v2":
                text = (_read(d + "/cpu.max") or "").split()
                if len(text) == 2 and text[0] != "max":
                    try:
                        quota = int(text[0]) / int(text[1])
                    except (ValueError, ZeroDivisionError):
                        quota = None
                where = d + "/cpu.max"
            else:
                q, p = _read(d + "/cpu.cfs_quota_us"), _read(d + "/cpu.cfs_period_us")
                try:
                    if q is not None and p is not None and int(q) > 0 and int(p) > 0:
                        quota = int(q) / int(p)
                except ValueError:
                    quota = None
                where = d + "/cpu.cfs_quota_us"
            if quota is not None and (best[0] is None or quota < best[0]):
                best = (quota, where[len(root):] if root else where)
            if len(d) <= len(top) or d == top:
                break
            d = os.path.dirname(d)
    return best


def usable_cpus(root: str = "") -> dict:
    """CPUs this process may really use: its affinity mask and its cgroup quota, not os.cpu_count()."""
    try:
        affinity: int | None = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        affinity = None
    quota, where = cgroup_cpu_quota(root)
    count = os.cpu_count() or 1
    usable = float(affinity or count)
    limited_by = "affinity" if affinity is not None and affinity < count else "cpu_count"
    if quota is not None and quota < usable:
        usable, limited_by = quota, "cgroup"
    return {"usable": round(max(usable, 0.01), 2), "affinity": affinity, "cgroup_quota": quota,
            "cgroup_file": where, "cpu_count": count, "limited_by": limited_by}


def mem_of(pid: int) -> dict | None:
    """RSS and USS (private memory: what copy-on-read grows) of one process, in bytes."""
    text = _read(f"/proc/{pid}/smaps_rollup")
    if text:
        kb: dict = {}
        for line in text.splitlines()[1:]:
            k, _, v = line.partition(":")
            parts = v.split()
            if parts and parts[0].isdigit():
                kb[k.strip()] = int(parts[0]) * 1024
        if "Rss" in kb:
            return {"rss": kb["Rss"], "uss": kb.get("Private_Clean", 0) + kb.get("Private_Dirty", 0),
                    "pss": kb.get("Pss")}
    status = _read(f"/proc/{pid}/status")
    for line in (status or "").splitlines():
        if line.startswith("VmRSS:"):
            return {"rss": int(line.split()[1]) * 1024, "uss": None, "pss": None}
    return None


def cpu_seconds(pid: int) -> float | None:
    text = _read(f"/proc/{pid}/stat")
    if not text:
        return None
    rest = text[text.rfind(")") + 2:].split()
    try:
        return (int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK")
    except (IndexError, ValueError, OSError):
        return None


def shm_state(path: str = "/dev/shm") -> dict | None:
    try:
        st = os.statvfs(path)
    except (OSError, AttributeError):
        return None
    total, free = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
    return {"path": path, "total": total, "free": free, "used": total - st.f_bfree * st.f_frsize}


def open_fds() -> int | None:
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return None


def tensors_in(obj, out: list) -> list:
    """Every tensor in a batch (tensors, dicts, lists, tuples, namedtuples), in order."""
    if torch is not None and isinstance(obj, torch.Tensor):
        out.append(obj)
    elif isinstance(obj, dict):
        for v in obj.values():
            tensors_in(v, out)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            tensors_in(v, out)
    return out


def batch_len(obj, default: int) -> int:
    """Samples in a batch: the first dimension of its first tensor."""
    ts = tensors_in(obj, [])
    return int(ts[0].shape[0]) if ts and ts[0].dim() > 0 else default


def is_pinned(t) -> bool | None:
    try:
        return bool(t.is_pinned())
    except Exception:  # noqa: BLE001 - CPU builds may refuse to answer
        return None


# --------------------------------------------------------------------------
# The user's dataset.


def load_user(spec: str | None, demo: bool, path: str | None) -> dict:
    """Import MODULE, call FACTORY. Raises _Stage(stage, error) on the first thing that fails."""
    if demo:
        return {"dataset": DemoDataset(), "label": "envguard demo (500 samples, 10 ms each, 3x64x64)"}
    if path and path not in sys.path:
        sys.path.insert(0, path)
    module_name, _, factory_name = (spec or "").rpartition(":")
    if not module_name or not factory_name:
        raise _Stage("spec", ValueError(f"--dataset {spec!r} is not MODULE:FACTORY"))
    import importlib

    try:
        if module_name.endswith(".py") or os.sep in module_name or "/" in module_name:
            file = os.path.abspath(os.path.join(path or os.getcwd(), module_name))
            folder, name = os.path.split(file)
            if folder not in sys.path:
                sys.path.insert(0, folder)  # so that spawn workers unpickle its classes by name
            module = importlib.import_module(name[:-3] if name.endswith(".py") else name)
        else:
            module = importlib.import_module(module_name)
    except BaseException as e:  # noqa: BLE001 - SyntaxError, ImportError, SystemExit, anything
        raise _Stage("import", e) from None
    factory = module
    try:
        for part in factory_name.split("."):
            factory = getattr(factory, part)
    except AttributeError as e:
        raise _Stage("factory", e) from None
    if not callable(factory):
        raise _Stage("factory", TypeError(f"{factory_name} in {module_name} is not callable"))
    try:
        made = factory()
    except BaseException as e:  # noqa: BLE001
        raise _Stage("factory", e) from None
    if isinstance(made, dict):
        if "dataset" not in made:
            raise _Stage("factory", TypeError(f"{factory_name}() returned a dict without a 'dataset' key"))
        out = dict(made)
    elif isinstance(made, tuple):
        keys = ("dataset", "collate_fn", "sampler")
        out = {k: v for k, v in zip(keys, made) if v is not None}
    else:
        out = {"dataset": made}
    unknown = set(out) - {"dataset", "collate_fn", "sampler", "worker_init_fn", "batch_size", "drop_last"}
    if unknown:
        raise _Stage("factory", TypeError(f"{factory_name}() returned unknown keys {sorted(unknown)}"))
    out["label"] = f"{module_name}:{factory_name}"
    return out


class _Stage(Exception):
    def __init__(self, stage: str, error: BaseException) -> None:
        super().__init__(stage)
        self.stage, self.error = stage, error


def describe(user: dict) -> dict:
    """Kind, length and picklability of what the factory returned. Raises _Stage on an unusable dataset."""
    ds = user["dataset"]
    iterable = torch is not None and isinstance(ds, torch.utils.data.IterableDataset)
    info: dict = {"label": user["label"], "class": f"{type(ds).__module__}.{type(ds).__qualname__}",
                  "kind": "iterable" if iterable else "map"}
    if not iterable and not hasattr(ds, "__getitem__"):
        raise _Stage("dataset", TypeError(f"the factory returned a {info['class']}, not a Dataset "
                                          "(it has no __getitem__ and is not an IterableDataset)"))
    try:
        info["length"] = len(ds)
    except TypeError:
        if not iterable:
            raise _Stage("dataset", TypeError(f"{info['class']} has no __len__")) from None
        info["length"] = None
    except BaseException as e:  # noqa: BLE001
        raise _Stage("dataset", e) from None
    if info["length"] == 0:
        raise _Stage("empty", ValueError(f"{info['class']} has length 0: there is nothing to load"))
    for k in ("collate_fn", "sampler", "worker_init_fn"):
        v = user.get(k)
        info[k] = None if v is None else getattr(v, "__qualname__", type(v).__qualname__)
    # spawn and forkserver pickle the dataset (and collate_fn, worker_init_fn) into every worker.
    import io
    import pickle

    class _Count(io.RawIOBase):
        n = 0

        def writable(self) -> bool:
            return True

        def write(self, b) -> int:
            self.n += len(b)
            return len(b)

    sink = _Count()
    try:
        for k in ("dataset", "collate_fn", "worker_init_fn"):
            if user.get(k) is not None:
                pickle.Pickler(sink, protocol=pickle.HIGHEST_PROTOCOL).dump(user[k])
        info["picklable"], info["pickled_bytes"], info["pickle_error"] = True, sink.n, None
    except BaseException as e:  # noqa: BLE001 - PicklingError, AttributeError, TypeError...
        info["picklable"], info["pickled_bytes"], info["pickle_error"] = False, None, _err(e)
    return info


# --------------------------------------------------------------------------
# One trial (in its own process).


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


# --------------------------------------------------------------------------
# Inspection (in the serving process) and the serial sample (in a child).


def sample_items(user: dict, info: dict, opts: dict, limit_s: float = 1.0) -> dict:
    """Fetch items one by one in this process: time per item (wall and CPU) and the bytes of a batch."""
    from torch.utils.data import default_collate

    b = opts["batch_size"]
    ds = user["dataset"]
    items: list = []
    out: dict = {"items": 0}
    t0, c0 = time.perf_counter(), time.process_time()
    src = iter(ds) if info["kind"] == "iterable" else iter(user.get("sampler") or range(info["length"]))
    idx = None
    try:
        for _ in range(b):
            if info["kind"] == "iterable":
                items.append(next(src))
            else:
                idx = next(src)
                items.append(ds[idx])
            if time.perf_counter() - t0 > limit_s:
                break
    except StopIteration:
        pass
    except BaseException as e:  # noqa: BLE001
        out.update(status="failed", error=_err(e), traceback=_tb(e)[-3000:], index=idx)
        return out
    n = len(items)
    out.update(items=n, item_s=(time.perf_counter() - t0) / max(n, 1),
               item_cpu_s=(time.process_time() - c0) / max(n, 1))
    try:
        batch = (user.get("collate_fn") or default_collate)(items)
        ts = tensors_in(batch, [])
        out["batch_bytes"] = int(sum(t.numel() * t.element_size() for t in ts) * b / max(n, 1))
        out["tensors_per_batch"] = len(ts)
    except BaseException as e:  # noqa: BLE001
        out.update(collate_error=_err(e))
    return out


def inspect(info: dict) -> dict:
    import multiprocessing

    available = [m for m in METHODS if m in multiprocessing.get_all_start_methods()]
    default = multiprocessing.get_start_method(allow_none=True) or multiprocessing.get_context().get_start_method()
    usable = [m for m in available if m == "fork" or info.get("picklable", True)]
    lim: dict = {"shm": shm_state()}
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        lim["nofile"] = {"soft": soft, "hard": hard}
    except ImportError:
        lim["nofile"] = None
    try:
        lim["sharing_strategy"] = torch.multiprocessing.get_sharing_strategy()
    except Exception:  # noqa: BLE001
        lim["sharing_strategy"] = None
    cuda: dict = {"available": False, "built": torch.version.cuda is not None}
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")  # ask without initialising CUDA here (we fork)
    try:
        cuda["available"] = bool(torch.cuda.is_available())
        if cuda["available"]:
            cuda["device_count"] = torch.cuda.device_count()
    except Exception as e:  # noqa: BLE001
        cuda["error"] = _err(e)
    return {"methods": {"available": available, "default": default, "usable": usable},
            "cpus": usable_cpus(), "limits": lim, "cuda": cuda}


# --------------------------------------------------------------------------
# Isolation: every trial in a fresh process.


def _subreaper() -> None:
    """Orphaned workers of a finished trial become our children, so we can reap and account for them."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except Exception:  # noqa: BLE001 - best effort
        pass


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def _stop_group(pgid: int, grace: float) -> None:
    """Stop what is left of a trial's process group: a moment to exit, then SIGTERM, then SIGKILL."""
    import signal

    for sig, wait in ((None, grace), (signal.SIGTERM, 0.5), (signal.SIGKILL, 2.0)):
        if sig is not None:
            try:
                os.killpg(pgid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            _reap()
            if not _group_alive(pgid):
                return
            time.sleep(0.01)


def _signal_name(status: int) -> str:
    import signal

    if os.WIFSIGNALED(status):
        try:
            return signal.Signals(os.WTERMSIG(status)).name
        except ValueError:
            return f"signal {os.WTERMSIG(status)}"
    return f"exit code {os.WEXITSTATUS(status)}" if os.WIFEXITED(status) else f"status {status}"


def _tail(path: str, n: int = 3000) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - n))
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def run_forked(fn, req: dict, workdir: str, protocol_fd: int | None) -> dict:
    """Run ``fn()`` (which returns a JSON-able dict) in a forked child in a process group of its own."""
    import select
    import signal

    limit = float(req.get("limit_s") or 60)
    errfile = os.path.join(workdir, f"trial-{req.get('id')}.stderr")
    r, w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # the trial
        code = 0
        try:
            os.setpgid(0, 0)
            os.close(r)
            if protocol_fd is not None:
                os.close(protocol_fd)  # only the serving process writes the protocol
            fd = os.open(errfile, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(fd, 2)
            os.dup2(fd, 1)
            os.close(fd)
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.close(null)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            global _PROGRESS_FD  # noqa: PLW0603 - this forked child's progress pipe, read by the trial's code
            _PROGRESS_FD = w
            try:
                res = fn()
            except BaseException as e:  # noqa: BLE001
                res = {"type": "trial", "id": req.get("id"), "status": "failed", "error": _tb(e),
                       "headline": _err(e).splitlines()[0][:300], "phase": "trial"}
            data = (json.dumps(res, default=str) + "\n").encode()
            while data:
                data = data[os.write(w, data):]
        except BaseException:  # noqa: BLE001
            code = 70
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    os.close(w)
    try:
        os.setpgid(pid, pid)
    except OSError:
        pass  # the child already did it (or is gone)
    event(trial=req.get("id"), trial_pid=pid, pids=[pid])
    # Progress lines, then one result line. Read up to the result, not to EOF: fork workers the trial
    # left behind inherited the pipe and would hold it open.
    data, res, timed_out = b"", None, False
    last_progress: dict | None = None
    last_progress_t = t0
    deadline = t0 + limit
    while res is None:
        left = deadline - time.perf_counter()
        if left <= 0:
            timed_out = True
            break
        ready, _, _ = select.select([r], [], [], min(left, 1.0))
        if not ready:
            continue
        chunk = os.read(r, 65536)
        if not chunk:
            break
        data += chunk
        while b"\n" in data and res is None:
            line, data = data.split(b"\n", 1)
            try:
                doc = json.loads(line.decode())
            except ValueError:
                continue
            if isinstance(doc, dict) and doc.get("progress"):
                last_progress, last_progress_t = doc, time.perf_counter()
            elif isinstance(doc, dict):
                res = doc
    os.close(r)
    status = None
    if not timed_out:  # the child exits right after writing its line
        end = time.perf_counter() + 2.0
        while status is None and time.perf_counter() < end:
            got, st = os.waitpid(pid, os.WNOHANG)
            status = st if got else None
            if status is None:
                time.sleep(0.01)
    if status is None:
        _stop_group(pid, 0.0)
        try:
            _, status = os.waitpid(pid, 0)
        except ChildProcessError:  # reaped while stopping the group
            status = None
    _stop_group(pid, 0.5)  # workers, forkserver, resource tracker left by the trial
    _reap()
    seconds = time.perf_counter() - t0
    if res is None and timed_out and last_progress is not None and \
            time.perf_counter() - last_progress_t < max(5.0, limit / 4):
        # Batches were still arriving: too slow for its limit, not hung.
        res = {"type": "trial", "id": req.get("id"), "settings": req.get("settings"), "status": "slow",
               "error": f"still loading when stopped at its limit of {limit:g} s ({last_progress.get('phase')}, "
                        f"{last_progress.get('batches')} batches in)", "progress": last_progress}
    elif res is None:
        how = f"did not finish within {limit:g} s" if timed_out else \
            f"ended by {_signal_name(status)} without a result" if status is not None else "ended without a result"
        stalled = f" (no progress for {time.perf_counter() - last_progress_t:.0f} s, during " \
                  f"{last_progress.get('phase')})" if timed_out and last_progress else ""
        res = {"type": "trial", "id": req.get("id"), "settings": req.get("settings"),
               "status": "timeout" if timed_out else "crashed", "error": f"the trial process {how}{stalled}",
               "headline": f"the trial process {how}", "exit": _signal_name(status) if status is not None else None}
    if res.get("status", "ok") != "ok" or res.get("error"):
        res["stderr_tail"] = _tail(errfile)
    res["seconds"] = round(seconds, 3)
    res["pid"] = pid
    try:
        os.unlink(errfile)
    except OSError:
        pass
    return res


def run_exec(req: dict, args: dict) -> dict:
    """Where fork is not used: the trial is a fresh interpreter running this file with --one-trial."""
    import subprocess

    limit = float(req.get("limit_s") or 60)
    argv = [sys.executable, os.path.abspath(__file__), "--one-trial", json.dumps(req)] + _pass_on(args)
    t0 = time.perf_counter()
    kw: dict = {"start_new_session": True} if os.name == "posix" else {}
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)
    event(trial=req.get("id"), trial_pid=p.pid, pids=[p.pid])
    try:
        out, err = p.communicate(timeout=limit)
        timed_out = False
    except subprocess.TimeoutExpired:
        timed_out = True
        if os.name == "posix":
            _stop_group(p.pid, 0.0)
        else:  # pragma: no cover - Windows
            subprocess.run(["taskkill", "/F", "/T", "/PID", str(p.pid)], capture_output=True, check=False)
        out, err = p.communicate()
    if os.name == "posix":
        _stop_group(p.pid, 0.5)
    res = None
    if not timed_out:
        for line in reversed(out.decode(errors="replace").splitlines()):
            if line.startswith("{"):
                try:
                    res = json.loads(line)
                    break
                except ValueError:
                    continue
    if res is None:
        how = (f"did not finish within {limit:g} s" if timed_out
               else f"ended with exit code {p.returncode} without a result")
        res = {"type": "trial", "id": req.get("id"), "settings": req.get("settings"),
               "status": "timeout" if timed_out else "crashed", "error": f"the trial process {how}",
               "headline": f"the trial process {how}"}
    if res.get("status") != "ok":
        res["stderr_tail"] = err.decode(errors="replace")[-3000:]
    res["seconds"] = round(time.perf_counter() - t0, 3)
    res["pid"] = p.pid
    return res


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


def _pass_on(args: dict) -> list[str]:
    out = ["--demo"] if args["demo"] else ["--dataset", args["dataset"]]
    for key, flag in (("path", "--path"), ("batch_size", "--batch-size"), ("events", "--events")):
        if args.get(key) is not None:
            out += [flag, str(args[key])]
    out += ["--step-ms", str(args["step_ms"]), "--h2d", args["h2d"]] + ["--busy"] * bool(args["busy"])
    return out


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
    event(probe_pid=os.getpid())
    try:
        return serve(args, real_stdout) if args["serve"] else one_trial(args, real_stdout)
    finally:
        sys.stdout.flush()
        os.close(real_stdout)


if __name__ == "__main__":
    sys.exit(main())
