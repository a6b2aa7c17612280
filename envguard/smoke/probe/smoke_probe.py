"""envguard smoke probe: prove inside an environment that torch, DataLoader
workers, pinned memory and CUDA really work.

Standalone on purpose: the standard library and torch only (threadpoolctl when
it happens to be installed). The target environment does not have envguard, so
this file must never import it. It is run by path with the environment's own
interpreter (``<prefix>/bin/python smoke_probe.py``), never with ``python -c``:
spawn and forkserver workers re-import ``__main__`` by path, which is also why
the dataset, worker hooks and distributed entry point live at module level and
everything else hides behind the ``__main__`` guard.

Output: exactly one JSON document on stdout. While checks run, file
descriptor 1 points at stderr, so nothing a library prints can corrupt it.
The probe reports facts and what passed or failed with the real error text;
the runner in envguard decides what each failure means.

``--events FILE`` (or ``ENVGUARD_PROBE_EVENTS``) appends one JSON line per
phase and per worker process, so a runner that has to kill a stuck probe still
knows where it stopped and which processes were its own.

SIGINT and SIGTERM unwind the probe (exit 130, 143; no document): its exit handlers remove what it made in
TMPDIR (multiprocessing's ``pymp-*`` directory, its own temporary directories) and stop its DataLoader workers,
also when it runs on its own, with no envguard around it to clean up after it.

``--inject`` (or ``ENVGUARD_PROBE_INJECT``, comma separated, honoured only
together with ``ENVGUARD_TESTING=1``) is for envguard's own tests: it makes the
real DataLoader and torch machinery fail in the way a broken environment does.
A stray variable in a user's environment injects nothing (docs/reliability.md#test-hooks).
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from typing import Any

PROBE_VERSION = 1
INJECTIONS = (
    "pickling",     # a lambda collate_fn under spawn
    "hang",         # a dataset slower than the DataLoader timeout
    "killed",       # a worker that SIGKILLs itself
    "shm-sigbus",   # a worker that sends itself SIGBUS (what a full /dev/shm does)
    "shm-big",      # 8 MiB batches (for a tiny /dev/shm)
    "shm-leak",     # file_system strategy, live batches, then never finish; only SIGKILL ends it
    "fd-limit",     # RLIMIT_NOFILE=128, file_descriptor strategy, many live batches
    "numpy-abi",    # torch initialised without numpy, numpy importable afterwards
    "cuda-fork",    # a worker that re-initialises CUDA in a bad fork
    "omp-dup",      # a second copy of the OpenMP runtime loaded with ctypes
    "never-ends",   # workers and main blocked forever, SIGTERM ignored
    "fake-gpu",     # a launcher's rank claims one NCCL GPU that every rank of its host shares
    "slow-register",  # the first rank to claim a GPU waits 1.5 s before saying which rank it is
)

_EVENTS_ENV = "ENVGUARD_PROBE_EVENTS"  # declared in envguard.settings (this file cannot import it)
_INJECT_ENV = "ENVGUARD_PROBE_INJECT"
_TESTING_ENV = "ENVGUARD_TESTING"  # the same opt-in as envguard.settings.test_hook (this file cannot import it)
_START_ENV = dict(os.environ)  # as the user set it, before any library adds to it
_MAX_ERROR = 6000


# --------------------------------------------------------------------------
# Module level: re-imported by spawn/forkserver workers and distributed ranks.


def event(**fields: object) -> None:
    """Append one JSON line to the events file, if the runner asked for one.

    O_APPEND writes this small are atomic, so workers may write too.
    """
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


class ProbeDataset:
    """Item i is ``{"idx": i, "x": full((n,), i), "wid": worker id}``.

    Batches are checked for exactly these values, so a worker that returns
    wrong or stale data fails the probe just like one that crashes.
    A plain class (no torch base) so that the module imports without torch.
    """

    def __init__(self, length: int, numel: int, inject: tuple[str, ...] = (), sleep: float = 0.0) -> None:
        self.length = length
        self.numel = numel
        self.inject = tuple(inject)
        self.sleep = sleep

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, i: int) -> dict:
        import torch
        from torch.utils.data import get_worker_info

        info = get_worker_info()
        wid = info.id if info is not None else -1
        if info is not None:
            if "killed" in self.inject and i == 0:
                import signal

                os.kill(os.getpid(), signal.SIGKILL)
            if "shm-sigbus" in self.inject and i == 0:
                import signal

                os.kill(os.getpid(), signal.SIGBUS)
            if "cuda-fork" in self.inject and i == 0:
                # What a dataset that touches CUDA does in a fork worker of a
                # parent that already initialised CUDA.
                torch.cuda._is_in_bad_fork = lambda: True
                torch.cuda._lazy_init()
            if "shm-leak" in self.inject:
                import signal

                # torch's own SIGTERM handler in a worker ends it: only SIGKILL may end this one
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
            if "never-ends" in self.inject:
                import signal

                signal.signal(signal.SIGTERM, signal.SIG_IGN)  # only SIGKILL ends this worker
                while True:
                    time.sleep(3600)
        if self.sleep and i == 0:
            time.sleep(self.sleep)
        return {"idx": i, "x": torch.full((self.numel,), float(i)), "wid": wid}


def mp_temp_dir() -> str | None:
    """multiprocessing's ``pymp-*`` folder of this process (made now if it was not yet), for the runner to
    remove if the process is killed before its own exit handler does: the probe may run in the user's TMPDIR."""
    try:
        from multiprocessing import util

        return util.get_temp_dir()
    except Exception:  # noqa: BLE001 - only a clean-up aid
        return None


