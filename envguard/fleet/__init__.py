"""``envguard fleet``: one verdict over many nodes' ``envguard check --format json`` reports.

Nodes are grouped by what makes them behave differently: platform, the lock (its sha256), torch's
version and build, the CUDA runtime, the NVIDIA driver, the GPU models and capabilities, the set of
findings, pip-over-conda state, the smoke and distributed verdicts, and the installed packages. The
reference, per platform, is the lock given with ``--lockfile`` (the largest group that installed exactly
the lock's packages for that platform), else the majority. Every other group is a deviation, shown with
its nodes (``gpu[001-017,020]``), what differs from the reference in diff's change classes
(:func:`envguard.diff.diff_packages`) and its findings.

Reading is the cost that matters at a thousand nodes (bench/fleet.py): each report is parsed once and
reduced to a hashable key; packages become :class:`~envguard.model.Package` objects only for one node
per group. Pure apart from reading the reports and the lock.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envguard.errors import UserError
from envguard.fleet import identity
from envguard.fleet.hosts import compress
from envguard.fleet.variants import variant_fact
from envguard.model import canonical_name

SCHEMA = "envguard.fleet/1"
MAX_REPORT_BYTES = 64 << 20
# check's pip-over-conda codes. Only warnings and errors count: an info EG520 is a torch stack taken from pip
# alone on conda's Python (a supported layout), an info EG523 only says where an import resolves.
PIP_OVER_CONDA = frozenset({"EG520", "EG521", "EG522", "EG523", "EG524"})
_FACTS = ("platform", "lock", "torch", "driver", "gpus", "pip_over_conda", "smoke", "distributed", "variant")


@dataclass
class Group:
    nodes: list[str]
    facts: dict[str, Any]  # shown and compared: see _FACTS
    findings: list[dict[str, Any]]  # one node's, every one of them (the group shares the codes)
    exit_codes: list[int]
    report: dict[str, Any]  # the first node's report: its packages are the group's
    path: str
    reference: bool = False
    changes: list[Any] = field(default_factory=list)  # envguard.diff.Change against the reference packages
    fact_changes: list[tuple[str, str, str]] = field(default_factory=list)  # (fact, reference, this group)

    @property
    def deviates(self) -> bool:
        return not self.reference

    @property
    def ranges(self) -> str:
        return compress(self.nodes)

    def to_dict(self) -> dict[str, Any]:
        from envguard.redact import redact

        return {
            "reference": self.reference, "count": len(self.nodes), "nodes": compress(self.nodes),
            "facts": {k: self.facts[k] for k in _FACTS}, "exit_codes": sorted(set(self.exit_codes)),
            "fact_changes": [{"fact": f, "reference": a, "group": b} for f, a, b in self.fact_changes],
            "changes": [c.to_dict() for c in self.changes],
            "findings": [{k: (redact(v) if isinstance(v, str) else v) for k, v in f.items()} for f in self.findings],
        }


@dataclass
class FleetResult:
    groups: list[Group]  # the reference first, then by size
    unreadable: list[tuple[str, str]]  # (path, why)
    reference: str  # "lock <path>" or "majority"
    lockfile: str | None = None
    distributed: dict[str, Any] | None = None
    # two reports of one node, a world size that is not the number of reports (envguard.fleet.identity)
    identity: list[dict[str, Any]] = field(default_factory=list)

    @property
    def nodes(self) -> int:
        return sum(len(g.nodes) for g in self.groups)

    @property
    def platforms(self) -> list[str]:
        return sorted({str(g.facts["platform"]) for g in self.groups})

    @property
    def matching(self) -> int:
        return sum(len(g.nodes) for g in self.groups if g.reference)

    @property
    def exit_code(self) -> int:
        """2 unreadable reports > 1 a deviating group, a node whose own check failed, or reports that do not
        add up to the nodes (one node's twice, a world size that is not their number) > 0."""
        if self.unreadable:
            return 2
        if any(g.deviates for g in self.groups) or any(c for g in self.groups for c in g.exit_codes) \
                or self.identity:
            return 1
        return 0

    def summary(self) -> str:
        dev = [g for g in self.groups if g.deviates]
        ref = "the lock" if self.lockfile else ("the majority of their platform" if len(self.platforms) > 1
                                                 else "the majority")
        from envguard.report import plural

        text = f"{self.matching} of {plural(self.nodes, 'node')} {'matches' if self.nodes == 1 else 'match'} {ref}"
        if dev:
            text += f"; {plural(sum(len(g.nodes) for g in dev), 'deviates', 'deviate')} in {plural(len(dev), 'group')}"
        failed = sum(1 for g in self.groups for c in g.exit_codes if c)
        if failed:
            text += f"; {plural(failed, 'node')} failed {'its' if failed == 1 else 'their'} own check"
        dup = sum(1 for p in self.identity if p["problem"] == "duplicate")
        wrong = sum(len(g.nodes) for g in self.groups if (g.facts.get("variant") or {}).get("wrong"))
        if wrong:
            text += f"; {plural(wrong, 'node')} on the wrong variant"
        if dup:
            text += f"; {plural(dup, 'node')} reported twice or more"
        if any(p["problem"] == "world-size" for p in self.identity):
            text += "; the distributed world size is not the number of reports"
        if self.unreadable:
            text += f"; {len(self.unreadable)} report{'s' * (len(self.unreadable) != 1)} unreadable"
        return text

    def to_dict(self) -> dict[str, Any]:
        from envguard.redact import redact

        counts = {"nodes": self.nodes, "matching": self.matching, "groups": len(self.groups),
                  "deviating_groups": sum(1 for g in self.groups if g.deviates),
                  "failed_nodes": sum(1 for g in self.groups for c in g.exit_codes if c),
                  "unreadable": len(self.unreadable), "identity_problems": len(self.identity)}
        return {"schema": SCHEMA, "exit_code": self.exit_code, "counts": counts, "summary": self.summary(),
                "nodes": self.nodes,
                "matching": self.matching, "reference": redact(self.reference),
                "lockfile": redact(self.lockfile) if self.lockfile else None,
                "groups": [g.to_dict() for g in self.groups],
                "unreadable": [{"path": redact(p), "error": redact(e)} for p, e in self.unreadable],
                "distributed": self.distributed,
                "identity": [{**p, "message": redact(p["message"]), "reports": [redact(r) for r in p["reports"]]}
                             for p in self.identity]}


# --------------------------------------------------------------------------- reading


def report_paths(inputs: Sequence[str | Path]) -> tuple[list[Path], list[tuple[str, str]]]:
    """Files to read: each file given, and every ``*.json`` directly inside each directory given."""
    files: list[Path] = []
    bad: list[tuple[str, str]] = []
    for raw in inputs:
        p = Path(raw)
        if p.is_dir():
            found = sorted(q for q in p.glob("*.json"))
            if not found:
                bad.append((str(p), "no *.json reports in this directory"))
            files += found
        elif p.is_file():
            files.append(p)
        elif p.exists():
            bad.append((str(p), "not a regular file"))
        else:
            bad.append((str(p), "no such file or directory"))
    return files, bad


def _read(path: Path) -> dict[str, Any]:
    """One report, or ValueError saying why not."""
    from envguard.errors import UserError
    from envguard.yamlio import read_bytes

    try:
        # one open, checked through its descriptor: a FIFO or device swapped in after a first look is refused
        # rather than read forever
        raw = read_bytes(path, limit=MAX_REPORT_BYTES)
    except UserError as e:
        raise ValueError(e.reason) from None
    try:
        if not raw.strip():  # `check ... > node.json` that stopped before writing (exit 2: no environment, ...)
            raise ValueError("empty: the check on this node wrote no report (its exit status and error are in the "
                             "job's output)")
        data = json.loads(raw)
    except OSError as e:
        raise ValueError(e.strerror or str(e)) from None
    except UnicodeDecodeError:
        raise ValueError("not UTF-8 JSON") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"not JSON (line {e.lineno}, column {e.colno}: {e.msg})") from None
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
    if not isinstance(data, dict):
        raise ValueError("not an envguard check report (a JSON object with a schema)")
    schema = data.get("schema")
    if not (isinstance(schema, str) and schema.startswith("envguard.check/")):
        raise ValueError(f"not an envguard check report (schema {schema!r}); write one with "
                         "`envguard check --format json`")
    if not isinstance(data.get("packages"), list) or not isinstance(data.get("findings", []), list):
        raise ValueError("'packages' and 'findings' must be lists")
    _check_field_types(data)
    return data


