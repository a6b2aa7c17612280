"""The channel configuration is input like any other (#38 points 1-4): a .condarc, a condarc.d file, pixi's
config.toml or a ``CONDA_*`` variable envguard cannot read, or whose values have the wrong shape, is refused
in one line naming the file, the key and the fix (exit 2), as conda refuses it, never dropped in silence nor
ended in an internal error; the files together are bounded in bytes, nodes and count; credentials in
channel_alias / custom_channels / ``CONDA_*`` URLs and in a mirror's URL work for lock and then for create
(against a real 127.0.0.1 server that requires Basic auth), and the lock holds none of them.

Every run is the real CLI in a subprocess with ``HOME`` / ``CONDARC`` pointed at the hostile files. A good
configuration (``~/.config/conda/.condarc``) routes conda-forge to a local channel, so that code which drops
the hostile file solves (exit 0) instead of refusing: each refusal test fails on such code."""

from __future__ import annotations

import base64
import json
import os
import resource
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from support import channels
from support.create_fixtures import ENVGUARD

HOST = channels.host_platform()
SPEC = (f"name: t\nchannels:\n  - conda-forge\n  - nodefaults\ndependencies:\n  - python=3.11\n  - alpha\n"
        f"platforms:\n  - {HOST}\n")
CANONICAL = "https://conda.anaconda.org/conda-forge"
USER, PASSWORD, TOKEN = "eguser", "s3cr3t-pw-38", "tk-38-s3cr3t"


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding conda-forge/<subdir>/..., as a mirror of several channels does."""
    root = tmp_path_factory.mktemp("mirror")
    channels.make_channel(root / "conda-forge", [
        {"name": "python", "version": "3.11.0", "subdir": HOST, "files": {"share/python.txt": "python"}},
        {"name": "alpha", "version": "1.0", "noarch": "generic", "files": {"share/alpha.txt": "alpha"}},
    ], subdirs=("noarch", HOST))
    return root


@pytest.fixture(scope="module")
def server(root: Path) -> Iterator[channels.HttpServer]:
    """The same channel served on 127.0.0.1 only to whoever sends USER:PASSWORD (Basic auth)."""
    with channels.serve_directory(root, auth=(USER, PASSWORD)) as srv:
        yield srv


@pytest.fixture(scope="module")
def token_server(root: Path) -> Iterator[channels.HttpServer]:
    """The same channel behind Basic auth and an anaconda.org-style /t/<token>/ path."""
    with channels.serve_directory(root, auth=(USER, PASSWORD), token=TOKEN) as srv:
        yield srv


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CONDA", "PIXI", "RATTLER")) and k not in ("XDG_CONFIG_HOME", "ENVGUARD_CHANNEL_ALIAS",
                                                                         "ENVGUARD_OFFLINE")}
    home.mkdir(parents=True, exist_ok=True)
    return {**env, "HOME": str(home), "XDG_CACHE_HOME": str(home / "cache"),
            "ENVGUARD_PKGS_DIR": str(home / "pkgs"), **extra}


MEMORY_LIMIT = 1 << 30  # address space of a run refusing hostile configuration (as tests/test_bounded_input.py)


def envguard(*args: str, env: dict[str, str], cwd: Path, timeout: float = 300,
             bounded: bool = False) -> subprocess.CompletedProcess[str]:
    """The CLI in a subprocess; ``bounded``: under MEMORY_LIMIT of address space, as hostile input must be."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))

    return subprocess.run([*ENVGUARD, *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout,
                          check=False, preexec_fn=limit if bounded else None)


def _project(tmp_path: Path, root: Path) -> tuple[Path, Path]:
    """A project and a home whose good configuration routes conda-forge to the local channel."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "environment.yml").write_text(SPEC)
    home = tmp_path / "home"
    (home / ".config" / "conda").mkdir(parents=True)
    (home / ".config" / "conda" / ".condarc").write_text(f"custom_channels:\n  conda-forge: {root.as_uri()}\n")
    return work, home


def _refused(proc: subprocess.CompletedProcess[str], *words: str) -> str:
    """The one error line of a refusal (exit 2) that holds ``words``; no traceback, no internal error."""
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    assert "internal error" not in out and "Traceback" not in out, out
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "(fix: " in errors[0], out
    for w in words:
        assert w in errors[0], (w, errors[0])
    return errors[0]


# ---------------------------------------------------------------------------------------------- point 1

_BOMB = "a: &a [x,x,x,x,x,x,x,x,x]\n" + "".join(
    f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n" for p, n in zip("abcdef", "bcdefg", strict=False))

UNREADABLE: dict[str, tuple[str | bytes | None, str]] = {
    "malformed line": ("channel_alias: [unclosed\n", "malformed YAML"),
    "alias bomb": (_BOMB, "alias"),
    "deep nesting": ("x: " + "[" * 500 + "]" * 500 + "\n", "nested more than"),
    "non-UTF-8 byte": (b"channel_alias: https://mirror.example/\xff\n", "not UTF-8"),
    "a list, not settings": ("- channel_alias\n- https://mirror.example/\n", "not a mapping"),
    "explicit tag on a non-date": ("channel_alias: !!timestamp next-tuesday\n", "timestamp"),
    "a key written twice": ("channel_alias: https://a.example/\nchannel_alias: https://b.example/\n", "written twice"),
    "33 MiB": (None, "bytes"),
}


@pytest.mark.parametrize("case", list(UNREADABLE))
def test_a_condarc_envguard_cannot_read_is_refused_not_dropped(tmp_path: Path, root: Path, case: str) -> None:
    work, home = _project(tmp_path, root)
    rc = tmp_path / "hostile.condarc"
    content, words = UNREADABLE[case]
    if content is None:
        with rc.open("wb") as fh:  # sparse: 33 MiB without writing them
            fh.write(b"# a comment\n")
            fh.truncate(33 << 20)
    elif isinstance(content, bytes):
        rc.write_bytes(content)
    else:
        rc.write_text(content)
    started = time.monotonic()
    proc = envguard("lock", env=_env(home, CONDARC=str(rc)), cwd=work, timeout=60, bounded=True)
    line = _refused(proc, str(rc), words)
    assert time.monotonic() - started < 60, line
    assert not (work / "conda-lock.yml").exists()


def test_condarc_naming_a_directory_reads_its_yaml_files_as_conda_does(tmp_path: Path, root: Path) -> None:
    """conda's loader reads a directory on its search path as its *.yml / *.yaml files: CONDARC may name one."""
    work, home = _project(tmp_path, root)
    d = tmp_path / "site-config"
    d.mkdir()
    (d / "10-ok.yml").write_text("default_channels: [pkgs/main]\n")
    (d / "20-broken.yaml").write_text("channel_alias: {unclosed\n")
    (d / "ignored.txt").write_text("channel_alias: {unclosed\n")
    _refused(envguard("lock", env=_env(home, CONDARC=str(d)), cwd=work), "20-broken.yaml", "malformed YAML")


def test_a_condarc_path_that_cannot_be_looked_at_is_skipped_as_conda_skips_it(tmp_path: Path, root: Path) -> None:
    """A name too long for the file system (conda's loader skips what it cannot stat): no internal error."""
    work, home = _project(tmp_path, root)
    proc = envguard("lock", env=_env(home, CONDARC=str(tmp_path / ("a" * 5000)), PIXI_HOME=str(tmp_path / ("b" * 5000))),
                    cwd=work)
    assert proc.returncode == 0 and "internal error" not in proc.stderr, proc.stdout + proc.stderr


def test_a_fifo_as_condarc_is_refused_without_waiting(tmp_path: Path, root: Path) -> None:
    work, home = _project(tmp_path, root)
    os.mkfifo(home / ".condarc")
    proc = envguard("lock", env=_env(home), cwd=work, timeout=60)
    _refused(proc, "~/.condarc", "FIFO")


def test_settings_envguard_does_not_apply_are_warned_naming_the_file(tmp_path: Path, root: Path) -> None:
    work, home = _project(tmp_path, root)
    (home / ".condarc").write_text("custom_multichannels:\n  mine: [https://a.example/x, https://b.example/y]\n"
                                   "proxy_servers:\n  https: http://proxy.example:3128\n")
    proc = envguard("lock", env=_env(home), cwd=work)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("warning:")]
    assert any("~/.condarc: custom_multichannels is not applied" in w for w in warnings), proc.stderr
    assert any("~/.condarc: proxy_servers is not applied" in w for w in warnings), proc.stderr
    assert len(warnings) == 2, proc.stderr  # once each, however often lock reads the configuration