def worker_init(worker_id: int) -> None:
    # Tell the runner which processes are ours: /dev/shm files carry their pid; and their pymp-* folders.
    event(worker_pid=os.getpid(), worker_id=worker_id, tmp=mp_temp_dir())


def dist_rank(rank: int, world: int, backend: str, init_method: str, out_dir: str, timeout_s: float) -> None:
    """One rank of the world-size-2 all-reduce check; writes its result file."""
    result: dict = {"rank": rank}
    event(dist_pid=os.getpid(), rank=rank)
    try:
        import datetime

        import torch
        import torch.distributed as dist

        dist.init_process_group(backend, init_method=init_method, rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=timeout_s))
        device = torch.device("cuda", rank) if backend == "nccl" else torch.device("cpu")
        if backend == "nccl":
            torch.cuda.set_device(device)
        t = torch.full((4,), float(rank + 1), device=device)
        dist.all_reduce(t)
        result["value"] = t.cpu().tolist()
        dist.destroy_process_group()
    except BaseException as e:  # noqa: BLE001 - every failure is reported
        result["error"] = _err(e)
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(result, f)


def _err(e: BaseException) -> str:
    text = f"{type(e).__name__}: {e}"
    return text[:_MAX_ERROR]


# --------------------------------------------------------------------------
# The checks (run only in the probe's main process).


