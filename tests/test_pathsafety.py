"""Nothing outside the prefix: hostile packages are refused before anything is linked, and `check` reports
an environment that already has such paths (docs/reliability.md).

The hostile packages are real archives built with the test channel library (tests/support/channels.py): a payload
with a normal ``paths.json``, then ``paths.json`` rewritten inside the archive (``tamper_package``) and the
channel re-indexed, so the lock records the hostile archive's own sha256: the attack is a package a channel
really serves, not a tampered download. Every create is the real CLI, the real rattler installer.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
from support import channels
from support.create_fixtures import envguard_run, make_lock, siblings, write_env

from envguard import cli
from envguard.pathsafety import Unsafe, allow_list, check_package, path_problem, resolve


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = cli.run(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def _hostile(tmp_path: Path, name: str, files: dict[str, str], *, declare: dict[str, str] | None = None,
             symlinks: dict[str, str] | None = None) -> Path:
    """A channel with package ``name`` 1.0 and a lock for it. ``declare`` renames paths in the archive's
    paths.json (real path -> declared path), keeping their hashes; ``symlinks`` are real archive symlinks."""
    chan = tmp_path / f"chan-{name}"
    pkg = channels.build_package(chan, name, "1.0", noarch="generic", files=files, symlinks=symlinks or {})
    if declare:
        import tarfile

        with tarfile.open(pkg, "r:bz2") as tar:
            doc = json.load(tar.extractfile("info/paths.json"))  # type: ignore[arg-type]
        for entry in doc["paths"]:
            entry["_path"] = declare.get(entry["_path"], entry["_path"])
        channels.tamper_package(pkg, files={"info/paths.json": json.dumps(doc)})
    for sub in channels.SUBDIRS:
        (chan / sub).mkdir(parents=True, exist_ok=True)
    channels.index_channel(chan)
    channels.strip_indexed_timestamps(chan)
    return make_lock(write_env(tmp_path / f"proj-{name}", channels.channel_url(chan), [name]))


@pytest.fixture
def pkgs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ENVGUARD_PKGS_DIR", str(tmp_path / "pkgs"))
    return tmp_path / "pkgs"


# --------------------------------------------------------------------------- the rules themselves


@pytest.mark.parametrize("path, problem", [
    ("share/x.txt", None), ("bin/tool", None), ("a b/c\\d", None),
    ("/etc/passwd", "is absolute"), ("C:/Windows/x", "is absolute"), ("", "is empty"),
    ("share/../../victim.txt", "leaves the prefix ('..')"), ("..", "leaves the prefix ('..')"),
    ("share//x", "is not normalised (empty or '.' part)"), ("./x", "is not normalised (empty or '.' part)"),
    ("share/x/", "is not normalised (empty or '.' part)"), ("a\x00b", "contains a NUL byte"),
])
def test_path_rules(path: str, problem: str | None) -> None:
    assert path_problem(path) == problem
    assert path_problem("a\\..\\..\\x", windows=True) == "contains a backslash (a path separator on Windows)"


def test_symlink_chains_are_followed_not_read_lexically() -> None:
    # x -> . is harmless on its own, and x/y/s -> ../.. looks inside lexically (x/y/../.. = the top), but
    # x/y is really y, so s points at the prefix's parent: only following the links says so.
    links = {"x": ".", "x/y/s": "../.."}
    assert resolve(["x", "y", "..", ".."], {}) == []
    assert resolve(["x", "y"], links) == ["y"]
    found = check_package("evil", ["x/y/s"], {"x/y/s": "../.."}, links)
    assert [u.path for u in found] == ["x/y/s"] and "leads outside" in found[0].reason
    assert check_package("ok", ["lib/libz.so"], {"lib/libz.so": "libz.so.1"}, {"lib/libz.so": "libz.so.1"}) == []
    loop = {"a": "b", "b": "a"}
    assert check_package("loop", ["a"], {"a": "b"}, loop)  # 40 hops: refused, never an endless walk
    # a file written through a directory symlink that leads out is refused with the link
    assert [u.path for u in check_package("d", ["etc/passwd"], {}, {"etc": "/etc"})] == ["etc/passwd"]


def test_allow_list_names_package_and_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENVGUARD_SYMLINK_ALLOW", "tzdata:share/zoneinfo/*, python:bin/python3*")
    allow = allow_list()
    assert allow == [("tzdata", "share/zoneinfo/*"), ("python", "bin/python3*")]
    link = {"share/zoneinfo/UTC": "/usr/share/zoneinfo/UTC"}
    assert check_package("tzdata", list(link), link, link, allow) == []
    assert [u.package for u in check_package("other", list(link), link, link, allow)] == ["other"]
    # a link to an allowed link stays inside; a file *through* an allowed directory link does not
    links = {"bin/python3.11": "/usr/bin/python3.11", "bin/python": "python3.11"}
    ok = frozenset({"bin/python3.11"})
    assert check_package("python", ["bin/python"], {"bin/python": "python3.11"}, links, allow, final_ok=ok) == []
    assert check_package("python", ["bin/python3.11/x"], {}, links, allow, final_ok=ok)


# --------------------------------------------------------------------------- create refuses, nothing touched


@pytest.mark.slow
def test_dotdot_path_deleting_a_file_beside_the_prefix_is_refused(tmp_path: Path, pkgs: Path, capsys) -> None:
    """Failure 1: ``share/../../victim.txt`` made create delete that file (exit 6)."""
    lock = _hostile(tmp_path, "egvictim", {"share/egvictim/a.txt": "a\n"},
                    declare={"share/egvictim/a.txt": "share/../../victim.txt"})
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    target = tmp_path / "env"
    code, _, err = _run(capsys, "create", "-p", str(target), "--lockfile", str(lock), "--no-check")
    assert code == 3, err
    assert "egvictim: unsafe path in the package: share/../../victim.txt leaves the prefix" in err
    assert victim.read_text() == "keep me\n"
    assert not target.exists() and siblings(target) == []


@pytest.mark.slow
def test_dotdot_path_writing_beside_the_prefix_is_refused_and_reported(tmp_path: Path, pkgs: Path,
                                                                       capsys) -> None:
    """``share/../../payload-1.0-h0_0/share/evil.sh`` wrote beside the prefix with exit 0."""
    lock = _hostile(tmp_path, "payload", {"share/evil.sh": "#!/bin/sh\necho pwned\n"},
                    declare={"share/evil.sh": "share/../../payload-1.0-h0_0/share/evil.sh"})
    target = tmp_path / "env"
    code, _, err = _run(capsys, "create", "-p", str(target), "--lockfile", str(lock), "--no-check")
    assert code == 3 and "payload: unsafe path" in err and "share/../../payload-1.0-h0_0/share/evil.sh" in err
    assert not (tmp_path / "payload-1.0-h0_0").exists()
    assert not target.exists() and siblings(target) == []


@pytest.mark.slow
def test_absolute_path_is_one_line_exit_3_no_panic_no_staging(tmp_path: Path, pkgs: Path) -> None:
    """An absolute path panicked rattler's installer: exit 134, a Rust backtrace, the staging dir left."""
    outside = tmp_path / "abs-victim.txt"
    lock = _hostile(tmp_path, "egabs", {"share/egabs/a.txt": "a\n"}, declare={"share/egabs/a.txt": str(outside)})
    target = tmp_path / "env"
    proc = envguard_run("create", "-p", str(target), "--lockfile", str(lock), "--no-check", "--quiet")
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 3, proc.stderr
    assert len(lines) == 1 and lines[0].startswith("error: egabs: unsafe path") and "is absolute" in lines[0]
    assert "panicked" not in proc.stderr and "Traceback" not in proc.stderr
    assert not outside.exists() and not target.exists() and siblings(target) == []