# ---------------------------------------------------------------------------------------------- point 2

WRONG_SHAPE = {
    "custom_channels list": ("custom_channels:\n  conda-forge: [https://m.example/]\n",
                             "custom_channels.conda-forge", "a list, not a URL"),
    "channel_alias list": ("channel_alias: [https://a.example/, https://b.example/]\n", "channel_alias",
                           "a list, not a URL"),
    "channel_alias no URL": ("channel_alias: mirror.example\n", "channel_alias", "no scheme"),
    "mirrored_channels mapping": ("mirrored_channels:\n  conda-forge: {a: 1}\n", "mirrored_channels.conda-forge",
                                  "a mapping, not a list"),
    "mirror no URL": ("mirrored_channels:\n  conda-forge: [just-a-name]\n", "mirrored_channels.conda-forge",
                      "not a URL"),
    "default_channels string": ("default_channels: https://m.example/pkgs/main\n", "default_channels", "not a list"),
    "custom_channels host": ("custom_channels:\n  conda-forge: 'https://exa mple.com/'\n",
                             "custom_channels.conda-forge", "space"),
}


@pytest.mark.parametrize("case", list(WRONG_SHAPE))
def test_a_value_of_the_wrong_shape_is_one_line_naming_file_and_key(tmp_path: Path, root: Path, case: str) -> None:
    work, home = _project(tmp_path, root)
    text, key, words = WRONG_SHAPE[case]
    (home / ".condarc").write_text(text)
    proc = envguard("lock", env=_env(home), cwd=work)
    _refused(proc, f"~/.condarc: {key}: ", words)


