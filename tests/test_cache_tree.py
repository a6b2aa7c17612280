"""A package cache entry verified as a tree (envguard.create.cachetree), and ``check --deep`` on the tree of an
installed environment (EG537-EG539).

Real creates (the CLI in-process) from a real ``file://`` channel, a real package cache, then the entry or the
environment edited the way issue 27 found unnoticed: a file replaced by a symlink to another file of the entry,
a symlink re-pointed, a setuid bit or an exec bit added.
"""

from __future__ import annotations

import hashlib
import json
import marshal
import os
import shutil
import stat
from collections.abc import Callable
from pathlib import Path

import pytest
from support import channels
from support.create_fixtures import make_lock, run_cli, siblings, write_env

from envguard.create import cachetree

A = "share/egtree/a.txt"
B = "share/egtree/b.txt"  # the same size as a.txt: a swap that keeps sizes
LINK = "share/egtree/link"
TOOL = "bin/egtreetool"
STEM = "egtree-1.0-h0_0"


@pytest.fixture
def pkgs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ENVGUARD_PKGS_DIR", str(tmp_path / "pkgs"))
    return tmp_path / "pkgs"


@pytest.fixture
def lock(tmp_path: Path) -> Path:
    chan = channels.make_channel(tmp_path / "chan", [
        {"name": "egtree", "version": "1.0", "noarch": "generic",
         "files": {A: "aaaa\n", B: "bbbb\n", TOOL: "#!/bin/sh\necho tree\n"}, "symlinks": {LINK: "a.txt"}},
    ])
    return make_lock(write_env(tmp_path / "proj", channels.channel_url(chan), ["egtree"]))


def _create(capsys: pytest.CaptureFixture[str], target: Path, lock: Path) -> tuple[int, str, str]:
    return run_cli(capsys, "create", "-p", str(target), "--lockfile", str(lock), "--no-check")


def _edit(root: Path, what: str) -> None:
    """Edit the tree under ``root`` (a cache entry or an environment) in place."""
    if what == "file -> symlink":
        os.unlink(root / A)
        os.symlink("b.txt", root / A)
    elif what == "symlink re-pointed":
        os.unlink(root / LINK)
        os.symlink("b.txt", root / LINK)
    elif what == "setuid bit":
        os.chmod(root / TOOL, 0o4755)
    elif what == "exec bit":
        os.chmod(root / A, 0o755)
    elif what == "file -> FIFO":
        os.unlink(root / A)
        os.mkfifo(root / A)
    else:
        raise AssertionError(what)


def _tree_is_the_archives(root: Path) -> None:
    assert not (root / A).is_symlink() and (root / A).read_text() == "aaaa\n"
    assert os.readlink(root / LINK) == "a.txt"
    assert not os.lstat(root / TOOL).st_mode & (stat.S_ISUID | stat.S_ISGID)
    assert stat.S_IMODE(os.lstat(root / A).st_mode) == 0o644


EDITS = ["file -> symlink", "symlink re-pointed", "setuid bit", "exec bit", "file -> FIFO"]
WHY = {"file -> symlink": f"{A} is a symlink to b.txt; the verified archive has a regular file",
       "symlink re-pointed": f"{LINK} points to b.txt; the verified archive's symlink points to a.txt",
       "setuid bit": f"{TOOL} has its setuid bit set (mode 4755)",
       "exec bit": f"{A} has mode 0755; the verified archive's is 0644",
       "file -> FIFO": f"{A} is not a file, symlink or directory; the verified archive has a regular file"}


@pytest.mark.slow
@pytest.mark.parametrize("what", EDITS)
def test_an_entry_edited_in_its_tree_is_extracted_again(tmp_path: Path, lock: Path, pkgs: Path, capsys,
                                                        what: str) -> None:
    """Issue 27, point 3: the next create linked these edits, exit 0."""
    assert _create(capsys, tmp_path / "first", lock)[0] == 0
    entry = pkgs / STEM
    _edit(entry, what)
    target = tmp_path / "second"
    code, _, err = _create(capsys, target, lock)
    assert code == 0, err
    assert f"egtree 1.0: its package cache entry was altered ({WHY[what]}" in err
    assert "extracting it again from the verified archive" in err
    _tree_is_the_archives(target)
    _tree_is_the_archives(entry)  # the cache is whole again
    code, _, err = _create(capsys, tmp_path / "third", lock)  # and stays trusted: no re-extraction
    assert code == 0 and "altered" not in err, err


