"""Stable re-locks: real rattler solves over file:// channels that gain newer builds between two locks.

Each test locks, changes the channel (as conda-forge's weekly rebuilds do) and the spec, and locks again:
an edit must move only what it forces; ``--update NAME`` moves NAME on purpose; the change report says why.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import channels
from support.lock_support import envguard, write_env
from support.relock_channel import PLATS, base_packages, noarch, publish

from envguard.errors import UserError
from envguard.lock import lock
from envguard.lock.lockfile import host_records, pip_records, read_lock

P = channels.PackageSpec


@pytest.fixture
def channel(channel_factory) -> Path:
    return channel_factory(base_packages(), name="cf")


def _versions(lockfile: Path, platform: str = "linux-64") -> dict[str, str]:
    lk = read_lock(lockfile)
    return {e.name: e.version for e in host_records(lk, platform) + pip_records(lk, platform)}


def _change(result, name: str, platform: str = "linux-64"):
    plat = next(p for p in result.changes.platforms if p.platform == platform)
    found = [c for c in plat.changes if c.name == name]
    return found[0] if found else None


def test_an_unrelated_edit_keeps_every_locked_version(tmp_path: Path, channel: Path) -> None:
    """The scenario measured on main: filelock 3.16.1 locked, the channel gains 3.17.0, the user adds `rich`."""
    url = channels.channel_url(channel)
    env = write_env(tmp_path / "environment.yml", channels=[url], deps=["python 3.11.*", "filelock"],
                    platforms=PLATS)
    first = lock([env], cuda=False)
    assert _versions(first.lockfile)["filelock"] == "3.16.1"
    assert all(p.new_platform for p in first.changes.platforms) and first.changes.mode == "new"

    publish(channel, noarch("filelock", "3.17.0"), noarch("pygments", "2.19.1"))
    write_env(env, channels=[url], deps=["python 3.11.*", "filelock", "rich"], platforms=PLATS)
    second = lock([env], cuda=False)
    for p in PLATS:
        v = _versions(second.lockfile, p)
        assert v["filelock"] == "3.16.1", (p, v)  # what nobody asked to move stays
        assert v["rich"] == "13.7.0" and v["pygments"] == "2.19.1"  # new packages come at their newest
        assert _change(second, "filelock", p) is None
    added = {c.name: c for c in next(p for p in second.changes.platforms if p.platform == "linux-64").changes}
    assert set(added) == {"rich", "pygments", "markdown-it-py", "mdurl"}
    assert all(c.change == "added" for c in added.values())
    assert added["rich"].reason.kind == "requested" and added["rich"].reason.line == 7
    assert added["rich"].reason.file == str(env) and "`rich`" in added["rich"].reason.text
    assert added["pygments"].reason.kind == "dependency" and added["pygments"].reason.package == "rich"
    assert added["mdurl"].reason.package == "markdown-it-py"

    # a from-scratch solve of the same spec (what main did) would have moved filelock: the test can fail
    scratch = lock([env], cuda=False, lockfile=tmp_path / "scratch.yml")
    assert _versions(scratch.lockfile)["filelock"] == "3.17.0"

    # --update filelock moves it, and says why; nothing else moves
    upd = lock([env], cuda=False, update=["filelock"])
    assert _versions(upd.lockfile)["filelock"] == "3.17.0"
    for p in PLATS:
        plat = next(x for x in upd.changes.platforms if x.platform == p)
        assert [(c.name, c.change, c.before["version"], c.after["version"], c.reason.kind, c.reason.text)
                for c in plat.changes] == [("filelock", "upgraded", "3.16.1", "3.17.0", "update", "--update filelock")]
    assert upd.changes.mode == "update" and upd.changes.update == ["filelock"]

    again = lock([env], cuda=False)
    assert again.changes.current and not again.changed


def test_removing_a_dependency_drops_only_what_it_alone_needed(tmp_path: Path, channel: Path) -> None:
    url = channels.channel_url(channel)
    env = write_env(tmp_path / "environment.yml", channels=[url], deps=["python 3.11.*", "rich", "ipython"],
                    platforms=["linux-64"])
    lock([env], cuda=False)
    before = _versions(tmp_path / "conda-lock.yml")
    assert {"rich", "markdown-it-py", "mdurl", "pygments", "ipython"} <= set(before)

    publish(channel, noarch("pygments", "2.19.1"), noarch("ipython", "8.30.0", ("python >=3.10", "pygments >=2.4")))
    write_env(env, channels=[url], deps=["python 3.11.*", "ipython"], platforms=["linux-64"])
    result = lock([env], cuda=False)
    after = _versions(result.lockfile)
    assert set(before) - set(after) == {"rich", "markdown-it-py", "mdurl"}
    # pygments is still needed by ipython: it stays, at its locked version, and so does ipython
    assert after["pygments"] == "2.18.0" and after["ipython"] == "8.20.0"
    changes = {c.name: c for c in result.changes.platforms[0].changes}
    assert {n: c.change for n, c in changes.items()} == {"rich": "removed", "markdown-it-py": "removed",
                                                          "mdurl": "removed"}
    assert changes["rich"].reason.kind == "not-requested"
    assert changes["markdown-it-py"].reason.kind == "no-longer-needed" and changes["markdown-it-py"].reason.package == "rich"
    assert changes["mdurl"].reason.package == "markdown-it-py"


def test_a_spec_edit_and_a_forced_dependency_are_explained(tmp_path: Path, channel: Path) -> None:
    url = channels.channel_url(channel)
    env = write_env(tmp_path / "environment.yml", channels=[url], deps=["python 3.11.*", "rich", "filelock"],
                    platforms=["linux-64"])
    lock([env], cuda=False)
    # a newer rich needs a newer pygments than the one locked; filelock also has a newer build now
    publish(channel, noarch("rich", "14.0.0", ("python >=3.8", "pygments >=2.19,<3", "markdown-it-py >=2.2")),
             noarch("pygments", "2.19.1"), noarch("filelock", "3.17.0"))
    result = lock([env], cuda=False, update=["rich"])
    v = _versions(result.lockfile)
    assert (v["rich"], v["pygments"], v["filelock"]) == ("14.0.0", "2.19.1", "3.16.1")
    pyg = _change(result, "pygments")
    assert pyg.change == "upgraded" and pyg.reason.kind == "dependency" and pyg.reason.package == "rich"
    assert "rich 14.0.0 needs pygments >=2.19,<3" in pyg.reason.text
    assert _change(result, "rich").reason.kind == "update"

    # the spec line changes python's line: python moves (spec), the noarch packages stay where they are
    write_env(env, channels=[url], deps=["python 3.12.*", "rich", "filelock"], platforms=["linux-64"])
    result = lock([env], cuda=False)
    py = _change(result, "python")
    assert (py.change, py.before["version"], py.after["version"]) == ("upgraded", "3.11.9", "3.12.1")
    assert py.reason.kind == "spec" and py.reason.spec == "python 3.12.*" and py.reason.line == 5
    assert [c.name for c in result.changes.platforms[0].changes] == ["python"]
    assert _versions(result.lockfile)["filelock"] == "3.16.1"

    # --update-all is today's from-scratch solve
    result = lock([env], cuda=False, update_all=True)
    assert _versions(result.lockfile)["filelock"] == "3.17.0"
    assert _change(result, "filelock").reason.kind == "update-all"


def test_a_new_platform_is_solved_fresh_and_the_rest_kept(tmp_path: Path, channel: Path) -> None:
    url = channels.channel_url(channel)
    env = write_env(tmp_path / "environment.yml", channels=[url], deps=["python 3.11.*", "filelock"],
                    platforms=["linux-64"])
    lock([env], cuda=False)
    publish(channel, noarch("filelock", "3.17.0"))
    write_env(env, channels=[url], deps=["python 3.11.*", "filelock"], platforms=PLATS)
    result = lock([env], cuda=False)
    assert _versions(result.lockfile, "linux-64")["filelock"] == "3.16.1"
    assert _versions(result.lockfile, "osx-arm64")["filelock"] == "3.17.0"
    plats = {p.platform: p for p in result.changes.platforms}
    assert not plats["linux-64"].new_platform and not plats["linux-64"].changes
    assert plats["osx-arm64"].new_platform and plats["osx-arm64"].packages == 2
    assert not result.changes.current


def test_a_vanished_build_moves_and_says_so(tmp_path: Path, channel_factory) -> None:
    ch = channel_factory(base_packages(), name="cf")
    url = channels.channel_url(ch)
    env = write_env(tmp_path / "environment.yml", channels=[url], deps=["python 3.11.*", "filelock"],
                    platforms=["linux-64"])
    lock([env], cuda=False)
    (ch / "noarch" / "filelock-3.16.1-pyhd8ed1ab_0.tar.bz2").unlink()  # yanked from the channel
    publish(ch, noarch("filelock", "3.16.2"))
    result = lock([env], cuda=False)
    c = _change(result, "filelock")
    assert (c.change, c.after["version"], c.reason.kind) == ("upgraded", "3.16.2", "unavailable")


def test_a_republished_file_is_reported(tmp_path: Path, channel_factory) -> None:
    """Same name, version and build, other bytes: the lock takes the channel's file and the report says so."""
    ch = channel_factory(base_packages(), name="cf")
    url = channels.channel_url(ch)
    env = write_env(tmp_path / "environment.yml", channels=[url], deps=["python 3.11.*", "filelock"],
                    platforms=["linux-64"])
    before = {e.name: e.sha256 for e in read_lock(lock([env], cuda=False).lockfile).packages}
    channels.tamper_package(ch / "noarch" / "filelock-3.16.1-pyhd8ed1ab_0.tar.bz2")
    channels.index_channel(ch)
    channels.strip_indexed_timestamps(ch)
    result = lock([env], cuda=False)
    after = {e.name: e.sha256 for e in read_lock(result.lockfile).packages}
    assert after["filelock"] != before["filelock"] and after["python"] == before["python"]
    c = _change(result, "filelock")
    assert (c.change, c.before, c.after) == ("rebuilt", {"version": "3.16.1", "build": "pyhd8ed1ab_0"},
                                             {"version": "3.16.1", "build": "pyhd8ed1ab_0"})
    assert c.reason.kind == "republished" and "another sha256" in c.reason.text


