"""envguard: declared, locked, verified and explainable PyTorch environments."""

__version__ = "0.1.0"

import os as _os

# conda-lock's vendored conda sets CONDA_ROOT to sys.prefix when it is first imported (a lock, a freshness test):
# envguard.envs reads the value the user's shell gave, taken here, before anything can import conda-lock.
CONDA_ROOT_AT_START = _os.environ.get("CONDA_ROOT")
