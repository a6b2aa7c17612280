"""Conformance: for each reader, the forms it accepts and refuses, and why, against the tool that owns the format.

Every form is a file written here. For pixi.lock, rattler (pixi's own reader, pinned with envguard) reads
the same file, and envguard must give its verdict: read it, or refuse it with rattler's reason. The one
deliberate difference is listed as such (``differs``): an all-digit hash YAML reads as a number, which
envguard reads as the digits written, with a note that pixi refuses it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from envguard.cli import run
from envguard.errors import UserError
from envguard.sources import load

CF = "https://conda.anaconda.org/conda-forge"
ZLIB = f"{CF}/linux-64/zlib-1.3.1-hb9d3cd8_2.conda"
TZ = f"{CF}/noarch/tzdata-2025b-h78e105d_0.conda"
MD5 = "4c1a3f5e9b0a8a1f6b2c7d5e3f1a2b3c"
SHA = "2c1a3f5e9b0a8a1f6b2c7d5e3f1a2b3c" * 2


def v6(env_packages: str = f"      linux-64:\n      - conda: {ZLIB}\n",
       packages: str = f"- conda: {ZLIB}\n  sha256: {SHA}\n  md5: {MD5}\n", env_extra: str = "",
       head: str = "version: 6\n") -> str:
    return (f"{head}environments:\n  default:\n    channels:\n    - url: {CF}/\n{env_extra}    packages:\n"
            f"{env_packages}packages:\n{packages}")


V3 = f"""\
version: 3
metadata:
  content_hash:
    linux-64: 5d1f7c1a0b2e4f6a8c9d0e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d
  channels:
  - url: {CF}/
    used_env_vars: []
  platforms:
  - linux-64
  - osx-arm64
  sources: []
package:
- platform: linux-64
  name: zlib
  version: 1.3.1
  category: main
  manager: conda
  dependencies: []
  url: {ZLIB}
  hash:
    md5: {MD5}
    sha256: {SHA}
  build: hb9d3cd8_2
  subdir: linux-64
- platform: osx-arm64
  name: tzdata
  version: 2025b
  category: main
  manager: conda
  dependencies: []
  url: {TZ}
  hash:
    md5: {MD5}
    sha256: {SHA}
  build: h78e105d_0
  subdir: noarch
- platform: linux-64
  name: requests
  version: 2.31.0
  category: main
  manager: pypi
  requires_dist:
  - charset-normalizer <4,>=2
  url: https://files.pythonhosted.org/packages/70/8e/0e/requests-2.31.0-py3-none-any.whl
  hash:
    sha256: {SHA}