_REPORT_STRINGS = ("platform", "prefix", "kind", "lockfile", "lock_sha256", "host")
_PACKAGE_STRINGS = ("name", "version", "manager", "build", "channel", "sha256", "md5", "url", "platform")


def _check_field_types(data: dict[str, Any]) -> None:
    """Every field fleet reads has the type check writes (text or null; ``depends`` a list of text): a report
    edited or corrupted on one node is named as unreadable with the key, never a TypeError further on."""
    def kind(value: Any) -> str:
        return type(value).__name__

    for key in _REPORT_STRINGS:
        if data.get(key) is not None and not isinstance(data[key], str):
            raise ValueError(f"{key}: expected text or null, found {kind(data[key])}")
    for i, pkg in enumerate(data["packages"]):
        if not isinstance(pkg, dict):
            raise ValueError(f"packages[{i}]: expected an object, found {kind(pkg)}")
        for key in _PACKAGE_STRINGS:
            if pkg.get(key) is not None and not isinstance(pkg[key], str):
                raise ValueError(f"packages[{i}].{key}: expected text or null, found {kind(pkg[key])}")
        depends = pkg.get("depends")
        if depends is not None and not (isinstance(depends, list) and all(isinstance(d, str) for d in depends)):
            raise ValueError(f"packages[{i}].depends: expected a list of text")