class Probe:
    def __init__(self, args: dict) -> None:
        self.quick: bool = args["quick"]
        self.distributed: bool = args["distributed"]
        self.only_distributed: bool = args.get("only_distributed", False)
        self.join_timeout: float = args.get("join_timeout") or args["dl_timeout"]
        self.join_deadline: float | None = args.get("join_deadline")
        self.dist_sizes: tuple[int, ...] | None = args.get("dist_sizes")
        self.backend: str = args.get("backend", "auto")
        self.inject: tuple[str, ...] = tuple(args["inject"])
        self.dl_timeout: float = args["dl_timeout"]
        self.t0 = time.perf_counter()
        self.doc: dict = {
            "probe_version": PROBE_VERSION,
            "pid": os.getpid(),
            "python": {"executable": sys.executable, "version": sys.version.split()[0],
                       "implementation": sys.implementation.name, "platform": sys.platform,
                       "prefix": sys.prefix},
            "mode": {"quick": self.quick, "distributed": self.distributed, "inject": list(self.inject),
                     "dl_timeout": self.dl_timeout, "only_distributed": self.only_distributed},
            "checks": [],
            "torch": None,
            "import_error": None,
            "numpy": None,
            "dataloader": {},
            "cuda": None,
            "limits": {},
            "distributed": None,
        }
        # torch once import-torch passed; Any: the probe runs against every torch release it may meet
        self.torch: Any = None

    # -- bookkeeping --------------------------------------------------------
    def check(self, name: str, status: str, seconds: float | None = None, error: str | None = None,
              **detail: object) -> dict:
        entry: dict = {"name": name, "status": status}
        if seconds is not None:
            entry["seconds"] = round(seconds, 4)
        if error:
            entry["error"] = error[:_MAX_ERROR]
        if detail:
            entry["detail"] = detail
        self.doc["checks"].append(entry)
        event(check=name, status=status)
        _stop_if_signalled()
        return entry

    def phase(self, name: str) -> None:
        _stop_if_signalled()  # a check's `except BaseException` swallowed the signal's exit: stop at the next step
        self.doc["phase"] = name
        event(phase=name, t=round(time.perf_counter() - self.t0, 3))

    # -- import and versions ------------------------------------------------
    def import_torch(self) -> bool:
        self.phase("import-torch")
        hidden = "numpy-abi" in self.inject and "numpy" not in sys.modules
        if hidden:
            # torch initialises its NumPy bridge without numpy; numpy itself
            # imports fine afterwards: the "Numpy is not available" state of
            # an ABI mismatch.
            sys.modules["numpy"] = None  # type: ignore[assignment]  # None blocks an import; typeshed omits it
        t = time.perf_counter()
        try:
            import torch
        except BaseException as e:  # noqa: BLE001 - ImportError, OSError, SystemError...
            self.doc["import_error"] = {"type": type(e).__name__, "message": str(e)[:_MAX_ERROR],
                                        "traceback": traceback.format_exc()[-_MAX_ERROR:]}
            self.check("import-torch", "fail", time.perf_counter() - t, _err(e))
            return False
        finally:
            if hidden and sys.modules.get("numpy", 0) is None:
                del sys.modules["numpy"]
        self.check("import-torch", "pass", time.perf_counter() - t)
        self.torch = torch
        info: dict = {"version": torch.__version__, "file": getattr(torch, "__file__", None),
                      "cuda": torch.version.cuda, "hip": getattr(torch.version, "hip", None),
                      "debug": bool(getattr(torch.version, "debug", False))}
        try:
            info["cudnn"] = torch.backends.cudnn.version()
        except Exception as e:  # noqa: BLE001
            info["cudnn"] = None
            info["cudnn_error"] = _err(e)
        try:
            nccl = torch.cuda.nccl.version() if torch.version.cuda else None
            info["nccl"] = ".".join(map(str, nccl)) if isinstance(nccl, tuple) else nccl
        except Exception as e:  # noqa: BLE001
            info["nccl"] = None
            info["nccl_error"] = _err(e)
        flags = getattr(torch._C, "_cuda_getArchFlags", None)
        try:
            info["arch_flags"] = (flags() or "").split() if flags else []
        except Exception:  # noqa: BLE001
            info["arch_flags"] = []
        self.doc["torch"] = info
        return True

    # -- numpy --------------------------------------------------------------
    def numpy_interop(self) -> None:
        self.phase("numpy")
        torch = self.torch
        t = time.perf_counter()
        try:
            import numpy as np
        except BaseException as e:  # noqa: BLE001
            self.doc["numpy"] = {"version": None, "import_error": _err(e)}
            self.check("numpy-interop", "skip", time.perf_counter() - t, _err(e), reason="numpy not importable")
            return
        self.doc["numpy"] = {"version": getattr(np, "__version__", None), "file": getattr(np, "__file__", None)}
        try:
            a = np.arange(6, dtype=np.float32).reshape(2, 3)
            ta = torch.from_numpy(a)
            a[0, 0] = 42.0  # from_numpy shares memory
            if ta.shape != (2, 3) or float(ta[0, 0]) != 42.0 or float(ta[1, 2]) != 5.0:
                raise AssertionError(f"torch.from_numpy gave {ta.tolist()}")
            back = (torch.arange(4, dtype=torch.int64) * 3).numpy()
            if back.dtype != np.int64 or back.tolist() != [0, 3, 6, 9]:
                raise AssertionError(f"Tensor.numpy() gave {back!r}")
        except BaseException as e:  # noqa: BLE001
            self.check("numpy-interop", "fail", time.perf_counter() - t, _err(e))
            return
        self.check("numpy-interop", "pass", time.perf_counter() - t)

    # -- limits -------------------------------------------------------------
    def limits(self) -> None:
        self.phase("limits")
        torch = self.torch
        lim: dict = self.doc["limits"]
        shm = "/dev/shm"
        if os.path.isdir(shm) and hasattr(os, "statvfs"):
            st = os.statvfs(shm)
            lim["shm"] = {"path": shm, "free": st.f_bavail * st.f_frsize, "total": st.f_blocks * st.f_frsize,
                          "need": self.shm_need()}
        try:
            import resource

            soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            lim["nofile"] = {"soft": soft, "hard": hard}
        except ImportError:  # Windows
            lim["nofile"] = None
        try:
            lim["sharing_strategy"] = torch.multiprocessing.get_sharing_strategy() if torch else None
        except Exception:  # noqa: BLE001
            lim["sharing_strategy"] = None
        lim["af_unix"] = self.unix_socket()
        for var in ("KMP_DUPLICATE_LIB_OK", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "LD_PRELOAD"):
            lim[var] = _START_ENV.get(var)  # threadpoolctl sets KMP_DUPLICATE_LIB_OK when imported
        lim["num_threads"] = torch.get_num_threads() if torch else None
        lim["openmp"] = self.openmp_runtimes()
        lim["foreign_cuda_libs"] = self.foreign_cuda_libs()
        lim["nvidia_dists"] = self.nvidia_dists()

    @staticmethod
    def unix_socket() -> dict | None:
        """Whether multiprocessing can listen on the Unix socket through which DataLoader workers hand batches
        over (the file_descriptor sharing strategy) and the forkserver is reached: its own Listener, at the
        address it picks itself under TMPDIR (``pymp-*/listener-*``). A TMPDIR so long that the path does not
        fit in a socket address stalls every such DataLoader until its timeout (forever without one)."""
        import socket
        import tempfile

        if not hasattr(socket, "AF_UNIX"):  # Windows: no Unix sockets, no such limit
            return None
        from multiprocessing import connection

        tmpdir = tempfile.gettempdir()
        fact = {"tmpdir": tmpdir, "tmpdir_bytes": len(os.fsencode(tmpdir)), "error": None}
        try:  # no address: multiprocessing picks its own, as it does for a DataLoader
            connection.Listener(family="AF_UNIX").close()
        except OSError as e:
            fact["error"] = f"{type(e).__name__}: {e}"
        return fact

    def shm_need(self) -> int:
        """Bytes of /dev/shm the probe's own DataLoaders keep in flight."""
        batch, numel = self.batch_shape()
        return batch * numel * 4 * 2 * 2  # float32 x num_workers x prefetch_factor

    def openmp_runtimes(self) -> list | None:
        if "omp-dup" in self.inject:
            self.load_second_openmp()
        try:
            import threadpoolctl
        except Exception:  # noqa: BLE001 - optional
            return None
        try:
            info = threadpoolctl.threadpool_info()
        except Exception as e:  # noqa: BLE001
            return [{"error": _err(e)}]
        return [{"internal_api": i.get("internal_api"), "filepath": i.get("filepath"), "version": i.get("version")}
                for i in info if i.get("user_api") == "openmp"]

    def load_second_openmp(self) -> None:
        """Load a copy of torch's OpenMP runtime from another path (test injection)."""
        import ctypes
        import shutil
        import tempfile

        lib_dir = os.path.join(os.path.dirname(self.torch.__file__), "lib")
        names = [n for n in os.listdir(lib_dir) if n.startswith(("libgomp", "libiomp", "libomp"))]
        if not names:
            return
        dst = os.path.join(tempfile.mkdtemp(prefix="envguard-omp-"), names[0])
        shutil.copy2(os.path.join(lib_dir, names[0]), dst)
        ctypes.CDLL(dst)
        import atexit

        # after threadpoolctl has looked: it skips libraries whose file is gone
        atexit.register(shutil.rmtree, os.path.dirname(dst), True)

    @staticmethod
    def foreign_cuda_libs() -> list[str]:
        """libcudnn/libnccl copies on LD_LIBRARY_PATH, which the loader prefers to torch's own."""
        found = []
        for d in filter(None, os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep)):
            try:
                names = os.listdir(d)
            except OSError:
                continue
            found += [os.path.join(d, n) for n in names if n.startswith(("libcudnn", "libnccl"))]
        return sorted(found)[:50]

    @staticmethod
    def nvidia_dists() -> list[str]:
        """Installed nvidia-nccl-cu*/nvidia-cudnn-cu* distributions (more than one per library is trouble)."""
        found = set()
        for d in sys.path:
            if not d or not os.path.isdir(d) or not d.endswith(("site-packages", "dist-packages")):
                continue
            try:
                names = os.listdir(d)
            except OSError:
                continue
            for n in names:
                low = n.lower()
                if low.startswith(("nvidia_nccl_cu", "nvidia_cudnn_cu")) and low.endswith(".dist-info"):
                    found.add(os.path.join(d, n))
        return sorted(found)

    # -- DataLoader ---------------------------------------------------------
    def batch_shape(self) -> tuple[int, int]:
        if "shm-big" in self.inject:
            return 4, 512 * 1024  # 4 float32 items of 2 MiB: 8 MiB batches
        return (4, 1024) if self.quick else (4, 16 * 1024)

    def methods(self) -> list[str]:
        import multiprocessing

        available = multiprocessing.get_all_start_methods()
        if self.quick:
            # One method: the platform's default (fork on Linux <= 3.13).
            chosen = [multiprocessing.get_start_method(allow_none=True) or available[0]]
            if "fork" in available and sys.platform.startswith("linux"):
                chosen = ["fork"]
        else:
            chosen = [m for m in ("fork", "forkserver", "spawn") if m in available]
        if "pickling" in self.inject and "spawn" not in chosen:
            chosen.append("spawn")
        return chosen

    def make_loader(self, method: str, inject: tuple[str, ...] = (), length: int = 16, sleep: float = 0.0,
                    collate=None, timeout: float | None = None, persistent: bool = True):
        import multiprocessing

        torch = self.torch
        batch, numel = self.batch_shape()
        pin = torch.cuda.is_available()
        kwargs: dict = {}
        if collate is not None:
            kwargs["collate_fn"] = collate
        return torch.utils.data.DataLoader(
            ProbeDataset(length, numel, inject, sleep), batch_size=batch, shuffle=False,
            num_workers=2, multiprocessing_context=multiprocessing.get_context(method),
            pin_memory=pin, persistent_workers=persistent, prefetch_factor=2,
            timeout=self.dl_timeout if timeout is None else timeout, worker_init_fn=worker_init, **kwargs)

    def verify_epoch(self, batches: list, length: int, pin: bool) -> set:
        """Check every batch's contents; return the worker ids that produced them."""
        torch = self.torch
        _batch, numel = self.batch_shape()
        seen, wids = [], set()
        for b in batches:
            idx = b["idx"].tolist()
            x = b["x"]
            if tuple(x.shape) != (len(idx), numel):
                raise AssertionError(f"batch shape {tuple(x.shape)} for indices {idx}")
            expect = torch.tensor(idx, dtype=x.dtype).unsqueeze(1).expand_as(x)
            if not torch.equal(x, expect):
                raise AssertionError(f"batch contents wrong for indices {idx}")
            if pin and not x.is_pinned():
                raise AssertionError("pin_memory=True but the batch is not in pinned memory")
            seen += idx
            wids |= set(b["wid"].tolist())
        if seen != list(range(length)):
            raise AssertionError(f"indices {seen} instead of 0..{length - 1}")
        return wids

    def dataloaders(self) -> None:
        torch = self.torch
        self.phase("dataloader")
        cuda_init = bool(torch.cuda.is_available() and torch.cuda.is_initialized())
        self.doc["dataloader"]["cuda_initialized_before_workers"] = cuda_init
        self.doc["dataloader"]["pin_memory"] = bool(torch.cuda.is_available())
        if "fd-limit" in self.inject:
            self.fd_limit_round()
        if "shm-leak" in self.inject:
            self.shm_leak_round()
        if "never-ends" in self.inject:
            self.never_ends()
        methods = self.methods()
        sock = self.doc["limits"].get("af_unix") or {}
        if sock.get("error") and self.doc["limits"].get("sharing_strategy") == "file_descriptor":
            # every batch would go through that socket: each DataLoader would only stall until its timeout
            for m in methods:
                self.check(f"dataloader:{m}", "fail", 0.0, f"{sock['error']}: multiprocessing's socket under "
                           f"TMPDIR={sock['tmpdir']} ({sock['tmpdir_bytes']} bytes long); not run")
                self.doc["dataloader"][m] = {"status": "fail", "seconds": 0.0}
            return
        # fork first, before any helper threads exist in this process; then
        # start the spawn and forkserver workers together so their slow
        # start-up (each imports torch) overlaps.
        order = [m for m in methods if m == "fork"] + [m for m in methods if m != "fork"]
        started: dict = {}
        for m in order:
            if m == "fork":
                self.round_trip(m, self.start_loader(m))
            else:
                started[m] = self.start_loader(m)
        for m, state in started.items():
            self.round_trip(m, state)
        if "hang" in self.inject:
            self.hang_round(order[0])

    def start_loader(self, method: str) -> dict:
        state: dict = {"t": time.perf_counter(), "method": method}
        inject = tuple(i for i in self.inject if i in ("killed", "shm-sigbus", "cuda-fork", "shm-big"))
        collate = None
        if "pickling" in self.inject and method == "spawn":
            collate = lambda items: torch_default_collate(items)  # noqa: E731, PLW0108 - unpicklable on purpose
        try:
            loader = self.make_loader(method, inject, collate=collate)
            state["loader"] = loader
            state["iter"] = iter(loader)  # starts the workers
            state["pids"] = [w.pid for w in getattr(state["iter"], "_workers", [])]
            event(method=method, pids=state["pids"])
        except BaseException as e:  # noqa: BLE001
            state["error"] = e
        return state

    def round_trip(self, method: str, state: dict) -> None:
        self.phase(f"dataloader:{method}")
        pin = bool(self.torch.cuda.is_available())
        length = 16
        detail: dict = {"num_workers": 2, "prefetch_factor": 2, "persistent_workers": True, "pin_memory": pin,
                        "timeout": self.dl_timeout, "epochs": 2}
        try:
            if "error" in state:
                raise state["error"]
            it = state["iter"]
            wids = self.verify_epoch(list(it), length, pin)
            it2 = iter(state["loader"])  # persistent workers: same processes, second epoch
            pids2 = [w.pid for w in getattr(it2, "_workers", [])]
            wids |= self.verify_epoch(list(it2), length, pin)
            if state["pids"] and pids2 != state["pids"]:
                raise AssertionError(f"persistent_workers restarted workers: {state['pids']} -> {pids2}")
            if wids != {0, 1}:
                raise AssertionError(f"batches came from workers {sorted(wids)}, expected [0, 1]")
            detail["worker_pids"] = state["pids"]
        except BaseException as e:  # noqa: BLE001
            detail["worker_signals"] = self.worker_signals(state)
            self.check(f"dataloader:{method}", "fail", time.perf_counter() - state["t"], _err(e), **detail)
            self.doc["dataloader"][method] = {"status": "fail", "seconds": time.perf_counter() - state["t"]}
            self.close(state)
            return
        self.close(state)
        self.check(f"dataloader:{method}", "pass", time.perf_counter() - state["t"], **detail)
        self.doc["dataloader"][method] = {"status": "pass", "seconds": time.perf_counter() - state["t"]}

    @staticmethod
    def worker_signals(state: dict) -> list[str]:
        """Signals that ended workers: torch's own message often only says "exited unexpectedly"."""
        import signal

        names = []
        for w in getattr(state.get("iter"), "_workers", []):
            if w.exitcode is None and not w.is_alive():
                w.join(1.0)  # dead but not reaped yet
            code = w.exitcode
            if code is not None and code < 0:
                try:
                    names.append(signal.Signals(-code).name)
                except ValueError:
                    names.append(f"signal {-code}")
        return names

    @staticmethod
    def close(state: dict) -> None:
        it = state.pop("iter", None)
        if it is not None and hasattr(it, "_shutdown_workers"):
            try:
                it._shutdown_workers()
            except Exception:  # noqa: BLE001
                pass
        state.pop("loader", None)

    def hang_round(self, method: str) -> None:
        """A dataset slower than the DataLoader's timeout."""
        t = time.perf_counter()
        self.phase(f"dataloader-hang:{method}")
        loader = self.make_loader(method, length=4, sleep=1.5, timeout=1.0, persistent=False)
        try:
            for _ in loader:
                pass
        except BaseException as e:  # noqa: BLE001
            self.check(f"dataloader-timeout:{method}", "fail", time.perf_counter() - t, _err(e), timeout=1.0)
            return
        self.check(f"dataloader-timeout:{method}", "pass", time.perf_counter() - t)

    def fd_limit_round(self) -> None:
        """RLIMIT_NOFILE=128 with the file_descriptor strategy and many live batches."""
        import resource

        torch = self.torch
        t = time.perf_counter()
        self.phase("dataloader-fd-limit")
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        old = torch.multiprocessing.get_sharing_strategy()
        keep = []
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (128, hard))
            torch.multiprocessing.set_sharing_strategy("file_descriptor")
            loader = torch.utils.data.DataLoader(
                ProbeDataset(4000, 4), batch_size=1, num_workers=2, timeout=self.dl_timeout,
                worker_init_fn=worker_init, multiprocessing_context="fork" if sys.platform != "darwin" else None)
            for b in loader:
                keep.append(b)
        except BaseException as e:  # noqa: BLE001
            self.check("dataloader-fd-limit", "fail", time.perf_counter() - t, _err(e), rlimit=128,
                       live_batches=len(keep))
        else:
            self.check("dataloader-fd-limit", "pass", time.perf_counter() - t, rlimit=128, live_batches=len(keep))
        finally:
            keep.clear()
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
            torch.multiprocessing.set_sharing_strategy(old)

    def shm_leak_round(self) -> None:
        """file_system strategy: batches live in named /dev/shm files; then stall for the runner to kill us."""
        import signal

        torch = self.torch
        self.phase("dataloader-shm-leak")
        # Only SIGKILL ends this round (its workers ignore SIGTERM too, see ProbeDataset): the probe cannot free
        # its batch files then, so a test sees what a killed probe strands in /dev/shm and what the runner removes.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        torch.multiprocessing.set_sharing_strategy("file_system")
        loader = torch.utils.data.DataLoader(ProbeDataset(8, 64 * 1024, ("shm-leak",)), batch_size=2, num_workers=2,
                                             worker_init_fn=worker_init, multiprocessing_context="fork",
                                             persistent_workers=True)
        keep = list(loader)
        event(shm_leak_batches=len(keep))
        self.phase("stalled")
        while True:
            time.sleep(3600)

    def never_ends(self) -> None:
        import signal

        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # inherited by the fork workers
        self.phase("never-ends")
        loader = self.make_loader("fork" if sys.platform.startswith("linux") else "spawn",
                                  inject=("never-ends",), timeout=0)
        try:
            for _ in loader:
                pass
        finally:
            while True:
                time.sleep(3600)

    # -- CUDA ---------------------------------------------------------------
    def cuda(self) -> None:
        torch = self.torch
        self.phase("cuda")
        info: dict = {"available": False, "built": torch.version.cuda is not None}
        self.doc["cuda"] = info
        t = time.perf_counter()
        try:
            info["available"] = bool(torch.cuda.is_available())
        except Exception as e:  # noqa: BLE001
            info["error"] = _err(e)
        if not info["available"]:
            if info["built"] and "error" not in info:
                # Why not: torch.cuda.init() raises the driver's own message.
                try:
                    torch.cuda.init()
                except Exception as e:  # noqa: BLE001
                    info["error"] = _err(e)
            self.check("pinned-memory", "not-exercised", None, None, reason="no CUDA device")
            self.check("cuda", "skip", time.perf_counter() - t, info.get("error"),
                       reason="CPU build" if not info["built"] else "CUDA not available")
            return
        try:
            n = torch.cuda.device_count()
            info["device_count"] = n
            info["arch_list"] = torch.cuda.get_arch_list()
            info["devices"] = []
            for i in range(n):
                p = torch.cuda.get_device_properties(i)
                info["devices"].append({"index": i, "name": p.name, "capability": [p.major, p.minor],
                                        "memory": int(p.total_memory)})
            try:
                info["driver_cuda"] = torch._C._cuda_getDriverVersion()  # e.g. 12040, when exposed
            except Exception:  # noqa: BLE001
                pass
            self.check("cuda", "pass", time.perf_counter() - t, device_count=n)
        except BaseException as e:  # noqa: BLE001
            self.check("cuda", "fail", time.perf_counter() - t, _err(e))
            return
        self.pinned_copy(info)
        self.matmul()

    def pinned_copy(self, info: dict) -> None:
        torch = self.torch
        self.phase("cuda-pinned")
        t = time.perf_counter()
        numel = (4 if self.quick else 64) * 1024 * 1024 // 4  # int32 elements
        reps = 2 if self.quick else 5
        try:
            host = torch.arange(numel, dtype=torch.int32).pin_memory()
            if not host.is_pinned():
                raise AssertionError("pin_memory() returned memory that is not pinned")
            dev = host.to("cuda", non_blocking=True)
            torch.cuda.synchronize()
            ref = torch.arange(numel, dtype=torch.int32, device="cuda")
            if not bool(torch.equal(dev, ref)):
                raise AssertionError("pinned non_blocking host-to-device copy gave wrong data")
            bw = {"bytes": numel * 4, "reps": reps,
                  "pinned_gbps": self.bandwidth(host, dev, reps),
                  "pageable_gbps": self.bandwidth(torch.arange(numel, dtype=torch.int32), dev, reps)}
            info["bandwidth"] = bw
        except BaseException as e:  # noqa: BLE001
            self.check("pinned-memory", "fail", time.perf_counter() - t, _err(e))
            return
        self.check("pinned-memory", "pass", time.perf_counter() - t, **info["bandwidth"])

    def bandwidth(self, src, dst, reps: int) -> float:
        torch = self.torch
        dst.copy_(src, non_blocking=True)  # warm-up
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            dst.copy_(src, non_blocking=True)
        end.record()
        torch.cuda.synchronize()
        ms = start.elapsed_time(end)
        return round(src.numel() * src.element_size() * reps / (ms / 1000.0) / 1e9, 3) if ms > 0 else 0.0

    def matmul(self) -> None:
        torch = self.torch
        self.phase("cuda-matmul")
        t = time.perf_counter()
        try:
            g = torch.Generator().manual_seed(0)
            a = torch.randn(64, 64, generator=g)
            b = torch.randn(64, 64, generator=g)
            got = (a.cuda() @ b.cuda()).cpu()
            if not torch.allclose(got, a @ b, rtol=1e-2, atol=1e-2):
                raise AssertionError("matmul on the GPU differs from the CPU result")
        except BaseException as e:  # noqa: BLE001
            self.check("cuda-matmul", "fail", time.perf_counter() - t, _err(e))
            return
        self.check("cuda-matmul", "pass", time.perf_counter() - t)

    # -- torch.distributed --------------------------------------------------
    def run_distributed(self) -> None:
        import multiprocessing
        import tempfile

        torch = self.torch
        self.phase("distributed")
        t = time.perf_counter()
        info: dict = {"world_size": 2}
        self.doc["distributed"] = info
        dist = getattr(torch, "distributed", None)
        if dist is None or not dist.is_available():
            info["backend"] = None
            self.check("distributed", "skip", 0.0, None, reason="torch.distributed not available in this build")
            return
        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
        # NCCL needs one GPU per rank; with fewer, gloo still proves the rendezvous.
        backend = "nccl" if gpus >= 2 and dist.is_nccl_available() else "gloo"
        info["backend"] = backend
        if backend == "gloo" and not dist.is_gloo_available():
            self.check("distributed", "skip", 0.0, None, reason="gloo not available in this build")
            return
        methods = multiprocessing.get_all_start_methods()
        method = "fork" if ("fork" in methods and not torch.cuda.is_initialized()
                            and sys.platform.startswith("linux")) else "spawn"
        info["start_method"] = method
        ctx = multiprocessing.get_context("fork") if method == "fork" else multiprocessing.get_context("spawn")
        out = tempfile.mkdtemp(prefix="envguard-dist-")
        init = "file://" + os.path.join(out, "store").replace(os.sep, "/")
        if backend == "gloo" and sys.platform.startswith("linux"):
            os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # the ranks only talk on this host
        procs = [ctx.Process(target=dist_rank, args=(r, 2, backend, init, out, self.dl_timeout), daemon=True)
                 for r in range(2)]
        try:
            for p in procs:
                p.start()
            deadline = time.monotonic() + self.dl_timeout + 5
            for p in procs:
                p.join(max(0.1, deadline - time.monotonic()))
            results, errors = [], []
            for r, p in enumerate(procs):
                if p.is_alive():
                    p.kill()
                    p.join(1)
                    errors.append(f"rank {r} did not finish within {self.dl_timeout + 5:.0f} s")
                    continue
                path = os.path.join(out, f"rank{r}.json")
                if not os.path.exists(path):
                    errors.append(f"rank {r} exited with code {p.exitcode} and no result")
                    continue
                with open(path) as f:
                    res = json.load(f)
                results.append(res)
                if "error" in res:
                    errors.append(f"rank {r}: {res['error']}")
                elif res.get("value") != [3.0] * 4:
                    errors.append(f"rank {r}: all_reduce gave {res.get('value')}, expected [3.0]*4")
            info["results"] = results
            if errors:
                self.check("distributed", "fail", time.perf_counter() - t, "; ".join(errors), backend=backend)
            else:
                self.check("distributed", "pass", time.perf_counter() - t, backend=backend)
        except BaseException as e:  # noqa: BLE001
            self.check("distributed", "fail", time.perf_counter() - t, _err(e), backend=backend)
        finally:
            import shutil

            shutil.rmtree(out, ignore_errors=True)

    def run_multinode(self, world: dict) -> None:
        """This process is one rank of a launcher's world (torchrun, srun): multinode_probe.py."""
        import multinode_probe  # beside this file; run() put its directory on sys.path

        self.phase("distributed")
        t = time.perf_counter()
        event(rank=world.get("rank"), world_size=world.get("world_size"))
        info, error = multinode_probe.run(
            self.torch, world, join_timeout=self.join_timeout, collective_timeout=max(self.join_timeout, 10.0),
            sizes=self.dist_sizes, reps=3 if self.quick else 10, backend=self.backend,
            join_deadline=self.join_deadline, inject=self.inject)
        self.doc["distributed"] = info
        detail = {k: info.get(k) for k in ("backend", "rank", "world_size", "stage") if info.get(k) is not None}
        self.check("distributed", "fail" if error else "pass", time.perf_counter() - t, error, **detail)

    # -- the whole run ------------------------------------------------------
    def run(self) -> dict:
        world = None
        if self.distributed:
            here = os.path.dirname(os.path.abspath(__file__))
            if here not in sys.path:  # imported as a module (tests) rather than run by path
                sys.path.insert(0, here)
            import multinode_probe

            world = multinode_probe.world_from_env(os.environ)
        if self.import_torch():
            if world is not None:  # meet the other ranks first, while every node is at the same point
                self.run_multinode(world)
            elif self.distributed and self.only_distributed:
                self.run_distributed()
            if not self.only_distributed:
                self.numpy_interop()
                self.limits()
                self.dataloaders()
                self.cuda()
                if self.distributed and world is None:
                    self.run_distributed()
        self.phase("done")
        self.doc["duration"] = round(time.perf_counter() - self.t0, 4)
        self.doc["ok"] = not any(c["status"] == "fail" for c in self.doc["checks"])
        return self.doc


