"""``envguard init``: write an environment.yml from templates/.

The combination asked for (Python, torch release, CUDA line or CPU, channel
route, platforms) is checked against the channel's own records when the channel
answers (envguard.channelfacts: which builds exist per platform), and the file is
then solved on each platform against them, records only; offline, or when the
channel does not answer, against the compatibility table of that route
(``envguard/data/compat.yaml``), whose date the result reports. An impossible
combination is refused with what does exist, e.g. "conda-forge builds torch 2.13
for CUDA 12.9 and 13.0 on linux-64; use --cuda 12.9". Only releases with
evidence (status ``released``) are offered. The generated text is linted
before it is written, and an existing file is never replaced without ``force``.

CUDA on conda-forge: a ``cudaXYZ`` build depends on ``cuda-version >=X.Y,<X+1``,
and conda-forge builds different lines per platform (2.13: 12.9 and 13.0 on
linux-64, 12.8 and 13.0 on win-64). ``--cuda X.Y`` is written as
``cuda-version=X.Y`` when a build on every chosen platform accepts it (the
win-64 cuda128 build runs on the 12.9 libraries, as real locks show);
``--cuda 12`` picks the newest such line of the major. The file's comment names
each platform's build, its minimum driver and its GPU architectures.

Defaults: Python 3.11 (compat data), the newest released torch of the chosen
channel, conda-forge, and a CPU build. CPU is the default because it is the one
choice that solves on every default platform (linux-64, osx-arm64, win-64) and
assumes no driver; a CUDA line must be asked for, since it fixes the minimum
NVIDIA driver and GPU generation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from string import Template
from typing import Any

from envguard import compat
from envguard.errors import BackendError, UserError
from envguard.platforms import DEFAULT_PLATFORMS, command_platforms
from envguard.versions import line_key, release

CPU = "cpu"
DEFAULT_CUDA = CPU
DEFAULT_CHANNEL = "conda-forge"


@dataclass
class InitResult:
    path: Path | None  # None: printed to standard output (-o -)
    text: str
    python: str
    torch: str
    cuda: str  # "cpu" or a CUDA line such as "12.6"
    channel: str
    platforms: list[str]
    template: str
    warnings: list[str] = field(default_factory=list)
    # "checked against conda-forge records (URL)", or offline "from envguard's table of 2026-08-13"
    evidence: str = ""
    stale: str | None = None  # offline, past 90 days: how old the table is and what that means


def template_names() -> list[str]:
    return sorted(p.name for p in _templates_dir().iterdir() if p.name.endswith(".yml"))


def _templates_dir() -> Path:
    """templates/ as shipped in the wheel (``envguard.templates``), else the source checkout's."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("envguard.templates")
    except (ImportError, ValueError):
        spec = None
    for loc in (spec.submodule_search_locations or []) if spec else []:
        if any(Path(loc).glob("*.yml")):
            return Path(loc)
    return Path(__file__).resolve().parents[2] / "templates"


def _read_template(name: str) -> Template:
    path = _templates_dir() / name
    try:
        return Template(path.read_text(encoding="utf-8"))
    except OSError:
        raise BackendError(f"template {name} is missing from {path.parent}: the installation is incomplete") from None


def _flat(v: str) -> int:
    k = release(v) + (0, 0)
    return k[0] * 1000 + k[1]


def _nearest(value: str, options: list[str], n: int = 1) -> list[str]:
    """The ``n`` options closest to ``value`` by version order (ties to the newer)."""
    target = _flat(value)
    chosen = sorted(options, key=lambda o: (abs(_flat(o) - target), -_flat(o)))[:n]
    return sorted(chosen, key=_flat)


def _or(flag: str, values: list[str]) -> str:
    return " or ".join(f"{flag} {v}" for v in values)


def _and(values: list[str] | tuple[str, ...]) -> str:
    values = list(values)
    return values[0] if len(values) == 1 else ", ".join(values[:-1]) + " and " + values[-1]


