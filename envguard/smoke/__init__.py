"""Run the smoke probe in a target interpreter and explain what it found.

The probe (``envguard/smoke/probe/smoke_probe.py``) runs by path in the target
environment's own interpreter, in a session and process group of its own
(envguard.procsession, as tune's probe runs), under a wall-clock limit. On timeout the whole group is
stopped (SIGTERM, then SIGKILL) and nothing it started is left running. /dev/shm files that the
probe's own processes left behind are removed; anything else there is left
alone. Failures are classified into the failure catalogue
(``envguard/data/failures.yaml``) with its fix texts.

``create`` and ``check`` call :func:`run_smoke` as well.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from envguard import catalog
from envguard.envs import resolve_python as resolve_python  # public: what smoke probes
from envguard.errors import ExitCode, UserError
from envguard.findings import Finding, Severity, has_errors
from envguard.leftovers import remove_dead_owners
from envguard.procsession import (
    cleanup_shm,
    pids_of,
    read_events,
    remove_temp_dirs,
    shm_snapshot,
    start_session,
    stop_session,
)
from envguard.smoke.summary import check_label as check_label  # public
from envguard.smoke.summary import proved_line as proved_line

SCHEMA = "envguard.smoke/1"  # its --format json document (docs/json.md)
DEFAULT_TIMEOUT = 120.0
SMOKE_DIR_TAG = "envguard-smoke-"  # + "<pid>-": the probe's work dir in TMPDIR, named after its owner
SHM_WARN_BYTES = 1 << 30  # under 1 GiB free (Docker's default is 64 MB) is a warning
NOFILE_WARN = 4096


@dataclass
class SmokeResult:
    python: str
    findings: list[Finding]
    probe: dict[str, Any]
    exit_code: int
    timed_out: bool
    duration: float
    returncode: int | None = None
    phase: str | None = None
    stderr_tail: str = ""
    shm_removed: list[str] = field(default_factory=list)
    pids: list[int] = field(default_factory=list)  # every process seen as the probe's own
    driver: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    @property
    def failed(self) -> bool:
        """Whether the smoke test itself failed: it crashed or timed out, or one of its checks failed.
        Findings about facts it read (a CPU build where CUDA is wanted, a small /dev/shm) are not failures of
        the test: `envguard check` reports those with exit 1, and 7 only for this."""
        if self.timed_out or not self.probe:
            return True
        return any(c.get("status") == "fail" for c in self.probe.get("checks") or [] if isinstance(c, dict))

    def to_dict(self) -> dict[str, Any]:
        from envguard.report import findings_to_json

        checks = [c for c in self.probe.get("checks") or [] if isinstance(c, dict)]
        counts = {"checks": len(checks), **{k: sum(c.get("status") == s for c in checks) for k, s in (
            ("passed", "pass"), ("failed", "fail"), ("not_exercised", "not-exercised"), ("skipped", "skip"))},
            "findings": len(self.findings)}
        return {"schema": SCHEMA, "counts": counts,
                "python": self.python, "ok": self.ok, "exit_code": self.exit_code, "timed_out": self.timed_out,
                "duration": round(self.duration, 3), "phase": self.phase, "returncode": self.returncode,
                "shm_removed": self.shm_removed, "pids": self.pids, "driver": self.driver,
                "findings": findings_to_json(self.findings), "probe": self.probe}


def probe_path() -> Path:
    """The probe script, shipped as package data."""
    return Path(str(resources.files("envguard").joinpath("smoke/probe/smoke_probe.py")))


# ---------------------------------------------------------------- running


def _parse_stdout(text: str) -> dict[str, Any] | None:
    text = text.strip()
    if not text:
        return None
    try:
        doc = json.loads(text)
        return doc if isinstance(doc, dict) else None
    except ValueError:
        pass
    for line in reversed(text.splitlines()):  # tolerate stray output before the document
        if line.startswith("{"):
            try:
                doc = json.loads(line)
                return doc if isinstance(doc, dict) else None
            except ValueError:
                continue
    return None


def run_smoke(python: str | Path, *, quick: bool = False, distributed: bool = False, require_cuda: bool = False,
              timeout: float = DEFAULT_TIMEOUT, env: dict[str, str] | None = None, only_distributed: bool = False,
              probe_args: list[str] | None = None,
              driver_info: Callable[[], Any] | None = None,
              progress: Callable[[str], None] | None = None) -> SmokeResult:
    """Run the probe with ``python`` and classify what it reports.

    Never raises for a failing or hanging probe: that is the result. Raises
    :class:`UserError` when ``python`` is not an executable file. A relative ``python`` is taken from the
    working directory (the probe itself runs in a temporary one). ``driver_info`` replaces
    :func:`envguard.driver.get_driver_info` (tests). ``progress(phase)`` is called as the probe enters each
    phase (``import-torch``, ``dataloader:fork``, ``dataloader:spawn``, ...).
    """
    exe = Path(os.path.abspath(python))
    if not exe.is_file() or not os.access(exe, os.X_OK):
        raise UserError("no executable Python interpreter at this path", file=str(exe),
                        fix="pass the environment's python, e.g. <prefix>/bin/python")
    remove_dead_owners(tempfile.gettempdir(), SMOKE_DIR_TAG)  # work dirs of runs that were killed
    work = Path(tempfile.mkdtemp(prefix=f"{SMOKE_DIR_TAG}{os.getpid()}-"))
    events = work / "events.jsonl"
    # Below the outer limit, so a stall is reported by DataLoader's own message where possible.
    dl_timeout = max(5.0, min(30.0, timeout / 3))
    argv = [str(exe), str(probe_path()), "--events", str(events), "--dl-timeout", f"{dl_timeout:g}"]
    argv += ["--quick"] * quick + ["--distributed"] * (distributed or only_distributed) + list(probe_args or [])
    if distributed or only_distributed:
        # Under a launcher the ranks wait for each other this long, well inside the outer limit, so that a
        # rank that never comes is named by the probe (exit 7) rather than cut off by the limit (124).
        # The deadline also covers a slow start (interpreter, import torch on a loaded machine): the join
        # ends early enough to leave a fifth of the limit (at least 2 s) for the report.
        deadline = time.time() + timeout - max(2.0, timeout / 5)
        argv += ["--only-distributed"] * only_distributed + ["--join-timeout", f"{join_timeout(timeout):g}",
                 "--join-deadline", f"{deadline:.3f}"]
    before = shm_snapshot()
    t0 = time.perf_counter()
    timed_out = False
    seen: list[int] = []
    with open(work / "stdout", "wb") as out, open(work / "stderr", "wb") as err:
        # its own temporary directory inside the work dir, removed with it: a probe stopped by Ctrl-C or SIGTERM
        # left multiprocessing's pymp-* in TMPDIR (issue #38 point 8)
        proc = start_session(argv, cwd=work, env=env, stdout=out, stderr=err, tmpdir=work / "tmp")
        try:
            timed_out = not _wait(proc, timeout, events, progress)
        except BaseException:  # Ctrl-C or SIGTERM: never leave the probe or its work dir behind
            stop_session(proc, sorted(pids_of(read_events(events))), finished=False, grace=0.5)
            left = read_events(events)  # again: workers may have reported since
            cleanup_shm(before, pids_of(left) | {proc.pid})
            remove_temp_dirs(left)
            _rmtree(work)
            raise
        ev = read_events(events)
        reported = sorted(pids_of(ev))
        seen = stop_session(proc, reported, finished=not timed_out)
    duration = time.perf_counter() - t0
    ev = read_events(events)
    pids = pids_of(ev) | set(seen) | {proc.pid}
    removed = cleanup_shm(before, pids)
    remove_temp_dirs(ev)
    stdout = (work / "stdout").read_text(encoding="utf-8", errors="replace")
    stderr = (work / "stderr").read_text(encoding="utf-8", errors="replace")
    _rmtree(work)
    probe = None if timed_out else _parse_stdout(stdout)
    phase = next((e["phase"] for e in reversed(ev) if "phase" in e), None)
    tv = (probe or {}).get("torch") or {}
    need_driver = require_cuda or (bool(tv.get("cuda")) and not ((probe or {}).get("cuda") or {}).get("available"))
    driver = None
    if need_driver:
        if driver_info is None:
            from envguard.driver import get_driver_info

            driver_info = get_driver_info
        driver = driver_info()
    findings = classify(probe, stderr=stderr, returncode=proc.returncode, timed_out=timed_out, timeout=timeout,
                        phase=phase, require_cuda=require_cuda, driver=driver, driver_checked=need_driver)
    code = ExitCode.SMOKE_TIMEOUT if timed_out else ExitCode.SMOKE_FAILED if has_errors(findings) else ExitCode.OK
    return SmokeResult(python=str(exe), findings=findings, probe=probe or {}, exit_code=int(code),
                       timed_out=timed_out, duration=duration, returncode=proc.returncode, phase=phase,
                       stderr_tail=stderr[-4000:], shm_removed=removed, pids=sorted(pids),
                       driver=driver.to_dict() if driver is not None else None)


# the phase ``progress`` is told last, when the probe has exited (no probe phase has this name)
PROBE_ENDED = "probe-ended"


def _wait(proc: subprocess.Popen[bytes], timeout: float, events: Path,
          progress: Callable[[str], None] | None) -> bool:
    """Wait for the probe; False when it ran past ``timeout``. With ``progress``, report each new phase the
    probe writes to its events file while it runs."""
    if progress is None:
        try:
            proc.wait(timeout=timeout)
            return True
        except subprocess.TimeoutExpired:
            return False
    deadline = time.monotonic() + timeout
    seen = 0

    def report_new() -> None:
        nonlocal seen
        phases = [e["phase"] for e in read_events(events) if isinstance(e.get("phase"), str)]
        for phase in phases[seen:]:
            progress(phase)
        seen = max(seen, len(phases))

    while True:
        try:
            proc.wait(timeout=max(0.0, min(0.2, deadline - time.monotonic())))
            report_new()
            progress(PROBE_ENDED)  # the last phase ends here: its time is a duration
            return True
        except subprocess.TimeoutExpired:
            report_new()
            if time.monotonic() >= deadline:
                return False
def join_timeout(timeout: float) -> float:
    """How long ranks wait for rank 0's rendezvous and for each other under a ``timeout`` for the whole probe:
    ENVGUARD_RENDEZVOUS_TIMEOUT (60 s), at most half the limit, so that a rank that does not come is named by
    the probe itself (exit 7), never cut off with the rest by the limit (124)."""
    from envguard import settings

    return max(1.0, min(settings.rendezvous_timeout(), timeout / 2))


def distributed_summary(probe: dict[str, Any] | None) -> dict[str, Any] | None:
    """This rank's multi-node result, as check's report carries it (docs/check-schema.md); None when the
    probe did not run as one rank of a launcher's world."""
    d = (probe or {}).get("distributed")
    if not isinstance(d, dict) or d.get("mode") != "launcher":
        return None
    check: dict[str, Any] = next((c for c in (probe or {}).get("checks") or [] if c.get("name") == "distributed"), {})
    error = str(check.get("error") or "") or None
    return {
        "ok": check.get("status") == "pass", "launcher": d.get("launcher"), "backend": d.get("backend"),
        "rank": d.get("rank"), "world_size": d.get("world_size"), "local_rank": d.get("local_rank"),
        "host": d.get("host"), "master": d.get("master"), "stage": d.get("stage"),
        "case": _distributed_case(error, d) if error else None, "error": error,
        "rendezvous_s": d.get("rendezvous_s"), "missing": list(d.get("missing") or []),
        "allreduce_ok": (d.get("allreduce") or {}).get("ok"), "broadcast_ok": (d.get("broadcast") or {}).get("ok"),
        "bandwidth": [{k: row.get(k) for k in ("bytes", "seconds", "algbw_gbps", "busbw_gbps")}
                      for row in d.get("bandwidth") or []],
    }


