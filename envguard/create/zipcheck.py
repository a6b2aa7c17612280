"""Whether a ``.conda`` zip's central directory accounts for every byte of the file, and what it declares.

A zip can be read two ways: from its central directory at the end (Python's zipfile, py-rattler's archive
reader, envguard's pre-link scan) or front to back through its local file headers (a streaming extractor, as
rattler's installer reads a ``.conda``). The two agree only when the members the directory lists lie back to
back from byte 0 to the directory and each local header says what its directory entry says. Local headers
placed in a gap (before the directory, between two listed members) are invisible to the first reading and
extracted by the second: a package that looks clean to the scan installs whatever those hidden members hold.
So a ``.conda`` is accepted only when, read from its directory:

* the first member starts at byte 0, each next one where the previous one's data (and data descriptor) ends,
  and the last one ends where the directory begins: no gap, no overlap, no member listed twice at one place;
* no name is listed twice (two ``pkg-*.tar.zst``: each reader could take another one);
* each local header agrees with its directory entry on the name, the flags that change how it is read, the
  compression method, the CRC and both sizes (a data descriptor, where the flags announce one, on the CRC and
  the sizes): a streaming reader takes the sizes from the local header, so other sizes there are other bytes;
  a stored member whose sizes come only after its data is refused (a streaming reader would have to search
  for the descriptor's signature in the data, and a member's data can hold that signature);
* nothing follows the directory but the (zip64) end records and the end record's own comment, and that
  comment holds no second end record (which of two a reader takes is not guessed).

Only the directory, the local headers and the first bytes of each member's data are read, never member data
beyond them: a few small reads per member. The rules follow the ZIP application note (PKWARE APPNOTE 6.3.x,
sections 4.3.6-4.3.16, 4.4.4 and 4.5.3).

**Bounded** (:func:`check_layout`'s ``budget``): what the members declare they inflate to, before anything is
inflated: the directory's uncompressed size of each member and, for a stored ``*.tar.zst`` member, the content
size its zstd frame header declares where the frame has one (RFC 8878 section 3.1.1.1.4). More than the budget
in all (ENVGUARD_MAX_EXTRACTED_BYTES) is refused (:class:`ZipBudgetError`): a small archive that would inflate
to terabytes never reaches an extractor. A frame without a declared size is bounded later, at the tar headers
(envguard.create.archive.EntryLedger).
"""

from __future__ import annotations

import os
import struct
from typing import BinaryIO, NamedTuple

_EOCD = b"PK\x05\x06"
_ZIP64_LOCATOR = b"PK\x06\x07"
_ZIP64_EOCD = b"PK\x06\x06"
_CENTRAL = b"PK\x01\x02"
_LOCAL = b"PK\x03\x04"
_DESCRIPTOR = b"PK\x07\x08"
_EOCD_SIZE = 22
_MAX_COMMENT = 0xFFFF
_MAX_MEMBERS = 64  # a .conda has three members; a directory of thousands is refused before it is walked
_ZSTD_MAGIC = 0xFD2FB528
_ZSTD_HEADER_MAX = 18  # magic 4 + descriptor 1 + window 1 + dictionary id 4 + content size 8
# flags that change how a member is read: encrypted (bit 0), data descriptor (bit 3), patched data (bit 5),
# strong encryption (bit 6), UTF-8 name (bit 11); a reader taking them from the local header reads another member
_READ_FLAGS = 0x01 | 0x08 | 0x20 | 0x40 | 0x800


class ZipLayoutError(ValueError):
    """The file is not a zip whose directory accounts for every byte; the message says where."""


class ZipBudgetError(ZipLayoutError):
    """The members declare that they inflate to more than the budget; the message says which and how much."""


class _Member(NamedTuple):
    offset: int  # of its local header
    csize: int
    usize: int
    crc: int
    method: int
    flags: int
    name: bytes
    zip64: bool  # its directory entry carries a zip64 size

    @property
    def shown(self) -> str:
        return self.name.decode("utf-8", "replace")[:80]


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
        raise ZipLayoutError("has no end record (end of central directory) that ends the file")
    comment = tail[at + _EOCD_SIZE:]
    if _EOCD in comment or _ZIP64_LOCATOR in comment:  # a reader scanning from the end could take that one
        raise ZipLayoutError("has a second end record inside its archive comment")
    _sig, disk, cd_disk, on_disk, count, cd_size, cd_offset, _clen = struct.unpack_from("<4sHHHHIIH", tail, at)
    eocd = tail_start + at
    if disk or cd_disk or on_disk != count:
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