@pytest.mark.parametrize(("content", "words"), [
    (b'[mirrors]\n"https://conda.anaconda.org/conda-forge" = ["https://m\xff.example/cf"]\n', "not UTF-8"),
    (b'[mirrors]\n"https://conda.anaconda.org/conda-forge" = ["https://m.example/\\u0000cf"]\n',
     "mirrors.https://conda.anaconda.org/conda-forge: "),
    (b'[mirrors]\n"https://conda.anaconda.org/conda-forge" = [{a = 1}]\n', "not a URL"),
    (b'[mirrors]\n"conda-forge" = ["https://m.example/cf"]\n', "mirrors: "),
    (b'[mirrors\n', "malformed TOML"),
])
def test_pixi_mirrors_of_the_wrong_shape_are_refused(tmp_path: Path, root: Path, content: bytes, words: str) -> None:
    work, home = _project(tmp_path, root)
    (work / ".pixi").mkdir()
    (work / ".pixi" / "config.toml").write_bytes(content)
    proc = envguard("lock", env=_env(home), cwd=work)
    _refused(proc, "config.toml", words)


@pytest.mark.parametrize(("name", "value"), [("CONDA_CHANNEL_ALIAS", "not a url"),
                                             ("CONDA_CHANNEL_ALIAS", "https://a.example/\x1b]0;x\x07"),
                                             ("ENVGUARD_CHANNEL_ALIAS", "[a, b]")])
def test_a_variable_that_is_no_url_is_refused(tmp_path: Path, root: Path, name: str, value: str) -> None:
    work, home = _project(tmp_path, root)
    proc = envguard("lock", env=_env(home, **{name: value}), cwd=work)
    line = _refused(proc, f"{name}: ")
    assert "\x1b" not in proc.stderr, line


# ---------------------------------------------------------------------------------------------- point 4

def test_condarc_d_files_are_bounded_together(tmp_path: Path, root: Path) -> None:
    """Each file is under the per-file node cap; together they are not: refused at the file that passes the
    bound, before the rest are parsed (it took ~2 s of CPU per file, with no bound over them all)."""
    work, home = _project(tmp_path, root)
    d = home / ".conda" / "condarc.d"
    d.mkdir(parents=True)
    body = "".join(f"k{j}: [a, b, c]\n" for j in range(8_000))  # 40,000 nodes each, under 100,000
    for i in range(20):
        (d / f"{i:02d}.yml").write_text(body)
    started = time.monotonic()
    proc = envguard("lock", env=_env(home), cwd=work, timeout=60, bounded=True)
    line = _refused(proc, "condarc.d/02.yml", "together")
    assert time.monotonic() - started < 30, line