def _distributed_case(error: str, detail: dict[str, Any]) -> str:
    """rendezvous (a rank missing or the store unreachable), net-interface, nccl, driver-old, ... from the
    failure catalogue."""
    if detail.get("stage") in ("connect", "join"):
        return "rendezvous"
    case = catalog.classify(error, default="distributed")
    return case.id if case else "distributed"


def _rmtree(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


# ---------------------------------------------------------------- classification (pure)


def _f(case_id: str, severity: Severity, message: str) -> Finding:
    return Finding(code=case_id, severity=severity, message=message, fix=catalog.get(case_id).fix)


def _headline(error: str) -> str:
    """One line out of an error text: the original exception of a worker traceback."""
    lines = [ln.strip() for ln in error.strip().splitlines() if ln.strip()]
    if not lines:
        return ""
    if "Original Traceback" in error or "Traceback (most recent call last)" in error:
        return lines[-1][:300]
    return lines[0][:300]


def _bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"  # pragma: no cover


def classify(probe: dict[str, Any] | None, *, stderr: str = "", returncode: int | None = 0, timed_out: bool = False,
             timeout: float = DEFAULT_TIMEOUT, phase: str | None = None, require_cuda: bool = False,
             driver: Any = None, driver_checked: bool = False) -> list[Finding]:
    """Findings for one probe run. Pure: ``driver`` is a DriverInfo or None."""
    if timed_out:
        where = f" (stopped during {phase})" if phase else ""
        return [_f("hang", Severity.ERROR, f"the smoke probe did not finish within {timeout:g} s{where}; "
                                           "its processes were stopped")]
    if probe is None:
        tail = stderr.strip()[-3000:]
        how = f"exit code {returncode}"
        if returncode is not None and returncode < 0:
            try:
                how = signal.Signals(-returncode).name
            except ValueError:
                how = f"signal {-returncode}"
        case = catalog.classify(tail, default="probe-error")
        where = f" during {phase}" if phase else ""
        last = _headline(tail) or "no output"
        return [_f(case.id, Severity.ERROR, f"the smoke probe crashed ({how}){where}: {last}")]

    findings: list[Finding] = []
    checks = probe.get("checks") or []
    tv = probe.get("torch") or {}
    for c in checks:
        status, name, error = c.get("status"), str(c.get("name", "")), str(c.get("error") or "")
        detail = c.get("detail") or {}
        if status == "fail":
            findings.append(_check_failure(name, error, detail, stderr))
        elif name == "pinned-memory" and status == "not-exercised":
            findings.append(_f("pin-cpu", Severity.INFO, "pinned memory not exercised: no CUDA device, so the "
                                                         "DataLoaders ran with pin_memory=False"))
        elif name == "numpy-interop" and status == "skip":
            if re.search(r"No module named '?numpy'?\s*$", _headline(error)):
                # torch does not require NumPy: its absence is a fact, not a problem
                findings.append(Finding("numpy-abi", Severity.INFO, "NumPy is not installed: NumPy interop not "
                                        "exercised", ""))
            else:
                findings.append(_f("numpy-abi", Severity.WARNING,
                                   f"NumPy is not importable ({_headline(error)}); NumPy interop not exercised"))
    pairing = (probe.get("distributed") or {}).get("gpu_pairing") if isinstance(probe.get("distributed"), dict) \
        else None
    if pairing:  # the wiring passed with gloo, but a training job's NCCL would not start with these ranks
        findings.append(_f("dist-gpus", Severity.WARNING, f"torch.distributed: {pairing}"))
    if tv:
        findings += _cuda_findings(probe, require_cuda, driver, driver_checked)
        findings += _limit_findings(probe, {f.code for f in findings}, bool(tv.get("cuda")))
    return findings


def _check_failure(name: str, error: str, detail: dict[str, Any], stderr: str = "") -> Finding:
    sigs = [str(s) for s in detail.get("worker_signals") or []]
    text = error + ("\nworker signals: " + " ".join(sigs) if sigs else "")
    if not sigs and "exited unexpectedly" in error:
        # The worker's own last words, when its exit status was not caught.
        m = re.search(r"ERROR: Unexpected bus error encountered in worker[^\n]*", stderr)
        text += "\n" + m.group(0) if m else ""
    if name.startswith("dataloader") and "AF_UNIX path too long" in stderr:
        # a worker could not listen on multiprocessing's socket (a thread's traceback on stderr): the DataLoader
        # only says that it timed out
        text += "\nOSError: AF_UNIX path too long"
    if name == "import-torch":
        case = catalog.classify(error, default="pip-over-conda" if "undefined symbol" in error else "probe-error")
        return _f(case.id, Severity.ERROR, f"import torch failed: {_headline(error)}")
    default = {"numpy-interop": "numpy-abi", "distributed": "distributed"}.get(name, "probe-error")
    case = catalog.get(_distributed_case(text, detail)) if name == "distributed" else catalog.classify(
        text, default=default)
    head = _headline(error)
    if sigs:
        head += f" (worker ended by {', '.join(sigs)})"
    if name.startswith("dataloader"):
        method = name.split(":", 1)[1] if ":" in name else ""
        what = {"dataloader-fd-limit": "DataLoader with many live batches",
                "dataloader-timeout": f"DataLoader timeout check ({method})"}.get(name.split(":", maxsplit=1)[0],
                                                                                   f"DataLoader round trip with "
                                                                                   f"{method} workers")
        return _f(case.id, Severity.ERROR, f"{what} failed: {head}")
    if name == "distributed" and detail.get("world_size"):  # one rank of a launcher's world
        return _f(case.id, Severity.ERROR, f"torch.distributed (rank {detail.get('rank')} of {detail['world_size']}, "
                                           f"{detail.get('backend') or '?'}) failed: {head}")
    label = {"numpy-interop": "NumPy interop", "distributed": "torch.distributed all-reduce",
             "pinned-memory": "pinned host-to-device copy", "cuda-matmul": "CUDA matmul", "cuda": "CUDA",
             "probe": "the smoke probe itself"}.get(name, name)
    return _f(case.id, Severity.ERROR, f"{label} failed: {head}")


def _cuda_findings(probe: dict[str, Any], require_cuda: bool, driver: Any, driver_checked: bool) -> list[Finding]:
    tv = probe.get("torch") or {}
    cuda = probe.get("cuda") or {}
    version, built_for = tv.get("version", "?"), tv.get("cuda")
    out: list[Finding] = []
    if cuda.get("available"):
        from envguard.compat import arch_covers

        arch = list(cuda.get("arch_list") or tv.get("arch_flags") or [])
        for dev in cuda.get("devices") or []:
            cap = dev.get("capability") or []
            if arch and len(cap) == 2 and not arch_covers((int(cap[0]), int(cap[1])), arch):
                out.append(_f("arch", Severity.ERROR,
                              f"GPU {dev.get('index', '?')} ({dev.get('name', '?')}) is sm_{cap[0]}{cap[1]}, "
                              f"but torch {version} has kernels for {' '.join(arch)}"))
        return out
    err = str(cuda.get("error") or "")
    if built_for is None and not tv.get("hip"):
        host = ""
        if driver is not None:
            gpus = ", ".join(g[0] for g in driver.gpus) or "no GPU listed"
            host = f"; this host has NVIDIA driver {driver.driver_version} ({gpus})"
        if require_cuda:
            out.append(_f("cpu-build", Severity.ERROR,
                          f"torch {version} is a CPU build (torch.version.cuda is None){host}"))
        else:
            # a CPU build where no NVIDIA driver is seen is a choice, not a problem: no CUDA advice then
            out.append(Finding("cpu-build", Severity.INFO, f"torch {version} is a CPU build: CUDA checks not "
                               f"exercised{host}", catalog.get("cpu-build").fix if driver is not None else ""))
        return out
    if built_for is None:
        return out  # ROCm builds: not covered by these rules
    sev = Severity.ERROR if require_cuda else Severity.WARNING
    if driver_checked and driver is None:
        out.append(_f("no-driver", sev, f"torch {version} is built for CUDA {built_for}, but no NVIDIA driver was "
                                        "found (NVML, nvidia-smi)" + (f": {_headline(err)}" if err else "")))
        return out
    if driver is not None:
        from envguard import compat
        from envguard.platforms import host_platform

        # the driver is this host's, so its OS decides the minimum (Windows and Linux differ)
        minimum = compat.load().min_driver(str(built_for), host_platform())
        if minimum and not compat.driver_satisfies(driver.driver_version, minimum):
            out.append(_f("driver-old", sev,
                          f"NVIDIA driver {driver.driver_version} is older than {minimum}, the minimum for CUDA "
                          f"{built_for} that torch {version} was built for"))
            return out
    case = catalog.classify(err, default="cuda-unavailable")
    out.append(_f(case.id, sev, f"torch {version} is built for CUDA {built_for}, but CUDA is not available"
                                + (f": {_headline(err)}" if err else "")))
    return out


def _limit_findings(probe: dict[str, Any], already: set[str], cuda_build: bool) -> list[Finding]:
    lim = probe.get("limits") or {}
    out: list[Finding] = []
    shm = lim.get("shm")
    if shm and "shm" not in already:
        free, need = int(shm.get("free", 0)), int(shm.get("need", 0))
        if free < need:
            out.append(_f("shm", Severity.ERROR, f"{shm.get('path')} has {_bytes(free)} free, less than the "
                                                 f"{_bytes(need)} the probe's DataLoaders keep in flight"))
        elif free < SHM_WARN_BYTES:
            out.append(_f("shm", Severity.WARNING,
                          f"{shm.get('path')} has only {_bytes(free)} free (under 1 GiB; Docker's default is "
                          "64 MB): DataLoader workers pass every batch through it"))
    nofile = lim.get("nofile")
    if nofile and "fd-limit" not in already and lim.get("sharing_strategy") == "file_descriptor":
        soft = int(nofile.get("soft", 0))
        if 0 <= soft < NOFILE_WARN:
            out.append(_f("fd-limit", Severity.WARNING,
                          f"open-file limit (ulimit -n) is {soft} with the file_descriptor sharing strategy; "
                          f"under {NOFILE_WARN} DataLoaders holding many batches run out of descriptors"))
    sock = lim.get("af_unix") or {}
    if sock.get("error") and "tmpdir-long" not in already:  # not every DataLoader uses it: the forkserver does
        out.append(_f("tmpdir-long", Severity.WARNING,
                      f"TMPDIR={sock.get('tmpdir')} ({sock.get('tmpdir_bytes')} bytes) is too long for "
                      f"multiprocessing's Unix socket ({sock.get('error')}): forkserver DataLoaders and the "
                      "file_descriptor sharing strategy stall"))
    kmp = str(lim.get("KMP_DUPLICATE_LIB_OK") or "")
    if kmp.upper() in ("TRUE", "1", "YES"):
        out.append(_f("omp-dup", Severity.WARNING,
                      f"KMP_DUPLICATE_LIB_OK={kmp} is set: it silences the duplicate-OpenMP abort instead of "
                      "fixing it, and two runtimes can give wrong results or crash"))
    omp = [o for o in lim.get("openmp") or [] if o.get("filepath")]
    paths = sorted({os.path.realpath(o["filepath"]) for o in omp})
    if len(paths) > 1 and "omp-dup" not in already:
        out.append(_f("omp-dup", Severity.WARNING, f"{len(paths)} OpenMP runtimes are loaded: {', '.join(paths)}"))
    if cuda_build:
        foreign = [str(p) for p in lim.get("foreign_cuda_libs") or []]
        for lib, case in (("libnccl", "nccl"), ("libcudnn", "cudnn")):
            hits = [p for p in foreign if os.path.basename(p).startswith(lib)]
            if hits and case not in already:
                out.append(_f(case, Severity.WARNING, f"LD_LIBRARY_PATH puts {hits[0]} before torch's own {lib}"))
        dists = [os.path.basename(str(d)) for d in lim.get("nvidia_dists") or []]
        for prefix, case in (("nvidia_nccl_cu", "nccl"), ("nvidia_cudnn_cu", "cudnn")):
            same = [d for d in dists if d.lower().startswith(prefix)]
            if len(same) > 1 and case not in already:
                out.append(_f(case, Severity.WARNING, f"more than one {prefix.replace('_', '-')}* distribution is "
                                                      f"installed: {', '.join(same)}"))
    return out


# ---------------------------------------------------------------- for tune's report: failures and sizes worded alike


def headline(error: str) -> str:
    """One line out of an error text: the original exception of a worker traceback."""
    return _headline(error)


def human_bytes(n: float) -> str:
    return _bytes(n)