def _directory(fh: BinaryIO, cd_offset: int, cd_size: int, count: int) -> list[_Member]:
    """Every listed member, as its directory entry describes it."""
    if count > _MAX_MEMBERS:
        raise ZipLayoutError(f"lists {count} members")
    data = _read_at(fh, cd_offset, cd_size)
    members, pos = [], 0
    for _ in range(count):
        if data[pos:pos + 4] != _CENTRAL or pos + 46 > len(data):
            raise ZipLayoutError("has a central directory that does not hold the members its end record counts")
        flags, method = struct.unpack_from("<HH", data, pos + 8)
        crc, csize, usize, name_len, extra_len, comment_len = struct.unpack_from("<IIIHHH", data, pos + 16)
        offset, = struct.unpack_from("<I", data, pos + 42)
        name = data[pos + 46:pos + 46 + name_len]
        extra = data[pos + 46 + name_len:pos + 46 + name_len + extra_len]
        big = _zip64_values(extra, [usize == 0xFFFFFFFF, csize == 0xFFFFFFFF, offset == 0xFFFFFFFF])
        members.append(_Member(big[2] if big[2] is not None else offset, big[1] if big[1] is not None else csize,
                               big[0] if big[0] is not None else usize, crc, method, flags, name,
                               big[0] is not None or big[1] is not None))
        pos += 46 + name_len + extra_len + comment_len
    if pos != len(data):
        raise ZipLayoutError(f"has {len(data) - pos} bytes in its central directory that belong to no member")
    return members


def _local_disagreement(fh: BinaryIO, member: _Member, end: int) -> tuple[str | None, int]:
    """(what the local header, or the data descriptor, says otherwise than the directory entry, or None;
    where the member's data and descriptor end). ``end``: where its data ends."""
    header = _read_at(fh, member.offset, 30)
    _sig, _version, flags, method, _time, _date, crc, csize, usize, name_len, extra_len = struct.unpack(
        "<4sHHHHHIIIHH", header)
    if (flags ^ member.flags) & _READ_FLAGS:
        return f"other flags ({flags:#06x}, {member.flags:#06x} in its directory)", end
    if method != member.method:
        return f"another compression method ({method}, {member.method} in its directory)", end
    if member.flags & 0x08 and member.method == 0:  # stored: only a search for the descriptor finds its end
        return "its sizes only after its stored data (a data descriptor)", end
    if member.flags & 0x08:  # the sizes follow the data (APPNOTE 4.3.9); the local header's are zero
        signed = _read_at(fh, end, 4) == _DESCRIPTOR
        width = 8 if member.zip64 else 4
        body = _read_at(fh, end + 4 * signed, 4 + 2 * width)
        crc, csize, usize = struct.unpack("<I" + ("QQ" if member.zip64 else "II"), body)
        end += 4 * signed + len(body)
    elif 0xFFFFFFFF in (csize, usize):  # both sizes in the local zip64 field, uncompressed first (4.5.3)
        extra = _read_at(fh, member.offset + 30 + name_len, extra_len)
        usize_64, csize_64 = _zip64_values(extra, [True, True])
        usize = usize_64 if usize == 0xFFFFFFFF and usize_64 is not None else usize
        csize = csize_64 if csize == 0xFFFFFFFF and csize_64 is not None else csize
    if crc != member.crc:
        return f"another CRC ({crc:#010x}, {member.crc:#010x} in its directory)", end
    if csize != member.csize or usize != member.usize:
        return (f"other sizes ({csize} and {usize} bytes, {member.csize} and {member.usize} in its directory)",
                end)
    return None, end


def _frame_content_size(head: bytes) -> int | None:
    """The content size a zstd frame header declares (RFC 8878 3.1.1.1), None where it declares none or
    ``head`` starts no zstd frame (a skippable frame first, another format: bounded at the tar headers)."""
    if len(head) < 6 or struct.unpack_from("<I", head)[0] != _ZSTD_MAGIC:
        return None
    descriptor = head[4]
    single_segment = descriptor >> 5 & 1
    at = 5 + (0 if single_segment else 1) + (0, 1, 2, 4)[descriptor & 3]
    width = (single_segment, 2, 4, 8)[descriptor >> 6]
    if not width or at + width > len(head):
        return None
    return int.from_bytes(head[at:at + width], "little") + (256 if width == 2 else 0)


