"""Property tests (hypothesis) over mutations of the real-world corpus (../shared/realworld): every reader
of every kind, lint, lock's spec validation and the CLI either succeed or fail with one of the documented
errors, never a traceback, within a time bound (``deadline``) and a memory bound (``tracemalloc`` peak).

Deterministic by default (``derandomize``: CI runs the same examples every time, about 20 s in all); set
``ENVGUARD_FUZZ_EXAMPLES=500`` to explore more (then random, and a failure prints the seed to replay).
"""

from __future__ import annotations

import contextlib
import io
import os
import tracemalloc
from datetime import timedelta
from pathlib import Path

import pytest
from support.require import importorskip

hypothesis = importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from envguard.errors import EnvguardError, ExitCode  # noqa: E402

EXPLORE = int(os.environ.get("ENVGUARD_FUZZ_EXAMPLES", "0"))
MEMORY_BOUND = 256 << 20  # bytes allocated at peak while reading one mutated file
HEAD = 24_000  # bytes kept of a large corpus file: its structure, without its bulk
DOCUMENTED = {int(c) for c in ExitCode}


def _settings(examples: int) -> settings:
    return settings(max_examples=EXPLORE or examples, derandomize=not EXPLORE, database=None,
                    deadline=timedelta(seconds=5), print_blob=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.function_scoped_fixture])


def _corpus() -> list[tuple[str, bytes]]:
    from conftest import REALWORLD

    files: list[tuple[str, bytes]] = []
    if not REALWORLD.is_dir():
        return files
    for kind in ("environment", "export", "explicit", "pixi", "conda-lock"):
        for path in sorted((REALWORLD / kind).glob("*")):
            data = path.read_bytes()
            if len(data) > HEAD:
                data = data[: data.rfind(b"\n", 0, HEAD) + 1]
            files.append((f"{kind}/{path.name}", data))
    return files


CORPUS = _corpus()
needs_corpus = pytest.mark.requires(bool(CORPUS), "real-world corpus not found (set ENVGUARD_REALWORLD)")

# What hostile and broken files hold: YAML syntax at odd places, aliases, deep nesting, credentials, huge
# tokens, bytes that are not UTF-8, selectors, pip options.
TOKENS = [b"*a", b"&a ", b"[", b"{", b"]", b"}", b": ", b"- ", b"\t", b"\x00", b"\"", b"'", b"!!python/object ",
          b"%YAML 1.1\n", b"---\n", b"...\n", b"\n  - ", b"::", b"=", b"*", b"@EXPLICIT\n", b"# [linux]",
          b"https://u:p@h/t/tok/", b"${VAR}", b"-r requirements.txt", b"\xff\xfe", b"\r\n", b"#sha256=",
          b"x" * 5000, b"[" * 300, b"&b [*b]", b"version: 1\n", b"pip:\n", b"~=", b"1" * 5000]


@st.composite
def mutated(draw: st.DrawFn) -> tuple[str, bytes]:
    name, data = draw(st.sampled_from(CORPUS))
    buf = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "delete", "duplicate", "insert", "truncate", "swap-lines"]))
        at = draw(st.integers(0, max(0, len(buf) - 1)))
        if op == "flip" and buf:
            buf[at] ^= draw(st.integers(1, 255))
        elif op == "delete":
            del buf[at: at + draw(st.integers(1, 200))]
        elif op == "duplicate":
            buf[at:at] = buf[at: at + draw(st.integers(1, 400))]
        elif op == "insert":
            buf[at:at] = draw(st.sampled_from(TOKENS))
        elif op == "truncate":
            del buf[at:]
        else:
            lines = bytes(buf).split(b"\n")
            i, j = draw(st.integers(0, len(lines) - 1)), draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
            buf = bytearray(b"\n".join(lines))
    return name, bytes(buf)


