"""Every environment variable envguard reads, and the directories it keeps caches and state in.

Each knob is declared once, in :data:`KNOBS` (name, type, default, one-line doc); docs/settings.md shows the
same table (``python -m envguard.settings`` prints it, tests/test_settings.py checks the file is current).
Values are read from the environment each time they are asked for, never at import: tests, and callers
that change a variable between two calls, see the value of the moment.

Test hooks are honoured only together with ``ENVGUARD_TESTING=1``, so that a stray variable in a user's
shell never kills or alters a real run. The standalone probes (``smoke/probe/``, ``tune/probe/``,
``in_process/``) run by path in another interpreter where envguard is not installed: they read their own
variables from ``os.environ`` themselves, and are declared here as well (``standalone``) so that one table
names every variable.

Directories: rattler's cache (repodata and packages alike) is where rattler itself puts it, so that
envguard, pixi and rattler share one package cache. That is rattler's documented default:
``$RATTLER_CACHE_DIR``, else the ``dirs`` crate's cache directory + ``rattler/cache``. platformdirs is not
used for it on purpose: recent releases honour ``$XDG_CACHE_HOME`` on macOS where the ``dirs`` crate does
not, which would split the cache in two. envguard's own state (prefix locks) lives in the same user cache
directory, from the same function.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Knob:
    """One environment variable: how its value is read, what holds when it is unset, what it does."""

    name: str
    type: str
    default: str
    doc: str
    #: honoured only together with ENVGUARD_TESTING=1 (ENVGUARD_TESTING itself is one too)
    test_hook: bool = False
    #: the standalone probes that read it from os.environ themselves (they cannot import this module)
    standalone: str = ""


#: the largest input file read when ENVGUARD_MAX_INPUT_BYTES is unset; real locks are a few MB
DEFAULT_MAX_INPUT_BYTES = 32 * 1024 * 1024
#: the most bytes downloaded for one package archive when ENVGUARD_MAX_ARTIFACT_BYTES is unset
DEFAULT_MAX_ARTIFACT_BYTES = 4 * 1024 ** 3
#: the most bytes one package archive may declare for its entries when ENVGUARD_MAX_EXTRACTED_BYTES is unset
#: (the largest real conda-forge packages, CUDA libraries and torch, extract to a few GB)
DEFAULT_MAX_EXTRACTED_BYTES = 32 * 1024 ** 3
#: how long `lock` resolves the pip: section of one platform when ENVGUARD_LOCK_PIP_TIMEOUT is unset (seconds)
DEFAULT_LOCK_PIP_TIMEOUT = 600
#: the most bytes the pip: step of `lock` fetches for one file when ENVGUARD_LOCK_PIP_MAX_BYTES is unset: more
#: than any index page or metadata file, less than the multi-GB CUDA wheels an index without PEP 658 metadata
#: files or byte ranges would have read whole for their METADATA
DEFAULT_LOCK_PIP_MAX_BYTES = 512 * 1024 ** 2
#: how long the ranks of a distributed smoke wait for the rendezvous (rank 0's store, then each other) when
#: ENVGUARD_RENDEZVOUS_TIMEOUT is unset (seconds): a node that never comes is named after this, not when the
#: whole smoke test is cut off
DEFAULT_RENDEZVOUS_TIMEOUT = 60
#: the most YAML nodes (scalars, lists, mappings, aliases) one document may hold when ENVGUARD_MAX_YAML_NODES
#: is unset: 15 times the largest real lock seen (a 1.8 MB pixi.lock holds 67,000); parsing one costs a few
#: seconds and a few hundred MB at this cap (docs/reliability.md)
DEFAULT_MAX_YAML_NODES = 1_000_000

ENVS_DIR = Knob("ENVGUARD_ENVS_DIR", "path", "conda's envs directories",
                "where `create -n NAME` puts a new environment, and the first place `-n NAME` is looked up")
PKGS_DIR = Knob("ENVGUARD_PKGS_DIR", "path", "`pkgs` in rattler's cache directory",
                "the package cache `create` downloads to and installs from")
BACKEND = Knob("ENVGUARD_BACKEND", "name", "rattler",
               "the installer when `--backend` is not given: rattler, micromamba, mamba or conda")
SYMLINK_ALLOW = Knob("ENVGUARD_SYMLINK_ALLOW", "PACKAGE:PATH globs", "none",
                     "symlinks pointing outside the prefix that are accepted, comma- or space-separated, "
                     "e.g. `tzdata:share/zoneinfo/*`")
MAX_INPUT_BYTES = Knob("ENVGUARD_MAX_INPUT_BYTES", "integer", f"{DEFAULT_MAX_INPUT_BYTES} (32 MiB)",
                       "the largest YAML, lock or requirements file read; anything but a positive integer "
                       "is ignored")
MAX_ARTIFACT_BYTES = Knob("ENVGUARD_MAX_ARTIFACT_BYTES", "integer",
                          f"{DEFAULT_MAX_ARTIFACT_BYTES} (4 GiB)",
                          "the most bytes `create` downloads for one package archive (the lock says no size); "
                          "a server sending more is refused (exit 3); anything but a positive integer is ignored")
MAX_EXTRACTED_BYTES = Knob("ENVGUARD_MAX_EXTRACTED_BYTES", "integer",
                           f"{DEFAULT_MAX_EXTRACTED_BYTES} (32 GiB)",
                           "the most bytes one package archive may declare (a .conda's zip directory, its zstd "
                           "frames' content sizes and its paths.json sizes, read before anything is extracted) "
                           "and may write when extracted (a .tar.bz2, or a frame that declares nothing, stops "
                           "there): a decompression bomb is refused (exit 3) before it fills the disk; anything "
                           "but a positive integer is ignored")
MAX_YAML_NODES = Knob("ENVGUARD_MAX_YAML_NODES", "integer", f"{DEFAULT_MAX_YAML_NODES:,}",
                      "the most nodes (scalars, lists, mappings, aliases) one YAML document may hold: the "
                      "32 MiB byte limit alone lets a file hold 16 million; environment files and TOML "
                      "manifests (pixi.toml, pyproject.toml) a tenth of it; anything but a positive integer "
                      "is ignored")
NVIDIA_SMI = Knob("ENVGUARD_NVIDIA_SMI", "path", "NVML, else `nvidia-smi` from PATH",
                  "the `nvidia-smi` whose answer is the driver's, NVML not consulted; empty: no driver")
VERBOSE = Knob("ENVGUARD_VERBOSE", "flag (1)", "off",
               "show the installer's native output (a Rust panic report), as `--verbose` does")
CHANNEL_ALIAS = Knob("ENVGUARD_CHANNEL_ALIAS", "URL", "conda's channel_alias (.condarc, CONDA_CHANNEL_ALIAS), "
                     "else https://conda.anaconda.org",
                     "where a channel name points, for envguard only (init, lint, lock, create): overrides conda's "
                     "channel_alias; a mirror, or a `file://` folder holding `<channel>/<subdir>/repodata.json` "
                     "(docs/offline.md)")
OFFLINE = Knob("ENVGUARD_OFFLINE", "flag (1)", "off",
               "`init` never asks the channel: envguard's dated table answers, as when the channel is "
               "unreachable")
LOCK_PIP_TIMEOUT = Knob("ENVGUARD_LOCK_PIP_TIMEOUT", "seconds", str(DEFAULT_LOCK_PIP_TIMEOUT),
                        "the most time `lock` spends resolving the `pip:` section for one platform; then the "
                        "resolver is stopped and the package it was at named (exit 6); anything but a positive "
                        "integer is ignored")
LOCK_PIP_MAX_BYTES = Knob("ENVGUARD_LOCK_PIP_MAX_BYTES", "integer", f"{DEFAULT_LOCK_PIP_MAX_BYTES} (512 MiB)",
                          "the most bytes `lock`'s `pip:` step fetches for one file of an index: a page, a "
                          "metadata file, or a wheel or sdist read whole (where the index serves neither a "
                          "metadata file (PEP 658) nor byte ranges for it, or no hash); a larger one is refused, "
                          "naming the package (exit 6); anything but a positive integer is ignored")
RENDEZVOUS_TIMEOUT = Knob("ENVGUARD_RENDEZVOUS_TIMEOUT", "seconds", str(DEFAULT_RENDEZVOUS_TIMEOUT),
                          "how long each rank of a distributed smoke (`check --distributed`, `smoke "
                          "--distributed`) waits for rank 0's rendezvous and then for the other ranks, at most half "
                          "the smoke timeout; then the ranks or the address that did not answer are named (exit 7); "
                          "anything but a positive number is ignored")
PROBE_EVENTS = Knob("ENVGUARD_PROBE_EVENTS", "path", "none",
                    "the `--events` file a probe hands to its worker processes; envguard clears it for "
                    "the probes it starts", standalone="the smoke and tune probes")
TESTING = Knob("ENVGUARD_TESTING", "flag (1)", "off",
               "turns the other test hooks on; only envguard's own test suite sets it", test_hook=True,
               standalone="the smoke probe")
TEST_KILL_AT = Knob("ENVGUARD_TEST_KILL_AT", "event", "none",
                    "SIGKILL `envguard create` at `link:<n>`, `verified`, `staged`, `swap` or `relock`", test_hook=True)
TEST_PAUSE_AT = Knob("ENVGUARD_TEST_PAUSE_AT", "event:seconds", "none",
                     "sleep there, after saying `envguard: test hook: paused at <event>` on stderr",
                     test_hook=True)
TEST_NO_RENAME_EXCHANGE = Knob("ENVGUARD_TEST_NO_RENAME_EXCHANGE", "flag (1)", "off",
                               "swap environments with two renames instead of an atomic exchange",
                               test_hook=True)
PROBE_INJECT = Knob("ENVGUARD_PROBE_INJECT", "cases, comma-separated", "none",
                    "make the smoke probe's real torch machinery fail the way a broken environment does "
                    "(as `--inject`)", test_hook=True, standalone="the smoke probe")

#: every knob, user settings first, then the test hooks
KNOBS: tuple[Knob, ...] = (ENVS_DIR, PKGS_DIR, BACKEND, SYMLINK_ALLOW, MAX_INPUT_BYTES, MAX_ARTIFACT_BYTES,
                           MAX_EXTRACTED_BYTES, MAX_YAML_NODES,
                           NVIDIA_SMI, VERBOSE,
                           CHANNEL_ALIAS, OFFLINE, LOCK_PIP_TIMEOUT, LOCK_PIP_MAX_BYTES, RENDEZVOUS_TIMEOUT,
                           PROBE_EVENTS, TESTING, TEST_KILL_AT, TEST_PAUSE_AT,
                           TEST_NO_RENAME_EXCHANGE, PROBE_INJECT)
_REGISTERED = frozenset(k.name for k in KNOBS)


# ------------------------------------------------------------------------------------------------ reading


def _environ(env: Mapping[str, str] | None) -> Mapping[str, str]:
    return os.environ if env is None else env


def raw(knob: Knob, env: Mapping[str, str] | None = None) -> str | None:
    """The variable's value as set (None when unset); only a registered knob can be read."""
    if knob.name not in _REGISTERED:
        raise KeyError(f"{knob.name} is not a registered setting (envguard.settings.KNOBS)")
    return _environ(env).get(knob.name)


