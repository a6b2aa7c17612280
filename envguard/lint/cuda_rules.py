"""Rules on CUDA: conda's pytorch-cuda beside pip's torch (EG108), cudatoolkit with torch 2 (EG109),
pytorch-cuda's legacy channels (EG110), CUDA lines the pinned torch has no builds for (EG118), a CUDA
pytorch without a build guard (EG112). :class:`CudaRules` is the mixin envfile.py joins into the linter."""

from __future__ import annotations

import re
from typing import Any

from envguard import compat
from envguard.lint.constraints import CUDA_UNIVERSE, lines_text, nearest_line, release_lines
from envguard.lint.deps import Dep
from envguard.lint.linter import Linter
from envguard.lint.rules import E, W
from envguard.versions import line_key


class CudaRules(Linter):
    def cuda_rules(self) -> None:
        names = {d.name: d for d in self.conda}
        pcuda = names.get("pytorch-cuda")
        frozen = self.c.pytorch_channel_frozen_at
        # AnimateDiff: conda's pytorch-cuda, pip's torch, no conda pytorch
        if pcuda and self.torch_pip and not self.torch_conda:
            t = self.torch_pip[0]
            self.add("EG108", f"`{pcuda.spec}` comes from conda but torch from pip (`{t.spec}`): the pip wheel "
                     "carries its own CUDA runtime, so conda's CUDA line is not the one torch uses",
                     "install pytorch from conda and drop the pip torch (conda-forge: `pytorch=X.Y.*=cuda12*` "
                     "with `cuda-version`), or drop pytorch-cuda", pcuda.line, package="pytorch-cuda")
        tk = names.get("cudatoolkit")
        if tk and self.torch_conda:  # beside a torch from pip alone, EG107 (CUDA libraries beside the wheels')
            self._cudatoolkit(tk)
        if pcuda:
            after = self._torch_all_after(frozen)
            self.add("EG110", f"`{pcuda.spec}` only exists on the pytorch/nvidia channels, which stopped at "
                     f"torch {frozen}" + (f"; torch {lines_text(self.torch_lines or ())} cannot use it"
                                          if after else ""),
                     f"on conda-forge use {self._conda_forge_cuda_pins(pcuda.version)}",
                     pcuda.line, E if after else W, package="pytorch-cuda")
            # which pytorch-channel build pairs with it matters only for a torch from that channel (EG108: pip's)
            rel = (self.c.torch(self.torch_release, compat.PYTORCH)
                   if self.torch_release and self.torch_conda else None)
            cl = release_lines(pcuda.version, "conda", CUDA_UNIVERSE)
            if rel and cl and len(cl) == 1 and next(iter(cl)) not in rel.cuda:
                self.add("EG118", f"the pytorch channel has no CUDA {next(iter(cl))} build of torch {rel.version} "
                         f"(its CUDA lines: {', '.join(rel.cuda)})",
                         f"use {self.pin('pytorch-cuda', rel.cuda[-1])}", pcuda.line, package="pytorch-cuda")
        cv = names.get("cuda-version")
        if cv and self.route == compat.CONDA_FORGE:
            self._cuda_version_line(cv)
        for d in self.torch_conda:
            if self.route == compat.CONDA_FORGE and d.build:
                self._build_line(d)
        self._build_guard(names)

    def _cuda_platforms(self, dep: Dep, rel: Any) -> list[str]:
        """The file's platforms where ``dep`` applies and the release has CUDA builds."""
        plats = [p for p in self.platforms if dep.platforms is None or p in dep.platforms]
        return [p for p in plats if rel.cuda_on(p)]

    def _lacking(self, lacking: list[str], plats: list[str]) -> list[str]:
        """The platforms to report as lacking a build. An export whose platform the file does not give away
        describes one machine on one of them: only a build no platform has is wrong."""
        return lacking if not self.one_machine or len(lacking) == len(plats) else []

    def _built_text(self, rel: Any, plats: list[str]) -> str:
        groups: dict[tuple[str, ...], list[str]] = {}
        for p in plats:
            groups.setdefault(rel.cuda_on(p), []).append(p)
        return ", ".join(f"for CUDA {' and '.join(lines)} on {', '.join(ps)}" for lines, ps in groups.items())

    def _cuda_version_line(self, cv: Dep) -> None:
        """EG118: ``cuda-version X.Y`` that no conda-forge build of the pinned torch accepts on some platform (a
        ``cudaXYZ`` build depends on ``cuda-version >=X.Y,<X+1``)."""
        rel = self._release()
        cl = release_lines(cv.version, "conda", CUDA_UNIVERSE)
        if rel is None or not cl or len(cl) != 1:
            return
        line = next(iter(cl))
        plats = self._cuda_platforms(cv, rel)
        from envguard import channelfacts  # the rule init applies

        lacking = self._lacking(list(channelfacts.cuda_verdict(rel, plats, line).lacking), plats)
        if not lacking:
            return
        choices = rel.cuda_choices(plats)
        fix = f"use {self.pin('cuda-version', nearest_line(line, choices))}" if choices else self.per_platform_pin()
        self.add("EG118", f"conda-forge builds torch {rel.version} {self._built_text(rel, lacking)}: no build there "
                 f"accepts `{cv.spec}`", fix, cv.line, package="cuda-version")

    def _build_line(self, d: Dep) -> None:
        """EG118: a build string that names a CUDA line conda-forge never built for the pinned torch."""
        rel = self._release()
        line = compat.cuda_in_build(d.build or "")
        if rel is None or not line or line == "any":
            return
        plats = self._cuda_platforms(d, rel)
        from envguard import channelfacts  # the rule init applies

        lacking = self._lacking(list(channelfacts.cuda_verdict(rel, plats, line, exact_build=True).lacking), plats)
        if lacking:
            self.add("EG118", f"conda-forge builds torch {rel.version} {self._built_text(rel, lacking)}: no build "
                     f"matches `{d.spec}`", f"write {self._conda_forge_cuda_pins(line if '.' in line else None)}",
                     d.line, package=d.name)

    def _conda_forge_cuda_pins(self, line_hint: str | None) -> str:
        """`pytorch=X.Y.*=cudaN*` with a `cuda-version` that conda-forge builds for the file's torch."""
        cf = self.c.route(compat.CONDA_FORGE)
        rel = (cf.release(self.torch_release) if self.torch_release else None) or cf.release(cf.newest)
        if rel is None or not rel.released:
            rel = cf.release(cf.newest)
        assert rel is not None
        plats = [p for p in self.platforms if rel.cuda_on(p)] or list(rel.cuda_platforms)
        choices = rel.cuda_choices(plats) or list(rel.cuda)
        hints = sorted(release_lines(line_hint, "conda", CUDA_UNIVERSE) or (), key=line_key) if line_hint else []
        hint = hints[0] if hints else (line_hint if line_hint and re.fullmatch(r"\d+\.\d+", line_hint) else None)
        same = [c for c in choices if hint and c.split(".")[0] == hint.split(".")[0]]
        line = same[-1] if same else (nearest_line(hint, choices) if hint else choices[-1])
        return (f"{self.build_pin('pytorch', f'{rel.version}.*', 'cuda' + line.split('.')[0] + '*')} with "
                f"{self.pin('cuda-version', line)}")

    def _cudatoolkit(self, tk: Dep) -> None:
        """EG109: cudatoolkit is CUDA 11 packaging. conda-forge's torch 2.0-2.5 CUDA 11.x builds really use it;
        every other torch 2 build does not, so the solver may pick a CPU build or a mismatched runtime."""
        if self.torch_lines is None:
            self.add("EG109", f"`{tk.spec}` with an unpinned torch: the solver picks the newest torch 2, which does "
                     "not use cudatoolkit (CUDA 11 packaging)",
                     f"pin torch and use {self._conda_forge_cuda_pins(None)}", tk.line, W, package="cudatoolkit")
            return
        if not self.torch_lines or not all(line_key(v) >= line_key("2") for v in self.torch_lines):
            return
        tk_lines = release_lines(tk.version, "conda", CUDA_UNIVERSE)
        if self.route == compat.CONDA_FORGE and self.torch_conda:
            rels = [self.c.torch(v, compat.CONDA_FORGE) for v in self.torch_lines]
            cuda11 = [r for r in rels if r is not None and any(c.startswith("11.") for c in r.cuda)]
            if len(cuda11) == len(rels) and (tk_lines is None or all(
                    any(line in r.cuda for r in cuda11) for line in tk_lines)):
                return  # conda-forge's own CUDA 11 packaging of torch 2.0-2.5
        rel = self.torch_release or min(self.torch_lines, key=line_key)
        self.add("EG109", f"`{tk.spec}` with torch {rel}: cudatoolkit is CUDA 11 packaging that this torch's builds "
                 "do not use, so the solver can pick a CPU build or a mismatched CUDA runtime",
                 f"drop cudatoolkit and use {self._conda_forge_cuda_pins(tk.version)}", tk.line,
                 package="cudatoolkit")

    def _build_guard(self, names: dict[str, Dep]) -> None:
        if names.keys() & {"pytorch-cuda", "cpuonly"}:
            return  # the legacy channel picks the variant through pytorch-cuda (CUDA) or cpuonly (CPU)
        signals = sorted(n for n in names
                         if n in {"cuda-version", "cudatoolkit", "cudnn", "nccl"} or n.startswith("cuda-"))
        if "nvidia" in self.channel_names:
            signals.append("the nvidia channel")
        signals += self.cuda_signals()
        if not signals:
            return
        # pytorch-gpu and pytorch-cpu force the build variant themselves: they are build guards
        guards = [d for d in self.torch_conda if d.name in ("pytorch-gpu", "pytorch-cpu")]
        for d in self.torch_conda:
            if d.name != "pytorch" or d.build:
                continue
            if d.platforms is not None and not any(p.startswith(("linux", "win")) for p in d.platforms):
                continue  # an "# [osx]" line: no CUDA there
            if any(g.platforms is None or (d.platforms is not None and set(d.platforms) <= set(g.platforms))
                   for g in guards):
                continue
            cv = names.get("cuda-version")
            major = ""
            if cv is not None:
                cl = release_lines(cv.version, "conda", CUDA_UNIVERSE)
                if cl and len({c.split(".")[0] for c in cl}) == 1:
                    major = next(iter(cl)).split(".")[0]
            ver = f"{self.torch_release}.*" if self.torch_release else "*"
            self.add("EG112", f"`{d.spec}` has no build guard, yet the file names CUDA ({', '.join(signals[:3])}): "
                     "whether the solver installs a CUDA or a CPU build then depends on the machine that locks",
                     f"write {self.spec_fix('pytorch', ver, f'cuda{major}*')} for a CUDA build (or "
                     f"{self.spec_fix('pytorch', ver, 'cpu*')} for a CPU one)", d.line, package="pytorch")
