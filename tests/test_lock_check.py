"""`envguard lock --check`: read-only freshness that agrees with conda-lock's `--check-input-hash`."""

from __future__ import annotations

import os
import random
import re
from pathlib import Path

import pytest
from support.channels import HOST_PY
from support.lock_support import conda_lock_verdict, envguard, stub_conda, write_env  # noqa: F401 (fixture)

from envguard.lock import check_fresh, lock, lock_metadata
from envguard.lock.lockfile import META_FINGERPRINT, build_lockfile, fast_path_possible, write_lock_atomic

PLATS = ["linux-64", "osx-arm64", "win-64"]


def _snapshot(d: Path) -> dict[str, tuple[int, int]]:
    return {str(p): (p.stat().st_mtime_ns, p.stat().st_size) for p in sorted(d.rglob("*"))}


@pytest.fixture
def locked(tmp_path: Path, channel_url: str) -> tuple[Path, Path]:
    env = write_env(tmp_path / "environment.yml", channels=[channel_url], deps=[f"python={HOST_PY}", "numpy"],
                    platforms=PLATS)
    lock([env], cuda="12.6")
    return env, tmp_path / "conda-lock.yml"


@pytest.mark.slow
def test_missing_lock_is_exit_4_naming_platforms_and_command(tmp_path: Path, channel_url: str) -> None:
    write_env(tmp_path / "environment.yml", channels=[channel_url], deps=["python"], platforms=["linux-64"])
    proc = envguard(["lock", "--check"], cwd=tmp_path)
    assert proc.returncode == 4
    assert "conda-lock.yml is missing" in proc.stderr
    assert "envguard lock -f environment.yml --lockfile conda-lock.yml" in proc.stderr
    assert not (tmp_path / "conda-lock.yml").exists()


@pytest.mark.slow
def test_fresh_check_is_fast_and_never_imports_conda_lock(locked: tuple[Path, Path]) -> None:
    env, lockfile = locked
    fresh = check_fresh([env], lockfile)
    assert fresh.fresh and fresh.fast and not fresh.stale_platforms
    before = _snapshot(env.parent)
    proc = envguard(["lock", "--check"], cwd=env.parent, env={**os.environ, "PYTHONPROFILEIMPORTTIME": "1"})
    assert proc.returncode == 0, proc.stderr
    assert "is fresh for linux-64, osx-arm64, win-64" in proc.stdout
    imported = {ln.rsplit("|", 1)[-1].strip() for ln in proc.stderr.splitlines() if ln.startswith("import time:")}
    assert "envguard.lock" in imported
    assert not {m for m in imported if m.split(".")[0] == "conda_lock"}
    # the lock's wholeness is rattler's MatchSpec verdict (envguard.lockwhole): rattler, never a solver's setup
    assert "envguard.lock.solver" not in imported and "envguard.lock.spec" not in imported
    assert _snapshot(env.parent) == before  # read-only


@pytest.mark.slow
def test_stale_after_a_real_change_fresh_after_a_comment(locked: tuple[Path, Path], channel_url: str) -> None:
    env, lockfile = locked
    text = env.read_text()
    env.write_text(text.replace("name: demo", "name: demo  # only a comment"))
    f = check_fresh([env], lockfile)
    assert f.fresh and not f.fast  # conda-lock's own hash decides, and agrees: same spec

    write_env(env, channels=[channel_url], deps=[f"python={HOST_PY}", "numpy", "pip"], platforms=PLATS)
    before = _snapshot(env.parent)
    proc = envguard(["lock", "--check"], cwd=env.parent)
    assert proc.returncode == 4
    msg = proc.stderr
    assert "stale for linux-64, osx-arm64, win-64" in msg and "envguard lock -f environment.yml" in msg
    assert len(msg.strip().splitlines()) == 1
    assert _snapshot(env.parent) == before
    # platforms asked for that the lock lacks
    env.write_text(text)
    f = check_fresh([env], lockfile, platforms=["linux-64", "linux-aarch64"])
    assert not f.fresh and f.stale_platforms == ["linux-aarch64"] and "not locked for linux-aarch64" in f.message


