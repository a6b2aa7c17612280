"""One rank of a multi-node torch.distributed check, for the smoke probe's ``--distributed`` mode.

Part of the standalone probe (``smoke_probe.py`` imports it from its own directory): the standard
library and torch only, never envguard. It runs when a launcher has described the world in the
standard variables: ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``, as
``torchrun`` sets them, or as ``srun`` does through ``SLURM_PROCID``, ``SLURM_NTASKS`` and
``SLURM_LOCALID`` (``MASTER_ADDR`` then defaults to the first host of the step's node list).

Why its own join step before ``init_process_group``: a process group that waits for a rank that
never comes says only "timed out". Every rank first registers itself (rank, host) in one TCPStore
(rank 0's, or torchrun's agent store), and waits for the others until ``join_timeout``; a rank
that is missing then is named with its host, as far as anyone knows it (the Slurm node list,
another rank of the same torchrun node, or MASTER_ADDR for rank 0), and no collective is started
that could hang. Only when every rank has joined does the group form (NCCL when every rank has a GPU of its
own, else gloo), and all-reduce and broadcast of known tensors prove correctness before the all-reduce
bus bandwidth is measured per message size.
"""

from __future__ import annotations

import datetime
import json
import re
import socket
import time
from typing import Any, Mapping

_MAX_ERROR = 6000
GLOO_SIZES = (256 << 10, 4 << 20)  # bytes per all-reduce; small: gloo is for proving the wiring
NCCL_SIZES = (1 << 20, 64 << 20, 512 << 20)