def _s(v: Any) -> str | None:
    return None if v is None else str(v)


def _facts(rep: dict[str, Any]) -> dict[str, Any]:
    """What the group is keyed and compared on, as plain JSON-able values."""
    torch = rep.get("torch") if isinstance(rep.get("torch"), dict) else None
    gpu = rep.get("gpu") if isinstance(rep.get("gpu"), dict) else None
    smoke = rep.get("smoke") if isinstance(rep.get("smoke"), dict) else None
    dist = rep.get("distributed") if isinstance(rep.get("distributed"), dict) else None
    findings = [f for f in rep.get("findings") or [] if isinstance(f, dict)]
    return {
        "platform": _s(rep.get("platform")),
        "lock": _s(rep.get("lock_sha256")) if rep.get("lockfile") or rep.get("lock_sha256") else None,
        "torch": ({"version": _s(torch.get("version")), "cuda": _s(torch.get("cuda")), "cpu": bool(torch.get("cpu"))}
                  if torch else None),
        "driver": _s(gpu.get("driver_version")) if gpu else None,
        "gpus": [[_s(g.get("name")), _s(g.get("capability"))] for g in gpu.get("gpus") or [] if isinstance(g, dict)]
        if gpu else [],
        "pip_over_conda": sorted({canonical_name(str(f.get("package"))) for f in findings
                                  if f.get("code") in PIP_OVER_CONDA and f.get("package")
                                  and f.get("severity") in ("error", "warning")}),
        "smoke": ({"exit_code": smoke.get("exit_code"), "timed_out": bool(smoke.get("timed_out"))} if smoke else None),
        "distributed": ({"ok": bool(dist.get("ok")), "backend": _s(dist.get("backend")),
                         "world_size": dist.get("world_size"), "case": _s(dist.get("case"))} if dist else None),
        "variant": variant_fact(rep),  # envguard.fleet.variants: each variant is compared within itself
    }


