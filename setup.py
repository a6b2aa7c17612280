"""Packaging glue that pyproject.toml cannot express on its own.

``templates/`` lives at the top of the repository (users read and edit it
there) but must ship inside the wheel as the ``envguard.templates`` package,
because ``envguard init`` also runs from a wheel (pre-commit installs one).
pyproject.toml maps the package to that directory (``package-dir``); this file
lists the packages: every ``envguard`` subpackage, found automatically so that
new ones ship without editing anything, plus the mapped ``envguard.templates``.
All other metadata is in pyproject.toml.
"""

from setuptools import find_namespace_packages, setup

setup(
    packages=find_namespace_packages(include=["envguard", "envguard.*"], exclude=["*.__pycache__"])
    + ["envguard.templates"],
)
