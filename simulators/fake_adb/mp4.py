"""The smallest valid MP4 (ISO/IEC 14496-12) file that holds a screen recording: one video track of
Motion JPEG frames (the QuickTime ``jpeg`` sample entry), each shown for its own duration.

A device's ``screenrecord`` writes H.264; no H.264 encoder is installed here, and Pillow writes JPEG, so
the fake writes Motion JPEG in the same container (ffmpeg's MP4 reader maps the ``jpeg`` tag to MJPEG;
no ffmpeg is installed here to check a file), and :func:`read_mp4_frames` reads it back for the tests. Layout: ``ftyp``, ``mdat`` (the frames, one
chunk), then ``moov`` at the end, as screenrecord's muxer writes it.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

TIMESCALE = 1000  # milliseconds
# The identity transformation matrix of mvhd/tkhd (16.16 and 2.30 fixed point).
_MATRIX = struct.pack(">9I", 0x10000, 0, 0, 0, 0x10000, 0, 0, 0, 0x40000000)


def _box(kind: bytes, *payload: bytes) -> bytes:
    body = b"".join(payload)
    return struct.pack(">I", 8 + len(body)) + kind + body


def _full_box(kind: bytes, version: int, flags: int, *payload: bytes) -> bytes:
    return _box(kind, struct.pack(">I", (version << 24) | flags), *payload)


def write_mp4(frames: Sequence[tuple[bytes, int]], width: int, height: int) -> bytes:
    """An MP4 file of ``frames``: (JPEG bytes, duration in milliseconds) in display order."""
    if not frames:
        raise ValueError("an MP4 recording needs at least one frame")
    duration = sum(max(ms, 1) for _, ms in frames)
    ftyp = _box(b"ftyp", b"isom", struct.pack(">I", 0x200), b"isomiso2mp41")
    mdat = _box(b"mdat", *(jpeg for jpeg, _ in frames))
    first_sample_offset = len(ftyp) + 8
    sample_entry = _box(
        b"jpeg",
        bytes(6),
        struct.pack(">H", 1),  # data_reference_index
        bytes(16),
        struct.pack(">HHII", width, height, 0x480000, 0x480000),  # size, 72 dpi
        bytes(4),
        struct.pack(">H", 1),  # frame_count
        bytes([10]) + b"Photo JPEG".ljust(31, b"\0"),  # compressorname, a Pascal string
        struct.pack(">Hh", 0x18, -1),  # depth, pre_defined
    )
    stbl = _box(
        b"stbl",
        _full_box(b"stsd", 0, 0, struct.pack(">I", 1), sample_entry),
        _full_box(
            b"stts",
            0,
            0,
            struct.pack(">I", len(frames)),
            *(struct.pack(">II", 1, max(ms, 1)) for _, ms in frames),
        ),
        _full_box(b"stsc", 0, 0, struct.pack(">IIII", 1, 1, len(frames), 1)),
        _full_box(
            b"stsz",
            0,
            0,
            struct.pack(">II", 0, len(frames)),
            *(struct.pack(">I", len(jpeg)) for jpeg, _ in frames),
        ),
        _full_box(b"stco", 0, 0, struct.pack(">II", 1, first_sample_offset)),
    )
    minf = _box(
        b"minf",
        _full_box(b"vmhd", 0, 1, bytes(8)),
        _box(b"dinf", _full_box(b"dref", 0, 0, struct.pack(">I", 1), _full_box(b"url ", 0, 1))),
        stbl,
    )
    mdia = _box(
        b"mdia",
        _full_box(b"mdhd", 0, 0, struct.pack(">IIIIHH", 0, 0, TIMESCALE, duration, 0x55C4, 0)),  # 'und'
        _full_box(b"hdlr", 0, 0, bytes(4), b"vide", bytes(12), b"VideoHandler\0"),
        minf,
    )
    tkhd = _full_box(
        b"tkhd",
        0,
        3,  # enabled, in movie
        struct.pack(">IIIII", 0, 0, 1, 0, duration),
        bytes(8),
        struct.pack(">hhhH", 0, 0, 0, 0),  # layer, alternate group, volume, reserved
        _MATRIX,
        struct.pack(">II", width << 16, height << 16),
    )
    mvhd = _full_box(
        b"mvhd",
        0,
        0,
        struct.pack(">IIII", 0, 0, TIMESCALE, duration),
        struct.pack(">IH", 0x10000, 0x100),  # rate 1.0, volume 1.0
        bytes(10),
        _MATRIX,
        bytes(24),
        struct.pack(">I", 2),  # next_track_ID
    )
    return ftyp + mdat + _box(b"moov", mvhd, _box(b"trak", tkhd, mdia))


def _children(data: bytes, start: int, end: int) -> dict[bytes, tuple[int, int]]:
    boxes: dict[bytes, tuple[int, int]] = {}
    while start + 8 <= end:
        size, kind = struct.unpack_from(">I4s", data, start)
        if size < 8 or start + size > end:
            raise ValueError(f"bad MP4 box {kind!r} at byte {start}")
        boxes.setdefault(kind, (start + 8, start + size))
        start += size
    return boxes


def read_mp4_frames(data: bytes) -> tuple[bytes, list[tuple[bytes, int]]]:
    """The sample entry's codec and the (sample bytes, duration ms) of a file :func:`write_mp4` wrote."""
    top = _children(data, 0, len(data))
    if not {b"ftyp", b"mdat", b"moov"} <= set(top):
        raise ValueError("not an MP4 file: it needs ftyp, mdat and moov boxes")
    box = top[b"moov"]
    for kind in (b"trak", b"mdia", b"minf", b"stbl"):
        box = _children(data, *box)[kind]
    stbl = _children(data, *box)
    codec = data[stbl[b"stsd"][0] + 12 : stbl[b"stsd"][0] + 16]
    stsz = stbl[b"stsz"][0]
    count = struct.unpack_from(">I", data, stsz + 8)[0]
    sizes = struct.unpack_from(f">{count}I", data, stsz + 12)
    stts = stbl[b"stts"][0]
    durations: list[int] = []
    for index in range(struct.unpack_from(">I", data, stts + 4)[0]):
        repeat, delta = struct.unpack_from(">II", data, stts + 8 + 8 * index)
        durations += [delta] * repeat
    offset = struct.unpack_from(">I", data, stbl[b"stco"][0] + 8)[0]
    frames = []
    for size, duration in zip(sizes, durations, strict=True):
        frames.append((data[offset : offset + size], duration))
        offset += size
    return codec, frames
