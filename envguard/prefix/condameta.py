"""The conda side of a prefix: one ``conda-meta/*.json`` record read (plain json, for start-up time), and
the records whose dist-info another installer removed or rewrote."""

from __future__ import annotations

import json
import os
from pathlib import Path

from envguard.prefix.records import PIP_INSTALLERS, CondaRecord, FileEntry, Overwritten
from envguard.redact import redact


def _read_record(path: Path) -> CondaRecord:
    # Plain json is faster here than rattler.PrefixRecord.from_path once the
    # import of rattler is counted, and check must start fast (bench/check.py).
    data = json.loads(path.read_bytes())
    if not isinstance(data, dict) or not data.get("name") or not data.get("version"):
        raise ValueError("not a conda package record (no name/version)")
    files = tuple(str(f) for f in data.get("files") or ())
    entries: list[FileEntry] = []
    for p in (data.get("paths_data") or {}).get("paths") or ():
        rewritten = bool(p.get("prefix_placeholder")) and not p.get("sha256_in_prefix")
        entries.append(
            FileEntry(
                path=p["_path"],
                path_type=str(p.get("path_type") or "hardlink"),
                sha256=p.get("sha256_in_prefix") or p.get("sha256"),
                size=p.get("size_in_bytes"),
                rewritten=rewritten,
            )
        )
    if not entries:  # old records have no paths_data: existence is all we can check
        entries = [FileEntry(path=f) for f in files]
    return CondaRecord(
        name=str(data["name"]),
        version=str(data["version"]),
        build=str(data.get("build") or data.get("build_string") or ""),
        channel=redact(str(data.get("channel") or "")).rstrip("/"),
        subdir=str(data.get("subdir") or ""),
        url=redact(str(data.get("url") or "")),
        md5=data.get("md5"),
        sha256=data.get("sha256"),
        depends=tuple(data.get("depends") or ()),
        meta_file=path.name,
        files=files,
        paths=tuple(entries),
        noarch=(data.get("noarch") if isinstance(data.get("noarch"), str) else None),
        requested_specs=_requested_specs(data),
        fn=str(data.get("fn") or ""),
    )


def _requested_specs(data: dict) -> tuple[str, ...]:
    specs = data.get("requested_specs")
    out = [str(s) for s in specs if isinstance(s, str) and s.strip()] if isinstance(specs, list) else []
    one = data.get("requested_spec")
    if isinstance(one, str) and one.strip() and one not in out:
        out.append(one)
    return tuple(out)


def _overwritten(prefix: Path, records: list[CondaRecord]) -> list[Overwritten]:
    """Conda records whose dist-info was removed or rewritten by another installer."""
    out: list[Overwritten] = []
    for r in records:
        for f in r.files:
            if not (f.endswith(".dist-info/METADATA") or f.endswith(".egg-info/PKG-INFO")):
                continue
            if not os.path.exists(prefix / f):
                out.append(Overwritten(r.name, f, "its metadata is gone (another installer removed it)"))
                continue
            installer_rel = f.rsplit("/", 1)[0] + "/INSTALLER"
            if installer_rel in r.files:
                try:
                    who = (prefix / installer_rel).read_text(encoding="utf-8").strip()
                except OSError:
                    who = ""
                if who.lower() in PIP_INSTALLERS:
                    out.append(Overwritten(r.name, f, f"its INSTALLER now says {who!r}"))
    return out
