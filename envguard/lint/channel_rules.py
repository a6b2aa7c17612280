"""Rules on channels: defaults mixed with conda-forge (EG113), plain http:// (EG114), the frozen
pytorch channel (EG111) and an unused one (EG130), nightly channels (EG120), a channel::package whose
channel is not listed (EG119); and envguard.mixing's rules over the requested specs as records.
:class:`ChannelRules` is the mixin envfile.py joins into the linter."""

from __future__ import annotations

from typing import Any

from envguard.lint.constraints import CUDA_UNIVERSE, exact_version, lines_text, release_lines
from envguard.lint.deps import channel_name, is_conda_forge, is_defaults
from envguard.lint.linter import Linter
from envguard.lint.projects import is_nightly_channel, nightly_fix, unused_channel
from envguard.lint.rules import MIX_CODES, TORCH_CONDA_NAMES, E, W

# What the `pytorch` channel is for: listed without any of these, it serves nothing in the file.
_PYTORCH_CHANNEL_PACKAGES = frozenset({
    "pytorch", "pytorch-cpu", "pytorch-gpu", "torchvision", "torchaudio", "torchtext", "torchdata", "torchtriton",
    "pytorch-cuda", "pytorch-mutex", "cpuonly", "captum", "botorch", "ignite", "faiss", "faiss-cpu", "faiss-gpu",
})


class ChannelRules(Linter):
    def channel_rules(self) -> None:
        frozen = self.c.pytorch_channel_frozen_at
        has_cf = any(is_conda_forge(ch) for ch, _ in self.channels)
        for ch, line in self.channels:
            n = channel_name(ch)
            if has_cf and is_defaults(ch):
                self.add("EG113", f"channel `{ch}` mixed with conda-forge: their binaries are built against "
                         "different libraries and break each other", "remove it and add `nodefaults`", line)
            if ch.strip().lower().startswith("http://"):
                self.add("EG114", f"channel `{ch}` is plain HTTP: packages can be altered in transit",
                         "use https://", line)
            if n == "pytorch" and not self._pytorch_channel_used():
                message, fix = unused_channel(ch, locked=False, why="every package it carries is either not "
                                              "requested or pinned to another channel")
                self.add("EG130", message, fix, line)
            elif n == "pytorch":
                after = self._torch_all_after(frozen)
                self.add("EG111", f"the `pytorch` channel is frozen at torch {frozen} (pytorch#138506)"
                         + (f"; torch {lines_text(self.torch_lines or ())} is not on it" if after else ""),
                         "use conda-forge (channels: conda-forge, nodefaults) with `pytorch=X.Y.*`",
                         line, E if after else W)
            if is_nightly_channel(n, self.c.nightly_channels):
                self.add("EG120", f"channel `{ch}` deletes its builds: the environment cannot be rebuilt later",
                         nightly_fix(n), line)
        for d in self.conda:
            if not d.channel:
                continue
            n = d.channel.lower()
            if n == "pytorch" and d.name in TORCH_CONDA_NAMES + ("torchvision", "torchaudio", "pytorch-cuda") \
                    and "pytorch" not in self.channel_names:
                after = self._torch_all_after(frozen)
                self.add("EG111", f"`{d.spec}` uses the `pytorch` channel, frozen at torch {frozen}",
                         "use conda-forge with `pytorch=X.Y.*`", d.line, E if after else W, package=d.name)
            if is_nightly_channel(n, self.c.nightly_channels):
                self.add("EG120", f"`{d.spec}` comes from `{d.channel}`, which deletes its builds",
                         nightly_fix(n), d.line, package=d.name)
            listed = n in self.channel_names or (is_defaults(n) and "defaults" in self.channel_names)
            if not listed:
                self.add("EG119", f"`{d.spec}` names channel `{d.channel}`, which `channels:` does not list: "
                         "other tools and the lock's channel list will not know it",
                         f"add `{d.channel}` to channels, or drop the "
                         f"`{d.spec.partition('::')[0] if '::' in d.spec else d.channel}::` prefix", d.line,
                         package=d.name)

    def _pytorch_channel_used(self) -> bool:
        return any(d.name in _PYTORCH_CHANNEL_PACKAGES and (d.channel is None or d.channel.lower() == "pytorch")
                   for d in self.conda)

    # -- mixing (envguard.mixing), on the requested specs as records -------------------------------------
    def records(self, platform: str | None) -> tuple[list[Any], dict[int, int | None]]:
        """The specs requested on ``platform`` (None: those without a selector) as records for envguard.mixing:
        exact pins keep their version, a CUDA package pinned to one line keeps that line. The second value
        maps each record to its line in the file."""
        from envguard.mixing import cuda_major
        from envguard.model import Package

        out: list[Any] = []
        lines: dict[int, int | None] = {}
        for d in self.conda + self.pip:
            if d.platforms is not None and (platform is None or platform not in d.platforms):
                continue
            version = exact_version(d.version) or ""
            if not version and d.manager == "conda" and d.version:
                got = release_lines(d.version, "conda", CUDA_UNIVERSE)
                line = next(iter(got)) if got and len(got) == 1 else ""
                if line and cuda_major(Package(d.name, f"{line}.0")) is not None:
                    version = line
            if not version and d.version and d.manager == "conda":
                version = d.version.removeprefix("==")  # shown as written: "1.13.*"
            build = d.build if d.build and "*" not in d.build else None
            rec = Package(name=d.name, version=version, manager=d.manager, build=build,
                          channel=d.channel if d.manager == "conda" else None)
            out.append(rec)
            lines[id(rec)] = d.line
        return out, lines

    def mixing_rules(self) -> None:
        from envguard.mixing import mixing

        list_level = any(f.code == "EG113" for f in self.findings)
        selected = sorted({p for d in self.conda + self.pip for p in (d.platforms or ())})
        seen: set[tuple[str, str]] = set()
        for platform in [None, *selected]:
            records, lines = self.records(platform)
            for m in mixing(records, context="spec"):
                code = MIX_CODES[m.rule]
                if (code == "EG113" and list_level) or (code, m.message) in seen:
                    continue  # the channels list already says so / another platform did
                if code == "EG158" and any(f.code == "EG107" and f.package == "torch" for f in self.findings):
                    continue  # EG107 already stops the pip torch line in a spec
                seen.add((code, m.message))
                if m.rule == "cuda-lines" and {r.manager for r in m.records} == {"conda", "pip"}:
                    # the same two CUDA runtimes EG107's warning names, here with their lines: say it once
                    self.findings = [f for f in self.findings if not (f.code == "EG107" and f.severity is W)]
                where = f" (on {platform})" if platform else ""
                self.add(code, m.message + where, m.fix, lines.get(id(m.records[0])), package=m.package)
