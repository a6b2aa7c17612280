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
    python scripts/regen_compat.py --url file:///tmp/realdata --sample --write --records "..."

Exit status: 0 when the records and the data agree, 1 when they differ, 2 when the channel did not answer.
Rows the records do not hold (older releases, rows of status unknown) are kept as they are; what the
records cannot give (drivers, GPU architectures, what each variant runs on, the other routes) stays
curated, with its source, and is never touched.

``--sample``: the records are a sample of the channel (a metadata channel of real locks), whose missing
builds prove nothing: each field becomes the union of the committed value and what the records show (the
lowest glibc floor), sources and ``as_of`` stay, and a difference means the records show a build the data
lacks. ``--write`` also records what was read in the route's ``regenerated`` block: the channel, where the
records came from (``--records``, else the URL), the day (``--date``, else today), how many records and
their digest (``envguard.channelfacts.records_digest``), and whether they were a sample.
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


def _union(field: str, was: Any, now: Any) -> Any:
    """A field as the committed row and a sample's records say together, in the order rows() writes it: nothing
    the data holds is dropped, and a glibc floor is the lowest either names."""
    if field == "status":
        return "released"  # a record of the release is its evidence
    if field == "glibc":
        return {k: min((v for v in (was.get(k), now.get(k)) if v), key=line_key)
                for k in sorted({**was, **now}, key=lambda k: (k != "cpu", k))}
    if field == "cuda":
        return {p: sorted(set(was.get(p, [])) | set(now.get(p, [])), key=line_key) for p in sorted({**was, **now})}
    if field == "variants":
        return {p: {c: sorted(set(was.get(p, {}).get(c, [])) | set(now.get(p, {}).get(c, [])))
                    for c in sorted({**was.get(p, {}), **now.get(p, {})})} for p in sorted({**was, **now})}
    return sorted(set(was) | set(now), key=line_key if field in ("versions", "python") else None)


def new_rows(records: channelfacts.ChannelRecords, data: dict[str, Any], sample: bool) -> dict[str, dict[str, Any]]:
    """The rows these records give (line -> row); over a ``sample``, each united with the committed row."""
    rows = records.rows()
    if not sample:
        return rows
    committed_rows = data.get("releases") or {}
    out: dict[str, dict[str, Any]] = {}
    for line, new in rows.items():
        old = committed_rows.get(line) or {}
        out[line] = {f: _union(f, _norm(f, old.get(f), old), new.get(f, _norm(f, None, old)))
                     for f in FIELDS if f in new or f in old}
    return out


def new_toolkit(records: channelfacts.ChannelRecords, data: dict[str, Any], sample: bool) -> list[str]:
    lines = set(records.cuda_versions) | (set(data.get("toolkit_lines") or []) if sample else set())
    return sorted(lines, key=line_key)


def diff(records: channelfacts.ChannelRecords, data: dict[str, Any], sample: bool = False) -> list[str]:
    """``line.field: committed -> records`` for every field the records give that differs; new rows with +."""
    out: list[str] = []
    rows = data.get("releases") or {}
    for line, new in new_rows(records, data, sample).items():
        old = rows.get(line)
        if old is None:
            out.append(f"+ {line}: {json.dumps({k: new[k] for k in FIELDS if k in new})}")
            continue
        for field in FIELDS:
            if field not in new and field in ("glibc", "variants"):
                continue  # the records of that release carry none (no Linux CUDA builds sampled)
            was, now = _norm(field, old.get(field), old), new.get(field, [])
            if field == "cuda" and not sample:
                was = {p: v for p, v in was.items() if p in records.platforms}
            if was != now:
                out.append(f"{line}.{field}: {json.dumps(was)} -> {json.dumps(now)}")
    toolkit = list(data.get("toolkit_lines") or [])
    if new_toolkit(records, data, sample) != toolkit:
        out.append(f"toolkit_lines: {json.dumps(toolkit)} -> {json.dumps(new_toolkit(records, data, sample))}")
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
                today: dt.date, sample: bool = False) -> dict[str, dict[str, Any]]:
    rows = {line: dict(row) for line, row in (data.get("releases") or {}).items()}
    for line, new in new_rows(records, data, sample).items():
        row = rows.setdefault(line, {})
        for field in FIELDS:
            if field in new:
                row[field] = new[field]
        if not sample or not row.get("source"):  # a sample adds to the evidence a row names; it replaces none
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


