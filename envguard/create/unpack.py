"""Cold path, step 1: rattler extracts each archive into a private staging folder, in a child process, in
parallel, under a byte budget.

* **Where**: ``<package cache>/.envguard-unpack-<pid>/<stem>/`` (the folder mode 0700). It is inside the package
  cache so that moving a verified tree into place (envguard.create.stagedtree) is a rename on one file system.
  rattler never reads it (its entries are ``<stem>/`` with a ``<stem>.lock``; a name starting with ``.`` and
  holding a pid is neither), and nothing else in envguard trusts it: what a killed run left is removed by the
  next create (leftovers.remove_dead_owners), the folder of this run when it ends, whatever the outcome.
* **What is read**: the very archive rattler extracts (``download_and_extract`` on its ``file://`` URL: the
  channel's file, or the copy envguard downloaded and hashed over http(s)), and rattler reports the sha256 and
  md5 of exactly the bytes it read. The caller compares that with the lock (exit 3 naming the package): there
  is no second reading of the archive, hence no private copy, no separate hash and no per-entry scan.
* **Why a child process**: rattler's extraction cannot be stopped once started, so a decompression bomb in the
  installer's own process would run until the disk is full. In a child process it is bounded twice: every file
  it writes is capped at ENVGUARD_MAX_EXTRACTED_BYTES (RLIMIT_FSIZE: the kernel stops the write, SIGXFSZ ends
  the child), and the file system's free space may shrink by at most that budget per archive started (polled
  with statvfs ten times a second; past it the child is killed). Either way the refusal (exit 3) names the
  package and its largest entry written so far. Starting it costs ~0.1 s of a cold create (rattler's import).
* **Names**: beside each extraction, rattler lists the archive's entry names (``PackageArchive.list_files``, one
  call per section, names normalised; a ``../`` or absolute name is an error naming it). Defence in depth for
  what leaves no trace in the extracted tree (an entry the extractor skipped, a name twice of which it kept the
  last): envguard.create.stagedtree.check_names. It reads the archive a second time, in rattler's threads.
* **Parallel**: ``download_and_extract`` is async; several archives are in flight at once (``concurrency``),
  and each finished archive is reported at once, so the caller verifies one tree while others are extracted.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from pathlib import Path

#: the staging folder's name in the package cache: ``<tag><pid>``
UNPACK_TAG = ".envguard-unpack-"

#: the child, a file run by path (envguard/in_process/: scripts another interpreter runs)
CHILD_SCRIPT = Path(__file__).resolve().parent.parent / "in_process" / "extract_archives.py"


@dataclass(frozen=True)
class Extracted:
    """One archive's outcome: the digests of the bytes rattler read, or its error."""

    index: int
    sha256: str = ""
    md5: str = ""
    error: str = ""
    #: the names of its tar entries (rattler's list_files: files and links, normalised; None: unreadable)
    pkg_names: list[str] | None = None
    info_names: list[str] | None = None
    names_error: str = ""


class OverBudget(Exception):
    """The extraction was stopped at the byte budget; ``index`` is the job that wrote the most."""

    def __init__(self, index: int, entry: str, written: int) -> None:
        super().__init__(f"job {index}")
        self.index, self.entry, self.written = index, entry, written


class ChildFailed(Exception):
    """The extracting process ended without reporting every archive (crashed, killed)."""


def staging_root(cache_dir: Path) -> Path:
    return cache_dir / f"{UNPACK_TAG}{os.getpid()}"


def _free_bytes(path: Path) -> int:
    try:
        st = os.statvfs(path)
    except OSError:
        return 0
    return st.f_bavail * st.f_frsize


