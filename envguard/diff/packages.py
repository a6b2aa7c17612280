"""Two package lists of one platform compared (:func:`diff_packages`: paired by key, a pip copy installed
over conda's one a change of its own), and two lists of requested specs (:func:`diff_requested`).
:func:`group` (packages by key) is shared with speccheck, which pairs a request with what is locked."""

from __future__ import annotations

from collections.abc import Iterable

from envguard.diff.changes import Change, artifact_key, classify, identical_artifact, sort_key
from envguard.model import Package
from envguard.sources import RequestedSpec


def _pair(olds: list[Package], news: list[Package]
          ) -> tuple[list[tuple[Package, Package]], list[Package], list[Package]]:
    """Match packages with one key: same name and manager first, then across managers."""
    olds, news = list(olds), list(news)
    pairs: list[tuple[Package, Package]] = []
    # Same manager but another name (pytorch-gpu vs pytorch) is a different package: added/removed.
    for match in (lambda a, b: a.name == b.name and a.manager == b.manager,
                  lambda a, b: a.manager != b.manager):
        for a in list(olds):
            b = next((x for x in news if match(a, x)), None)
            if b is not None:
                pairs.append((a, b))
                olds.remove(a)
                news.remove(b)
    return pairs, olds, news


def group(pkgs: Iterable[Package]) -> dict[str, list[Package]]:
    out: dict[str, list[Package]] = {}
    for p in pkgs:
        out.setdefault(p.key, []).append(p)
    return out


def _both_managers(pkgs: list[Package]) -> bool:
    return {p.manager for p in pkgs} >= {"conda", "pip"}


def _pip_over_conda(key: str, olds: list[Package], news: list[Package]) -> tuple[list[Change], list[Package],
                                                                                   list[Package]]:
    """One side records a package under both managers (pip installed over conda's copy), the other does not:
    that is a change of its own, whatever the versions. Returns it and what is left to pair as usual."""
    if _both_managers(news) and not _both_managers(olds):
        over = [p for p in news if p.manager == "pip"]
        base = next((p for p in olds if p.manager == "conda"), olds[0] if olds else None)
        changes = []
        for p in over:
            kinds, _ = classify(base, p) if base is not None else ((), "")
            extra = tuple(k for k in kinds if k in ("upgraded", "downgraded"))
            conda = next(q for q in news if q.manager == "conda")
            changes.append(Change(key=key, kinds=("pip-over-conda", *extra), old=base, new=p,
                                  detail=f"conda's {conda.name} {conda.version} is still recorded; pip's "
                                         f"{p.version} was installed over it"))
        return changes, olds, [p for p in news if p.manager != "pip"]
    if _both_managers(olds) and not _both_managers(news):
        over = [p for p in olds if p.manager == "pip"]
        base = next((p for p in news if p.manager == "conda"), news[0] if news else None)
        changes = [Change(key=key, kinds=("pip-over-conda",), old=p, new=base,
                          detail=f"A records {p.name} under conda and pip (pip's {p.version}); B only once")
                   for p in over]
        return changes, [p for p in olds if p.manager != "pip"], news
    return [], olds, news


def _relabel_note(a: Package, b: Package) -> str:
    placeholder = "0.0.0" in (a.version, b.version)
    why = (" (conda-lock ≥ 3 writes the placeholder 0.0.0 for a pip package locked from a URL)"
           if placeholder else "")
    return (f"{a.name}: A says version {a.version or '?'}, B says {b.version or '?'}, but both name the same "
            f"artifact ({artifact_key(a.url or '')}, same sha256): the same package, not a version change{why}")


def diff_packages(old: list[Package], new: list[Package], notes: list[str] | None = None) -> list[Change]:
    """Every difference between two package lists of one platform, core packages first.

    Two records of one artifact (same URL and sha256) are the same package even when the files claim
    different versions; that disagreement goes to ``notes`` when given, never into the changes.
    """
    go, gn = group(old), group(new)
    changes: list[Change] = []
    for key in go.keys() | gn.keys():
        over, olds, news = _pip_over_conda(key, go.get(key, []), gn.get(key, []))
        changes += over
        pairs, removed, added = _pair(olds, news)
        for a, b in pairs:
            if identical_artifact(a, b):
                if notes is not None and a.version != b.version:
                    notes.append(_relabel_note(a, b))
                continue
            kinds, detail = classify(a, b)
            if kinds:
                changes.append(Change(key=key, kinds=kinds, old=a, new=b, detail=detail))
        changes += [Change(key=key, kinds=("removed",), old=a) for a in removed]
        changes += [Change(key=key, kinds=("added",), new=b) for b in added]
    return sorted(changes, key=sort_key)


def _same_request(a: RequestedSpec, b: RequestedSpec) -> bool:
    """Whether two written specs ask for the same thing: ``python=3.11`` (environment.yml) and ``python 3.11.*``
    (a pixi manifest) do; each manager's own parser says so, the text as written when it cannot read it."""
    if a.manager != b.manager or (a.channel or None) != (b.channel or None):
        return False
    if a.spec == b.spec:
        return True
    try:
        if a.manager == "conda":
            from rattler import MatchSpec

            return str(MatchSpec(a.spec, strict=False)) == str(MatchSpec(b.spec, strict=False))
        from packaging.requirements import Requirement

        ra, rb = Requirement(a.spec), Requirement(b.spec)
        return (ra.name.lower(), ra.specifier, ra.extras, ra.url, str(ra.marker)) == (
            rb.name.lower(), rb.specifier, rb.extras, rb.url, str(rb.marker))
    except Exception:  # noqa: BLE001 - rattler's and packaging's parse errors: compare the text as written
        return False


def diff_requested(old: list[RequestedSpec], new: list[RequestedSpec], platform: str | None = None) -> list[Change]:
    """Two environment files: which requested specs were added, removed or changed."""
    def by_key(specs: list[RequestedSpec]) -> dict[tuple[str, str], RequestedSpec]:
        return {(s.key, s.manager): s for s in specs if s.applies_to(platform)}

    a, b = by_key(old), by_key(new)
    changes = []
    for k in a.keys() | b.keys():
        sa, sb = a.get(k), b.get(k)
        ta = f"{sa.channel}::{sa.spec}" if sa and sa.channel else (sa.spec if sa else None)
        tb = f"{sb.channel}::{sb.spec}" if sb and sb.channel else (sb.spec if sb else None)
        if ta == tb or (sa is not None and sb is not None and _same_request(sa, sb)):
            continue
        kind = "removed" if sb is None else "added" if sa is None else "spec-changed"
        changes.append(Change(key=k[0], kinds=(kind,), old_spec=ta, new_spec=tb,
                              detail="pip section" if k[1] == "pip" else ""))
    return sorted(changes, key=sort_key)
