"""What reading a prefix yields, as data: conda-meta records with their files, Python dists with their
owner, conda records another installer overwrote, and :class:`PrefixInfo`, which holds them all."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from envguard.model import Package, pep503

Owner = Literal["conda", "pip", "unknown"]
PIP_INSTALLERS = frozenset({"pip", "uv", "poetry", "pdm", "pipenv", "hatch"})


@dataclass(frozen=True)
class FileEntry:
    """One file of a conda record, as written in its ``paths_data``."""

    path: str  # relative to the prefix, forward slashes
    path_type: str = "hardlink"
    sha256: str | None = None
    size: int | None = None
    # The installer rewrote the prefix placeholder in this file, so the
    # package's sha256/size no longer describe it (unless sha256_in_prefix says).
    rewritten: bool = False
    #: ``path_type`` was written in the record (old records without paths_data give no types to check)
    typed: bool = False
    #: a softlink's ``sha256_in_prefix``: the sha256 of the link's target text as the installer made it
    link_sha256: str | None = None


@dataclass(frozen=True)
class CondaRecord:
    name: str
    version: str
    build: str
    channel: str  # redacted, no trailing slash
    subdir: str
    url: str  # redacted
    md5: str | None
    sha256: str | None
    depends: tuple[str, ...]
    meta_file: str  # file name inside conda-meta/
    files: tuple[str, ...]
    paths: tuple[FileEntry, ...]
    noarch: str | None = None
    # What was asked for when this record was installed (conda's ``requested_spec``, rattler's
    # ``requested_specs``), and the archive's file name: envguard export adopts both.
    requested_specs: tuple[str, ...] = ()
    fn: str = ""

    @property
    def channel_name(self) -> str:
        """``pytorch`` for https://conda.anaconda.org/pytorch, the last path part otherwise."""
        c = self.channel.rstrip("/")
        return c.rsplit("/", 1)[-1] if "/" in c else c

    def to_package(self, platform: str | None) -> Package:
        # The channel in the form every reader uses (``conda-forge``, or a redacted base URL), so that a
        # lock and this prefix compare equal.
        from envguard.channels import channel_from_url, normalise_channel

        return Package(
            name=self.name,
            version=self.version,
            manager="conda",
            build=self.build,
            channel=channel_from_url(self.url) or normalise_channel(self.channel),
            sha256=self.sha256,
            md5=self.md5,
            url=self.url or None,
            platform=platform,
            depends=self.depends,
        )


@dataclass(frozen=True)
class Dist:
    """A ``*.dist-info`` / ``*.egg-info`` found in a site-packages directory."""

    name: str  # from METADATA, falls back to the directory name
    version: str
    path: str  # the metadata directory, relative to the prefix
    installer: str | None
    owner: Owner
    conda_record: str | None = None  # conda package name when conda owns it
    import_names: tuple[str, ...] = ()  # read in conda prefixes only (the pip-over-conda rules need them)

    @property
    def key(self) -> str:
        return pep503(self.name)

    def to_package(self, platform: str | None) -> Package:
        return Package(name=self.name, version=self.version, manager="pip", platform=platform)


@dataclass(frozen=True)
class Overwritten:
    """A conda record's dist-info that vanished or now says another installer wrote it."""

    package: str
    metadata_path: str
    reason: str


@dataclass
class PrefixInfo:
    prefix: Path
    is_conda: bool
    is_venv: bool
    python_version: str | None  # "3.11" or "3.11.7"
    site_packages: list[str]  # relative to the prefix
    conda: list[CondaRecord] = field(default_factory=list)
    dists: list[Dist] = field(default_factory=list)
    overwritten: list[Overwritten] = field(default_factory=list)
    bad_records: list[tuple[str, str]] = field(default_factory=list)  # (conda-meta file, why)
    # Directories that ``*.pth`` files in site-packages add to sys.path: (pth path, owning conda
    # package or None, directory). Editable installs and conda shims resolve imports through them.
    pth_dirs: list[tuple[str, str | None, str]] = field(default_factory=list)

    def record(self, name: str) -> CondaRecord | None:
        return next((r for r in self.conda if r.name == name), None)

    def packages(self, platform: str | None = None) -> list[Package]:
        """Conda records plus the dists conda does not own, as one normalised list.

        A conda package whose dist-info another installer rewrote (``pip install --ignore-installed`` of the
        same version) is listed twice, as conda's and as pip's: both managers record it, which is what
        envguard diff and check call pip over conda."""
        pkgs = [r.to_package(platform) for r in self.conda]
        pkgs += [d.to_package(platform) for d in self.dists if d.owner != "conda"]
        rewritten = {ow.metadata_path.rsplit("/", 1)[0] for ow in self.overwritten}
        pkgs += [d.to_package(platform) for d in self.dists if d.owner == "conda" and d.path in rewritten]
        return sorted(pkgs, key=lambda p: (p.manager, p.key, p.version))
