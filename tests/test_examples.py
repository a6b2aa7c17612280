"""examples/ and the top-level environment.yml: parsed, linted, run.

Every `envguard ...` command line written in an example is checked against the
real CLI: the subcommand exists and accepts every option the example passes.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

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
        if argv and not argv[0].startswith("-") and argv[0] not in ("lock.", "itself"):
            calls.append(argv)
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

    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    from packaging.requirements import Requirement

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    reqs = [Requirement(r) for r in project["dependencies"] + project["optional-dependencies"]["test"]]
    # the file is Python 3.11's: a dependency for older Pythons only (tomli) is not wanted there
    wanted = [r.name.lower() for r in reqs if r.marker is None or r.marker.evaluate({"python_version": "3.11"})]
    conda_for = {"torch": "pytorch"}
    missing = [n for n in wanted if conda_for.get(n, n) not in conda_names]
    assert not missing, f"environment.yml lacks {missing} (pyproject.toml needs them)"
    assert not (REPO / "conda-lock.yml").exists() or "content_hash" in (REPO / "conda-lock.yml").read_text()


# ---------------------------------------------------------------- the PyTorch project


def test_project_environment_lints_clean() -> None:
    assert lint_file(EXAMPLES / "pytorch-project" / "environment.yml") == []


@pytest.mark.parametrize("spawn", [False, True], ids=["fork", "spawn"])
def test_train_script_runs_with_worker_processes(tmp_path: Path, spawn: bool) -> None:
    pytest.importorskip("torch")
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


# ---------------------------------------------------------------- Slurm


def test_slurm_script_parses_and_uses_real_flags() -> None:
    script = EXAMPLES / "slurm" / "check-nodes.sbatch"
    bash = shutil.which("bash")
    assert bash
    proc = subprocess.run([bash, "-n", str(script)], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    if shutil.which("shellcheck"):
        sc = subprocess.run(["shellcheck", str(script)], capture_output=True, text=True, timeout=60)
        assert sc.returncode == 0, sc.stdout
    text = script.read_text()
    options = _cli_options()
    calls = _envguard_invocations(text)
    for argv in calls:
        _assert_valid(argv, options, "check-nodes.sbatch")
    check = next(c for c in calls if c[0] == "check")
    assert check[check.index("--format") + 1] == "json"
    assert any(c[0] == "diff" for c in calls)
    assert "srun" in text and "#SBATCH --nodes" in text


def test_slurm_script_runs_with_a_fake_srun(tmp_path: Path) -> None:
    """Run the script for real with `srun` and `envguard` stand-ins on PATH: two nodes, one differs."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text(
        "#!/bin/bash\n# two 'nodes': run the command once per fake hostname\n"
        "while [[ $1 == --* ]]; do shift; done\n"
        "for h in node1 node2; do HOSTNAME_FAKE=$h \"$@\"; done\n")
    (bin_dir / "hostname").write_text("#!/bin/bash\necho \"$HOSTNAME_FAKE\"\n")
    (bin_dir / "envguard").write_text(
        "#!/bin/bash\necho \"$*\" >> \"$ENVGUARD_CALLS\"\n"
        "if [ \"$1\" = check ]; then echo '{\"node\": \"'\"$HOSTNAME_FAKE\"'\"}'; exit 1; fi\n"
        "if [ \"$1\" = diff ]; then cmp -s \"$2\" \"$3\"; exit $?; fi\n")
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    calls = tmp_path / "calls.txt"
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "ENVGUARD_CALLS": str(calls), "SLURM_JOB_ID": "42"}
    proc = subprocess.run(["bash", str(EXAMPLES / "slurm" / "check-nodes.sbatch"), "/envs/x"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # the two node reports differ
    reports = sorted(p.name for p in (tmp_path / "envguard-reports" / "42").iterdir())
    assert reports == ["node1.json", "node2.json"]
    logged = calls.read_text().splitlines()
    assert logged[0].startswith("check --prefix /envs/x --lockfile conda-lock.yml --format json")
    assert logged[-1].startswith("diff ")
