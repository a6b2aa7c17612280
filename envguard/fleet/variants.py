"""Variants in a fleet (#37, docs/variants.md "Verify"): nodes of a project with variants legitimately run
different locks (``cpu`` on the CPU nodes, ``cuda-12.6`` on the V100s, ``cuda-13.0`` on the Blackwells), so
each variant has its own reference (per platform, as before), and a node whose check says another declared
variant fits it (EG557: its variant cannot run there; EG558: another fits better) is on the wrong one: it is
never a reference and is compared with the nodes of the variant it should run."""

from __future__ import annotations

from typing import Any

WRONG_CODES = frozenset({"EG557", "EG558"})


def variant_fact(rep: dict[str, Any]) -> dict[str, Any] | None:
    """The report's variant (check's ``variant``: the name, and the variant this node's machine runs), or None
    for a single-variant project or a report of an older envguard."""
    v = rep.get("variant")
    if not isinstance(v, dict) or not isinstance(v.get("name"), str):
        return None
    pick = v.get("pick") if isinstance(v.get("pick"), str) else None
    codes = {f.get("code") for f in rep.get("findings") or [] if isinstance(f, dict)}
    return {"name": v["name"], "pick": pick, "wrong": bool(WRONG_CODES & codes)}


def name(facts: dict[str, Any]) -> str | None:
    v = facts.get("variant")
    return v["name"] if v else None


def wrong(facts: dict[str, Any]) -> bool:
    v = facts.get("variant")
    return bool(v and v["wrong"])


def ref_key(facts: dict[str, Any]) -> tuple[str | None, str | None]:
    """What a group is compared within: its platform and its variant."""
    return facts["platform"], name(facts)


def should_key(facts: dict[str, Any]) -> tuple[str | None, str | None]:
    """The reference a node on the wrong variant is compared with: the variant its machine runs."""
    v = facts.get("variant")
    return facts["platform"], (v["pick"] or v["name"]) if v else None


def describe(value: dict[str, Any]) -> str:
    if value["wrong"] and value["pick"] and value["pick"] != value["name"]:
        return f"{value['name']} (this machine runs {value['pick']})"
    return str(value["name"])
