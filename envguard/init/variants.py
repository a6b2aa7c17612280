"""``envguard init --cuda cpu --cuda 12.9 [--cuda 13.0 ...]``: a project with one variant per value
(docs/variants.md).

Each value is resolved, rendered, solved against the channel's records and linted exactly as a single
``--cuda`` value is (envguard.init): a value the data refuses is refused the same way. The files written:

* ``environment.yml``: the first value's file, unchanged (so ``conda env create -f environment.yml`` builds
  the default variant, and a single-variant reader sees an ordinary project);
* ``variants/<name>.yml`` per value (``cpu``, ``cuda-X.Y``), the default's too: the lines in which the
  variants' files differ (the pytorch build line, ``cuda-version``), and ``platforms:`` where the variant's
  differ from environment.yml's. conda-lock's ``-f environment.yml -f variants/<name>.yml`` merge (the later
  file wins per package) then gives exactly that variant's own file, which is what was solved and linted.

A merge can add or replace a line, never drop one: a variant that lacks a line the default holds (a ``cpu``
variant after a CUDA default's ``cuda-version``) cannot be written as an overlay, and is refused with the
order that works.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envguard.errors import UserError
from envguard.init import (
    CPU,
    DEFAULT_CHANNEL,
    InitResult,
    check_output,
    checked_text,
    command_line,
    environment_name,
    hardware_comment,
    records_route,
    resolve,
)

_NAME = re.compile(r"^\s*(?:[^\s:]+::)?([A-Za-z0-9_.-]+)")


@dataclass
class VariantsInit:
    """What ``init`` wrote for several ``--cuda`` values: the base file, then each variant's overlay."""

    spec: InitResult  # environment.yml: the default variant's own file
    variants: list[tuple[str, Path, InitResult]]  # (name, overlay path, that variant's resolved file), default first


def variant_name(cuda: str) -> str:
    return CPU if cuda == CPU else f"cuda-{cuda}"


def _deps(text: str) -> list[str]:
    import yaml

    data = yaml.safe_load(text)
    return [str(d) for d in data.get("dependencies") or [] if isinstance(d, str)]


def _name_of(dep: str) -> str:
    m = _NAME.match(dep)
    return m.group(1).lower() if m else dep


def _platforms_for(route: Any, torch: str, cuda: str, platforms: list[str] | None) -> list[str] | None:
    """The given --platform values this kind of build exists for (a CUDA variant: not osx-arm64), or all of
    them when none does (resolve then refuses, naming what exists)."""
    if not platforms:
        return None
    rel = route.release(".".join(torch.split(".")[:2]))
    if rel is None:
        return platforms
    allowed = list(rel.cpu) if cuda == CPU else [p for p in rel.cuda_platforms if rel.cuda_on(p)]
    return [p for p in platforms if p in allowed] or platforms


def _overlay_text(name: str, command: str, hardware: str, platforms: list[str] | None, lines: list[str]) -> str:
    out = [f"# The {name} variant of environment.yml, written by `{command}`.",
           f"# `conda-lock -f environment.yml -f variants/{name}.yml` merges the two: a line here replaces",
           "# environment.yml's line for the same package (docs/variants.md).",
           *([hardware] if hardware else [])]
    if platforms:
        out += ["platforms:", *(f"  - {p}" for p in platforms)]
    out += ["dependencies:", *(f"  - {d}" for d in lines)]
    return "\n".join(out) + "\n"


def _without_single_lock_next(text: str) -> str:
    """The template's "Next:" comment names the single lock (conda-lock.yml) a project without variants gets;
    in a variant project that is wrong, so it gives way to what create and check do with the variants."""
    lines = text.split("\n")
    start = next((i for i, line in enumerate(lines) if line.startswith("# Next:")), None)
    if start is None:
        return text
    end = start
    while end + 1 < len(lines) and lines[end + 1].startswith("# ") and "Next" not in lines[end + 1] \
            and not lines[end].rstrip().endswith("."):
        end += 1
    replacement = ["# Next: `envguard create` builds the variant this machine runs from its lock,",
                   "# `envguard check` verifies it."]
    return "\n".join(lines[:start] + replacement + lines[end + 1:])


