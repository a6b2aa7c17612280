"""scripts/wheel_arch.py: the GPU architectures compiled into a torch wheel, read from its libraries' .nv_fatbin
sections and get_arch_list() string (how compat.yaml's PyPI wheel rows were read). A wheel built here with a
small ELF library holding two fatbinaries (padding between them, a cubin and a PTX entry) stands in for the
real ones (~0.9 GB each, not fetched by tests)."""

from __future__ import annotations

import hashlib
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "wheel_arch.py"


def _fatbin(entries: list[tuple[int, int]]) -> bytes:
    body = b""
    for kind, sm in entries:
        payload = b"\x7fELF" + bytes(12) if kind == 2 else b".version 8.0\n.target sm_%d\n" % sm
        header = struct.pack("<HHIQ", kind, 0x0101, 72, len(payload)) + bytes(12)
        header += struct.pack("<I", sm)
        body += header.ljust(72, b"\0") + payload
    return struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(body)) + body


def _elf(sections: dict[str, bytes]) -> bytes:
    """An ELF64 little-endian file with these sections (and .shstrtab), nothing else."""
    names = [".shstrtab", *sections]
    strtab = b"\0" + b"".join(n.encode() + b"\0" for n in names)
    data = [strtab, *sections.values()]
    out = bytearray(64)
    offsets = []
    for blob in data:
        out += bytes(-len(out) % 8)
        offsets.append(len(out))
        out += blob
    out += bytes(-len(out) % 8)
    shoff = len(out)
    out += bytes(64)  # the null section
    pos = 1
    for name, off, blob in zip(names, offsets, data, strict=True):
        out += struct.pack("<IIQQQQIIQQ", pos, 1, 0, 0, off, len(blob), 0, 0, 8, 0)
        pos += len(name) + 1
    out[:16] = b"\x7fELF\x02\x01\x01" + bytes(9)
    struct.pack_into("<Q", out, 0x28, shoff)
    struct.pack_into("<HHH", out, 0x3A, 64, len(names) + 1, 1)
    return bytes(out)


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60)


def test_reads_cubins_ptx_and_the_arch_list_of_every_library(tmp_path: Path) -> None:
    fatbins = _fatbin([(2, 80), (2, 90)]) + bytes(8) + _fatbin([(2, 80), (2, 90), (1, 90)])
    wheel = tmp_path / "torch-9.9.0-cp311-cp311-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("torch/version.py", "__version__ = '9.9.0+cu129'\ncuda: Optional[str] = '12.9'\n")
        z.writestr("torch/lib/libtorch_cuda.so", _elf({".text": bytes(32), ".nv_fatbin": fatbins}))
        z.writestr("torch/lib/libtorch_python.so", _elf({".rodata": b"x\0sm_80 sm_90 compute_90\0y"}))
        z.writestr("torch/lib/libc10.so", _elf({".text": bytes(16)}))  # no CUDA code: not listed
    proc = _run(str(wheel))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        f"{wheel.name} sha256 {hashlib.sha256(wheel.read_bytes()).hexdigest()}",
        "__version__ = '9.9.0+cu129'",
        "cuda: Optional[str] = '12.9'",
        "torch/lib/libtorch_cuda.so:",
        "  cubin: sm_80 x2 sm_90 x2",
        "  ptx: sm_90 x1",
        "torch/lib/libtorch_python.so:",
        "  arch list: sm_80 sm_90 compute_90",
    ]


def test_a_file_that_is_no_torch_wheel_is_refused(tmp_path: Path) -> None:
    bogus = tmp_path / "torch-1.0-py3-none-any.whl"
    bogus.write_bytes(b"not a zip")
    proc = _run(str(bogus))
    assert proc.returncode == 2 and "cannot read it as a torch wheel" in proc.stderr and proc.stdout == ""
    empty = tmp_path / "other-1.0-py3-none-any.whl"
    with zipfile.ZipFile(empty, "w") as z:
        z.writestr("other/__init__.py", "")
    proc = _run(str(empty))
    assert proc.returncode == 2 and "no torch/lib" in proc.stderr