def _release_line(torch: str) -> str:
    m = re.match(r"^(\d+)\.(\d+)(?:\.\d+)?$", torch.strip())
    if not m:  # the flag's grammar, stricter than a version: no pre-release, no local label
        raise UserError(f"--torch {torch!r} is not a release; give X.Y or X.Y.Z, e.g. --torch 2.13")
    return f"{m.group(1)}.{m.group(2)}"


def _major(line: str) -> str:
    return line.split(".", maxsplit=1)[0]


def _pick_cuda(route: compat.Route, rel: compat.Release, cuda: str, plats: list[str], python: str) -> str:
    """The CUDA line to write for ``--cuda cuda`` (X.Y, or X for the newest line of that major), or refuse,
    naming the lines the route builds on the platforms that lack it."""
    choices = route.cuda_choices(rel, plats)
    built_lines = rel.cuda_choices(plats)  # `--cuda 12` picks among the lines torch itself was built for
    exact = "." in cuda
    if exact and cuda in choices:
        return cuda
    if not exact and any(_major(x) == cuda for x in built_lines):
        return [x for x in built_lines if _major(x) == cuda][-1]
    from envguard import channelfacts  # the rule lint and check apply

    lacking = list(channelfacts.cuda_verdict(rel, plats, cuda).lacking) if exact else list(plats)
    if exact and not lacking and route.toolkit_lines:  # every build would accept it: no such CUDA release
        same = [v for v in route.toolkit_lines if _major(v) == _major(cuda)] or list(route.toolkit_lines)
        use = _or('--cuda', _nearest(cuda, [c for c in choices if c in same] or same))
        # a line newer than the table is unknown, not absent; the channel's own records know
        if line_key(cuda) > line_key(route.toolkit_lines[-1]) and not route.records_of:
            raise UserError(f"CUDA {cuda} is newer than the {route.title} CUDA lines in envguard's data (its CUDA "
                            f"{_major(cuda)} lines: {_and(same)}); use {use}, or update envguard")
        raise UserError(f"{route.title} packages no CUDA {cuda} (its CUDA {_major(cuda)} lines: {_and(same)}); "
                        f"use {use}")
    lacking = lacking or plats
    groups: dict[tuple[str, ...], list[str]] = {}
    for p in lacking:
        groups.setdefault(rel.cuda_on(p), []).append(p)
    built = ", ".join(f"for CUDA {_and(lines)} on {_and(ps)}" for lines, ps in groups.items())
    if built_lines:
        fix = _or("--cuda", _nearest(cuda if exact else f"{cuda}.0", built_lines))
    else:
        others = [r.version for r in route.released if python in r.python and r.version != rel.version
                  and any(x == cuda or (not exact and _major(x) == cuda) for x in route.cuda_choices(r, plats))]
        fix = (_or("--torch", _nearest(rel.version, others)) + " or " if others else "") + "--cuda cpu"
    raise UserError(f"{route.title} builds torch {rel.version} {built}; use {fix}")


def _check_release(route: compat.Route, torch: str) -> tuple[compat.Release, str]:
    line = _release_line(torch)
    rel = route.release(line)
    released = [r.version for r in route.released]
    if rel is None and route.records_of:
        held = _and(released) if len(released) <= 10 else f"{released[0]}–{released[-1]}, newest {_and(released[-4:])}"
        raise UserError(f"torch {line} is not in {route.evidence} (torch {held}); use "
                        + _or("--torch", _nearest(line, released, 2 if line_key(released[0]) < line_key(line)
                                                  < line_key(released[-1]) else 1)))
    if rel is None:
        c = compat.load()
        elsewhere = [r.name for r in c.routes.values() if r.manager == "conda" and r.name != route.name
                     and (other := r.release(line)) is not None and other.released]
        if route.frozen_at and line_key(line) > line_key(route.frozen_at):
            fixes = [_or("--channel", elsewhere)] if elsewhere else []
            fixes.append(_or("--torch", _nearest(line, released)))
            raise UserError(f"torch {line} is not on the {route.name} channel (frozen at {route.frozen_at}); use "
                            + " or ".join(fixes))
        where = "envguard's compatibility data" if not elsewhere else f"{route.title}'s releases in envguard's data"
        inside = line_key(released[0]) < line_key(line) < line_key(released[-1])
        fixes = [_or("--torch", _nearest(line, released, 2 if inside else 1))]
        if elsewhere:
            fixes.insert(0, _or("--channel", elsewhere))
        raise UserError(f"torch {line} is not in {where} ({route.title}: {released[0]}–{released[-1]}); use "
                        + " or ".join(fixes))
    if not rel.released:
        raise UserError(f"torch {line} has no release evidence on {route.title} in envguard's data "
                        f"(status {rel.status}: {rel.source}); use {_or('--torch', [released[-1]])}")
    if torch.strip() != line and rel.versions and torch.strip() not in rel.versions:
        where = f"in {route.evidence}" if route.records_of else f"a {route.title} release in envguard's data"
        raise UserError(f"torch {torch.strip()} is not {where} "
                        f"(torch {line}: {_and(rel.versions)}); use --torch {line}")
    return rel, line


