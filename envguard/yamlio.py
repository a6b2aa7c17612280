"""YAML loading with positions, for one-line errors that point at file:line:col.

Uses the C loader when PyYAML has it (large locks parse several times faster).
``load_with_lines`` additionally records where each mapping key and sequence
item starts, so that lint and spec validation can name exact lines.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envguard.errors import UserError

if TYPE_CHECKING:
    import yaml

# PyYAML is imported on first use (it costs ~13 ms): `envguard create` reads conda-lock's own layout
# without it (envguard.lock.lockscan).


def _fast_loader() -> type:
    import yaml

    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # SafeLoader: PyYAML built without libyaml


def __getattr__(name: str) -> Any:
    if name == "FastLoader":  # the C loader when PyYAML has it
        return _fast_loader()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _raise_yaml_error(path: str | Path, e: yaml.YAMLError) -> None:
    mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
    problem = getattr(e, "problem", None) or str(e).splitlines()[0]
    raise UserError(
        f"malformed YAML: {problem}",
        file=str(path),
        line=(mark.line + 1) if mark else None,
        column=(mark.column + 1) if mark else None,
        fix="correct the YAML syntax at that position",
    ) from None


def read_text(path: str | Path) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError("file not found", file=str(path), fix="check the path") from None
    except IsADirectoryError:
        raise UserError("is a directory, expected a file", file=str(path), fix="pass the file inside it") from None
    except UnicodeDecodeError:
        raise UserError("not UTF-8 text", file=str(path), fix="save the file as UTF-8") from None
    except PermissionError:
        raise UserError("permission denied", file=str(path), fix="make the file readable") from None


def load_fast(path: str | Path, text: str | None = None) -> Any:
    """Parse YAML quickly (C loader); errors become a :class:`UserError` with line:col."""
    import yaml

    if text is None:
        text = read_text(path)
    try:
        return yaml.load(text, Loader=_fast_loader())  # noqa: S506 - a safe loader
    except yaml.YAMLError as e:
        _raise_yaml_error(path, e)


@dataclass
class Positions:
    """1-based line numbers: ``keys[("dependencies", 3)]`` is the 4th dependency's line."""

    lines: dict[tuple[Any, ...], int] = field(default_factory=dict)

    def line(self, *path: Any) -> int | None:
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return None


def load_with_lines(path: str | Path, text: str | None = None) -> tuple[Any, Positions]:
    """Parse YAML and record the line of every mapping key and sequence item."""
    import yaml

    if text is None:
        text = read_text(path)
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.load(text, Loader=_fast_loader())  # noqa: S506
    except yaml.YAMLError as e:
        _raise_yaml_error(path, e)
    pos = Positions()
    seen: set[int] = set()  # an alias shares its anchor's node: walk each once (`a: &x [*x]` recursed forever)

    def walk(n: yaml.Node | None, prefix: tuple[Any, ...]) -> None:
        if n is None or id(n) in seen:
            return
        seen.add(id(n))
        if isinstance(n, yaml.MappingNode):
            for k, v in n.value:
                key = prefix + (k.value,)
                pos.lines[key] = k.start_mark.line + 1
                walk(v, key)
        elif isinstance(n, yaml.SequenceNode):
            for i, item in enumerate(n.value):
                key = prefix + (i,)
                pos.lines[key] = item.start_mark.line + 1
                walk(item, key)

    walk(node, ())
    return data, pos
