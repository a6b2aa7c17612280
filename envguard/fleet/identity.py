"""Who wrote each report, and what a cluster gets wrong about it. Pure.

A node is named by the identity ``check`` writes into its report (``node``: host name, Slurm node name, job,
rank), not only by the report's file name: reports named ``$(hostname).json`` on several Slurm nodes of one host,
or on cloned machines and containers that share a host name, overwrote each other, and fleet then counted one
node for a world of several ranks without a word. Two reports of one identity, and a distributed smoke whose
world size is not the number of reports read, are named here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def node_of(rep: dict[str, Any]) -> dict[str, Any] | None:
    """The report's identity: its ``host`` and the ``node`` object (Slurm node, job, rank), typed as check
    writes them; None when the report carries neither."""
    raw = rep.get("node")
    node: dict[str, Any] = raw if isinstance(raw, dict) else {}
    host = rep.get("host") if isinstance(rep.get("host"), str) and rep.get("host") else None
    if not node and host is None:
        return None
    out: dict[str, Any] = {k: (node.get(k) if isinstance(node.get(k), str) else None)
                           for k in ("slurm_node", "job_id")}
    rank = node.get("rank")
    out["rank"] = rank if isinstance(rank, int) and not isinstance(rank, bool) else None
    out["hostname"] = host
    return out


def node_name(path: Path, node: dict[str, Any] | None) -> str:
    """Slurm's name of the node where the report says it; else the report file's name (the examples name
    each report after its node; a Kubernetes pod's host name is the pod's, not the node's)."""
    if node and node.get("slurm_node"):
        return str(node["slurm_node"])
    return path.stem


def identity_key(node: dict[str, Any] | None) -> tuple[Any, ...] | None:
    """What makes two reports one node's: (job, Slurm node, host name, rank); None when the report does not
    say (its file name is all there is)."""
    if not node or not (node.get("hostname") or node.get("slurm_node")):
        return None
    return node.get("job_id"), node.get("slurm_node"), node.get("hostname"), node.get("rank")


def describe_identity(key: tuple[Any, ...]) -> str:
    job, slurm, host, rank = key
    parts = [f"node {slurm}" if slurm else "", f"host {host}" if host and host != slurm else "",
             f"job {job}" if job else "", f"rank {rank}" if rank is not None else ""]
    return ", ".join(p for p in parts if p)


def problems(seen: list[tuple[str, tuple[Any, ...] | None]],
             distributed: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """``seen``: (report path, identity key) for every readable report; ``distributed``: (path, its
    ``distributed`` object). Each problem: ``{"problem": "duplicate"|"world-size", "message", "reports"}``."""
    out: list[dict[str, Any]] = []
    by_key: dict[tuple[Any, ...], list[str]] = {}
    for path, key in seen:
        if key is not None:
            by_key.setdefault(key, []).append(path)
    for key, paths in by_key.items():
        if len(paths) > 1:
            out.append({"problem": "duplicate", "reports": sorted(paths),
                        "message": f"{len(paths)} reports come from one node ({describe_identity(key)}): "
                                   f"{', '.join(sorted(paths))}; fleet cannot tell them apart: name each report "
                                   "after its node (SLURMD_NODENAME, else the host name) and rank, in one directory "
                                   "per job"})
    sizes: dict[int, list[str]] = {}
    for path, d in distributed:
        size = d.get("world_size")
        if isinstance(size, int) and not isinstance(size, bool):
            sizes.setdefault(size, []).append(path)
    n = len(distributed)
    for size, paths in sorted(sizes.items()):
        if size != n:
            what = "reports are missing or overwrote each other" if size > n else \
                "reports of other runs are mixed in"
            out.append({"problem": "world-size", "reports": sorted(paths),
                        "message": f"the distributed smoke ran with a world of {size} rank{'s' * (size != 1)}, but "
                                   f"{n} report{'s' * (n != 1)} of it {'was' if n == 1 else 'were'} read: {what} "
                                   "(one report per rank, each under its own name)"})
    return out
