"""What `envguard create` leaves beside a target, and what that says about the target.

create builds and swaps beside the target ``<dir>/<name>`` (envguard.create.staging); check reads the same
names to tell a finished environment from one a create is building or left unfinished. The names live here,
once, so that both read them alike (``<pid>`` is the creating process):

* ``.<name>.envguard-staging-<pid>``: a relocatable backend builds the new environment here; after an
  atomic exchange it briefly holds the old one. Never the target itself: always safe to delete.
* ``.<name>.envguard-old-<pid>``: an existing environment moved aside (``--force`` without an atomic
  exchange, or an external backend building in place). Put back if the target is missing, else deleted.
* ``.<name>.envguard-building-<pid>``: an external backend is building at the target path itself; if its
  process is gone, the target is half-built and is removed (before any old environment is put back).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

STAGING_TAG = "envguard-staging"
OLD_TAG = "envguard-old"
BUILDING_TAG = "envguard-building"
_LEFTOVER = re.compile(r"^\.(?P<name>.+)\.(?P<tag>" + "|".join(map(re.escape, (STAGING_TAG, OLD_TAG, BUILDING_TAG)))
                       + r")-(?P<pid>\d+)$")


def sibling(target: Path, tag: str, pid: int | None = None) -> Path:
    return target.parent / f".{target.name}.{tag}-{os.getpid() if pid is None else pid}"


def pid_alive(pid: int) -> bool:
    """Whether another process with this PID runs (a PID reused by an unrelated process counts as alive:
    its leftovers are then kept, never wrongly deleted)."""
    if pid == os.getpid():
        return False  # a leftover of an earlier process that had our PID
    if os.name == "nt":
        # os.kill(pid, 0) would terminate the process on Windows. Cleanup runs under the prefix lock,
        # where no other envguard can be building this target, so "gone" is the right answer there.
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    return True


def remove_dead_owners(directory: str | os.PathLike[str], tag: str) -> list[Path]:
    """Remove what killed runs left in ``directory``: entries named ``<tag><pid>`` or ``<tag><pid>-...``
    (downloads in the package cache, smoke work dirs and auth files in TMPDIR) whose process is gone. An
    entry of a running process, or of one whose PID was reused, is kept. Returns what was removed."""
    import shutil

    removed: list[Path] = []
    try:
        names = [n for n in os.listdir(directory) if n.startswith(tag)]
    except OSError:
        return removed
    for name in names:
        pid_text = name[len(tag):].split("-", 1)[0]
        if not pid_text.isdigit() or int(pid_text) == os.getpid() or pid_alive(int(pid_text)):
            continue
        path = Path(directory, name)
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
        removed.append(path)
    return removed


def parse_leftover(name: str) -> tuple[str, str, int] | None:
    """``.<name>.<tag>-<pid>`` -> (target name, tag, pid); None for any other name."""
    m = _LEFTOVER.match(name)
    return (m["name"], m["tag"], int(m["pid"])) if m else None


def leftovers(target: Path) -> list[tuple[str, int, Path]]:
    """(tag, pid, path) of every staging/old/building entry beside ``target``."""
    found: list[tuple[str, int, Path]] = []
    try:
        entries = list(target.parent.iterdir())
    except OSError:
        return found
    for path in entries:
        parsed = parse_leftover(path.name)
        if parsed and parsed[0] == target.name:
            found.append((parsed[1], parsed[2], path))
    return found


@dataclass(frozen=True)
class Interruption:
    """A create in progress (``running``) or interrupted that leaves ``prefix`` unfinished."""

    tag: str
    pid: int
    running: bool
    reason: str


def interruption(prefix: str | os.PathLike[str]) -> Interruption | None:
    """What a create in progress or interrupted did to ``prefix``, else None.

    ``prefix`` may itself be one of the names above (someone pointed a command at a staging directory).
    Otherwise, since rattler builds beside the target, only an external backend's in-place build (marker
    ``.<name>.envguard-building-<pid>``) or an old environment moved aside leave the target itself
    half-built or missing; staging directories never affect the target.
    """
    target = Path(os.path.abspath(prefix))
    parsed = parse_leftover(target.name)
    if parsed is not None:
        _name, tag, pid = parsed
        running = pid_alive(pid)
        what = ("an environment `envguard create` moved aside to replace it" if tag == OLD_TAG else
                "a directory `envguard create` was building")
        return Interruption(tag, pid, running, f"{target.name} is {what}, and process {pid} is " + (
            "still running" if running else "gone (interrupted)"))
    for tag, pid, path in leftovers(target):
        running = pid_alive(pid)
        if tag == BUILDING_TAG:
            return Interruption(tag, pid, running, (
                f"envguard process {pid} is building this environment right now" if running else
                f"half-built by an interrupted `envguard create` (process {pid}); "
                "run `envguard create` again to restore the previous state"))
        if tag == OLD_TAG and not target.exists():
            return Interruption(tag, pid, running, (
                f"envguard process {pid} is replacing this environment right now" if running else
                f"an interrupted `envguard create` (process {pid}) moved the old environment aside to {path}"))
    return None


def interrupt_report(target: Path, finished: bool) -> str:
    """The one line for a Ctrl-C: the state ``target`` is actually in (``finished``: it holds the new
    environment), and what the next run will clean up."""
    beside = leftovers(target)
    cleanup = "; the next `envguard create` removes what this run left beside it" if beside else ""
    if finished:
        return f"interrupted: the new environment is in place at {target}{cleanup}"
    if target.exists():
        return f"interrupted: {target} was left as it was{cleanup}"
    old = [path for tag, _pid, path in beside if tag == OLD_TAG]
    if old:
        return (f"interrupted: the previous environment is at {old[0]}; the next `envguard create` puts it "
                f"back at {target}")
    return f"interrupted: nothing was created at {target}{cleanup}"