@pytest.mark.slow
def test_symlink_out_of_the_prefix_is_refused_unless_allowed(tmp_path: Path, pkgs: Path, capsys,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """``share/passwd -> /etc/passwd`` was installed and never reported."""
    lock = _hostile(tmp_path, "egpasswd", {"share/egpasswd/readme": "x\n"}, symlinks={"share/passwd": "/etc/passwd"})
    target = tmp_path / "env"
    code, _, err = _run(capsys, "create", "-p", str(target), "--lockfile", str(lock), "--no-check")
    assert code == 3, err
    assert "egpasswd: unsafe path in the package: share/passwd is a symlink to /etc/passwd" in err
    assert "ENVGUARD_SYMLINK_ALLOW=egpasswd:PATH" in err
    assert not target.exists() and siblings(target) == []
    monkeypatch.setenv("ENVGUARD_SYMLINK_ALLOW", "egpasswd:share/passwd")
    code, _, err = _run(capsys, "create", "-p", str(target), "--lockfile", str(lock), "--no-check")
    assert code == 0, err
    assert os.readlink(target / "share" / "passwd") == "/etc/passwd"


@pytest.mark.slow
def test_a_recorded_path_check_stands_only_for_the_same_inputs(tmp_path: Path, pkgs: Path, capsys,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Warm creates of the same lock take the check's recorded answer (one record, however many creates);
    the allow-list is one of its inputs, so taking the exception away refuses the same warm packages again."""
    lock = _hostile(tmp_path, "egpasswd", {"share/egpasswd/readme": "x\n"}, symlinks={"share/passwd": "/etc/passwd"})
    monkeypatch.setenv("ENVGUARD_SYMLINK_ALLOW", "egpasswd:share/passwd")
    records = pkgs / ".envguard-path-checks.json"
    for i in range(4):
        code, _, err = _run(capsys, "create", "-p", str(tmp_path / f"env{i}"), "--lockfile", str(lock), "--no-check")
        assert code == 0, err
        assert records.exists() == (i > 0)  # the first create scanned the archive: nothing recorded
    assert len(json.loads(records.read_text())["passed"]) == 1
    monkeypatch.setenv("ENVGUARD_SYMLINK_ALLOW", "")
    target = tmp_path / "refused"
    code, _, err = _run(capsys, "create", "-p", str(target), "--lockfile", str(lock), "--no-check")
    assert code == 3 and "share/passwd is a symlink to /etc/passwd" in err, err
    assert not target.exists() and len(json.loads(records.read_text())["passed"]) == 1  # a refusal: no record


@pytest.mark.slow
def test_relative_symlink_climbing_out_is_refused(tmp_path: Path, pkgs: Path, capsys) -> None:
    lock = _hostile(tmp_path, "egclimb", {"share/egclimb/a": "a\n"}, symlinks={"share/up": "../../.."})
    code, _, err = _run(capsys, "create", "-p", str(tmp_path / "env"), "--lockfile", str(lock), "--no-check")
    assert code == 3 and "share/up is a symlink to ../../.., which leads outside the prefix" in err


# --------------------------------------------------------------------------- check reports what exists


@pytest.mark.slow
def test_check_reports_paths_and_symlinks_outside_the_prefix(tmp_path: Path, pkgs: Path, capsys) -> None:
    """An environment built by another tool (or an older envguard) with such paths: EG536, exit 3."""
    lock = _hostile(tmp_path, "egfine", {"share/egfine/a.txt": "a\n"})
    env = tmp_path / "env"
    assert _run(capsys, "create", "-p", str(env), "--lockfile", str(lock), "--no-check")[0] == 0
    code, out, _ = _run(capsys, "check", "-p", str(env), "--no-smoke", "--deep", "--format", "json")
    assert code == 0 and not json.loads(out)["files"]["problems"]
    # what the hostile installs left: a record naming a path beside the prefix, a link to /etc/passwd
    record_file = next((env / "conda-meta").glob("egfine-*.json"))
    record = json.loads(record_file.read_text())
    beside = tmp_path / "payload-1.0-h0_0" / "share"
    beside.mkdir(parents=True)
    (beside / "evil.sh").write_text("echo pwned\n")
    data = b"echo pwned\n"
    record["paths_data"]["paths"] += [
        {"_path": "share/../../payload-1.0-h0_0/share/evil.sh", "path_type": "hardlink",
         "sha256": hashlib.sha256(data).hexdigest(), "size_in_bytes": len(data)},
        {"_path": "share/passwd", "path_type": "softlink"},
    ]
    record["files"] += ["share/../../payload-1.0-h0_0/share/evil.sh", "share/passwd"]
    record_file.write_text(json.dumps(record))
    (env / "share" / "passwd").symlink_to("/etc/passwd")
    for flag in ("--files", "--deep"):
        code, out, _ = _run(capsys, "check", "-p", str(env), "--no-smoke", flag, "--format", "json")
        rep = json.loads(out)
        assert code == 3, rep["findings"]
        outside = {p["path"]: p["actual"] for p in rep["files"]["problems"] if p["problem"] == "outside"}
        assert outside == {"share/../../payload-1.0-h0_0/share/evil.sh": "leaves the prefix ('..')",
                           "share/passwd": "a symlink to /etc/passwd, outside the prefix"}
        assert [f["code"] for f in rep["findings"] if f["code"] == "EG536"] == ["EG536"]


def test_unsafe_describe_truncates_what_it_quotes() -> None:
    text = Unsafe("p", "a/" * 5000 + "x", "is absolute").describe()
    assert len(text) < 300 and "more characters" in text


def test_an_installer_panic_is_one_line_and_its_report_held_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 capfd: pytest.CaptureFixture[str]) -> None:
    """Whatever else makes rattler's installer panic: pyo3's PanicException (a BaseException, which
    ``except Exception`` misses) becomes exit 6 with one line; the Rust report on file descriptor 2 is shown
    only with --verbose."""
    import rattler

    from envguard.create.backends import InstallPlan, NullProgress
    from envguard.create.backends.rattler_backend import RattlerBackend
    from envguard.errors import BackendError

    PanicException = type("PanicException", (BaseException,), {})  # pyo3_runtime's, as rattler raises it

    async def panicking_install(*_a: object, **_k: object) -> None:
        os.write(2, b"thread 'tokio-runtime-worker' panicked at src/lib.rs:1:1:\nboom\nnote: run with "
                    b"`RUST_BACKTRACE=1` environment variable to display a backtrace\n")
        raise PanicException("All inserted paths must be relative")

    monkeypatch.setattr(rattler, "install", panicking_install)
    monkeypatch.delenv("ENVGUARD_VERBOSE", raising=False)
    plan = InstallPlan((), tmp_path / "env", tmp_path / "pkgs", channels.host_platform())
    with pytest.raises(BackendError) as err:
        RattlerBackend().install(plan, tmp_path / "staging", NullProgress())
    assert err.value.message.startswith("rattler's installer crashed: All inserted paths must be relative")
    assert "panicked" not in capfd.readouterr().err
    monkeypatch.setenv("ENVGUARD_VERBOSE", "1")
    with pytest.raises(BackendError):
        RattlerBackend().install(plan, tmp_path / "staging", NullProgress())
    assert "panicked at" in capfd.readouterr().err


@pytest.mark.slow
def test_archive_directory_entries_are_not_mistaken_for_unsafe_paths(tmp_path: Path, pkgs: Path, capsys) -> None:
    """Some real archives carry directory entries (``share/egdir/``); the scan reads them without the '/'."""
    import bz2
    import io
    import tarfile

    chan = tmp_path / "chan"
    for sub in channels.SUBDIRS:
        (chan / sub).mkdir(parents=True)
    index = {"name": "egdir", "version": "1.0", "build": "h0_0", "build_number": 0, "depends": [],
             "subdir": "noarch", "noarch": "generic", "timestamp": channels.DEFAULT_TIMESTAMP_MS}
    paths = {"paths": [{"_path": "share/egdir/x", "path_type": "hardlink", "size_in_bytes": 2,
                        "sha256": hashlib.sha256(b"x\n").hexdigest()}], "paths_version": 1}
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in (("info/index.json", json.dumps(index).encode()), ("info/paths.json", json.dumps(paths).encode()),
                           ("share/egdir/", None), ("share/egdir/x", b"x\n")):
            info = tarfile.TarInfo(name)
            if data is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    (chan / "noarch" / "egdir-1.0-h0_0.tar.bz2").write_bytes(bz2.compress(buf.getvalue()))
    channels.index_channel(chan)
    lock = make_lock(write_env(tmp_path / "proj", channels.channel_url(chan), ["egdir"]))
    code, _, err = _run(capsys, "create", "-p", str(tmp_path / "env"), "--lockfile", str(lock), "--no-check")
    assert code == 0, err
    assert (tmp_path / "env" / "share" / "egdir" / "x").read_text() == "x\n"


def test_a_recorded_path_check_counts_only_under_the_same_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rules are an input too: an envguard whose envguard/pathsafety.py differs (another version, a fix)
    never takes an answer recorded under the old rules."""
    from envguard import pathsafety
    from envguard.create import pathchecks

    pkgs = [("sha256:" + "0" * 64, "info-digest", {"share/l": "x"}, {"share/l": "x"})]
    assert pathchecks.rules_digest() == hashlib.sha256(Path(pathsafety.__file__).read_bytes()).hexdigest()
    before = pathchecks.key(False, [], pkgs)
    assert pathchecks.key(False, [], pkgs) == before  # the same inputs, the same key
    monkeypatch.setattr(pathchecks, "_rules", ["rules of another envguard"])
    assert pathchecks.key(False, [], pkgs) != before
