"""The pre-commit hooks, end to end, with the real `pre-commit` and real git commits.

A clone of this repository (the hook repository) gets a snapshot of this working
tree committed on top. A second temporary repository (the project) first runs
the snippet of docs/commands/pre-commit.md exactly as written (its `repo:` URL
led to the clone by git's `url.<base>.insteadOf`, its `rev:` a commit the clone
already has), then the working tree's hooks at the snapshot commit. pre-commit
builds its own virtualenvs with envguard and its dependencies from the package
index (slow: one test does the whole flow). The project's environment.yml names the offline test channel,
so `envguard lock` solves without conda-forge.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from support.channels import HOST_PY
from support.require import require

REPO = Path(__file__).resolve().parent.parent
PRE_COMMIT = Path(sys.executable).parent / "pre-commit"

pytestmark = pytest.mark.slow


def test_hook_definitions() -> None:
    hooks = {h["id"]: h for h in yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())}
    assert set(hooks) == {"envguard-lint", "envguard-lock-check", "envguard-check"}
    assert hooks["envguard-lint"]["entry"] == "envguard lint"
    assert hooks["envguard-lock-check"]["entry"] == "envguard lock --check"
    assert hooks["envguard-lock-check"]["pass_filenames"] is False
    assert set(hooks["envguard-check"]["stages"]) == {"post-checkout", "post-merge"}
    # every hook says when it runs: without `stages:` a hook runs (and prints `Skipped`) in every hook type
    # installed, post-checkout included
    for hook_id in ("envguard-lint", "envguard-lock-check"):
        assert set(hooks[hook_id]["stages"]) == {"pre-commit", "pre-push", "manual"}, hook_id
    assert hooks["envguard-check"]["entry"] == "envguard check --skip-missing --if-changed"
    assert all(h["language"] == "python" for h in hooks.values())
    import re

    files = re.compile(hooks["envguard-lint"]["files"])
    for name in ("environment.yml", "sub/environment-gpu.yaml", "conda-lock.yml", "conda-linux-64.lock",
                 "pixi.lock"):
        assert files.search(name), name
    for name in ("poetry.lock", ".pre-commit-config.yaml", "docs/env.md"):
        assert not files.search(name), name


def test_own_config_runs_lint_on_itself() -> None:
    config = yaml.safe_load((REPO / ".pre-commit-config.yaml").read_text())
    local = [r for r in config["repos"] if r["repo"] == "local"]
    ids = {h["id"] for r in local for h in r["hooks"]}
    assert "envguard-lint" in ids


def _git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GIT_AUTHOR_NAME": "envguard test", "GIT_AUTHOR_EMAIL": "test@example.invalid",
           "GIT_COMMITTER_NAME": "envguard test", "GIT_COMMITTER_EMAIL": "test@example.invalid"}
    return subprocess.run(["git", "-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false", *args], cwd=cwd,
                          env=env, capture_output=True, text=True, check=check, timeout=900)


def _snapshot(dest: Path) -> str:
    """Clone this repository (its whole history: the documented `rev:` is one of its commits), commit the
    working tree (tracked and untracked, not ignored) on top; return that commit."""
    _git(dest.parent, "clone", "-q", "--no-checkout", str(REPO), str(dest))
    _git(dest, "read-tree", "--empty")
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, capture_output=True,
                            text=True, check=True).stdout.splitlines()
    for rel in listed:
        src = REPO / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    _git(dest, "add", "-A")
    _git(dest, "commit", "-q", "--allow-empty", "-m", "snapshot of the working tree")
    return _git(dest, "rev-parse", "HEAD").stdout.strip()


ENV = """\
name: {name}
channels:
  - {channel}
dependencies:
  - python={python}
  - pytorch=2.13.*=cpu*
  - numpy
platforms:
  - linux-64
