"""Crafted image files for the hostile-code suite: each is small, within the pixel cap and the collection caps,
and yet costs a decoder in the process that opens it seconds of CPU or hundreds of MB of memory.

- `png_at_cap`: a constant PNG of 8192 x 8192 pixels (RGBA: 256 MB of pixels) in a few hundred KB.
- `png_chunks`: an 8x8 PNG behind millions of empty private ancillary chunks (Pillow checks each one's CRC
  and keeps every one of them in a list).
- `tiff_strips`: a 1-pixel-wide TIFF whose strip table lists millions of one-byte strips.
- `jpeg_scans`: an 8192 x 8192 progressive JPEG with thousands of empty scans (libjpeg walks every block
  of the image once per scan).

They are made by the parent of the suite and copied into a session's outputs by its code.
"""

from __future__ import annotations

import functools
import io
import struct
import zlib
from array import array

CAP_SIDE = 8192  # tools.images.DEFAULT_MAX_PIXELS = 8192 * 8192


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


@functools.lru_cache(maxsize=None)
def png_at_cap(width: int = CAP_SIDE, height: int = CAP_SIDE, channels: int = 4) -> bytes:
    """An all-zero 8-bit PNG (gray 1, RGB 3 or RGBA 4 channels): zeros deflate about 1000:1."""
    color_type = {1: 0, 3: 2, 4: 6}[channels]
    row = bytes(1 + width * channels)  # a filter byte, then the samples
    rows = next(n for n in (64, 16, 4, 1) if height % n == 0)
    idat = _deflate_repeated(row * rows, height // rows)
    header = struct.pack(">IIBBBBB", width, height, 8, color_type, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + _chunk(b"IDAT", idat) + _chunk(b"IEND", b"")


def _deflate_repeated(block: bytes, times: int) -> bytes:
    """zlib data of `block` repeated `times` times, compressing the block once (ten times faster than the whole):
    after a full flush the compressor starts afresh, so each copy of the block compresses to the same bytes."""
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)  # raw deflate: the zlib header and checksum added below
    once = deflate.compress(block) + deflate.flush(zlib.Z_FULL_FLUSH)
    checksum = 1
    for _ in range(times):
        checksum = zlib.adler32(block, checksum)
    return b"\x78\xda" + once * times + zlib.compressobj(9, zlib.DEFLATED, -15).flush() + struct.pack(">I", checksum)


def png_chunks(count: int) -> bytes:
    """An 8x8 gray PNG with `count` empty chunks of a private ancillary type before its pixels (12 bytes each)."""
    row = bytes(1 + 8)
    header = struct.pack(">IIBBBBB", 8, 8, 8, 0, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + _chunk(b"prIv", b"") * count
            + _chunk(b"IDAT", zlib.compress(row * 8)) + _chunk(b"IEND", b""))


def tiff_strips(count: int) -> bytes:
    """A 1 x `count` gray, uncompressed TIFF with one row per strip: its strip tables list `count` strips, all
    pointing at the same byte (8 bytes of table per strip)."""
    entries = 9
    ifd = 8
    offsets = ifd + 2 + 12 * entries + 4
    counts = offsets + 4 * count
    pixel = counts + 4 * count

    def entry(tag: int, kind: int, n: int, value: int) -> bytes:
        return struct.pack("<HHII", tag, kind, n, value)

    table = b"".join([
        entry(256, 4, 1, 1),              # ImageWidth
        entry(257, 4, 1, count),          # ImageLength
        entry(258, 3, 1, 8),              # BitsPerSample
        entry(259, 3, 1, 1),              # Compression: none
        entry(262, 3, 1, 1),              # PhotometricInterpretation: black is zero
        entry(273, 4, count, offsets),    # StripOffsets
        entry(277, 3, 1, 1),              # SamplesPerPixel
        entry(278, 4, 1, 1),              # RowsPerStrip
        entry(279, 4, count, counts),     # StripByteCounts
    ])
    return (b"II*\x00" + struct.pack("<I", ifd) + struct.pack("<H", entries) + table + b"\x00" * 4
            + array("I", [pixel]).tobytes() * count + array("I", [1]).tobytes() * count + b"\x00")


def jpeg_scans(count: int, side: int = CAP_SIDE) -> bytes:
    """A side x side gray progressive JPEG: the headers of a tiny one made by Pillow with the frame's size patched,
    then its first scan's header `count` times, with no data (libjpeg warns, fills in zeros and goes on)."""
    from PIL import Image

    out = io.BytesIO()
    Image.new("L", (8, 8)).save(out, "JPEG", progressive=True, quality=90)
    data = out.getvalue()
    sos = data.index(b"\xff\xda")
    sof = data.index(b"\xff\xc2")
    header = bytearray(data[:sos])
    header[sof + 5:sof + 9] = struct.pack(">HH", side, side)  # height, width
    (length,) = struct.unpack(">H", data[sos + 2:sos + 4])
    scan = data[sos:sos + 2 + length]
    return bytes(header) + scan * count + b"\xff\xd9"