def init_variants(cuda: list[str], python: str | None = None, torch: str | None = None, channel: str | None = None,
                  platforms: list[str] | None = None, name: str | None = None,
                  output: str | Path = "environment.yml", force: bool = False,
                  channel_url: str | None = None) -> VariantsInit:
    """Write environment.yml (the first value: the default variant) and variants/<name>.yml per value."""
    if str(output) == "-":
        raise UserError("several --cuda values write several files (environment.yml and variants/*.yml); -o - "
                        "prints one", key="--output",
                        fix="write them with -o environment.yml, or print one variant with a single --cuda")
    out = Path(output)
    route, evidence, notes, records = records_route(channel or DEFAULT_CHANNEL, platforms, channel_url)
    resolved: list[tuple[str, str, str, str, list[str]]] = []
    for value in cuda:  # every value refused as a single --cuda value would be, before anything is solved
        first_torch = resolved[0][1] if resolved else torch
        plats = _platforms_for(route, first_torch, (value or "").strip().lower(), platforms) if first_torch \
            else platforms
        resolved.append(resolve(python, first_torch, value, channel, plats, route))
    names = [variant_name(r[2]) for r in resolved]
    twice = next((n for i, n in enumerate(names) if n in names[:i]), None)
    if twice:
        raise UserError(f"two --cuda values are both the {twice} variant", key="--cuda",
                        fix="give each CUDA line once (--cuda 12 means the newest 12.x line)")

    overlays = {n: out.parent / "variants" / f"{n}.yml" for n in names}
    for path in [out, *overlays.values()]:
        check_output(path, force, "pass --force to replace it, -o to write elsewhere")
    name = environment_name(name, out)
    python_, torch_, _c, channel_, _p = resolved[0]
    command = command_line(python_, torch_, resolved[0][2], channel_, list(platforms or []) or resolved[0][4], name)
    command = command.replace(f"--cuda {resolved[0][2]}", " ".join(f"--cuda {r[2]}" for r in resolved))
    if not platforms:
        command = re.sub(r" --platform \S+", "", command)  # each variant's own default platforms
    results: list[InitResult] = []
    for py, tv, cv, ch, plats in resolved:
        template, text, warnings, proved = checked_text(py, tv, cv, ch, plats, name, command, route, records, out)
        results.append(InitResult(None, text, py, tv, cv, ch, plats, template, warnings, evidence + proved,
                                  notes[0] if notes else None))

    deps = [_deps(r.text) for r in results]
    every = {_name_of(d) for ds in deps for d in ds}
    varying = {n for n in every if len({frozenset(d for d in ds if _name_of(d) == n) for ds in deps}) > 1}
    base_names = {_name_of(d) for d in deps[0]}
    for n, ds in zip(names[1:], deps[1:], strict=True):
        lacking = sorted((base_names & varying) - {_name_of(d) for d in ds})
        if lacking:
            raise UserError(f"the {n} variant has no {lacking[0]} line, which the default {names[0]} variant's "
                            "environment.yml holds: an overlay can replace a line, not drop one", key="--cuda",
                            fix=f"give --cuda {resolved[names.index(n)][2]} first, so that {n} is the default")
    texts: dict[Path, str] = {}
    for n, r, ds in zip(names, results, deps, strict=True):
        line = ".".join(r.torch.split(".")[:2])
        hardware = hardware_comment(r.channel, line, r.cuda, r.platforms, route) if r.cuda != CPU else ""
        texts[overlays[n]] = _overlay_text(n, command, hardware, r.platforms if r.platforms != results[0].platforms
                                           else None, [d for d in ds if _name_of(d) in varying])

    from envguard.publish import publish

    for path, text in texts.items():  # the overlays first: an environment.yml is never left without them
        path.parent.mkdir(parents=True, exist_ok=True)
        publish(path, text.encode("utf-8"))
    head, _, rest = results[0].text.partition("\n")  # the default's file, plus one comment saying what else is
    text = (f"{head}\n# The {names[0]} variant: `envguard lock` locks it and every variants/<name>.yml into "
            f"conda-lock.<name>.yml\n# (docs/variants.md).\n{_without_single_lock_next(rest)}")
    publish(out, text.encode("utf-8"))
    spec = InitResult(out, text, *[getattr(results[0], f) for f in
                                              ("python", "torch", "cuda", "channel", "platforms", "template",
                                               "warnings", "evidence", "stale")])
    return VariantsInit(spec, [(n, overlays[n], r) for n, r in zip(names, results, strict=True)])