@pytest.mark.slow
def test_verdicts_agree_with_conda_lock_cli(locked: tuple[Path, Path], stub_conda: Path, channel_url: str) -> None:
    env, lockfile = locked
    cwd = env.parent
    original = env.read_text()

    def both(cuda: str | None = None, platforms: list[str] = PLATS) -> tuple[str, str]:
        ours = check_fresh([env], lockfile, platforms=platforms, cuda=cuda)
        theirs = conda_lock_verdict(stub_conda, [env], lockfile, platforms=platforms,
                                    cuda=cuda or "12.6", cwd=cwd)
        return ("fresh" if ours.fresh else "stale"), theirs

    assert both() == ("fresh", "fresh")
    assert both(cuda="11.8") == ("stale", "stale")  # another CUDA assumption changes the hash
    env.write_text(original.replace("  - numpy\n", "  - numpy>=2\n"))
    assert both() == ("stale", "stale")
    env.write_text(original + "# trailing comment\n")
    assert both() == ("fresh", "fresh")
    env.write_text(original)
    # a hand-edited hash: the fingerprint no longer matches, conda-lock's comparison decides
    text = lockfile.read_text()
    h = re.search(r"linux-64: ([0-9a-f]{64})", text).group(1)
    lockfile.write_text(text.replace(h, "deadbeef" * 8, 1))
    assert both(platforms=["linux-64"]) == ("stale", "stale")
    assert both(platforms=["win-64"]) == ("fresh", "fresh")


_CHANNELS = ["conda-forge", "pytorch", "nvidia", "nodefaults", "file:///srv/channels/internal",
             "https://repo.example.com/t/${REPO_TOKEN}/private", "conda-forge/label/rc"]
_CONDA = ["python=3.11", "python >=3.10,<3.13", "pytorch=2.5=*cuda*", "pytorch-cuda=12.4", "numpy<2",
          "pytorch::torchvision", "cuda-version 12.6.*", "scipy ~=1.13", "mkl !=2024.1", "nvidia::cuda-nvcc",
          "pip", "jupyterlab", "libblas=*=*mkl", "pytorch>=2.4 *cuda12*", "cudnn 9.*"]
_PIP = ["requests>=2", "egdemo[extra]==1.0", "ray[tune]>=2.2.0", "win-only; sys_platform == 'win32'",
        "transformers>=4.40,<5", "submitit @ git+https://github.com/facebookincubator/submitit@v1.5.1",
        "torchmetrics==1.4.*", "lightning"]
_SELECTORS = ["", "", "", "  # [linux]", "  # [osx]", "  # [win]", "  # [unix]", "  # [linux64]"]


def _generated_spec(rng: random.Random, channels: list[str] | None = None) -> str:
    lines = []
    if rng.random() < 0.8:
        lines.append(f"name: gen{rng.randrange(1000)}")
    lines.append("channels:")
    lines += [f"  - {c}" for c in channels or rng.sample(_CHANNELS, rng.randint(1, 3))]
    lines.append("dependencies:")
    lines += [f"  - {d}{rng.choice(_SELECTORS)}" for d in rng.sample(_CONDA, rng.randint(1, 7))]
    if rng.random() < 0.5:
        lines.append("  - pip:")
        lines += [f"    - {p}" for p in rng.sample(_PIP, rng.randint(1, 3))]
    if rng.random() < 0.5:
        lines.append("platforms:")
        lines += [f"  - {p}" for p in rng.sample(PLATS + ["linux-aarch64", "osx-64"], rng.randint(1, 3))]
    if rng.random() < 0.2:
        lines.append("category: dev")
    return "\n".join(lines) + "\n"


def _add_dependency(text: str, dep: str) -> str:
    """Insert ``dep`` as the first dependency, in the file's own list indentation."""
    m = re.search(r"^dependencies:[^\n]*\n(?:[ \t]*#[^\n]*\n)*([ \t]*)- ", text, re.M)
    assert m, text
    return text[: m.start(1)] + f"{m.group(1)}- {dep}\n" + text[m.start(1):]


def _write_metadata_only_lock(files: list[Path], lockfile: Path, cuda_key: str | bool) -> dict[str, str]:
    """A lock whose metadata is exactly what `envguard lock` writes (no solve needed for freshness)."""
    from envguard.lock import cuda_record_text
    from envguard.lock.lockfile import cuda_arg, redacted_channels, relative_source
    from envguard.lock.solver import virtual_package_repo
    from envguard.lock.spec import read_spec

    spec = read_spec(files)
    lock_spec = spec.lock_spec()
    vpr = virtual_package_repo(cuda_key)
    content_hash, custom = lock_metadata(files, lock_spec, vpr, cuda_record_text(cuda_arg(cuda_key), vpr))
    lf = build_lockfile(packages=[], lock_spec=lock_spec, channels=redacted_channels(lock_spec.channels),
                        platforms=lock_spec.platforms, content_hash=content_hash,
                        sources=[relative_source(lockfile, f) for f in files], custom=custom)
    write_lock_atomic(lf, lockfile)
    return custom