def text(knob: Knob, env: Mapping[str, str] | None = None) -> str:
    """The value, "" when unset."""
    return raw(knob, env) or ""


def path(knob: Knob, env: Mapping[str, str] | None = None) -> Path | None:
    """The value as a path (``~`` expanded), None when unset or empty."""
    value = text(knob, env)
    return Path(value).expanduser() if value else None


def max_input_bytes(env: Mapping[str, str] | None = None) -> int:
    value = text(MAX_INPUT_BYTES, env)
    return int(value) if value.isdigit() and int(value) > 0 else DEFAULT_MAX_INPUT_BYTES


def max_artifact_bytes(env: Mapping[str, str] | None = None) -> int:
    value = text(MAX_ARTIFACT_BYTES, env)
    return int(value) if value.isdigit() and int(value) > 0 else DEFAULT_MAX_ARTIFACT_BYTES


def max_extracted_bytes(env: Mapping[str, str] | None = None) -> int:
    value = text(MAX_EXTRACTED_BYTES, env)
    return int(value) if value.isdigit() and int(value) > 0 else DEFAULT_MAX_EXTRACTED_BYTES


def max_yaml_nodes(env: Mapping[str, str] | None = None) -> int:
    value = text(MAX_YAML_NODES, env)
    return int(value) if value.isdigit() and int(value) > 0 else DEFAULT_MAX_YAML_NODES


