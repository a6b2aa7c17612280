"""Facts about the machine for the tune probe: usable CPUs (affinity and cgroup quotas), memory and CPU time
of a process, /dev/shm, open file descriptors, and the inspection the serving process reports.

Standalone like its entry point: the standard library and torch only, never envguard (the target
environment does not have it). Linux /proc and cgroups; harmless elsewhere.
"""

from __future__ import annotations

import os

from tune_probe_shared import _err, torch

METHODS = ("fork", "forkserver", "spawn")


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