def largest_file(root: Path) -> tuple[str, int]:
    """(path relative to ``root``, bytes on disk) of the largest file under it, no symlink followed, and the
    bytes of all its files together; ("", 0) for nothing."""
    best, best_size, total = "", -1, 0
    stack = [root]
    while stack:
        here = stack.pop()
        try:
            with os.scandir(here) as it:
                for e in it:
                    try:
                        if e.is_dir(follow_symlinks=False):
                            stack.append(Path(e.path))
                            continue
                        size = e.stat(follow_symlinks=False).st_blocks * 512
                    except OSError:
                        continue
                    total += size
                    if size > best_size:
                        best, best_size = os.path.relpath(e.path, root), size
        except OSError:
            continue
    return best, total


def extract_all(jobs: Sequence[tuple[Path, Path]], *, budget: int, concurrency: int = 4,
                poll: float = 0.1) -> Generator[Extracted, None, None]:
    """Extract each (archive, destination) in a child process, and list its entries' names, yielding each
    archive as both are done (in the order they finish). Raises OverBudget or ChildFailed; the child is killed
    whenever the caller stops."""
    if not jobs:
        return
    dests = [Path(d) for _a, d in jobs]
    root = dests[0].parent
    free0 = _free_bytes(root)
    # not a pipe: a chatty child must never block on a full one (closed in the finally below)
    errors = tempfile.TemporaryFile()  # noqa: SIM115
    proc = subprocess.Popen([sys.executable, str(CHILD_SCRIPT)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=errors, close_fds=True)
    events: queue.Queue[dict[str, object] | None] = queue.Queue()

    def reader() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            try:
                events.put(json.loads(line))
            except ValueError:
                continue
        events.put(None)

    thread = threading.Thread(target=reader, daemon=True)
    started: list[int] = []
    pending = set(range(len(jobs)))
    halves: dict[int, dict[str, object]] = {}  # an archive's "done" and "names" events, until both are there
    try:
        assert proc.stdin is not None
        proc.stdin.write(json.dumps({"budget": budget, "concurrency": max(1, concurrency),
                                     "jobs": [[Path(a).resolve().as_uri(), str(d), str(a)] for a, d in jobs]}
                                    ).encode() + b"\n")
        proc.stdin.close()
        thread.start()
        while pending:
            try:
                event = events.get(timeout=poll)
            except queue.Empty:
                event = {}
            if event is None:  # the child is gone with archives unreported
                proc.wait()
                if proc.returncode == -signal.SIGXFSZ:  # a file crossed RLIMIT_FSIZE
                    raise _over(dests, started, pending)
                errors.seek(0)
                err = errors.read(1 << 16).decode("utf-8", "replace")
                raise ChildFailed(" ".join(err.split())[-300:] or f"exit status {proc.returncode}")
            if "start" in event:
                started.append(int(event["start"]))  # type: ignore[call-overload]
            elif "done" in event or "names" in event:
                i = int(event.get("done", event.get("names", -1)))  # type: ignore[call-overload]
                halves.setdefault(i, {}).update(event)
                if "done" in halves[i] and "names" in halves[i]:
                    pending.discard(i)
                    got = halves.pop(i)
                    yield _result(i, got)
            if free0 and free0 - _free_bytes(root) > budget * max(1, len(started)):
                proc.kill()
                proc.wait()
                raise _over(dests, started, pending)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
        errors.close()


def _result(i: int, got: dict[str, object]) -> Extracted:
    """One archive's two events as one result."""
    pkg, info = got.get("pkg"), got.get("info")
    listed = isinstance(pkg, list) and isinstance(info, list)
    return Extracted(i, str(got.get("sha256", "")), str(got.get("md5", "")), str(got.get("error", "")),
                     [str(n) for n in pkg] if listed and isinstance(pkg, list) else None,
                     [str(n) for n in info] if listed and isinstance(info, list) else None,
                     str(got.get("names_error", "")))


def _over(dests: list[Path], started: list[int], pending: set[int]) -> OverBudget:
    """The in-flight archive that wrote the most, and its largest file."""
    best = (-1, "", -1)
    for i in started:
        if i not in pending:
            continue
        entry, total = largest_file(dests[i])
        if total > best[2]:
            best = (i, entry, total)
    if best[0] < 0:
        best = (started[-1] if started else 0, "", 0)
    return OverBudget(*best)
