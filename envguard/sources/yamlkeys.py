"""The YAML loader every reader parses with: PyYAML's safe C loader, plus what the owning tools see.

PyYAML keeps the last of two equal keys in one mapping without a word; serde_yaml (which rattler, and so
pixi, reads pixi.lock with) refuses the file, and ruamel (conda's reader) does too. The loader records
every repeated key with its line, and the parsed document (when it is a mapping) carries them as
``duplicate_keys``, so that a reader can give its tool's verdict instead of silently reading half.
:func:`load` parses; :func:`duplicate_keys` reads them off a parsed document.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any


class Document(dict[str, Any]):
    """A top-level mapping that knows the keys its YAML repeated: ((key path, line), ...)."""

    duplicate_keys: tuple[tuple[str, int], ...] = ()


def duplicate_keys(data: Any) -> tuple[tuple[str, int], ...]:
    return getattr(data, "duplicate_keys", ())


@lru_cache(maxsize=1)
def loader() -> type:
    """A subclass of yamlio's fast loader that records repeated keys (built on first use: PyYAML is
    imported lazily)."""
    import yaml

    from envguard.yamlio import FastLoader

    class SourceLoader(FastLoader):
        def __init__(self, stream: Any) -> None:
            super().__init__(stream)
            self.repeated: list[tuple[str, int]] = []

        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            if isinstance(node, yaml.MappingNode) and len(node.value) > 1:
                keys = [k.value for k, _ in node.value if isinstance(k, yaml.ScalarNode)]
                if len(set(keys)) != len(keys):  # the cheap test first: most mappings repeat nothing
                    seen: set[str] = set()
                    for key, _ in node.value:
                        if isinstance(key, yaml.ScalarNode):
                            if key.value in seen:
                                self.repeated.append((str(key.value), key.start_mark.line + 1))
                            seen.add(key.value)
            return super().construct_mapping(node, deep=deep)

        def get_single_data(self) -> Any:
            data = super().get_single_data()
            if self.repeated and isinstance(data, dict):
                data = Document(data)
                data.duplicate_keys = tuple(self.repeated)
            return data

    return SourceLoader


def load(path: Any, text: str) -> Any:
    from envguard.yamlio import load_fast

    return load_fast(path, text, loader=loader())