def _held_instead(route: compat.Route, rel: compat.Release, cuda: str, plats: list[str]) -> str:
    """The refusal when no platform asked for has a build of the kind asked for: what each one holds of
    ``rel`` instead, e.g. "conda-forge has pytorch 2.12 for osx-arm64 only as CPU builds; use --cuda cpu"."""
    who = f"{route.evidence} ({route.records_of}) hold" if route.records_of else f"{route.title} has"
    cpu = [p for p in plats if p in rel.cpu]
    gpu = {p: rel.cuda_on(p) for p in plats if rel.cuda_on(p)}
    none = [p for p in plats if p not in cpu and p not in gpu]
    parts: list[str] = []
    fixes: list[str] = []
    if cuda == CPU:
        for p, lines in gpu.items():  # a CPU file asked where only CUDA builds exist
            parts.append(f"for {p} only as CUDA builds (CUDA {_and(lines)})")
        if gpu:  # the newest line built for every one of them, else the newest built for any
            every = rel.cuda_choices(list(gpu)) or sorted({x for ls in gpu.values() for x in ls}, key=line_key)
            fixes.append(f"--cuda {every[-1]}")
    elif cpu:  # the case: a CUDA file where the records (or the table) have CPU builds only
        parts.append(f"for {_and(cpu)} only as CPU builds")
        fixes.append("--cuda cpu")
    if none:
        parts.append(f"no build for {_and(none)}")
        fixes.append("--platform with one that has builds" if len(none) == len(plats)
                     else "drop " + " ".join(f"--platform {p}" for p in none))
    if not parts:  # the legacy channel's templates: written for its CUDA platforms only
        parts.append(f"no CUDA build for {_and(plats)}, which its templates are written for")
        fixes.append("--channel conda-forge")
    fixes = fixes or ["another --torch"]
    return f"{who} pytorch {rel.version} {', and '.join(parts)}; use {' and '.join(fixes)}"


