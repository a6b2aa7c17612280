"""An ``envguard check --format json`` report: one machine's packages, to compare machines.

The report holds a top-level ``schema``/``version`` key and a ``packages`` list
of :class:`envguard.model.Package` dicts (``Package.to_dict``). The platform is
the report's ``platform`` key, else the packages' own.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

from envguard.channels import normalise_channel
from envguard.errors import UserError
from envguard.model import Package
from envguard.sources import Description
from envguard.sources.common import as_str, redact_opt

_FIELDS = {f.name for f in dataclasses.fields(Package)}


def read_report(data: Any, shown: str) -> Description:
    if not isinstance(data, dict) or not isinstance(data.get("packages"), list):
        raise UserError("no 'packages' list", file=shown, key="packages",
                        fix="pass the output of `envguard check --format json`")
    env = data.get("environment")
    top_platform = data.get("platform") or (env.get("platform") if isinstance(env, dict) else None)
    out: dict[str | None, list[Package]] = {}
    for i, d in enumerate(data["packages"]):
        if not isinstance(d, dict) or not d.get("name") or "version" not in d:
            raise UserError("each package needs a name and a version", file=shown, key=f"packages[{i}]")
        kw = {k: v for k, v in d.items() if k in _FIELDS}
        given = kw.get("manager") or "conda"
        if given not in ("conda", "pip"):
            raise UserError(f"unknown manager {given!r}", file=shown, key=f"packages[{i}].manager")
        manager: Literal["conda", "pip"] = "pip" if given == "pip" else "conda"
        plat = kw.get("platform") or top_platform
        pkg = Package(
            name=str(kw["name"]), version=as_str(kw["version"]), manager=manager,
            build=kw.get("build") or None,
            channel=normalise_channel(kw.get("channel")) if manager == "conda" else None,
            sha256=kw.get("sha256") or None, md5=kw.get("md5") or None, url=redact_opt(kw.get("url")),
            platform=plat, depends=tuple(kw.get("depends") or ()),
        )
        out.setdefault(plat, []).append(pkg)
    return Description(kind="report", path=shown, packages=out or {top_platform: []})