def test_condarc_d_bytes_are_bounded_together(tmp_path: Path, root: Path) -> None:
    work, home = _project(tmp_path, root)
    d = home / ".conda" / "condarc.d"
    d.mkdir(parents=True)
    for i in range(8):
        (d / f"{i}.yaml").write_text("#" * (300 << 10) + "\n")  # comments: 300 KiB each, 2.4 MiB together
    proc = envguard("lock", env=_env(home, ENVGUARD_MAX_INPUT_BYTES=str(1 << 20)), cwd=work)
    _refused(proc, "condarc.d/3.yaml", "together hold more than 1,048,576 bytes")


def test_too_many_condarc_d_files_are_refused(tmp_path: Path, root: Path) -> None:
    work, home = _project(tmp_path, root)
    d = home / ".conda" / "condarc.d"
    d.mkdir(parents=True)
    for i in range(300):
        (d / f"{i:03d}.yml").write_text("")
    _refused(envguard("lock", env=_env(home), cwd=work), "condarc.d", "more than 256")


# ---------------------------------------------------------------------------------------------- point 3

def _downloads(srv: channels.HttpServer) -> list[str]:
    return [r for r in srv.requests if r.endswith((".conda", ".tar.bz2"))]


@pytest.mark.slow
@pytest.mark.parametrize("route", ["channel_alias", "custom_channels", "CONDA_CHANNEL_ALIAS", "mirrored_channels",
                                   "pixi"])
@pytest.mark.parametrize("secret", ["basic", "basic+token"])
def test_credentials_in_the_configuration_lock_then_create(tmp_path: Path, request: pytest.FixtureRequest,
                                                            route: str, secret: str) -> None:
    """The lock holds no credential; create installs that very lock, the credential supplied again from the
    configuration; the server (Basic auth required, and a /t/<token>/ path) served every archive."""
    server: channels.HttpServer = request.getfixturevalue("server" if secret == "basic" else "token_server")
    work = tmp_path / "work"
    work.mkdir()
    (work / "environment.yml").write_text(SPEC)
    home = tmp_path / "home"
    home.mkdir()
    url = server.url_with_auth(USER, PASSWORD)
    extra: dict[str, str] = {}
    if route == "channel_alias":
        (home / ".condarc").write_text(f"channel_alias: {url}/\n")
    elif route == "custom_channels":
        (home / ".condarc").write_text(f"custom_channels:\n  conda-forge: {url}\n")
    elif route == "CONDA_CHANNEL_ALIAS":
        extra = {"CONDA_CHANNEL_ALIAS": f"{url}/"}
    elif route == "mirrored_channels":
        (home / ".condarc").write_text(f"mirrored_channels:\n  conda-forge: [{url}/conda-forge]\n")
    else:
        (work / ".pixi").mkdir()
        (work / ".pixi" / "config.toml").write_text(f'[mirrors]\n"{CANONICAL}" = ["{url}/conda-forge"]\n')
    env = _env(home, **extra)
    proc = envguard("lock", env=env, cwd=work)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lock_text = (work / "conda-lock.yml").read_text()
    assert PASSWORD not in lock_text and USER not in lock_text and TOKEN not in lock_text
    assert PASSWORD not in proc.stdout + proc.stderr and TOKEN not in proc.stdout + proc.stderr
    before = len(_downloads(server))
    proc = envguard("create", "-p", str(tmp_path / "env"), "--no-check", env=env, cwd=work)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert PASSWORD not in proc.stdout + proc.stderr
    assert len(_downloads(server)) - before == 2  # both archives came through the authenticated server
    assert (tmp_path / "env" / "share" / "alpha.txt").read_text() == "alpha"
    for meta in (tmp_path / "env" / "conda-meta").glob("*.json"):
        assert PASSWORD not in meta.read_text()
    proc = envguard("check", "-p", str(tmp_path / "env"), "--no-smoke", env=env, cwd=work)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.slow
