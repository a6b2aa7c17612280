"""Rules over a whole project rather than one environment's specs: a pixi feature's platforms against the
workspace's (EG135), environments of one project that get different torch releases (EG136, in a manifest
and in a pixi.lock), uv's ``unsafe-best-match`` index strategy beside a PyTorch index (EG137), and a file
named like a lock that is a hand-written spec (EG138). EG139 (a pixi environment that asks a CUDA build but declares
no CUDA) is registered here and judged per environment by envguard.lint.manifest."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import PurePath
from typing import Any

from envguard.findings import Finding, Severity
from envguard.model import Package

# (code, name, severity, summary, applies_to): lint/rules.py turns them into its Rule entries
RULES = (
    ("EG135", "feature-platform-outside-workspace", "warning",
     "a pixi feature names a platform the workspace does not list: no environment is built for it", "environment"),
    ("EG136", "torch-differs-between-environments", "warning",
     "two environments of one project get different torch releases", "any"),
    ("EG137", "unsafe-best-match-with-pytorch-index", "warning",
     "index-strategy unsafe-best-match beside a PyTorch index: torch may come from PyPI instead", "environment"),
    ("EG138", "spec-named-as-lock", "error", "a file named like a lock holds a spec: it locks nothing", "environment"),
    ("EG139", "cuda-build-without-cuda-requirement", "error",
     "a pixi environment asks a CUDA build of torch but declares no CUDA: pixi solves it without __cuda",
     "environment"),
)

# the PyTorch wheel indexes (download.pytorch.org/whl/cu126, /whl/cpu, /whl/nightly/...)
_PYTORCH_INDEX = re.compile(r"^https?://download\.pytorch\.org/whl(?:/|$)", re.IGNORECASE)
_TORCH_WHEELS = frozenset({"torch", "torchvision", "torchaudio"})
# conda-lock's and pixi's default names, and the names conda-lock writes when told to render
_LOCK_NAME = re.compile(r"^(?:conda-lock|.+\.conda-lock)\.ya?ml$|^conda-[^/]+\.lock$|^pixi\.lock$")


def _finding(code: str, severity: Severity, message: str, fix: str, path: str, line: int | None,
             package: str | None = None) -> Finding:
    return Finding(code, severity, message, fix, path, line, package)


# ------------------------------------------------------------------ EG138: a spec named like a lock

def spec_named_as_lock(path: str) -> list[Finding]:
    """EG138 for an environment file (``path``) whose name is a lock's: conda-lock install, envguard create
    and every reader of the name expect a lock, and the file pins nothing to an artifact."""
    name = PurePath(path).name
    if not _LOCK_NAME.match(name):
        return []
    return [_finding("EG138", Severity.ERROR, f"`{name}` is named like a lock file but holds a spec (channels and "
                     "dependencies): it locks nothing, and `conda-lock install` or `envguard create` refuse it as a "
                     "lock", "rename it (environment.yml) and lock it: `envguard lock -f environment.yml` (or "
                     "`conda-lock lock -f environment.yml`) writes the conda-lock.yml", path, 1)]


# ------------------------------------------------------------------ EG135: a feature's platforms

def feature_platforms(manifest: Any, table: dict[str, Any], lines: dict[tuple[str, ...], int]) -> list[Finding]:
    """EG135: a feature's ``platforms`` entry that is neither a workspace platform's name nor its subdir. pixi
    builds an environment for the workspace platforms its features support (FeaturesExt::platforms), so such an
    entry is dropped without a word, and an environment can be left with none."""
    names = set(manifest.platforms)
    subdirs = set(manifest.platforms.values())
    out: list[Finding] = []
    for fname, body in (table.get("feature") or {}).items() if isinstance(table.get("feature"), dict) else ():
        listed = body.get("platforms") if isinstance(body, dict) else None
        if not isinstance(listed, list) or not listed or not names:
            continue  # an empty list is pixi's lock-file-less opt-in, no platform list its workspace's default
        outside = [str(p.get("name") or p.get("platform")) if isinstance(p, dict) else str(p) for p in listed]
        outside = [p for p in outside if p not in names and p not in subdirs]
        if not outside:
            continue
        emptied = [e.name for e in manifest.environments.values()
                   if not e.platforms and any(f.name == str(fname) for f in e.features)]
        left = (f"; environment{'s' * (len(emptied) > 1)} {', '.join(f'`{e}`' for e in emptied)} "
                "is left with no platform at all" if emptied else "")
        line = lines.get((*manifest.prefix, "feature", str(fname), "platforms"))
        out.append(_finding(
            "EG135", Severity.WARNING,
            f"feature `{fname}` lists platform{'s' * (len(outside) > 1)} {', '.join(f'`{p}`' for p in outside)}, "
            f"which the workspace's platforms ({', '.join(sorted(names))}) do not: pixi builds environments only "
            f"for workspace platforms, so no environment using `{fname}` is solved for "
            f"{'them' if len(outside) > 1 else 'it'}{left}",
            f"add {', '.join(f'`{p}`' for p in outside)} to the workspace's `platforms`, or remove "
            f"{'them' if len(outside) > 1 else 'it'} from the feature's", manifest.path, line))
    return out


# ------------------------------------------------------------------ EG137: unsafe-best-match and a PyTorch index

def _options(table: dict[str, Any]) -> list[tuple[tuple[str, ...], dict[str, Any]]]:
    """Every ``pypi-options`` table with its key path: the workspace's and each feature's."""
    out: list[tuple[tuple[str, ...], dict[str, Any]]] = []
    ws = table.get("workspace") if isinstance(table.get("workspace"), dict) else table.get("project")
    for where, body in ((("pypi-options",), table), (("workspace", "pypi-options"), ws)):
        opts = body.get("pypi-options") if isinstance(body, dict) else None
        if isinstance(opts, dict):
            out.append((where, opts))
    for fname, body in (table.get("feature") or {}).items() if isinstance(table.get("feature"), dict) else ():
        opts = body.get("pypi-options") if isinstance(body, dict) else None
        if isinstance(opts, dict):
            out.append((("feature", str(fname), "pypi-options"), opts))
    return out


def _pypi_tables(table: dict[str, Any]) -> Iterable[dict[str, Any]]:
    yield table.get("pypi-dependencies") or {}
    for body in (table.get("target") or {}).values() if isinstance(table.get("target"), dict) else ():
        if isinstance(body, dict):
            yield body.get("pypi-dependencies") or {}
    for feature in (table.get("feature") or {}).values() if isinstance(table.get("feature"), dict) else ():
        if isinstance(feature, dict):
            yield from _pypi_tables(feature)


def unsafe_best_match(manifest: Any, table: dict[str, Any], lines: dict[tuple[str, ...], int]) -> list[Finding]:
    """EG137: ``index-strategy = "unsafe-best-match"`` (uv's, which pixi passes on) with a PyTorch index among
    the indexes, and torch from PyPI without its own ``index``. uv then takes the best version found on any
    index: PyPI's torch wins over the CUDA index's whenever its version sorts higher, and the environment gets
    PyPI's build (another CUDA line, or CPU only) instead of the one the index was listed for."""
    opts = _options(table)
    strategy = next(((w, o) for w, o in opts if o.get("index-strategy") == "unsafe-best-match"), None)
    if strategy is None:
        return []
    urls = [str(u) for _, o in opts for u in [o.get("index-url"), *(o.get("extra-index-urls") or [])] if u]
    pytorch = [u for u in urls if _PYTORCH_INDEX.match(u)]
    loose = [str(n) for deps in _pypi_tables(table) if isinstance(deps, dict) for n, v in deps.items()
             if str(n).lower() in _TORCH_WHEELS and not (isinstance(v, dict) and v.get("index"))]
    if not pytorch or not loose:
        return []
    where, _ = strategy
    line = lines.get((*manifest.prefix, *where, "index-strategy")) or lines.get((*manifest.prefix, *where))
    return [_finding(
        "EG137", Severity.WARNING,
        f"`index-strategy = \"unsafe-best-match\"` with the PyTorch index {pytorch[0]}: the resolver takes "
        f"{loose[0]} from whichever index has the highest version, so PyPI's build (another CUDA line, or CPU "
        "only) can replace the one the PyTorch index was listed for",
        f"tie it to its index: `{loose[0]} = {{ version = \"...\", index = \"{pytorch[0]}\" }}`, and drop "
        "`unsafe-best-match` (the default first-index strategy takes a package from the first index that has it)",
        manifest.path, line, loose[0])]


# ------------------------------------------------------------------ EG136: torch per environment

def _solve_groups(table: dict[str, Any]) -> dict[str, str]:
    envs = table.get("environments")
    return {str(n): str(d["solve-group"]) for n, d in (envs.items() if isinstance(envs, dict) else ())
            if isinstance(d, dict) and d.get("solve-group")}


def manifest_torch(path: str, table: dict[str, Any], by_env: dict[str, tuple[str, str, int | None]]) -> list[Finding]:
    """EG136 for a manifest: ``by_env`` is each environment's one torch line, the spec that pins it and its line.
    One finding per pair of torch lines, naming the environments on each side. Environments in one solve-group
    are solved together, so they cannot differ."""
    groups = _solve_groups(table)
    by_line: dict[str, list[str]] = {}
    for env, (line, _, _) in by_env.items():
        by_line.setdefault(line, []).append(env)
    lines = list(by_line)
    out: list[Finding] = []

    for i, la in enumerate(lines):
        for lb in lines[i + 1:]:
            a, b = by_line[la], by_line[lb]
            if all(x in groups and groups[x] == groups.get(y) for x in a for y in b):
                continue
            sa, sb, line_b = by_env[a[0]][1], by_env[b[0]][1], by_env[b[0]][2]
            out.append(_finding(
                "EG136", Severity.WARNING,
                f"different torch releases across environments: {_named(a)} get{'s' * (len(a) == 1)} torch {la} "
                f"(`{sa}`), {_named(b)} torch {lb} (`{sb}`): what runs in one (CI, a CPU test job) is not the torch "
                "the other (training) runs",
                "pin one torch line where both take it (the default feature), or put them in one solve-group; "
                "a deliberate test matrix can leave them apart", path, line_b, "torch"))
    return out


def _torch_record(packages: Sequence[Package]) -> Package | None:
    return next((p for p in packages if (p.manager == "conda" and p.name == "pytorch")
                 or (p.manager == "pip" and p.key == "torch")), None)


def _named(envs: Sequence[str]) -> str:
    shown = ", ".join(f"`{e}`" for e in envs[:3]) + (f" and {len(envs) - 3} more" if len(envs) > 3 else "")
    return f"environment{'s' * (len(envs) > 1)} {shown}"


def lock_torch(groups: Sequence[tuple[str, Sequence[Package]]]) -> list[tuple[str, str, Package]]:
    """EG136 for a pixi.lock: ``groups`` are (``environment/platform``, records). Per platform, the environments
    grouped by the torch version they lock (local labels such as ``+cu126`` aside); one finding per pair of
    versions, naming the environments on each side (the same pair on several platforms is one message, which
    lint's collector merges). Returns (message, fix, a torch record of the second side) for the collector."""
    by_platform: dict[str, dict[str, list[tuple[str, Package]]]] = {}
    for label, packages in groups:
        env, _, platform = label.rpartition("/")
        rec = _torch_record(packages)
        if env and rec is not None:
            by_platform.setdefault(platform, {}).setdefault(rec.version.split("+")[0], []).append((env, rec))
    out: list[tuple[str, str, Package]] = []
    for versions in by_platform.values():
        keys = list(versions)
        for i, va in enumerate(keys):
            for vb in keys[i + 1:]:
                a, b = versions[va], versions[vb]
                ra, rb = a[0][1], b[0][1]
                out.append((f"different torch releases across environments: {_named([e for e, _ in a])} "
                            f"lock{'s' * (len(a) == 1)} {ra.manager} {ra.name} {ra.version}, "
                            f"{_named([e for e, _ in b])} {rb.manager} {rb.name} {rb.version}: what runs in one "
                            "(CI, a CPU test job) is not the torch the other (training) runs",
                            "pin one torch release where these environments take it (or put them in one "
                            "solve-group), then re-lock; a deliberate test matrix can leave them apart", rb))
    return out


__all__ = ["RULES", "feature_platforms", "lock_torch", "manifest_torch", "spec_named_as_lock", "unsafe_best_match"]
