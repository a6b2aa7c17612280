"""A comparison as markdown, for a pull-request comment (pure text; the rich tables are in render.py)."""

from __future__ import annotations

from envguard.diff.changes import LABELS
from envguard.diff.result import DiffResult
from envguard.model import Package
from envguard.redact import redact


def describe(p: Package | None) -> str:
    """``2.1.2 cuda120_py311h2667f23_304 conda-forge`` / ``2.1.0 (pip)``."""
    if p is None:
        return ""
    parts = [p.version or "?"]
    if p.build:
        parts.append(p.build)
    parts.append(f"({p.channel})" if p.manager == "conda" and p.channel else f"({p.manager})")
    return redact(" ".join(parts))


_ICON = {"error": "❌", "warning": "⚠️", "info": "ℹ️"}


def _md(text: str) -> str:
    return redact(text).replace("|", "\\|").replace("\n", " ")


def to_markdown(result: DiffResult, *, max_rows: int = 200) -> str:
    """A pull-request comment: summary, one table per platform pair, spec checks."""
    lines = ["### envguard diff", "",
             f"**A:** `{_md(result.a.describe())}`  ", f"**B:** `{_md(result.b.describe())}`", "",
             f"**{_md(result.summary())}**", ""]
    for pd in result.platforms:
        if not pd.changes:
            continue
        lines += [f"#### {_md(pd.label)}", "", "| | package | change | A | B | note |", "|---|---|---|---|---|---|"]
        for c in pd.changes[:max_rows]:
            a = describe(c.old) if c.old or c.old_spec is None else c.old_spec
            b = describe(c.new) if c.new or c.new_spec is None else c.new_spec
            name = f"**{c.name}**" if c.core else c.name
            lines.append(f"| {_ICON[c.severity]} | {_md(name)} | {_md(', '.join(LABELS[k] for k in c.kinds))} "
                         f"| {_md(a)} | {_md(b)} | {_md(c.detail)} |")
        if len(pd.changes) > max_rows:
            lines.append(f"\n… and {len(pd.changes) - max_rows} more (see `--format json`)")
        lines.append("")
    for r in result.spec_reports:
        title = (f"#### Requested specs ({result.spec_side}) against {result.other_words()}"
                 + (f" {r.where}" if r.where else ""))
        lines += [title, "", "| | spec | locked | note |", "|---|---|---|---|"]
        for sc in r.checks:
            icon = "✅" if sc.status == "satisfied" else "❌"
            locked = describe(sc.locked) or sc.status
            lines.append(f"| {icon} | `{_md(sc.spec.spec)}` | {_md(locked)} | {_md(sc.reason)} |")
        if r.unrequested:
            names = ", ".join(p.name for p in r.unrequested)
            lines += ["", f"<details><summary>{len(r.unrequested)} locked packages nobody asked for directly"
                          f"</summary>\n\n{_md(names)}\n\n</details>"]
        lines.append("")
    for meta in result.spec_changes:
        lines.append(f"- ⚠️ {_md(meta)}")
    if result.spec_changes:
        lines.append("")
    for n in result.notes:
        lines.append(f"> {_md(n)}  ")
    return "\n".join(lines).rstrip() + "\n"