def _err(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"[:_MAX_ERROR]


# --------------------------------------------------------------------------- the world, as launched


def expand_hostlist(text: str) -> list[str]:
    """Slurm's compressed host list (``gpu[001-003,007],login1``) as host names."""
    items, depth, cur = [], 0, ""
    for ch in text.strip():
        depth += ch == "["
        depth -= ch == "]"
        if ch == "," and depth == 0:
            items.append(cur)
            cur = ""
        else:
            cur += ch
    items.append(cur)
    out: list[str] = []
    for item in filter(None, (i.strip() for i in items)):
        m = re.match(r"^([^\[]*)\[([^\]]*)\](.*)$", item)
        if not m:
            out.append(item)
            continue
        head, ranges, tail = m.groups()
        for part in ranges.split(","):
            lo, _, hi = part.partition("-")
            if not lo.isdigit() or (hi and not hi.isdigit()):
                continue
            for n in range(int(lo), int(hi or lo) + 1):
                out += [head + str(n).zfill(len(lo)) + rest for rest in expand_hostlist(tail) or [""]]
    return out


def _tasks_per_node(text: str) -> list[int]:
    """``SLURM_TASKS_PER_NODE`` (``2(x3),1``) as one count per node."""
    out: list[int] = []
    for part in filter(None, text.split(",")):
        m = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", part.strip())
        if m:
            out += [int(m.group(1))] * int(m.group(2) or 1)
    return out


def world_from_env(env: Mapping[str, str]) -> dict[str, Any] | None:
    """Rank, world and rendezvous address as the launcher set them; None when no launcher did."""
    rank, world = env.get("RANK", env.get("SLURM_PROCID")), env.get("WORLD_SIZE", env.get("SLURM_NTASKS"))
    if rank is None or world is None:
        return None
    slurm_nodes = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST") or ""
    launcher = "torchrun" if env.get("TORCHELASTIC_RUN_ID") else "slurm" if "RANK" not in env else "env"
    out: dict[str, Any] = {"launcher": launcher, "host": socket.gethostname()}
    try:
        out["rank"], out["world_size"] = int(rank), int(world)
        out["local_rank"] = int(env.get("LOCAL_RANK", env.get("SLURM_LOCALID", "0")))
        out["local_world_size"] = int(env.get("LOCAL_WORLD_SIZE", "0")) or None
    except ValueError:
        out["error"] = f"RANK={rank!r}, WORLD_SIZE={world!r}, LOCAL_RANK must be integers"
        return out
    addr = env.get("MASTER_ADDR") or (expand_hostlist(slurm_nodes)[:1] or [""])[0]
    port = env.get("MASTER_PORT") or ("29500" if launcher == "slurm" else "")
    out["master"] = f"{addr}:{port}"
    out["agent_store"] = env.get("TORCHELASTIC_USE_AGENT_STORE") == "True"
    out["run_id"] = f"{env.get('TORCHELASTIC_RUN_ID', env.get('SLURM_JOB_ID', 'envguard'))}." \
                    f"{env.get('TORCHELASTIC_RESTART_COUNT', env.get('SLURM_STEP_ID', '0'))}"
    if slurm_nodes:  # srun itself, or torchrun started by srun: where each rank should be
        out["slurm_nodes"] = slurm_nodes
        out["slurm_tasks_per_node"] = env.get("SLURM_STEP_TASKS_PER_NODE") or env.get("SLURM_TASKS_PER_NODE", "")
        out["slurm_nodeid"] = env.get("SLURM_NODEID")
        out["group_rank"] = env.get("GROUP_RANK")
    if not addr or not port.isdigit():
        out["error"] = ("MASTER_ADDR and MASTER_PORT must be set (torchrun sets them; with srun export "
                        "MASTER_ADDR=<first node> MASTER_PORT=<free port>)")
    elif not 0 <= out["rank"] < out["world_size"]:
        out["error"] = f"RANK {out['rank']} is outside WORLD_SIZE {out['world_size']}"
    out["addr"], out["port"] = addr, int(port) if port.isdigit() else 0
    return out


def expected_host(world: Mapping[str, Any], rank: int, joined: Mapping[int, dict]) -> str | None:
    """Where ``rank`` should have run: from the Slurm node list, a sibling rank of the same torchrun
    node, or MASTER_ADDR for rank 0. None when nobody can know."""
    lws = world.get("local_world_size")
    if world.get("slurm_nodes") and world.get("launcher") == "torchrun":
        # One torchrun per node with --node-rank $SLURM_NODEID: node k of the list runs ranks k*lws...
        if lws and world.get("group_rank") is not None and world.get("group_rank") == world.get("slurm_nodeid"):
            hosts = expand_hostlist(world["slurm_nodes"])
            if rank // lws < len(hosts):
                return hosts[rank // lws]
    elif world.get("slurm_nodes"):
        hosts, counts = expand_hostlist(world["slurm_nodes"]), _tasks_per_node(world.get("slurm_tasks_per_node", ""))
        first = 0
        for host, n in zip(hosts, counts or [1] * len(hosts)):  # srun's default block distribution
            if first <= rank < first + n:
                return host
            first += n
    if lws:
        for r, who in joined.items():
            if r // lws == rank // lws and who.get("host"):
                return str(who["host"])
    if rank == 0 and world.get("addr"):
        return str(world["addr"])
    return None


# --------------------------------------------------------------------------- the check


class _Failed(Exception):
    def __init__(self, stage: str, message: str) -> None:
        super().__init__(message)
        self.stage = stage


def run(torch: Any, world: dict[str, Any], *, join_timeout: float, collective_timeout: float,
        sizes: tuple[int, ...] | None = None, reps: int = 3, backend: str = "auto",
        join_deadline: float | None = None, inject: tuple[str, ...] = ()) -> tuple[dict, str | None]:
    """This rank's part. Returns (facts for the probe's document, error text or None).

    ``join_deadline`` (wall clock, from the runner) caps the wait, so that a slow start (a loaded machine, a
    cold file system) still leaves time to report a missing rank before the runner's own limit.
    ``inject`` (the probe's test injections): ``fake-gpu`` makes this rank claim one NCCL-capable GPU that
    every rank on this host shares, so that the pairing of ranks and GPUs is tested without a GPU.
    """
    if join_deadline is not None:
        join_timeout = round(max(1.0, min(join_timeout, join_deadline - time.time())), 1)
    info: dict[str, Any] = {"mode": "launcher", **{k: v for k, v in world.items() if k != "error"},
                            "join_timeout": join_timeout, "stage": "launcher"}
    t0 = time.monotonic()
    if world.get("error"):
        return info, world["error"]
    dist = getattr(torch, "distributed", None)
    if dist is None or not dist.is_available():
        return info, "torch.distributed is not available in this build"
    gpu = _this_ranks_gpu(torch, dist, world, inject)
    info["backend"] = backend if backend != "auto" else "nccl" if gpu else "gloo"  # until every rank is known
    store = None
    try:
        info["stage"] = "connect"
        store = _connect(dist, world, join_timeout)
        info["stage"] = "join"
        _register_gpu(store, world, gpu, inject)
        _join(store, world, info, t0, join_timeout)
        info["stage"] = "devices"
        backend = _choose_backend(store, world, gpu, backend, info)
        device = torch.device("cpu")
        if backend == "nccl" and gpu is not None and not gpu["fake"]:
            device = torch.device("cuda", gpu["index"])
            torch.cuda.set_device(device)
            info["device"] = str(device)
        info["stage"] = "init"
        t = time.monotonic()
        dist.init_process_group(backend, store=dist.PrefixStore("pg", store), rank=world["rank"],
                                world_size=world["world_size"],
                                timeout=datetime.timedelta(seconds=collective_timeout))
        _check_allreduce(torch, dist, world, device, info)  # the first collective sets up the communicator
        info["init_s"] = round(time.monotonic() - t, 4)
        info["rendezvous_s"] = round(info["join_s"] + info["init_s"], 4)
        info["stage"] = "broadcast"
        _check_broadcast(torch, dist, world, device, info)
        info["stage"] = "bandwidth"
        info["bandwidth"] = _bandwidth(torch, dist, world, device, backend, sizes, reps)
        info["stage"] = "done"
        dist.destroy_process_group()
        _leave(store, world)
        return info, None
    except _Failed as e:
        if e.stage == "connect" and world["rank"] != 0:
            info["missing"] = [{"rank": 0, "host": world["addr"]}]
        return info, str(e)
    except BaseException as e:  # noqa: BLE001 - every failure is this rank's report
        return info, _err(e)
    finally:
        info["seconds"] = round(time.monotonic() - t0, 4)


# --------------------------------------------------------------------------- ranks and GPUs
# NCCL needs a GPU of its own for every rank, and every rank must pick the same backend. Each rank says
# which GPU it would use (by UUID where torch tells it, else host, boot id and index) before it joins;
# once all have joined, every rank reads the same counters and so makes the same choice.


def _this_ranks_gpu(torch: Any, dist: Any, world: dict[str, Any], inject: tuple[str, ...]) -> dict | None:
    """The GPU this rank would use with NCCL (LOCAL_RANK modulo the GPUs it sees), or None."""
    host = f"{world['host']}:{_boot_id()}"
    if "fake-gpu" in inject:
        return {"id": f"fake:{host}:0", "index": 0, "name": "cuda:0", "fake": True}
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if not gpus or not dist.is_nccl_available():
        return None
    index = world["local_rank"] % gpus
    try:
        uuid = getattr(torch.cuda.get_device_properties(index), "uuid", None)
    except Exception:  # noqa: BLE001 - the host, boot id and index still identify it
        uuid = None
    return {"id": f"uuid:{uuid}" if uuid else f"{host}:{index}", "index": index, "name": f"cuda:{index}",
            "fake": False}


def _boot_id() -> str:
    """Tells two machines of the same host name apart (containers of one machine share it)."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return ""


def _register_gpu(store: Any, world: dict[str, Any], gpu: dict | None, inject: tuple[str, ...] = ()) -> None:
    """Before joining: count this rank under its GPU, or among the ranks NCCL cannot serve."""
    me = {"rank": world["rank"], "host": world["host"]}
    if gpu is None:
        store.add("gpus/none", 1)
        store.set("gpus/none/example", json.dumps(me))
        return
    if gpu["fake"]:  # claims a GPU for the pairing, but cannot run NCCL: every rank must know it
        store.add("gpus/fake", 1)
    n = int(store.add(f"gpu/{gpu['id']}", 1))
    if n == 1 and "slow-register" in inject:  # test injection: widens the window between the count and the name
        time.sleep(1.5)
    store.set(f"gpu/{gpu['id']}/{n}", json.dumps(me))
    if n > 1:
        first = {}
        try:  # the first rank sets its key just after its add: wait for it (a bare check raced, naming one rank)
            store.wait([f"gpu/{gpu['id']}/1"], datetime.timedelta(seconds=10))
            first = json.loads(store.get(f"gpu/{gpu['id']}/1"))
        except Exception:  # noqa: BLE001 - a rank that died there: the message says "two ranks" or names one
            pass
        store.add("gpus/shared", 1)
        store.set("gpus/shared/example", json.dumps({"ranks": [first.get("rank"), world["rank"]],
                                                     "host": world["host"], "device": gpu["name"]}))


def _choose_backend(store: Any, world: dict[str, Any], gpu: dict | None, asked: str, info: dict[str, Any]) -> str:
    """The same answer on every rank: NCCL when every rank has a GPU of its own, else gloo (with a note
    why, when GPUs were there); ``--backend nccl`` where that cannot work fails here, before NCCL would."""
    size = world["world_size"]
    shared, without = int(store.add("gpus/shared", 0)), int(store.add("gpus/none", 0))
    problem = None
    if shared:
        ex = json.loads(store.get("gpus/shared/example"))
        ranks = " and ".join(f"rank {r}" for r in ex["ranks"] if r is not None) or "two ranks"
        more = f", and {shared - 1} more rank(s) share a GPU with another" if shared > 1 else ""
        problem = (f"{ranks} share one GPU ({ex['device']} on {ex['host']}){more}: NCCL needs one GPU per rank "
                   "(it stops with 'Duplicate GPU detected')")
    elif without and without < size:
        ex = json.loads(store.get("gpus/none/example"))
        problem = (f"{without} of {size} ranks see no GPU usable with NCCL (rank {ex['rank']} on {ex['host']} "
                   "among them) while the others have one: NCCL needs a GPU on every rank")
    info["gpu"] = gpu["name"] if gpu else None
    if asked == "auto":
        backend = "nccl" if not shared and not without and not int(store.add("gpus/fake", 0)) else "gloo"
        if problem:
            info["gpu_pairing"] = problem + "; gloo proved the wiring instead"
    else:
        backend = asked
        if backend == "nccl" and (problem or gpu is None):
            raise _Failed("devices", problem or f"rank {world['rank']} on {world['host']} has no GPU usable with "
                                                "NCCL")
    info["backend"] = backend
    return backend


def _connect(dist: Any, world: dict[str, Any], timeout: float) -> Any:
    """Rank 0 serves the store unless torchrun's agent already does; everyone else is a client."""
    master = world["rank"] == 0 and not world["agent_store"]
    who = f"rank {world['rank']} on {world['host']}"
    try:
        # An address that does not resolve here never will: said at once, not after the store's retries
        # (a Slurm node name that is not a DNS name on every node was exactly this).
        socket.getaddrinfo(world["addr"], world["port"], type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as e:
        raise _Failed("resolve", f"{who} cannot resolve the rendezvous address {world['addr']} (MASTER_ADDR, "
                                 f"rank 0's): {_err(e)}") from None
    try:
        # A client retries its connect once more after the timeout: half of it keeps the whole wait within
        # the bound; every later operation of the store gets the whole of it.
        connect = timeout if master else max(1.0, timeout / 2)
        store = dist.TCPStore(world["addr"], world["port"], world["world_size"] if master else None, master,
                              datetime.timedelta(seconds=connect), wait_for_workers=False)
        store.set_timeout(datetime.timedelta(seconds=timeout))
    except BaseException as e:  # noqa: BLE001
        if master:
            raise _Failed("connect", f"rank 0 on {world['host']} cannot serve the rendezvous at {world['master']}: "
                                     f"{_err(e)}") from None
        info = f"rank {world['rank']} on {world['host']} could not reach the rendezvous at {world['master']} " \
               f"(rank 0) within {timeout:g} s: {_err(e)}"
        raise _Failed("connect", info) from None
    return dist.PrefixStore(f"envguard/{world['run_id']}", store)


def _join(store: Any, world: dict[str, Any], info: dict[str, Any], t0: float, timeout: float) -> None:
    rank, size = world["rank"], world["world_size"]
    store.set(f"join/{rank}", json.dumps({"host": world["host"], "local_rank": world["local_rank"]}))
    joined = int(store.add("joined", 1))
    deadline = t0 + timeout
    delay = 0.01
    while joined < size and time.monotonic() < deadline:
        time.sleep(delay)
        delay = min(0.2, delay * 1.5)  # quick when peers are close, gentle on the store at scale
        joined = int(store.add("joined", 0))
        # Ranks start at different times, so their deadlines differ: once one has given up, the others stop
        # too and report the same ranks missing (rank 0's store would otherwise go away under them).
        if joined < size and store.check(["join/over"]):
            break
    info["joined"] = joined
    info["join_s"] = round(time.monotonic() - t0, 4)
    if joined >= size and not store.check(["join/over"]):
        return
    store.set("join/over", "1")
    if joined >= size:  # the last one came after another rank had stopped waiting
        _read_and_linger(store, world)
        raise _Failed("join", f"rank {rank} joined the rendezvous at {world['master']} after the others had "
                              f"stopped waiting ({timeout:g} s)")
    present: dict[int, dict] = {}
    missing: list[int] = []
    for r in range(size):
        if store.check([f"join/{r}"]):
            try:
                present[r] = json.loads(store.get(f"join/{r}"))
            except ValueError:
                present[r] = {}
        else:
            missing.append(r)
    info["missing"] = [{"rank": r, "host": expected_host(world, r, present)} for r in missing]
    _read_and_linger(store, world)
    shown = ", ".join(f"rank {m['rank']}" + (f" ({m['host']})" if m["host"] else "") for m in info["missing"][:20])
    more = f" and {len(missing) - 20} more" if len(missing) > 20 else ""
    raise _Failed("join", f"{len(missing)} of {size} ranks did not join the rendezvous at {world['master']} within "
                          f"{timeout:g} s: {shown}{more}")


def _read_and_linger(store: Any, world: dict[str, Any]) -> None:
    """After a failed join: say this rank has read who is missing; rank 0, which serves the store, stays until
    every rank that joined has (bounded), so that none of them loses the store before it can name the missing."""
    try:
        store.add("join/read", 1)
        if world["rank"] == 0 and not world["agent_store"]:
            deadline = time.monotonic() + 5
            while int(store.add("join/read", 0)) < int(store.add("joined", 0)) and time.monotonic() < deadline:
                time.sleep(0.05)
    except BaseException:  # noqa: BLE001 - the verdict is already this rank's
        pass


def _leave(store: Any, world: dict[str, Any]) -> None:
    """Rank 0 serves the store: it stays until every rank is done with it (bounded)."""
    try:
        store.add("done", 1)
        if world["rank"] == 0 and not world["agent_store"]:
            deadline = time.monotonic() + 10
            while int(store.add("done", 0)) < world["world_size"] and time.monotonic() < deadline:
                time.sleep(0.05)
    except BaseException:  # noqa: BLE001 - the check itself is done
        pass


def _check_allreduce(torch: Any, dist: Any, world: dict[str, Any], device: Any, info: dict[str, Any]) -> None:
    """Every rank contributes rank + 1: the sum is known exactly (float64 holds it at any world size)."""
    info["stage"] = "allreduce"
    n, size = 1024, world["world_size"]
    t = torch.full((n,), float(world["rank"] + 1), dtype=torch.float64, device=device)
    dist.all_reduce(t)
    want = size * (size + 1) / 2
    got = t.cpu()
    ok = bool(torch.all(got == want))
    info["allreduce"] = {"ok": ok, "expected": want, "got": float(got[0]), "numel": n}
    if not ok:
        bad = int((got != want).sum())
        raise _Failed("allreduce", f"all_reduce gave {float(got[0])} ({bad} of {n} elements wrong), "
                                   f"expected {want} on every element")


def _check_broadcast(torch: Any, dist: Any, world: dict[str, Any], device: Any, info: dict[str, Any]) -> None:
    n = 1024
    want = torch.arange(n, dtype=torch.float64) * 3 + 1
    t = want.to(device) if world["rank"] == 0 else torch.zeros(n, dtype=torch.float64, device=device)
    dist.broadcast(t, src=0)
    ok = bool(torch.equal(t.cpu(), want))
    info["broadcast"] = {"ok": ok, "numel": n}
    if not ok:
        raise _Failed("broadcast", f"broadcast from rank 0 gave wrong data on rank {world['rank']}")


def _bandwidth(torch: Any, dist: Any, world: dict[str, Any], device: Any, backend: str,
               sizes: tuple[int, ...] | None, reps: int) -> list[dict[str, Any]]:
    """All-reduce time per size, the slowest rank's (every rank reports the same figure).

    Bus bandwidth as nccl-tests defines it for all-reduce: size / time x 2 (n - 1) / n.
    """
    size = world["world_size"]
    if size < 2:  # one rank: nothing crosses a bus, and NCCL's all-reduce of one is a no-op
        return []
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    rows = []
    for nbytes in sizes or (NCCL_SIZES if backend == "nccl" else GLOO_SIZES):
        t = torch.ones(max(1, nbytes // 4), dtype=torch.float32, device=device)
        dist.all_reduce(t)  # warm-up: buffers and connections for this size
        sync()
        dist.barrier()
        start = time.perf_counter()
        for _ in range(reps):
            dist.all_reduce(t)
        sync()
        took = torch.tensor([(time.perf_counter() - start) / reps], dtype=torch.float64, device=device)
        dist.all_reduce(took, op=dist.ReduceOp.MAX)
        secs = float(took.item())
        algbw = t.numel() * 4 / secs / 1e9 if secs > 0 else 0.0
        rows.append({"bytes": t.numel() * 4, "reps": reps, "seconds": round(secs, 6), "algbw_gbps": round(algbw, 4),
                     "busbw_gbps": round(algbw * 2 * (size - 1) / size, 4)})
    return rows
