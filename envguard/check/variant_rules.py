"""Rules on the variant an environment was built from (#37, docs/variants.md "Verify"): which one it is
(EG556, info), that it cannot run on this machine (EG557, error: a CUDA 13 variant on a driver below 580), and
that another declared variant fits this machine better (EG558, warning: a ``cpu`` environment on a GPU node).

The facts (:func:`variant_facts`) are what ``envguard create`` recorded in the fingerprint (the variant), the
variants the project declares (the spec beside the lock, else the lock's ``custom_metadata``), and this machine
in CEP 30/46 terms (the driver, ``CONDA_OVERRIDE_CUDA*``); the judgement is envguard.variantpick's, the same
that chose the variant at create time."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envguard.check.fixes import E, I, W
from envguard.findings import Finding

if TYPE_CHECKING:
    from envguard.check.facts import CheckInput
    from envguard.variantpick import Host


@dataclass(frozen=True)
class _Declared:
    name: str
    cuda: str | None


@dataclass(frozen=True)
class VariantFacts:
    name: str  # the variant the environment was built from
    source: str  # where that is recorded: "the fingerprint" or "the lock's custom_metadata"
    declared: tuple[_Declared, ...]  # every declared variant, with its CUDA line (None: CPU)
    host: Host
    spec: str | None = None  # the environment file beside the lock, when the declaration was read from it

    def to_dict(self) -> dict[str, Any]:
        from envguard.variantpick import pick_for

        chosen = pick_for(self.declared, self.host)
        mine = chosen.verdict(self.name)
        return {"name": self.name, "source": self.source, "declared": [d.name for d in self.declared],
                "runs": mine.runs if mine else None, "why": mine.why if mine else None,
                "pick": chosen.name, "reason": chosen.reason}


def variant_facts(target: Path, lock_path: Path | None, driver_raw: Any, driver_checked: bool,
                  driver_fn: Callable[[], Any], env: Mapping[str, str]) -> VariantFacts | None:
    """The facts, or None when the environment was not built from a declared variant (a single-variant
    project, or an environment envguard did not build). Asks the driver only when check has not already."""
    from envguard.fingerprint import read_fingerprint
    from envguard.variants import META_VARIANT, META_VARIANT_CUDA, META_VARIANTS

    fp = read_fingerprint(target)
    name, source = (fp.variant, "the fingerprint") if fp is not None and fp.variant else (None, "")
    custom: dict[str, str] = {}
    if name is None:
        # only a lock named as a variant's is read again (conda-lock.<name>.yml): check reads every other lock
        # once, and a large one costs
        if lock_path is None or not _variant_lock_name(lock_path):
            return None
        custom = _lock_custom(lock_path)
        name, source = custom.get(META_VARIANT) or None, "the lock's custom_metadata"
        if name is None:
            return None
    declared, spec = _declared(lock_path, custom, META_VARIANTS, META_VARIANT, META_VARIANT_CUDA)
    if not any(d.name == name for d in declared):
        declared = (*declared, _Declared(name, _cuda_of_name(name)))
    from envguard.variantpick import host_facts

    driver = driver_raw if driver_checked else driver_fn()
    return VariantFacts(name, source, declared, host_facts(driver, env), spec)


def _variant_lock_name(lock_path: Path) -> bool:
    """Whether a lock is named as a variant's lock beside its spec (envguard.project: conda-lock.<name>.yml)."""
    from envguard.project import lock_for_spec, spec_for_lock

    plain = lock_for_spec(spec_for_lock(lock_path))
    stem, suffix = plain.name.rsplit(".", 1)
    n = lock_path.name
    return n != plain.name and n.startswith(stem + ".") and n.endswith("." + suffix) \
        and len(n) > len(stem) + len(suffix) + 2


def _lock_custom(lock_path: Path) -> dict[str, str]:
    from envguard import sources
    from envguard.errors import EnvguardError

    try:
        return dict(sources.load(str(lock_path)).custom_metadata)
    except (EnvguardError, OSError):
        return {}  # the lock rules say what is wrong with it


def _cuda_of_name(name: str) -> str | None:
    from envguard.variants import cuda_of

    return cuda_of([], name)


def _declared(lock_path: Path | None, custom: Mapping[str, str], key_all: str, key_one: str,
              key_cuda: str) -> tuple[tuple[_Declared, ...], str | None]:
    """Every declared variant: the spec's declaration beside the lock when there is one (it says each CUDA
    line), else the names the lock records, each with the CUDA line its own lock records (else its name's)."""
    from envguard.errors import EnvguardError
    from envguard.project import spec_for_lock
    from envguard.variants import declared_variants, lockfile_of

    if lock_path is not None:
        spec = spec_for_lock(lock_path)
        try:
            found = declared_variants(spec) if spec.is_file() else []
        except EnvguardError:
            found = []  # lint names a broken overlay; the lock's own record still says what was declared
        if found:
            return tuple(_Declared(v.name, v.cuda) for v in found), str(spec)
    if not custom and lock_path is not None:
        custom = _lock_custom(lock_path)
    out = []
    for name in [n for n in custom.get(key_all, "").split(",") if n]:
        if name == custom.get(key_one):
            cuda = custom.get(key_cuda) or None
        else:
            sibling = _lock_custom(lockfile_of(lock_path, name)) if lock_path is not None else {}
            cuda = (sibling.get(key_cuda) or None) if sibling.get(key_one) == name else _cuda_of_name(name)
        out.append(_Declared(name, cuda))
    return tuple(out), None


def rule_variant(inp: CheckInput) -> list[Finding]:
    facts: VariantFacts | None = getattr(inp, "variant", None)
    if facts is None:
        return []
    from envguard.variantpick import fits_better, pick_for

    chosen = pick_for(facts.declared, facts.host)
    mine = chosen.verdict(facts.name)
    others = ", ".join(d.name for d in facts.declared if d.name != facts.name)
    out = [Finding("EG556", I, f"built from variant {facts.name} ({facts.source})"
                   + (f"; declared: {others}" if others else ""), "", package=None)]
    import shlex

    create = shlex.join(["envguard", "create", "-p", str(inp.info.prefix), *(["-f", facts.spec] if facts.spec else []),
                         "--force"])
    if mine is not None and not mine.runs:
        better = f"; this machine's variant is {chosen.name}" if chosen.runs and chosen.name else ""
        out.append(Finding("EG557", E, f"variant {facts.name} cannot run on this machine: {mine.why} "
                           f"({_where(facts.host)}){better}",
                           f"rebuild it with `{create}` (it picks the variant this machine runs)"
                           if chosen.runs else "update the NVIDIA driver, or build another variant with --variant"))
    elif fits_better(facts.name, chosen):
        out.append(Finding("EG558", W, f"variant {chosen.name} fits this machine better than {facts.name}: "
                           f"{chosen.reason}", f"rebuild it with `{create}`, or keep {facts.name} on purpose"))
    return out


def _where(host: Host) -> str:
    return host.said_by if host.cuda is None else f"{host.said_by}: CUDA {host.cuda}"
