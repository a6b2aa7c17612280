"""The path checks a set of verified packages has passed, remembered in the package cache.

Checking every path of an environment (envguard.pathsafety: relative, normalised, inside the prefix, through
every package's symlinks) is a pure function of what each package declares: its ``paths.json`` (covered by
the digest of its verified ``info/`` files) and its symlinks and their targets. A create of a lock whose
packages are all extracted and verified already (envguard.create.prelink, warm) asks the same question as
the create before it; on a real PyTorch environment (30,000 paths) the answer costs ~0.06 s. So a passing
answer is recorded under a digest of everything it depends on: each package's archive key, ``info/``
digest and symlinks, in lock order, the platform's path rules, ``ENVGUARD_SYMLINK_ALLOW`` and the rules
themselves (the digest of envguard/pathsafety.py: an envguard whose rules differ asks again). A package
scanned from its archive in this create (cold) is always checked: its archive may name more than its
``paths.json``. A refusal is never recorded.

The record is trusted as the package cache itself is (VerifiedStamps' doc): whoever can write it can write
the stamps that vouch for the entries' contents too.
"""

from __future__ import annotations

import hashlib
import marshal
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from envguard.create.integrity import newest_records, read_record_file, write_record_file

_rules: list[str] = []


def rules_digest() -> str:
    """The digest of the module that holds the rules (read once per process): an answer recorded under other
    rules, by another envguard version, never counts."""
    if not _rules:
        from envguard import __version__, pathsafety

        try:
            _rules.append(hashlib.sha256(Path(pathsafety.__file__).read_bytes()).hexdigest())
        except (OSError, TypeError):  # no source file to read (a frozen build): the version stands for it
            _rules.append(f"envguard {__version__}")
    return _rules[0]


def key(windows: bool, allow: Iterable[tuple[str, str]],
        packages: Iterable[tuple[str, str, Mapping[str, str], Mapping[str, str]]]) -> str:
    """The digest of one path check's inputs; ``packages``: (archive key, info digest, declared symlinks,
    every symlink of the entry) in lock order."""
    material = (rules_digest(), windows, sorted(allow),
                [(k, info, sorted(links.items()), sorted(inner.items())) for k, info, links, inner in packages])
    return hashlib.sha256(marshal.dumps(material, 2)).hexdigest()


class PathChecks:
    """Passed path checks by input digest, in ``<package cache>/.envguard-path-checks.json``."""

    NAME = ".envguard-path-checks.json"
    LIMIT = 64  # environments (locks) created from this cache recently

    def __init__(self, cache_dir: Path) -> None:
        self.path = Path(cache_dir) / self.NAME
        data = read_record_file(self.path) or {}
        passed = data.get("passed") if data.get("format") == 1 else None
        self.passed: dict[str, list[int]] = passed if isinstance(passed, dict) else {}

    def has_passed(self, digest: str) -> bool:
        return isinstance(self.passed.get(digest), list)

    def record(self, digest: str) -> None:
        """Remember a passing check (written at once: a failure to write only means checking again)."""
        self.passed[digest] = [time.time_ns()]
        write_record_file(self.path, {"format": 1, "passed": newest_records(self.passed, self.LIMIT)})
