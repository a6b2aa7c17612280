#!/usr/bin/env python3
"""Regenerate the conda-forge route of envguard/data/compat.yaml from the channel's own records.

A maintainer's tool, run where the channel is reachable (or against a local copy: repodata, or a metadata
channel built from real locks, tests/support/metadata_channel.py). It asks the channel for pytorch, its wrappers,
cuda-version and python on every platform (envguard.channelfacts), turns the records into release rows
(versions, CUDA lines per platform, Python lines, CPU platforms, glibc floors, build variants) and the
route's CUDA toolkit lines, and prints the difference from the committed data, one line per changed field:

    python scripts/regen_compat.py                          # conda-forge itself
    python scripts/regen_compat.py --url file:///mirror/conda-forge
    python scripts/regen_compat.py --write                  # also rewrite the rows in compat.yaml

Exit status: 0 when the records and the data agree, 1 when they differ, 2 when the channel did not answer.
Rows the records do not hold (older releases, rows of status unknown) are kept as they are; what the
records cannot give (drivers, GPU architectures, what each variant runs on, the other routes) stays
curated, with its source, and is never touched.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

from envguard import channelfacts, compat
from envguard.versions import line_key

PLATFORMS = ("linux-64", "linux-aarch64", "osx-64", "osx-arm64", "win-64")
FIELDS = ("status", "versions", "python", "cpu", "cuda", "glibc", "variants")
DATA = Path(__file__).resolve().parents[1] / "envguard" / "data" / "compat.yaml"


def committed(route: str = compat.CONDA_FORGE, path: Path = DATA) -> dict[str, Any]:
    """The route as ``path`` (compat.yaml's two documents) records it."""
    import yaml

    first, _, second = path.read_text(encoding="utf-8").partition("\n---\n")
    return dict({**yaml.safe_load(first), **yaml.safe_load(second)}["routes"][route])


def _norm(field: str, value: Any, row: dict[str, Any]) -> Any:
    """A committed value in the records' shape: a CUDA list means the same lines on linux-64 and win-64."""
    if field == "cuda" and isinstance(value, list):
        return {p: list(value) for p in ("linux-64", "win-64")} if value else {}
    return value if value is not None else ({} if field in ("cuda", "glibc", "variants") else [])


def diff(records: channelfacts.ChannelRecords, data: dict[str, Any]) -> list[str]:
    """``line.field: committed -> records`` for every field the records give that differs; new rows with +."""
    out: list[str] = []
    rows = data.get("releases") or {}
    for line, new in records.rows().items():
        old = rows.get(line)
        if old is None:
            out.append(f"+ {line}: {json.dumps({k: new[k] for k in FIELDS if k in new})}")
            continue
        for field in FIELDS:
            if field not in new and field in ("glibc", "variants"):
                continue  # the records of that release carry none (no Linux CUDA builds sampled)
            was, now = _norm(field, old.get(field), old), new.get(field, [])
            if field == "cuda":
                was = {p: v for p, v in was.items() if p in records.platforms}
            if was != now:
                out.append(f"{line}.{field}: {json.dumps(was)} -> {json.dumps(now)}")
    toolkit = list(data.get("toolkit_lines") or [])
    if list(records.cuda_versions) != toolkit:
        out.append(f"toolkit_lines: {json.dumps(toolkit)} -> {json.dumps(list(records.cuda_versions))}")
    return out


def _flow(value: Any) -> str:
    """A value as compat.yaml writes it: flow style, strings quoted when YAML would read them otherwise."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_key(k)}: {_flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_flow(v) for v in value) + "]"
    return _scalar(value)


def _scalar(value: Any) -> str:
    """Plain where YAML reads the word back as the same string (``linux-64``, ``released``), else quoted."""
    import yaml

    if isinstance(value, str) and re.fullmatch(r"[a-z][a-z0-9_-]*", value) and yaml.safe_load(value) == value:
        return value
    return json.dumps(value)


def _key(k: str) -> str:
    return _scalar(k)


def merged_rows(records: channelfacts.ChannelRecords, data: dict[str, Any],
                today: dt.date) -> dict[str, dict[str, Any]]:
    rows = {line: dict(row) for line, row in (data.get("releases") or {}).items()}
    for line, new in records.rows().items():
        row = rows.setdefault(line, {})
        for field in FIELDS:
            if field in new:
                row[field] = new[field]
        row["source"] = f"{records.channel} records ({records.url}, {today.isoformat()})"
    return dict(sorted(rows.items(), key=lambda kv: line_key(kv[0])))


def render_rows(rows: dict[str, dict[str, Any]]) -> str:
    order = ("status", "versions", "source", "python", "cpu", "cuda", "glibc", "variants")
    lines = ["    releases:"]
    for line, row in rows.items():
        lines.append(f"      {json.dumps(line)}:")
        for k in [*order, *(k for k in row if k not in order)]:
            if k in row:
                lines.append(f"        {k}: {_flow(row[k])}")
    return "\n".join(lines) + "\n"


def write(records: channelfacts.ChannelRecords, data: dict[str, Any], today: dt.date, path: Path = DATA) -> None:
    """Replace the conda-forge route's release rows, toolkit lines and date in ``path``, nothing else."""
    text = path.read_text(encoding="utf-8")
    start = text.index("\n  conda-forge:\n")
    end = text.index("\n  pypi:\n", start)
    block = text[start:end]
    rows_at = block.index("\n    releases:\n") + 1
    rows_end = block.index("\n    # Build variants", rows_at) + 1
    block = block[:rows_at] + render_rows(merged_rows(records, data, today)) + block[rows_end:]
    tl_at = block.index("    toolkit_lines:")
    tl_end = block.index("]\n", tl_at) + 2
    block = block[:tl_at] + f"    toolkit_lines: {_flow(list(records.cuda_versions))}\n" + block[tl_end:]
    block = _replace_line(block, "    as_of:", f'    as_of: "{today.isoformat()}"')
    path.write_text(text[:start] + block + text[end:], encoding="utf-8")


def _replace_line(block: str, prefix: str, new: str) -> str:
    at = block.index(prefix)
    return block[:at] + new + block[block.index("\n", at):]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--channel", default=compat.CONDA_FORGE)
    ap.add_argument("--url", help="where the records are read (default: the channel under $ENVGUARD_CHANNEL_ALIAS)")
    ap.add_argument("--platform", action="append", dest="platforms", help=f"repeatable (default: {PLATFORMS})")
    ap.add_argument("--write", action="store_true", help="rewrite the rows in envguard/data/compat.yaml")
    ap.add_argument("--data", type=Path, default=DATA, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    try:
        records = channelfacts.fetch(args.channel, list(args.platforms or PLATFORMS), args.url)
    except channelfacts.ChannelUnreachable as e:
        print(f"error: {e} did not answer", file=sys.stderr)
        return 2
    data = committed(args.channel, args.data)
    changes = diff(records, data)
    print(f"# {args.channel} records at {records.url}: {len(records.torch)} pytorch records, "
          f"{len(records.rows())} release lines; {len(changes)} difference(s) from {args.data.name}")
    for platform, lines in records.pythons:  # what the builds' Python lines can be checked against
        print(f"# python packages on {platform}: {', '.join(lines)}")
    for c in changes:
        print(c)
    if args.write and changes:
        write(records, data, dt.date.today(), args.data)
        print(f"wrote {args.data}")
    return 1 if changes else 0


if __name__ == "__main__":
    status = main()
    # py-rattler's async runtime can crash while the interpreter finalises (engine-notes.md): the answer is
    # printed and the file written, so leave without finalising.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
