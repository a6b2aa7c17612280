"""`envguard init` never crashes (issue #35, point 5): every combination is written or refused in one line.

`init --torch 2.12 --cuda 12.9 --platform osx-arm64` against conda-forge's records, or `--platform linux-64`
against a mirror that holds only CPU builds, was `internal error: IndexError` (exit 6): the channel had the
release, no CUDA build of it on any platform asked for, and the refusal being built read "… on  only".

The property: every python × torch × cuda × platform combination the data offers, checked against

* a metadata channel of conda-forge's real records (../shared/realworld, tests/support/metadata_channel.py),
* a partial mirror of it (linux-64 and noarch only, no CUDA build of pytorch), and
* the offline table (no channel asked; and no channel answering),

is either accepted, and then the file init writes locks (`envguard lock` against the same channel), or refused
with exit 2 in one line that says what the channel (or the table) holds instead and what to use. Every
combination goes through `resolve` (the rule init applies, on the route init builds from the same records);
every acceptance, and one refusal of each kind, through `init` itself; the issue's own command lines through
the CLI.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from support.lock_support import envguard

from envguard import channelfacts, compat
from envguard.errors import UserError
from envguard.init import CPU, init, resolve
from envguard.lock import lock
from envguard.lock.lockfile import host_records, read_lock
from envguard.platforms import DEFAULT_PLATFORMS, LOCKABLE_PLATFORMS
from envguard.versions import line_key

CF = compat.CONDA_FORGE
UNREACHABLE = "http://127.0.0.1:9"  # the discard port: nothing answers
# each platform alone, the default set (None) and one pair, so that "some platforms have it" is walked too
PLATFORM_SETS: list[list[str] | None] = [*([p] for p in LOCKABLE_PLATFORMS), None, ["linux-64", "osx-arm64"]]


def _is_cuda_build(build: str) -> bool:
    line = compat.cuda_in_build(build)
    return bool(line) and line != "any"


@pytest.fixture(scope="module")
def cpu_mirror(realdata_channel, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A partial mirror of the real records: linux-64 and noarch only, and no CUDA build of pytorch (a mirror
    that copied the CPU builds, as a site without GPUs would)."""
    root = tmp_path_factory.mktemp("cpu-mirror")
    dropped = 0
    for sub in ("noarch", "linux-64"):
        doc = json.loads((realdata_channel.path / sub / "repodata.json").read_text(encoding="utf-8"))
        for key in ("packages", "packages.conda"):
            kept = {fn: e for fn, e in (doc.get(key) or {}).items()
                    if not (e["name"] == "pytorch" and _is_cuda_build(e["build"]))}
            dropped += len(doc.get(key) or {}) - len(kept)
            doc[key] = kept
        (root / sub).mkdir()
        (root / sub / "repodata.json").write_text(json.dumps(doc), encoding="utf-8")
    assert dropped >= 5  # the sample's linux-64 CUDA builds of pytorch are gone
    return root


def _alias(tmp: Path, channel_dir: Path) -> str:
    """A channel_alias under which "conda-forge" is ``channel_dir``: init and lock read the same records."""
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / CF).symlink_to(channel_dir.resolve(), target_is_directory=True)
    return tmp.as_uri()