def resolve(python: str | None = None, torch: str | None = None, cuda: str | None = None,
            channel: str | None = None, platforms: list[str] | None = None,
            route: compat.Route | None = None) -> tuple[str, str, str, str, list[str]]:
    """Fill in defaults and refuse combinations that do not exist, on ``route`` (the channel's records,
    envguard.channelfacts) or else the table's route for ``channel``.

    Returns (python, torch as given or X.Y, the CUDA line to write or "cpu", channel, platforms).
    """
    from envguard.platforms import LOCKABLE_PLATFORMS

    c = compat.load()
    channel = channel or DEFAULT_CHANNEL
    if channel not in c.known_channels:
        raise UserError(f"unknown channel {channel!r}; use {_or('--channel', list(c.known_channels))}")
    route = route or c.route(channel)
    for p in platforms or []:
        if p not in LOCKABLE_PLATFORMS:
            raise UserError(f"unknown platform {p!r}; use one of {', '.join(LOCKABLE_PLATFORMS)}")

    python = python or c.default_python
    # One policy with lint (EG102): a newer Python the channel builds torch for is offered, and the file
    # carries lint's warning; an older one, or one the channel has no torch for, is refused, as lint errs.
    newer = re.fullmatch(r"\d+\.\d+", python) is not None and line_key(python) > line_key(c.supported_python[-1])
    if python not in c.supported_python and not (newer and c.releases_for_python(python, channel)):
        why = (f"{route.title} builds no torch for Python {python}" if newer else
               f"Python {python} is not supported (envguard supports {', '.join(c.supported_python)})")
        raise UserError(f"{why}; use {_or('--python', _nearest(python, list(c.supported_python)))}")

    if not route.released:  # the channel answered, without a single pytorch record on these platforms
        raise UserError(f"{route.evidence} hold no pytorch for {_and(command_platforms(platforms))}; use "
                        "--platform with one that has builds, or another --channel")
    torch = (torch or route.newest).strip()
    rel, line = _check_release(route, torch)

    if rel.python and python not in rel.python:  # no Python lines known (no python dependency): the solve judges
        relation = (f"needs Python ≥ {rel.python[0]}" if line_key(python) < line_key(rel.python[0])
                    else f"supports Python ≤ {rel.python[-1]}" if line_key(python) > line_key(rel.python[-1])
                    else f"has no Python {python} build in {route.evidence} (its Python lines: {_and(rel.python)})")
        # a supported line first; else a newer one the channel builds this release for (offered, as above)
        ok_py = [p for p in c.supported_python if p in rel.python] or [
            p for p in rel.python
            if line_key(p) > line_key(c.supported_python[-1]) and c.releases_for_python(p, channel)]
        ok_torch = [r.version for r in route.released if python in r.python]
        fixes = []
        if ok_py:
            fixes.append(_or("--python", _nearest(python, ok_py)))
        if ok_torch:
            fixes.append(_or("--torch", _nearest(line, ok_torch)))
        raise UserError(f"torch {line} {relation}; use " + (" or ".join(fixes) or "another --platform"))

    cuda = (cuda or DEFAULT_CUDA).strip().lower()
    if cuda != CPU and not re.fullmatch(r"\d+(\.\d+)?", cuda):
        raise UserError(f"--cuda {cuda!r} is not a CUDA line; give X.Y such as 12.9, a major line such as 12, "
                        "or cpu")
    # The legacy templates pin mkl (x86 only) and pytorch-cuda: they are written for the CUDA platforms.
    if cuda != CPU or route.name == compat.PYTORCH:
        allowed = [p for p in rel.cuda_platforms if rel.cuda_on(p)]
        what = (f"{route.title} builds torch {line} for CUDA" if cuda != CPU
                else "the legacy pytorch-channel templates are written")
        alt = ", or use --cuda cpu" if route.name != compat.PYTORCH else ", or use --channel conda-forge"
    else:
        allowed = list(rel.cpu)
        what, alt = f"{route.title} builds torch {line} for CPU", ""
    if platforms:
        bad = [p for p in platforms if p not in allowed]
        if bad and not allowed:  # nothing of that kind on any platform known: say what is there instead
            raise UserError(_held_instead(route, rel, cuda, list(dict.fromkeys(bad))))
        if bad:
            drop = " --platform ".join(bad)
            raise UserError(f"{what} on {_and(allowed)} only, not {_and(bad)}; drop --platform {drop}{alt}")
        plats = list(dict.fromkeys(platforms))
    else:
        plats = [p for p in DEFAULT_PLATFORMS if p in allowed] or allowed
        if not plats:  # the records were read for the default platforms only: name those that hold something
            held = [p for p in DEFAULT_PLATFORMS if p in rel.cpu or rel.cuda_on(p)]
            raise UserError(_held_instead(route, rel, cuda, command_platforms(None, held)))
    if cuda != CPU:
        cuda = _pick_cuda(route, rel, cuda, plats, python)
    return python, torch, cuda, channel, plats


def default_name(out: Path) -> str:
    name = re.sub(r"[^a-z0-9_.-]+", "-", out.resolve().parent.name.lower()).strip("-.")
    return name or "pytorch-env"


