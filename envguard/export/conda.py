"""The conda side of an export: which specs were requested, and the channels the records came from.

Requested specs come from what conda and rattler record: ``conda-meta/history`` (``# update specs:`` /
``# remove specs:`` / ``# neutered specs:`` lines, replayed in order, as ``conda env export
--from-history`` does) and each record's ``requested_spec`` (conda) or ``requested_specs`` (rattler). With
neither, the requested set is inferred: the records no other record depends on.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from envguard.channels import CONDA_EXTENSIONS, channel_from_url, normalise_channel
from envguard.prefix import CondaRecord
from envguard.versions import major_minor

_MAX_HISTORY = 32 << 20
_MAX_HISTORY_LINE = 1 << 20
_HISTORY_LINE = re.compile(r"^#\s*(update|install|remove|uninstall|neutered)\s+specs:\s*(\[.*\])\s*$")
_NAME = re.compile(r"^\s*(?:[^\s:]+::)?([A-Za-z0-9_][A-Za-z0-9_.+-]*)")
TORCH_NAMES = ("pytorch", "pytorch-gpu", "pytorch-cpu")


def spec_name(spec: str) -> str | None:
    m = _NAME.match(spec)
    return m.group(1).lower() if m else None


def _valid(spec: str) -> bool:
    from rattler import MatchSpec

    try:
        MatchSpec(spec, strict=False)
    except Exception:  # noqa: BLE001 - rattler's own InvalidMatchSpecError family
        return False
    return True


def history_specs(prefix: Path) -> dict[str, str]:
    """name -> spec, replaying conda-meta/history; empty when it is absent, empty or unreadable."""
    path = prefix / "conda-meta" / "history"
    specs: dict[str, str] = {}
    try:
        if not path.is_file() or path.stat().st_size > _MAX_HISTORY:
            return specs
        with open(path, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if len(line) > _MAX_HISTORY_LINE:  # no spec list is this long; do not parse one that is
                    continue
                m = _HISTORY_LINE.match(line.strip())
                if not m:
                    continue
                try:
                    items = ast.literal_eval(m.group(2))
                except (ValueError, SyntaxError, MemoryError, RecursionError):
                    continue
                if not isinstance(items, list):
                    continue
                for item in items:
                    name = spec_name(item) if isinstance(item, str) else None
                    if name is None:
                        continue
                    if m.group(1) in ("remove", "uninstall"):
                        specs.pop(name, None)
                    else:
                        specs[name] = item.strip()
    except OSError:
        return {}
    return specs


@dataclass
class CondaRequest:
    specs: list[str]  # in spec-file order: python first, then by name
    source: str  # "history" | "records" | "inferred" | "none"


def _depended_on(records: list[CondaRecord]) -> set[str]:
    names: set[str] = set()
    for r in records:
        for dep in r.depends:
            n = dep.split(None, 1)[0].lower() if dep.strip() else ""
            if n:
                names.add(n)
    return names


def _mm(version: str) -> str:
    return major_minor(version) or version  # a version without a minor (``12``) is written as it is


def _torch_guard(r: CondaRecord) -> str:
    """``pytorch=2.13.*=cpu*``: the release line and the build variant, so a re-solve keeps CPU or CUDA."""
    variant = r.build.split("_", 1)[0].lower()
    if re.fullmatch(r"cpu|cuda\d*|gpu", variant):
        return f"{r.name}={_mm(r.version)}.*={variant}*"
    return f"{r.name}={_mm(r.version)}.*"


def requested_specs(prefix: Path, records: list[CondaRecord], *, pinned: bool, needs_pip: bool) -> CondaRequest:
    """The conda dependencies of the exported environment.yml.

    ``pinned`` writes ``name=version=build`` for every requested package. ``needs_pip`` adds ``pip`` when
    the file gets a ``pip:`` section and pip is installed by conda.
    """
    by_name = {r.name: r for r in records}
    if not records:
        return CondaRequest([], "none")
    recorded = history_specs(prefix)
    source = "history" if recorded else "records"
    for r in records:
        for s in r.requested_specs:
            n = spec_name(s)
            if n and n not in recorded:
                recorded[n] = s.strip()
    chosen: dict[str, str] = {n: s for n, s in recorded.items() if n in by_name and _valid(s)}
    if not chosen:
        source = "inferred"
        deps = _depended_on(records)
        for r in records:
            if r.name not in deps:
                chosen[r.name] = _torch_guard(r) if r.name in TORCH_NAMES else r.name
        cuda = by_name.get("cuda-version")
        if cuda is not None and any(n in chosen for n in TORCH_NAMES):
            chosen["cuda-version"] = f"cuda-version={_mm(cuda.version)}"
    py = by_name.get("python")
    if py is not None and "python" not in chosen:
        chosen["python"] = f"python={_mm(py.version)}"
    if needs_pip and "pip" in by_name and "pip" not in chosen:
        chosen["pip"] = "pip"
    if pinned:
        chosen = {n: f"{n}={by_name[n].version}={by_name[n].build}" for n in chosen}
    order = sorted(chosen, key=lambda n: (n != "python", n not in TORCH_NAMES, n))
    return CondaRequest([chosen[n] for n in order], source)


# ------------------------------------------------------------------ channels


def record_channel(r: CondaRecord) -> str | None:
    """The channel as an environment file names it: ``conda-forge`` for anaconda.org channels, the full URL
    of anything else (``https://repo.anaconda.com/pkgs/main``, ``file:///srv/channel``)."""
    name = channel_from_url(r.url) if r.url else normalise_channel(r.channel)
    if not name:
        return None
    if name.startswith("pkgs/"):  # the defaults channels live on repo.anaconda.com, not under the alias
        return f"https://repo.anaconda.com/{name}"
    return name


def channels(records: list[CondaRecord]) -> list[str]:
    """Every channel the records came from, the one most packages came from first (then by first use)."""
    seen = [c for c in (record_channel(r) for r in records) if c]
    counts = Counter(seen)
    first = {c: i for i, c in reversed(list(enumerate(seen)))}
    return sorted(counts, key=lambda c: (-counts[c], first[c]))


def record_url(r: CondaRecord) -> str | None:
    """The archive URL: the record's own, else the channel's subdir plus the file name (as conda does)."""
    if r.url:
        return r.url
    if r.channel and r.subdir and r.fn.endswith(CONDA_EXTENSIONS):
        return f"{r.channel.rstrip('/')}/{r.subdir}/{r.fn}"
    return None


def toposorted(records: list[CondaRecord]) -> list[CondaRecord]:
    """Dependencies before their dependents (python before noarch:python packages), else by name."""
    by_name = {r.name: r for r in records}
    out: list[CondaRecord] = []
    state: dict[str, int] = {}
    for root in sorted(by_name):
        stack = [(root, iter(sorted({d.split(None, 1)[0].lower() for d in by_name[root].depends if d.strip()})))]
        if state.get(root):
            continue
        state[root] = 1
        while stack:
            name, deps = stack[-1]
            nxt = next((d for d in deps if d in by_name and not state.get(d)), None)
            if nxt is None:
                stack.pop()
                state[name] = 2
                out.append(by_name[name])
            else:
                state[nxt] = 1
                stack.append((nxt, iter(sorted({d.split(None, 1)[0].lower() for d in by_name[nxt].depends
                                                if d.strip()}))))
    return out
