"""Issue 22, point 4 and 7: export keeps what was asked for, diff finds the project from a subdirectory.

Everything runs for real: a virtualenv with a real editable install with extras (a tiny project with an
in-tree PEP 517 backend and wheels built here, installed by pip from the local directory only), an
environment `envguard create` built from the file:// test channel and the local PEP 503 index, the real
`envguard export` and `envguard diff` commands in subprocesses.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from support import channels
from support.create_fixtures import BASE_DEPS, envguard_run, make_lock, write_env

pytestmark = pytest.mark.slow  # real venvs, pip installs and created environments

_BACKEND = '''
import base64, hashlib, os, zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
META = """Metadata-Version: 2.1
Name: egproj
Version: 0.1
Requires-Dist: egbase>=1
Provides-Extra: test
Requires-Dist: egtesta; extra == "test"
Requires-Dist: egtestb>=1; extra == "test"
Provides-Extra: lint
Requires-Dist: egtesta; extra == "lint"
Requires-Dist: eglintonly; extra == "lint"
Provides-Extra: docs
Requires-Dist: egdocs; extra == "docs"
"""


def _wheel(directory, files):
    files = dict(files)
    info = "egproj-0.1.dist-info"
    files[info + "/METADATA"] = META
    files[info + "/WHEEL"] = "Wheel-Version: 1.0\\nGenerator: eg\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n"
    record = ""
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record += f"{path},sha256={digest},{len(text.encode())}\\n"
    files[info + "/RECORD"] = record + info + "/RECORD,,\\n"
    name = "egproj-0.1-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(directory, name), "w") as zf:
        for path, text in files.items():
            zf.writestr(path, text)
    return name


def get_requires_for_build_wheel(config_settings=None):
    return []


get_requires_for_build_editable = get_requires_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _wheel(wheel_directory, {"egproj/__init__.py": ""})


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _wheel(wheel_directory, {"egproj.pth": os.path.join(HERE, "src") + "\\n"})
'''


def _pip(venv: Path, *args: str) -> None:
    """envguard's own pip against the venv's interpreter (`pip --python`), from a local directory only."""
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install",
                           "--no-index", "--no-build-isolation", "--no-cache-dir", "--disable-pip-version-check",
                           "-q", *args], capture_output=True, text=True, timeout=300,
                          env={"PATH": "/usr/bin:/bin", "PIP_CONFIG_FILE": "/dev/null", "HOME": str(venv.parent)})
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _pip_section(spec: dict) -> list[str]:
    return next((d["pip"] for d in spec["dependencies"] if isinstance(d, dict)), [])


def test_editable_install_with_extras_keeps_what_the_extras_brought_in(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    for name in ("egbase", "egtesta", "egtestb", "egfast", "egloose"):
        channels.build_wheel(wheels, name, "1.0")
    channels.build_wheel(wheels, "egplug", "1.0", requires=['egfast; extra == "fast"'])
    proj = tmp_path / "egproj"
    (proj / "src").mkdir(parents=True)
    (proj / "backend.py").write_text(_BACKEND)
    (proj / "pyproject.toml").write_text('[build-system]\nrequires = []\nbuild-backend = "backend"\n'
                                         'backend-path = ["."]\n')
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    # what a user does: the project editable with its test extra, and a plugin with one of its extras
    _pip(venv, "--find-links", str(wheels), "-e", f"{proj}[test]")
    _pip(venv, "--find-links", str(wheels), "egplug[fast]", "egloose")

    out = tmp_path / "out"
    proc = envguard_run("export", "-p", str(venv), "--output-dir", str(out), "--format", "environment", "--no-index",
                        "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    spec = yaml.safe_load((out / "environment.yml").read_text())
    pip = _pip_section(spec)
    # the editable project itself cannot be written; what it requires is, with what its [test] extra brought in
    assert {"egbase==1.0", "egtesta==1.0", "egtestb==1.0"} <= set(pip), pip
    assert not any(p.startswith("egproj") for p in pip)
    # a requested dist keeps the extra it was installed with; what was asked for by name stays
    assert "egplug[fast]==1.0" in pip and "egloose==1.0" in pip and "egfast==1.0" not in pip, pip
    # [lint] shares egtesta with [test] but eglintonly is not there: only partly installed, said so
    findings = {f["code"]: f for f in json.loads(proc.stdout)["findings"]}
    assert "EG622" in findings, findings
    assert "[lint]" in findings["EG622"]["message"] and "eglintonly" in findings["EG622"]["message"]
    assert "[docs]" not in json.dumps(findings)  # an extra with nothing installed is simply not installed
    assert "EG610" in findings  # the editable install itself is named, as before


@pytest.fixture(scope="module")
def created(tmp_path_factory: pytest.TempPathFactory, channel_url: str, pypi_index) -> dict[str, Path]:
    """A project (spec named `exact-proj`, with a pip section) locked and built by the real create at
    `<root>/env` from the file:// test channel and the local index."""
    root = tmp_path_factory.mktemp("export-exact")
    spec = write_env(root / "proj", channel_url, BASE_DEPS, pip=["egdemo-b"], pip_index=pypi_index.url)
    spec.write_text(spec.read_text().replace("name: t\n", "name: exact-proj\n"))
    lock = make_lock(spec)
    proc = envguard_run("create", "-p", str(root / "env"), "--lockfile", str(lock), "--no-check", "-q")
    assert proc.returncode == 0, proc.stderr
    return {"root": root, "env": root / "env", "lock": lock, "spec": spec}


