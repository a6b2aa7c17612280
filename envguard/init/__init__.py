"""``envguard init``: write an environment.yml from templates/.

The combination asked for (Python, torch release, CUDA line or CPU, channel
route, platforms) is checked against the compatibility data
(``envguard/data/compat.yaml``) before anything is written; an impossible one
is refused with the nearest valid choices, e.g. "torch 2.15 needs Python ≥
3.11; use --python 3.11 or --torch 2.14". The generated text is linted before
it is written, and an existing file is never replaced without ``force``.

Defaults: Python 3.11 (compat data), the newest torch of the chosen channel,
conda-forge, and a CPU build. CPU is the default because it is the one choice
that solves on every default platform (linux-64, osx-arm64, win-64) and
assumes no driver; a CUDA line must be asked for, since it fixes the minimum
NVIDIA driver and GPU generation.
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from string import Template

from envguard import compat
from envguard.errors import BackendError, UserError
from envguard.platforms import DEFAULT_PLATFORMS

CPU = "cpu"
DEFAULT_CUDA = CPU
DEFAULT_CHANNEL = "conda-forge"


@dataclass
class InitResult:
    path: Path
    text: str
    python: str
    torch: str
    cuda: str  # "cpu" or a CUDA line such as "12.6"
    channel: str
    platforms: list[str]
    template: str
    warnings: list[str] = field(default_factory=list)


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


def _vkey(v: str) -> tuple[int, ...]:
    return compat.version_key(v)


def _nearest(value: str, options: list[str], n: int = 1) -> list[str]:
    """The ``n`` options closest to ``value`` by version order (ties to the newer)."""
    def flat(v: str) -> int:
        k = _vkey(v) + (0, 0)
        return k[0] * 1000 + k[1]

    target = flat(value)
    chosen = sorted(options, key=lambda o: (abs(flat(o) - target), -flat(o)))[:n]
    return sorted(chosen, key=flat)


def _or(flag: str, values: list[str]) -> str:
    return " or ".join(f"{flag} {v}" for v in values)


def _release_line(torch: str) -> str:
    m = re.match(r"^(\d+)\.(\d+)(?:\.\d+)?$", torch.strip())
    if not m:
        raise UserError(f"--torch {torch!r} is not a release; give X.Y or X.Y.Z, e.g. --torch 2.15")
    return f"{m.group(1)}.{m.group(2)}"


def resolve(python: str | None = None, torch: str | None = None, cuda: str | None = None,
            channel: str | None = None, platforms: list[str] | None = None) -> tuple[str, str, str, str, list[str]]:
    """Fill in defaults and refuse combinations that do not exist.

    Returns (python, torch as given or X.Y, cuda or "cpu", channel, platforms).
    """
    c = compat.load()
    channel = channel or DEFAULT_CHANNEL
    if channel not in c.known_channels:
        raise UserError(f"unknown channel {channel!r}; use {_or('--channel', list(c.known_channels))}")
    on_channel = [r.version for r in c.releases_on(channel)]

    python = python or c.default_python
    if python not in c.supported_python:
        raise UserError(f"Python {python} has no envguard template (supported: {', '.join(c.supported_python)}); "
                        f"use {_or('--python', _nearest(python, list(c.supported_python)))}")

    torch = torch or on_channel[-1]
    line = _release_line(torch)
    rel = c.torch(line + ".0")
    if rel is None:
        known = [r.version for r in c.torch_releases]
        raise UserError(f"torch {line} is not in envguard's compatibility data ({known[0]}–{known[-1]}); "
                        f"use {_or('--torch', _nearest(line, known))}")
    if channel not in rel.channels:
        frozen = c.pytorch_channel_frozen_at
        why = f" (frozen at {frozen})" if channel == "pytorch" else f" (envguard uses it from {on_channel[0]})"
        other = [ch for ch in rel.channels]
        fixes = [_or("--channel", other)] if other else []
        fixes.append(_or("--torch", _nearest(line, on_channel)))
        raise UserError(f"torch {line} is not on the {channel} channel{why}; use " + " or ".join(fixes))

    if python not in rel.python:
        relation = (f"needs Python ≥ {rel.python[0]}" if _vkey(python) < _vkey(rel.python[0])
                    else f"supports Python ≤ {rel.python[-1]}")
        ok_py = [p for p in c.supported_python if p in rel.python]
        ok_torch = [r.version for r in c.releases_for_python(python) if channel in r.channels]
        fixes = []
        if ok_py:
            fixes.append(_or("--python", _nearest(python, ok_py)))
        if ok_torch:
            fixes.append(_or("--torch", _nearest(line, ok_torch)))
        raise UserError(f"torch {line} {relation}; use " + " or ".join(fixes))

    cuda = (cuda or DEFAULT_CUDA).lower()
    if cuda != CPU:
        if cuda not in rel.cuda:
            others = [r.version for r in c.releases_on(channel) if cuda in r.cuda and python in r.python]
            fix = _or("--cuda", _nearest(cuda, list(rel.cuda), 2)) + " or --cuda cpu"
            if others:
                fix += f", or {_or('--torch', _nearest(line, others))}"
            raise UserError(f"torch {line} has no CUDA {cuda} build (its CUDA lines: {', '.join(rel.cuda)}); "
                            f"use {fix}")

    from envguard.platforms import LOCKABLE_PLATFORMS

    cuda_plats = c.cuda_platforms(channel)
    if platforms:
        for p in platforms:
            if p not in LOCKABLE_PLATFORMS:
                raise UserError(f"unknown platform {p!r}; use one of {', '.join(LOCKABLE_PLATFORMS)}")
        restricted = cuda_plats if (cuda != CPU or channel == "pytorch") else None
        bad = [p for p in platforms if restricted is not None and p not in restricted]
        if bad:
            what = (f"CUDA builds of pytorch on {channel} exist" if cuda != CPU
                    else "the legacy pytorch-channel templates are written")
            alt = ", or use --cuda cpu" if channel != "pytorch" else ", or use --channel conda-forge"
            raise UserError(f"{what} for {', '.join(restricted or ())} only, not {', '.join(bad)}; "
                            f"drop --platform {' --platform '.join(bad)}{alt}")
        plats = list(dict.fromkeys(platforms))
    elif cuda != CPU or channel == "pytorch":
        plats = [p for p in DEFAULT_PLATFORMS if p in cuda_plats] or list(cuda_plats)
    else:
        plats = list(DEFAULT_PLATFORMS)
    return python, torch.strip(), cuda, channel, plats


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _default_name(out: Path) -> str:
    name = re.sub(r"[^a-z0-9_.-]+", "-", out.resolve().parent.name.lower()).strip("-.")
    return name or "pytorch-env"


def render(python: str, torch: str, cuda: str, channel: str, platforms: list[str], name: str,
           command: str) -> tuple[str, str]:
    """(template name, text) for an already resolved combination."""
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
        "cuda_major": cuda.split(".")[0],
        "min_driver": c.min_driver(cuda) or "?" if cuda != CPU else "",
        "min_arch": c.min_arch(cuda) or "?" if cuda != CPU else "",
        "frozen_at": c.pytorch_channel_frozen_at,
        "mkl_max": c.pytorch_mkl_max,
        "platforms": "\n".join(f"  - {p}" for p in platforms),
    }
    return template, _read_template(template).substitute(values)


def _yaml_scalar(text: str) -> str:
    """``text`` as a YAML string: quoted when YAML would read it as a number or boolean (``1.10``, ``yes``)."""
    import yaml

    return text if isinstance(yaml.safe_load(text), str) else f'"{text}"'


def _command_line(python: str, torch: str, cuda: str, channel: str, platforms: list[str], name: str) -> str:
    parts = ["envguard init", f"--python {python}", f"--torch {torch}", f"--cuda {cuda}", f"--channel {channel}"]
    parts += [f"--platform {p}" for p in platforms]
    parts.append(f"--name {name}")
    return " ".join(parts)


def init(python: str | None = None, torch: str | None = None, cuda: str | None = None,
         channel: str | None = None, platforms: list[str] | None = None, name: str | None = None,
         output: str | Path = "environment.yml", force: bool = False) -> InitResult:
    """Write an environment.yml; see the module docstring for the rules."""
    out = Path(output)
    python, torch, cuda, channel, plats = resolve(python, torch, cuda, channel, platforms)
    if out.is_dir():
        raise UserError("is a directory", file=str(out), fix="give a file path with -o")
    if any(p.exists() and not p.is_dir() for p in out.parents):
        raise UserError("a parent of the output is not a directory", file=str(out), key="--output",
                        fix="give a path inside an existing directory with -o")
    if out.exists() and not force:
        raise UserError("already exists; envguard init never overwrites a file", file=str(out),
                        fix="pass --force to replace it, or -o to write elsewhere")
    name = name or _default_name(out)
    if not re.match(r"^[A-Za-z0-9_.-]+$", name):
        raise UserError(f"environment name {name!r} has characters conda does not accept; "
                        "use letters, digits, '-', '_' and '.'")
    command = _command_line(python, torch, cuda, channel, plats, name)
    template, text = render(python, torch, cuda, channel, plats, name, command)

    # Lint before writing: a template that fails our own rules is a bug, never the user's file.
    from envguard.findings import Severity
    from envguard.lint import lint_text

    findings = lint_text(text, str(out))
    errors = [f for f in findings if f.severity is Severity.ERROR]
    if errors:
        raise BackendError(f"template {template} produced a file that fails lint ({errors[0].code}: "
                           f"{errors[0].message}); this is a bug in envguard")
    warnings = [f"{f.code}: {f.message}" for f in findings if f.severity is Severity.WARNING]

    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", dir=str(out.parent))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; a spec file is meant to be shared
        if out.exists() and not force:  # created meanwhile by someone else
            raise UserError("already exists; envguard init never overwrites a file", file=str(out),
                            fix="pass --force to replace it, or -o to write elsewhere")
        os.replace(tmp, out)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return InitResult(out, text, python, torch, cuda, channel, plats, template, warnings)


__all__ = ["InitResult", "init", "resolve", "render", "template_names", "CPU"]