def test_variables_in_a_condarc_url_are_expanded_as_conda_expands_them(tmp_path: Path,
                                                                       server: channels.HttpServer) -> None:
    """``channel_alias: http://${USER}:${PASS}@host/`` (the credential kept out of the file): lock and create
    through it; the lock holds neither the credential nor a guess; an unset variable is one line naming it."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "environment.yml").write_text(SPEC)
    home = tmp_path / "home"
    home.mkdir()
    port = server.base_url.rsplit(":", 1)[1]
    (home / ".condarc").write_text(f"channel_alias: http://${{EG38_USER}}:${{EG38_PASS}}@127.0.0.1:{port}/\n")
    _refused(envguard("lock", env=_env(home, EG38_USER=USER), cwd=work), "~/.condarc: channel_alias: ",
             "${EG38_PASS}", "not set")
    env = _env(home, EG38_USER=USER, EG38_PASS=PASSWORD)
    proc = envguard("lock", env=env, cwd=work)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert PASSWORD not in (work / "conda-lock.yml").read_text() + proc.stderr
    before = len(_downloads(server))
    proc = envguard("create", "-p", str(tmp_path / "env"), "--no-check", env=env, cwd=work)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(_downloads(server)) - before == 2


@pytest.mark.slow
def test_a_masked_credential_comes_from_rattlers_auth_file_or_is_refused_naming_where(
        tmp_path: Path, server: channels.HttpServer) -> None:
    """A colleague whose .condarc names the server without the credential: create refuses in one line, before
    any download, naming where a credential can come from; with rattler's auth file holding one, it installs."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "environment.yml").write_text(SPEC)
    home = tmp_path / "home"
    home.mkdir()
    (home / ".condarc").write_text(f"channel_alias: {server.url_with_auth(USER, PASSWORD)}/\n")
    assert envguard("lock", env=_env(home), cwd=work).returncode == 0

    colleague = tmp_path / "colleague"
    colleague.mkdir()
    (colleague / ".condarc").write_text(f"channel_alias: {server.url}/\n")
    env = _env(colleague)
    asked = len(server.requests)
    proc = envguard("create", "-p", str(tmp_path / "env"), "--no-check", env=env, cwd=work)
    line = _refused(proc, "conda-lock.yml", "credential masked", "RATTLER_AUTH_FILE", "${VAR}")
    assert len(server.requests) == asked and not (tmp_path / "env").exists(), line

    auth = tmp_path / "auth.json"
    auth.write_text(json.dumps({"127.0.0.1": {"BasicHTTP": {"username": USER, "password": PASSWORD}}}))
    proc = envguard("create", "-p", str(tmp_path / "env"), "--no-check", env={**env, "RATTLER_AUTH_FILE": str(auth)},
                    cwd=work)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "env" / "share" / "alpha.txt").read_text() == "alpha"


@pytest.mark.slow
def test_a_channels_credential_is_not_sent_to_its_mirror(tmp_path: Path, root: Path,
                                                         server: channels.HttpServer) -> None:
    """Credentials go to the host they were written for: a channel's never reach the mirror that serves it
    (the mirror here records the Authorization headers it receives)."""
    seen: list[str | None] = []
    with channels.serve_directory(root) as mirror:
        handler = mirror._httpd.RequestHandlerClass
        original = handler._allowed  # type: ignore[attr-defined]

        def recording(self: object) -> bool:
            seen.append(self.headers.get("Authorization"))  # type: ignore[attr-defined]
            return bool(original(self))

        handler._allowed = recording  # type: ignore[attr-defined]
        work = tmp_path / "work"
        work.mkdir()
        (work / "environment.yml").write_text(SPEC)
        home = tmp_path / "home"
        home.mkdir()
        other_host = mirror.url.replace("127.0.0.1", "localhost")  # credentials are kept per host
        (home / ".condarc").write_text(f"channel_alias: {server.url_with_auth(USER, PASSWORD)}/\n"
                                       f"mirrored_channels:\n  conda-forge: [{other_host}/conda-forge]\n")
        proc = envguard("lock", env=_env(home), cwd=work)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    secret = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    assert seen and not any(h and secret in h for h in seen), seen
    assert "conda-forge" in yaml.safe_load((work / "conda-lock.yml").read_text())["metadata"]["channels"][0]["url"]
