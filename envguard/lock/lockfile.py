"""conda-lock.yml: build and write it with conda-lock's models; read it fast without them.

Writing uses conda-lock's own ``LockedDependency``/``Lockfile``/``LockMeta``,
``apply_categories``, ``compute_content_hashes`` and ``write_conda_lock_file``
(conda-lock is the authority on its format). Reading for ``create``, ``diff``
and ``lock --check`` uses envguard.sources.lockscan (a reader for conda-lock's own
layout that gives what PyYAML gives, and PyYAML's C loader for anything else)
into small dataclasses, because importing conda-lock costs ~0.4 s. :func:`merged_dependencies` is shared
with adopted.py, which writes records conda-lock's way too.

The input fingerprint
---------------------
``lock --check`` must agree with ``conda-lock lock --check-input-hash``,
whose verdict is "is ``metadata.content_hash[p]`` the hash conda-lock computes
for these files now?". Recomputing that hash needs conda-lock's parser (conda's
MatchSpec, poetry's requirement parser). Instead, when envguard writes a lock
it also records, per platform, a fingerprint binding the exact input bytes to
the content hash it wrote::

    sha256(tag, conda-lock version, mapping bytes, CUDA assumption,
           [(file name, sha256(file bytes)) ...], platform, content_hash[platform])

conda-lock's content hash is a pure function of those inputs *unless* the
files carry literal credentials (conda-lock swaps them for matching
environment variables) or direct ``@`` references (a local path's
``is_directory`` enters the hash). Those files never take the fast path.
So a matching fingerprint proves conda-lock would compute the recorded hash:
fresh, without importing conda-lock. Any mismatch (edited inputs, a lock
written by conda-lock itself, a hand-edited hash) falls back to conda-lock's
own ``backwards_compatible_content_hashes``. The fast path can therefore only
say "fresh" when conda-lock would, and never says "stale" on its own.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit

from envguard.errors import UserError
from envguard.redact import redact
from envguard.sources.lockscan import check_document, load_lock  # the one reader and the one check

FINGERPRINT_TAG = "envguard-lock-fingerprint/1"
META_CUDA = "envguard.cuda"
META_CUDA_FROM = "envguard.cuda-from"  # "flag" when --cuda/--no-cuda chose the assumption
META_FINGERPRINT = "envguard.create.fingerprint."  # + platform
# conda-lock's default __cuda version (default-virtual-packages.yaml) is what
# "no --cuda given" means for the content hash.
DEFAULT_CUDA = "default"
_EXTENSIONS = (".conda", ".tar.bz2")


# ------------------------------------------------------------------ reading


@dataclass(frozen=True)
class LockEntry:
    """One package of one platform, as the lock records it."""

    name: str
    version: str
    manager: str  # "conda" | "pip"
    platform: str
    url: str
    md5: str | None
    sha256: str | None
    dependencies: dict[str, str]
    categories: tuple[str, ...] = ("main",)
    optional: bool = False

    @property
    def filename(self) -> str:
        return PurePosixPath(urlsplit(self.url).path).name

    @property
    def subdir(self) -> str:
        """The channel subdir the file lives in (``noarch`` for noarch packages)."""
        return PurePosixPath(urlsplit(self.url).path).parent.name

    @property
    def channel(self) -> str:
        """The channel URL: everything before ``/<subdir>/<file>``."""
        return self.url.split("#", 1)[0].rsplit("/", 2)[0]

    @property
    def build(self) -> str:
        stem = self.filename
        for ext in _EXTENSIONS:
            if stem.endswith(ext):
                stem = stem[: -len(ext)]
                break
        prefix = f"{self.name}-{self.version}-"
        if stem.startswith(prefix):
            return stem[len(prefix):]
        return stem.rsplit("-", 1)[-1]

    @property
    def build_number(self) -> int:
        """Best effort: conda-lock does not record it; the last all-digit ``_N`` of the build string."""
        for part in reversed(self.build.split("_")):
            if part.isdigit():
                return int(part)
        return 0

    @property
    def depends(self) -> list[str]:
        """Matchspec strings (``name spec``) as a repodata record lists them."""
        return [f"{n} {s}".strip() for n, s in self.dependencies.items()]


@dataclass
class Lock:
    path: Path
    version: int | None
    platforms: list[str]
    channels: list[str]
    sources: list[str]
    content_hash: dict[str, str]
    custom_metadata: dict[str, str] = field(default_factory=dict)
    packages: list[LockEntry] = field(default_factory=list)

    @property
    def cuda(self) -> str | None:
        """The CUDA assumption envguard recorded ("12.4", "none"), None for locks from elsewhere."""
        return self.custom_metadata.get(META_CUDA)


def cuda_arg(cuda: str | bool | None) -> str:
    """envguard's ``cuda`` (None default, False none, "12.4") as conda-lock's ``cuda_version``."""
    if cuda is None or cuda is True:
        return DEFAULT_CUDA
    if cuda is False or cuda in {"", "none"}:
        return ""
    return str(cuda)


def _bad_lock(path: Path, key: str, message: str) -> UserError:
    return UserError(message, file=str(path), key=key,
                     fix="regenerate it with `envguard lock`")


_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


def _check_entry_fields(path: Path, i: int, p: dict[str, Any]) -> None:
    """Each field of a package entry has the type conda-lock writes (a hand edit or a hostile lock can put a
    list, a mapping or null anywhere): one line naming the key, never a TypeError further on."""
    def bad(key: str, expected: str, value: Any) -> UserError:
        return _bad_lock(path, f"package[{i}].{key}", f"expected {expected}, found {_kind(value)}")

    for key in ("manager", "name", "platform", "url"):
        if not isinstance(p[key], str) or not p[key]:
            raise bad(key, "a non-empty string", p[key])
    if isinstance(p["version"], bool) or not isinstance(p["version"], (str, int, float)) or p["version"] == "":
        raise bad("version", "a version string", p["version"])
    if "category" in p and (not isinstance(p["category"], str) or not p["category"]):
        raise bad("category", "a category name such as main", p["category"])
    if "categories" in p and (not isinstance(p["categories"], list)
                              or not all(isinstance(c, str) and c for c in p["categories"])):
        raise bad("categories", "a list of category names", p["categories"])
    if not _URL.match(p["url"]):
        raise bad("url", "a URL (scheme://...)", p["url"])
    for algo, value in (p.get("hash") or {}).items():
        if value is not None and not isinstance(value, str):
            raise bad(f"hash.{algo}", "a hex digest string", value)
    if "optional" in p and not isinstance(p["optional"], bool):
        raise bad("optional", "true or false", p["optional"])


def _kind(value: Any) -> str:
    from envguard.redact import shorten

    return "null" if value is None else f"{type(value).__name__} {shorten(repr(value), 60)}"


def read_lock(path: str | Path, *, text: str | None = None) -> Lock:
    """Read a conda-lock.yml (the format versions conda-lock reads, and the older files without a version key:
    envguard.sources.lockscan.check_document decides, for diff's reader too); ``text``: the file's, when the
    caller read it already (it is not read again)."""
    path = Path(path)
    data = load_lock(path, text)  # == load_fast, several times faster on conda-lock's layout
    meta, entries = check_document(data, str(path))
    version = data.get("version")
    channels = [c.get("url", "") if isinstance(c, dict) else str(c) for c in meta.get("channels") or []]
    merged: dict[tuple[str, str, str], dict[str, Any]] = {}
    order: list[tuple[str, str, str]] = []
    for i, p in enumerate(entries):
        entry_key = (p["manager"], p["name"], p["platform"])
        url, version_s = str(p["url"]), str(p["version"])
        if p.get("dependencies") is not None and not isinstance(p["dependencies"], dict):
            raise _bad_lock(path, f"package[{i}].dependencies",
                            f"expected a mapping, found {type(p['dependencies']).__name__}")
        _check_entry_fields(path, i, p)
        # version 2 lists an entry's categories; version 1 repeats the entry once per category
        categories = list(p["categories"]) if version == 2 and "categories" in p else [p.get("category", "main")]
        if entry_key in merged:
            merged[entry_key]["categories"] += categories
            continue
        h = p.get("hash") or {}
        merged[entry_key] = {
            "name": p["name"], "version": version_s, "manager": p["manager"], "platform": p["platform"],
            "url": url, "md5": h.get("md5"), "sha256": h.get("sha256"),
            "dependencies": {str(k): str(v) for k, v in (p.get("dependencies") or {}).items()},
            "categories": categories, "optional": bool(p.get("optional", version == 2 and "main" not in categories)),
        }
        order.append(entry_key)
    packages = [LockEntry(**{**merged[k], "categories": tuple(sorted(set(merged[k]["categories"])))})
                for k in order]
    return Lock(
        path=path,
        version=version,
        platforms=[str(p) for p in meta.get("platforms") or []],
        channels=channels,
        sources=[str(s) for s in meta.get("sources") or []],
        content_hash={str(k): str(v) for k, v in (meta.get("content_hash") or {}).items()},
        custom_metadata={str(k): str(v) for k, v in (meta.get("custom_metadata") or {}).items()},
        packages=packages,
    )


def host_records(lock: Lock, platform: str, *, categories: tuple[str, ...] | None = None) -> list[LockEntry]:
    """The conda packages to install for ``platform`` (optionally only some categories), in lock order."""
    out = []
    for p in lock.packages:
        if p.platform != platform or p.manager != "conda":
            continue
        if categories is not None and not set(p.categories) & set(categories):
            continue
        out.append(p)
    return out


def pip_records(lock: Lock, platform: str) -> list[LockEntry]:
    return [p for p in lock.packages if p.platform == platform and p.manager == "pip"]


def require_whole(lock: Lock) -> None:
    """IntegrityError (exit 3) when a record of the lock needs what the lock does not hold on its platform:
    the one judgement of envguard.lockwhole, for `lock --check` and create."""
    from envguard import lockwhole

    lockwhole.require_whole(str(lock.path), lockwhole.by_platform(lock.packages),
                            versions=lockwhole.judges_versions("conda-lock", lock.custom_metadata))


def check_whole(path: Path, *, fresh: bool) -> None:
    """`lock --check`'s second question, once the metadata is judged: is the lock whole (exit 3 when not)?
    The content hash covers the spec, not the package list, so a lock cut short is "fresh". A package list
    that cannot be read is bad input (exit 2) where the metadata said fresh; a stale verdict stands as it is."""
    if not path.is_file():
        return
    try:
        lock = read_lock(path)
    except UserError:
        if fresh:
            raise
        return
    require_whole(lock)


# ------------------------------------------------------------------ fingerprint


def conda_lock_version() -> str:
    """Installed conda-lock version, read from its dist-info name (importing it costs 0.4 s)."""
    spec = importlib.util.find_spec("conda_lock")
    if spec and spec.origin:
        for d in sorted(Path(spec.origin).parent.parent.glob("conda_lock-*.dist-info")):
            return d.name[len("conda_lock-"): -len(".dist-info")]
    from importlib.metadata import version

    return version("conda-lock")


def fast_path_possible(texts: list[str]) -> bool:
    """False when conda-lock's hash of these files may depend on the environment or the disk."""
    for text in texts:
        if redact(text) != text:  # literal credentials: conda-lock maps them onto env var names
            return False
        for line in text.splitlines():
            code = line.split(" #", 1)[0] if not line.lstrip().startswith("#") else ""
            if "@" in code:  # userinfo or a direct reference (local paths enter the hash)
                return False
    return True


def input_digest(files: list[Path], contents: list[bytes], cuda: str, mapping: bytes) -> str:
    """The platform-independent part of the fingerprint."""
    h = hashlib.sha256()
    parts = [FINGERPRINT_TAG, conda_lock_version(), hashlib.sha256(mapping).hexdigest(), cuda]
    parts += [f"{Path(f).name}:{hashlib.sha256(c).hexdigest()}" for f, c in zip(files, contents, strict=False)]
    h.update(json.dumps(parts).encode())
    return h.hexdigest()


def fingerprint(digest: str, platform: str, content_hash: str) -> str:
    return hashlib.sha256(json.dumps([digest, platform, content_hash]).encode()).hexdigest()


# ------------------------------------------------------------------ building and writing


def merged_dependencies(depends: list[str]) -> dict[str, str]:
    """name -> version spec, several constraints on one name joined with ',' (as conda-lock merges them)."""
    from rattler import MatchSpec

    merged: dict[str, list[str]] = {}
    for dep in depends:
        try:
            name = MatchSpec(dep, strict=False).name.normalized
        except Exception:  # noqa: BLE001 - rattler's own error family: fall back to the text
            name = re.split(r"[\s=<>!~]", dep.strip(), maxsplit=1)[0]
        rest = dep.strip()[len(name):].strip() if dep.strip().lower().startswith(name) else ""
        version = rest.split()[0] if rest else ""
        merged.setdefault(name, [])
        if version and version not in merged[name]:
            merged[name].append(version)
    return {n: ",".join(v) for n, v in merged.items()}


def locked_conda_dependency(record: Any, platform: str, channels: list[Any]) -> Any:
    """A rattler RepoDataRecord as conda-lock's LockedDependency (URL with placeholders, secrets masked)."""
    from conda_lock.lockfile.v2prelim.models import HashModel, LockedDependency
    from conda_lock.models.channel import normalize_url_with_placeholders

    url = redact(normalize_url_with_placeholders(str(record.url), channels=channels))
    return LockedDependency(
        name=record.name.normalized,
        version=str(record.version),
        manager="conda",
        platform=platform,
        dependencies=merged_dependencies(list(record.depends)),
        url=url,
        hash=HashModel(md5=record.md5.hex() if record.md5 else "",
                       sha256=record.sha256.hex() if record.sha256 else None),
    )


def redacted_channels(channels: list[Any]) -> list[Any]:
    """conda-lock Channels safe to write: literal credentials masked, ``${VAR}`` kept."""
    from conda_lock.models.channel import Channel

    return [Channel(url=redact(c.url), used_env_vars=tuple(c.used_env_vars)) for c in channels]


def mirror_metadata(channels: list[str]) -> dict[str, str]:
    """custom_metadata for the channels a solve here reads from another URL than their name means without
    configuration (a mirror, custom_channels, channel_alias): ``envguard.mirror.NAME: URL`` (redacted), the
    one route envguard.condaconfig takes from a name to a URL. Names with ``${VAR}`` are left out."""
    from envguard import condaconfig

    return {condaconfig.LOCK_MIRROR_KEY + n: u for n, u in condaconfig.load().locked_from(channels).items()}


def mirror_line(channels: list[str]) -> str:
    """The one line a lock prints on stderr about the mirrors its channels were read from ("" for none)."""
    from envguard import condaconfig

    return condaconfig.load().mirror_note(channels)


def relative_source(lockfile: Path, source: Path) -> str:
    try:
        return Path(os.path.relpath(Path(source).resolve(), Path(lockfile).resolve().parent)).as_posix()
    except ValueError:  # another drive on Windows
        return Path(source).resolve().as_posix()


def build_lockfile(*, packages: list[Any], lock_spec: Any, channels: list[Any], platforms: list[str],
                   content_hash: dict[str, str], sources: list[str], custom: dict[str, str]) -> Any:
    from conda_lock.lockfile.v2prelim.models import Lockfile, LockMeta

    return Lockfile(
        package=packages,
        metadata=LockMeta(
            content_hash={p: content_hash[p] for p in platforms},
            channels=channels,
            platforms=list(platforms),
            sources=sources,
            custom_metadata=dict(sorted(custom.items())) or None,
        ),
    )


def write_lock_atomic(lockfile: Any, path: Path) -> bool:
    """Write with conda-lock's writer into a sibling temp dir, then ``os.replace``.

    The writer names the file in its help text, so the temp file has the final
    name. Returns True when the bytes on disk changed. On any failure the
    existing lock is untouched.
    """
    from conda_lock.lockfile import write_conda_lock_file

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmpdir = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        tmp = tmpdir / path.name
        write_conda_lock_file(lockfile, tmp, metadata_choices=None)
        new = tmp.read_bytes()
        old = path.read_bytes() if path.exists() else None
        if old == new:
            return False
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        return True
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
