"""Which node, job and rank a check report comes from, as the launcher told the process. Pure but for the
environment and the host name.

``envguard fleet`` names a node by this, not by its report's file name: on one host that runs several Slurm
nodes, or on clusters of cloned machines and containers that share a host name, the host name alone would make
two nodes one (their reports overwrote each other under ``$(hostname).json``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any


def node_identity(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``{"slurm_node", "job_id", "rank"}``: Slurm's node name (``SLURMD_NODENAME``), the job (``SLURM_JOB_ID``)
    and the global rank (``RANK`` as torchrun sets it, else srun's ``SLURM_PROCID``); each null where no launcher
    set it. The host name is the report's ``host``."""
    env = os.environ if env is None else env
    rank = (env.get("RANK") or env.get("SLURM_PROCID") or "").strip()
    return {"slurm_node": env.get("SLURMD_NODENAME") or None,
            "job_id": env.get("SLURM_JOB_ID") or None, "rank": int(rank) if rank.isdigit() else None}
