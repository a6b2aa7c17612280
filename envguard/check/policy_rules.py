"""Rules on policy and the host: the Python release (EG540, EG541), the frozen pytorch channel and legacy
packages (EG542, EG543, EG545), environment variables that change what loads (EG560, EG561), and what was
skipped (EG501-EG504)."""

from __future__ import annotations

from envguard.check.facts import CheckInput
from envguard.check.fixes import E, I, W, catalog_fix, create_command
from envguard.findings import Finding
from envguard.versions import conda_key, major_minor


def rule_python(inp: CheckInput) -> list[Finding]:
    from envguard import compat

    ver = inp.info.python_version
    mm = major_minor(ver)
    if not mm:
        return []
    c = compat.load()
    if mm in c.supported_python:
        legacy = c.python_legacy(mm)
        if legacy:
            return [Finding("EG541", W, f"Python {ver}: {legacy.get('note') or 'legacy'} "
                            f"(end of life {legacy.get('end_of_life')}, last torch {legacy.get('last_torch')})",
                            f"move to Python {c.default_python}: set `python={c.default_python}` in "
                            f"environment.yml, then `{create_command(inp.info.prefix)}` (it re-locks first)")]
        return []
    managed = inp.info.is_conda or inp.lock_packages is not None
    sev = E if managed else W
    why = "" if managed else " (a plain virtualenv: advisory)"
    return [Finding("EG540", sev, f"Python {ver} is outside envguard's policy "
                    f"({', '.join(c.supported_python)}){why}",
                    f"use Python {c.default_python}: set `python={c.default_python}` in environment.yml, then "
                    f"`{create_command(inp.info.prefix)}` (it re-locks first)")]


def rule_channels(inp: CheckInput) -> list[Finding]:
    from envguard import compat

    c = compat.load()
    out: list[Finding] = []
    rec = next((r for r in inp.info.conda if r.name == "pytorch"), None)
    if rec is not None and rec.channel_name == "pytorch":
        mkl = inp.info.record("mkl")
        if mkl is not None and conda_key(mkl.version) >= conda_key(c.pytorch_mkl_max):
            out.append(Finding("EG543", E, f"pytorch {rec.version} from the frozen `pytorch` channel with mkl "
                               f"{mkl.version} (>= {c.pytorch_mkl_max}): `import torch` fails with "
                               "\"undefined symbol: iJIT_NotifyEvent\"", catalog_fix("mkl-symbol"), package="pytorch"))
        else:
            out.append(Finding("EG542", W, f"pytorch {rec.version} comes from the `pytorch` channel, frozen at "
                               f"PyTorch {c.pytorch_channel_frozen_at}", "move to conda-forge's pytorch "
                               "(`pytorch=*=cuda*` or `cpu*` with cuda-version)", package="pytorch"))
    legacy = c.legacy_packages
    for r in inp.info.conda:
        if r.name in legacy:
            out.append(Finding("EG545", I, f"{r.name} {r.version} is a legacy package: {legacy[r.name]}", "",
                               package=r.name))
    return out


def rule_environment(inp: CheckInput) -> list[Finding]:
    out: list[Finding] = []
    for d, libs in inp.library_path_libs:
        if libs:
            out.append(Finding("EG560", W, f"LD_LIBRARY_PATH puts {', '.join(libs)} from {d} ahead of the "
                               "environment's own libraries", catalog_fix("cudnn")))
    if "KMP_DUPLICATE_LIB_OK" in inp.env:
        out.append(Finding("EG561", W, f"KMP_DUPLICATE_LIB_OK={inp.env['KMP_DUPLICATE_LIB_OK']} hides two OpenMP "
                           "runtimes loaded at once (wrong results or crashes)", catalog_fix("omp-dup")))
    return out


def rule_skipped(inp: CheckInput) -> list[Finding]:
    out: list[Finding] = []
    if not inp.info.is_conda:
        kind = "a virtualenv" if inp.info.is_venv else "not a conda prefix"
        out.append(Finding("EG501", I, f"{inp.info.prefix} is {kind} (no conda-meta): conda record, file and "
                           "pip-over-conda checks skipped", ""))
    if inp.lock_packages is None:
        out.append(Finding("EG502", I, "no lock file: lock comparison skipped",
                           "pass the environment's lock with --lockfile (a project's conda-lock.yml applies by itself "
                           "only to the environment its environment.yml names, or one inside the project)"))
    if inp.files_mode != "none" and not inp.info.is_conda:
        out.append(Finding("EG503", I, "no conda-meta: --files/--deep have no records to verify against", ""))
    if inp.no_interpreter:
        out.append(Finding("EG504", W, f"no interpreter at {inp.no_interpreter}: smoke test and import checks "
                           "skipped", "check the prefix, or pass --no-smoke"))
    return out
