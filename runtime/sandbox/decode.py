"""Decoding a session's images inside its sandbox worker, never in the evaluation process.

An image a cell saves is attacker-made bytes: within the pixel and file-size caps, a PNG of millions of empty
ancillary chunks, a TIFF whose strip table lists millions of strips or a progressive JPEG with thousands of
scans costs its decoder seconds of CPU and gigabytes of memory. So the worker decodes it, under its own limits
and a timer, after a cheap walk over the file's structure that refuses such files before any pixel is decoded,
and hands the parent plain uint8 pixels: the parent checks their shape against its budgets before it allocates
anything and never runs a decoder on them.
"""

from __future__ import annotations

import struct

import numpy as np

# Per image. Real files stay far below these: a PNG has a handful of ancillary chunks (and IDAT chunks of 8-64 KiB:
# 65,536 of those hold 512 MB-4 GB of compressed data), a TIFF one strip per row at most (8,192 at the pixel cap),
# a progressive JPEG about 10 scans (an EXIF thumbnail adds its own).
MAX_PNG_CHUNKS = 65_536
MAX_PNG_ANCILLARY_CHUNKS = 1_024
MAX_TIFF_STRIPS = 65_536  # strips or tiles listed in the first image's tables
MAX_JPEG_SCANS = 64
MODES = ("tirlab", "rgb")  # tools.images.to_array's rules (alpha over white, 16-bit scaled), or PIL's convert("RGB")


class Refused(ValueError):
    """A file the decoder will not touch; the message says which cap it passes."""


def check_structure(data: bytes) -> str:
    """The file's format after checking its chunk, strip or scan counts against the caps (Refused if over)."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        _check_png(data)
        return "PNG"
    if data[:4] in (b"II*\x00", b"MM\x00*"):
        _check_tiff(data)
        return "TIFF"
    if data[:4] in (b"II+\x00", b"MM\x00+"):
        raise Refused("BigTIFF files are not read")
    if data.startswith(b"\xff\xd8"):
        scans = data.count(b"\xff\xda")  # 0xFF in entropy-coded data is always followed by 0x00 or a restart marker
        if scans > MAX_JPEG_SCANS:
            raise Refused(f"the JPEG has {scans:,} scans (the limit is {MAX_JPEG_SCANS})")
        return "JPEG"
    return "other"


def _check_png(data: bytes) -> None:
    chunks = ancillary = 0
    offset = 8
    while offset + 8 <= len(data):
        length, kind = struct.unpack_from(">I4s", data, offset)
        chunks += 1
        if kind not in (b"IHDR", b"PLTE", b"IDAT", b"IEND"):
            ancillary += 1
        if chunks > MAX_PNG_CHUNKS:
            raise Refused(f"the PNG has more than {MAX_PNG_CHUNKS:,} chunks")
        if ancillary > MAX_PNG_ANCILLARY_CHUNKS:
            raise Refused(f"the PNG has more than {MAX_PNG_ANCILLARY_CHUNKS:,} ancillary chunks")
        if kind == b"IEND":
            return
        offset += 12 + length


def _check_tiff(data: bytes) -> None:
    order = "<" if data[:2] == b"II" else ">"
    (ifd,) = struct.unpack_from(order + "I", data, 4)
    if ifd + 2 > len(data):
        raise Refused("the TIFF's first image directory lies past the end of the file")
    (entries,) = struct.unpack_from(order + "H", data, ifd)
    for i in range(min(entries, (len(data) - ifd - 2) // 12)):
        tag, _, count = struct.unpack_from(order + "HHI", data, ifd + 2 + 12 * i)
        if tag in (273, 279, 324, 325) and count > MAX_TIFF_STRIPS:  # strip and tile offsets and byte counts
            raise Refused(f"the TIFF lists {count:,} strips or tiles (the limit is {MAX_TIFF_STRIPS:,})")


def decode(data: bytes, mode: str, max_pixels: int, max_bytes: int) -> np.ndarray:
    """The first frame of an image file as uint8 (H, W, 3) or (H, W): `mode` "tirlab" follows
    tools.images.to_array, "rgb" is PIL's convert("RGB") (a benchmark's own reading). Refused before any
    pixel is decoded when its structure, its pixels or the bytes it would decode to are over the caps."""
    from tools.images import decode_bytes, decoded_bytes, open_image_bytes

    if mode not in MODES:
        raise Refused(f"unknown decode mode {mode!r}; choose from {list(MODES)}")
    check_structure(data)
    with open_image_bytes(data, max_pixels) as opened:  # the header only: PIL decodes lazily
        _check_size(decoded_bytes(opened) if mode == "tirlab" else opened.width * opened.height * 3, max_bytes)
        pixels = np.asarray(opened.convert("RGB")) if mode == "rgb" else None
    if pixels is None:
        pixels = decode_bytes(data, max_pixels)
    _check_size(pixels.nbytes, max_bytes)
    return pixels


def _check_size(size: int, max_bytes: int) -> None:
    if size > max_bytes:
        raise Refused(f"its {size / 2**20:.1f} MB of pixels are over the {max_bytes / 2**20:.1f} MB of images the "
                      "episode may still hold")
