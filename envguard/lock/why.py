"""``envguard why NAME``: the dependency paths from the spec's lines to a locked package, per platform.

Read from the lock alone (no solve, no channel, no conda-lock import): every lock entry lists what it
depends on, so the lock is a graph and the question "which request brought ``cudatoolkit`` (or a CPU build
of pytorch) into this lock?" is a walk backwards from the package to the spec's lines. The spec (the
``-f`` files, else the lock's own ``metadata.sources``) only names the roots and their lines. Without it
the roots are the lock's top-level packages (those nothing else depends on), and the answer says so.

Each request gets its shortest path; a package reached from many requests lists each of them once.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envguard.errors import UserError
from envguard.lock.lockfile import Lock, LockEntry, read_lock
from envguard.lock.relock import canonical
from envguard.redact import redact

SCHEMA = "envguard.why/1"


@dataclass(frozen=True)
class Step:
    name: str
    version: str
    build: str
    manager: str
    constraint: str = ""  # the range the previous step puts on this one ("" for the first)


@dataclass(frozen=True)
class Path_:
    request: str | None  # the spec line as written; None when the root is a top-level package of the lock
    file: str | None
    line: int | None
    steps: tuple[Step, ...]


@dataclass
class PlatformWhy:
    platform: str
    found: Step | None  # the package itself on this platform, None when the platform does not have it
    paths: list[Path_] = field(default_factory=list)


@dataclass
class WhyResult:
    name: str
    lockfile: str
    cuda: str | None  # the lock's recorded __cuda assumption
    spec_files: list[str]  # where the roots came from; empty: the lock's top-level packages
    platforms: list[PlatformWhy]

    def to_json(self) -> dict[str, Any]:
        def step(s: Step) -> dict[str, str]:
            return {"name": s.name, "version": s.version, "build": s.build, "manager": s.manager,
                    "constraint": s.constraint}

        return {
            "schema": SCHEMA, "exit_code": 0,  # the fields every command's JSON carries (docs/json.md)
            "counts": {"platforms": len(self.platforms), "found": sum(p.found is not None for p in self.platforms),
                       "paths": sum(len(p.paths) for p in self.platforms)},
            "name": self.name, "lockfile": self.lockfile, "cuda": self.cuda,
            "spec_files": list(self.spec_files),
            "platforms": [{"platform": p.platform, "found": p.found is not None,
                           "package": step(p.found) if p.found else None,
                           "paths": [{"request": x.request, "file": x.file, "line": x.line,
                                      "steps": [step(s) for s in x.steps]} for x in p.paths]}
                          for p in self.platforms],
        }


def _key(e: LockEntry) -> str:
    return canonical(e.name)


def _step(e: LockEntry, constraint: str = "") -> Step:
    return Step(e.name, e.version, e.build if e.manager == "conda" else "", e.manager, constraint)


def _spec_roots(files: list[Path], platform: str) -> list[tuple[str, str | None, str | None, int | None]]:
    """(canonical name, line as written, file, line number) of every spec line that applies to ``platform``."""
    from envguard.lock.changes import name_of
    from envguard.lock.spec import read_spec

    spec = read_spec(files, [platform])
    conda, pip = spec.dependencies_for(platform)
    out: list[tuple[str, str | None, str | None, int | None]] = []
    for manager, lines in (("conda", conda), ("pip", pip)):
        for text in lines:
            name = name_of(manager, text)
            if name:
                file, line = spec.origins.get((manager, text), (None, None))
                out.append((canonical(name), redact(text), file, line))  # a `https://u:p@host/ch::pkg` line
    return out


def _paths(entries: list[LockEntry], target: str, roots: list[tuple[str, str | None, str | None, int | None]]
           ) -> list[Path_]:
    """The shortest path from each root to ``target``: one breadth-first walk backwards from the target."""
    by_key: dict[str, LockEntry] = {}
    for e in entries:
        by_key.setdefault(_key(e), e)  # a conda and a pip record of one name: the conda one (pip's is on top)
    dependents: dict[str, list[tuple[str, str]]] = {}
    aliases: dict[str, str] | None = None
    for e in entries:
        for dep, rng in e.dependencies.items():
            key = canonical(dep)
            if key not in by_key and e.manager == "pip":  # a PyPI name conda spells otherwise
                aliases = _pypi_to_conda() if aliases is None else aliases
                key = aliases.get(key, key)
            dependents.setdefault(key, []).append((_key(e), rng))
    # next_hop[k] = (the package k depends on, on the way to the target, and the range k puts on it)
    next_hop: dict[str, tuple[str, str] | None] = {target: None}
    queue = deque([target])
    while queue:
        k = queue.popleft()
        for parent, rng in sorted(dependents.get(k, [])):
            if parent not in next_hop and parent in by_key:
                next_hop[parent] = (k, rng)
                queue.append(parent)
    out: list[Path_] = []
    seen: set[tuple[str | None, tuple[str, ...]]] = set()
    for name, text, file, line in roots:
        if name not in next_hop or name not in by_key:
            continue
        steps = [_step(by_key[name])]
        k = name
        hop = next_hop[k]
        while hop is not None:
            k, rng = hop
            steps.append(_step(by_key[k], rng))
            hop = next_hop[k]
        chain = tuple(s.name for s in steps)
        if (text, chain) in seen:
            continue
        seen.add((text, chain))
        out.append(Path_(text, file, line, tuple(steps)))
    return sorted(out, key=lambda p: (len(p.steps), p.file or "", p.line or 0))


def _top_level(entries: list[LockEntry]) -> list[tuple[str, str | None, str | None, int | None]]:
    needed = {canonical(d) for e in entries for d in e.dependencies}
    return [(_key(e), None, None, None) for e in entries if _key(e) not in needed]


def _pypi_to_conda() -> dict[str, str]:
    """PyPI name -> conda name where they differ (torch -> pytorch): a pip package's dependency on torch is
    satisfied by conda's pytorch. The same mapping the lock used (envguard/data/conda-pypi-mapping.json)."""
    import json

    from envguard.lock.pypi import mapping_path

    data = json.loads(mapping_path().read_text(encoding="utf-8"))
    return {canonical(k): canonical(str(v.get("conda_name") or k)) for k, v in data.items() if isinstance(v, dict)}