def _conda_lock_says_fresh(files: list[Path], lockfile: Path, cuda: str | bool | None) -> bool:
    """conda-lock's own decision (the function its CLI uses), computed in-process."""
    from conda_lock.content_hash import backwards_compatible_content_hashes

    from envguard.lock.lockfile import read_lock
    from envguard.lock.solver import virtual_package_repo
    from envguard.lock.spec import conda_lock_spec, read_spec

    lk = read_lock(lockfile)
    plats = read_spec(files).platforms
    lock_spec = conda_lock_spec(files, plats)
    vpr = virtual_package_repo(cuda)
    return all(p in lk.content_hash and lk.content_hash[p] in
               backwards_compatible_content_hashes(lock_spec, vpr, p) for p in plats)


@pytest.mark.slow
def test_fingerprint_verdict_equals_conda_lock_on_many_inputs(tmp_path: Path, realworld: Path) -> None:
    from envguard.errors import UserError
    from envguard.lock.spec import read_spec

    inputs: list[list[Path]] = []
    for f in sorted((realworld / "environment").glob("*.y*ml")):
        try:
            read_spec([f]).lock_spec()
        except UserError:
            continue  # rejected files have no lock to check
        d = tmp_path / f"rw-{len(inputs)}"
        d.mkdir()
        inputs.append([Path(d / f.name)])
        inputs[-1][0].write_bytes(f.read_bytes())
    assert len(inputs) >= 15
    rng = random.Random(20240601)
    for i in range(24):
        d = tmp_path / f"gen-{i}"
        d.mkdir()
        files = [d / "environment.yml"]
        while True:
            files[0].write_text(_generated_spec(rng))
            try:  # some draws drop every dependency on a platform: rejected, draw again
                read_spec(files)
                break
            except UserError as e:
                assert "dropped by a selector" in e.message
        if i % 5 == 0:  # conda-lock merges files whose channel lists agree
            channels = re.findall(r"^  - (\S+)$", files[0].read_text().split("dependencies:")[0], re.M)
            files.append(d / "extra.yml")
            files[1].write_text(_generated_spec(rng, channels))
        inputs.append(files)

    cudas: list[str | bool] = ["12.4", False, "11.8"]
    fast_seen = slow_seen = 0
    for n, files in enumerate(inputs):
        lockfile = files[0].parent / "conda-lock.yml"
        cuda = cudas[n % len(cudas)]
        custom = _write_metadata_only_lock(files, lockfile, cuda)
        texts = [f.read_text() for f in files]
        eligible = fast_path_possible(texts)
        assert any(k.startswith(META_FINGERPRINT) for k in custom) == eligible
        fresh = check_fresh(files, lockfile)
        assert fresh.fresh, (files, fresh.message)
        assert fresh.fast == eligible, files
        assert _conda_lock_says_fresh(files, lockfile, cuda)
        fast_seen += eligible
        slow_seen += not eligible

        # a change conda-lock's hash sees: a new dependency
        files[0].write_text(_add_dependency(texts[0], "zlib >=1.3"))
        stale = check_fresh(files, lockfile)
        assert not stale.fresh and not _conda_lock_says_fresh(files, lockfile, cuda), files
        # a change it does not see: whitespace and comments (fingerprint misses, conda-lock decides: fresh)
        files[0].write_text("# edited\n" + texts[0] + "\n\n")
        again = check_fresh(files, lockfile)
        assert again.fresh and not again.fast and _conda_lock_says_fresh(files, lockfile, cuda), files
    assert fast_seen >= 10 and slow_seen >= 5


def test_literal_credentials_take_the_exact_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """conda-lock swaps a literal token for a matching environment variable: the same bytes may hash
    differently, so such files never use the fingerprint."""
    env = tmp_path / "environment.yml"
    env.write_text("channels:\n  - https://repo.example.com/t/tk-7788/private\ndependencies:\n  - python\n"
                   "platforms: [linux-64]\n")
    lockfile = tmp_path / "conda-lock.yml"
    monkeypatch.delenv("EG_REPO_TOKEN", raising=False)
    custom = _write_metadata_only_lock([env], lockfile, "12.4")
    assert not any(k.startswith(META_FINGERPRINT) for k in custom)
    assert "tk-7788" not in lockfile.read_text()
    assert check_fresh([env], lockfile).fresh
    monkeypatch.setenv("EG_REPO_TOKEN", "tk-7788")  # now conda-lock would write ${EG_REPO_TOKEN}: new hash
    f = check_fresh([env], lockfile)
    assert not f.fresh and not _conda_lock_says_fresh([env], lockfile, "12.4")


@pytest.mark.slow
def test_repeated_cli_runs_never_crash(locked: tuple[Path, Path]) -> None:
    """py-rattler can crash at interpreter exit; the CLI leaves with os._exit. No run may die by a signal."""
    env, _ = locked
    codes = [envguard(["lock", "--check"], cwd=env.parent).returncode for _ in range(16)]
    codes += [envguard(["lock", "--cuda", "12.6"], cwd=env.parent).returncode for _ in range(4)]
    assert codes == [0] * 20, codes
