"""Backend registry: ``rattler`` (embedded, the default) and ``micromamba``, ``mamba``, ``conda`` when on PATH.

Chosen with ``--backend NAME`` or the ``ENVGUARD_BACKEND`` environment variable (the option wins).
"""

from __future__ import annotations

from envguard import settings
from envguard.create.backends.base import Backend, InstallPlan, InstallProgress, NullProgress
from envguard.errors import BackendError, UserError

BACKEND_NAMES: tuple[str, ...] = ("rattler", "micromamba", "mamba", "conda")
DEFAULT_BACKEND = "rattler"

__all__ = ["BACKEND_NAMES", "DEFAULT_BACKEND", "Backend", "InstallPlan", "InstallProgress", "NullProgress",
           "available_backends", "get_backend"]


def _make(name: str) -> Backend:
    if name == "rattler":
        from envguard.create.backends.rattler_backend import RattlerBackend

        return RattlerBackend()
    from envguard.create.backends.external import ExternalBackend

    return ExternalBackend(name)


def available_backends() -> list[str]:
    """Names of the backends usable on this machine, the default first."""
    return [name for name in BACKEND_NAMES if _make(name).available()]


def get_backend(name: str | None = None) -> Backend:
    """The backend called ``name``, else ``$ENVGUARD_BACKEND``, else rattler.

    An unknown name is a usage error (exit 2); a known external tool missing from PATH is exit 6.
    """
    source = "--backend"
    if not name:
        name, source = settings.backend_name(), settings.BACKEND.name
    if not name:
        name = DEFAULT_BACKEND
    key = name.strip().lower()
    if key not in BACKEND_NAMES:
        raise UserError(f"unknown backend {name!r}", key=source,
                        fix="use one of " + ", ".join(BACKEND_NAMES))
    backend = _make(key)
    if not backend.available():
        raise BackendError(f"backend {key!r} ({source}) was not found on PATH",
                           fix=f"install {key}, or use --backend rattler")
    return backend
