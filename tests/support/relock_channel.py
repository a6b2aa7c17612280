"""A small metadata-only conda channel for the re-lock tests, and a way to publish newer builds into it.

``base_packages()``: python 3.11.9 / 3.12.1 (linux-64, osx-arm64) and noarch python packages with a real
dependency shape: filelock, pip, rich (-> pygments, markdown-it-py -> mdurl), ipython (-> pygments).
``noarch(name, version, depends)`` builds one more such package; ``publish(channel, *pkgs)`` adds builds
and re-indexes, as a weekly conda-forge rebuild does. Nothing here is installable (no python inside):
solve and lock only.
"""

from __future__ import annotations

from pathlib import Path

from support import channels

P = channels.PackageSpec
PLATS = ["linux-64", "osx-arm64"]


def noarch(name: str, version: str, depends: tuple[str, ...] = ("python >=3.8",)) -> channels.PackageSpec:
    return P(name, version, "pyhd8ed1ab_0", depends=list(depends), noarch="python")


def base_packages() -> list[channels.PackageSpec]:
    pkgs = []
    for sub in PLATS:
        pkgs += [P("python", "3.11.9", "h0_0_cpython", subdir=sub), P("python", "3.12.1", "h0_0_cpython", subdir=sub)]
    return [*pkgs,
            noarch("filelock", "3.16.1"),
            noarch("pip", "24.0"),
            noarch("rich", "13.7.0", ("python >=3.8", "pygments >=2.13,<3", "markdown-it-py >=2.2")),
            noarch("markdown-it-py", "3.0.0", ("python >=3.8", "mdurl >=0.1,<1")),
            noarch("mdurl", "0.1.2"),
            noarch("pygments", "2.18.0"),
            noarch("ipython", "8.20.0", ("python >=3.10", "pygments >=2.4"))]


def publish(channel: Path, *pkgs: channels.PackageSpec) -> None:
    """The channel gains newer builds, as a weekly conda-forge rebuild does."""
    for p in pkgs:
        p.build_in(channel)
    channels.index_channel(channel)
    channels.strip_indexed_timestamps(channel)