def test_create_records_its_specs_in_conda_meta_history_as_conda_does(created: dict[str, Path]) -> None:
    history = (created["env"] / "conda-meta" / "history").read_text()
    lines = history.splitlines()
    assert lines[0].startswith("==> ") and lines[0].endswith(" <==")
    assert lines[1].startswith("# cmd: envguard create")
    assert f"# update specs: {list(BASE_DEPS)!r}" in lines  # conda's own line, the spec's conda dependencies
    linked = sorted(ln[1:] for ln in lines if ln.startswith("+"))
    names = {p.rsplit("::", 1)[1].rsplit("-", 2)[0] for p in linked}
    assert {"python", "pytorch", "numpy", "egtool"} <= names
    assert all("::" in p and p.split("::")[0].endswith(("/noarch", f"/{channels.host_platform()}")) for p in linked)
    assert "# envguard name: exact-proj" in lines and "# envguard pip specs: ['egdemo-b']" in lines


def test_export_of_a_created_env_is_the_spec_it_was_built_from(created: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = envguard_run("export", "-p", str(created["env"]), "--output-dir", str(out), "--format", "explicit", "--no-index")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = envguard_run("export", "-p", str(created["env"]), "--output-dir", str(out), "--no-index", "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(proc.stdout)["requested_from"] == "history"
    spec = yaml.safe_load((out / "environment.yml").read_text())
    assert spec["name"] == "exact-proj"  # the spec's name, not the directory's ("env")
    conda = [d for d in spec["dependencies"] if isinstance(d, str)]
    assert sorted(conda) == sorted(BASE_DEPS)  # exactly what was asked for, numpy included (pytorch needs it too)
    # pip: what the spec asked for, pinned by name; not the dependency, not one platform's wheel URL
    assert _pip_section(spec) == ["egdemo-b==1.0"]
    index = yaml.safe_load(created["spec"].read_text())["pip-repositories"]
    assert spec["pip-repositories"] == index
    req = (out / f"requirements-{channels.host_platform()}.txt").read_text().splitlines()
    assert req[1] == f"--index-url {index[0]}"
    assert [ln.split(" --hash=sha256:")[0] for ln in req[2:]] == ["egdemo-a==2.0", "egdemo-b==1.0"]
    assert all(len(ln.split(" --hash=sha256:")[1]) == 64 for ln in req[2:])
    # the exported spec is fresh against the exported lock and builds the same environment
    fresh = envguard_run("lock", "--check", "-f", str(out / "environment.yml"))
    assert fresh.returncode == 0, fresh.stdout + fresh.stderr
    diff = envguard_run("diff", str(created["lock"]), str(out / "conda-lock.yml"))
    assert diff.returncode == 0, diff.stdout + diff.stderr


def test_frozen_create_records_no_specs_it_did_not_check(created: dict[str, Path], tmp_path: Path) -> None:
    env = tmp_path / "frozen"
    proc = envguard_run("create", "-p", str(env), "--lockfile", str(created["lock"]), "--frozen", "--no-check", "-q")
    assert proc.returncode == 0, proc.stderr
    history = (env / "conda-meta" / "history").read_text()
    assert "# update specs:" not in history and "# envguard pip installed: [" in history
    out = tmp_path / "out"
    proc = envguard_run("export", "-p", str(env), "--output-dir", str(out), "--format", "environment", "--json")
    assert json.loads(proc.stdout)["requested_from"] == "inferred", proc.stdout
    spec = yaml.safe_load((out / "environment.yml").read_text())
    assert spec["name"] == "exact-proj"  # the spec beside the lock still names it
    assert not any(" @ " in p for p in _pip_section(spec))  # still pinned by name, never a wheel URL


def test_diff_finds_the_project_from_a_subdirectory_and_says_which_lock(created: dict[str, Path],
                                                                        tmp_path: Path) -> None:
    proj = created["spec"].parent
    (proj / ".git").mkdir(exist_ok=True)
    src = proj / "src"
    src.mkdir(exist_ok=True)
    # the spec names an environment; it lives in envguard's envs dir
    envs = tmp_path / "envs"
    envs.mkdir()
    (envs / "exact-proj").symlink_to(created["env"])
    proc = envguard_run("diff", cwd=src, env={"ENVGUARD_ENVS_DIR": str(envs), "CONDA_PREFIX": "",
                                              "VIRTUAL_ENV": ""})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # the env was built from the project's lock, and its fingerprint says so: that is the reason shown
    assert "A is ../conda-lock.yml (the lock envguard built it from)" in proc.stdout, proc.stdout
    assert f"named by {proj / 'environment.yml'} (name: exact-proj)" in proc.stdout, proc.stdout
    # outside any project: exit 2 with one line saying what is missing
    lone = tmp_path / "lone"
    (lone / ".git").mkdir(parents=True)
    proc = envguard_run("diff", cwd=lone, env={"ENVGUARD_ENVS_DIR": str(envs), "CONDA_PREFIX": "", "VIRTUAL_ENV": "",
                                               "HOME": str(tmp_path)})
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stdout + proc.stderr