def render(python: str, torch: str, cuda: str, channel: str, platforms: list[str], name: str,
           command: str, route: compat.Route | None = None) -> tuple[str, str]:
    """(template name, text) for an already resolved combination (``route``: the rows it was resolved on)."""
    c = compat.load()
    template = f"{channel}-{'cpu' if cuda == CPU else 'cuda'}.yml"
    line = _release_line(torch)
    torch_spec = f"{line}.*" if torch == line else torch
    values = {
        "command": command,
        "name": _yaml_scalar(name),
        "python": python,
        "torch": torch,
        "torch_spec": torch_spec,
        "cuda": cuda,
        "cuda_major": cuda.split(".", maxsplit=1)[0],
        "hardware": hardware_comment(channel, line, cuda, platforms, route) if cuda != CPU else "",
        "frozen_at": c.pytorch_channel_frozen_at,
        "mkl_max": c.pytorch_mkl_max,
        "platforms": "\n".join(f"  - {p}" for p in platforms),
    }
    return template, _read_template(template).substitute(values)


def hardware_comment(channel: str, torch: str, cuda: str, platforms: list[str],
                     route: compat.Route | None = None) -> str:
    """Comment lines naming, per platform, the build that CUDA line selects, its minimum driver and GPUs."""
    c = compat.load()
    route = route or c.route(channel)
    rel = route.release(torch)
    assert rel is not None
    lines: list[str] = []
    for p in platforms:
        built = rel.build_line(p, cuda) or cuda
        arch = c.arch(channel, built, torch, p)  # a row may hold for some platforms only (aarch64 CUDA 13)
        gpus = arch.describe() if arch else f"sm_{(c.min_arch(built) or '?').replace('.', '')} and newer"
        tag = f"cuda{built.replace('.', '')}" if channel == compat.CONDA_FORGE else f"cuda{built}"
        on = f" on the CUDA {cuda} libraries" if built != cuda else ""
        minimum = c.min_driver(built, p)
        driver = f">= {minimum}" if minimum else f"supporting CUDA {built.split('.')[0]} (minimum not recorded)"
        lines.append(f"# {p}: the {tag} build{on}; NVIDIA driver {driver}, GPU {gpus}.")
        lines.extend(_variant_lines(c.route(channel), rel.variants_of(p, built), tag))
    return "\n".join(lines)


def _variant_lines(table: compat.Route, names: tuple[str, ...], tag: str) -> list[str]:
    """Where one build string covers several builds (linux-aarch64 cuda129: sbsa and tegra), which is which."""
    if len(names) < 2:
        return []
    out = [(f"#   {tag} comes in {len(names)} variants with the same build string (the arm-variant package "
            "tells them apart):")]
    for n in names:
        v = table.variant(n) or {}
        sm = v.get("sm") or []
        gpus = f"sm_{str(sm[0]).replace('.', '')}" + (f" to sm_{str(sm[1]).replace('.', '')}" if len(sm) > 1
                                                      and sm[1] != sm[0] else " only") if sm else "not recorded"
        glibc = f", glibc >= {v['glibc']}" if v.get("glibc") else ""
        out.append(f"#   {n}: {v.get('what', 'not recorded')} ({gpus}{glibc}).")
    return out


def _yaml_scalar(text: str) -> str:
    """``text`` as a YAML string: quoted when YAML would read it as a number or boolean (``1.10``, ``yes``)."""
    import yaml

    return text if isinstance(yaml.safe_load(text), str) else f'"{text}"'


def command_line(python: str, torch: str, cuda: str, channel: str, platforms: list[str], name: str) -> str:
    parts = ["envguard init", f"--python {python}", f"--torch {torch}", f"--cuda {cuda}", f"--channel {channel}"]
    parts += [f"--platform {p}" for p in platforms]
    parts.append(f"--name {name}")
    return " ".join(parts)


