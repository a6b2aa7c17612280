"""envguard/settings.py: one registry of every ENVGUARD_* variable, its documentation, and the cache paths."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from envguard import settings

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "envguard"
NAME = re.compile(r"\bENVGUARD_[A-Z0-9_]*[A-Z0-9]\b")
# run by path in another interpreter: they read os.environ themselves (docs/architecture.md, rule 4)
STANDALONE = ("smoke/probe", "tune/probe", "in_process")


def _files() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                  and p.suffix in (".py", ".yaml", ".yml", ".json", ".txt", ".md"))


def _names_in(paths: list[Path]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for p in paths:
        for name in NAME.findall(p.read_text(encoding="utf-8", errors="replace")):
            found.setdefault(name, []).append(str(p.relative_to(REPO)))
    return found


def _standalone(p: Path) -> bool:
    return any(p.relative_to(PACKAGE).as_posix().startswith(d + "/") for d in STANDALONE)


def test_every_envguard_variable_in_the_package_is_registered_and_every_registered_one_is_used() -> None:
    registered = {k.name for k in settings.KNOBS}
    assert len(registered) == len(settings.KNOBS), "a name is registered twice"
    used = _names_in([p for p in _files() if p.name != "settings.py" or p.parent != PACKAGE])
    unregistered = {n: where for n, where in used.items() if n not in registered}
    assert not unregistered, f"declare these in envguard/settings.py (KNOBS): {unregistered}"
    unused = registered - set(used)
    assert not unused, f"registered in envguard/settings.py but named nowhere else in envguard/: {unused}"


def test_the_probes_variables_are_marked_standalone_and_no_other_module_reads_the_environment_for_one() -> None:
    by_name = {k.name: k for k in settings.KNOBS}
    in_probes = _names_in([p for p in _files() if _standalone(p)])
    assert in_probes, "the probes name no ENVGUARD_ variable: has STANDALONE moved?"
    not_marked = sorted(n for n in in_probes if not by_name[n].standalone)
    assert not not_marked, f"read by a standalone probe but not marked so in KNOBS: {not_marked}"
    direct = re.compile(r"""(environ(\.get\(|\[)|getenv\()\s*["']ENVGUARD_""")
    readers = [str(p.relative_to(REPO)) for p in _files()
               if p.suffix == ".py" and not _standalone(p) and direct.search(p.read_text(encoding="utf-8"))]
    assert not readers, f"read ENVGUARD_ variables through envguard.settings, not os.environ: {readers}"


def test_test_hooks_are_honoured_only_with_envguard_testing() -> None:
    hooks = [k for k in settings.KNOBS if k.test_hook and k is not settings.TESTING]
    assert {k.name for k in hooks} >= {"ENVGUARD_TEST_KILL_AT", "ENVGUARD_TEST_PAUSE_AT",
                                       "ENVGUARD_TEST_NO_RENAME_EXCHANGE", "ENVGUARD_PROBE_INJECT"}
    for k in hooks:
        assert settings.test_hook(k, {k.name: "staged"}) == ""
        assert settings.test_hook(k, {k.name: "staged", "ENVGUARD_TESTING": "yes"}) == ""
        assert settings.test_hook(k, {k.name: "staged", "ENVGUARD_TESTING": "1"}) == "staged"
    with pytest.raises(KeyError):  # a user setting is never read as a hook
        settings.test_hook(settings.BACKEND, {"ENVGUARD_TESTING": "1", "ENVGUARD_BACKEND": "conda"})


def test_only_registered_knobs_can_be_read() -> None:
    with pytest.raises(KeyError, match="not a registered setting"):
        settings.text(settings.Knob("ENVGUARD_NOT_A_KNOB", "flag", "off", "x"), {"ENVGUARD_NOT_A_KNOB": "1"})


def test_values_are_read_when_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENVGUARD_MAX_INPUT_BYTES", "1000")
    assert settings.max_input_bytes() == 1000
    for ignored in ("", "0", "-5", "1e6", "lots"):
        monkeypatch.setenv("ENVGUARD_MAX_INPUT_BYTES", ignored)
        assert settings.max_input_bytes() == settings.DEFAULT_MAX_INPUT_BYTES == 32 * 1024 * 1024
    monkeypatch.setenv("ENVGUARD_BACKEND", "  conda ")
    assert settings.backend_name() == "conda"
    monkeypatch.delenv("ENVGUARD_NVIDIA_SMI", raising=False)
    assert settings.nvidia_smi() is None
    monkeypatch.setenv("ENVGUARD_NVIDIA_SMI", "")  # empty is an answer: no driver
    assert settings.nvidia_smi() == ""
    assert settings.path(settings.ENVS_DIR, {"ENVGUARD_ENVS_DIR": "~/envs", "HOME": "/h"}) is not None
    assert settings.path(settings.ENVS_DIR, {"ENVGUARD_ENVS_DIR": ""}) is None


def test_docs_settings_md_shows_the_registry() -> None:
    text = (REPO / "docs" / "settings.md").read_text(encoding="utf-8")
    start = text.index("<!-- generated from envguard/settings.py")
    body = text[text.index("\n", start) + 1:text.index("<!-- end of generated tables -->")]
    assert body == settings.knobs_markdown(), \
        "docs/settings.md is stale: paste the output of `python -m envguard.settings` between its markers"
    for k in settings.KNOBS:
        assert f"| `{k.name}` |" in body


def test_the_test_suites_own_variables_are_listed_in_docs_settings_md() -> None:
    """Variables only tests/ and bench/ read (ENVGUARD_REALWORLD, which every skip for the real-world corpus
    names) are not envguard's settings, so not in KNOBS; docs/settings.md lists them below the generated tables."""
    reads = re.compile(r"""(?:environ(?:\.get\(|\[|\.setdefault\()|getenv\()\s*["'](ENVGUARD_[A-Z0-9_]+)""")
    read_there = {name for top in ("tests", "bench") for p in (REPO / top).rglob("*.py")
                  for name in reads.findall(p.read_text(encoding="utf-8"))}
    own = read_there - {k.name for k in settings.KNOBS}
    assert "ENVGUARD_REALWORLD" in own, own
    text = (REPO / "docs" / "settings.md").read_text(encoding="utf-8")
    listed = text[text.index("<!-- end of generated tables -->"):]
    assert not [n for n in sorted(own) if f"| `{n}` |" not in listed], \
        "list these in docs/settings.md, under \"The test suite's own variables\""


@pytest.mark.parametrize("system, user_cache", [
    ("linux", "xdg"),                        # $XDG_CACHE_HOME
    ("darwin", "home/Library/Caches"),       # as rattler: XDG_CACHE_HOME is not consulted on macOS
    ("win32", "localappdata"),               # %LOCALAPPDATA%
])
def test_repodata_and_packages_share_rattlers_cache_on_every_os(tmp_path: Path, system: str,
                                                                user_cache: str) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path / "xdg"), "LOCALAPPDATA": str(tmp_path / "localappdata")}
    home = tmp_path / "home"
    root = settings.rattler_cache_dir(system, env, home)
    assert root == tmp_path / user_cache / "rattler" / "cache"
    assert settings.package_cache_dir(system, env, home) == root / "pkgs"
    assert settings.prefix_locks_dir(system, env, home) == tmp_path / user_cache / "envguard" / "locks"
    moved = {**env, "RATTLER_CACHE_DIR": str(tmp_path / "rc")}  # rattler's own variable moves both
    assert settings.rattler_cache_dir(system, moved, home) == tmp_path / "rc"
    assert settings.package_cache_dir(system, moved, home) == tmp_path / "rc" / "pkgs"
    own = {**moved, "ENVGUARD_PKGS_DIR": str(tmp_path / "pk")}  # envguard's moves the packages only
    assert settings.package_cache_dir(system, own, home) == tmp_path / "pk"
    assert settings.rattler_cache_dir(system, own, home) == tmp_path / "rc"


def test_defaults_without_variables(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert settings.rattler_cache_dir("linux", {}, home) == home / ".cache" / "rattler" / "cache"
    assert settings.rattler_cache_dir("win32", {}, home) == home / "AppData" / "Local" / "rattler" / "cache"


def test_verbose_is_a_setting_of_the_command_not_a_variable_it_writes(monkeypatch: pytest.MonkeyPatch) -> None:
    import envguard.lint
    from envguard.cli import run
    from envguard.errors import UserError

    seen: list[bool] = []

    def lint_paths(*_a: object, **_k: object) -> None:
        seen.append(settings.verbose())
        raise UserError("stop here", fix="none")

    monkeypatch.delenv("ENVGUARD_VERBOSE", raising=False)
    monkeypatch.setattr(envguard.lint, "lint_paths", lint_paths)
    assert run(["lint", "--verbose", "environment.yml"]) == 2
    assert run(["lint", "environment.yml"]) == 2
    assert seen == [True, False]
    assert not settings.verbose() and "ENVGUARD_VERBOSE" not in os.environ
    monkeypatch.setenv("ENVGUARD_VERBOSE", "1")  # the variable alone still shows native output
    assert settings.verbose()