def _freeze(v: Any) -> Any:
    if isinstance(v, dict):
        return tuple((k, _freeze(x)) for k, x in v.items())
    if isinstance(v, list):
        return tuple(_freeze(x) for x in v)
    return v


def _key(rep: dict[str, Any], facts: dict[str, Any]) -> tuple[Any, ...]:
    findings = tuple(sorted((str(f.get("code")), str(f.get("severity")), str(f.get("package")))
                            for f in rep.get("findings") or [] if isinstance(f, dict)))
    pkgs = tuple(sorted((str(p.get("name")), str(p.get("manager")), str(p.get("version")), str(p.get("build")),
                         str(p.get("channel")), str(p.get("sha256")))
                        for p in rep["packages"] if isinstance(p, dict)))
    return _freeze(facts), findings, pkgs


def node_name(path: Path, rep: dict[str, Any] | None = None) -> str:
    """Slurm's node name where the report carries it (``node.slurm_node``), else the report file's name
    (``gpu017.json``): the examples write one report per node, named after the node, which is also what a
    pod's own host name is not."""
    return identity.node_name(path, identity.node_of(rep or {}))


# --------------------------------------------------------------------------- the command


def run_fleet(inputs: Sequence[str | Path], *, lockfile: Path | None = None) -> FleetResult:
    """Read the reports and group them. Raises UserError when no report at all can be read or the
    lock cannot; unreadable reports are returned, named, and the rest still grouped."""
    files, unreadable = report_paths(inputs)
    groups: dict[tuple[Any, ...], Group] = {}
    dist_reports: list[tuple[str, dict[str, Any]]] = []
    seen: list[tuple[str, tuple[Any, ...] | None]] = []
    dist_paths: list[tuple[str, dict[str, Any]]] = []
    for path in files:
        try:
            rep = _read(path)
            facts = _facts(rep)
            key = _key(rep, facts)
        except ValueError as e:
            unreadable.append((str(path), str(e)))
            continue
        except (TypeError, AttributeError) as e:  # a report with wrong-typed fields
            unreadable.append((str(path), f"malformed report ({type(e).__name__}: {e})"))
            continue
        node = identity.node_of(rep)
        name = identity.node_name(path, node)
        seen.append((str(path), identity.identity_key(node)))
        reported = rep.get("exit_code")
        code = reported if isinstance(reported, int) else 0
        g = groups.get(key)
        if g is None:
            findings = [{k: f.get(k) for k in ("code", "severity", "message", "package")}
                        for f in rep.get("findings") or [] if isinstance(f, dict)]
            groups[key] = Group([name], facts, findings, [code], rep, str(path))
        else:
            g.nodes.append(name)
            g.exit_codes.append(code)
        if isinstance(rep.get("distributed"), dict):
            dist_reports.append((name, rep["distributed"]))
            dist_paths.append((str(path), rep["distributed"]))
    if not groups:
        shown = "; ".join(f"{p}: {why}" for p, why in unreadable[:3]) or "nothing given"
        raise UserError(f"no readable envguard check report ({shown})", key="REPORT",
                        fix="pass reports written by `envguard check --format json`, or a directory of them")
    ordered = sorted(groups.values(), key=lambda g: (-len(g.nodes), max(g.exit_codes), min(g.nodes)))
    result = _compare(ordered, unreadable, lockfile, _distributed(dist_reports))
    result.identity = identity.problems(seen, dist_paths)
    return result


def _packages(g: Group) -> list[Any]:
    from envguard.sources.report import read_report

    desc = read_report(g.report, g.path)
    return desc.packages_for(g.facts["platform"])


