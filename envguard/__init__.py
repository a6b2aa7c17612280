"""envguard: declared, locked, verified and explainable PyTorch environments."""

__version__ = "0.1.0"
