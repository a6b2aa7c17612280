"""The codes ``envguard export`` reports itself, and how its findings are made.

check's EG5xx and lint's EG1xx codes keep their own meaning when export applies those rules.
"""

from __future__ import annotations

from collections.abc import Sequence

from envguard.findings import Finding, Severity

E, W, I = Severity.ERROR, Severity.WARNING, Severity.INFO  # noqa: E741 - the severities by their letters
_MAX_LISTED = 8

CODES: dict[str, tuple[Severity, str]] = {
    "EG601": (I, "the requested specs were inferred: no conda-meta/history, requested_spec or REQUESTED marker"),
    "EG602": (E, "a conda record without a URL or channel: left out of the lock"),
    "EG603": (W, "conda records from a local (file://) channel: only machines with that path can fetch them"),
    "EG604": (W, "a channel URL carried a credential: masked as *** in the files"),
    "EG610": (W, "an editable pip install: not in the spec or the lock"),
    "EG611": (E, "a pip dist built in place from a local directory: not in the spec or the lock"),
    "EG612": (W, "a pip dist from a local file (file://): only this machine has it"),
    "EG613": (W, "a pip dist from version control: pinned to its commit, without an archive hash"),
    "EG614": (W, "pip dists written without a hash: `envguard create` refuses the lock until they have one"),
    "EG615": (E, "a pip dist with no known source (not installed by pip, not on the index): left out of the lock"),
    "EG616": (W, "a pip dist built on this machine from an sdist: no wheel on the index matches its tags"),
    "EG617": (E, "a broken dist-info (no METADATA, an unreadable direct_url.json, an invalid name)"),
    "EG618": (I, "an index could not be reached: hashes were not looked up there"),
    "EG619": (W, "a requirements file with --hash on some lines only: pip's hash-checking refuses the others"),
    "EG620": (I, "a CPU build of torch (a warning on a machine with an NVIDIA driver)"),
    "EG621": (I, "not a conda environment: no conda-lock.yml (python itself is not a conda package here)"),
    "EG622": (W, "an extra of a pip dist only partly installed: its requirements were left out of the spec"),
}


def finding(code: str, message: str, fix: str = "", *, severity: Severity | None = None, file: str | None = None,
       package: str | None = None) -> Finding:
    return Finding(code, severity or CODES[code][0], message, fix, file=file, package=package)



def listed(names: Sequence[str]) -> str:
    """``a, b, c and 5 more``: a finding names packages, not pages of them."""
    shown = ", ".join(names[:_MAX_LISTED])
    return shown + (f" and {len(names) - _MAX_LISTED} more" if len(names) > _MAX_LISTED else "")
