#!/usr/bin/env python3
"""Read the GPU architectures compiled into a torch wheel, without a GPU and without importing it.

A maintainer's tool for the curated `arch` rows of envguard/data/compat.yaml (docs/compat-data.md): given a
downloaded wheel (e.g. ``pip download torch==2.6.0 --no-deps --only-binary=:all: --python-version 3.11
--platform manylinux1_x86_64 -d /tmp/w``), it prints the wheel's sha256, its CUDA release (torch/version.py) and,
per shared library in torch/lib/ that holds CUDA code, two independent readings:

* ``arch list``: the compile-time string torch.cuda.get_arch_list() returns ("sm_50 ... sm_90", "compute_XY"
  for PTX), found in the library's bytes (libtorch_python.so holds it);
* ``cubin`` / ``ptx``: the entries of the ``.nv_fatbin`` section, every fatbinary walked to the section's end
  (each entry's header names its kind, 1 PTX or 2 ELF cubin, and its sm).

    python scripts/wheel_arch.py /tmp/w/torch-2.6.0-cp311-cp311-manylinux1_x86_64.whl

Exit status: 0 when read, 2 when the file is not a wheel holding torch/lib. The standard library only.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import mmap
import re
import struct
import sys
import tempfile
import zipfile
from pathlib import Path

FATBIN_MAGIC = 0xBA55ED50
KINDS = {1: "ptx", 2: "cubin"}
ARCH_STRING = re.compile(rb"(?:sm|compute)_\d+[a-z]?(?: (?:sm|compute)_\d+[a-z]?)+")


def section(data: bytes | mmap.mmap, name: str) -> tuple[int, int] | None:
    """(offset, size) of the ELF64 little-endian section ``name``, or None."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return None
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    strtab_off, = struct.unpack_from("<Q", data, shoff + shstrndx * shentsize + 0x18)
    for i in range(shnum):
        base = shoff + i * shentsize
        name_off, = struct.unpack_from("<I", data, base)
        end = data.find(b"\0", strtab_off + name_off)
        if data[strtab_off + name_off:end].decode() == name:
            off, size = struct.unpack_from("<QQ", data, base + 0x18)
            return off, size
    return None


def fatbin_entries(data: bytes | mmap.mmap, off: int, size: int) -> collections.Counter[tuple[str, int]]:
    """(kind, sm) -> count over every fatbinary in data[off:off+size]; raises ValueError on a short walk."""
    counts: collections.Counter[tuple[str, int]] = collections.Counter()
    pos, end, walked = off, off + size, 0
    while pos + 16 <= end:
        magic, _version, header, body = struct.unpack_from("<IHHQ", data, pos)
        if magic != FATBIN_MAGIC:  # fatbinaries are 8-aligned: padding between them
            pos += 8
            continue
        entry, stop = pos + header, pos + header + body
        while entry < stop:
            kind, _ever, eheader, payload = struct.unpack_from("<HHIQ", data, entry)
            sm, = struct.unpack_from("<I", data, entry + 28)
            counts[(KINDS.get(kind, f"kind{kind}"), sm)] += 1
            entry += eheader + payload
        walked += header + body
        pos = stop
    if walked > size:
        raise ValueError(f"fatbinary entries run past the section ({walked} > {size} bytes)")
    return counts


def read_wheel(path: Path) -> list[str]:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 24):
            digest.update(chunk)
    lines = [f"{path.name} sha256 {digest.hexdigest()}"]
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
        if "torch/version.py" in names:
            version = z.read("torch/version.py").decode()
            lines += [ln for ln in version.splitlines() if ln.startswith(("__version__", "cuda"))]
        libs = sorted(n for n in names if n.startswith("torch/lib/") and ".so" in n)
        if not libs:
            raise ValueError("no torch/lib/*.so in it")
        with tempfile.TemporaryDirectory() as tmp:
            for name in libs:
                local = Path(z.extract(name, tmp))
                with local.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
                    found = sorted({m.decode() for m in ARCH_STRING.findall(data)})
                    sec = section(data, ".nv_fatbin")
                    counts = fatbin_entries(data, *sec) if sec else collections.Counter()
                local.unlink()
                if not found and not counts:
                    continue
                lines.append(f"{name}:")
                lines += [f"  arch list: {s}" for s in found]
                for kind in sorted({k for k, _ in counts}):
                    sms = sorted(sm for k, sm in counts if k == kind)
                    lines.append(f"  {kind}: " + " ".join(f"sm_{sm} x{counts[(kind, sm)]}" for sm in sms))
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("wheels", nargs="+", type=Path)
    args = ap.parse_args(argv)
    for wheel in args.wheels:
        try:
            print("\n".join(read_wheel(wheel)))
        except (OSError, ValueError, zipfile.BadZipFile, struct.error) as exc:
            print(f"{wheel}: cannot read it as a torch wheel: {exc}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
