"""examples/ and the top-level environment.yml: parsed, linted, run.

Every `envguard ...` command line written in an example is checked against the
real CLI: the subcommand exists and accepts every option the example passes.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from support.require import importorskip, require

from envguard.lint import lint_file

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"


def _cli_options() -> dict[str, set[str]]:
    """subcommand -> every option string it accepts (from the real typer app)."""
    import typer.main

    from envguard.cli import app

    group = typer.main.get_command(app)
    out: dict[str, set[str]] = {}
    for name, cmd in group.commands.items():  # type: ignore[attr-defined]
        opts: set[str] = {"--help", "-h"}
        for p in cmd.params:
            opts.update(getattr(p, "opts", []))
            opts.update(getattr(p, "secondary_opts", []))
        out[name] = opts
    return out


def _envguard_invocations(text: str) -> list[list[str]]:
    """Every `envguard ...` command in shell text (continuation lines joined, pipes/redirects cut)."""
    text = text.replace("\\\n", " ")
    calls = []
    for m in re.finditer(r"(?:^|[\s;&|(])envguard\s+([^\n;&|>)]*)", text):
        rest = m.group(1)
        try:
            argv = shlex.split(rest, comments=True)
        except ValueError:
            argv = rest.split()
        while argv and not argv[0].startswith("-") and argv[0] not in ("lock.", "itself"):
            calls.append(argv)
            # a command envguard starts (`envguard run -- torchrun ... envguard smoke ...`) is one of its own
            nested = argv.index("--") + argv[argv.index("--"):].index("envguard") if (
                "--" in argv and "envguard" in argv[argv.index("--"):]) else None
            argv = argv[nested + 1:] if nested is not None else []
    return calls


def _assert_valid(argv: list[str], options: dict[str, set[str]], where: str) -> None:
    sub = argv[0]
    assert sub in options, f"{where}: `envguard {sub}` is not a command"
    for tok in argv[1:]:
        if tok == "--":
            break
        if tok.startswith("-"):
            flag = tok.split("=", 1)[0]
            assert flag in options[sub], f"{where}: `envguard {sub}` has no option {flag}"


def test_cli_introspection_catches_bad_flags() -> None:
    options = _cli_options()
    with pytest.raises(AssertionError):
        _assert_valid(["check", "--no-such-flag"], options, "self-test")
    with pytest.raises(AssertionError):
        _assert_valid(["frobnicate"], options, "self-test")
    _assert_valid(["check", "--format", "json"], options, "self-test")


# ---------------------------------------------------------------- top-level environment.yml


def test_top_level_environment_passes_lint_and_matches_pyproject() -> None:
    env = REPO / "environment.yml"
    assert lint_file(env) == []
    data = yaml.safe_load(env.read_text())
    assert data["channels"][0] == "conda-forge" and "python=3.11" in data["dependencies"]
    conda_names = {re.split(r"[=<>! ]", d, maxsplit=1)[0] for d in data["dependencies"] if isinstance(d, str)}

    # tomli, not tomllib: envguard's own TOML reader, a dependency on every Python line (tomllib is 3.11's)
    import tomli
    from packaging.requirements import Requirement

    project = tomli.loads((REPO / "pyproject.toml").read_text())["project"]
    reqs = [Requirement(r) for r in project["dependencies"] + project["optional-dependencies"]["test"]]
    # the file is Python 3.11's: a dependency for older Pythons only is not wanted there
    wanted = [r.name.lower() for r in reqs if r.marker is None or r.marker.evaluate({"python_version": "3.11"})]
    conda_for = {"torch": "pytorch"}
    missing = [n for n in wanted if conda_for.get(n, n) not in conda_names]
    assert not missing, f"environment.yml lacks {missing} (pyproject.toml needs them)"
    assert not (REPO / "conda-lock.yml").exists() or "content_hash" in (REPO / "conda-lock.yml").read_text()


# ---------------------------------------------------------------- the PyTorch project


def test_project_environment_lints_clean() -> None:
    assert lint_file(EXAMPLES / "pytorch-project" / "environment.yml") == []


@pytest.mark.slow
@pytest.mark.parametrize("spawn", [False, True], ids=["fork", "spawn"])
def test_train_script_runs_with_worker_processes(tmp_path: Path, spawn: bool) -> None:
    importorskip("torch")
    script = EXAMPLES / "pytorch-project" / "train.py"
    # spawn re-imports torch in each worker: one worker is enough to prove the Dataset pickles
    argv = [sys.executable, str(script), "--epochs", "2", "--samples", "64", "--workers", "1" if spawn else "2"]
    if spawn:
        argv.append("--spawn")
    proc = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("epoch ")]
    assert [ln.split()[1] for ln in lines] == ["1", "2"]
    assert "pin_memory" not in proc.stderr  # no "pinned memory without an accelerator" warning


def test_train_script_follows_the_probe_advice() -> None:
    import ast

    src = (EXAMPLES / "pytorch-project" / "train.py").read_text()
    tree = ast.parse(src)
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    assert any(any(getattr(b, "attr", getattr(b, "id", "")) == "Dataset" for b in c.bases) for c in classes)
    assert any(isinstance(n, ast.If) and "__main__" in ast.unparse(n.test) for n in tree.body)
    loader = next(n for n in ast.walk(tree) if isinstance(n, ast.Call) and ast.unparse(n.func) == "DataLoader")
    kw = {k.arg: ast.unparse(k.value) for k in loader.keywords}
    assert kw["pin_memory"] == "torch.cuda.is_available()"
    assert "persistent_workers" in kw and "timeout" in kw


# ---------------------------------------------------------------- GitHub Actions


def test_github_workflow_commands_exist() -> None:
    wf = yaml.safe_load((EXAMPLES / "github-actions" / "envguard.yml").read_text())
    options = _cli_options()
    runs = [s["run"] for job in wf["jobs"].values() for s in job["steps"] if "run" in s]
    calls = [c for r in runs for c in _envguard_invocations(r)]
    for argv in calls:
        _assert_valid(argv, options, "envguard.yml")
    as_text = [" ".join(c) for c in calls]
    assert "lock --check" in as_text
    assert any(c[0] == "check" and "--format" in c and c[c.index("--format") + 1] == "markdown" for c in calls)
    assert any("GITHUB_STEP_SUMMARY" in r and "check" in r and "markdown" in r for r in runs)


# ---------------------------------------------------------------- Docker


def test_dockerfile_installs_from_the_lock() -> None:
    text = (EXAMPLES / "docker" / "Dockerfile").read_text()
    instructions = [ln for ln in text.replace("\\\n", " ").splitlines() if ln and not ln.startswith("#")]
    assert instructions[0].startswith("FROM ")
    options = _cli_options()
    runs = [ln[4:] for ln in instructions if ln.startswith("RUN ")]
    calls = [c for r in runs for c in _envguard_invocations(r)]
    for argv in calls:
        _assert_valid(argv, options, "Dockerfile")
    create = next(c for c in calls if c[0] == "create")
    assert "--locked" in create  # from the lock, never a solve in the build
    copies = [ln.split()[1:-1] for ln in instructions if ln.startswith("COPY ")]
    context = EXAMPLES / "pytorch-project"
    for src in (s for group in copies for s in group):
        # conda-lock.yml is produced by `envguard lock` (conda-forge is not reachable from CI)
        assert (context / src).exists() or src == "conda-lock.yml", src
    assert "--shm-size" in text


def _dockerfile_instructions(path: Path) -> list[str]:
    text = path.read_text()
    return [ln.strip() for ln in text.replace("\\\n", " ").splitlines() if ln.strip() and not ln.startswith("#")]


# ---------------------------------------------------------------- a project with variants (#37)

VARIANTS = EXAMPLES / "pytorch-variants"
DOCKER_VARIANTS = EXAMPLES / "docker" / "Dockerfile.variants"
SLURM_VARIANTS = EXAMPLES / "slurm" / "create-nodes.sbatch"


def test_variant_project_is_what_init_writes(tmp_path: Path) -> None:
    """The example's files are `envguard init`'s output for the command its README and header name, byte for
    byte (offline: init answers from its dated table), and they declare cpu (the default), cuda-12.9, cuda-13.0."""
    from envguard.variants import declared_variants

    readme = (VARIANTS / "README.md").read_text()
    [init] = [c for c in _envguard_invocations(readme) if c[0] == "init"]
    import os

    proc = subprocess.run([sys.executable, "-m", "envguard", *init], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "ENVGUARD_OFFLINE": "1"})
    assert proc.returncode == 0, proc.stderr
    written = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.yml"))
    committed = sorted(p.relative_to(VARIANTS).as_posix() for p in VARIANTS.rglob("*.yml"))
    assert written == committed == ["environment.yml", "variants/cpu.yml", "variants/cuda-12.9.yml",
                                    "variants/cuda-13.0.yml"]
    for rel in written:
        assert (tmp_path / rel).read_text() == (VARIANTS / rel).read_text(), rel
    assert lint_file(VARIANTS / "environment.yml") == []
    declared = {v.name: v for v in declared_variants(VARIANTS / "environment.yml")}
    assert {n: v.cuda for n, v in declared.items()} == {"cpu": None, "cuda-12.9": "12.9", "cuda-13.0": "13.0"}
    assert declared["cpu"].platforms == ("linux-64", "osx-arm64") and declared["cuda-13.0"].platforms == ("linux-64",)
    assert not list(VARIANTS.glob("conda-lock*.yml"))  # as in the other examples: `envguard lock` writes them


def test_variant_project_readme_commands_exist() -> None:
    readme = (VARIANTS / "README.md").read_text()
    options = _cli_options()
    calls = [c for block in re.findall(r"```bash\n(.*?)```", readme, re.S) for c in _envguard_invocations(block)]
    for argv in calls:
        _assert_valid(argv, options, "pytorch-variants/README.md")
    subs = [c[0] for c in calls]
    assert subs[:2] == ["init", "lock"] and "diff" in subs and "check" in subs
    assert ["create", "--variant", "cuda-12.9", "-p", "./env-cuda"] in calls
    for link in re.findall(r"\]\((\.\./[^)#]+)\)", readme):
        assert (VARIANTS / link).resolve().exists(), link


def test_variant_dockerfile_names_its_variant() -> None:
    """One image per variant, named with a build argument that has no usable default: a build machine without a
    GPU would pick cpu for every image. The COPY sources exist in the context (examples/), locks excepted."""
    instructions = _dockerfile_instructions(DOCKER_VARIANTS)
    assert instructions[0].startswith("FROM ")
    args = {ln.split()[1].split("=")[0]: ln.split()[1].partition("=")[2] for ln in instructions if ln.startswith("ARG ")}
    assert args["ENVGUARD_VARIANT"] == ""
    runs = [ln[4:] for ln in instructions if ln.startswith("RUN ")]
    options = _cli_options()
    calls = [c for r in runs for c in _envguard_invocations(r)]
    for argv in calls:
        _assert_valid(argv, options, "Dockerfile.variants")
    create = next(c for c in calls if c[0] == "create")
    assert "--locked" in create and create[create.index("--variant") + 1] == "$ENVGUARD_VARIANT"
    for ln in (ln for ln in instructions if ln.startswith("COPY ")):
        for src in ln.split()[1:-1]:
            assert src.startswith("pytorch-variants/conda-lock.") or (EXAMPLES / src).exists(), src
    assert any(ln.startswith("COPY pytorch-variants/conda-lock.") for ln in instructions)
    text = DOCKER_VARIANTS.read_text()
    assert "docker build -f docker/Dockerfile.variants --build-arg ENVGUARD_VARIANT=" in text


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="the Dockerfile's RUN lines are POSIX shell")
def test_variant_dockerfile_runs_as_written(tmp_path: Path, channel_url: str) -> None:
    """The Dockerfile's RUN lines after WORKDIR, run by sh as docker runs them, in a variant project locked by the
    real `envguard lock` (test channel: cpu, cuda-12.6, cuda-12.8) on this machine without a GPU: an empty
    ENVGUARD_VARIANT stops the build (exit 2) naming the declared variants; cuda-12.8 is built although this
    machine cannot run it, and the build-time check judges it as on a CUDA 12.8 machine (exit 0, no EG557)."""
    import os

    from support.variant_project import make_project

    instructions = _dockerfile_instructions(DOCKER_VARIANTS)
    workdir = next(i for i, ln in enumerate(instructions) if ln.startswith("WORKDIR "))
    runs = [ln[4:] for ln in instructions[workdir:] if ln.startswith("RUN ")]
    assert len(runs) == 2
    (tmp_path / "app").mkdir()
    project = make_project(tmp_path / "app", channel_url)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "envguard").write_text(f"#!/bin/sh\nexec {sys.executable} -m envguard \"$@\"\n")
    (bin_dir / "envguard").chmod(0o755)
    prefix = tmp_path / "opt-env"
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "ENVGUARD_NVIDIA_SMI": ""}
    env.pop("CONDA_OVERRIDE_CUDA", None)

    def sh(cmd: str, variant: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["sh", "-c", cmd.replace("/opt/env", str(prefix))], cwd=project, capture_output=True,
                              text=True, timeout=600, env={**env, "ENVGUARD_VARIANT": variant})

    empty = sh(runs[0], "")
    assert empty.returncode == 2 and not prefix.exists(), empty.stderr
    assert "ENVGUARD_VARIANT is empty" in empty.stderr and "declared: cpu cuda-12.6 cuda-12.8" in empty.stderr
    built = sh(runs[0], "cuda-12.8")
    assert built.returncode == 0, built.stderr
    assert "warning: variant cuda-12.8 cannot run on this machine (no NVIDIA driver)" in built.stderr
    checked = sh(runs[1], "cuda-12.8")
    report = json.loads((prefix / "envguard-report.json").read_text())
    assert report["variant"]["name"] == "cuda-12.8" and report["variant"]["runs"], report["variant"]
    assert "CONDA_OVERRIDE_CUDA=12.8" in report["variant"]["reason"]
    # the test channel's cuda128 pytorch is this machine's CPU torch underneath: EG550 is the one error it can
    # have; the variant's fit (EG557) is judged as on the machines the image is for
    errors = {f["code"] for f in report["findings"] if f["severity"] == "error"}
    assert errors <= {"EG550"}, report["findings"]
    assert checked.returncode == (1 if errors else 0), checked.stderr
    # the same check without the override is the build machine's view: the variant cannot run here
    plain = subprocess.run([sys.executable, "-m", "envguard", "check", "-p", str(prefix), "--no-smoke", "--format",
                            "json"], cwd=project, capture_output=True, text=True, timeout=300, env=env)
    assert plain.returncode == 1 and "EG557" in {f["code"] for f in json.loads(plain.stdout)["findings"]}


# ---------------------------------------------------------------- Slurm


SLURM = EXAMPLES / "slurm" / "check-nodes.sbatch"


@pytest.mark.slow
def test_slurm_script_parses_and_uses_real_flags() -> None:
    bash = shutil.which("bash")
    assert bash
    proc = subprocess.run([bash, "-n", str(SLURM)], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    if shutil.which("shellcheck"):
        sc = subprocess.run(["shellcheck", str(SLURM)], capture_output=True, text=True, timeout=60)
        assert sc.returncode == 0, sc.stdout
    text = SLURM.read_text()
    options = _cli_options()
    calls = _envguard_invocations(text)
    for argv in calls:
        _assert_valid(argv, options, "check-nodes.sbatch")
    check = next(c for c in calls if c[0] == "check")
    assert check[check.index("--format") + 1] == "json" and "--distributed" in check
    assert any(c[0] == "fleet" for c in calls) and not any(c[0] == "diff" for c in calls)  # no pairwise tables
    assert any(c[0] == "smoke" and "--only-distributed" in c for c in calls)
    assert "torchrun" in text and "srun" in text and "#SBATCH --nodes" in text and "#SBATCH --partition" in text


_FAKE_SRUN = """#!/bin/bash
# Two "nodes" on this machine: run the command once per node, concurrently, with srun's variables.
while [[ $1 == --* ]]; do shift; done
pids=()
for i in 0 1; do
  SLURM_PROCID=$i SLURM_NTASKS=2 SLURM_LOCALID=0 SLURM_NODEID=$i SLURM_NNODES=2 SLURM_JOB_NODELIST='node[01-02]' \
    SLURM_TASKS_PER_NODE='1(x2)' HOSTNAME_FAKE=node0$((i + 1)) "$@" &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
