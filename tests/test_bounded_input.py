"""Bounded work on hostile input (docs/reliability.md): linear-time redaction, YAML read with limits on
nesting and alias expansion (exit 2, ``file:line:col``) and on size, only from regular files, and messages
that cut what they quote.

Failure 4: ``redact()`` took 9.9 s for 80,000 characters, a 100,000-character dependency made
lint and diff take 29 s, a 367-byte alias bomb made diff take 28 s, 2.4 GB and print 312 MB, a FIFO hung
lint, diff and lock --check, a symlink to /dev/zero ate memory without limit.

The bounds below are "does not hang" bounds, generous by two orders of magnitude over what a linear
implementation takes (performance targets live in bench/): every run is a real subprocess with a time
limit and an address-space limit.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.create_fixtures import ENVGUARD

from envguard.redact import redact, shorten_words

MEMORY_LIMIT = 1 << 30  # 1 GiB of address space: the alias bomb took 2.4 GB


def _bounded(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
             seconds: float = 30) -> subprocess.CompletedProcess[str]:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))

    proc = subprocess.run([*ENVGUARD, *args], capture_output=True, text=True, cwd=cwd, timeout=seconds,
                          preexec_fn=limit, env={**os.environ, **(env or {})})
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr[-2000:]
    assert len(proc.stdout) + len(proc.stderr) < 20_000, (len(proc.stdout), len(proc.stderr))
    return proc


@pytest.mark.parametrize("text", [
    "a" * 400_000,  # one long scheme-like run
    "a://" * 100_000,  # a URL start on every fourth character
    "http://x/t/" * 40_000,  # a token path on every eleventh
    "http://" + "u" * 400_000 + " tail",  # a userinfo candidate that never meets its "@"
    "x/t/" * 100_000,
])
def test_redact_is_linear(text: str) -> None:
    started = time.perf_counter()
    redact(text)
    assert time.perf_counter() - started < 2.0  # the quadratic version took minutes on these


def test_long_words_in_messages_are_cut() -> None:
    assert shorten_words("short words stay") == "short words stay"
    cut = shorten_words("spec " + "x" * 100_000 + " is invalid")
    assert cut.startswith("spec " + "x" * 200 + "… (99800 more characters)") and cut.endswith(" is invalid")


@pytest.mark.slow
def test_a_100k_character_dependency(tmp_path: Path) -> None:
    env = tmp_path / "environment.yml"
    env.write_text("name: x\nchannels: [conda-forge]\ndependencies:\n  - python=3.11\n"
                   f"  - numpy >={'1.$' * 33_000}\n  - {'n' * 100_000}\n")
    other = tmp_path / "other.yml"
    other.write_text("name: x\nchannels: [conda-forge]\ndependencies:\n  - python=3.12\n")
    lint = _bounded("lint", str(env))
    assert lint.returncode == 1 and "EG121" in lint.stdout
    assert _bounded("diff", str(env), str(other)).returncode == 1
    locked = _bounded("lock", "-f", str(env), "--lockfile", str(tmp_path / "x.lock"))
    assert locked.returncode == 2 and "more characters" in locked.stderr


BOMB = """a: &a ["x","x","x","x","x","x","x","x","x"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
name: x
dependencies: *i
"""


@pytest.mark.slow
def test_a_yaml_alias_bomb_is_refused_with_its_position(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.yml"
    bomb.write_text(BOMB)  # 367 bytes, 387 million nodes once expanded
    ok = tmp_path / "ok.yml"
    ok.write_text("name: x\nchannels: [conda-forge]\ndependencies:\n  - python=3.11\n")
    where = f"{bomb}:6:8: YAML aliases expand to more than 100000 nodes"
    for argv in (["diff", str(bomb), str(ok)], ["lint", str(bomb)], ["lock", "--check", "-f", str(bomb)],
                 ["check", "-p", sys.prefix, "--no-smoke", "--lockfile", str(bomb)]):
        proc = _bounded(*argv)
        assert proc.returncode == 2 and where in proc.stderr, (argv, proc.stderr)


@pytest.mark.slow
def test_a_few_aliases_are_fine(tmp_path: Path) -> None:
    env = tmp_path / "environment.yml"
    env.write_text("name: x\nchannels: &ch [conda-forge]\ndependencies:\n  - python=3.11\n  - &np numpy\n"
                   "x-extra: [*ch, *np]\n")
    proc = _bounded("diff", str(env), str(env))
    assert proc.returncode == 0, proc.stderr


@pytest.mark.slow
@pytest.mark.parametrize("doc, where", [
    ("a: " + "[" * 5000 + "]" * 5000 + "\n", ":1:"),  # flow nesting
    ("".join(f"{'  ' * i}k{i}:\n" for i in range(150)) + "  " * 150 + "v\n", ":101:"),  # block nesting
    ("x: &r [*r]\n", ":1:8"),  # a recursive alias
])
def test_deep_nesting_and_recursive_aliases_are_refused(tmp_path: Path, doc: str, where: str) -> None:
    f = tmp_path / "deep.yml"
    f.write_text(doc)
    proc = _bounded("diff", str(f), str(f))
    assert proc.returncode == 2 and f"{f}{where}" in proc.stderr, proc.stderr


@pytest.mark.slow
def test_special_files_are_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "environment.yml"
    os.mkfifo(fifo)  # opening it would wait for a writer forever
    zero = tmp_path / "zero.yml"
    zero.symlink_to("/dev/zero")  # reading it never ends
    adir = tmp_path / "adir.yml"
    adir.mkdir()
    for path, what in ((fifo, "is a FIFO (named pipe), not a regular file"),
                       (zero, "is a character device, not a regular file"), (adir, "is a directory")):
        for argv in (["lint", str(path)], ["diff", str(path), str(path)], ["lock", "--check", "-f", str(path)],
                     ["create", "-p", "env", "-f", str(path)], ["create", "-p", "env", "--lockfile", str(path)],
                     ["check", "-p", sys.prefix, "--no-smoke", "--lockfile", str(path)]):
            proc = _bounded(*argv, cwd=tmp_path, seconds=20)
            expected = "not an environment prefix" if path == adir and argv[0] == "diff" else what  # a prefix side
            assert proc.returncode == 2 and expected in proc.stderr, (argv, proc.stderr)  # never "not found"
            assert "run `envguard lock` first" not in proc.stderr, (argv, proc.stderr)  # no lock would help
            assert path.exists() and not (tmp_path / "env").exists()


@pytest.mark.slow
def test_files_over_the_size_limit_and_unreadable_scalars(tmp_path: Path) -> None:
    big = tmp_path / "big.yml"
    big.write_text("name: x\ndependencies:\n" + "  - numpy\n" * 500)
    proc = _bounded("diff", str(big), str(big), env={"ENVGUARD_MAX_INPUT_BYTES": "1000"})
    assert proc.returncode == 2 and "more than envguard reads (1000 bytes)" in proc.stderr
    huge_int = tmp_path / "int.yml"
    huge_int.write_text("name: x\nversion: " + "9" * 100_000 + "\ndependencies: [python]\n")
    proc = _bounded("diff", str(huge_int), str(huge_int))
    assert proc.returncode == 2 and "malformed YAML" in proc.stderr


@pytest.mark.slow
def test_a_malformed_url_is_read_not_crashed_on(tmp_path: Path) -> None:
    """Found by tests/test_fuzz.py: ``https://[x`` in an explicit file made lint an internal error (exit 6)."""
    explicit = tmp_path / "spec.txt"
    explicit.write_text("@EXPLICIT\nhttps://[*b/conda-forge/linux-64/zlib-1.3-h0_0.conda#abc\n"
                        "https://conda.anaconda.org/conda-forge/linux-64/bzip2-1.0.8-h0_0.conda\n")
    lint = _bounded("lint", str(explicit))
    assert lint.returncode in (0, 1) and lint.stderr == "", lint.stderr
    diff = _bounded("diff", str(explicit), str(explicit))
    assert diff.returncode == 0, diff.stderr


@pytest.mark.slow
@pytest.mark.parametrize("doc, where, limit", [
    ("x: [" + "a," * 1_200_000 + "a]\n", ":1:", "1,000,000"),  # a flat flow list: 14 M items ate all memory
    ("name: x\ndependencies: [python]\n" + "".join(f"k{i}: v\n" for i in range(60_000)), ":50000:1", "100,000"),
])
def test_a_yaml_document_of_too_many_nodes_is_refused_early(tmp_path: Path, doc: str, where: str,
                                                             limit: str) -> None:
    """Under the 32 MiB byte limit a YAML file could hold 16 million nodes: a minute and MemoryError, or no
    answer after 5 minutes with positions. Counted on the event stream, stopped at the limit."""
    f = tmp_path / "big.yml"
    f.write_text(doc)
    started = time.perf_counter()
    proc = _bounded("lint", str(f), seconds=60)
    assert proc.returncode == 2 and f"{f}{where}" in proc.stderr, proc.stderr
    assert f"more than {limit} nodes" in proc.stderr and "ENVGUARD_MAX_YAML_NODES" in proc.stderr
    assert time.perf_counter() - started < 30
    raised = _bounded("lint", str(f), env={"ENVGUARD_MAX_YAML_NODES": "100"})
    assert raised.returncode == 2 and "more than 100 nodes" in raised.stderr, raised.stderr  # the setting


def test_node_bound_over_estimates() -> None:
    import yaml

    from envguard.yamlio import node_bound

    for doc in ("a", "{a, b, c}", "- - - -\n", "-\n-\n", "[a, [b, {c: d}]]", "? a\n: b\n", "a: b\nc:\n"):
        nodes = sum(isinstance(ev, (yaml.ScalarEvent, yaml.CollectionStartEvent, yaml.AliasEvent))
                    for ev in yaml.parse(doc))
        assert nodes <= node_bound(doc), doc


@pytest.mark.slow
def test_a_100000_deep_json_input_is_one_line_exit_2(tmp_path: Path) -> None:
    """`diff deep.json deep.json` was `internal error: RecursionError`."""
    f = tmp_path / "deep.json"
    f.write_text('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}")
    proc = _bounded("diff", str(f), str(f))
    assert proc.returncode == 2 and f"{f}: malformed JSON: nested too deeply" in proc.stderr, proc.stderr


@pytest.mark.slow
def test_a_long_flow_list_of_dependencies_is_linted_and_diffed_in_bounded_time(tmp_path: Path) -> None:
    """`dependencies: [a, b, ...]` on one line: each item looked for its source text among every item of its
    line (and ran the selector regex over the whole line), so 10,000 items took 2 minutes to lint; 20,000
    now lint and diff within the guard, and a finding still names its own item."""
    items = [f"pkg{i}" for i in range(20_000)] + ["python=3.12"]
    env = tmp_path / "environment.yml"
    env.write_text("channels: [conda-forge]\ndependencies: [" + ", ".join(items) + "]\n")
    lint = _bounded("lint", str(env), cwd=tmp_path, seconds=60)
    assert lint.returncode in (0, 1), lint.stderr
    assert "EG102" in lint.stdout and "Python 3.12" in lint.stdout, lint.stdout[-2000:]
    diff = _bounded("diff", str(env), str(env), cwd=tmp_path, seconds=60)
    assert diff.returncode == 0, diff.stderr


def test_a_pixi_manifest_of_too_many_values_is_refused(tmp_path: Path) -> None:
    """A pixi.toml under the 32 MiB limit parses in seconds, but lint then worked per dependency: 1.4 million
    of them (30 MB) took four minutes and 1.6 GB, and exited 0. A manifest may hold as many values as an
    environment.yml nodes (a tenth of ENVGUARD_MAX_YAML_NODES): refused in one line, exit 2."""
    f = tmp_path / "pixi.toml"
    f.write_text('[workspace]\nname = "x"\nchannels = ["conda-forge"]\nplatforms = ["linux-64"]\n\n'
                 '[dependencies]\npython = "3.11.*"\n' + "".join(f'pkg-{i} = ">=1"\n' for i in range(100_001)))
    for args in (("lint", str(f)), ("diff", str(f), str(f))):
        proc = _bounded(*args, cwd=tmp_path, seconds=60)
        line = f"{f}: TOML document holds more than 100,000 values"
        assert proc.returncode == 2 and line in proc.stderr and "ENVGUARD_MAX_YAML_NODES" in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    small = tmp_path / "small" / "pixi.toml"
    small.parent.mkdir()
    small.write_text(f.read_text()[:400].rsplit("\n", 1)[0] + "\n")  # a manifest of a few dozen values
    assert _bounded("lint", str(small), cwd=small.parent).returncode in (0, 1)
    raised = _bounded("lint", str(small), cwd=small.parent, env={"ENVGUARD_MAX_YAML_NODES": "100"})
    assert raised.returncode == 2 and "more than 10 values" in raised.stderr, raised.stderr  # the setting
