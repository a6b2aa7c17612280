"""The default backend: py-rattler's installer, embedded, no solve.

Records are built from the lock entries alone (name, version and build from the file name, depends, md5,
sha256, url, channel, subdir). rattler takes what it does not find there (noarch type, entry points, prefix
placeholders) from the extracted package itself, so this links exactly what a solve would have.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from envguard import settings
from envguard.create.backends.base import InstallPlan, InstallProgress
from envguard.create.integrity import Artifact, mismatch_error, parse_rattler_mismatch, purge_cache_entry
from envguard.errors import BackendError, EnvguardError
from envguard.redact import redact, shorten


def run_coroutine(coro: Coroutine[Any, Any, Any]) -> Any:
    """asyncio.run, also from inside a running event loop (then in a helper thread)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["result"] = asyncio.run(coro)
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = e

    thread = threading.Thread(target=target, name="envguard-rattler")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box.get("result")


def to_record(art: Artifact) -> Any:
    from rattler import BuildString, PackageRecord, RepoDataRecord

    record = PackageRecord(
        name=art.name,
        version=art.version,
        build=BuildString(art.build),
        build_number=_build_number(art.build),
        subdir=art.subdir,
        depends=list(art.depends),
        sha256=bytes.fromhex(art.sha256) if art.sha256 else None,
        md5=bytes.fromhex(art.md5) if art.md5 else None,
    )
    return RepoDataRecord(record, art.filename, art.install_url, art.channel)


def _build_number(build: str) -> int:
    # Conda builds conventionally end in "_<build number>"; the lock does not store it separately and
    # rattler only copies it into conda-meta.
    tail = build.rsplit("_", 1)[-1]
    return int(tail) if tail.isdigit() else 0


class _Reporter:
    """Adapts rattler's InstallerReporter callbacks to envguard's InstallProgress (cached/linked by name)."""

    def __init__(self, progress: InstallProgress) -> None:
        self.progress = progress
        self._names: dict[int, str] = {}
        self._lock = threading.Lock()
        self._next = 0

    def _token(self, name: str) -> int:
        with self._lock:
            self._next += 1
            self._names[self._next] = name
            return self._next

    def on_transaction_start(self, total_operations: int) -> None:
        self.progress.install_start(total_operations)

    def on_populate_cache_start(self, operation: int, package_name: str) -> int:
        return self._token(package_name)

    def on_populate_cache_complete(self, cache_entry: int) -> None:
        self.progress.cached(self._names.get(cache_entry, "?"))

    def on_link_start(self, operation: int, package_name: str) -> int:
        return self._token(package_name)

    def on_link_complete(self, index: int) -> None:
        self.progress.linked(self._names.get(index, "?"))


def _reporter(progress: InstallProgress) -> Any:
    from rattler import InstallerReporter

    # rattler checks for its Protocol class; mixing it in keeps the no-op defaults for every other event.
    cls = type("EnvguardInstallerReporter", (_Reporter, InstallerReporter), {})
    return cls(progress)


class RattlerBackend:
    name = "rattler"
    relocatable = True

    def available(self) -> bool:
        return True

    def describe(self) -> str:
        return "rattler (embedded py-rattler)"

    def install(self, plan: InstallPlan, build_dir: Path, progress: InstallProgress) -> None:
        import rattler
        from rattler.package_cache import PackageCache, ValidationMode

        records = [to_record(a) for a in plan.artifacts]
        alternative = plan.target if Path(build_dir) != Path(plan.target) else None
        # envguard.create.prelink has just verified every extracted entry this install links (tree, sizes,
        # identities or hashes) and removed any other: rattler's own check of each file would be a second,
        # weaker pass over the same entries (ValidationMode.fast: one stat per file).
        cache = PackageCache.new_layered([plan.cache_dir], validation_mode=ValidationMode.skip())
        try:
            with contained_stderr():
                run_coroutine(
                    rattler.install(
                        records,
                        build_dir,
                        cache_dir=plan.cache_dir,
                        package_cache=cache,
                        installed_packages=[],  # a fresh directory: no scan of conda-meta
                        execute_link_scripts=False,  # link scripts are arbitrary code; never run them
                        show_progress=False,
                        client=plan.client,
                        reporter=_reporter(progress) if getattr(progress, "wants_events", True) else None,
                        alternative_target_prefix=alternative,
                    )
                )
        except EnvguardError:
            raise
        except Exception as e:  # rattler's exception classes carry the whole causal chain in str(e)
            raise translate_error(e, plan, build_dir) from e
        except BaseException as e:
            if type(e).__name__ != "PanicException":  # KeyboardInterrupt, SystemExit
                raise
            # pyo3 turns a Rust panic into PanicException (a BaseException): one line, never a backtrace
            first = (str(e).strip().splitlines() or ["no message"])[0]
            raise BackendError(f"rattler's installer crashed: {redact(shorten(first, 300))} (nothing was "
                               "installed at the target; rerun with --verbose for rattler's own report)") from e


