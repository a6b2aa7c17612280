"""examples/slurm/check-nodes.sbatch on a real Slurm: slurmctld, three slurmd and munged on this machine.

Debian's slurmd is built with MULTIPLE_SLURMD, so three nodes share one host (``NodeName=nN NodeHostname=<this
host> NodeAddr=127.0.0.1 Port=<one per node>``, one ``slurmd -N nN`` each); munged runs with its own key, socket
and pid file under the test's directory, and Slurm is pointed at that socket (``AuthInfo=socket=...``). The job
is submitted as a user would (only the partition and the GPU count on the command line), its end found by
polling ``scontrol show job`` (``sbatch --wait`` noticed a finished job up to 25 s late), and the verdict read
from the job's own output and from ``envguard fleet`` over its reports. Every daemon started here is stopped by
its PID whatever happens.

What a cluster gets wrong is made real on one node: a node whose environment drifted is a slurmd in a mount
namespace of its own where the environment's path holds another environment (a node-local disk); a rank that
cannot join is a node whose task environment (Slurm's TaskProlog) gives it a MASTER_ADDR it cannot resolve
(the Slurm node name, as the example's old default did).

Nothing is installed here: ``.ci/run`` installs Debian's slurm-wlm and munge where it can. Without them the test
skips, and fails under CI=true.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.create_fixtures import BASE_DEPS, envguard_run, make_lock, write_env
from support.require import require

pytestmark = pytest.mark.slow  # a cluster, environments and interpreters

REPO = Path(__file__).resolve().parent.parent
SBATCH = REPO / "examples" / "slurm" / "check-nodes.sbatch"
NODES = ("n1", "n2", "n3")
PARTITION = "ci"
TOOLS = ("slurmctld", "slurmd", "munged", "sbatch", "srun", "scontrol", "unshare", "nsenter")
# ENVGUARD_RENDEZVOUS_TIMEOUT for the job with a rank that cannot join: how soon the missing rank must be named.
# The other jobs keep the default (60 s): on a loaded machine the ranks' starts (import torch) drift apart.
RENDEZVOUS_S = 10


def _tool(name: str) -> str | None:
    return shutil.which(name) or next((str(p) for d in ("/usr/sbin", "/sbin", "/usr/bin")
                                       if (p := Path(d) / name).is_file() and os.access(p, os.X_OK)), None)


def _free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for s in socks:
            s.close()


class Cluster:
    """slurmctld + one slurmd per node + munged, all under ``root``; ``stop()`` ends each by its PID."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.jobs: list[str] = []
        self.conf = root / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        for k in [k for k in self.env if k.startswith("SLURM_") and k != "SLURM_CONF"]:
            del self.env[k]

    # ------------------------------------------------------------------ up

    def start(self) -> None:
        r = self.root
        for d in ("munge", "state", "spool", "log", "faults", "work"):
            (r / d).mkdir(mode=0o700, exist_ok=True)
        key = r / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        self.socket = r / "munge" / "munge.sock"
        self._spawn("munged", [_tool("munged"), "--foreground", "--force", f"--socket={self.socket}",
                               f"--key-file={key}", f"--pid-file={r / 'munge' / 'munged.pid'}",
                               f"--log-file={r / 'log' / 'munged.log'}", f"--seed-file={r / 'munge' / 'seed'}"])
        self._wait_for(self.socket.exists, "munged's socket", "munged.log")
        ctld, *node_ports = _free_ports(1 + len(NODES))
        host = socket.gethostname()
        prolog = r / "taskprolog.sh"
        # A node's task environment, as a site's TaskProlog sets it: the lines of faults/<node>, if any.
        prolog.write_text(f'#!/bin/sh\nf="{r}/faults/$SLURMD_NODENAME"\n[ -f "$f" ] && cat "$f"\nexit 0\n')
        prolog.chmod(0o755)
        lines = [
            "ClusterName=envguardci", f"SlurmctldHost={host}(127.0.0.1)", f"SlurmctldPort={ctld}",
            "SlurmUser=root", "SlurmdUser=root", "AuthType=auth/munge", "CredType=cred/munge",
            f"AuthInfo=socket={self.socket}", "MpiDefault=none", "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none", "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core",
            "SchedulerType=sched/builtin", "ReturnToService=2", "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none", "JobCompType=jobcomp/none",
            f"StateSaveLocation={r / 'state'}", f"SlurmdSpoolDir={r / 'spool'}/%n",
            f"SlurmctldPidFile={r / 'slurmctld.pid'}", f"SlurmdPidFile={r / 'spool'}/slurmd-%n.pid",
            f"SlurmctldLogFile={r / 'log' / 'slurmctld.log'}", f"SlurmdLogFile={r / 'log'}/slurmd-%n.log",
            "SlurmctldDebug=info", "SlurmdDebug=info", f"TaskProlog={prolog}",
            "InactiveLimit=0", "KillWait=5", "MinJobAge=300", "SlurmdTimeout=60", "Waittime=0",
            "MessageTimeout=20",
        ]
        lines += [f"NodeName={n} NodeHostname={host} NodeAddr=127.0.0.1 Port={p} CPUs=1 State=UNKNOWN"
                  for n, p in zip(NODES, node_ports, strict=True)]
        lines.append(f"PartitionName={PARTITION} Nodes={','.join(NODES)} Default=YES MaxTime=INFINITE State=UP")
        self.conf.write_text("\n".join(lines) + "\n")
        for n in NODES:
            (r / "spool" / n).mkdir(exist_ok=True)
        self._spawn("slurmctld", [_tool("slurmctld"), "-D", "-i", "-f", str(self.conf)])
        for n in NODES:
            argv = [_tool("slurmd"), "-D", "-N", n, "-f", str(self.conf)]
            if n == "n2":  # its own mount namespace: its view of the environment's path can differ (drift)
                argv = [_tool("unshare"), "--mount", "--propagation", "private", *argv]
            self._spawn(f"slurmd-{n}", argv)

        def idle() -> bool:
            out = self.run("sinfo", "-h", "-N", "-o", "%N %t", check=False).stdout
            states = dict(line.split() for line in out.splitlines() if len(line.split()) == 2)
            return all(states.get(n) == "idle" for n in NODES)

        self._wait_for(idle, "three idle nodes", "slurmctld.log", timeout=60)

    def _spawn(self, name: str, argv: list[str | None]) -> None:
        assert all(argv), argv
        log = open(self.root / "log" / f"{name}.stdout", "wb")  # noqa: SIM115 - closed with the process
        self.procs[name] = subprocess.Popen([str(a) for a in argv], stdout=log, stderr=subprocess.STDOUT,
                                            env=self.env, start_new_session=True)
        log.close()

    def _wait_for(self, ok: object, what: str, log: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if ok():  # type: ignore[operator]
                return
            dead = [n for n, p in self.procs.items() if p.poll() is not None]
            if dead:
                break
            time.sleep(0.2)
        raise AssertionError(f"no {what} (daemons exited: {dead if dead else 'none'})\n{self.logs()}")

    def logs(self) -> str:
        out = []
        for f in sorted((self.root / "log").iterdir()):
            text = f.read_text(errors="replace").strip().splitlines()[-15:]
            out += [f"--- {f.name}", *text]
        return "\n".join(out)

    # ------------------------------------------------------------------ use

    def run(self, *argv: str, check: bool = True, env: dict[str, str] | None = None,
            cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(list(argv), capture_output=True, text=True, env=env or self.env, timeout=60, cwd=cwd)
        if check:
            assert proc.returncode == 0, (argv, proc.stdout, proc.stderr, self.logs())
        return proc

    def node_pid(self, node: str) -> int:
        return self.procs[f"slurmd-{node}"].pid

    def submit(self, args: list[str], env: dict[str, str], cwd: Path, script: Path = SBATCH) -> str:
        # as the example's usage line says: the node count, plus the partition and GPUs of this cluster
        out = self.run("sbatch", "--parsable", f"--nodes={len(NODES)}", f"--partition={PARTITION}",
                       "--gpus-per-node=0", str(script), *args,
                       env={**env, "SLURM_CONF": str(self.conf)}, cwd=cwd).stdout
        self.jobs.append(out.strip().split(";")[0])
        return self.jobs[-1]

    def wait(self, job: str, timeout: float) -> tuple[str, str, float]:
        """(JobState, ExitCode, seconds from start to end) once the job has ended, polling ``scontrol``."""
        deadline = time.monotonic() + timeout
        while True:
            text = self.run("scontrol", "show", "job", job).stdout
            state = re.search(r"JobState=(\S+)", text)
            if state and state.group(1) not in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING"):
                code = re.search(r"\bExitCode=(\S+)", text)
                return state.group(1), code.group(1) if code else "", _run_seconds(text)
            if time.monotonic() > deadline:
                self.run("scancel", job, check=False)
                raise AssertionError(f"job {job} still {state.group(1) if state else '?'} after {timeout} s\n"
                                     f"{text}\n{self.logs()}")
            time.sleep(0.3)

    # ------------------------------------------------------------------ down

    def stop(self) -> None:
        """Every daemon started here, by its PID (its session: what slurmd started for a job too); the jobs
        submitted here are cancelled first, so that no job's processes outlive the cluster."""
        if self.jobs and self.procs.get("slurmctld") and self.procs["slurmctld"].poll() is None:
            subprocess.run(["scancel", *self.jobs], capture_output=True, env=self.env, timeout=30)
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                q = subprocess.run(["squeue", "-h", "-j", ",".join(self.jobs)], capture_output=True, text=True,
                                   env=self.env, timeout=30)
                if not q.stdout.strip():
                    break
                time.sleep(0.3)
        for name in sorted(self.procs, key=lambda n: n.startswith("munged")):  # munged last
            p = self.procs[name]
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for p in self.procs.values():
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait(timeout=10)


def _run_seconds(text: str) -> float:
    import datetime

    times = [re.search(rf"\b{k}=(\S+)", text) for k in ("StartTime", "EndTime")]
    try:
        start, end = (datetime.datetime.fromisoformat(m.group(1)) for m in times if m)
        return (end - start).total_seconds()
    except ValueError:
        return -1.0


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    missing = [t for t in TOOLS if _tool(t) is None]
    require(not missing, f"Slurm and munge are not installed (missing {', '.join(missing)}; Debian: apt-get install "
                         "slurm-wlm munge; .ci/run does it as root)")
    require(os.geteuid() == 0, "a Slurm cluster of its own needs root (slurmd starts jobs as their user)")
    root = Path(tempfile.mkdtemp(prefix="slurm-"))  # short: munge's socket path must fit in sun_path
    c = Cluster(root)
    try:
        c.start()
        yield c
    finally:
        c.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def environment(channel_url: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(prefix, lock, a drifted copy of the prefix): built by envguard from the test channel's python + torch."""
    work = tmp_path_factory.mktemp("slurm-env")
    lock = make_lock(write_env(work / "project", channel_url, BASE_DEPS))
    prefix = work / "env"
    proc = envguard_run("create", "-p", str(prefix), "--lockfile", str(lock), "--no-check", timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # The drifted node's copy: someone removed a package there (`conda remove egtool`, by hand).
    drifted = work / "drifted"
    shutil.copytree(prefix, drifted, symlinks=True)
    for record in (drifted / "conda-meta").glob("egtool-*.json"):
        record.unlink()
    for installed in [*drifted.glob("lib/python*/site-packages/egtool*"), drifted / "bin" / "egtool"]:
        shutil.rmtree(installed) if installed.is_dir() else installed.unlink()
    return prefix, lock, drifted


def _job_env(rendezvous_s: int | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env.update({"PATH": f"{Path(sys.executable).parent}:{env.get('PATH', '')}",  # `envguard` on every node
                "GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1", "ENVGUARD_NVIDIA_SMI": "",
                "MASTER_PORT": str(_free_ports(1)[0])})
    for name in ("MASTER_ADDR", "ENVGUARD_RENDEZVOUS_TIMEOUT"):
        env.pop(name, None)
    if rendezvous_s is not None:
        env["ENVGUARD_RENDEZVOUS_TIMEOUT"] = str(rendezvous_s)
    return env


def _run_job(cluster: Cluster, env_: tuple[Path, Path, Path], tmp: Path, timeout: float = 150,
             rendezvous_s: int | None = None) -> dict:
    prefix, lock, _ = env_
    tmp.mkdir(parents=True, exist_ok=True)
    job = cluster.submit([str(prefix), str(lock)], _job_env(rendezvous_s), tmp)
    state, code, seconds = cluster.wait(job, timeout)
    out_file = tmp / f"envguard-fleet-{job}.out"
    out = out_file.read_text(errors="replace") if out_file.exists() else ""
    reports = tmp / "envguard-reports" / job
    fleet = subprocess.run([sys.executable, "-m", "envguard", "fleet", str(reports), "--lockfile", str(lock),
                            "--format", "json"], capture_output=True, text=True, timeout=120)
    doc = json.loads(fleet.stdout) if fleet.stdout.strip() else {}
    return {"job": job, "state": state, "exit": code, "seconds": seconds, "out": out, "reports": reports,
            "fleet": doc, "fleet_rc": fleet.returncode, "fleet_err": fleet.stderr}


def test_healthy_cluster_three_of_three(cluster: Cluster, environment: tuple[Path, Path, Path],
                                        tmp_path: Path) -> None:
    r = _run_job(cluster, environment, tmp_path)
    out = r["out"]
    assert r["state"] == "COMPLETED" and r["exit"] == "0:0", (r["state"], r["exit"], out, cluster.logs())
    assert "3 of 3 nodes match the lock" in out, out
    # one report per node, named by Slurm's node name: three nodes of one host no longer overwrite each other
    assert sorted(p.name for p in r["reports"].glob("*.json")) == ["n1.json", "n2.json", "n3.json"], out
    for rank, node in enumerate(NODES):
        rep = json.loads((r["reports"] / f"{node}.json").read_text())
        assert rep["node"] == {"slurm_node": node, "job_id": r["job"], "rank": rank}, rep["node"]
        assert rep["host"] == socket.gethostname() and rep["exit_code"] == 0, rep["findings"]
        assert rep["distributed"]["ok"] and rep["distributed"]["world_size"] == 3, rep["distributed"]
    for node in NODES:
        assert f"{node}: envguard check exit 0" in out, out
    doc = r["fleet"]
    assert r["fleet_rc"] == 0 and doc["counts"]["nodes"] == doc["matching"] == 3, (doc, r["fleet_err"])
    assert [g["nodes"] for g in doc["groups"]] == ["n[1-3]"] and doc["identity"] == []
    assert doc["distributed"]["ok"] == 3 and doc["distributed"]["world_sizes"] == [3]
    # step 2: one torchrun per node (the environment's `python -m torch.distributed.run`), three ranks over gloo
    docs = [json.loads(p.read_text()) for p in (r["reports"] / "torchrun").rglob("stdout.log") if p.read_text().strip()]
    assert sorted(d["probe"]["distributed"]["rank"] for d in docs) == [0, 1, 2], out
    assert all(d["exit_code"] == 0 for d in docs), out


def test_a_drifted_node_is_singled_out(cluster: Cluster, environment: tuple[Path, Path, Path],
                                       tmp_path: Path) -> None:
    prefix, _, drifted = environment
    ns = ["nsenter", "-t", str(cluster.node_pid("n2")), "-m"]
    cluster.run(*ns, "mount", "--bind", str(drifted), str(prefix))
    try:
        r = _run_job(cluster, environment, tmp_path)
    finally:
        cluster.run(*ns, "umount", str(prefix), check=False)
    out, doc = r["out"], r["fleet"]
    assert r["state"] == "FAILED" and r["exit"] == "1:0", (r["state"], r["exit"], out)
    assert "2 of 3 nodes match the lock; 1 deviates in 1 group" in out, out
    assert r["fleet_rc"] == 1 and [(g["reference"], g["nodes"]) for g in doc["groups"]] == [
        (True, "n[1,3]"), (False, "n2")], doc
    change = next(c for c in doc["groups"][1]["changes"] if c["key"] == "egtool")
    assert change["new"] is None, change  # the package removed on that node, named
    assert "n2: envguard check exit 1" in out and "n1: envguard check exit 0" in out, out


def test_a_rank_that_cannot_join_is_named_within_seconds(cluster: Cluster, environment: tuple[Path, Path, Path],
                                                         tmp_path: Path) -> None:
    fault = cluster.root / "faults" / "n3"
    fault.write_text("export MASTER_ADDR=n1\n")  # the Slurm name, which does not resolve on n3
    try:
        r = _run_job(cluster, environment, tmp_path, rendezvous_s=RENDEZVOUS_S)
    finally:
        fault.unlink()
    out, doc = r["out"], r["fleet"]
    assert r["state"] == "FAILED" and r["exit"] == "1:0", (r["state"], r["exit"], out)
    n3 = json.loads((r["reports"] / "n3.json").read_text())
    d3 = n3["distributed"]
    assert n3["exit_code"] == 7 and d3["case"] == "rendezvous", d3
    assert "cannot resolve the rendezvous address n1" in d3["error"], d3
    for node in ("n1", "n2"):
        d = json.loads((r["reports"] / f"{node}.json").read_text())["distributed"]
        assert d["missing"] == [{"rank": 2, "host": "n3"}] and "rank 2 (n3)" in d["error"], d
        assert f"within {RENDEZVOUS_S:g} s" in d["error"], d
    assert doc["distributed"]["missing"] == [{"rank": 2, "host": "n3"}], doc["distributed"]
    assert "missing rank 2 (n3)" in out, out
    # step 2 (torchrun): the node says so itself before torchrun would retry the name until its own timeout
    assert "n3: MASTER_ADDR=n1 does not resolve on this node" in out, out
    # named by the probes, not cut off by the smoke test's limit (124) nor by torchrun's 600 s rendezvous
    assert "exit 124" not in out and 0 <= r["seconds"] < 60 + 4 * RENDEZVOUS_S, (r["seconds"], out)


def test_each_node_creates_the_variant_it_runs(cluster: Cluster, channel_url: str, tmp_path: Path) -> None:
    """examples/slurm/create-nodes.sbatch (#37) as its usage line says: every node creates the variant of a
    project with variants (tests/support/variant_project.py: cpu, cuda-12.6, cuda-12.8, real locks) that its own
    driver runs (n2's task environment, from the TaskProlog, points envguard at a driver-570 nvidia-smi; n1 and
    n3 have none), checks it, and fleet groups the nodes by variant."""
    from support.variant_project import fake_smi, make_project

    (tmp_path / "project").mkdir()
    project = make_project(tmp_path / "project", channel_url)
    smi = fake_smi(tmp_path, "570.86.15", "12.8", "8.0")
    fault = cluster.root / "faults" / "n2"
    fault.write_text(f"export ENVGUARD_NVIDIA_SMI={smi}\n")
    try:
        job = cluster.submit([str(project), str(tmp_path / "envs")], _job_env(None), tmp_path,
                             script=REPO / "examples" / "slurm" / "create-nodes.sbatch")
        state, code, _ = cluster.wait(job, 300)
    finally:
        fault.unlink()
    out_file = tmp_path / f"envguard-variants-{job}.out"
    out = out_file.read_text(errors="replace") if out_file.exists() else ""
    for node in ("n1", "n3"):
        assert f"{node}: create exit 0: envguard: variant cpu: no NVIDIA driver" in out, out
    assert "n2: create exit 0: envguard: variant cuda-12.8: driver 570.86.15" in out, out
    reports = tmp_path / "envguard-reports" / job
    variants = {p.stem: json.loads(p.read_text())["variant"]["name"] for p in reports.glob("*.json")}
    assert variants == {"n1": "cpu", "n2": "cuda-12.8", "n3": "cpu"}, out
    # one group per variant, nobody on the wrong one (n2's EG550 is the test channel's: its cuda128 pytorch is
    # this machine's CPU torch underneath, so the job exits 1 for that node's own check)
    groups = [ln for ln in out.splitlines() if ln.startswith("ref ")]
    assert any("n[1,3]" in g and "variant cpu" in g for g in groups), out
    assert any("n2" in g and "variant cuda-12.8" in g for g in groups), out
    assert "3 of 3 nodes match the majority" in out and "wrong variant" not in out, out
    assert "1 node failed its own check" in out and (state, code) == ("FAILED", "1:0"), (state, code, out)
