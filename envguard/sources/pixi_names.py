"""Which pip requirements of a pixi manifest pixi satisfies from conda: a pyproject's ``[project]``
dependency that a conda dependency of the same environment provides, per the conda-PyPI name mapping."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from envguard.sources.pixi_manifest import ManifestDep


@lru_cache(maxsize=1)
def _pypi_to_conda() -> dict[str, str]:
    """PyPI name -> the conda-forge package that provides it, from the shipped conda-PyPI mapping
    (``data/conda-pypi-mapping.json``; conda-lock's format): pixi's own mapping says the same."""
    import json

    from envguard.model import pep503

    path = Path(__file__).resolve().parents[1] / "data" / "conda-pypi-mapping.json"
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {pep503(str(e.get("pypi_name") or k)): pep503(str(e.get("conda_name") or k))
            for k, e in entries.items() if isinstance(e, dict)}


def satisfied_by_pixi(deps: list[ManifestDep]) -> list[ManifestDep]:
    """An environment's dependencies without the pyproject ``[project]`` requirements that a conda
    dependency of the same environment provides: pixi installs those from conda and nothing from PyPI, so
    they are not a package "requested from both conda and pip" (and deleting them breaks the package).
    "Provides" per the conda-PyPI mapping: conda's ``dask-core`` is PyPI's ``dask``, conda's ``pytorch``
    PyPI's ``torch``; conda's ``tzdata`` (the time zone database) is not PyPI's ``tzdata``."""
    from envguard.model import canonical_name, pep503

    conda = {canonical_name(d.name, "conda") for d in deps if d.manager == "conda"}
    conda_names = {pep503(d.name) for d in deps if d.manager == "conda"}
    mapped = _pypi_to_conda()

    def provided(d: ManifestDep) -> bool:
        n = pep503(d.name)
        return canonical_name(d.name, "pip") in conda or mapped.get(n, "\0") in conda_names

    return [d for d in deps if not (d.manager == "pip" and d.pep621 and provided(d))]


__all__ = ["satisfied_by_pixi"]