def write(records: channelfacts.ChannelRecords, data: dict[str, Any], today: dt.date, path: Path = DATA, *,
          sample: bool = False, source: str | None = None) -> None:
    """Replace the conda-forge route's release rows, toolkit lines, date (not over a sample: its records are no
    newer evidence) and ``regenerated`` block in ``path``, nothing else."""
    text = path.read_text(encoding="utf-8")
    start = text.index("\n  conda-forge:\n")
    end = text.index("\n  pypi:\n", start)
    block = text[start:end]
    rows_at = block.index("\n    releases:\n") + 1
    rows_end = block.index("\n    # Build variants", rows_at) + 1
    block = block[:rows_at] + render_rows(merged_rows(records, data, today, sample)) + block[rows_end:]
    tl_at = block.index("    toolkit_lines:")
    tl_end = block.index("]\n", tl_at) + 2
    block = block[:tl_at] + _wrapped("    toolkit_lines: [", new_toolkit(records, data, sample)) + block[tl_end:]
    if not sample:
        block = _replace_line(block, "    as_of:", f'    as_of: "{today.isoformat()}"')
    read = {"channel": records.channel, "records": source or records.url, "date": today.isoformat(),
            "count": records.count, "digest": records.digest, "sample": sample}
    done = "".join(f"      {k}: {json.dumps(v)}\n" for k, v in read.items())
    if "\n    regenerated:\n" in block:  # its lines follow, indented deeper, up to the next key or comment
        at = block.index("\n    regenerated:\n") + len("\n    regenerated:\n")
        stop = re.compile(r"^ {0,4}\S", re.M).search(block, at)
        block = block[:at] + done + block[stop.start() if stop else len(block):]
    else:  # before the release rows' comment: the first regeneration that records what it read
        at = block.index("    # The CUDA toolkit lines")
        block = block[:at] + "    regenerated:\n" + done + block[at:]
    path.write_text(text[:start] + block + text[end:], encoding="utf-8")


def _wrapped(head: str, values: list[str], width: int = 116) -> str:
    """``head`` and a flow list over as many lines as it takes, each continuation line under the first item."""
    lines, line = [], head
    for i, v in enumerate(values):
        item = _flow(v) + ("," if i < len(values) - 1 else "")
        if line.strip() not in ("", head.strip()) and len(line) + 1 + len(item) > width:
            lines.append(line)
            line = " " * len(head) + item
        else:
            line += ("" if line.endswith("[") else " ") + item
    return "\n".join([*lines, line + "]"]) + "\n"


def _replace_line(block: str, prefix: str, new: str) -> str:
    at = block.index(prefix)
    return block[:at] + new + block[block.index("\n", at):]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--channel", default=compat.CONDA_FORGE)
    ap.add_argument("--url", help="where the records are read (default: the channel under $ENVGUARD_CHANNEL_ALIAS)")
    ap.add_argument("--platform", action="append", dest="platforms", help=f"repeatable (default: {PLATFORMS})")
    ap.add_argument("--write", action="store_true", help="rewrite the rows in envguard/data/compat.yaml")
    ap.add_argument("--sample", action="store_true",
                    help="the records are a sample of the channel: add what they show, drop nothing")
    ap.add_argument("--records", help="how compat.yaml names where the records came from (default: the URL)")
    ap.add_argument("--date", type=dt.date.fromisoformat, default=None,
                    help="the day --write records (YYYY-MM-DD, default: today)")
    ap.add_argument("--data", type=Path, default=DATA, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    try:
        records = channelfacts.fetch(args.channel, list(args.platforms or PLATFORMS), args.url)
    except channelfacts.ChannelUnreachable as e:
        print(f"error: {e} did not answer", file=sys.stderr)
        return 2
    data = committed(args.channel, args.data)
    changes = diff(records, data, args.sample)
    print(f"# {args.channel} records at {records.url}: {len(records.torch)} pytorch records, "
          f"{len(records.rows())} release lines; {len(changes)} difference(s) from {args.data.name}")
    print(f"# {records.count} records read{' (a sample)' * args.sample}, digest {records.digest}")
    for platform, lines in records.pythons:  # what the builds' Python lines can be checked against
        print(f"# python packages on {platform}: {', '.join(lines)}")
    for c in changes:
        print(c)
    if args.write:  # also when nothing changed: the data then records what confirmed it
        write(records, data, args.date or dt.date.today(), args.data, sample=args.sample, source=args.records)
        print(f"wrote {args.data}")
    return 1 if changes else 0


if __name__ == "__main__":
    status = main()
    # py-rattler's async runtime can crash while the interpreter finalises (engine-notes.md): the answer is
    # printed and the file written, so leave without finalising.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