def _compare(groups: list[Group], unreadable: list[tuple[str, str]], lockfile: Path | None,
             dist: dict[str, Any] | None) -> FleetResult:
    """Mark the reference groups and say how every other group differs from them.

    Each platform has its own reference: with a lock, the largest group that installed exactly the lock's
    packages for its platform; without one, the largest group of that platform. A node on linux-aarch64
    is never compared with linux-64 builds. Packages are compared with the lock (or that reference), facts
    and findings with the platform's reference group (the first reference when its platform has none)."""
    from envguard.diff import diff_packages
    from envguard.fleet import variants as fv

    pkgs = {id(g): _packages(g) for g in groups}
    # keyed by (platform, variant): a project's variants run different locks by design (envguard.fleet.variants)
    expected: dict[tuple[str | None, str | None], list[Any]] = {}
    refs: dict[tuple[str | None, str | None], Group] = {}
    desc = None
    if lockfile is None:
        reference = "majority"
        for g in groups:  # largest first: the first group of each platform and variant is its majority
            if not fv.wrong(g.facts):
                refs.setdefault(fv.ref_key(g.facts), g)
        expected = {key: pkgs[id(g)] for key, g in refs.items()}
    else:
        reference = f"lock {lockfile}"
        desc, lock_sha = _lock_description(lockfile)
        from envguard.variants import lock_variant

        variant = lock_variant(desc.custom_metadata)
        for g in groups:
            key, plat = fv.ref_key(g.facts), g.facts["platform"]
            if fv.wrong(g.facts):
                continue
            if variant is not None and fv.name(g.facts) not in (None, variant):  # another variant's nodes
                if key not in refs:
                    refs[key], expected[key] = g, pkgs[id(g)]
                continue
            if key not in expected:
                expected[key] = desc.packages_for(plat)
            if key not in refs and g.facts["lock"] in (None, lock_sha) \
                    and not diff_packages(expected[key], pkgs[id(g)]):
                refs[key] = g
    first_ref = next((g for g in groups if g in refs.values()), None)
    for g in groups:
        key = fv.ref_key(g.facts)
        g.reference = refs.get(key) is g
        if g.reference:
            continue
        if fv.wrong(g.facts) and fv.should_key(g.facts) in refs:  # compared with the variant it should run
            key = fv.should_key(g.facts)
        ref_group = refs.get(key) or first_ref
        base = expected.get(key)
        if base is None:
            base = desc.packages_for(g.facts["platform"]) if desc is not None else \
                pkgs[id(ref_group)] if ref_group is not None else []
        g.changes = diff_packages(base, pkgs[id(g)])
        g.fact_changes = fact_changes((ref_group or groups[0]).facts, g.facts)
        if ref_group is not None:
            g.fact_changes += _finding_changes(ref_group.findings, g.findings)
    groups.sort(key=lambda g: not g.reference)  # stable: the references first, the rest by size
    return FleetResult(groups, unreadable, reference, str(lockfile) if lockfile else None, dist)


def _lock_description(lockfile: Path) -> tuple[Any, str]:
    """The lock, every platform of it, and the sha256 of its bytes (what check reports as lock_sha256)."""
    import hashlib

    from envguard import sources
    from envguard.filekind import require_lock

    if not Path(lockfile).exists():
        raise UserError("lock file not found", file=str(lockfile), key="--lockfile",
                        fix="pass the conda-lock.yml the nodes were built from")
    require_lock(Path(lockfile))
    return sources.load(str(lockfile)), hashlib.sha256(Path(lockfile).read_bytes()).hexdigest()


