"""Conda platform names and the host's platform."""

from __future__ import annotations

import functools
import os
import platform as _platform
import re
import sys
from collections.abc import Callable, Sequence

# The platforms conda-lock 4.0.3 can lock: its selector table and its default
# virtual packages cover exactly these.
LOCKABLE_PLATFORMS: tuple[str, ...] = (
    "linux-64",
    "linux-aarch64",
    "linux-ppc64le",
    "osx-64",
    "osx-arm64",
    "win-64",
)
# Every conda subdir envguard names; win-arm64 exists but cannot be locked yet.
KNOWN_PLATFORMS: tuple[str, ...] = (*LOCKABLE_PLATFORMS, "win-arm64")
DEFAULT_PLATFORMS = ("linux-64", "osx-arm64", "win-64")


def command_platforms(given: Sequence[str] | None,
                      declared: Sequence[str] | Callable[[], Sequence[str]] = ()) -> list[str]:
    """The platforms a command locks or checks, by conda-lock's rule: the ones given on its command line
    (``--platform``), else the ones its environment files declare (``platforms:``; a callable is asked only
    then, so that files are not parsed for nothing), else :data:`DEFAULT_PLATFORMS`. The one place this order
    is written (lock, lock --check, init, lint, variants)."""
    if given:
        return list(given)
    return list(declared() if callable(declared) else declared) or list(DEFAULT_PLATFORMS)

# conda-build's platform selectors (``# [linux]``) as conda-lock understands them: selector -> platforms.
SELECTOR_PLATFORMS: dict[str, frozenset[str]] = {
    "linux": frozenset({"linux-64", "linux-aarch64", "linux-ppc64le"}),
    "linux64": frozenset({"linux-64"}),
    "aarch64": frozenset({"linux-aarch64"}),
    "ppc64le": frozenset({"linux-ppc64le"}),
    "osx": frozenset({"osx-64", "osx-arm64"}),
    "osx64": frozenset({"osx-64"}),
    "arm64": frozenset({"osx-arm64"}),
    "win": frozenset({"win-64", "win-arm64"}),
    "win64": frozenset({"win-64"}),
    "unix": frozenset({"linux-64", "linux-aarch64", "linux-ppc64le", "osx-64", "osx-arm64"}),
}

# A selector comment the way conda-lock 4.0.3 finds it (src_parser/selectors.py): anywhere after a `#`
# on a line that has text before the `#`, followed by nothing with parentheses. conda-lock keeps such a
# line only on the platforms of a single term of its table: `# [not win]` or `# [linux and x86_64]`
# drops the line on every platform. Lines that start with `#` are comments, never selectors.
_LINE_SELECTOR = re.compile(r"^(.+?)\s*(#.*)\[([^\[\]]+)\][^()]*$")


@functools.lru_cache(maxsize=256)
def line_selector(line: str) -> str | None:
    """The selector written on a source line (``- psutil  # [linux64]`` -> ``linux64``), else None.

    Cached: every item of a flow list (``dependencies: [a, b, ...]``) asks about the same line, and a regex
    over a long line per item made linting such a list quadratic."""
    if "#" not in line or line.lstrip().startswith("#"):
        return None
    m = _LINE_SELECTOR.match(line)
    return m.group(3) if m else None


def selector_platforms(selector: str) -> frozenset[str]:
    """The platforms on which conda-lock keeps a line with this selector (none for anything it cannot read)."""
    return SELECTOR_PLATFORMS.get(selector, frozenset())


def host_platform() -> str:
    machine = _platform.machine().lower()
    if sys.platform.startswith("linux"):
        return {"x86_64": "linux-64", "amd64": "linux-64", "aarch64": "linux-aarch64", "arm64": "linux-aarch64",
                "ppc64le": "linux-ppc64le"}.get(machine, f"linux-{machine}")
    if sys.platform == "darwin":
        return "osx-arm64" if machine in ("arm64", "aarch64") else "osx-64"
    if sys.platform == "win32":
        return "win-arm64" if machine in ("arm64", "aarch64") else "win-64"
    return f"{sys.platform}-{machine}"


def python_in_prefix(prefix: str | os.PathLike[str]) -> str:
    """Path of the interpreter inside a conda prefix or virtualenv."""
    prefix = os.fspath(prefix)
    if sys.platform == "win32":
        return os.path.join(prefix, "python.exe")
    return os.path.join(prefix, "bin", "python")