def records_route(channel: str, platforms: list[str] | None,
                   channel_url: str | None) -> tuple[compat.Route, str, list[str], Any]:
    """(the route to check against, what the report says about it, warnings): the channel's records when it
    answers, else the table with its date (and a warning past 90 days)."""
    from envguard import channelfacts

    c = compat.load()
    table = c.route(channel) if channel in c.known_channels else None
    if table is None:  # resolve refuses the channel, naming the known ones
        return c.route(DEFAULT_CHANNEL), "", [], None
    why = ""
    if not channelfacts.offline() or channel_url:
        from envguard.platforms import LOCKABLE_PLATFORMS

        # an unknown platform is refused by resolve, with the known ones; the channel is not asked about it
        plats = [p for p in dict.fromkeys(command_platforms(platforms)) if p in LOCKABLE_PLATFORMS]
        try:
            records = channelfacts.fetch(channel, plats, channel_url)
        except channelfacts.ChannelUnreachable as e:
            why = f"{e} did not answer"
        else:
            where = records.url
            if not channel_url:  # say which setting (a .condarc, pixi's mirrors) pointed the name there
                from envguard import condaconfig
                from envguard.redact import redact

                where = redact(condaconfig.resolve_channel(channel).describe())
            return records.route(table), f"checked against {channel} records ({where})", [], records
    note, stale = channelfacts.table_note(table)
    warnings = [stale] if stale else []
    return table, note + (f"; {why}" if why else ""), warnings, None


def _prove(route: compat.Route, records: Any, text: str, cuda: str, plats: list[str], torch: str,
           python: str) -> str:
    """Solve the file about to be written on each platform against the channel's records (no download);
    refuse it, naming the platform and why, when one does not solve. Returns what to add to the report
    when another channel the file lists did not answer (then nothing was proved)."""
    import yaml

    from envguard import channelfacts

    assert route.records_of is not None
    data = yaml.safe_load(text)
    deps = [d for d in data.get("dependencies") or [] if isinstance(d, str)]
    names = [str(c).strip() for c in data.get("channels") or [] if str(c).strip() != "nodefaults"]
    urls = [route.records_of if n == route.name else channelfacts.channel_url(n) for n in names]
    for p in plats:
        try:
            solved, why = channelfacts.solve(urls, deps, p, None if cuda == CPU else cuda)
        except channelfacts.ChannelUnreachable as e:
            return f"; not solved: {e} did not answer"
        if solved is None:
            first = why if len(why) <= 400 else why[:400].rsplit(" ", 1)[0] + " …"
            build = "CPU" if cuda == CPU else f"CUDA {cuda}"
            held = _held(route, records, torch, cuda, p)
            fix = _solved_elsewhere(plats, p)
            if held and python not in held:
                fix = f"{_or('--python', [v for v in held if v in compat.load().supported_python] or held)} or {fix}"
            where = (f"; {route.evidence} hold {_held_text(route, torch, cuda, p)} for Python {_and(held)}"
                     if held else "")
            raise UserError(f"torch {torch} ({build}) does not solve on {p} against {route.evidence} "
                            f"({route.records_of}): {first}{where}; use {fix}")
    return ""


def _held(route: compat.Route, records: Any, torch: str, cuda: str, platform: str) -> list[str]:
    """The Python lines of the builds the records hold for ``torch`` of that kind on ``platform``."""
    rel = route.release(_release_line(torch))
    kind = CPU if cuda == CPU else (rel.build_line(platform, cuda) if rel else None)
    pys = {r.python for r in records.torch if r.platform == platform and r.line == _release_line(torch)
           and r.kind == kind and r.python and (r.version == torch or torch == _release_line(torch))}
    return sorted(pys, key=line_key)


def _held_text(route: compat.Route, torch: str, cuda: str, platform: str) -> str:
    rel = route.release(_release_line(torch))
    built = CPU if cuda == CPU else (rel.build_line(platform, cuda) if rel else cuda) or cuda
    what = "CPU builds" if built == CPU else f"cuda{built.replace('.', '')} builds"
    return f"torch {torch} {what} on {platform}"


def _solved_elsewhere(plats: list[str], failed: str) -> str:
    others = [p for p in plats if p != failed]
    return (f"drop --platform {failed}" + (f" (keeping {_and(others)})" if others else "")
            + ", or another --torch or --cuda")


