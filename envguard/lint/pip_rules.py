"""Rules on the pip: section: core packages from pip beside conda's (EG107), one package from both
managers (EG123), plain http:// and literal credentials in pip lines (EG114, EG115).
:class:`PipRules` is the mixin envfile.py joins into the linter."""

from __future__ import annotations

import re

from envguard.lint.constraints import TORCH_UNIVERSE, release_lines, version_probes
from envguard.lint.deps import Dep, overlap
from envguard.lint.linter import Linter
from envguard.lint.rules import TORCH_CONDA_NAMES, I, W
from envguard.redact import has_credentials


class PipRules(Linter):
    def pip_rules(self) -> None:
        """EG107: a core package from pip is an error where conda provides the torch stack or the same package
        (two owners, mismatched binaries), on a platform both lines apply to. A torch stack from pip on conda's
        Python alone is PyTorch's own recommended install since the pytorch channel ended: one info line names
        that layout."""
        core = self.pip_core()
        conda_by_key: dict[str, list[Dep]] = {}
        for c in self.conda:
            conda_by_key.setdefault(self.dist_key(c), []).append(c)
        conda_stack = [d for d in self.conda if self.dist_key(d) in ("torch", "torchvision", "torchaudio")
                       or d.name in TORCH_CONDA_NAMES + ("libtorch",)]
        layout: list[Dep] = []
        for d in self.pip:
            key = self.dist_key(d)
            via = f" (through {d.via})" if d.via else ""
            both = [c for c in conda_by_key.get(key, []) if overlap(c.platforms, d.platforms)]
            stack = [c for c in conda_stack if overlap(c.platforms, d.platforms)]
            if key in core and (stack or both):
                conda_name = "pytorch" if key == "torch" else key
                pin = ""
                probes = TORCH_UNIVERSE if key == "torch" else version_probes((0, 1, 2), 40)
                lines = release_lines(d.version, "pip", probes)
                if lines and len(lines) == 1:
                    pin = f"={next(iter(lines))}.*"
                beside = (f"conda's `{stack[0].spec}`" if stack and not both else f"conda's {conda_name}")
                self.add("EG107", f"{key} is installed by pip (`{d.spec}`{via}) beside {beside}: two managers for "
                         "one torch stack (two owners, mismatched binaries)",
                         f"move it to the conda dependencies as `{conda_name}{pin}` and delete the pip line, or "
                         "move the whole torch stack to pip", d.line, package=key)
            elif key in core:
                layout.append(d)
            elif both:
                self.add("EG123", f"{d.name} is requested from both conda and pip (`{d.spec}`)",
                         "keep one: delete the pip line or the conda one", d.line, package=key)
        if layout:
            names = ", ".join(self.dist_key(d) + (f" through {d.via}" if d.via else "") for d in layout)
            from envguard.mixing import conda_cuda_library

            # pytorch-cuda beside a pip torch is EG108's to say
            cuda_libs = [d.name for d in self.conda if conda_cuda_library(d.name) and d.name != "pytorch-cuda"]
            if cuda_libs:
                self.add("EG107", f"the torch stack comes from pip ({names}) but conda installs CUDA libraries too "
                         f"({', '.join(cuda_libs[:3])}): the wheels bring their own CUDA runtime, so the environment "
                         "holds two, and what loads first decides which one a library gets",
                         f"drop {', '.join(cuda_libs[:3])} from the conda dependencies (the pip-only torch stack needs "
                         "none), or install the whole torch stack from conda-forge", layout[0].line, W,
                         package=self.dist_key(layout[0]))
            elif not (self.torch_pip and any(d.name == "pytorch-cuda" for d in self.conda)):
                self.add("EG107", f"the torch stack comes from pip ({names}) on conda's Python: a supported layout "
                         "(PyTorch's own install since the pytorch channel ended) as long as conda installs no "
                         "torch, numpy or CUDA libraries of its own", "", layout[0].line, I,
                         package=self.dist_key(layout[0]))

    @staticmethod
    def dist_key(d: Dep) -> str:
        from envguard.model import canonical_name

        return canonical_name(d.name, "conda" if d.manager == "conda" else "pip")

    def url_rules(self) -> None:
        """http:// and credentials in pip lines (spec.validate covers channel credentials)."""
        flagged = {f.line for f in self.findings if f.code == "EG115"}
        for i, dep in enumerate(self.data.get("dependencies") or []):
            if not (isinstance(dep, dict) and isinstance(dep.get("pip"), list)):
                continue
            for j, item in enumerate(dep["pip"]):
                if not isinstance(item, str):
                    continue
                line = self.pos.line("dependencies", i, "pip", j)
                for url in re.findall(r"[a-zA-Z][a-zA-Z0-9+.-]*://\S+", item):
                    if url.lower().startswith(("http://", "git+http://")):
                        self.add("EG114", f"pip entry `{item.strip()}` uses plain HTTP", "use https://", line)
                    if has_credentials(url) and line not in flagged:
                        flagged.add(line)
                        self.add("EG115", f"pip entry `{item.strip()}` carries a literal credential",
                                 "use ${VAR} placeholders, e.g. https://${USER}:${TOKEN}@host/simple", line)