@pytest.mark.slow
@pytest.mark.parametrize("what", EDITS)
def test_an_entry_edited_in_its_tree_without_its_archive_exits_3(tmp_path: Path, lock: Path, pkgs: Path, capsys,
                                                                 what: str) -> None:
    assert _create(capsys, tmp_path / "first", lock)[0] == 0
    archive = channels.package_path(tmp_path / "chan", "noarch", f"{STEM}.tar.bz2")
    archive.rename(archive.with_suffix(".away"))
    _edit(pkgs / STEM, what)
    target = tmp_path / "second"
    code, _, err = _create(capsys, target, lock)
    assert code == 3, err
    assert f"egtree 1.0: its package cache entry was altered ({WHY[what]}" in err and "is gone" in err
    assert not target.exists() and siblings(target) == []


@pytest.mark.slow
def test_an_unedited_entry_stays_linked_from_the_cache(tmp_path: Path, lock: Path, pkgs: Path, capsys) -> None:
    """The tree check passes an intact entry: the entry is not extracted again (same inode), and an entry whose
    tree record is gone (an older envguard's cache) is extracted again silently, then trusted."""
    assert _create(capsys, tmp_path / "first", lock)[0] == 0
    ino = os.stat(pkgs / STEM / A).st_ino
    code, _, err = _create(capsys, tmp_path / "second", lock)
    assert code == 0 and "altered" not in err, err
    assert os.stat(pkgs / STEM / A).st_ino == ino
    (pkgs / ".envguard-trees.json").unlink()
    code, _, err = _create(capsys, tmp_path / "third", lock)
    assert code == 0 and "altered" not in err, err
    assert json.loads((pkgs / ".envguard-trees.json").read_text())["trees"]


@pytest.mark.slow
@pytest.mark.parametrize("what", ["entry -> FIFO", "entry -> symlink to a copy", "lock file -> FIFO",
                                  "lock file -> directory", "lock file -> symlink to /dev/zero"])
def test_a_cache_entry_or_its_lock_file_of_the_wrong_type_is_cleared(tmp_path: Path, lock: Path, pkgs: Path, capsys,
                                                                    what: str) -> None:
    """rattler's fetch failed on these (exit 6: "Illegal seek", "failed to rename temp directory"); a symlink
    to a copy of the entry elsewhere was checked through the link. Each is cleared, the entry extracted again."""
    assert _create(capsys, tmp_path / "first", lock)[0] == 0
    entry, lockfile = pkgs / STEM, pkgs / f"{STEM}.lock"
    if what.startswith("entry"):
        elsewhere = tmp_path / "elsewhere"
        shutil.copytree(entry, elsewhere, symlinks=True)
        shutil.rmtree(entry)
        if what == "entry -> FIFO":
            os.mkfifo(entry)
        else:
            entry.symlink_to(elsewhere)
        why = f"{STEM} is not a directory"
    else:
        lockfile.unlink()
        if what == "lock file -> FIFO":
            os.mkfifo(lockfile)
        elif what == "lock file -> directory":
            lockfile.mkdir()
        else:
            lockfile.symlink_to("/dev/zero")
        why = f"{STEM}.lock is not a regular file"
    target = tmp_path / "second"
    code, _, err = _create(capsys, target, lock)
    assert code == 0, err
    assert f"egtree 1.0: its package cache entry was altered ({why})" in err
    _tree_is_the_archives(target)
    assert stat.S_ISDIR(os.lstat(entry).st_mode) and stat.S_ISREG(os.lstat(lockfile).st_mode)


def _entry(root: Path) -> list[tuple[str, str]]:
    (root / "share/d").mkdir(parents=True)
    (root / "share/f.txt").write_text("f\n")
    os.chmod(root / "share/f.txt", 0o644)
    os.symlink("f.txt", root / "share/l")
    (root / "L").write_text("a file called L\n")  # a name equal to a symlink identity's tag
    os.chmod(root / "L", 0o755)
    return [("share/d", "directory"), ("share/f.txt", "hardlink"), ("share/l", "softlink"), ("L", "hardlink")]