exit $rc
"""


@pytest.mark.slow
def test_slurm_script_runs_on_two_fake_nodes(tmp_path: Path) -> None:
    """The whole script for real, `srun`/`scontrol`/`hostname` stood in for: two `envguard check --distributed`
    that meet over gloo, two torchruns running the distributed smoke, then `envguard fleet` over the reports."""
    import importlib.metadata
    import os
    import socket

    from support import check_envs

    torchrun = Path(sys.prefix) / "bin" / "torchrun"
    require(torchrun.exists(), "torchrun is not installed in the test environment")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text(_FAKE_SRUN)
    (bin_dir / "scontrol").write_text("#!/bin/bash\nprintf 'node01\\nnode02\\n'\n")
    (bin_dir / "hostname").write_text("#!/bin/bash\necho \"$HOSTNAME_FAKE\"\n")
    (bin_dir / "envguard").write_text(f"#!/bin/bash\nexec {sys.executable} -m envguard \"$@\"\n")
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    # The lock this virtualenv matches: its own dists, as conda-lock writes pip packages.
    dists = sorted({(d.metadata["Name"], d.version) for d in importlib.metadata.distributions()})
    lock = check_envs.write_lock(tmp_path / "conda-lock.yml", [], pip=dists)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env.update({"PATH": f"{bin_dir}:{os.environ['PATH']}", "SLURM_JOB_ID": "42", "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": str(port),
                "GLOO_SOCKET_IFNAME": "lo", "ENVGUARD_NVIDIA_SMI": "", "OMP_NUM_THREADS": "1"})
    proc = subprocess.run(["bash", str(SLURM), sys.prefix, str(lock)], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=400, start_new_session=True)
    out = proc.stdout + proc.stderr
    reports = tmp_path / "envguard-reports" / "42"
    assert sorted(p.name for p in reports.glob("*.json")) == ["node01.json", "node02.json"], out
    for rank, name in enumerate(("node01", "node02")):
        rep = json.loads((reports / f"{name}.json").read_text())
        d = rep["distributed"]
        assert d["launcher"] == "slurm" and d["rank"] == rank and d["world_size"] == 2 and d["ok"], (d, out)
        assert rep["exit_code"] == 0, (rep["findings"], out)
    assert "node01: envguard check exit 0" in out and "node02: envguard check exit 0" in out
    # step 2: torchrun's per-rank logs hold the distributed smoke documents
    docs = [json.loads(p.read_text()) for p in (reports / "torchrun").rglob("stdout.log") if p.read_text().strip()]
    assert sorted(d["probe"]["distributed"]["rank"] for d in docs) == [0, 1], out
    assert all(d["exit_code"] == 0 and d["probe"]["distributed"]["launcher"] == "torchrun" for d in docs)
    # the verdict: both nodes match the lock
    assert "2 of 2 nodes match the lock" in proc.stdout, out
    assert proc.returncode == 0, out


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="bash, fake srun and nvidia-smi")
def test_slurm_variants_script_creates_each_nodes_variant(tmp_path: Path, channel_url: str) -> None:
    """examples/slurm/create-nodes.sbatch as written on two fake nodes (srun/hostname stood in for, as above): a
    node without a driver builds cpu, a node on driver 570 builds cuda-12.8, each from the variant project's real
    locks, each checks what it built, and `envguard fleet` over their reports groups them by variant."""
    import os

    from support.variant_project import fake_smi, make_project

    bash = shutil.which("bash")
    assert bash
    proc = subprocess.run([bash, "-n", str(SLURM_VARIANTS)], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    text = SLURM_VARIANTS.read_text()
    calls = _envguard_invocations(text)
    options = _cli_options()
    for argv in calls:
        _assert_valid(argv, options, "create-nodes.sbatch")
    assert {c[0] for c in calls} == {"create", "check", "fleet"} and "--variant" not in calls[0]
    (tmp_path / "project").mkdir()
    project = make_project(tmp_path / "project", channel_url)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    gpu = fake_smi(tmp_path, "570.86.15", "12.8", "8.0")
    (bin_dir / "srun").write_text(_FAKE_SRUN)
    (bin_dir / "hostname").write_text("#!/bin/bash\necho \"$HOSTNAME_FAKE\"\n")
    (bin_dir / "envguard").write_text(f"#!/bin/bash\nexec {sys.executable} -m envguard \"$@\"\n")
    # node02 has a driver, node01 none (an nvidia-smi that cannot reach one)
    (bin_dir / "nvidia-smi").write_text(f"#!/bin/bash\n[[ $HOSTNAME_FAKE == node02 ]] && exec {gpu} \"$@\"\nexit 9\n")
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "CONDA_OVERRIDE"))}
    env.update({"PATH": f"{bin_dir}:{os.environ['PATH']}", "SLURM_JOB_ID": "7",
                "ENVGUARD_NVIDIA_SMI": str(bin_dir / "nvidia-smi"), "OMP_NUM_THREADS": "1"})
    proc = subprocess.run(["bash", str(SLURM_VARIANTS), str(project), str(tmp_path / "envs")], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=900, start_new_session=True)
    out = proc.stdout + proc.stderr
    assert "node01: create exit 0: envguard: variant cpu: no NVIDIA driver" in out, out
    assert "node02: create exit 0: envguard: variant cuda-12.8: driver 570.86.15" in out, out
    reports = tmp_path / "envguard-reports" / "7"
    variants = {p.stem: json.loads(p.read_text())["variant"]["name"] for p in reports.glob("*.json")}
    assert variants == {"node01": "cpu", "node02": "cuda-12.8"}, out
    fp = json.loads((tmp_path / "envs" / "node02" / "conda-meta" / "envguard-fingerprint.json").read_text())
    assert fp["variant"] == "cuda-12.8" and fp["lockfile"].endswith("conda-lock.cuda-12.8.yml")
    # fleet: each variant its own group, neither node on the wrong one
    # (node02's EG550 is the test channel's: its cuda128 pytorch is this machine's CPU torch underneath)
    assert "2 of 2 nodes match the majority" in proc.stdout and "wrong variant" not in proc.stdout, out
    groups = [ln for ln in proc.stdout.splitlines() if ln.startswith("ref ")]
    assert any("node01" in g and "variant cpu" in g for g in groups), out
    assert any("node02" in g and "variant cuda-12.8" in g for g in groups), out


# ---------------------------------------------------------------- Kubernetes


def test_kubernetes_indexed_job_writes_reports_that_fleet_reads() -> None:
    docs = list(yaml.safe_load_all((EXAMPLES / "kubernetes" / "check-job.yaml").read_text()))
    service = next(d for d in docs if d["kind"] == "Service")
    job = next(d for d in docs if d["kind"] == "Job")
    fleet_job = yaml.safe_load((EXAMPLES / "kubernetes" / "fleet-job.yaml").read_text())
    spec = job["spec"]
    assert spec["completionMode"] == "Indexed" and spec["completions"] == spec["parallelism"]
    pod = spec["template"]["spec"]
    container = pod["containers"][0]
    env = {e["name"]: e for e in container["env"]}
    # the launcher's variables: rank from the completion index, one world, rank 0 through the headless Service
    assert "job-completion-index" in env["RANK"]["valueFrom"]["fieldRef"]["fieldPath"]
    assert int(env["WORLD_SIZE"]["value"]) == spec["completions"]
    assert service["spec"]["clusterIP"] == "None" and pod["subdomain"] == service["metadata"]["name"]
    assert env["MASTER_ADDR"]["value"] == f"{job['metadata']['name']}-0.{service['metadata']['name']}"
    assert {p["port"] for p in service["spec"]["ports"]} == {int(env["MASTER_PORT"]["value"])}
    options = _cli_options()
    check = [c for a in container["args"] for c in _envguard_invocations(a)]
    for argv in check:
        _assert_valid(argv, options, "check-job.yaml")
    assert check[0][0] == "check" and "--distributed" in check[0] and "json" in check[0]
    fleet_cmd = fleet_job["spec"]["template"]["spec"]["containers"][0]["command"]
    assert fleet_cmd[:2] == ["envguard", "fleet"]
    _assert_valid(fleet_cmd[1:], options, "fleet-job.yaml")
    # both Jobs mount the same shared claim where the reports are written and read
    claim = {v["persistentVolumeClaim"]["claimName"] for j in (job, fleet_job)
             for v in j["spec"]["template"]["spec"]["volumes"] if "persistentVolumeClaim" in v}
    assert claim == {"envguard-reports"}
    reports_dir = next(m["mountPath"] for m in container["volumeMounts"] if m["name"] == "reports")
    assert f"> \"{reports_dir}/" in container["args"][0] and reports_dir in fleet_cmd


def _train_job() -> tuple[dict, dict, dict]:
    docs = list(yaml.safe_load_all((EXAMPLES / "kubernetes" / "train-job.yaml").read_text()))
    service = next(d for d in docs if d["kind"] == "Service")
    job = next(d for d in docs if d["kind"] == "Job")
    return service, job, job["spec"]["template"]["spec"]["containers"][0]


def test_kubernetes_train_job_starts_torchrun_through_envguard_run() -> None:
    service, job, container = _train_job()
    spec, pod = job["spec"], job["spec"]["template"]["spec"]
    command, args = container["command"], container["args"]
    # exec form (no shell): envguard run execs torchrun, the pod's PID 1; the image is built, nothing is synced
    assert command[:2] == ["envguard", "run"] and "--no-sync" in command and command[-1] == "--"
    _assert_valid(command[1:], _cli_options(), "train-job.yaml")
    assert args[0] == "torchrun" and args[-1].endswith("train.py")
    env = {e["name"]: e for e in container["env"]}
    for var in re.findall(r"\$\((\w+)\)", " ".join(args)):  # what the kubelet expands in args
        assert var in env, f"train-job.yaml: $({var}) is not set in the container's env"
    flag = {a.split("=", 1)[0]: a.split("=", 1)[1] for a in args if a.startswith("--") and "=" in a}
    assert int(flag["--nnodes"]) == spec["completions"] == spec["parallelism"]
    assert int(flag["--nproc-per-node"]) == container["resources"]["limits"]["nvidia.com/gpu"]
    assert "job-completion-index" in env["NODE_RANK"]["valueFrom"]["fieldRef"]["fieldPath"]
    assert service["spec"]["clusterIP"] == "None" and pod["subdomain"] == service["metadata"]["name"]
    assert env["MASTER_ADDR"]["value"] == f"{job['metadata']['name']}-0.{service['metadata']['name']}"
    assert {p["port"] for p in service["spec"]["ports"]} == {int(env["MASTER_PORT"]["value"])}
    # the same environment check-job.yaml checks
    check = next(d for d in yaml.safe_load_all((EXAMPLES / "kubernetes" / "check-job.yaml").read_text())
                 if d["kind"] == "Job")["spec"]["template"]["spec"]["containers"][0]
    prefix = next(e["value"] for e in check["env"] if e["name"] == "ENV_PREFIX")
    assert command[command.index("--prefix") + 1] == prefix and container["image"] == check["image"]


@pytest.mark.slow
def test_kubernetes_train_job_command_runs_the_job_activated_as_written(tmp_path: Path) -> None:
    """The container's command as the kubelet runs it (no shell), the image's environment stood in for by
    one whose activate.d script sets a variable, and torchrun by an interpreter printing what it sees."""
    _, _, container = _train_job()
    command = list(container["command"])
    prefix = tmp_path / "env"
    (prefix / "conda-meta").mkdir(parents=True)
    (prefix / "etc" / "conda" / "activate.d").mkdir(parents=True)
    (prefix / "etc" / "conda" / "activate.d" / "cc.sh").write_text("export EG_ACTIVATED=yes\n")
    command[command.index("--prefix") + 1] = str(prefix)
    argv = [sys.executable, "-m", "envguard", *command[1:], sys.executable, "-c",
            "import os; print(os.environ['CONDA_PREFIX'], os.environ['EG_ACTIVATED'])"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [str(prefix), "yes"] and proc.stderr == ""


# ---------------------------------------------------------------- where envguard itself is installed from

# PyPI's `envguard` is an unrelated project; torch-envguard (ours) is published on no index yet. Either name,
# installed by bare name from an index, would run whatever a stranger uploaded under it.
_INSTALL = re.compile(r"\b(?:pip3?|pipx|uv\s+pip|uv\s+tool|pipx\s+run)\s+install\b([^\n;&|`]*)")
_BARE_NAME = re.compile(r"^(?:torch-)?envguard(?:\[[^\]]*\])?(?:\s*[<>=!~].*)?$", re.IGNORECASE)


def index_installs_of_envguard(text: str) -> list[str]:
    """Every `pip/pipx/uv install` argument that names envguard by bare name (so: from an index)."""
    found = []
    for m in _INSTALL.finditer(text.replace("\\\n", " ")):
        try:
            argv = shlex.split(m.group(1), comments=True)
        except ValueError:
            argv = m.group(1).split()
        for i, raw in enumerate(argv):
            tok = raw.strip("`'\",.()")  # prose: `pipx install envguard`, or ...
            if tok.startswith("-") or " @ " in tok:
                continue
            if _BARE_NAME.match(tok.strip()) and not (i + 1 < len(argv) and argv[i + 1] == "@"):
                found.append(f"{m.group(0).strip()}")
    return found


def test_index_install_scanner_catches_both_forms() -> None:
    for bad in ("run: pip install envguard\n", "pipx install envguard\n", "RUN pip install --no-cache-dir envguard\n",
                "pip install 'envguard[plot]'\n", "pip install torch-envguard==0.1.0\n", "uv tool install envguard",
                "(`pipx install envguard`, or inside the environment)"):
        assert index_installs_of_envguard(bad), bad
    for good in ('pip install "torch-envguard @ git+https://example.invalid/envguard@abc"\n',
                 'pipx install "git+https://example.invalid/envguard@abc"\n', "pip install -e '.[plot]'\n",
                 "pip install matplotlib\n", "pip install torch==2.13.0 -e .\n"):
        assert not index_installs_of_envguard(good), good


def _install_texts() -> list[Path]:
    files = [p for p in EXAMPLES.rglob("*") if p.is_file()]
    return files + [REPO / "README.md", REPO / ".pre-commit-hooks.yaml", *sorted((REPO / "docs").rglob("*.md"))]


def test_examples_and_docs_never_install_envguard_from_an_index() -> None:
    bad = {str(p.relative_to(REPO)): hits for p in _install_texts()
           if (hits := index_installs_of_envguard(p.read_text(encoding="utf-8", errors="replace")))}
    assert not bad, f"installs envguard by bare name from an index (PyPI's `envguard` is another project): {bad}"


def test_distribution_name_is_not_pypis_envguard() -> None:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["name"] == "torch-envguard"
    assert project["scripts"] == {"envguard": "envguard.__main__:main"}  # the command keeps its name
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "torch-envguard" in readme and "The `envguard` on PyPI is a different project" in readme


def test_examples_pin_a_commit_of_this_repository() -> None:
    """The examples install envguard from one commit, and it is a commit of this repository's history."""
    pins = set()
    for p in [*_install_texts()]:
        pins.update(re.findall(r"(?:envguard@|ENVGUARD_REV[:=]\s*)([0-9a-f]{40})\b", p.read_text(encoding="utf-8")))
    for name in ("docker/Dockerfile", "github-actions/envguard.yml", "slurm/check-nodes.sbatch"):
        assert re.search(r"(?:envguard@|ENVGUARD_REV[:=]\s*)[0-9a-f]{40}\b", (EXAMPLES / name).read_text()), name
    assert len(pins) == 1, f"the examples and docs pin different commits: {sorted(pins)}"
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    [rev] = pins
    known = subprocess.run(["git", "cat-file", "-e", f"{rev}^{{commit}}"], cwd=REPO, capture_output=True,
                           check=False)
    shallow = subprocess.run(["git", "rev-parse", "--is-shallow-repository"], cwd=REPO, capture_output=True,
                             text=True, check=False).stdout.strip() == "true"
    if known.returncode and shallow:
        pytest.skip("a shallow clone does not hold the pinned commit")
    assert known.returncode == 0, f"{rev} is not a commit of this repository"
    ancestor = subprocess.run(["git", "merge-base", "--is-ancestor", rev, "HEAD"], cwd=REPO, capture_output=True,
                              check=False)
    assert ancestor.returncode == 0, f"{rev} is not in this branch's history"