def checked_text(python: str, torch: str, cuda: str, channel: str, plats: list[str], name: str, command: str,
                 route: compat.Route, records: Any, out: Path) -> tuple[str, str, list[str], str]:
    """(template, text, warnings, what the solve adds to the evidence) of a resolved combination: rendered,
    solved on each platform against the channel's records when they answered, and linted."""
    template, text = render(python, torch, cuda, channel, plats, name, command, route)
    proved = _prove(route, records, text, cuda, plats, torch, python) if route.records_of else ""

    # Lint before writing: a template that fails our own rules is a bug, never the user's file.
    from envguard import channelfacts
    from envguard.findings import Severity
    from envguard.lint import lint_text

    with channelfacts.answering(route):  # lint sees the rows init resolved on
        findings = lint_text(text, str(out))
    errors = [f for f in findings if f.severity is Severity.ERROR]
    if errors:
        raise BackendError(f"template {template} produced a file that fails lint ({errors[0].code}: "
                           f"{errors[0].message}); this is a bug in envguard")
    # EG102's note on a newer Python is information to lint, and init says the same to whoever chose it
    warnings = [f"{f.code}: {f.message}" for f in findings if f.severity is Severity.WARNING or f.code == "EG102"]
    return template, text, warnings, proved



def check_output(out: Path, force: bool, overwrite_fix: str) -> None:
    """A file init may write: not a directory, inside a directory, and not there already unless --force."""
    if out.is_dir():
        raise UserError("is a directory", file=str(out), fix="give a file path with -o")
    if any(p.exists() and not p.is_dir() for p in out.parents):
        raise UserError("a parent of the output is not a directory", file=str(out), key="--output",
                        fix="give a path inside an existing directory with -o")
    if out.exists() and not force:
        raise UserError("already exists; envguard init never overwrites a file", file=str(out), fix=overwrite_fix)


def environment_name(name: str | None, out: Path) -> str:
    """The environment's name: given, else the output's directory's; only characters conda accepts."""
    name = name or default_name(out)
    if not re.match(r"^[A-Za-z0-9_.-]+$", name):
        raise UserError(f"environment name {name!r} has characters conda does not accept; "
                        "use letters, digits, '-', '_' and '.'")
    return name

def init(python: str | None = None, torch: str | None = None, cuda: str | None = None,
         channel: str | None = None, platforms: list[str] | None = None, name: str | None = None,
         output: str | Path = "environment.yml", force: bool = False, channel_url: str | None = None) -> InitResult:
    """Write an environment.yml (``output`` "-": return its text, written nowhere); see the module docstring
    for the rules. ``channel_url``: where the channel's records are read (default: the channel's name as
    envguard.condaconfig.resolve_channel points it: .condarc, pixi's mirrors, $ENVGUARD_CHANNEL_ALIAS);
    offline ($ENVGUARD_OFFLINE=1) or unreachable, the table answers."""
    to_stdout = str(output) == "-"
    out = Path("environment.yml" if to_stdout else output)
    route, evidence, notes, records = records_route(channel or DEFAULT_CHANNEL, platforms, channel_url)
    python, torch, cuda, channel, plats = resolve(python, torch, cuda, channel, platforms, route)
    if not to_stdout:
        check_output(out, force, "pass --force to replace it, -o to write elsewhere, or -o - to print it")
    name = environment_name(name, out)
    command = command_line(python, torch, cuda, channel, plats, name)
    template, text, warnings, proved = checked_text(python, torch, cuda, channel, plats, name, command, route,
                                                   records, out)
    evidence += proved
    stale = notes[0] if notes else None
    if to_stdout:
        return InitResult(None, text, python, torch, cuda, channel, plats, template, warnings, evidence, stale)

    def still_free() -> None:  # created meanwhile by someone else
        if out.exists() and not force:
            raise UserError("already exists; envguard init never overwrites a file", file=str(out),
                            fix="pass --force to replace it, or -o to write elsewhere")

    from envguard.publish import publish

    publish(out, text.encode("utf-8"), before_replace=still_free)  # a full disk: one line naming the file
    return InitResult(out, text, python, torch, cuda, channel, plats, template, warnings, evidence, stale)


def __getattr__(name: str) -> Any:
    # several --cuda values: a project with variants (variants.py), imported on first use
    if name in ("init_variants", "VariantsInit"):
        import importlib

        return getattr(importlib.import_module("envguard.init.variants"), name)
    raise AttributeError(f"module 'envguard.init' has no attribute {name!r}")


__all__ = ["CPU", "InitResult", "init", "render", "resolve", "template_names"]