"""


@dataclass(frozen=True)
class Form:
    reader: str
    form: str
    text: str
    accepted: bool
    why: str  # the owning tool's reason; for a refusal, a part of envguard's message
    differs: bool = False  # envguard's verdict deliberately differs from rattler's (see the module doc)


PIXI_FORMS = [
    Form("pixi.lock", "v6, one environment", v6(), True, "the current layout"),
    Form("pixi.lock", "v3, conda-lock's layout with manager: pypi", V3, True,
         "rattler reads versions 3 and lower with its legacy parser"),
    Form("pixi.lock", "no environments at all", "version: 6\nenvironments: {}\npackages: []\n", True,
         "rattler reads a lock of nothing"),
    Form("pixi.lock", "an environment with no packages on a platform", v6("      linux-64: []\n", " []\n"), True,
         "an empty platform list"),
    Form("pixi.lock", "an environment without 'packages'",
         f"version: 6\nenvironments:\n  default:\n    channels:\n    - url: {CF}/\npackages: []\n", False,
         "has no 'packages'"),
    Form("pixi.lock", "an environment without 'channels'",
         "version: 6\nenvironments:\n  default:\n    packages: {}\npackages: []\n", False, "has no 'channels'"),
    Form("pixi.lock", "no top-level 'packages'",
         "version: 6\nenvironments:\n  default:\n    channels: []\n    packages: {}\n", False, "no 'packages' list"),
    Form("pixi.lock", "a platform key that is no subdir", v6(f"      linux-65:\n      - conda: {ZLIB}\n"), False,
         "'linux-65' is not a known platform"),
    Form("pixi.lock", "a platform key written twice",
         v6(f"      linux-64:\n      - conda: {ZLIB}\n      linux-64:\n      - conda: {ZLIB}\n"), False,
         "key 'linux-64' is written twice"),
    Form("pixi.lock", "v7, one platform name declared twice",
         v6(head="version: 7\nplatforms:\n- name: linux-64\n- name: linux-64\n"), False,
         "platform name 'linux-64' is declared twice"),
    Form("pixi.lock", "v7, a platform whose subdir is unknown",
         v6(head="version: 7\nplatforms:\n- name: linux-64\n  subdir: linux-65\n"), False,
         "'linux-65' is not a known subdir"),
    Form("pixi.lock", "a sha256 that is not a digest", v6(packages=f"- conda: {ZLIB}\n  sha256: xyz\n"), False,
         "'xyz' is not a sha256 digest"),
    Form("pixi.lock", "an all-zero sha256 (YAML: octal 0; serde_yaml: a string)",
         v6(packages=f"- conda: {ZLIB}\n  sha256: {'0' * 64}\n  md5: {MD5}\n"), True,
         "a leading zero keeps it a string for serde_yaml"),
    Form("pixi.lock", "an all-digit md5 without a leading zero (a YAML integer)",
         v6(packages=f"- conda: {ZLIB}\n  sha256: {SHA}\n  md5: {'1' * 32}\n"), True,
         "read as the digits written, with a note", differs=True),
    Form("pixi.lock", "a newer format version", "version: 8\nenvironments: {}\npackages: []\n", False,
         "unsupported pixi.lock version 8"),
]


def _ours(path: Path) -> tuple[bool, str]:
    try:
        d = load(str(path))
    except UserError as e:
        return False, e.message
    return True, "; ".join(d.notes)


@pytest.mark.parametrize("form", PIXI_FORMS, ids=lambda f: f.form)
def test_pixi_lock_forms_agree_with_rattler(form: Form, tmp_path: Path) -> None:
    from rattler import LockFile

    f = tmp_path / "pixi.lock"
    f.write_text(form.text)
    try:
        LockFile.from_path(str(f))
        theirs = True
    except Exception:  # rattler's ParseCondaLockError (its own error family): a refusal
        theirs = False
    ours, why = _ours(f)
    assert ours == form.accepted, (form.form, why)
    assert (ours == theirs) != form.differs, (form.form, "rattler reads it" if theirs else "rattler refuses it")
    if not form.accepted:
        assert form.why in why and "\n" not in why, why
    if form.differs:
        assert "pixi's own reader refuses it" in why


def test_known_subdirs_are_rattlers() -> None:
    import rattler

    from envguard.sources.pixi import KNOWN_SUBDIRS

    assert {str(p) for p in rattler.Subdir.all()} == KNOWN_SUBDIRS


def _record_set(lf_env, platform) -> set[tuple[str, ...]]:
    out = set()
    for p in lf_env.packages(platform):
        rec = getattr(p, "package_record", None)
        if rec is not None:
            out.add(("conda", str(p.name), str(rec.version), str(rec.build), rec.sha256.hex() if rec.sha256 else "",
                     rec.md5.hex() if rec.md5 else "", str(p.location)))
        elif type(p).__name__ == "CondaLockedSourcePackage":  # v7 source build: no record, no hash
            out.add(("conda", str(p.name), "", "", "", "", ""))
        else:
            h = p.hashes
            # a PyPI entry without a hash: py-rattler's wrapper holds None and its properties raise
            sha, md5 = getattr(h, "sha256", None), getattr(h, "md5", None)
            out.add(("pip", str(p.name), str(p.version), "", sha.hex() if sha else "", md5.hex() if md5 else "", ""))
    return out


def _ours_set(pkgs) -> set[tuple[str, ...]]:
    return {(q.manager, q.name, q.version if q.manager == "pip" or q.build else "", q.build or "",
             q.sha256 or "", q.md5 or "", (q.url or "") if q.manager == "conda" and q.build else "") for q in pkgs}


def _agree(path: Path) -> int:
    """Record for record against rattler: name, version, build, sha256, md5 and URL, every environment and
    platform. PyPI packages built from a local path are the one exception: rattler leaves their version
    open (``<dynamic>``, no hash: pixi rebuilds them), envguard keeps what the lock recorded."""
    from rattler import LockFile

    compared = 0
    for env_name, env in LockFile.from_path(str(path)).environments():
        ours = load(str(path), environment=env_name)
        for lp in env.platforms():
            theirs = _record_set(env, lp)
            mine = _ours_set(ours.packages[lp.name])
            dynamic = {t[:2] for t in theirs if t[2] == "<dynamic>"}
            assert {m for m in mine if m[:2] not in dynamic} == {t for t in theirs if t[:2] not in dynamic}, \
                (path.name, env_name, lp.name)
            compared += len(theirs)
    return compared


def test_pixi_v3_record_for_record(tmp_path: Path) -> None:
    f = tmp_path / "pixi.lock"
    f.write_text(V3)
    assert _agree(f) == 3
    d = load(str(f))
    assert (d.kind, d.environments, sorted(map(str, d.packages))) == ("pixi", ("default",), ["linux-64", "osx-arm64"])
    with pytest.raises(UserError, match="has only 'default'"):
        load(str(f), environment="cuda")


@pytest.mark.slow
def test_every_real_pixi_lock_record_for_record(realworld: Path) -> None:
    locks = sorted((realworld / "pixi").glob("*.lock"))
    assert locks
    for f in locks:
        assert _agree(f) > 0, f.name


# ------------------------------------------------------------------ hashes whatever YAML makes of them


@pytest.mark.parametrize("written", ["1" * 64, "0" * 64, "0" + "7" * 63, "0123" + "4" * 60, "9" * 64])
def test_digest_comes_back_as_written(written: str, tmp_path: Path) -> None:
    f = tmp_path / "pixi.lock"
    f.write_text(v6(packages=f"- conda: {ZLIB}\n  sha256: {written}\n  md5: {'0' * 32}\n"))
    (pkg,) = load(str(f)).packages["linux-64"]
    assert (pkg.sha256, pkg.md5) == (written, "0" * 32)


def test_all_digit_hashes_do_not_crash_diff(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = tmp_path / "a.lock", tmp_path / "b.lock"
    a.write_text(v6(packages=f"- conda: {ZLIB}\n  sha256: {'1' * 64}\n  md5: {'1' * 32}\n"))
    b.write_text(v6(packages=f"- conda: {ZLIB}\n  sha256: {'2' * 64}\n  md5: {'0' * 32}\n"))
    assert run(["diff", str(a), str(a), "--format", "json"]) == 0
    capsys.readouterr()
    code = run(["diff", str(a), str(b), "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 1 and "sha256" in json.dumps(doc)


def test_conda_lock_digits_read_as_written_with_conda_locks_verdict(tmp_path: Path) -> None:
    f = tmp_path / "conda-lock.yml"
    f.write_text(f"""\