"""


def documented_snippet_text() -> str:
    """The `.pre-commit-config.yaml` docs/commands/pre-commit.md shows, as written."""
    import re

    text = (REPO / "docs" / "commands" / "pre-commit.md").read_text(encoding="utf-8")
    block = re.search(r"```yaml\n(.*?)```", text, re.S)
    assert block, "docs/commands/pre-commit.md has no yaml snippet"
    return block.group(1)


def documented_snippet() -> dict:
    return yaml.safe_load(documented_snippet_text())


def _is_commit(rev: str) -> bool:
    return subprocess.run(["git", "cat-file", "-e", f"{rev}^{{commit}}"], cwd=REPO, capture_output=True,
                          check=False).returncode == 0


def test_documented_rev_is_a_commit_of_this_repository() -> None:
    """The snippet's `rev:` is a full commit hash of this branch's history (there are no release tags)."""
    import re

    rev = documented_snippet()["repos"][0]["rev"]
    assert re.fullmatch(r"[0-9a-f]{40}", str(rev)), f"rev: {rev} is not a full commit hash"
    require((REPO / ".git").exists(), "not a git checkout")
    shallow = subprocess.run(["git", "rev-parse", "--is-shallow-repository"], cwd=REPO, capture_output=True,
                             text=True, check=False).stdout.strip() == "true"
    require(_is_commit(rev) or not shallow, "a shallow clone does not hold the documented commit")
    assert _is_commit(rev), f"docs/commands/pre-commit.md's rev: {rev} is not a commit of this repository"
    ancestor = subprocess.run(["git", "merge-base", "--is-ancestor", rev, "HEAD"], cwd=REPO, capture_output=True,
                              check=False)
    assert ancestor.returncode == 0, f"rev: {rev} is not in this branch's history"


@pytest.mark.requires(PRE_COMMIT.exists(), "pre-commit is not installed next to the test interpreter")
@pytest.mark.skipif(sys.platform != "linux", reason="the test channel's interpreter package is Linux-only here")
def test_precommit_end_to_end(tmp_path: Path, channel_url: str) -> None:
    require((REPO / ".git").exists(), "not a git checkout: the hook repository is a clone of this one")
    written = documented_snippet_text()
    [entry] = yaml.safe_load(written)["repos"]
    require(_is_commit(entry["rev"]), "this clone does not hold the documented commit (shallow?)")
    hook_repo = tmp_path / "hook-repo"
    snapshot = _snapshot(hook_repo)

    project = tmp_path / "project"
    project.mkdir()
    _git(project, "init", "-q")
    env_name = f"hooked-{os.getpid()}"
    (project / "environment.yml").write_text(ENV.format(name=env_name, channel=channel_url, python=HOST_PY),
                                             encoding="utf-8")
    envguard = [sys.executable, "-m", "envguard"]
    prefix = Path(os.environ["ENVGUARD_ENVS_DIR"]) / env_name  # where `envguard create` puts it (conftest)
    # the documented `repo:` URL is where the team keeps envguard: here, the clone (pre-commit passes
    # GIT_CONFIG_COUNT/KEY/VALUE on to git)
    insteadof = {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": f"url.{hook_repo}.insteadOf",
                 "GIT_CONFIG_VALUE_0": entry["repo"]}

    def run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(cmd, cwd=project, capture_output=True, text=True, timeout=900,
                              env={**os.environ, **insteadof})

    locked = run([*envguard, "lock"])
    assert locked.returncode == 0, locked.stderr
    _git(project, "add", "-A")

    # 0. the documented snippet, byte for byte: pre-commit fetches the documented commit and both commit hooks
    #    pass on the project's files
    (project / ".pre-commit-config.yaml").write_text(written, encoding="utf-8")
    as_written = run([str(PRE_COMMIT), "run", "--all-files"])
    assert as_written.returncode == 0, as_written.stdout + as_written.stderr
    assert "envguard lint" in as_written.stdout and "envguard lock --check" in as_written.stdout
    assert "Failed" not in as_written.stdout and "mutable reference" not in as_written.stderr + as_written.stdout

    # the rest runs the working tree's hooks: the same snippet at the snapshot commit (a commit, not a tag) of
    # the clone, named by its path
    own_hooks = written.replace(entry["rev"], snapshot).replace(entry["repo"], str(hook_repo))
    (project / ".pre-commit-config.yaml").write_text(own_hooks, encoding="utf-8")
    _git(project, "add", "-A")

    # 1. pre-commit run --all-files: installs envguard from the hook repo into its own venv; both commit
    #    hooks pass, and the opt-in envguard-check (post-checkout/post-merge only) does not run
    first = run([str(PRE_COMMIT), "run", "--all-files"])
    assert first.returncode == 0, first.stdout + first.stderr
    assert "envguard lint" in first.stdout and "envguard lock --check" in first.stdout
    assert "Passed" in first.stdout and "envguard check" not in first.stdout.replace("lock --check", "")

    # 2. real commits through the installed hooks
    for hook_type in ("pre-commit", "post-checkout"):
        assert run([str(PRE_COMMIT), "install", "-t", hook_type]).returncode == 0
    ok = _git(project, "commit", "-m", "initial", check=False)
    assert ok.returncode == 0, ok.stdout + ok.stderr

    # 3. a branch switch that changes neither environment.yml nor the lock checks nothing
    branch = _git(project, "checkout", "-b", "feature", check=False)
    assert branch.returncode == 0, branch.stdout + branch.stderr
    assert "envguard check: skipped: the checkout moved no commit" in branch.stdout + branch.stderr, \
        branch.stdout + branch.stderr
    # the commit hooks declare their stages: a checkout does not list them as `Skipped`
    assert "envguard lint" not in branch.stdout + branch.stderr, branch.stdout + branch.stderr
    assert "Skipped" not in branch.stdout + branch.stderr, branch.stdout + branch.stderr

    # 4. environment.yml changes without a re-lock: the commit is blocked, nothing is committed
    env_file = project / "environment.yml"
    env_file.write_text(env_file.read_text().replace("  - numpy\n", "  - numpy\n  - pip\n"), encoding="utf-8")
    _git(project, "add", "environment.yml")
    head = _git(project, "rev-parse", "HEAD").stdout
    blocked = _git(project, "commit", "-m", "add pip", check=False)
    assert blocked.returncode != 0
    out = blocked.stdout + blocked.stderr
    assert "envguard lock --check" in out and "Failed" in out
    assert _git(project, "rev-parse", "HEAD").stdout == head

    # 5. after `envguard lock` the same commit passes
    relocked = run([*envguard, "lock"])
    assert relocked.returncode == 0, relocked.stderr
    _git(project, "add", "environment.yml", "conda-lock.yml")
    passed = _git(project, "commit", "-m", "add pip", check=False)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert _git(project, "rev-parse", "HEAD").stdout != head

    # 6. the lock changes on the way back to main, but the project's environment does not exist yet: the hook
    #    says so in one line and passes (never checks pre-commit's own virtualenv)
    back = _git(project, "checkout", "main", check=False)
    assert back.returncode == 0, back.stdout + back.stderr
    assert "envguard check: skipped:" in back.stdout + back.stderr and env_name in back.stdout + back.stderr

    # 7. the project's environment, built from main's lock where environment.yml names it (no -p, no -n)
    created = run([*envguard, "create", "--no-check"])
    assert created.returncode == 0, created.stderr
    assert created.stdout.startswith(f"created {prefix}"), created.stdout

    # 8. post-checkout on feature: its lock wants pip, which the environment (built from main) lacks, so the
    #    checkout reports the drift with a non-zero exit; back on main the environment matches
    drift = _git(project, "checkout", "feature", check=False)
    assert drift.returncode != 0, drift.stdout + drift.stderr
    assert "EG510" in drift.stdout + drift.stderr and str(prefix) in drift.stdout + drift.stderr
    fine = _git(project, "checkout", "main", check=False)
    assert fine.returncode == 0, fine.stdout + fine.stderr
    assert f"envguard check {prefix}" in fine.stdout + fine.stderr

    # 9. `git checkout -- environment.yml` (a file checkout) checks nothing
    env_file.write_text(env_file.read_text() + "# local edit\n", encoding="utf-8")
    restore = _git(project, "checkout", "--", "environment.yml", check=False)
    assert restore.returncode == 0 and "skipped" in restore.stdout + restore.stderr, restore.stdout + restore.stderr

    # 10. this repository's own config lints its own environment files (the snapshot has them all)
    own = subprocess.run([str(PRE_COMMIT), "run", "--all-files"], cwd=hook_repo, capture_output=True, text=True,
                         timeout=600, env={**os.environ, "PATH": f"{PRE_COMMIT.parent}{os.pathsep}{os.environ['PATH']}"})
    assert own.returncode == 0, own.stdout + own.stderr
    assert "envguard lint" in own.stdout and "Passed" in own.stdout

    # 11. a bad spec is stopped by envguard-lint (exit 1 from a finding, shown with its code)
    _git(project, "checkout", "feature", check=False)  # its post-checkout reports the drift again
    env_file.write_text(env_file.read_text().replace("  - pip\n", "  - pip\n  - pip:\n    - torch==2.13.0\n"),
                        encoding="utf-8")
    _git(project, "add", "environment.yml")
    bad = _git(project, "commit", "-m", "torch from pip", check=False)
    assert bad.returncode != 0
    assert "EG107" in bad.stdout + bad.stderr
