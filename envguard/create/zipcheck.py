"""Whether a ``.conda`` zip's central directory accounts for every byte of the file.

A zip can be read two ways: from its central directory at the end (Python's zipfile, py-rattler's archive
reader, envguard's pre-link scan) or front to back through its local file headers (a streaming extractor, as
rattler's installer reads a ``.conda``). The two agree only when the members the directory lists lie back to
back from byte 0 to the directory. Local headers placed in a gap (before the directory, between two listed
members) are invisible to the first reading and extracted by the second: a package that looks clean to the scan
installs whatever those hidden members hold. So a ``.conda`` is accepted only when, read from its directory:

* the first member starts at byte 0, each next one where the previous one's data (and data descriptor) ends,
  and the last one ends where the directory begins: no gap, no overlap, no member listed twice at one place;
* each local header agrees with its directory entry on the name (another name at that place is another member);
* nothing follows the directory but the (zip64) end records and the end record's own comment.

Only the directory and the local headers are read, never member data: a few small reads per member. The rules
follow the ZIP application note (PKWARE APPNOTE 6.3.x, sections 4.3.6-4.3.16 and 4.5.3).
"""

from __future__ import annotations

import os
import struct
from typing import BinaryIO

_EOCD = b"PK\x05\x06"
_ZIP64_LOCATOR = b"PK\x06\x07"
_ZIP64_EOCD = b"PK\x06\x06"
_CENTRAL = b"PK\x01\x02"
_LOCAL = b"PK\x03\x04"
_DESCRIPTOR = b"PK\x07\x08"
_EOCD_SIZE = 22
_MAX_COMMENT = 0xFFFF
_MAX_MEMBERS = 64  # a .conda has three members; a directory of thousands is refused before it is walked


class ZipLayoutError(ValueError):
    """The file is not a zip whose directory accounts for every byte; the message says where."""


def _read_at(fh: BinaryIO, offset: int, size: int) -> bytes:
    fh.seek(offset)
    data = fh.read(size)
    if len(data) != size:
        raise ZipLayoutError(f"is cut short at byte {offset + len(data)}")
    return data


def _end_record(fh: BinaryIO, size: int) -> tuple[int, int, int, int]:
    """(directory offset, directory size, member count, where the end records begin)."""
    tail_start = max(0, size - _EOCD_SIZE - _MAX_COMMENT)
    tail = _read_at(fh, tail_start, size - tail_start)
    at = tail.rfind(_EOCD)
    while at >= 0:
        comment_len = struct.unpack_from("<H", tail, at + 20)[0] if at + _EOCD_SIZE <= len(tail) else -1
        if at + _EOCD_SIZE + comment_len == len(tail):
            break
        at = tail.rfind(_EOCD, 0, at)
    if at < 0:
        raise ZipLayoutError("has no end-of-central-directory record that ends the file")
    _sig, disk, cd_disk, _on_disk, count, cd_size, cd_offset, _clen = struct.unpack_from("<4sHHHHIIH", tail, at)
    eocd = tail_start + at
    if disk or cd_disk:
        raise ZipLayoutError("is a multi-disk zip")
    ends_at = eocd
    if 0xFFFFFFFF in (cd_size, cd_offset) or count == 0xFFFF:
        if eocd < 20 or _read_at(fh, eocd - 20, 4) != _ZIP64_LOCATOR:
            raise ZipLayoutError("has zip64 fields but no zip64 locator")
        z64_offset = struct.unpack("<Q", _read_at(fh, eocd - 20 + 8, 8))[0]
        record = _read_at(fh, z64_offset, 56)
        if record[:4] != _ZIP64_EOCD:
            raise ZipLayoutError("has a zip64 locator that points at no zip64 end record")
        record_size = struct.unpack_from("<Q", record, 4)[0]
        if z64_offset + 12 + record_size != eocd - 20:
            raise ZipLayoutError("has bytes between its zip64 end record and its end record")
        count, cd_size, cd_offset = struct.unpack_from("<QQQ", record, 32)
        ends_at = z64_offset
    if cd_offset + cd_size != ends_at:
        raise ZipLayoutError(f"has {ends_at - cd_offset - cd_size} bytes between its central directory and "
                             "its end record" if cd_offset + cd_size < ends_at else
                             "has a central directory that overlaps its end record")
    return cd_offset, cd_size, count, ends_at