def _write(tmp: Path, name: str, data: bytes) -> Path:
    path = tmp / name.split("/", 1)[1]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def _bounded(call) -> None:
    """Run ``call``; only envguard's documented errors may escape; allocation peak under MEMORY_BOUND."""
    tracemalloc.start()
    try:
        call()
    except EnvguardError as e:
        assert int(e.exit_code) in DOCUMENTED
        assert "\n" not in e.message.strip() or e.exit_code == ExitCode.BACKEND  # one line (solver text aside)
        assert len(e.message) < 5000
    finally:
        _current, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert peak < MEMORY_BOUND, peak


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


@pytest.mark.slow
@needs_corpus
@_settings(60)
@given(mutated())
def test_every_reader_survives_mutations(scratch: Path, sample: tuple[str, bytes]) -> None:
    """diff's readers, by detection and by every forced kind."""
    from envguard import sources

    path = _write(scratch, *sample)
    for kind in (None, "environment", "conda-lock", "explicit", "export", "pixi"):
        _bounded(lambda: sources.load(str(path), kind=kind))  # noqa: B023 - called in this iteration


@pytest.mark.slow
@needs_corpus
@_settings(40)
@given(mutated())
def test_lint_lock_and_create_readers_survive_mutations(scratch: Path, sample: tuple[str, bytes]) -> None:
    """lint, lock's spec validation and create's reading of a lock (its plan)."""
    from envguard.create import read_plan
    from envguard.lint import lint_paths
    from envguard.lock import read_spec

    path = _write(scratch, *sample)
    _bounded(lambda: lint_paths([path]))
    _bounded(lambda: read_spec([path], ["linux-64"]))
    _bounded(lambda: read_plan(path, "linux-64"))


@needs_corpus
@_settings(15)
@given(mutated(), mutated())
def test_the_cli_survives_mutations(scratch: Path, a: tuple[str, bytes], b: tuple[str, bytes]) -> None:
    """The commands as a user runs them: a documented exit code, no traceback, no internal error."""
    from envguard import cli

    side_a = _write(scratch, "x/a/" + a[0].split("/", 1)[1], a[1])
    side_b = _write(scratch, "x/b/" + b[0].split("/", 1)[1], b[1])
    for argv in (["diff", str(side_a), str(side_b)], ["lint", str(side_a)],
                 ["lock", "--check", "-f", str(side_a), "--lockfile", str(side_b)]):
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = cli.run(argv)
        assert code in DOCUMENTED, (argv, code, err.getvalue()[-1000:])
        assert "Traceback" not in err.getvalue() and "internal error" not in err.getvalue(), err.getvalue()[-2000:]


@_settings(200)
@given(st.text(alphabet=st.sampled_from(list("a:/@t?=&${}_ \"'`()[],;x1\n")), max_size=400))
def test_redact_never_keeps_a_literal_secret(text: str) -> None:
    from envguard.redact import redact

    masked = redact(text)
    assert redact(masked) == masked  # idempotent
    assert "://s3cr3t@" not in redact(text + " https://s3cr3t@h/c")


# The channel configuration (#38): .condarc, a condarc.d file and pixi's config.toml, read as lock and create
# read them. No real-world corpus holds these; the seeds are what conda's and pixi's documentation shows.
CONFIG_SEEDS = [
    (".condarc", b"channels:\n  - conda-forge\nchannel_alias: https://mirror.example/conda/\n"
                 b"custom_channels:\n  pytorch: https://u:p@pt.example/\n  bioconda: file:///srv/bio\n"
                 b"default_channels:\n  - https://repo.example/pkgs/main\n  - pkgs/r\n"
                 b"mirrored_channels:\n  conda-forge: [https://cf.example/conda-forge, oci://ghcr.io/cf]\n"
                 b"custom_multichannels:\n  mine: [a, b]\nproxy_servers:\n  https: http://proxy:3128\n"),
    ("condarc.d/10-site.yml", b"channel_alias: &a https://${USER}:${PW}@alias.example/\n"
                              b"default_channels: [*a, pkgs/main]\nmirrored_channels:\n  pkgs/main: *a\n"),
    ("config.toml", b'default-channels = ["conda-forge"]\n[mirrors]\n"https://conda.anaconda.org/conda-forge" = '
                    b'["https://prefix.dev/conda-forge", "file:///srv/cf"]\n"https://conda.anaconda.org/bioconda" = '
                    b'["https://u:p@m.example/bioconda"]\n[proxy-config]\nhttps = "http://proxy:3128"\n'),
]
CONFIG_TOKENS = [*TOKENS, b"- https://", b"channel_alias: ", b"custom_channels:\n  x: ", b"mirrored_channels:\n  ",
                 b'"https://a.example" = ', b"!!timestamp ", b"!!binary ", b"= [", b"{a = 1}", b"\x1b]0;t\x07"]


