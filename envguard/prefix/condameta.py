"""The conda side of a prefix: one ``conda-meta/*.json`` record read (:func:`read_record`: plain json, for
start-up time), and the records whose dist-info another installer removed or rewrote (:func:`overwritten`).
Both are called by envguard.prefix's scan."""

from __future__ import annotations

import json
import os
from pathlib import Path

from envguard.errors import UserError
from envguard.prefix.records import PIP_INSTALLERS, CondaRecord, FileEntry, Overwritten
from envguard.redact import redact
from envguard.safeio import read_small_text
from envguard.yamlio import read_bytes

#: the largest conda-meta record read: the biggest real ones (e.g. cuda-toolkit's thousands of paths) are a few MB
RECORD_LIMIT = 64 * 1024 * 1024


def read_record(path: Path) -> CondaRecord:
    # Plain json is faster here than rattler.PrefixRecord.from_path once the
    # import of rattler is counted, and check must start fast (bench/check.py).
    try:
        # a regular file of bounded size: a FIFO or a link to /dev/zero in conda-meta is refused, not read
        data = json.loads(read_bytes(path, limit=RECORD_LIMIT))
    except UserError as e:
        raise ValueError(e.problem) from None
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
    if not isinstance(data, dict) or not data.get("name") or not data.get("version"):
        raise ValueError("not a conda package record (no name/version)")
    _check_record_types(data)
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
                typed="path_type" in p,
                link_sha256=(p.get("sha256_in_prefix") or None) if p.get("path_type") == "softlink" else None,
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


def _check_record_types(data: dict) -> None:
    """The fields read below have the types conda and rattler write; anything else names the key (the record
    is then reported as unreadable), never an AttributeError further on."""
    def bad(key: str, expected: str, value: object) -> ValueError:
        return ValueError(f"{key}: expected {expected}, found {type(value).__name__}")

    for key in ("name", "version", "build", "build_string", "channel", "subdir", "url", "md5", "sha256", "fn"):
        if data.get(key) is not None and not isinstance(data[key], (str, int, float)):
            raise bad(key, "text", data[key])
    for key in ("files", "depends"):
        value = data.get(key)
        if value is not None and not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
            raise bad(key, "a list of text", value)
    paths_data = data.get("paths_data")
    if paths_data is None:
        return
    if not isinstance(paths_data, dict):
        raise bad("paths_data", "an object", paths_data)
    paths = paths_data.get("paths")
    if paths is not None and not isinstance(paths, list):
        raise bad("paths_data.paths", "a list", paths)
    for i, p in enumerate(paths or ()):
        if not isinstance(p, dict) or not isinstance(p.get("_path"), str):
            raise bad(f"paths_data.paths[{i}]", "an object with a _path", p)
        for key in ("path_type", "sha256", "sha256_in_prefix"):
            if p.get(key) is not None and not isinstance(p[key], str):
                raise bad(f"paths_data.paths[{i}].{key}", "text", p[key])
        if p.get("size_in_bytes") is not None and (isinstance(p["size_in_bytes"], bool)
                                                   or not isinstance(p["size_in_bytes"], int)):
            raise bad(f"paths_data.paths[{i}].size_in_bytes", "an integer", p["size_in_bytes"])


def _requested_specs(data: dict) -> tuple[str, ...]:
    specs = data.get("requested_specs")
    out = [str(s) for s in specs if isinstance(s, str) and s.strip()] if isinstance(specs, list) else []
    one = data.get("requested_spec")
    if isinstance(one, str) and one.strip() and one not in out:
        out.append(one)
    return tuple(out)


def overwritten(prefix: Path, records: list[CondaRecord]) -> list[Overwritten]:
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
                who = (read_small_text(prefix / installer_rel, 1 << 16) or "").strip()
                if who.lower() in PIP_INSTALLERS:
                    out.append(Overwritten(r.name, f, f"its INSTALLER now says {who!r}"))
    return out
