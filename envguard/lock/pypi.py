"""The ``pip:`` section, resolved by conda-lock's PyPI solver on top of the conda solution.

conda-lock downloads its conda<->PyPI name mapping from GitHub by default. We
ship a small mapping (``data/conda-pypi-mapping.json``, conda-lock's
``mapping_url`` format: PyPI name -> {pypi_name, conda_name, conda_forge})
so that locking works offline. Names missing from it map to themselves, which
is right for most packages; the file lists those that differ (torch/pytorch,
...) and ``pip`` itself, the one name that enters conda-lock's content hash.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from envguard.errors import BackendError
from envguard.redact import redact

MAPPING_FILE = "conda-pypi-mapping.json"


@lru_cache(maxsize=1)
def mapping_path() -> Path:
    """Path of the shipped mapping (a real file: conda-lock reads it by path)."""
    beside = Path(__file__).resolve().parents[1] / "data" / MAPPING_FILE
    if beside.is_file():  # the usual install: no importlib.resources (~2.5 ms of every `envguard create`)
        return beside
    from importlib import resources

    return Path(str(resources.files("envguard") / "data" / MAPPING_FILE))


def solve_pip(
    *,
    lock_spec: Any,
    platform: str,
    conda_locked: dict[str, Any],
    platform_virtual_packages: dict[str, Any] | None,
    mapping_url: str | None = None,
    pip_locked: dict[str, Any] | None = None,
    use_latest: list[str] | None = None,
) -> dict[str, Any]:
    """Lock the pip requirements of ``lock_spec`` for ``platform``; return name -> LockedDependency.

    ``conda_locked`` maps conda names to the LockedDependency records of the
    conda solution; conda packages that provide a PyPI distribution count as
    installed, so pip does not reinstall them. ``pip_locked`` (the old lock's
    pip records) are kept where the requirements allow, except the names in
    ``use_latest`` (conda-lock's own ``--update`` mechanism).
    """
    from conda_lock.pypi_solver import solve_pypi

    pip_specs = {d.name: d for d in lock_spec.dependencies[platform] if d.manager == "pip"}
    if not pip_specs:
        return {}
    python = conda_locked.get("python")
    if python is None:
        raise BackendError(f"the pip: section needs python, but the conda solution for {platform} has none",
                           fix="add `- python=3.X` to dependencies")
    try:
        solved = solve_pypi(
            pip_specs=pip_specs,
            use_latest=list(use_latest or []),
            pip_locked=dict(pip_locked or {}),
            conda_locked=conda_locked,
            python_version=python.version,
            platform=platform,
            platform_virtual_packages=platform_virtual_packages,
            pip_repositories=lock_spec.pip_repositories,
            allow_pypi_requests=lock_spec.allow_pypi_requests,
            strip_auth=False,  # keep the `${VAR}` userinfo conda-lock puts back (literal credentials are masked below)
            mapping_url=mapping_url or str(mapping_path()),
        )
    except BackendError:
        raise
    except Exception as e:  # noqa: BLE001 - poetry's solver raises SolverProblemError, connection errors, ...
        text = " ".join(str(e).split()) or type(e).__name__
        raise BackendError(redact(f"cannot resolve the pip: section for {platform}: {text}")) from None
    for dep in solved.values():
        dep.url = redact(dep.url)
    return solved
