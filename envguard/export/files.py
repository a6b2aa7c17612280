"""The text of the files ``envguard export`` writes. Pure: plans in, text out, the same bytes every time.

* ``environment.yml``: the requested specs, the channels, a ``pip:`` section and the host platform.
* ``conda-<platform>.lock``: an ``@EXPLICIT`` file, one URL a line with the archive's sha256 as its
  fragment, the form ``conda list --explicit --sha256`` writes and conda, mamba and rattler read.
* ``requirements-<platform>.txt``: the pip part, ``--hash=sha256:`` wherever a hash is known, with the
  indexes it came from.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

_PLAIN = re.compile(r"^[A-Za-z0-9_$][A-Za-z0-9_.+\-=*<>!~,/@ :;'()\[\]$%?&{}]*$")
# YAML 1.1 reads these plain scalars as numbers, booleans or null: quote them.
_TYPED = re.compile(r"^(?:[-+]?[0-9_.:eE]+|[-+]?\.(?:inf|nan)|y|n|yes|no|true|false|on|off|null|~)$", re.I)


def _scalar(value: str) -> str:
    """A YAML scalar for ``value``: plain when that reads back as the same string, else double-quoted."""
    if (_PLAIN.match(value) and not _TYPED.match(value) and ": " not in value and " #" not in value
            and not value.endswith((":", " "))):
        return value
    return json.dumps(value, ensure_ascii=False)


def _comment(text: str) -> str:
    return "# " + " ".join(text.split())


@dataclass
class SpecPlan:
    name: str
    channels: list[str]
    conda: list[str]
    pip: list[str]
    platform: str
    pip_repositories: list[str] = field(default_factory=list)
    header: list[str] = field(default_factory=list)  # comment lines, without "# "
    variables: dict[str, str] = field(default_factory=dict)  # conda-meta/state's, written back as variables:


def environment_yml(plan: SpecPlan) -> str:
    lines = [_comment(h) for h in plan.header]
    lines.append(f"name: {_scalar(plan.name)}")
    lines.append("channels:")
    lines += [f"  - {_scalar(c)}" for c in plan.channels]
    lines.append("dependencies:")
    lines += [f"  - {_scalar(d)}" for d in plan.conda]
    if plan.pip:
        lines.append("  - pip:")
        lines += [f"    - {_scalar(p)}" for p in plan.pip]
    if plan.pip_repositories:
        lines.append("pip-repositories:")
        lines += [f"  - {_scalar(r)}" for r in plan.pip_repositories]
    lines += ["platforms:", f"  - {_scalar(plan.platform)}"]
    if plan.variables:
        lines.append("variables:")
        lines += [f"  {_scalar(k)}: {json.dumps(v, ensure_ascii=False)}" for k, v in plan.variables.items()]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class ExplicitLine:
    url: str
    sha256: str | None
    md5: str | None


def explicit(lines: Sequence[ExplicitLine], platform: str, header: Sequence[str],
             pip: Sequence[Requirement] = ()) -> str:
    """The conda part; pip packages with a URL follow as conda-lock's ``# pip NAME @ URL#sha256=HEX`` comments,
    which conda ignores and conda-lock, micromamba and envguard read."""
    out = [_comment(h) for h in header] + [f"# platform: {platform}", "@EXPLICIT"]
    for e in lines:
        out.append(e.url + (f"#{e.sha256}" if e.sha256 else (f"#{e.md5}" if e.md5 else "")))
    for r in pip:
        if r.comment is None and r.url:
            out.append(f"# pip {r.name} @ {r.url}" + (f"#sha256={r.sha256}" if r.sha256 else ""))
    return "\n".join(out) + "\n"


@dataclass(frozen=True)
class Requirement:
    name: str
    version: str
    url: str | None  # the artifact (None when only the index is known)
    sha256: str | None
    direct: bool = False  # installed from that URL (``name @ url``), not by name from an index
    comment: str | None = None  # written as a comment instead of a requirement (not reproducible)


def requirements(reqs: Sequence[Requirement], indexes: Sequence[str], header: Sequence[str]) -> str:
    out = [_comment(h) for h in header]
    for i, url in enumerate(indexes):
        out.append(f"{'--index-url' if i == 0 else '--extra-index-url'} {url}")
    for r in reqs:
        if r.comment is not None:
            out.append(_comment(r.comment))
            continue
        line = f"{r.name} @ {r.url}" if r.direct and r.url else f"{r.name}=={r.version}"
        if r.sha256:
            line += f" --hash=sha256:{r.sha256}"
        out.append(line)
    return "\n".join(out) + "\n"