def _declared_content(fh: BinaryIO, at: int, size: int) -> int:
    """The content size declared by the first zstd frame of the ``size`` bytes at ``at``, past any skippable
    frames before it (RFC 8878 3.1.2: they hold no content; a bomb could put one first to hide the size); 0
    where none is declared."""
    end = at + size
    for _ in range(16):
        head = _read_at(fh, at, min(_ZSTD_HEADER_MAX, end - at))
        if len(head) >= 8 and struct.unpack_from("<I", head)[0] & 0xFFFFFFF0 == 0x184D2A50:
            at += 8 + struct.unpack_from("<I", head, 4)[0]
            if at >= end:
                return 0
            continue
        return _frame_content_size(head) or 0
    return 0


def _hidden(fh: BinaryIO, at: int, end: int) -> str:
    """`` (a member 'NAME' hidden there)`` when a local header starts at ``at``: the name a streaming reader
    would extract; else nothing."""
    if end - at < 30 or _read_at(fh, at, 4) != _LOCAL:
        return ""
    name_len = struct.unpack("<H", _read_at(fh, at + 26, 2))[0]
    name = _read_at(fh, at + 30, min(name_len, end - at - 30, 200)).decode("utf-8", "replace")[:80]
    return f" (a member {name!r} hidden there)"


def check_layout(fh: BinaryIO, budget: int | None = None) -> int:
    """Raise ZipLayoutError unless the directory accounts for every byte of the zip open in ``fh`` and every
    local header agrees with it; ZipBudgetError when its members declare more than ``budget`` bytes in all
    (None: ENVGUARD_MAX_EXTRACTED_BYTES). Returns the bytes they declare (see the module doc)."""
    if budget is None:
        from envguard import settings

        budget = settings.max_extracted_bytes()
    size = fh.seek(0, os.SEEK_END)
    cd_offset, cd_size, count, _ends_at = _end_record(fh, size)
    members = _directory(fh, cd_offset, cd_size, count)
    names = [m.name for m in members]
    twice = next((m for m in members if names.count(m.name) > 1), None)
    if twice is not None:
        raise ZipLayoutError(f"has duplicate members {twice.shown}")  # each reader could take another one
    expected_next, declared = 0, 0
    for member in sorted(members):
        offset, shown = member.offset, member.shown
        if offset != expected_next:
            gap = offset - expected_next
            raise ZipLayoutError(f"has {gap} bytes before its member {shown!r} that its directory does not list"
                                 f"{_hidden(fh, expected_next, offset)}"
                                 if gap > 0 else f"has members that overlap at {shown!r}")
        header = _read_at(fh, offset, 30)
        if header[:4] != _LOCAL:
            raise ZipLayoutError(f"has no local header where its directory places {shown!r}")
        name_len, extra_len = struct.unpack_from("<HH", header, 26)
        if _read_at(fh, offset + 30, name_len) != member.name:
            raise ZipLayoutError(f"has another member's header where its directory places {shown!r}")
        data_at = offset + 30 + name_len + extra_len
        differs, expected_next = _local_disagreement(fh, member, data_at + member.csize)
        if differs:  # a streaming reader takes the local header's word: it would read other bytes
            raise ZipLayoutError(f"has a local header for {shown!r} with {differs}")
        inflated = member.usize
        if member.method == 0 and member.name.endswith(b".tar.zst"):
            inflated = max(_declared_content(fh, data_at, member.csize), member.usize)
        declared += inflated
        if declared > budget:
            raise ZipBudgetError(f"declares {declared} bytes once inflated (at its member {shown!r}), more than "
                                 f"ENVGUARD_MAX_EXTRACTED_BYTES allows ({budget})")
    if expected_next != cd_offset:
        gap = cd_offset - expected_next
        raise ZipLayoutError(f"has {gap} bytes after its last listed member that its directory does not list"
                             f"{_hidden(fh, expected_next, cd_offset)}" if gap > 0 else
                             "has a member that overlaps its central directory")
    return declared
