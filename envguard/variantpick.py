"""Which declared variant this machine runs: the pure pick rule of create, check and fleet (docs/variants.md).

The vocabulary is conda's: ``__cuda`` (CEP 30: the newest CUDA the driver supports; ``CONDA_OVERRIDE_CUDA``
replaces it, an empty value means absent) and ``__cuda_arch`` (CEP 46: the lowest compute capability over the
machine's GPUs, absent without ``__cuda``; ``CONDA_OVERRIDE_CUDA_ARCH`` replaces it, empty means absent). A
CUDA variant runs when ``__cuda`` is at least its major line (conda-forge's ``cuda-version X.Y`` constrains
``__cuda >=X`` only: minor-version compatibility) on a driver at least the line's minimum, and every GPU is
covered by the build's architectures: natively (a cubin for its major at or below its minor), or through the
build's PTX, which the driver JIT-compiles only when it supports the CUDA release that wrote the PTX.

Rule: no ``__cuda`` -> ``cpu``; else the newest CUDA variant that runs and covers every GPU; else the newest
that runs with GPU architectures unknown; else ``cpu`` with a warning saying why. Nothing here reads the
machine: :func:`host_facts` takes the driver facts (envguard.driver) and the environment's overrides.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from envguard.driver import DriverInfo
from envguard.errors import UserError

if TYPE_CHECKING:
    from envguard.compat import Compat

# The imports and the data a pick needs follow the machine (bench/variant_pick.py): with no driver the pick is
# the CPU variant and neither the compatibility data nor the version parser (packaging) is loaded; with one,
# the data is read when a CUDA variant is judged (once per process: compat.load() is cached).

OVERRIDE_CUDA = "CONDA_OVERRIDE_CUDA"
OVERRIDE_CUDA_ARCH = "CONDA_OVERRIDE_CUDA_ARCH"
_CUDA_VALUE = re.compile(r"^\d+(\.\d+){0,2}$")
_ARCH_VALUE = re.compile(r"^(\d+)\.(\d+)[a-z]?$")  # "9.0", "10.0", "9.0a" (CEP 46 drops the letter)


class VariantLike(Protocol):
    """What the rule reads of a variant (envguard.variants.Variant): its name and CUDA line (None: CPU)."""

    @property
    def name(self) -> str: ...

    @property
    def cuda(self) -> str | None: ...


@dataclass(frozen=True)
class Host:
    """This machine in CEP 30/46 terms, after the overrides."""

    cuda: str | None  # __cuda: "12.4"; None when absent
    cuda_arch: str | None  # __cuda_arch: the lowest capability over the GPUs, "8.0"; None when absent
    gpus: tuple[str, ...] = ()  # each GPU's capability ("" unknown); the override's one value when set
    driver: str | None = None  # the driver version, when detected and __cuda not overridden
    said_by: str = ""  # "driver 550.54.15" / "CONDA_OVERRIDE_CUDA=12.6"

    def to_dict(self) -> dict[str, Any]:
        return {"cuda": self.cuda, "cuda_arch": self.cuda_arch, "gpus": list(self.gpus), "driver": self.driver,
                "said_by": self.said_by}


@dataclass(frozen=True)
class Verdict:
    """Whether one variant runs here (``runs``), with every GPU's architecture known and covered (``covered``),
    and why, in a few words."""

    name: str
    cuda: str | None
    runs: bool
    covered: bool
    why: str


@dataclass(frozen=True)
class Pick:
    name: str | None  # None: no variant declared
    reason: str  # one line: which variant and why
    runs: bool  # False: nothing declared runs here (create needs --variant)
    warning: str | None = None  # the cpu fallback on a machine with a driver, and why
    verdicts: tuple[Verdict, ...] = ()
    host: Host | None = field(default=None, compare=False)

    def verdict(self, name: str) -> Verdict | None:
        return next((v for v in self.verdicts if v.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        return {"variant": self.name, "reason": self.reason, "runs": self.runs, "warning": self.warning,
                "host": self.host.to_dict() if self.host else None,
                "verdicts": [{"variant": v.name, "cuda": v.cuda, "runs": v.runs, "covered": v.covered,
                              "why": v.why} for v in self.verdicts]}


def _compat() -> Compat:
    from envguard import compat

    return compat.load()


def _line_key(text: str) -> Any:
    from envguard.versions import line_key as key

    return key(text)


def _release(text: str) -> tuple[int, ...]:
    from envguard.versions import release as segments

    return segments(text)


def _major(text: str) -> int:
    rel = _release(text)
    return rel[0] if rel else 0


def _sm(cap: str) -> str:
    return "sm_" + cap.replace(".", "")


def _cap(text: str) -> tuple[int, int]:
    rel = _release(text) + (0, 0)
    return rel[0], rel[1]


def host_facts(driver: DriverInfo | None, overrides: Mapping[str, str]) -> Host:
    """The machine as conda's virtual packages describe it: the detected driver, replaced by
    ``CONDA_OVERRIDE_CUDA`` / ``CONDA_OVERRIDE_CUDA_ARCH`` where set (an empty value: absent). A value that
    cannot be read is an error (exit 2), never a silent fall back to detection."""
    cuda: str | None
    said_by: str
    detected = driver.driver_version if driver else None
    if OVERRIDE_CUDA in overrides:
        value = overrides[OVERRIDE_CUDA].strip()
        if value and not _CUDA_VALUE.match(value):
            raise UserError(f"{value!r} is not a CUDA version", key=OVERRIDE_CUDA,
                            fix=f"set {OVERRIDE_CUDA} to a version such as 12.6, or to '' for no CUDA")
        cuda, said_by, detected = (value or None), f"{OVERRIDE_CUDA}={value}", None
    elif driver is not None:
        cuda = driver.cuda_driver_version or _cuda_of_driver(driver.driver_version)
        said_by = f"driver {driver.driver_version}"
    else:
        cuda, said_by = None, "no NVIDIA driver"
    gpus = tuple(cap for _, cap in driver.gpus) if driver else ()
    if OVERRIDE_CUDA_ARCH in overrides:
        value = overrides[OVERRIDE_CUDA_ARCH].strip()
        m = _ARCH_VALUE.match(value.split("=", 1)[0]) if value else None
        if value and m is None:
            raise UserError(f"{value!r} is not a compute capability", key=OVERRIDE_CUDA_ARCH,
                            fix=f"set {OVERRIDE_CUDA_ARCH} to a capability such as 8.0, or to '' for none")
        gpus = (f"{m.group(1)}.{m.group(2)}",) if m else ()
        said_by += f", {OVERRIDE_CUDA_ARCH}={value}"
    known = [g for g in gpus if g]
    arch = min(known, key=_cap) if known else None
    if cuda is None:  # CEP 46: __cuda_arch is absent whenever __cuda is
        arch, gpus = None, ()
    return Host(cuda=cuda, cuda_arch=arch, gpus=gpus, driver=detected, said_by=said_by)


def _cuda_of_driver(driver_version: str) -> str | None:
    """The CUDA major line a driver supports when it did not say (an nvidia-smi without its banner): the
    newest line whose minimum driver it meets, from the compatibility data."""
    from envguard import compat

    c = _compat()
    best = None
    for major in sorted(c.raw["drivers"], key=int):
        minimum = c.min_driver(major)
        if minimum and compat.driver_satisfies(driver_version, minimum):
            best = f"{major}.0"
    return best


def default_arch(cuda: str, platform: str | None = None) -> Any:
    """conda-forge's architectures for a CUDA line on ``platform`` (envguard.compat: a row may hold for some
    platforms only), None when not recorded."""
    return _compat().arch("conda-forge", cuda, None, platform)


def _covers(cap: str, cuda: str, host: Host, arch_of: Callable[[str], Any]) -> tuple[bool, str]:
    """Whether a GPU of capability ``cap`` runs the CUDA ``cuda`` build, and how (or why not)."""
    from envguard import compat

    c = _cap(cap)
    rng = arch_of(cuda)
    if rng is None:
        oldest = _compat().min_arch(cuda)
        if oldest and c < _cap(oldest):
            return False, f"{_sm(cap)} is older than CUDA {_major(cuda)}'s oldest, {_sm(oldest)}"
        return True, "native"
    if c < _cap(rng.oldest):
        return False, f"{_sm(cap)} is below the build's {rng.describe()}"
    if rng.arches:  # the build's own list decides, as check's does: a major it skips (sm_110) has no cubin
        if compat.arch_covers(c, [a for a in rng.arches if a.startswith("sm_")]):
            return True, "native"
        if not compat.arch_covers(c, rng.arches):
            return False, f"{_sm(cap)} has no kernels in the build's list ({' '.join(rng.arches)})"
    elif rng.newest is None or c[0] <= _cap(rng.newest)[0]:
        return True, "native"
    if not rng.ptx:
        return False, f"{_sm(cap)} is past the build's {rng.describe()}"
    if host.cuda is None or _line_key(host.cuda) < _line_key(cuda):
        return False, (f"{_sm(cap)} needs the build's CUDA {cuda} PTX JIT-compiled, and a driver for CUDA "
                       f"{host.cuda} cannot")
    return True, "PTX"


def judge(variant: VariantLike, host: Host, arch_of: Callable[[str], Any] | None = None,
          platform: str | None = None) -> Verdict:
    """Whether ``variant`` runs on ``host`` (a ``platform`` machine, where known), and why."""
    if not variant.cuda:
        return Verdict(variant.name, None, True, True, "CPU build")
    cuda = variant.cuda
    if host.cuda is None:
        return Verdict(variant.name, cuda, False, False, "no CUDA here" if host.said_by.startswith(OVERRIDE_CUDA)
                       else "no NVIDIA driver")
    from envguard import compat

    minimum = _compat().min_driver(cuda)
    if _major(host.cuda) < _major(cuda):
        need = f"driver {minimum}+" if minimum else f"a CUDA {_major(cuda)} driver"
        return Verdict(variant.name, cuda, False, False, f"needs CUDA {_major(cuda)} ({need})")
    if host.driver and minimum and not compat.driver_satisfies(host.driver, minimum):
        return Verdict(variant.name, cuda, False, False, f"needs driver {minimum}+")
    how: list[str] = []
    for cap in sorted(set(host.gpus), key=lambda g: _cap(g) if g else (0, 0)):
        if not cap:
            continue
        ok, why = _covers(cap, cuda, host, arch_of or (lambda line: default_arch(line, platform)))
        if not ok:
            return Verdict(variant.name, cuda, False, False, why)
        how.append(_sm(cap) + (" through PTX" if why == "PTX" else ""))
    known = bool(host.gpus) and all(host.gpus)
    covers = f"covers {', '.join(how)}" if how else ""
    if not known:
        covers = (covers + "; " if covers else "") + "GPU architecture not known"
    return Verdict(variant.name, cuda, True, known, covers)


def pick(variants: Sequence[VariantLike], driver: DriverInfo | None, overrides: Mapping[str, str],
         arch_of: Callable[[str], Any] | None = None, platform: str | None = None) -> Pick:
    """The variant this machine runs (module docstring), with one line saying which and why.

    ``overrides``: the environment (only ``CONDA_OVERRIDE_CUDA`` and ``CONDA_OVERRIDE_CUDA_ARCH`` are read);
    ``arch_of``: a CUDA line's architectures (an envguard.compat.ArchRange), conda-forge's on ``platform`` by
    default."""
    host = host_facts(driver, overrides)
    return pick_for(variants, host, arch_of, platform)


def pick_for(variants: Sequence[VariantLike], host: Host, arch_of: Callable[[str], Any] | None = None,
             platform: str | None = None) -> Pick:
    verdicts = tuple(judge(v, host, arch_of, platform) for v in variants)
    if not verdicts:
        return Pick(None, "no variants declared", True, None, (), host)
    cpu = next((v for v in verdicts if v.cuda is None), None)
    where = _where(host)
    if host.cuda is None and cpu is not None:  # before the CUDA lines are sorted: no version parser needed
        return Pick(cpu.name, f"variant {cpu.name}: {where}", True, None, verdicts, host)
    gpu = sorted((v for v in verdicts if v.cuda), key=lambda v: _line_key(v.cuda or "0"), reverse=True)

    def why_not(skipped: Sequence[Verdict]) -> str:
        return "".join(f"; not {v.name}: {v.why}" for v in skipped)

    if host.cuda is None:  # and no CPU variant
        newest = gpu[0]
        return Pick(newest.name, f"no variant runs here: {where}, and no CPU variant is declared", False,
                    None, verdicts, host)
    for tier in (lambda v: v.runs and v.covered, lambda v: v.runs):
        for i, v in enumerate(gpu):
            if tier(v):
                return Pick(v.name, f"variant {v.name}: {where}; {v.why}{why_not(gpu[:i])}".replace(": ; ", ": "),
                            True, None, verdicts, host)
    if cpu is not None:
        warning = (f"{where}, and no declared CUDA variant runs here ("
                   + "; ".join(f"{v.name}: {v.why}" for v in gpu) + f"): {cpu.name} picked")
        return Pick(cpu.name, f"variant {cpu.name}: {where}{why_not(gpu)}", True, warning, verdicts, host)
    return Pick(gpu[0].name, f"no variant runs here: {where}{why_not(gpu)}", False, None, verdicts, host)


def _where(host: Host) -> str:
    if host.cuda is None:
        return host.said_by if host.said_by.startswith(OVERRIDE_CUDA) else "no NVIDIA driver"
    text = f"{host.said_by} supports CUDA {host.cuda}" if not host.said_by.startswith(OVERRIDE_CUDA) \
        else f"{host.said_by}"
    if host.cuda_arch:
        text += f", GPUs from {_sm(host.cuda_arch)}"
    return text


def fits_better(current: str, chosen: Pick) -> bool:
    """Whether the pick names another variant than ``current`` for a reason worth a warning: the current one
    runs, and the pick is a CUDA variant with every GPU covered where ``current`` is CPU or older."""
    if chosen.name in (None, current) or not chosen.runs or chosen.warning:
        return False
    mine, best = chosen.verdict(current), chosen.verdict(chosen.name or "")
    if mine is None or best is None or not mine.runs:
        return False
    if mine.cuda is None:
        return best.cuda is not None
    return best.cuda is not None and _line_key(best.cuda) > _line_key(mine.cuda) and best.covered


# -------------------------------------------------------------------------- the table in docs/variants.md

TABLE_DRIVERS = (("535.54.03", "12.2"), ("550.54.15", "12.4"), ("570.86.15", "12.8"), ("580.65.06", "13.0"))
TABLE_GPUS = (("V100", "7.0"), ("A100", "8.0"), ("H100", "9.0"), ("B200", "10.0"), ("RTX 5090", "12.0"))


@dataclass(frozen=True)
class _Named:
    name: str
    cuda: str | None


def table(names: Sequence[str]) -> str:
    """The markdown table driver x GPU -> variant for the declared ``names`` (``cpu``, ``cuda-X.Y``), as
    docs/variants.md shows it; a test checks the file against this function."""
    variants = [_Named(n, None if n == "cpu" else n.split("-", 1)[1]) for n in names]
    head = "| driver (`__cuda`) | " + " | ".join(f"{g} ({_sm(c)})" for g, c in TABLE_GPUS) + " |"
    rows = [head, "|" + "---|" * (len(TABLE_GPUS) + 1)]
    for drv, cuda in TABLE_DRIVERS:
        cells = []
        for gname, cap in TABLE_GPUS:
            p = pick(variants, DriverInfo(drv, cuda, [(gname, cap)], "nvml"), {})
            cells.append(f"{p.name}" + (" (warning)" if p.warning else ""))
        rows.append(f"| {drv.split('.')[0]} ({cuda}) | " + " | ".join(cells) + " |")
    no_driver = pick(variants, None, {}).name
    rows.append("| none | " + " | ".join(str(no_driver) for _ in TABLE_GPUS) + " |")
    return "\n".join(rows)