def _zip64_values(extra: bytes, wanted: list[bool]) -> list[int | None]:
    """The zip64 extended-information field's values, in the order the note gives, for the fields that are
    0xFFFFFFFF in the fixed header (``wanted``)."""
    pos = 0
    while pos + 4 <= len(extra):
        tag, length = struct.unpack_from("<HH", extra, pos)
        if tag == 0x0001:
            body, values, at = extra[pos + 4:pos + 4 + length], [], 0
            for want in wanted:
                if want:
                    if at + 8 > len(body):
                        raise ZipLayoutError("has a zip64 field shorter than its header says")
                    values.append(struct.unpack_from("<Q", body, at)[0])
                    at += 8
                else:
                    values.append(None)
            return values
        pos += 4 + length
    if any(wanted):
        raise ZipLayoutError("has a member with zip64 sizes but no zip64 field")
    return [None] * len(wanted)


def _directory(fh: BinaryIO, cd_offset: int, cd_size: int, count: int) -> list[tuple[int, int, int, bytes]]:
    """(local header offset, compressed size, flags, name) of every listed member."""
    if count > _MAX_MEMBERS:
        raise ZipLayoutError(f"lists {count} members")
    data = _read_at(fh, cd_offset, cd_size)
    members, pos = [], 0
    for _ in range(count):
        if data[pos:pos + 4] != _CENTRAL or pos + 46 > len(data):
            raise ZipLayoutError("has a central directory that does not hold the members its end record counts")
        flags, = struct.unpack_from("<H", data, pos + 8)
        csize, usize, name_len, extra_len, comment_len = struct.unpack_from("<IIHHH", data, pos + 20)
        offset, = struct.unpack_from("<I", data, pos + 42)
        name = data[pos + 46:pos + 46 + name_len]
        extra = data[pos + 46 + name_len:pos + 46 + name_len + extra_len]
        big = _zip64_values(extra, [usize == 0xFFFFFFFF, csize == 0xFFFFFFFF, offset == 0xFFFFFFFF])
        csize = big[1] if big[1] is not None else csize
        offset = big[2] if big[2] is not None else offset
        members.append((offset, csize, flags, name))
        pos += 46 + name_len + extra_len + comment_len
    if pos != len(data):
        raise ZipLayoutError(f"has {len(data) - pos} bytes in its central directory that belong to no member")
    return members


def _descriptor_size(fh: BinaryIO, at: int, zip64: bool) -> int:
    """The size of the data descriptor at ``at`` (its signature is optional, APPNOTE 4.3.9.3)."""
    signed = _read_at(fh, at, 4) == _DESCRIPTOR
    return (4 if signed else 0) + 4 + (16 if zip64 else 8)


def check_layout(fh: BinaryIO) -> None:
    """Raise ZipLayoutError unless the directory accounts for every byte of the zip open in ``fh``."""
    size = fh.seek(0, os.SEEK_END)
    cd_offset, cd_size, count, _ends_at = _end_record(fh, size)
    expected_next = 0
    for offset, csize, flags, name in sorted(_directory(fh, cd_offset, cd_size, count)):
        shown = name.decode("utf-8", "replace")[:80]
        if offset != expected_next:
            gap = offset - expected_next
            raise ZipLayoutError(f"has {gap} bytes before its member {shown!r} that its directory does not list"
                                 if gap > 0 else f"has members that overlap at {shown!r}")
        header = _read_at(fh, offset, 30)
        if header[:4] != _LOCAL:
            raise ZipLayoutError(f"has no local header where its directory places {shown!r}")
        name_len, extra_len = struct.unpack_from("<HH", header, 26)
        if _read_at(fh, offset + 30, name_len) != name:
            raise ZipLayoutError(f"has another member's header where its directory places {shown!r}")
        end = offset + 30 + name_len + extra_len + csize
        if flags & 0x08:
            end += _descriptor_size(fh, end, zip64=csize >= 0xFFFFFFFF)
        expected_next = end
    if expected_next != cd_offset:
        gap = cd_offset - expected_next
        raise ZipLayoutError(f"has {gap} bytes after its last listed member that its directory does not list"
                             if gap > 0 else "has a member that overlaps its central directory")
