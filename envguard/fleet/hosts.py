"""Host names as Slurm writes them: ``gpu[001-017,020]``. Pure."""

from __future__ import annotations

import re
from collections.abc import Iterable

_NUM = re.compile(r"^(.*?)(\d+)(\D*)$")


def compress(names: Iterable[str]) -> str:
    """``gpu001 … gpu017, gpu020, login`` → ``gpu[001-017,020],login``.

    The last number in a name is the one ranged over. Zero-padded numbers keep their width
    (``gpu[001-100]``); unpadded ones range freely (``node[1-2,10]``).
    """
    unique = set(names)
    series: dict[tuple[str, str], list[str]] = {}
    plain: list[str] = []
    for name in unique:
        m = _NUM.match(name)
        if m:
            series.setdefault((m.group(1), m.group(3)), []).append(m.group(2))
        else:
            plain.append(name)
    parts: list[tuple[str, int, str]] = [(n, -1, n) for n in plain]
    for (head, tail), digits in series.items():
        padded = {len(d) for d in digits if d.startswith("0") and len(d) > 1}
        by_width: dict[int, set[int]] = {}
        for d in digits:
            width = len(d) if len(d) in padded else 0
            by_width.setdefault(width, set()).add(int(d))
        for width, numbers in by_width.items():
            ordered = sorted(numbers)
            text = _ranges(ordered, width)
            shown = f"{head}{text}{tail}" if len(ordered) == 1 else f"{head}[{text}]{tail}"
            parts.append((head + tail, ordered[0], shown))
    return ",".join(shown for _, _, shown in sorted(parts))


def _ranges(numbers: list[int], width: int) -> str:
    out: list[str] = []
    start = prev = numbers[0]
    for n in numbers[1:] + [None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        a, b = str(start).zfill(width), str(prev).zfill(width)
        out.append(a if start == prev else f"{a}-{b}")
        if n is not None:
            start = prev = n
    return ",".join(out)