def test_a_pip_package_stays_locked_across_a_conda_edit(tmp_path: Path, channel: Path) -> None:
    root = tmp_path / "pypi"
    index = channels.build_pypi_index(root, [("egdemo-a", "1.0"), ("egdemo-b", "1.0", ["egdemo-a>=1.0"])])
    with channels.serve_directory(index.root) as server:
        url = channels.channel_url(channel)
        extra = f"pip-repositories:\n  - {server.url}/simple\nallow-pypi-requests: false\n"
        env = write_env(tmp_path / "environment.yml", channels=[url], deps=["python 3.11.*", "pip"],
                        pip=["egdemo-b"], platforms=["linux-64"], extra=extra)
        lock([env], cuda=False)
        assert _versions(tmp_path / "conda-lock.yml")["egdemo-a"] == "1.0"

        channels.build_pypi_index(root, [("egdemo-a", "1.0"), ("egdemo-a", "2.0"),
                                         ("egdemo-b", "1.0", ["egdemo-a>=1.0"])])
        write_env(env, channels=[url], deps=["python 3.11.*", "pip", "filelock"], pip=["egdemo-b"],
                  platforms=["linux-64"], extra=extra)
        result = lock([env], cuda=False)
        v = _versions(result.lockfile)
        assert v["egdemo-a"] == "1.0" and v["filelock"] == "3.16.1"
        assert [(c.name, c.manager, c.change) for c in result.changes.platforms[0].changes] == [
            ("filelock", "conda", "added")]

        # the new version is really there: a from-scratch lock takes it, and --update takes it on purpose
        scratch = lock([env], cuda=False, lockfile=tmp_path / "scratch.yml")
        assert _versions(scratch.lockfile)["egdemo-a"] == "2.0"
        result = lock([env], cuda=False, update=["egdemo_a"])
        assert _versions(result.lockfile)["egdemo-a"] == "2.0"
        c = _change(result, "egdemo-a")
        assert (c.manager, c.change, c.reason.kind) == ("pip", "upgraded", "update")