def describe_fact(name: str, value: Any) -> str:
    """A fact as a reviewer reads it."""
    if value is None or value == []:
        return {"lock": "no lock", "torch": "no torch", "driver": "no driver", "smoke": "not run",
                "distributed": "not run", "pip_over_conda": "none", "variant": "none"}.get(name, "none")
    if name == "torch":
        build = "CPU" if value["cpu"] else (f"CUDA {value['cuda']}" if value["cuda"] else "build unknown")
        return f"{value['version']} ({build})"
    if name == "lock":
        return f"sha256 {value[:12]}"
    if name == "gpus":
        counts: dict[str, int] = {}
        for model, cap in value:
            label = f"{model} ({cap})"
            counts[label] = counts.get(label, 0) + 1
        return ", ".join(f"{n}× {label}" for label, n in counts.items())
    if name == "pip_over_conda":
        return ", ".join(value)
    if name == "smoke":
        return "timed out" if value["timed_out"] else ("passed" if value["exit_code"] == 0
                                                       else f"failed (exit {value['exit_code']})")
    if name == "variant":
        from envguard.fleet.variants import describe

        return describe(value)
    if name == "distributed":
        state = "ok" if value["ok"] else f"failed ({value['case'] or 'error'})"
        return f"{state}, {value['backend'] or '?'}, world {value['world_size']}"
    return str(value)


FACT_LABELS = {"pip_over_conda": "pip over conda", "gpus": "GPUs", "distributed": "distributed smoke"}


def fact_changes(ref: dict[str, Any], other: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(FACT_LABELS.get(k, k), describe_fact(k, ref[k]), describe_fact(k, other[k]))
            for k in _FACTS if ref[k] != other[k]]


def count_text(group: Group) -> str:
    """``2 errors, 1 warning`` for one node of the group (they share their findings)."""
    e = sum(1 for x in group.findings if x.get("severity") == "error")
    w = sum(1 for x in group.findings if x.get("severity") == "warning")
    return f"{e} error{'s' * (e != 1)}, {w} warning{'s' * (w != 1)}"