class contained_stderr:
    """Hold what the installer's native code writes to file descriptor 2 (a Rust panic message and
    backtrace) and show it afterwards only with ``--verbose`` (or ENVGUARD_VERBOSE=1): the user sees
    envguard's one-line error instead. Python-level output goes through sys.stderr as usual."""

    def __enter__(self) -> None:
        import tempfile

        self.saved: int | None = None
        if settings.verbose() or threading.current_thread() is not threading.main_thread():
            return
        try:
            sys.stderr.flush()
            self.tmp = tempfile.TemporaryFile()
            self.saved = os.dup(2)
            os.dup2(self.tmp.fileno(), 2)
        except (OSError, ValueError, AttributeError):
            self.saved = None

    def __exit__(self, *exc: object) -> None:
        if self.saved is None:
            return
        os.dup2(self.saved, 2)
        os.close(self.saved)
        try:
            self.tmp.seek(0)
            held = self.tmp.read(1 << 16)
        finally:
            self.tmp.close()
        noise = b"panicked at" in held or b"RUST_BACKTRACE" in held or b"stack backtrace" in held
        if held and not noise:  # anything else (a warning) is shown after all
            try:
                sys.stderr.write(held.decode("utf-8", "replace"))
            except (OSError, ValueError):
                pass


def translate_error(error: BaseException, plan: InstallPlan, build_dir: Path) -> EnvguardError:
    message = str(error)
    mismatch = parse_rattler_mismatch(message)
    if mismatch is not None:
        url, expected, actual = mismatch
        art = next((a for a in plan.artifacts if a.url == url), None)
        if art is not None:
            purge_cache_entry(plan.cache_dir, art.stem)
            return mismatch_error(art.name, art.version, url, expected, actual, lockfile=plan.lockfile)
        return mismatch_error("package", "?", url, expected, actual, lockfile=plan.lockfile)
    return os_error_or_backend(message, build_dir, plan.cache_dir, tool="rattler")


def os_error_or_backend(message: str, build_dir: Path, cache_dir: Path | None, *, tool: str) -> EnvguardError:
    """Permission and disk-full failures name the path to fix; anything else is a backend failure."""
    lower = message.lower()
    detail = _last_cause(message)
    if "os error 28" in lower or "no space left" in lower or "disk quota" in lower or "os error 122" in lower:
        return BackendError(f"no space left on device while installing into {build_dir.parent} "
                            f"(package cache {cache_dir}): {detail}",
                            fix="free space, or set ENVGUARD_PKGS_DIR / choose a prefix on another filesystem")
    if "os error 13" in lower or "permission denied" in lower or "os error 1)" in lower or \
            "os error 30" in lower or "read-only file system" in lower:
        return BackendError(f"permission denied while installing into {build_dir.parent} "
                            f"(package cache {cache_dir}): {detail}", fix="choose a writable prefix or package cache")
    return BackendError(f"{tool} failed to install the locked packages: {redact(detail)}")


def _last_cause(message: str) -> str:
    """rattler errors read 'top\\nCaused by: ...\\nCaused by: root'; keep the first line and the root cause."""
    lines = [ln.strip() for ln in message.splitlines() if ln.strip()]
    if not lines:
        return message
    causes = [ln.removeprefix("Caused by:").strip() for ln in lines if ln.startswith("Caused by:")]
    first = lines[0]
    return f"{first}: {causes[-1]}" if causes and causes[-1] not in first else first