def backend_name(env: Mapping[str, str] | None = None) -> str:
    """The backend ENVGUARD_BACKEND names, "" when none."""
    return text(BACKEND, env).strip()


def nvidia_smi(env: Mapping[str, str] | None = None) -> str | None:
    """None: not set (ask NVML, then PATH); "": there is no driver; else the executable to ask."""
    return raw(NVIDIA_SMI, env)


def lock_pip_timeout(env: Mapping[str, str] | None = None) -> int:
    value = text(LOCK_PIP_TIMEOUT, env)
    return int(value) if value.isdigit() and int(value) > 0 else DEFAULT_LOCK_PIP_TIMEOUT


def lock_pip_max_bytes(env: Mapping[str, str] | None = None) -> int:
    value = text(LOCK_PIP_MAX_BYTES, env)
    return int(value) if value.isdigit() and int(value) > 0 else DEFAULT_LOCK_PIP_MAX_BYTES


def rendezvous_timeout(env: Mapping[str, str] | None = None) -> float:
    value = text(RENDEZVOUS_TIMEOUT, env).strip()
    try:
        seconds = float(value)
    except ValueError:
        return float(DEFAULT_RENDEZVOUS_TIMEOUT)
    return seconds if 0 < seconds < float("inf") else float(DEFAULT_RENDEZVOUS_TIMEOUT)