def torch_default_collate(items: list):
    from torch.utils.data import default_collate

    return default_collate(items)


def _parse(argv: list[str]) -> dict:
    import argparse

    ap = argparse.ArgumentParser(prog="smoke_probe.py", description="envguard smoke probe (prints one JSON document)")
    ap.add_argument("--quick", action="store_true", help="one start method, small batches")
    ap.add_argument("--distributed", action="store_true",
                    help="also torch.distributed: this rank of a launcher's world (RANK, WORLD_SIZE, MASTER_ADDR, "
                         "MASTER_PORT as torchrun or srun set them), else 2 local processes")
    ap.add_argument("--only-distributed", action="store_true", help="with --distributed: nothing else")
    ap.add_argument("--join-timeout", type=float, default=None,
                    help="seconds every rank waits for the others (default: --dl-timeout)")
    ap.add_argument("--join-deadline", type=float, default=None,
                    help="wall-clock time (epoch seconds) by which the join must end, whatever --join-timeout says")
    ap.add_argument("--dist-sizes", default=None, help="all-reduce sizes in bytes, comma separated")
    ap.add_argument("--backend", choices=("auto", "nccl", "gloo"), default="auto",
                    help="process group backend (auto: NCCL with GPUs, else gloo)")
    ap.add_argument("--dl-timeout", type=float, default=30.0, help="DataLoader timeout in seconds")
    ap.add_argument("--events", default=None, help="append progress events (JSON lines) to this file")
    ap.add_argument("--inject", action="append", default=[], help=argparse.SUPPRESS)
    ns = ap.parse_args(argv)
    from_env = os.environ.get(_INJECT_ENV, "") if os.environ.get(_TESTING_ENV) == "1" else ""
    inject = [i for v in ns.inject + [from_env] for i in v.split(",") if i]
    unknown = [i for i in inject if i not in INJECTIONS]
    if unknown:
        ap.error(f"unknown --inject value(s): {', '.join(unknown)}")
    try:
        sizes = tuple(int(x) for x in ns.dist_sizes.split(",") if x) if ns.dist_sizes else None
    except ValueError:
        ap.error(f"--dist-sizes takes byte counts, got {ns.dist_sizes!r}")
    return {"quick": ns.quick, "distributed": ns.distributed, "dl_timeout": ns.dl_timeout,
            "events": ns.events, "inject": inject, "only_distributed": ns.only_distributed,
            "join_timeout": ns.join_timeout, "join_deadline": ns.join_deadline, "dist_sizes": sizes,
            "backend": ns.backend}