version: 1
metadata:
  channels: [{{url: conda-forge, used_env_vars: []}}]
  platforms: [linux-64]
  sources: [environment.yml]
package:
- name: zlib
  version: 1.3.1
  manager: conda
  platform: linux-64
  dependencies: {{}}
  url: {ZLIB}
  hash:
    md5: {'1' * 32}
    sha256: {'0' * 64}
  category: main
  optional: false
""")
    d = load(str(f))
    (pkg,) = d.packages["linux-64"]
    assert (pkg.md5, pkg.sha256) == ("1" * 32, "0" * 64)
    assert any("conda-lock's own reader refuses it" in n for n in d.notes)


# ------------------------------------------------------------------ empty but valid


ENV_FORMS = [
    ("channels and no dependencies", "name: x\nchannels:\n  - conda-forge\n", True),
    ("an empty dependencies:", "name: x\nchannels:\n  - conda-forge\ndependencies:\n", True),
    ("an empty dependency list", "name: x\nchannels: [conda-forge]\ndependencies: []\n", True),
]


@pytest.mark.parametrize("form, text, ok", ENV_FORMS, ids=[f[0] for f in ENV_FORMS])
def test_empty_environment_files_are_environments(form: str, text: str, ok: bool, tmp_path: Path) -> None:
    """conda and mamba create an empty environment from each: read, and lint warns at most."""
    from envguard.findings import Severity
    from envguard.lint import lint_file

    f = tmp_path / "environment.yml"
    f.write_text(text)
    d = load(str(f))
    assert (d.kind, d.requested) == ("environment", [])
    assert not [x for x in lint_file(f) if x.severity is Severity.ERROR], form


def test_empty_conda_lock_forms(tmp_path: Path) -> None:
    head = "version: 1\nmetadata:\n  channels: [{url: conda-forge, used_env_vars: []}]\n  platforms: [linux-64]\n"
    f = tmp_path / "conda-lock.yml"
    f.write_text(head + "package: []\n")  # conda-lock reads it: a lock of nothing
    assert load(str(f)).packages == {"linux-64": []}
    f.write_text(head + "package:\n")  # pydantic refuses None for the list
    with pytest.raises(UserError, match=r"'package' is empty \(null\)"):
        load(str(f))


def test_explicit_file_of_nothing(tmp_path: Path) -> None:
    f = tmp_path / "spec.txt"
    f.write_text("@EXPLICIT\n")
    assert load(str(f)).kind == "explicit"


# ------------------------------------------------------------------ diff F F compares all


def test_diff_of_a_multi_environment_lock_compares_every_environment(realworld: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    f = str(realworld / "pixi" / "wang7x__pixi-pytorch-example__pixi.lock")
    assert run(["diff", f, f, "--format", "json", "--all-platforms"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert sorted({p["environment"] for p in doc["platforms"]}) == ["cpu", "default", "gpu"]


def test_diff_of_a_multi_platform_lock_off_its_platforms_compares_all(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str],
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import envguard.platforms

    f = tmp_path / "pixi.lock"
    f.write_text(v6(f"      osx-arm64:\n      - conda: {TZ}\n      win-64:\n      - conda: {TZ}\n",
                    f"- conda: {TZ}\n  sha256: {SHA}\n  md5: {MD5}\n"))
    monkeypatch.setattr(envguard.platforms, "host_platform", lambda: "linux-64")
    assert run(["diff", str(f), str(f), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [p["a_platform"] for p in doc["platforms"]] == ["osx-arm64", "win-64"]


# ------------------------------------------------------------------ explicit files (conda list --explicit)

URL = "https://conda.anaconda.org/conda-forge/linux-64/zlib-1.3.1-hb9d3cd8_2.conda"
EXPLICIT_FORMS = [
    # (form, text, accepted, rattler's verdict, why)
    ("the marker alone", "@EXPLICIT\n", True, True, "conda installs nothing"),
    ("an md5 fragment", f"@EXPLICIT\n{URL}#{MD5}\n", True, True, "conda's own rendering"),
    ("a sha256 fragment", f"@EXPLICIT\n{URL}#sha256:{SHA}\n", True, True, "conda-lock's rendering"),
    ("comments and a platform header", f"# platform: linux-64\n# x\n@EXPLICIT\n{URL}\n", True, True,
     "comments are skipped"),
    ("a package line before the marker", f"{URL}\n@EXPLICIT\n", False, False, "package line before @EXPLICIT"),
    ("a URL that is no package", "@EXPLICIT\nhttps://example.org/readme.txt\n", False, True,
     "not a conda package URL"),  # conda cannot install it; rattler's reader defers that to install time
]


@pytest.mark.parametrize("form, text, accepted, rattler, why", EXPLICIT_FORMS, ids=[f[0] for f in EXPLICIT_FORMS])
def test_explicit_forms(form: str, text: str, accepted: bool, rattler: bool, why: str, tmp_path: Path) -> None:
    from rattler.explicit_environment import ExplicitEnvironmentSpec

    try:
        ExplicitEnvironmentSpec.from_str(text)
        theirs = True
    except Exception:  # rattler's own error family
        theirs = False
    assert theirs == rattler, form
    f = tmp_path / "spec.txt"
    f.write_text(text)
    ours, message = _ours(f)
    assert ours == accepted, (form, message)
    if not accepted:
        assert why in message and "\n" not in message


# ------------------------------------------------------------------ shapes no tool reads: one line, never a traceback

HOSTILE = [
    ("platforms a number", v6(head="version: 7\nplatforms: 1.5\n")),
    ("channels a boolean", v6().replace(f"    channels:\n    - url: {CF}/\n", "    channels: true\n")),
    ("a platform's packages a number", v6("      linux-64: 3\n")),
    ("environments a number", "version: 6\nenvironments: 3\npackages: []\n"),
    ("environment packages a list", v6().replace(f"    packages:\n      linux-64:\n      - conda: {ZLIB}\n",
                                                 f"    packages:\n    - conda: {ZLIB}\n")),
    ("virtual packages a number", v6(head="version: 7\nplatforms:\n- name: linux-64\n  virtual-packages: 7\n")),
]


@pytest.mark.parametrize("form, text", HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_shapes_are_one_line_refusals(form: str, text: str, tmp_path: Path) -> None:
    from envguard.lint import LintReadError, lint_file

    f = tmp_path / "pixi.lock"
    f.write_text(text)
    try:
        load(str(f))
    except UserError as e:
        assert "\n" not in e.message
    try:
        lint_file(f)
    except LintReadError:
        pass
    assert run(["lint", str(f)]) in (0, 1, 2), form  # an internal error is exit 6
