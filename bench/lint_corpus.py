#!/usr/bin/env python3
"""Lint every environment and lock file of the real-world corpus; print rule counts.

    python bench/lint_corpus.py [CORPUS_DIR]

CORPUS_DIR defaults to ../shared/realworld beside the repository (or
$ENVGUARD_REALWORLD). Prints a markdown table of findings per rule (pasted
into docs/lint-corpus.md), the files each known problem was found in, and the
time taken against a peer measured in the same run: loading the same files
with PyYAML's C loader (tomllib for pixi manifests), the floor for any tool that reads them.
"""

from __future__ import annotations

import os
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from envguard.lint import RULES, lint_paths  # noqa: E402

PATTERNS = ("environment/*.yml", "environment/*.yaml", "export/*.yml", "conda-lock/*.yml", "explicit/*",
            "pixi/*.lock", "pixi/*.toml")


def corpus_files(root: Path) -> list[Path]:
    """Every environment file, pixi manifest and lock file of the corpus (not pip requirements files)."""
    files: set[Path] = set()
    for pattern in PATTERNS:
        files.update(p for p in root.glob(pattern) if p.is_file())
    return sorted(files)


def main() -> int:
    default = Path(os.environ.get("ENVGUARD_REALWORLD", REPO.parent / "shared" / "realworld"))
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else default
    files = corpus_files(root)
    if not files:
        print(f"no corpus files under {root}", file=sys.stderr)
        return 2

    t0 = time.perf_counter()
    result = lint_paths(files)
    t_lint = time.perf_counter() - t0

    import yaml

    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    t0 = time.perf_counter()
    for f in files:
        text = f.read_text(encoding="utf-8")
        if f.suffix == ".toml":
            tomllib.loads(text)
        elif "@EXPLICIT" not in text:
            yaml.load(text, Loader=loader)  # a safe loader (the one under test)
    t_yaml = time.perf_counter() - t0

    findings = Counter(f.code for f in result.findings)
    files_with: dict[str, set[str]] = defaultdict(set)
    for f in result.findings:
        files_with[f.code].add(Path(f.file or "").name)

    kinds = Counter("pixi.toml" if p.suffix == ".toml" else p.parent.name for p in files)
    print(f"Corpus: {len(files)} files ({', '.join(f'{n} {k}' for k, n in sorted(kinds.items()))}); "
          f"unreadable: {len(result.unreadable)}.")
    for msg in result.unreadable:
        print(f"  unreadable: {msg}")
    print()
    print("| code | rule | severity | findings | files |")
    print("|---|---|---|---:|---:|")
    for code, rule in RULES.items():
        print(f"| `{code}` | {rule.name} | {rule.severity.value} | {findings.get(code, 0)} | "
              f"{len(files_with.get(code, ()))} |")
    n_err = sum(1 for f in result.findings if f.severity.value == "error")
    print(f"| | **total** | | **{len(result.findings)}** ({n_err} errors) | "
          f"**{len({f.file for f in result.findings})}** of {len(files)} |")
    print()
    print("Known problems:")
    known = [("EG107", "MiniGPT-4"), ("EG107", "miles-credit"), ("EG109", "abodybuilder3"),
             ("EG108", "AnimateDiff"), ("EG152", "tight-budget-llm-adaptation"), ("EG150", "BERTchen")]
    for code, project in known:
        hit = sorted(n for n in files_with.get(code, ()) if project in n)
        print(f"- {code} {RULES[code].name} in {project}: {'found in ' + ', '.join(hit) if hit else 'NOT FOUND'}")
    print()
    print("Known problems in locks and pixi files:")
    known14 = [("EG157", "BERTchen__conda-lock"), ("EG113", "paris__spec-file"), ("EG130", "MiniGPT-4"),
               ("EG112", "matthewfeickert__pytorch-gpu-pixi-example__pixi.toml")]
    for code, fragment in known14:
        hit = sorted(n for n in files_with.get(code, ()) if fragment in n)
        print(f"- {code} {RULES[code].name} in {fragment}: {'found in ' + ', '.join(hit) if hit else 'NOT FOUND'}")
    print()
    print("Findings of the rules #14 added or widened (EG113 on records, EG125, EG128-EG130, EG156-EG158, "
          "and every finding on a pixi manifest):")
    new_codes = {"EG125", "EG128", "EG129", "EG130", "EG156", "EG157", "EG158"}
    for f in sorted(result.findings, key=lambda f: (Path(f.file or "").name, f.line or 0, f.code)):
        name = Path(f.file or "").name
        widened = (f.code == "EG113" and not name.endswith((".yml", ".yaml"))) or "conda-lock" in (f.file or "")
        if f.code in new_codes or name.endswith(".toml") or (f.code == "EG113" and widened):
            print(f"- `{f.code}` {name}:{f.line or '-'}: {f.message}")
    print()
    print(f"Time: lint {t_lint:.2f} s; PyYAML C loader on the same files {t_yaml:.2f} s "
          f"(ratio {t_lint / t_yaml:.1f}x).")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
