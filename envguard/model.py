"""One normalised package model shared by diff, check and create.

Every environment description (spec, lock, explicit file, export, pixi.lock,
live prefix, check report) is read into a list of :class:`Package`. Names are
normalised so that conda's ``pytorch`` and PyPI's ``torch`` compare equal.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Manager = Literal["conda", "pip"]

# conda name -> PyPI name, for the packages whose names differ and matter to
# PyTorch users. Everything else is compared by its PEP 503 normalised name.
CONDA_TO_PYPI: dict[str, str] = {
    "pytorch": "torch",
    "pytorch-cpu": "torch",
    "pytorch-gpu": "torch",
    "py-opencv": "opencv-python",
    "pillow": "pillow",
    "pyyaml": "pyyaml",
    "msgpack-python": "msgpack",
    "python-dateutil": "python-dateutil",
    "scikit-learn": "scikit-learn",
    "matplotlib-base": "matplotlib",
    "pytorch-lightning": "pytorch-lightning",
    "lightning": "lightning",
    "tensorboard": "tensorboard",
    # conda-forge names that differ from PyPI's (from conda-lock's mapping, data/conda-pypi-mapping.json),
    # so that a pip-installed copy and a spec's pip: line meet the conda package (diff).
    "pytorch-geometric": "torch-geometric",
    "pytorch-scatter": "torch-scatter",
    "pytorch-sparse": "torch-sparse",
    "pytorch-cluster": "torch-cluster",
    "pytorch-spline-conv": "torch-spline-conv",
    "python-build": "build",
    "python-graphviz": "graphviz",
    "python-xxhash": "xxhash",
    "python-kaleido": "kaleido",
    "pytables": "tables",
    "python-tzdata": "tzdata",
}

# conda packages that are not the PyPI project of the same name: conda-forge's `tzdata` is the IANA time
# zone database (system zoneinfo), its `graphviz` the C library; the PyPI projects are conda's
# `python-tzdata` and `python-graphviz` (data/conda-pypi-mapping.json). Keyed apart, they never meet a
# pip package of that name.
CONDA_NOT_PYPI = frozenset({"tzdata", "graphviz"})

_NORMALISE = re.compile(r"[-_.]+")


def pep503(name: str) -> str:
    return _NORMALISE.sub("-", name).lower()


def canonical_name(name: str, manager: Manager = "conda") -> str:
    """The key two descriptions are matched on: PyPI-normalised, conda names mapped."""
    n = pep503(name)
    if manager == "conda":
        return f"conda:{n}" if n in CONDA_NOT_PYPI else CONDA_TO_PYPI.get(n, n)
    return n


@dataclass(frozen=True)
class Package:
    name: str  # as written by its source (pytorch, torch, ...)
    version: str
    manager: Manager = "conda"
    build: str | None = None
    channel: str | None = None  # channel name or URL (redacted), None for pip
    sha256: str | None = None
    md5: str | None = None
    url: str | None = None  # redacted
    platform: str | None = None
    depends: tuple[str, ...] = field(default_factory=tuple)

    @property
    def key(self) -> str:
        return canonical_name(self.name, self.manager)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["depends"] = list(self.depends)
        return d