@pytest.fixture
def answering_channel(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The channel is asked (conftest keeps every other test offline)."""
    monkeypatch.setenv("ENVGUARD_OFFLINE", "0")
    yield


def _axes(route: compat.Route) -> tuple[list[str], list[str], list[str]]:
    """Python lines, torch releases and CUDA values the data offers, with one out-of-range value on each side."""
    c = compat.load()
    table = c.route(route.name)
    pys = sorted({*c.supported_python, *(p for r in (*route.releases, *table.releases) for p in r.python)},
                 key=line_key)
    major, minor = (int(x) for x in pys[0].split("."))
    pys = [f"{major}.{minor - 1}", *pys, f"{major}.{int(pys[-1].split('.')[1]) + 1}"]
    torches = sorted({r.version for r in (*route.releases, *table.releases)}, key=line_key)
    last = torches[-1].split(".")
    torches.append(f"{last[0]}.{int(last[1]) + 3}")
    lines = sorted({*route.toolkit_lines, *table.toolkit_lines,
                    *(x for r in (*route.releases, *table.releases) for x in r.cuda)}, key=line_key)
    top = lines[-1].split(".")
    cudas = [CPU, *sorted({x.split(".")[0] for x in lines}, key=int), *lines, f"{top[0]}.{int(top[1]) + 1}"]
    return pys, torches, cudas


def _route(channel: str, plats: list[str] | None, url: str | None) -> compat.Route:
    """What init checks against: the channel's records for the platforms asked (as init fetches them), else
    the table."""
    table = compat.load().route(channel)
    if url is None:
        return table
    return channelfacts.fetch(channel, plats or list(DEFAULT_PLATFORMS), url).route(table)


def _assert_one_line_refusal(e: UserError, combo: object) -> None:
    m = e.message
    assert e.exit_code == 2, (combo, m)
    assert "\n" not in m and " on  " not in m and "  " not in m, (combo, m)
    head, sep, fix = m.rpartition("; ")  # what is held; then the fix: a flag to use (or drop)
    assert sep and head and "--" in fix and not fix.rstrip().endswith(("use", "or", "and", ",")), (combo, m)


def _kind(message: str) -> str:
    """A refusal's shape: its words without the versions, platforms and URLs (one init run per shape)."""
    m = re.sub(r"\(file://[^)]*\)|\([a-z]+://[^)]*\)", "(URL)", message)
    m = re.sub(r"|".join(sorted(LOCKABLE_PLATFORMS, key=len, reverse=True)), "P", m)
    return re.sub(r"\d+(\.\d+)*", "N", m)


def _walk(channel: str, url: str | None) -> tuple[dict[tuple, tuple], dict[str, tuple]]:
    """Every combination through resolve: (each accepted combination as resolved -> the first arguments that
    gave it, one refused combination per shape of refusal with its message). What init does after resolve
    depends on the resolved combination alone, so each one is written once."""
    accepted: dict[tuple, tuple] = {}
    refused: dict[str, tuple] = {}
    walked = 0
    for plats in PLATFORM_SETS:
        route = _route(channel, plats, url)
        pys, torches, cudas = _axes(route)
        for py in pys:
            for torch in torches:
                for cuda in cudas:
                    walked += 1
                    combo = (py, torch, cuda, plats)
                    try:
                        got = resolve(py, torch, cuda, channel, plats, route)
                    except UserError as e:
                        _assert_one_line_refusal(e, combo)
                        refused.setdefault(_kind(e.message), (*combo, e.message))
                    else:
                        assert got[4] and set(got[4]) <= set(plats or LOCKABLE_PLATFORMS), (combo, got)
                        accepted.setdefault((got[0], got[1], got[2], tuple(got[4])), combo)
    assert walked >= 2000 and accepted, walked
    return accepted, refused


def _refusals_agree(channel: str, url: str | None, refused: dict[str, tuple], tmp: Path) -> None:
    """init itself gives resolve's refusal, in one line, and writes nothing."""
    for i, (py, torch, cuda, plats, message) in enumerate(refused.values()):
        out = tmp / f"refused-{i}.yml"
        with pytest.raises(UserError) as e:
            init(py, torch, cuda, channel, plats, output=out, channel_url=url)
        assert e.value.message == message, (py, torch, cuda, plats)
        assert not out.exists()


def _locks(env_file: Path, python: str, torch: str, cuda: str, plats: list[str]) -> None:
    """`envguard lock` solves the written file against the channel init read, with the builds it promised."""
    result = lock([env_file])
    assert result.cuda == ("none" if cuda == CPU else cuda), (env_file, result.cuda)
    locked = read_lock(env_file.parent / "conda-lock.yml")
    line = ".".join(torch.split(".")[:2])
    for p in plats:
        rec = next(e for e in host_records(locked, p) if e.name == "pytorch")
        assert rec.version == torch or rec.version.startswith(line + "."), (env_file, p, rec.version)
        assert _is_cuda_build(rec.build) == (cuda != CPU), (env_file, p, rec.build)
        py = next(e for e in host_records(locked, p) if e.name == "python")
        assert py.version.startswith(python + "."), (env_file, p, py.version)
        if cuda != CPU:  # the build the written cuda-version admits: same major, not newer
            built = compat.cuda_in_build(rec.build) or ""
            same_major = built.split(".", maxsplit=1)[0] == cuda.split(".", maxsplit=1)[0]
            assert same_major and line_key(built) <= line_key(cuda), (p, rec.build)


def _records_property(channel_dir: Path, tmp: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[int, int, int]:
    """The walk against one channel: (acceptances, of which written, of which locked)."""
    monkeypatch.setenv("ENVGUARD_CHANNEL_ALIAS", _alias(tmp / "alias", channel_dir))
    url = channelfacts.channel_url(CF)
    assert url == f"{(tmp / 'alias').as_uri()}/{CF}"
    accepted, refused = _walk(CF, url)
    _refusals_agree(CF, None, refused, tmp)  # init finds the channel as the CLI does: through the alias
    written: dict[tuple, Path] = {}
    for i, (py, torch, cuda, plats) in enumerate(accepted.values()):
        out = tmp / f"ok-{i}" / "environment.yml"
        try:
            result = init(py, torch, cuda, CF, plats, output=out)
        except UserError as e:  # the rows exist, the file does not solve there: refused, naming what does
            _assert_one_line_refusal(e, (py, torch, cuda, plats))
            assert "does not solve on" in e.message and not out.exists(), e.message
            continue
        assert result.evidence.startswith(f"checked against {CF} records ({url}"), result.evidence
        spec = yaml.safe_load(out.read_text(encoding="utf-8"))
        assert spec["platforms"] == result.platforms and result.platforms
        written.setdefault((result.python, result.torch, result.cuda, tuple(result.platforms)), out)
    # Lock one file of every kind (platforms, CPU or CUDA, release line), the first in a fixed order: locking
    # every one takes over a minute, and init has solved each already, records only, as lock does.
    classes: set[tuple] = set()
    locked = 0
    for (py, torch, cuda, plats), out in sorted(written.items()):
        kind = (plats, cuda == CPU, ".".join(torch.split(".")[:2]))
        if kind in classes:
            continue
        classes.add(kind)
        _locks(out, py, torch, cuda, list(plats))
        locked += 1
    return len(accepted), len(written), locked


@pytest.mark.slow  # ~20 s: hundreds of records-only solves and dozens of locks
def test_every_combination_against_the_real_records_is_written_and_locks_or_refused_in_one_line(
        realdata_channel, answering_channel: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    accepted, written, locked = _records_property(realdata_channel.path, tmp_path, monkeypatch)
    assert accepted >= 100 and written >= 80 and locked >= 40, (accepted, written, locked)


@pytest.mark.slow  # a few seconds: the same walk against a mirror of CPU builds for one platform
def test_every_combination_against_a_cpu_only_one_platform_mirror_is_written_and_locks_or_refused(
        cpu_mirror: Path, answering_channel: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    accepted, written, locked = _records_property(cpu_mirror, tmp_path, monkeypatch)
    assert accepted >= 10 and written >= 10 and locked >= 5, (accepted, written, locked)
    # nothing but CPU files for linux-64 can come out of it
    url = f"{(tmp_path / 'alias').as_uri()}/{CF}"
    with pytest.raises(UserError) as e:
        init(torch="2.12", cuda="12.9", output="-")
    assert e.value.message == (f"{CF}'s records ({url}) hold pytorch 2.12 for linux-64 only as CPU builds; "
                               "use --cuda cpu")
    assert init(torch="2.12", output="-").platforms == ["linux-64"]


@pytest.mark.slow  # ~10 s: the table's whole space, and one init per acceptance kind
@pytest.mark.parametrize("channel", [CF, compat.PYTORCH])
def test_every_combination_against_the_offline_table_is_written_or_refused_in_one_line(
        channel: str, tmp_path: Path) -> None:
    assert channelfacts.offline()  # conftest: ENVGUARD_OFFLINE=1, the table answers
    accepted, refused = _walk(channel, None)
    _refusals_agree(channel, None, refused, tmp_path)
    for i, (py, torch, cuda, plats) in enumerate(accepted.values()):
        if i % 3:  # every third: the table's files are lint-checked only, and alike
            continue
        result = init(py, torch, cuda, channel, plats, output="-")  # linted before it is printed
        assert result.evidence.startswith("from envguard's table") and result.platforms, result
        assert yaml.safe_load(result.text)["platforms"] == result.platforms


def test_no_channel_answering_gives_the_table_s_answer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENVGUARD_OFFLINE", "0")
    monkeypatch.setenv("ENVGUARD_CHANNEL_ALIAS", UNREACHABLE)
    with pytest.raises(UserError) as e:
        init(torch="2.12", cuda="12.9", platforms=["osx-arm64"], output=tmp_path / "environment.yml")
    assert e.value.exit_code == 2 and e.value.message == (
        "conda-forge builds torch 2.12 for CUDA on linux-64, linux-aarch64 and win-64 only, not osx-arm64; "
        "drop --platform osx-arm64, or use --cuda cpu")
    result = init(torch="2.12", cuda="cpu", platforms=["osx-arm64"], output="-")
    assert result.evidence.startswith("from envguard's table of ") and "did not answer" in result.evidence


# --------------------------------------------------------------------------- the issue's command lines


def _cli_env(tmp: Path, channel_dir: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("ENVGUARD_OFFLINE", "COLUMNS")}
    if channel_dir is None:
        env["ENVGUARD_OFFLINE"] = "1"
    else:
        env["ENVGUARD_CHANNEL_ALIAS"] = _alias(tmp / "alias", channel_dir)
    return env


def _refused_by_cli(args: list[str], cwd: Path, env: dict[str, str]) -> str:
    proc = envguard(["init", *args], cwd=cwd, env=env)
    assert proc.returncode == 2, (args, proc.returncode, proc.stderr)
    assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert not (cwd / "environment.yml").exists()
    return lines[0].removeprefix("error: ")


@pytest.mark.slow  # starts envguard
def test_the_issue_s_mirror_of_cpu_builds(cpu_mirror: Path, tmp_path: Path) -> None:
    """`init --torch 2.12 --cuda 12.9 --platform linux-64` against a mirror holding only CPU builds: one line,
    exit 2; the fix it prints writes a file that locks."""
    env = _cli_env(tmp_path, cpu_mirror)
    project = tmp_path / "project"
    project.mkdir()
    url = f"{(tmp_path / 'alias').as_uri()}/{CF}"
    assert _refused_by_cli(["--torch", "2.12", "--cuda", "12.9", "--platform", "linux-64"], project, env) == (
        f"{CF}'s records ({url}) hold pytorch 2.12 for linux-64 only as CPU builds; use --cuda cpu")
    proc = envguard(["init", "--torch", "2.12", "--cuda", "cpu", "--platform", "linux-64"], cwd=project, env=env)
    assert proc.returncode == 0, proc.stderr
    assert f"checked against {CF} records ({url}, from ENVGUARD_CHANNEL_ALIAS)" in proc.stdout
    proc = envguard(["lock"], cwd=project, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rec = next(e for e in host_records(read_lock(project / "conda-lock.yml"), "linux-64") if e.name == "pytorch")
    assert rec.version.startswith("2.12.") and rec.build.startswith("cpu_"), rec


@pytest.mark.slow  # starts envguard
@pytest.mark.parametrize("cuda", ["12.9", "13.0", "12", "11.8"])
def test_the_issue_s_osx_arm64_with_cuda_against_conda_forge_s_records(realdata_channel, cuda: str,
                                                                       tmp_path: Path) -> None:
    """`init --platform osx-arm64 --cuda anything` against conda-forge's records (no CUDA build on macOS)."""
    env = _cli_env(tmp_path, realdata_channel.path)
    url = f"{(tmp_path / 'alias').as_uri()}/{CF}"
    assert _refused_by_cli(["--torch", "2.12", "--cuda", cuda, "--platform", "osx-arm64"], tmp_path, env) == (
        f"{CF}'s records ({url}) hold pytorch 2.12 for osx-arm64 only as CPU builds; use --cuda cpu")


@pytest.mark.slow  # starts envguard
def test_the_issue_s_osx_arm64_with_cuda_offline(tmp_path: Path) -> None:
    env = _cli_env(tmp_path, None)
    assert _refused_by_cli(["--torch", "2.12", "--cuda", "12.9", "--platform", "osx-arm64"], tmp_path, env) == (
        "conda-forge builds torch 2.12 for CUDA on linux-64, linux-aarch64 and win-64 only, not osx-arm64; "
        "drop --platform osx-arm64, or use --cuda cpu")