def _spec_files(lock: Lock, files: list[Path] | None) -> list[Path]:
    if files:
        return [Path(f) for f in files]
    found = [lock.path.parent / s for s in lock.sources]
    return [f for f in found if f.is_file()] if found and all(f.is_file() for f in found) else []


def why_locked(name: str, *, lockfile: Path | None = None, files: list[Path] | None = None,
        platforms: list[str] | None = None) -> WhyResult:
    """Why ``name`` is in the lock: per platform, the path from each spec line that pulls it in (``envguard why``)."""
    from envguard.lock import default_files
    from envguard.project import lock_for_spec

    path = lock_for_spec(default_files(files)[0], lockfile)
    if lockfile is None and not files:  # a project with variants: its default variant's lock (docs/variants.md)
        from envguard.variants import declared_variants, default_variant

        default = default_variant(declared_variants(default_files(None)[0]))
        path = default.lockfile if default is not None else path
    if not path.is_file():
        from envguard.lock import fix_command

        make = fix_command(default_files(files), path)  # no solve here: `why` reads a lock, it never makes one
        error = UserError("lock file not found", file=str(path), key="--lockfile",
                          fix=f"check the path, or make that lock with `{make}`")
        error.command = make
        raise error
    lock = read_lock(path)
    target = canonical(name)
    chosen = list(platforms) if platforms else list(lock.platforms)
    unknown = [p for p in chosen if p not in lock.platforms]
    if unknown:
        raise UserError(f"{path} has no platform {unknown[0]}", key="--platform",
                        fix=f"use one of {', '.join(lock.platforms)}")
    if not any(_key(e) == target for e in lock.packages if e.platform in chosen):
        import difflib

        close = difflib.get_close_matches(name, sorted({e.name for e in lock.packages}), n=1)
        raise UserError(f"{name} is not in the lock on {', '.join(chosen)}", file=str(path), key="NAME",
                        fix=f"did you mean {close[0]}?" if close else "name a locked package (conda or pip)")
    spec_files = _spec_files(lock, files)
    result = WhyResult(name, str(path), lock.cuda, [str(f) for f in spec_files], [])
    for p in chosen:
        entries = [e for e in lock.packages if e.platform == p]
        hit = next((e for e in entries if _key(e) == target), None)
        if hit is None:
            result.platforms.append(PlatformWhy(p, None))
            continue
        roots = _spec_roots(spec_files, p) if spec_files else _top_level(entries)
        paths = _paths(entries, target, roots)
        result.platforms.append(PlatformWhy(p, _step(hit), paths))
    return result
