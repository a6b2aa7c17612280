"""Rules on the Python and torch pins: Python pinned, supported and not legacy (EG101-EG104), torch
pinned to one known release line (EG105, EG106), a build string that makes a version exact (EG122).
:class:`TorchRules` is the mixin envfile.py joins into the linter."""

from __future__ import annotations

import re

from envguard.lint.constraints import PYTHON_UNIVERSE, TORCH_UNIVERSE, release_lines
from envguard.lint.linter import Linter
from envguard.lint.rules import TORCH_CONDA_NAMES, E, I, W
from envguard.versions import line_key, release


class TorchRules(Linter):
    def python_rules(self) -> None:
        pys = [d for d in self.conda if d.name == "python"]
        supported = self.c.supported_python
        if not pys and not (self.conda or self.pip):
            return  # an environment of nothing installs no Python to pin
        if not pys:
            self.add("EG101", "no python in dependencies: the solver picks the newest Python it finds",
                     f"add {self.dep_fix('python', self.c.default_python)} to dependencies", self._deps_line())
            return
        d = pys[0]
        lines = release_lines(d.version, "conda", PYTHON_UNIVERSE)
        if not lines or len(lines) != 1:
            self.add("EG101", f"python is not pinned to one release (`{d.spec}`)",
                     f"pin it: {self.pin('python', self.c.default_python)}", d.line, package="python")
            return
        py = next(iter(lines))
        if py not in supported and line_key(py) < line_key(supported[0]):
            self.add("EG102", f"Python {py} is not supported (envguard supports {', '.join(supported)})",
                     f"use {self.pin('python', self.c.default_python)}", d.line, E, package="python")
        elif py not in supported:
            # a newer Python is a valid choice (init offers it where the channel builds torch for it): say what
            # envguard's own data does not cover, as information, so that a pre-commit run on the file passes
            self.add("EG102", f"Python {py}: the file is valid; envguard's templates and compatibility data are "
                     f"written for Python {', '.join(supported)}, not {py}",
                     f"nothing to change; {self.pin('python', self.c.default_python)} is the line envguard's "
                     "data covers", d.line, I, package="python")
        legacy = self.c.python_legacy(py)
        if legacy:
            eol = legacy.get("end_of_life")
            note = legacy.get("note") or f"Python {py} is legacy"
            self.add("EG103", note if not eol or str(eol) in note else f"{note} (end of life {eol})",
                     f"move to {self.pin('python', self.c.default_python)}", d.line, W, package="python")
        rel = self._release()
        if rel and py not in rel.python:
            newest_for_py = [r.version for r in self.c.releases_for_python(py, self.route)]
            pys_ok = [p for p in supported if p in rel.python]
            fix_parts = []
            if pys_ok:
                fix_parts.append(self.pin("python", min(pys_ok, key=lambda p: abs(release(p)[1] - release(py)[1]))))
            if newest_for_py:
                fix_parts.append(f"torch {newest_for_py[-1]}")
            relation = (f"needs Python ≥ {rel.python[0]}" if line_key(py) < line_key(rel.python[0])
                        else f"supports Python ≤ {rel.python[-1]}")
            self.add("EG104", f"torch {rel.version} {relation}; Python {py} has no torch {rel.version} builds",
                     "use " + " or ".join(fix_parts) if fix_parts else "pick a torch release that supports it",
                     d.line, package="python")

    def torch_rules(self) -> None:
        has_pytorch = any(d.name == "pytorch" for d in self.torch_conda)
        for d in self.torch_conda + self.torch_pip:
            if d.name in ("pytorch-gpu", "pytorch-cpu") and has_pytorch:
                continue  # a variant metapackage beside pytorch: the version is pytorch's, judged there
            lines = release_lines(d.version, d.manager, TORCH_UNIVERSE)
            if lines is None or len(lines) != 1:
                pin = (self.pin(d.name, self.c.newest_torch) if d.manager == "conda"
                       else self.pin("torch", self.c.newest_torch, "pip"))
                self.add("EG105", f"{d.name} is not pinned to one release (`{d.spec}`)",
                         f"pin one release line, e.g. {pin}", d.line, package=d.name)
        rel = self.torch_release
        frozen = self.c.route(self.route).frozen_at
        if frozen and rel and line_key(rel) > line_key(frozen):
            return  # past a frozen channel's last release: EG111 says so, and where to go instead
        # the channel's records while init checks against them, else the table
        from envguard import channelfacts

        if rel and channelfacts.released(rel, self.route) is None and re.match(r"^\d+\.\d+$", rel):
            route = channelfacts.route(self.route) or self.c.route(self.route)
            known = route.released
            row = route.release(rel)
            d = (self.torch_conda + self.torch_pip)[0]
            if row is not None:
                what = (f"torch {rel} has no release evidence on {route.title} in envguard's data "
                        f"(status {row.status}: {row.source})")
            else:
                when = ("older than" if line_key(rel) < line_key(known[0].version) else
                        "newer than" if line_key(rel) > line_key(known[-1].version) else "missing from")
                what = (f"torch {rel} is {when} envguard's data for {route.title} "
                        f"({known[0].version}–{known[-1].version})")
            # the newest release that the file's own Python can run (2.15 has no Python 3.10 build)
            py = self._python_line()
            fits = [r.version for r in known if py is None or py in r.python] or [known[-1].version]
            self.add("EG106", f"{what}: its Python/CUDA/driver pairing is not checked",
                     f"use torch {fits[-1]}, or update envguard", d.line, package=d.name)

    def exactness_rules(self) -> None:
        for d in self.conda:
            # only where X.Y names a release series; exports pin real X.Y versions on purpose
            if d.name not in TORCH_CONDA_NAMES + ("python", "cuda-version"):
                continue
            if d.build and d.version and d.version.startswith("==") and re.search(
                    r"(?<![=<>!~])=\d+\.\d+=", d.spec.replace(" ", "")):
                written = d.version[2:]
                self.add("EG122", f"`{d.spec}` means exactly {written}.0: a build string makes the version exact",
                         f"write `{d.name}={written}.*={d.build}`", d.line, package=d.name)