# Set by the CLI from --verbose for the length of one command: a setting of this process, not a variable
# written into the environment every child would inherit.
_verbose_flag = False


def set_verbose(on: bool) -> None:
    global _verbose_flag  # noqa: PLW0603 - one flag for this process, set once per command
    _verbose_flag = bool(on)


def verbose(env: Mapping[str, str] | None = None) -> bool:
    """Whether --verbose was given to this command, or ENVGUARD_VERBOSE=1 is set."""
    return _verbose_flag or text(VERBOSE, env) == "1"


_offline_flag = False


def set_offline(on: bool) -> None:
    global _offline_flag  # noqa: PLW0603 - one flag for this process, set once per command
    _offline_flag = bool(on)


def solve_offline() -> bool:
    """Whether ``--offline`` was given to this command: solves read repodata from the cache and local channels
    only. (``ENVGUARD_OFFLINE`` is init's: the test suite sets it everywhere, and lock solves against local
    HTTP channels it serves.)"""
    return _offline_flag


def test_hook(knob: Knob, env: Mapping[str, str] | None = None) -> str:
    """The value of a test hook, honoured only together with ``ENVGUARD_TESTING=1``: "" otherwise."""
    if not knob.test_hook or knob is TESTING:
        raise KeyError(f"{knob.name} is not a test hook")
    if text(TESTING, env) != "1":
        return ""
    return text(knob, env)


# ------------------------------------------------------------------------------------------------ directories


def user_cache_dir(system: str | None = None, env: Mapping[str, str] | None = None,
                   home: Path | None = None) -> Path:
    """The user's cache directory as the ``dirs`` crate (and so rattler and pixi) finds it: ~/Library/Caches
    on macOS, %LOCALAPPDATA% on Windows, else $XDG_CACHE_HOME or ~/.cache. ``system`` is a ``sys.platform``
    value (this machine's by default)."""
    system = sys.platform if system is None else system
    env = _environ(env)
    home = Path.home() if home is None else home
    if system == "darwin":
        return home / "Library" / "Caches"
    if system == "win32":
        return Path(env.get("LOCALAPPDATA") or home / "AppData" / "Local")
    return Path(env.get("XDG_CACHE_HOME") or home / ".cache")


def rattler_cache_dir(system: str | None = None, env: Mapping[str, str] | None = None,
                      home: Path | None = None) -> Path:
    """rattler's cache (its repodata beside its packages): $RATTLER_CACHE_DIR, else rattler's default."""
    explicit = _environ(env).get("RATTLER_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    return user_cache_dir(system, env, home) / "rattler" / "cache"


def package_cache_dir(system: str | None = None, env: Mapping[str, str] | None = None,
                      home: Path | None = None) -> Path:
    """The package cache create uses: ENVGUARD_PKGS_DIR, else ``pkgs`` in rattler's cache (shared with pixi)."""
    return path(PKGS_DIR, env) or rattler_cache_dir(system, env, home) / "pkgs"


def state_dir(system: str | None = None, env: Mapping[str, str] | None = None,
              home: Path | None = None) -> Path:
    """envguard's own folder in the user's cache directory."""
    return user_cache_dir(system, env, home) / "envguard"


def prefix_locks_dir(system: str | None = None, env: Mapping[str, str] | None = None,
                     home: Path | None = None) -> Path:
    """Where the lock files of ``envguard create``'s prefixes live."""
    return state_dir(system, env, home) / "locks"


# ------------------------------------------------------------------------------------------------ the table


def _cell(value: str) -> str:
    return value.replace("|", "\\|")


def knobs_markdown() -> str:
    """The two tables of docs/settings.md (settings, then test hooks), from :data:`KNOBS`."""
    out: list[str] = []
    for title, hooks in (("Settings", False), ("Test hooks", True)):
        out += [f"### {title}", "", "| Variable | Type | Default | What it does |", "|---|---|---|---|"]
        for k in (k for k in KNOBS if k.test_hook == hooks):
            doc = k.doc + (f"; read by {k.standalone} directly" if k.standalone else "")
            out.append(f"| `{k.name}` | {_cell(k.type)} | {_cell(k.default)} | {_cell(doc)} |")
        out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    sys.stdout.write(knobs_markdown())
