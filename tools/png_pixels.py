"""Reads the pixels of an 8-bit RGB or RGBA PNG, with zlib only: enough to check a screenshot.

Hand-written because the check needs no image library otherwise (Pillow is not a dependency
of the project); it decodes what headless Chromium writes: 8 bits per channel, colour type 2
(RGB) or 6 (RGBA), not interlaced, any of the five scanline filters.
"""

from __future__ import annotations

import collections
import dataclasses
import pathlib
import struct
import zlib

SIGNATURE = b"\x89PNG\r\n\x1a\n"
_CHANNELS = {2: 3, 6: 4}


@dataclasses.dataclass(frozen=True)
class Image:
    """A decoded image: ``rows`` holds ``height`` byte strings of ``width * channels`` bytes."""

    width: int
    height: int
    channels: int
    rows: list[bytes]

    def colours(self) -> collections.Counter:
        """How many pixels have each (r, g, b) colour (alpha ignored)."""
        counts: collections.Counter = collections.Counter()
        step = self.channels
        for row in self.rows:
            rgb = row if step == 3 else bytes(b for i, b in enumerate(row) if i % 4 != 3)
            counts.update(rgb[i : i + 3] for i in range(0, len(rgb), 3))
        return collections.Counter({tuple(k): v for k, v in counts.items()})


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def _unfilter(kind: int, line: bytearray, prior: bytes, bpp: int) -> bytes:
    if kind == 0:
        return bytes(line)
    if kind == 2:
        return bytes((x + y) & 0xFF for x, y in zip(line, prior, strict=True))
    for i in range(len(line)):
        left = line[i - bpp] if i >= bpp else 0
        if kind == 1:
            line[i] = (line[i] + left) & 0xFF
        elif kind == 3:
            line[i] = (line[i] + ((left + prior[i]) >> 1)) & 0xFF
        elif kind == 4:
            upper_left = prior[i - bpp] if i >= bpp else 0
            line[i] = (line[i] + _paeth(left, prior[i], upper_left)) & 0xFF
        else:
            raise ValueError(f"unknown PNG filter type {kind}")
    return bytes(line)


def read(path: str | pathlib.Path) -> Image:
    """Decodes the PNG at ``path``.

    Raises:
        ValueError: Not a PNG, or a kind this reader does not decode (the message says which).
    """
    data = pathlib.Path(path).read_bytes()
    if not data.startswith(SIGNATURE):
        raise ValueError(f"{path}: not a PNG file (no PNG signature)")
    offset, header, compressed = len(SIGNATURE), None, bytearray()
    while offset < len(data):
        (length,) = struct.unpack(">I", data[offset : offset + 4])
        kind = data[offset + 4 : offset + 8]
        body = data[offset + 8 : offset + 8 + length]
        offset += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            compressed += body
        elif kind == b"IEND":
            break
    if header is None:
        raise ValueError(f"{path}: no IHDR chunk")
    width, height, depth, colour, _, _, interlace = header
    if depth != 8 or colour not in _CHANNELS or interlace:
        raise ValueError(
            f"{path}: bit depth {depth}, colour type {colour}, interlace {interlace}; this "
            "reader decodes 8-bit RGB or RGBA, not interlaced"
        )
    channels = _CHANNELS[colour]
    raw = zlib.decompress(bytes(compressed))
    stride = width * channels
    rows, prior = [], bytes(stride)
    for y in range(height):
        start = y * (stride + 1)
        line = bytearray(raw[start + 1 : start + 1 + stride])
        prior = _unfilter(raw[start], line, prior, channels)
        rows.append(prior)
    return Image(width, height, channels, rows)