@st.composite
def mutated_config(draw: st.DrawFn) -> tuple[str, bytes]:
    name, data = draw(st.sampled_from(CONFIG_SEEDS))
    buf = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "delete", "duplicate", "insert", "truncate"]))
        at = draw(st.integers(0, max(0, len(buf) - 1)))
        if op == "flip" and buf:
            buf[at] ^= draw(st.integers(1, 255))
        elif op == "delete":
            del buf[at: at + draw(st.integers(1, 60))]
        elif op == "duplicate":
            buf[at:at] = buf[at: at + draw(st.integers(1, 200))] * draw(st.integers(1, 50))
        elif op == "insert":
            buf[at:at] = draw(st.sampled_from(CONFIG_TOKENS))
        else:
            del buf[at:]
    return name, bytes(buf)


@_settings(80)
@given(mutated_config(), mutated_config())
def test_the_channel_configuration_survives_mutations(scratch: Path, a: tuple[str, bytes],
                                                      b: tuple[str, bytes]) -> None:
    """Reading the configuration and resolving names through it: a documented one-line error or settings,
    never an internal error (rattler's InvalidUrlError included: every URL it hands on parses), within the
    time and memory bounds."""
    import shutil

    from envguard import condaconfig

    home = scratch / "config-home"
    shutil.rmtree(home, ignore_errors=True)
    places = {".condarc": home / ".condarc", "condarc.d/10-site.yml": home / ".conda" / "condarc.d" / "10.yml",
              "config.toml": home / "project" / ".pixi" / "config.toml"}
    for name, data in (a, b):
        target = places[name] if not places[name].exists() else home / ".config" / "conda" / ".condarc"
        if name == "config.toml" and places[name].exists():
            target = home / ".pixi" / "config.toml"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    (home / "project").mkdir(parents=True, exist_ok=True)

    def read() -> None:
        from rattler import Channel

        cfg = condaconfig.load({"HOME": str(home)}, home, home / "project")
        for name in ("conda-forge", "pytorch", "defaults", "bioconda", "pkgs/main", "https://x.example/c"):
            r = cfg.resolve(name)
            for url in (r.url, *r.mirror_urls):
                Channel(url)  # what lock hands rattler: must parse
        cfg.expand(["conda-forge", "defaults"])
        cfg.mirror_map()
        cfg.with_credentials()

    with contextlib.redirect_stderr(io.StringIO()):
        _bounded(read)


@_settings(150)
@given(st.lists(st.sampled_from([*"ab:/@.-_~$%{}[], \t\n\x1b\x00é", "https://", "file:///", "oci://", "pkgs/main",
                                  "localhost:99999"]), max_size=30).map("".join),
       st.sampled_from(["CONDA_CHANNEL_ALIAS", "CONDA_DEFAULT_CHANNELS", "ENVGUARD_CHANNEL_ALIAS"]))
def test_channel_variables_survive_any_value(scratch: Path, value: str, name: str) -> None:
    """``CONDA_*`` / ``ENVGUARD_CHANNEL_ALIAS`` of any value: settings every URL of which rattler parses, or one
    documented line naming the variable."""
    from envguard import condaconfig

    home = scratch / "variables-home"
    home.mkdir(exist_ok=True)

    def read() -> None:
        from rattler import Channel

        try:
            cfg = condaconfig.load({"HOME": str(home), name: value}, home, home)
        except EnvguardError as e:
            assert name in e.message
            raise
        for channel in ("conda-forge", "defaults"):
            Channel(cfg.resolve(channel).url)
        for url in cfg.expand(["defaults"]):
            Channel(url)

    _bounded(read)