def _finding_changes(ref: list[dict[str, Any]], other: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    def codes(fs: list[dict[str, Any]]) -> set[str]:
        return {f"{f['code']}" + (f" ({f['package']})" if f.get("package") else "") for f in fs
                if f.get("severity") in ("error", "warning")}

    a, b = codes(ref), codes(other)
    if a == b:
        return []
    return [("findings", ", ".join(sorted(a - b)) or "—", ", ".join(sorted(b - a)) or "—")]


def _distributed(results: list[tuple[str, dict[str, Any]]]) -> dict[str, Any] | None:
    """The fleet's view of check --distributed: who joined, who was missing, the slowest all-reduce."""
    if not results:
        return None
    missing: dict[int, Any] = {}
    for _, d in results:
        for m in d.get("missing") or []:
            if isinstance(m, dict) and isinstance(m.get("rank"), int):
                missing.setdefault(m["rank"], m.get("host"))
    by_size: dict[int, list[tuple[float, str]]] = {}
    for name, d in results:
        for row in d.get("bandwidth") or []:
            if isinstance(row, dict) and isinstance(row.get("bytes"), int) and \
                    isinstance(row.get("busbw_gbps"), (int, float)):
                by_size.setdefault(row["bytes"], []).append((float(row["busbw_gbps"]), name))
    failed = sorted(name for name, d in results if not d.get("ok"))
    return {
        "reports": len(results), "ok": len(results) - len(failed), "failed": compress(failed) if failed else "",
        "world_sizes": sorted({d.get("world_size") for _, d in results if isinstance(d.get("world_size"), int)}),
        "backends": sorted({str(d.get("backend")) for _, d in results if d.get("backend")}),
        "cases": sorted({str(d.get("case")) for _, d in results if d.get("case")}),
        "missing": [{"rank": r, "host": h} for r, h in sorted(missing.items())],
        "rendezvous_s_max": max((float(d["rendezvous_s"]) for _, d in results
                                 if isinstance(d.get("rendezvous_s"), (int, float))), default=None),
        "busbw_gbps": [{"bytes": size, "min": min(v)[0], "min_node": min(v)[1],
                        "median": round(statistics.median(x for x, _ in v), 4)}
                       for size, v in sorted(by_size.items())],
    }


# --------------------------------------------------------------------------- markdown (pure text)


def _md(text: object) -> str:
    from envguard.redact import redact

    return redact(str(text)).replace("|", "\\|").replace("\n", " ")


def to_markdown(result: FleetResult, *, max_rows: int = 50) -> str:
    from envguard.diff import LABELS, describe

    lines = ["### envguard fleet", "", f"**{_md(result.summary())}**", "",
             "| | nodes | count | torch | driver / GPUs | smoke | findings |", "|---|---|---|---|---|---|---|"]
    for g in result.groups:
        icon = "✅" if g.reference and not any(g.exit_codes) else ("⚠️" if g.reference else "❌")
        f = g.facts
        lines.append(f"| {icon} | `{_md(g.ranges)}` | {len(g.nodes)} | {_md(describe_fact('torch', f['torch']))} | "
                     f"{_md(describe_fact('driver', f['driver']))}; {_md(describe_fact('gpus', f['gpus']))} | "
                     f"{_md(describe_fact('smoke', f['smoke']))} | {count_text(g)} |")
    for i, g in enumerate(result.groups):
        shown = [f for f in g.findings if f.get("severity") in ("error", "warning")]
        if not g.deviates and not shown:
            continue
        title = "Reference" if g.reference else f"Group {i + 1}"
        lines += ["", f"#### {title}: {len(g.nodes)} node{'s' * (len(g.nodes) != 1)} `{_md(g.ranges)}`", ""]
        if g.fact_changes or g.changes:
            lines += ["| what | change | reference | this group |", "|---|---|---|---|"]
            lines += [f"| {_md(k)} | differs | {_md(a)} | {_md(b)} |" for k, a, b in g.fact_changes]
            for c in g.changes[:max_rows]:
                lines.append(f"| {_md(c.name)} | {_md(', '.join(LABELS[k] for k in c.kinds))} | "
                             f"{_md(describe(c.old))} | {_md(describe(c.new))} |")
            if len(g.changes) > max_rows:
                lines.append(f"\n… and {len(g.changes) - max_rows} more package changes (see `--format json`)")
        lines += [""] * bool(shown) + [f"- **{_md(f.get('code'))}** {_md(f.get('severity'))}: {_md(f.get('message'))}"
                                       for f in shown]
    d = result.distributed
    if d:
        lines += ["", "#### Distributed", "", _md(distributed_line(d))]
    if result.identity:
        lines += ["", "#### Reports and nodes", ""] + [f"- {_md(p['message'])}" for p in result.identity]
    if result.unreadable:
        lines += ["", "#### Unreadable reports", ""] + [f"- `{_md(p)}`: {_md(e)}" for p, e in result.unreadable]
    return "\n".join(lines).rstrip() + "\n"


def distributed_line(d: dict[str, Any]) -> str:
    parts = [f"{d['ok']} of {d['reports']} ranks ok"]
    if d["world_sizes"]:
        parts.append(f"world {'/'.join(map(str, d['world_sizes']))} ({', '.join(d['backends']) or '?'})")
    if d["failed"]:
        parts.append(f"failed: {d['failed']}" + (f" ({', '.join(d['cases'])})" if d["cases"] else ""))
    if d["missing"]:
        parts.append("missing " + ", ".join(f"rank {m['rank']}" + (f" ({m['host']})" if m["host"] else "")
                                            for m in d["missing"][:10]))
    if d["rendezvous_s_max"] is not None:
        parts.append(f"rendezvous ≤ {d['rendezvous_s_max']:.2f} s")
    for b in d["busbw_gbps"]:
        parts.append(f"{size_text(b['bytes'])} busbw min {b['min']:.2f} GB/s ({b['min_node']}), "
                     f"median {b['median']:.2f}")
    return "; ".join(parts)


def size_text(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):g} {unit}"
    return f"{n} B"