def test_update_names_a_package_of_the_lock(tmp_path: Path, channel: Path) -> None:
    url = channels.channel_url(channel)
    env = write_env(tmp_path / "environment.yml", channels=[url], deps=["python 3.11.*", "filelock"],
                    platforms=["linux-64"])
    lock([env], cuda=False)
    with pytest.raises(UserError) as e:
        lock([env], cuda=False, update=["filelok"])
    assert "filelok" in e.value.message and e.value.key == "--update"
    with pytest.raises(UserError):
        lock([env], cuda=False, update=["filelock"], update_all=True)
    # a name the edited spec asks for is accepted: it is locked at its newest anyway
    write_env(env, channels=[url], deps=["python 3.11.*", "filelock", "rich"], platforms=["linux-64"])
    assert _versions(lock([env], cuda=False, update=["rich"]).lockfile)["rich"] == "13.7.0"
    for args, needle in ((["lock", "--update", "filelok"], "no such package in the lock or the spec"),
                         (["lock", "--check", "--update", "filelock"], "read-only"),
                         (["lock", "--format", "yaml"], "unknown format")):
        proc = envguard(args, cwd=tmp_path)
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        assert needle in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


@pytest.mark.slow  # four `envguard lock` processes, each a real solve
def test_the_cli_prints_the_report_and_says_when_the_lock_is_current(tmp_path: Path, channel: Path) -> None:
    url = channels.channel_url(channel)
    env = write_env(tmp_path / "environment.yml", channels=[url], deps=["python 3.11.*", "filelock"],
                    platforms=PLATS)
    proc = envguard(["lock", "--no-cuda"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "new lock, solved fresh: linux-64 (2 packages), osx-arm64 (2 packages)" in proc.stdout
    proc = envguard(["lock", "--no-cuda"], cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout.splitlines()[-1] == (
        "conda-lock.yml was already current: no package changed on linux-64, osx-arm64"), proc.stdout

    publish(channel, noarch("filelock", "3.17.0"))
    write_env(env, channels=[url], deps=["python 3.11.*", "filelock", "rich"], platforms=PLATS)
    proc = envguard(["lock", "--no-cuda"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    # identical changes on both platforms: one heading for both
    assert "linux-64, osx-arm64: 4 added" in lines, lines
    # the line that asked comes first, then what it brought along
    assert lines[lines.index("linux-64, osx-arm64: 4 added") + 1] == (
        "  + added      rich 13.7.0 pyhd8ed1ab_0: environment.yml:7 asks for `rich`"), lines
    proc = envguard(["lock", "--no-cuda", "--update", "filelock", "--format", "json"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["schema"] == "envguard.lock-changes/1" and doc["mode"] == "update" and not doc["current"]
    change = doc["platforms"][0]["changes"][0]
    assert change["name"] == "filelock" and change["reason"] == {
        "kind": "update", "text": "--update filelock", "package": None, "spec": None, "file": None, "line": None}


@pytest.mark.slow  # `envguard lock`, then `envguard create` builds the environment
def test_create_relocks_a_stale_lock_minimally(tmp_path: Path, channel_factory) -> None:
    """`envguard create` re-locks a stale lock through the lock wing's default: the environment keeps egbase 1.0
    when the spec gains a line and the channel gained egbase 1.1."""
    def generic(name: str, version: str, depends: tuple[str, ...] = ()) -> channels.PackageSpec:
        return P(name, version, "h0_0", depends=list(depends), noarch="generic",
                 files={f"share/{name}/version.txt": version + "\n"})

    ch = channel_factory([generic("egbase", "1.0"), generic("egextra", "1.0", ("egbase >=1.0",))], name="gen")
    url = channels.channel_url(ch)
    proj = tmp_path / "proj"
    env = write_env(proj / "environment.yml", channels=[url], deps=["egbase"], platforms=["linux-64"])
    proc = envguard(["lock", "--no-cuda"], cwd=proj)
    assert proc.returncode == 0, proc.stderr
    publish(ch, generic("egbase", "1.1"))
    write_env(env, channels=[url], deps=["egbase", "egextra"], platforms=["linux-64"])
    target = tmp_path / "env"
    proc = envguard(["create", "-p", str(target), "--no-check"], cwd=proj)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "re-locked it first (1 changed: egextra added)" in proc.stderr, proc.stderr  # what moved, in a word
    assert _versions(proj / "conda-lock.yml") == {"egbase": "1.0", "egextra": "1.0"}
    assert (target / "share" / "egbase" / "version.txt").read_text() == "1.0\n"
    assert (target / "share" / "egextra" / "version.txt").is_file()


def test_real_conda_forge_records_a_year_later(tmp_path: Path, realworld: Path) -> None:
    """Real conda-forge repodata (the py39 subset): lock against the records published before mid-2023, then
    the channel gains a year of real builds and the spec one line. The re-lock keeps every locked record; a
    from-scratch lock of the same spec moves most of them."""
    from support.lock_support import realworld_channel

    channel = realworld_channel(realworld, tmp_path / "channels", "py39")
    full = {sub: (channel / sub / "repodata.json").read_text() for sub in ("linux-64", "noarch")}
    cutoff = 1_685_577_600_000  # 2023-06-01
    for sub, text in full.items():
        doc = json.loads(text)
        for key in ("packages", "packages.conda"):
            doc[key] = {fn: r for fn, r in doc[key].items() if r.get("timestamp", 0) < cutoff}
        (channel / sub / "repodata.json").write_text(json.dumps(doc))
    env = write_env(tmp_path / "proj" / "environment.yml", channels=[channel.as_uri()], deps=["python=3.9", "pip"],
                    platforms=["linux-64"])
    first = lock([env], cuda=False)
    before = _versions(first.lockfile)
    assert len(before) >= 15

    for sub, text in full.items():  # a year of conda-forge builds later
        (channel / sub / "repodata.json").write_text(text)
    write_env(env, channels=[channel.as_uri()], deps=["python=3.9", "pip", "libffi"], platforms=["linux-64"])
    result = lock([env], cuda=False)
    after = _versions(result.lockfile)
    assert {n: v for n, v in after.items() if n in before} == before
    assert [c.change for c in result.changes.platforms[0].changes] in ([], ["added"])  # libffi is python's already
    scratch = lock([env], cuda=False, lockfile=tmp_path / "proj" / "scratch.yml")
    moved = [n for n, v in _versions(scratch.lockfile).items() if before.get(n, v) != v]
    assert len(moved) >= 5 and "python" in moved, moved  # what every re-lock did before
    upd = lock([env], cuda=False, update=["python"])
    py = _change(upd, "python")
    assert py.change == "upgraded" and py.reason.kind == "update"
    assert _versions(upd.lockfile)["python"] == _versions(scratch.lockfile)["python"]


def test_an_unreadable_old_lock_is_solved_from_scratch_and_said_so(tmp_path: Path, channel: Path) -> None:
    url = channels.channel_url(channel)
    env = write_env(tmp_path / "environment.yml", channels=[url], deps=["python 3.11.*", "filelock"],
                    platforms=["linux-64"])
    (tmp_path / "conda-lock.yml").write_text("metadata: {}\npackage: 7\n")  # damaged by hand
    result = lock([env], cuda=False)
    assert result.changes.mode == "new" and "could not be read" in result.changes.note
    assert result.changes.platforms[0].new_platform and _versions(result.lockfile)["filelock"] == "3.16.1"


def test_update_reaches_the_newest_even_when_a_locked_dependency_is_settled_first(tmp_path: Path,
                                                                                  channel_factory) -> None:
    """bb (deep under dd) gets a 2.0 that needs cc >=2; cc is also aa's, and the solver settles aa's first. Only
    unlocking bb would keep bb 1.0 with the locked cc 1.0: `--update bb` must still reach bb 2.0."""
    def g(name: str, version: str, depends: tuple[str, ...] = ()) -> channels.PackageSpec:
        return P(name, version, "h0_0", depends=list(depends), noarch="generic")

    ch = channel_factory([g("aa", "1.0", ("cc",)), g("dd", "1.0", ("ee",)), g("ee", "1.0", ("bb",)),
                          g("bb", "1.0", ("cc",)), g("cc", "1.0")], name="deep")
    env = write_env(tmp_path / "environment.yml", channels=[channels.channel_url(ch)], deps=["aa", "dd"],
                    platforms=["linux-64"])
    lock([env], cuda=False)
    publish(ch, g("bb", "2.0", ("cc >=2",)), g("cc", "2.0"))
    assert lock([env], cuda=False).changes.current  # nothing asked bb to move
    result = lock([env], cuda=False, update=["bb"])
    assert _versions(result.lockfile) == {"aa": "1.0", "dd": "1.0", "ee": "1.0", "bb": "2.0", "cc": "2.0"}
    cc = _change(result, "cc")
    assert cc.reason.kind == "dependency" and cc.reason.package == "bb"


def test_a_changed_cuda_assumption_frees_the_pytorch_build(tmp_path: Path, channel_factory) -> None:
    """The __cuda assumption picks pytorch's build: --no-cuda -> CPU, --cuda 12.6 -> the CUDA build, each way,
    although the locked build would still solve; the report gives the assumption as the reason."""
    torch = ("python >=3.11,<3.12.0a0",)
    ch = channel_factory(base_packages() + [
        P("pytorch", "2.13.0", "cpu_generic_py311_0", depends=list(torch), subdir="linux-64"),
        P("pytorch", "2.13.0", "cuda126_generic_py311_200", build_number=200, subdir="linux-64",
          depends=[*torch, "__cuda"])], name="torch")
    env = write_env(tmp_path / "environment.yml", channels=[channels.channel_url(ch)],
                    deps=["python 3.11.*", "pytorch 2.13.*", "filelock"], platforms=["linux-64"])

    def build() -> str:
        return next(e.build for e in read_lock(tmp_path / "conda-lock.yml").packages if e.name == "pytorch")

    lock([env], cuda="12.6")
    assert build().startswith("cuda126")
    publish(ch, noarch("filelock", "3.17.0"))
    cpu = lock([env], cuda=False)
    assert build().startswith("cpu_") and _versions(cpu.lockfile)["filelock"] == "3.16.1"
    c = _change(cpu, "pytorch")
    assert (c.change, c.reason.kind) == ("rebuilt", "cuda") and "12.6 -> none" in c.reason.text
    gpu = lock([env], cuda="12.6")
    assert build().startswith("cuda126") and _change(gpu, "pytorch").reason.kind == "cuda"
    assert _change(gpu, "filelock") is None