_STOPPED: list[int] = []  # the SIGINT/SIGTERM received, even where a check's `except BaseException` swallowed its exit
_MAIN_PID: list[int] = []  # set by main(): spawn workers and ranks re-import this module and are not the probe


def _stop_if_signalled() -> None:
    if _STOPPED and os.getpid() in _MAIN_PID:
        raise SystemExit(128 + _STOPPED[0])


def _on_signal(signum: int, frame: Any) -> None:
    """SIGINT or SIGTERM to the probe: unwind with exit 128 + signum (130, 143), so that ``finally`` blocks and the
    exit handlers run: multiprocessing's removes its pymp-* directory from TMPDIR (killed outright, it stayed),
    the probe's own removes the directories it made, and the DataLoader workers still alive are stopped."""
    import signal

    if os.getpid() not in _MAIN_PID:  # a forked DataLoader worker inherited this: it ends as it did before
        if signum == signal.SIGINT:
            signal.default_int_handler(signum, frame)  # KeyboardInterrupt, which torch's worker loop ends on
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        return
    if _STOPPED:  # a second signal while unwinding: let the exit handlers finish (SIGKILL still ends a stuck probe)
        return
    _STOPPED.append(signum)
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    args = _parse(sys.argv[1:] if argv is None else argv)
    if args["events"]:
        # Before any child exists, so that every worker inherits it.
        os.environ[_EVENTS_ENV] = os.path.abspath(args["events"])
    # Our JSON goes to the real stdout; everything else printed meanwhile
    # (by us, torch, workers) goes to stderr.
    real_stdout = os.dup(1)
    os.dup2(2, 1)
    event(probe_pid=os.getpid(), tmp=mp_temp_dir())
    import signal

    _MAIN_PID.append(os.getpid())
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _on_signal)
    probe = Probe(args)
    if not args["quick"] and not args["only_distributed"] and "forkserver" in probe.methods():
        _start_forkserver()
    try:
        doc = probe.run()
    except BaseException as e:  # noqa: BLE001 - a bug in the probe is still one JSON document
        _stop_if_signalled()  # stopped by a signal: no document, the exit handlers clean up
        probe.check("probe", "fail", None, _err(e), traceback=traceback.format_exc()[-_MAX_ERROR:])
        doc = probe.doc
        doc["ok"] = False
    _stop_if_signalled()
    sys.stdout.flush()
    data = (json.dumps(doc, default=str) + "\n").encode()
    while data:
        data = data[os.write(real_stdout, data):]
    os.close(real_stdout)
    return 0 if doc.get("ok") else 1


def _start_forkserver() -> None:
    """Start the forkserver now, preloading torch, so its import overlaps ours."""
    try:
        import multiprocessing
        import multiprocessing.forkserver as fs

        multiprocessing.get_context("forkserver").set_forkserver_preload(["__main__", "torch"])
        fs.ensure_running()
    except Exception:  # noqa: BLE001 - the forkserver round trip will report it
        pass


if __name__ == "__main__":
    sys.exit(main())
