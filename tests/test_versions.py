"""envguard.versions: one version order per manager, and every caller reads versions through it."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from envguard import compat
from envguard.check.checks import arch_supported
from envguard.diff import cuda_line
from envguard.model import Package
from envguard.versions import (
    compare_versions,
    conda_key,
    is_prerelease,
    line_key,
    major_minor,
    pypi_version,
    release,
    release_line,
)

PACKAGE = Path(__file__).resolve().parent.parent / "envguard"
STANDALONE = ("smoke/probe", "tune/probe", "in_process")


def _cmp(key: Callable[[str], Any], a: str, b: str) -> int:
    ka, kb = key(a), key(b)
    return (ka > kb) - (ka < kb)


def _pypi(a: str, b: str) -> int | None:
    va, vb = pypi_version(a), pypi_version(b)
    return None if va is None or vb is None else (va > vb) - (va < vb)


ORDERS: dict[str, Callable[[str, str], int | None]] = {
    "line (compat, init, lint, lock's __cuda, GPU architectures, drivers)": lambda a, b: _cmp(line_key, a, b),
    "conda (mkl, virtual packages)": lambda a, b: _cmp(conda_key, a, b),
    "pypi (export's wheel index, diff's pip specifiers)": _pypi,
    "diff (PEP 440, then conda)": compare_versions,
}


@pytest.mark.parametrize("order", ORDERS)
def test_a_release_candidate_comes_before_its_release_in_every_order(order: str) -> None:
    cmp = ORDERS[order]
    assert cmp("2.13.0rc1", "2.13.0") == -1
    assert cmp("2.13.0", "2.13.1") == -1
    assert cmp("2.13.0rc1", "2.13.1") == -1
    # the helpers this module replaced disagreed here: digits only put 2.13.0rc1 after 2.13.0, and dropping
    # the non-numeric segment put 2.13.1rc1 before 2.13.0
    assert cmp("2.13.1rc1", "2.13.0") == 1


# (a, b, expected comparison) on which every order agrees
AGREED = [
    ("2.13", "2.13.0", 0),
    ("2.13.0a0", "2.13.0", -1),
    ("2.13.0.post1", "2.13.0", 1),
    ("12.10", "12.9", 1),  # numbers, not text
    ("570.86.15", "570.9", 1),  # driver versions
    ("2024.1.0", "2024.1", 0),  # mkl against compat's pytorch_mkl_max
    ("1!1.0", "2.0", 1),  # an epoch outranks the release
]


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize(("a", "b", "expected"), AGREED)
def test_every_order_agrees_on_tricky_versions(order: str, a: str, b: str, expected: int) -> None:
    assert ORDERS[order](a, b) == expected
    assert ORDERS[order](b, a) == -expected


@pytest.mark.parametrize(("a", "b", "line", "conda", "pypi"), [
    # a local label: conda sorts it before the plain release, PEP 440 after; a line ignores it
    ("2.13.0+cpu", "2.13.0", 0, -1, 1),
    # conda compares segment by segment: 2.13.0.dev… has a fourth segment, 2.13.0rc1 a lower third
    ("2.13.0.dev20240117", "2.13.0rc1", -1, 1, -1),
    # a build suffix: conda reads ``_`` as a separator, PEP 440 cannot read it
    ("12.6_0", "12.6", 0, 0, None),
])
def test_where_the_orders_differ_by_design(a: str, b: str, line: int, conda: int, pypi: int | None) -> None:
    assert (_cmp(line_key, a, b), _cmp(conda_key, a, b), _pypi(a, b)) == (line, conda, pypi)


@pytest.mark.parametrize(("text", "segments", "mm", "line"), [
    ("2.13.0rc1", (2, 13, 0), "2.13", "2.13"),
    ("2.13.0+cpu", (2, 13, 0), "2.13", "2.13"),
    ("2.13", (2, 13), "2.13", "2.13"),
    ("2.13.*", (2, 13), "2.13", "2.13"),
    ("12", (12,), None, "12.0"),
    ("12.6_0", (12, 6), "12.6", "12.6"),
    ("12.6.77", (12, 6, 77), "12.6", "12.6"),
    ("", (), None, None),
    ("abc", (), None, None),
])
def test_version_parts(text: str, segments: tuple[int, ...], mm: str | None, line: str | None) -> None:
    assert release(text) == segments
    assert major_minor(text) == mm
    assert release_line(text) == line


def test_texts_no_parser_reads_sort_first_instead_of_raising() -> None:
    assert sorted(["2.13.0", "", "2.13.0rc1"], key=conda_key) == ["", "2.13.0rc1", "2.13.0"]
    assert pypi_version("not a version") is None
    assert line_key("") < line_key("0.1")


def test_compare_versions_pep440_then_conda() -> None:
    assert compare_versions("2.1.0", "2.1.2") == -1
    assert compare_versions("1.0", "1.0.0") == 0
    assert compare_versions("2.3.0.dev20240117", "2.3.0") == -1
    assert compare_versions("9b", "9e") == -1  # jpeg: not PEP 440, conda orders it
    assert compare_versions("9e", "9b") == 1
    assert compare_versions("", "1.0") is None


def test_prereleases_by_pep440_and_by_their_marker() -> None:
    assert is_prerelease("2.13.0rc1") and is_prerelease("2.13.0.dev20240117")
    assert is_prerelease("1.0dev_1")  # not PEP 440: the written marker decides
    assert not is_prerelease("2.13.0") and not is_prerelease("2.13.0+cpu")


# --------------------------------------------------------------------------- the callers


def test_driver_minimums_compare_as_versions() -> None:
    assert compat.driver_satisfies("570.86.15", "570.9")
    assert not compat.driver_satisfies("525.60.13", "570")
    assert not compat.driver_satisfies("", "525")


def test_gpu_architecture_minimum_compares_as_versions() -> None:
    assert arch_supported("7.5", (), "5.0")[0]
    assert not arch_supported("3.7", (), "5.0")[0]
    assert arch_supported("12.0", (), "5.0")[0]  # 12 > 5, as numbers
    assert arch_supported("5.0", (), "5.0")[0]  # exactly the oldest architecture


def test_diff_names_the_cuda_line_of_a_cuda_package() -> None:
    assert cuda_line(Package("cuda-version", "12.6", manager="conda")) == "12.6"
    assert cuda_line(Package("cuda-version", "12", manager="conda")) == "12"


_COPIES = re.compile(r"tuple\(int\(|def _vkey|def _key\(v: str\)|def version_key"
                     r"|from packaging\.version import.*\bVersion\b")


def test_no_module_keeps_its_own_version_order() -> None:
    """Callers sort and split versions through envguard.versions (the standalone probes import nothing)."""
    found = []
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel == "versions.py" or rel.startswith(STANDALONE):
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if _COPIES.search(line):
                found.append(f"{rel}:{n}: {line.strip()}")
    assert not found, "\n".join(found)
