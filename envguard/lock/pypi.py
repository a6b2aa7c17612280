"""The ``pip:`` section, resolved by conda-lock's PyPI solver on top of the conda solution.

conda-lock downloads its conda<->PyPI name mapping from GitHub by default. We
ship a small mapping (``data/conda-pypi-mapping.json``, conda-lock's
``mapping_url`` format: PyPI name -> {pypi_name, conda_name, conda_forge})
so that locking works offline. Names missing from it map to themselves, which
is right for most packages; the file lists those that differ (torch/pytorch,
...) and ``pip`` itself, the one name that enters conda-lock's content hash.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

from envguard import settings
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
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Lock the pip requirements of ``lock_spec`` for ``platform``; return name -> LockedDependency.

    ``conda_locked`` maps conda names to the LockedDependency records of the
    conda solution; conda packages that provide a PyPI distribution count as
    installed, so pip does not reinstall them. ``pip_locked`` (the old lock's
    pip records) are kept where the requirements allow, except the names in
    ``use_latest`` (conda-lock's own ``--update`` mechanism). ``progress`` hears
    which package the resolver is at ("torch 2.5.1"), as it moves.

    The resolver runs in a worker process (envguard.lock.pypi_worker) bounded in time
    (ENVGUARD_LOCK_PIP_TIMEOUT) and in the bytes it fetches per file (ENVGUARD_LOCK_PIP_MAX_BYTES);
    past either it is stopped, and the error names the package (BackendError, exit 6).
    """
    pip_specs = {d.name: d for d in lock_spec.dependencies[platform] if d.manager == "pip"}
    if not pip_specs:
        return {}
    python = conda_locked.get("python")
    if python is None:
        raise BackendError(f"the pip: section needs python, but the conda solution for {platform} has none",
                           fix="add `- python=3.X` to dependencies")
    request = {
        "pip_specs": pip_specs,
        "use_latest": list(use_latest or []),
        "pip_locked": dict(pip_locked or {}),
        "conda_locked": conda_locked,
        "python_version": python.version,
        "platform": platform,
        "platform_virtual_packages": platform_virtual_packages,
        "pip_repositories": lock_spec.pip_repositories,
        "allow_pypi_requests": lock_spec.allow_pypi_requests,
        "strip_auth": False,  # keep the `${VAR}` userinfo conda-lock puts back (literal credentials are masked below)
        "mapping_url": mapping_url or str(mapping_path()),
        "max_bytes": settings.lock_pip_max_bytes(),
    }
    solved = _run_worker(request, platform, progress or (lambda _what: None))
    for dep in solved.values():
        dep.url = redact(dep.url)
    return solved


# ------------------------------------------------------------------ the worker process


def _size(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def _named(name: str, version: str) -> str:
    return f"{name} {version}".strip() or "an unnamed file"


def _file_of(url: str) -> str:
    from urllib.parse import unquote, urlsplit

    return unquote(urlsplit(url).path.rstrip("/").rsplit("/", 1)[-1]) or url


def _too_large(platform: str, event: dict[str, Any]) -> BackendError:
    limit = settings.lock_pip_max_bytes()
    size = int(event.get("bytes") or 0)
    file = _file_of(str(event.get("too_large") or ""))
    package = _named(str(event.get("package") or ""), str(event.get("version") or ""))
    bound = f"more than the {_size(limit)} a lock reads of one file"
    if event.get("declared"):
        what, enough = f"is {_size(size)}, {bound}", f"{settings.LOCK_PIP_MAX_BYTES.name}={size}"
    else:
        what, enough = f"is {bound} (its server sent more, without saying its size)", \
            f"{settings.LOCK_PIP_MAX_BYTES.name}={limit * 4} (or more)"
    why = ""
    if file.endswith((".whl", ".tar.gz", ".zip", ".tar.bz2", ".tgz")):
        why = "; a distribution is read whole only where the index serves neither a metadata file (PEP 658) nor " \
              "byte ranges for it, or no hash"
    return BackendError(
        redact(f"the pip: section for {platform}: {package}: {file} {what}{why}"),
        fix=f"set {enough} to read it anyway, or use an index that serves metadata files (PEP 658)")


def _timed_out(platform: str, at: tuple[str, str], seconds: int) -> BackendError:
    where = f" (at {_named(*at)})" if at[0] else ""
    pin = f"pin {at[0]} in the pip: section (`{at[0]}==X.Y`)" if at[0] else "pin the pip: requirements"
    return BackendError(
        f"the pip: section for {platform} was not resolved in {seconds} s{where}; the resolver was stopped",
        fix=f"set {settings.LOCK_PIP_TIMEOUT.name}={seconds * 3} to wait longer, or {pin} so that fewer "
            "candidates are tried")


def _run_worker(request: dict[str, Any], platform: str, progress: Callable[[str], None]) -> dict[str, Any]:
    """Run envguard.lock.pypi_worker on ``request``; its answer, or a BackendError (exit 6)."""
    import base64
    import contextlib
    import json
    import pickle
    import queue
    import subprocess
    import sys
    import tempfile
    import threading
    import time

    from envguard.procsession import start_session, stop_session

    timeout = settings.lock_pip_timeout()
    payload = pickle.dumps(request)
    lines: queue.Queue[bytes] = queue.Queue()
    with tempfile.TemporaryFile() as errors:
        proc = start_session([sys.executable, "-m", "envguard.lock.pypi_worker"], cwd=Path.cwd(),
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors)
        finished = False
        try:
            assert proc.stdin is not None and proc.stdout is not None
            out = proc.stdout

            def read() -> None:  # a thread, not select(): pipes are not selectable on Windows
                with out:
                    for line in out:
                        lines.put(line)
                lines.put(b"")

            threading.Thread(target=read, name="envguard-pip-events", daemon=True).start()
            try:
                proc.stdin.write(payload)  # the worker reads all of it before it says anything
                proc.stdin.close()
            except BrokenPipeError:
                pass  # it ended at once; its stderr says why
            deadline = time.monotonic() + timeout
            at = ("", "")
            while True:
                try:
                    line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    raise _timed_out(platform, at, timeout) from None
                if not line:
                    break
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if "package" in event and "too_large" not in event:
                    at = (str(event["package"]), str(event.get("version") or ""))
                    progress(_named(*at))
                elif "fetch" in event:
                    size = f", {_size(int(event['bytes']))}" if event.get("bytes") else ""
                    progress(f"{_named(*at)}: reading all of {event['fetch']}{size}")
                elif "too_large" in event:
                    raise _too_large(platform, event)
                elif "error" in event:
                    raise BackendError(redact(f"cannot resolve the pip: section for {platform}: {event['error']}"))
                elif "result" in event:
                    finished = True
                    solved: dict[str, Any] = pickle.loads(base64.b64decode(event["result"]))
                    return solved
            errors.seek(0)
            said = [ln for ln in errors.read()[-4000:].decode("utf-8", "replace").splitlines() if ln.strip()]
            raise BackendError(redact(f"cannot resolve the pip: section for {platform}: the resolver ended "
                                      f"(exit {proc.wait()}) saying: {said[-1] if said else 'nothing'}"))
        finally:
            # ended, or stopped here (bound, error, Ctrl-C, SIGTERM): nothing of its session is left running
            stop_session(proc, [], finished=finished)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)  # reaped: no zombie left for the rest of the command