def test_the_identities_determine_the_tree_and_keep_their_format(tmp_path: Path) -> None:
    """A warm create vouches for an entry from its identities alone (no tree comparison), so every change of
    the tree must change them, a declared directory turned into a FIFO included; and the digests keep the
    format that the records of earlier versions were written in."""
    root = tmp_path / "entry"
    declared = _entry(root)
    found = cachetree.scan_identity(str(root), declared, [])
    assert not isinstance(found, str)
    full = cachetree.expand(found, str(root), declared)
    want_tree = [("d", "share/d"), ("f", "share/f.txt", 0o644), ("l", "share/l", "f.txt"), ("f", "L", 0o755)]
    assert full.tree == hashlib.sha256(repr(want_tree).encode()).hexdigest()
    assert full.kinds == {"share/d": "d", "share/f.txt": "f", "share/l": "l", "L": "f"}
    assert [r for r, _f, _s in full.to_hash] == ["share/f.txt", "L"]
    st, sl, sL = (os.lstat(root / p) for p in ("share/f.txt", "share/l", "L"))
    seen = [("share/f.txt", st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev, 0o644),
            ("L", "share/l", "f.txt", sl.st_ino, sl.st_dev),
            ("L", sL.st_size, sL.st_mtime_ns, sL.st_ino, sL.st_dev, 0o755)]
    assert found.identity == hashlib.sha256(marshal.dumps(seen, 2)).hexdigest()
    assert cachetree.scan_entry(str(root), declared, []) == full

    def identity_after(edit: Callable[[Path], None]) -> str:
        fresh = tmp_path / f"e{len(list(tmp_path.iterdir()))}"
        _entry(fresh)
        before = cachetree.scan_identity(str(fresh), declared, [])
        edit(fresh)
        after = cachetree.scan_identity(str(fresh), declared, [])
        assert not isinstance(before, str) and not isinstance(after, str)
        assert after.identity != before.identity
        return cachetree.expand(after, str(fresh), declared).tree

    def dir_to_fifo(r: Path) -> None:
        (r / "share/d").rmdir()
        os.mkfifo(r / "share/d")

    def dir_to_file(r: Path) -> None:
        (r / "share/d").rmdir()
        (r / "share/d").write_text("")

    def file_to_fifo(r: Path) -> None:
        os.unlink(r / "L")
        os.mkfifo(r / "L")

    for edit in (dir_to_fifo, dir_to_file, file_to_fifo, lambda r: os.chmod(r / "share/f.txt", 0o4644)):
        assert identity_after(edit) != full.tree


# --------------------------------------------------------------------------- check --deep on the environment


@pytest.mark.slow
@pytest.mark.parametrize(("what", "code", "detail"), [
    ("file -> symlink", "EG537", f"{A} (a symlink to b.txt)"),
    ("symlink re-pointed", "EG538", f"{LINK} (points to b.txt)"),
    ("setuid bit", "EG539", f"{TOOL} (setuid (mode 4755))"),
])
def test_check_deep_reports_an_edited_tree(tmp_path: Path, lock: Path, pkgs: Path, capsys, what: str, code: str,
                                           detail: str) -> None:
    """The same edits in an installed environment: check --deep found nothing (b.txt has a.txt's size, a
    symlink's target was never compared, modes never looked at); now an integrity finding, exit 3."""
    env = tmp_path / "env"
    assert _create(capsys, env, lock)[0] == 0
    args = ("check", "-p", str(env), "--deep", "--no-smoke", "--lockfile", str(lock), "--format", "json")
    rc, out, err = run_cli(capsys, *args)
    assert rc == 0, out + err
    _edit(env, what)
    rc, out, err = run_cli(capsys, *args)
    assert rc == 3, out + err
    found = [f for f in json.loads(out)["findings"] if f["code"] == code]
    assert len(found) == 1 and detail in found[0]["message"] and found[0]["package"] == "egtree", out
    assert "--force" in found[0]["fix"]
    # the shallow --files check is unchanged: no hashing, no tree
    rc, out, _ = run_cli(capsys, "check", "-p", str(env), "--files", "--no-smoke", "--lockfile", str(lock),
                      "--format", "json")
    assert code not in {f["code"] for f in json.loads(out)["findings"]}
