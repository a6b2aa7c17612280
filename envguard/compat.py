"""Read the compatibility data (``envguard/data/compat.yaml``).

Pure: no processes, no network. Other modules ask questions here instead of
hard-coding release facts. Facts belong to a *route* (``conda-forge``, ``pypi``,
the legacy ``pytorch`` channel), because the routes build different CUDA lines,
Python versions and GPU architectures; where a route differs between platforms,
the CUDA lines are kept per conda platform. Every release row carries a status
(``released`` with evidence, ``announced``, ``unknown``) and its source.

:func:`validate` checks the file's schema (tests/test_compat.py runs it); the
commands trust the shipped file and read it without validating.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property, lru_cache
from importlib import resources
from typing import Any

from envguard.versions import line_key, pypi_version, release_line
from envguard.versions import release as release_segments  # Compat.release is a row
from envguard.yamlio import load_fast

STATUSES = ("released", "announced", "unknown")
CONDA_FORGE, PYPI, PYTORCH = "conda-forge", "pypi", "pytorch"


@dataclass(frozen=True)
class Release:
    """One torch release line (``2.13``) on one route."""

    route: str
    version: str
    status: str
    source: str
    python: tuple[str, ...] = ()
    cuda_by_platform: tuple[tuple[str, tuple[str, ...]], ...] = ()
    cpu: tuple[str, ...] = ()  # platforms with CPU builds (conda routes)
    versions: tuple[str, ...] = ()
    glibc: tuple[tuple[str, str], ...] = ()  # build kind ("cpu", "13.0") -> the glibc floor of its Linux builds
    variants: tuple[tuple[str, str, tuple[str, ...]], ...] = ()  # (platform, CUDA line, variant names)

    def variants_of(self, platform: str, cuda: str) -> tuple[str, ...]:
        """Build variants sharing one build string on ``platform`` (linux-aarch64 cuda129: sbsa, tegra)."""
        return next((v for p, c, v in self.variants if p == platform and c == cuda), ())

    def glibc_floor(self, kind: str) -> str | None:
        return dict(self.glibc).get(kind)

    @property
    def released(self) -> bool:
        return self.status == "released"

    def has_cuda_builds(self, platform: str) -> bool:
        """Whether the route has CUDA builds of this release on ``platform``, even where their lines are not
        recorded (PyPI's linux-aarch64 wheels since 2.9, beyond the lines a row names)."""
        return platform in dict(self.cuda_by_platform) or bool(self.cuda_on(platform))

    def cuda_on(self, platform: str) -> tuple[str, ...]:
        """The CUDA lines this release is built for on ``platform`` (empty: none there)."""
        return dict(self.cuda_by_platform).get(platform, ())

    @property
    def cuda(self) -> tuple[str, ...]:
        """Every CUDA line of the release, on any platform, oldest first."""
        return tuple(sorted({c for _, lines in self.cuda_by_platform for c in lines}, key=line_key))

    @property
    def cuda_platforms(self) -> tuple[str, ...]:
        return tuple(p for p, lines in self.cuda_by_platform if lines)

    def build_line(self, platform: str, cuda: str) -> str | None:
        """The CUDA line of the build ``platform`` gets when the environment asks for CUDA ``cuda``.

        On conda-forge that is ``cuda-version=cuda``: a ``cudaXYZ`` build depends on ``cuda-version >=X.Y,<X+1``,
        so it runs on the libraries of any later minor of its major and the newest such build wins (real win-64
        locks hold cuda128 builds beside cuda-version 12.9). On the legacy channel ``pytorch-cuda=cuda`` selects
        exactly that line. None when no build there accepts ``cuda``."""
        lines = self.cuda_on(platform)
        if self.route == PYTORCH:
            return cuda if cuda in lines else None
        major = cuda.split(".", maxsplit=1)[0]
        fits = [x for x in lines if x.split(".")[0] == major and line_key(x) <= line_key(cuda)]
        return max(fits, key=line_key) if fits else None

    def cuda_choices(self, platforms: Iterable[str], toolkit_lines: Iterable[str] = ()) -> list[str]:
        """The CUDA lines a build accepts on every one of ``platforms``, oldest first: the lines the release is
        built for, plus any of ``toolkit_lines`` (the CUDA versions the route packages) that its builds accept."""
        plats = list(platforms)
        union = sorted({c for p in plats for c in self.cuda_on(p)} | set(toolkit_lines), key=line_key)
        return [c for c in union if all(self.build_line(p, c) for p in plats)]


@dataclass(frozen=True)
class ArchRange:
    """The GPU architectures one build covers: ``sm_<oldest>`` to ``sm_<newest>``, PTX for newer ones."""

    oldest: str  # compute capability "5.0"
    newest: str | None  # None when not recorded
    ptx: bool
    source: str = ""
    # the build's own list (sm_XY / compute_XY) where a row records its TORCH_CUDA_ARCH_LIST: it decides
    # as the probe's list does, so a gap in the list (sm_110 in 7.5;...;10.0;12.0) is not taken as covered
    arches: tuple[str, ...] = ()

    def covers(self, capability: tuple[int, int]) -> bool:
        """Whether a GPU of ``capability`` runs this build: from the oldest architecture on (inclusive); past
        the newest only within its major (a cubin runs on higher minors of its major) or through PTX."""
        if self.arches:
            return arch_covers(capability, self.arches)
        if capability < _cap(self.oldest):
            return False
        if self.newest is None or self.ptx:
            return True
        return capability[0] <= _cap(self.newest)[0]

    def describe(self) -> str:
        low = f"sm_{self.oldest.replace('.', '')}"
        if self.newest is None:
            return f"{low} and newer"
        text = f"{low} to sm_{self.newest.replace('.', '')}"
        return text + (" (PTX for newer GPUs)" if self.ptx else ", no newer architectures")


def _cap(text: str) -> tuple[int, int]:
    rel = release_segments(text) + (0, 0)
    return rel[0], rel[1]


_ARCH_LIST = re.compile(r"^\d+\.\d+(\+PTX)?(;\d+\.\d+(\+PTX)?)*$")


def arch_list_names(text: str) -> tuple[str, ...]:
    """A TORCH_CUDA_ARCH_LIST as torch.cuda.get_arch_list() names it: ``"3.7+PTX;9.0"`` -> sm_37, compute_37,
    sm_90 (``X.Y+PTX`` builds the cubin and the PTX of X.Y)."""
    digits = [(e.removesuffix("+PTX").replace(".", ""), e.endswith("+PTX")) for e in text.split(";")]
    return tuple(n for d, ptx in digits for n in ((f"sm_{d}", f"compute_{d}") if ptx else (f"sm_{d}",)))


@dataclass(frozen=True)
class Route:
    name: str
    title: str
    manager: str  # "conda" or "pip"
    source: str
    releases: tuple[Release, ...]  # every row, oldest first, any status
    arch_rows: tuple[Mapping[str, Any], ...] = ()
    frozen_at: str | None = None
    declared_cuda_platforms: tuple[str, ...] = ()
    toolkit_lines: tuple[str, ...] = ()  # CUDA versions the route packages (cuda-version X.Y)
    as_of: str | None = None  # the date of the table's newest evidence for this route
    records_of: str | None = None  # the channel URL, when the rows come from its records (envguard.channelfacts)
    variant_rows: tuple[Mapping[str, Any], ...] = ()  # what each build variant is (curated: GPUs, glibc)

    @property
    def evidence(self) -> str:
        """Where the rows come from, for messages: "conda-forge's records" or "envguard's data"."""
        return f"{self.title}'s records" if self.records_of else "envguard's data"

    def variant(self, name: str) -> Mapping[str, Any] | None:
        return next((v for v in self.variant_rows if v.get("name") == name), None)

    def cuda_choices(self, release: Release, platforms: Iterable[str]) -> list[str]:
        """Every CUDA line an environment of ``release`` may ask for on all of ``platforms``."""
        return release.cuda_choices(platforms, self.toolkit_lines)

    def release(self, line: str) -> Release | None:
        return next((r for r in self.releases if r.version == line), None)

    @property
    def released(self) -> list[Release]:
        return [r for r in self.releases if r.released]

    @property
    def newest(self) -> str:
        return self.released[-1].version

    @property
    def cuda_platforms(self) -> tuple[str, ...]:
        """Platforms where the route has CUDA builds of some release."""
        seen: dict[str, None] = dict.fromkeys(self.declared_cuda_platforms)
        for r in self.released:
            for p in r.cuda_platforms:
                seen.setdefault(p, None)
        return tuple(seen)

    def arch(self, cuda: str, torch: str | None = None, platform: str | None = None) -> ArchRange | None:
        """The architectures of this route's CUDA ``cuda`` build of torch ``torch`` on ``platform``, when
        recorded. A row for some platforms only (PyPI's cu118 wheels: PTX on Windows, none on Linux) answers
        only for those; the first matching row wins."""
        for row in self.arch_rows:
            if not _line_matches(str(row["cuda"]), cuda):
                continue
            if row.get("platforms") and platform not in row["platforms"]:
                continue  # a row for some platforms only, and this is another one (or unknown)
            if row.get("torch") and torch:
                from packaging.specifiers import SpecifierSet  # only here: a variant pick names no torch (~4 ms)

                version = pypi_version(torch.split("+")[0])
                if version is None or version not in SpecifierSet(str(row["torch"])):
                    continue
            elif row.get("torch"):
                continue  # a row for some releases only, and the release is unknown
            sm = row["sm"]
            return ArchRange(str(sm[0]), str(sm[1]) if sm[1] is not None else None, bool(row.get("ptx")),
                             str(row.get("source", "")), arch_list_names(str(row["list"])) if row.get("list") else ())
        return None


def _line_matches(pattern: str, cuda: str) -> bool:
    if pattern.endswith(".*"):
        return cuda.split(".", maxsplit=1)[0] == pattern[:-2]
    return release_segments(cuda)[:2] == release_segments(pattern)[:2]


def release_from_row(route: str, line: str, row: Mapping[str, Any], cuda_platforms: tuple[str, ...],
                     aarch64_since: str | None = None) -> Release:
    """One release row of compat.yaml (or one built from a channel's records) as a :class:`Release`.
    ``aarch64_since``: the first release with linux-aarch64 CUDA builds whose lines the row lists apart
    (``aarch64``, verified lines only; possibly none)."""
    cuda = row.get("cuda") or {}
    if isinstance(cuda, list):  # the same lines on every CUDA platform of the route
        plats = cuda_platforms or ("linux-64", "win-64")
        by_platform = tuple((p, tuple(str(c) for c in cuda)) for p in plats)
        if aarch64_since and line_key(line) >= line_key(aarch64_since):
            by_platform += (("linux-aarch64", tuple(str(c) for c in row.get("aarch64") or ())),)
    else:
        by_platform = tuple((str(p), tuple(str(c) for c in lines)) for p, lines in cuda.items())
    return Release(
        route=route, version=line, status=str(row.get("status", "unknown")), source=str(row.get("source", "")),
        python=tuple(str(p) for p in row.get("python") or ()), cuda_by_platform=by_platform,
        cpu=tuple(str(p) for p in row.get("cpu") or ()),
        versions=tuple(str(v) for v in row.get("versions") or ()),
        glibc=tuple((str(k), str(v)) for k, v in (row.get("glibc") or {}).items()),
        variants=tuple((str(p), str(c), tuple(str(n) for n in names))
                       for p, by in (row.get("variants") or {}).items() for c, names in by.items()),
    )


@dataclass(frozen=True)
class Compat:
    raw: dict[str, Any]  # the first document; ``raw["routes"]`` is read from the second on first use

    # -- Python -----------------------------------------------------------------
    @property
    def supported_python(self) -> tuple[str, ...]:
        return tuple(self.raw["python"]["supported"])

    @property
    def default_python(self) -> str:
        return str(self.raw["python"]["default"])

    def python_legacy(self, python: str) -> dict[str, Any] | None:
        return self.raw["python"].get("legacy", {}).get(python)

    # -- routes and releases ------------------------------------------------------
    @cached_property
    def routes(self) -> dict[str, Route]:
        if "routes" not in self.raw:
            self.raw["routes"] = _routes_document()["routes"]
        out: dict[str, Route] = {}
        for name, data in self.raw["routes"].items():
            declared = tuple(str(p) for p in data.get("cuda_platforms") or ())
            since = str(data["aarch64_cuda_since"]) if data.get("aarch64_cuda_since") else None
            releases = sorted((release_from_row(name, str(line), row, declared, since)
                               for line, row in data["releases"].items()),
                              key=lambda r: line_key(r.version))
            out[name] = Route(name, str(data.get("title", name)), str(data.get("manager", "conda")),
                              str(data.get("source", "")), tuple(releases), tuple(data.get("arch") or ()),
                              str(data["frozen_at"]) if data.get("frozen_at") else None, declared,
                              tuple(str(v) for v in data.get("toolkit_lines") or ()),
                              str(data["as_of"]) if data.get("as_of") else None, None,
                              tuple(data.get("variants") or ()))
        return out

    def route(self, name: str) -> Route:
        return self.routes[name]

    def release(self, version: str, route: str = CONDA_FORGE) -> Release | None:
        """The row for any torch version string (``2.13.0+cpu`` -> 2.13) on ``route``, whatever its status."""
        line = release_line(version) if version else None
        r = self.routes.get(route)
        return r.release(line) if r and line else None

    def torch(self, version: str, route: str = CONDA_FORGE) -> Release | None:
        """The *released* line ``X.Y`` of any torch version string on ``route``."""
        rel = self.release(version, route)
        return rel if rel is not None and rel.released else None

    @property
    def newest_torch(self) -> str:
        return self.route(CONDA_FORGE).newest

    def releases_on(self, channel: str) -> list[Release]:
        r = self.routes.get(channel)
        return r.released if r else []

    def releases_for_python(self, python: str, route: str = CONDA_FORGE) -> list[Release]:
        return [r for r in self.releases_on(route) if python in r.python]

    @property
    def known_channels(self) -> tuple[str, ...]:
        """The conda channel routes (those `envguard init` can write), in data order."""
        return tuple(n for n, r in self.routes.items() if r.manager == "conda")

    def cuda_platforms(self, channel: str) -> tuple[str, ...]:
        """Conda subdirs with CUDA builds of pytorch on a channel route."""
        r = self.routes.get(channel)
        return r.cuda_platforms if r else ()

    # -- drivers and architectures ------------------------------------------------------
    def min_driver(self, cuda: str, platform: str | None = None) -> str | None:
        """Minimum driver for a CUDA runtime such as ``12.6`` or ``12`` on ``platform``'s OS (Linux default)."""
        row = self.raw["drivers"].get(cuda.split(".", maxsplit=1)[0]) or {}
        os_name = "win" if (platform or "").startswith("win") else "linux"
        value = row.get(os_name)
        return str(value) if value else None

    def min_arch(self, cuda: str) -> str | None:
        return self.raw["min_arch"].get(cuda.split(".", maxsplit=1)[0])

    def arch(self, route: str, cuda: str, torch: str | None = None, platform: str | None = None) -> ArchRange | None:
        r = self.routes.get(route)
        return r.arch(cuda, torch, platform) if r else None

    # -- channels, packages --------------------------------------------------------------
    @property
    def pytorch_channel_frozen_at(self) -> str:
        return str(self.raw["channels"]["pytorch"]["frozen_at"])

    @property
    def pytorch_mkl_max(self) -> str:
        return str(self.raw["channels"]["pytorch_mkl_max"])

    @property
    def legacy_packages(self) -> dict[str, str]:
        return dict(self.raw.get("legacy_packages", {}))

    @property
    def core_packages(self) -> tuple[str, ...]:
        """PyPI names of the packages one manager must own (torch, numpy, ...)."""
        return tuple(self.raw.get("core_packages", ()))

    @property
    def cuda_runtime_packages(self) -> tuple[str, ...]:
        return tuple(self.raw.get("cuda_runtime_packages", ()))

    @property
    def nightly_channels(self) -> tuple[str, ...]:
        return tuple(self.raw.get("nightly_channels", ()))

    @property
    def lock_cuda_unnamed(self) -> str:
        return str(self.raw["lock_cuda_unnamed"])


_SEPARATOR = "\n---\n"


@lru_cache(maxsize=1)
def load() -> Compat:
    # Read at every command's start-up: the C loader (envguard.yamlio) keeps that cheap, and only the first
    # document (Python, drivers, channels) is parsed; the release rows follow when a rule needs them.
    return Compat(dict(load_fast("envguard/data/compat.yaml", text=data_text().split(_SEPARATOR, 1)[0])))


@lru_cache(maxsize=1)
def _routes_document() -> dict[str, Any]:
    return dict(load_fast("envguard/data/compat.yaml", text=data_text().split(_SEPARATOR, 1)[1]))


def load_all() -> dict[str, Any]:
    """Both documents as one mapping (what :func:`validate` checks)."""
    first, _, second = data_text().partition(_SEPARATOR)
    return {**load_fast("envguard/data/compat.yaml", text=first), **load_fast("envguard/data/compat.yaml",
                                                                              text=second)}


@lru_cache(maxsize=1)
def data_text() -> str:
    return resources.files("envguard").joinpath("data/compat.yaml").read_text(encoding="utf-8")


def driver_satisfies(driver: str, minimum: str) -> bool:
    return line_key(driver) >= line_key(minimum)


_CUDA_IN_BUILD = re.compile(r"cuda_?(\d+)\.(\d+)|cuda(\d{2,3})(?!\d)")


def cuda_in_build(build: str) -> str | None:
    """The CUDA line a build string or build glob names.

    ``cuda129_mkl_py311_h0_303`` -> ``12.9``; the legacy channel's ``py3.11_cuda12.1_cudnn8_0`` -> ``12.1``;
    a guard ``cuda12*`` -> ``12`` (a major line: two digits starting with 1 are a major, ``cuda92`` is 9.2);
    ``*cuda*`` or ``cuda_py311_0`` -> ``any``; a build without ``cuda`` -> None.
    """
    m = _CUDA_IN_BUILD.search(build)
    if m:
        if m.group(1):
            return f"{m.group(1)}.{m.group(2)}"
        digits = m.group(3)
        if len(digits) == 2 and digits.startswith("1"):
            return digits
        return f"{digits[:-1]}.{digits[-1]}"
    return "any" if "cuda" in build.lower() else None


_ARCH = re.compile(r"(sm|compute)_(\d+)([a-z]?)")


def arch_covers(capability: tuple[int, int], arch_list: Iterable[str]) -> bool:
    """Whether a build with ``arch_list`` (``sm_XY`` / ``compute_XY``) runs on a GPU of this capability.

    A cubin runs on its own major version at an equal or higher minor; an arch-specific cubin
    (``sm_90a``) on that exact device only; PTX (``compute_XY``) is JIT-compiled for any equal or
    newer device. Shared by check (the arch list from the probe) and smoke (from torch itself).
    """
    major, minor = capability
    for arch in arch_list:
        m = _ARCH.fullmatch(arch)
        if not m:
            continue
        digits = m.group(2)
        am, an = int(digits[:-1]), int(digits[-1])
        if m.group(1) == "sm" and am == major and an <= minor and not m.group(3):
            return True
        if m.group(1) == "sm" and m.group(3) and (am, an) == (major, minor):
            return True
        if m.group(1) == "compute" and (am, an) <= (major, minor):
            return True
    return False


# --------------------------------------------------------------------------- schema

_VERSION = re.compile(r"^\d+\.\d+$")
_DRIVER = re.compile(r"^\d+(\.\d+)*$")  # "580": a driver branch, where no exact first build is published
_PLATFORM = re.compile(r"^(linux|osx|win)-[a-z0-9_]+$")


def validate(raw: Any) -> list[str]:  # noqa: C901, PLR0912 - the data file's schema, checked key by key in one pass
    """Every way ``raw`` (both documents of compat.yaml, :func:`load_all`) breaks the schema, as ``key: problem``
    lines."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    out: list[str] = []

    def need(cond: bool, where: str, what: str) -> bool:
        if not cond:
            out.append(f"{where}: {what}")
        return cond

    def lines_ok(where: str, value: Any, pattern: re.Pattern[str] = _VERSION) -> bool:
        ok = need(isinstance(value, list) and all(isinstance(v, str) and pattern.match(v) for v in value),
                  where, f"must be a list of X.Y strings, got {value!r}")
        return ok and need(sorted(value, key=line_key) == value and len(set(value)) == len(value), where,
                           "must be sorted and without repeats")

    if not need(isinstance(raw, dict), "<top>", "must be a mapping"):
        return out
    need(raw.get("schema") == 2, "schema", "must be 2")
    py = raw.get("python")
    if need(isinstance(py, dict), "python", "must be a mapping"):
        lines_ok("python.supported", py.get("supported"))
        need(py.get("default") in (py.get("supported") or []), "python.default", "must be a supported version")
    drivers = raw.get("drivers")
    if need(isinstance(drivers, dict) and bool(drivers), "drivers", "must be a non-empty mapping"):
        for major, row in drivers.items():
            if need(isinstance(row, dict) and set(row) <= {"linux", "win", "source"} and bool(set(row) - {"source"}),
                    f"drivers.{major}", "must map linux/win to a driver version"):
                for os_name, v in ((k, v) for k, v in row.items() if k != "source"):
                    need(isinstance(v, str) and bool(_DRIVER.match(v)), f"drivers.{major}.{os_name}",
                         f"not a driver version: {v!r}")
    need(isinstance(raw.get("min_arch"), dict), "min_arch", "must be a mapping")
    need(isinstance(raw.get("lock_cuda_unnamed"), str) and bool(_VERSION.match(str(raw.get("lock_cuda_unnamed")))),
         "lock_cuda_unnamed", "must be an X.Y string")
    routes = raw.get("routes")
    if not need(isinstance(routes, dict) and {CONDA_FORGE, PYPI, PYTORCH} <= set(routes or ()), "routes",
                "must hold conda-forge, pypi and pytorch"):
        return out
    # a legacy Python's last torch and the release rows must agree (PyPI 2.15 has no 3.10 wheels)
    legacy = py.get("legacy") if isinstance(py, dict) else None
    for py_line, leg in (legacy.items() if isinstance(legacy, dict) else ()):
        last = leg.get("last_torch") if isinstance(leg, dict) else None
        if not (isinstance(last, str) and _VERSION.match(last)):
            continue
        only = leg.get("last_torch_route")  # a route's fact (PyPI's wheels), not every route's
        for name, route in routes.items():
            if only and name != only:
                continue
            for line, row in ((route or {}).get("releases") or {}).items() if isinstance(route, dict) else ():
                if (isinstance(row, dict) and row.get("status") == "released" and isinstance(line, str)
                        and _VERSION.match(line) and line_key(line) > line_key(last)
                        and py_line in (row.get("python") or ())):
                    out.append(f"routes.{name}.releases.{line}.python: lists Python {py_line}, whose last torch is "
                               f"{last} (python.legacy.{py_line}.last_torch)")
    for name, route in routes.items():
        where = f"routes.{name}"
        if not need(isinstance(route, dict), where, "must be a mapping"):
            continue
        need(route.get("manager") in ("conda", "pip"), f"{where}.manager", "must be conda or pip")
        need(isinstance(route.get("source"), str) and bool(route.get("source")), f"{where}.source",
             "must name the evidence")
        if route.get("as_of") is not None:
            need(bool(re.match(r"^\d{4}-\d{2}-\d{2}$", str(route["as_of"]))), f"{where}.as_of", "must be YYYY-MM-DD")
        if route.get("toolkit_lines") is not None:
            lines_ok(f"{where}.toolkit_lines", route.get("toolkit_lines"))
        if route.get("regenerated") is not None:  # what scripts/regen_compat.py last read
            from envguard.channelfacts import regeneration_problems

            out += [f"{where}.regenerated{p}" for p in regeneration_problems(route["regenerated"])]
        releases = route.get("releases")
        if not need(isinstance(releases, dict) and bool(releases), f"{where}.releases", "must be a mapping"):
            continue
        for line, row in releases.items():
            rw = f"{where}.releases.{line}"
            if not (need(isinstance(line, str) and bool(_VERSION.match(line)), rw, "the key must be X.Y")
                    and need(isinstance(row, dict), rw, "must be a mapping")):
                continue
            unknown = set(row) - {"status", "source", "python", "cuda", "cpu", "experimental", "versions", "glibc",
                                  "variants", "aarch64"}
            need(not unknown, rw, f"unknown keys {sorted(unknown)}")
            need(row.get("status") in STATUSES, f"{rw}.status", f"must be one of {', '.join(STATUSES)}")
            need(isinstance(row.get("source"), str) and bool(row.get("source")), f"{rw}.source",
                 "every row names its evidence")
            if row.get("status") != "released":
                continue
            lines_ok(f"{rw}.python", row.get("python"))
            cuda = row.get("cuda", [])
            if isinstance(cuda, dict):
                for plat, lines in cuda.items():
                    need(bool(_PLATFORM.match(str(plat))), f"{rw}.cuda", f"not a platform: {plat!r}")
                    lines_ok(f"{rw}.cuda.{plat}", lines)
            else:
                lines_ok(f"{rw}.cuda", cuda)
            for c in row.get("experimental") or []:
                need(c in (cuda if isinstance(cuda, list) else [x for v in cuda.values() for x in v]),
                     f"{rw}.experimental", f"{c} is not one of the release's CUDA lines")
            glibc = row.get("glibc")
            if glibc is not None:
                need(isinstance(glibc, dict) and all((k == "cpu" or _VERSION.match(str(k))) and isinstance(v, str)
                                                     and _VERSION.match(v) for k, v in glibc.items()),
                     f"{rw}.glibc", "must map cpu or a CUDA line to an X.Y glibc floor")
            variants = row.get("variants")
            if variants is not None:
                names = {str(v.get("name")) for v in route.get("variants") or [] if isinstance(v, dict)}
                ok = isinstance(variants, dict) and all(
                    isinstance(by, dict) and all(isinstance(n, list) and set(map(str, n)) <= names for n in by.values())
                    for by in variants.values())
                need(ok, f"{rw}.variants", f"must map platform -> CUDA line -> variant names of {sorted(names)}")
            if route.get("manager") == "conda":
                need(isinstance(row.get("cpu"), list) and all(_PLATFORM.match(str(p)) for p in row["cpu"]),
                     f"{rw}.cpu", "must list the platforms with CPU builds")
                for v in row.get("versions") or []:
                    need(release_line(str(v)) == line, f"{rw}.versions", f"{v} is not a {line} release")
        for i, arow in enumerate(route.get("arch") or []):
            aw = f"{where}.arch[{i}]"
            if not need(isinstance(arow, dict), aw, "must be a mapping"):
                continue
            need(isinstance(arow.get("cuda"), str) and bool(re.match(r"^\d+\.(\d+|\*)$", arow["cuda"])),
                 f"{aw}.cuda", "must be X.Y or X.*")
            sm = arow.get("sm")
            need(isinstance(sm, list) and len(sm) == 2 and isinstance(sm[0], str) and _VERSION.match(sm[0])
                 is not None and (sm[1] is None or (isinstance(sm[1], str) and _VERSION.match(sm[1]) is not None)),
                 f"{aw}.sm", "must be [oldest, newest or null] compute capabilities")
            need(isinstance(arow.get("ptx"), bool), f"{aw}.ptx", "must be true or false")
            need(isinstance(arow.get("source"), str) and bool(arow.get("source")), f"{aw}.source",
                 "every row names its evidence")
            if arow.get("torch") is not None:
                try:
                    SpecifierSet(str(arow["torch"]))
                except InvalidSpecifier:
                    need(False, f"{aw}.torch", f"not a version range: {arow['torch']!r}")
            need(set(arow) <= {"cuda", "torch", "platforms", "sm", "ptx", "list", "source"}, aw, "unknown keys")
            plats = arow.get("platforms", ["linux-64"])
            need(isinstance(plats, list) and bool(plats) and all(_PLATFORM.match(str(p)) for p in plats),
                 f"{aw}.platforms", "must list conda platforms")
            if arow.get("list") is not None:
                _arch_list_agrees(need, aw, arow)
    return out


def _arch_list_agrees(need: Any, where: str, row: Mapping[str, Any]) -> None:
    """An arch row's ``list`` (the build's TORCH_CUDA_ARCH_LIST, as its source writes it) is well formed and
    says what the row's ``sm`` and ``ptx`` say: its oldest and newest entries, and PTX when an entry has it."""
    text = row["list"]
    if not need(isinstance(text, str) and bool(_ARCH_LIST.match(text)), f"{where}.list",
                "must be a TORCH_CUDA_ARCH_LIST such as 5.0;8.6;9.0+PTX"):
        return
    caps = sorted({_cap(e.removesuffix("+PTX")) for e in text.split(";")})
    sm = row.get("sm")
    if isinstance(sm, list) and len(sm) == 2 and isinstance(sm[0], str):
        need(_cap(sm[0]) == caps[0] and (sm[1] is None or _cap(str(sm[1])) == caps[-1]), f"{where}.sm",
             f"must be the list's oldest and newest entries ({caps[0][0]}.{caps[0][1]}, {caps[-1][0]}.{caps[-1][1]})")
    need(row.get("ptx") == ("+PTX" in text), f"{where}.ptx", "must say whether the list has a +PTX entry")
