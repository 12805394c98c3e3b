#!/usr/bin/env python3
"""A sample Crystal exec tool set: three tools sharing one executable.

    imagetools.py plot    --width W --height H [--kind bar|line]   (values on stdin)
    imagetools.py swatch  --color HEX [--size N]                     (stdin closed)
    imagetools.py pngsize --path FILE                                (text output)

Pure Python standard library: PNG files are written with zlib, so it runs anywhere
Python 3.8+ does. Crystal passes the argument object on stdin as JSON (when the tool
has "stdin": true) and mapped flags on the command line; see docs/exec-tools.md.
"""

import argparse
import base64
import json
import os
import struct
import sys
import zlib


def png_bytes(width, height, pixels):
    """Encode rows of (r, g, b) tuples as an 8-bit RGB PNG."""
    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)

    raw = bytearray()
    for row in pixels:
        raw.append(0)  # filter: none
        for r, g, b in row:
            raw += bytes((r, g, b))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(bytes(raw), 9)) + chunk(b"IEND", b"")


# A 3x5 pixel font for titles (drawn at twice the size): letters (case folded), digits
# and a little punctuation; anything else is drawn as "?".
FONT = {
    "A": "010101111101101", "B": "110101110101110", "C": "011100100100011", "D": "110101101101110",
    "E": "111100110100111", "F": "111100110100100", "G": "011100101101011", "H": "101101111101101",
    "I": "111010010010111", "J": "001001001101010", "K": "101101110101101", "L": "100100100100111",
    "M": "101111111101101", "N": "110101101101101", "O": "010101101101010", "P": "110101110100100",
    "Q": "010101101110011", "R": "110101110101101", "S": "011100010001110", "T": "111010010010010",
    "U": "101101101101111", "V": "101101101101010", "W": "101101111111101", "X": "101101010101101",
    "Y": "101101010010010", "Z": "111001010100111", "0": "111101101101111", "1": "010110010010111",
    "2": "110001010100111", "3": "110001010001110", "4": "101101111001001", "5": "111100110001110",
    "6": "011100111101111", "7": "111001010010010", "8": "111101111101111", "9": "111101111001110",
    " ": "000000000000000", "-": "000000111000000", ".": "000000000000010", ",": "000000000010100",
    ":": "000010000010000", "_": "000000000000111", "(": "001010010010001", ")": "100010010010100",
    "/": "001001010100100", "%": "101001010100101", "+": "000010111010000", "?": "110001010000010",
}
TITLE_SCALE = 2
TITLE_HEIGHT = 5 * TITLE_SCALE
# Pixels between a scale number and the axis, and the length of the tick beside it.
SCALE_GAP = 4 * TITLE_SCALE
TICK = 3


def draw_text(put, text, left, top, width, color):
    """Draw ``text`` from (left, top) in the title font; characters that would pass
    ``width`` are left out. Returns the x after the last character drawn."""
    x = left
    advance = 4 * TITLE_SCALE
    for char in text.upper():
        if x + 3 * TITLE_SCALE > width:
            break
        glyph = FONT.get(char, FONT["?"])
        for i, bit in enumerate(glyph):
            if bit == "1":
                row, col = divmod(i, 3)
                for dy in range(TITLE_SCALE):
                    for dx in range(TITLE_SCALE):
                        put(x + col * TITLE_SCALE + dx, top + row * TITLE_SCALE + dy, color)
        x += advance
    return x


def parse_color(text):
    text = text.lstrip("#")
    if len(text) == 3:
        text = "".join(c * 2 for c in text)
    if len(text) != 6:
        raise ValueError("colors look like #1e90ff or #18f")
    return tuple(int(text[i:i + 2], 16) for i in (0, 2, 4))


def fail(message):
    # A non-zero exit fails the call; the model reads stdout's text and stderr.
    print(json.dumps({"text": message}))
    sys.exit(1)


def text_width(text):
    """Pixels ``text`` takes in the title font."""
    return max(0, len(text) * 4 * TITLE_SCALE - TITLE_SCALE)


def tick(value):
    """A value as an axis label: short, no trailing zeros."""
    return ("%g" % value)[:8]


def plot(args, data):
    values = data.get("values")
    if not isinstance(values, list) or not values or not all(isinstance(v, (int, float)) for v in values):
        fail("plot needs 'values': a non-empty array of numbers.")
    labels = data.get("labels")
    if labels is not None and (not isinstance(labels, list) or len(labels) != len(values)):
        fail("'labels' must be a list with one label per value.")
    labels = [str(label) for label in labels] if labels else [str(i + 1) for i in range(len(values))]
    width, height = args.width, args.height
    if not (16 <= width <= 2000 and 16 <= height <= 2000):
        fail("width and height must be between 16 and 2000 pixels.")
    background, axis, ink = (255, 255, 255), (60, 60, 60), parse_color(data.get("color", "#1e78c8"))
    pixels = [[background] * width for _ in range(height)]
    margin = 8
    title = str(data.get("title") or "").strip()
    # The title is drawn above the chart, which starts below it (when there is room).
    chart_top = margin + TITLE_HEIGHT + 4 if title and height >= 3 * (margin + TITLE_HEIGHT) else margin
    lo, hi = min(0, min(values)), max(0, max(values))
    span = (hi - lo) or 1
    # Axis labels (the value scale on the left, one label under each bar or point) when
    # the image has room for them.
    labelled = width >= 96 and height >= chart_top + 3 * (TITLE_HEIGHT + 4)
    scale = [tick(hi), tick(lo)]
    if labelled:
        # Room above the axis for half of the top number, which is centred on its tick.
        chart_top += TITLE_HEIGHT // 2 + 2
    # The scale's numbers end SCALE_GAP pixels left of the axis, beside a short tick: a
    # number set against the axis line reads as part of it ("30|").
    left = margin + (max(text_width(t) for t in scale) + SCALE_GAP if labelled else 0)
    bottom = margin + (TITLE_HEIGHT + 4 if labelled else 0)

    def y_of(v):
        return height - 1 - bottom - int((v - lo) / span * (height - 1 - bottom - chart_top))

    def put(x, y, color):
        if 0 <= x < width and 0 <= y < height:
            pixels[y][x] = color

    if chart_top > margin:
        draw_text(put, title, margin, margin, width - margin, axis)
    zero = y_of(0)
    for x in range(left, width - margin):
        put(x, zero, axis)
    for y in range(chart_top, height - bottom):
        put(left, y, axis)
    n = len(values)
    step = (width - margin - left) / n
    if labelled:
        # The scale: the highest value at the top of the axis, the lowest (or 0) at its foot.
        for value, text in ((hi, scale[0]), (lo, scale[1])):
            y = min(y_of(value) - TITLE_HEIGHT // 2, height - bottom - TITLE_HEIGHT)
            draw_text(put, text, left - SCALE_GAP - text_width(text), y, left - SCALE_GAP, axis)
            for x in range(left - TICK, left):
                put(x, y_of(value), axis)
        # Labels of up to 8 characters; when they do not fit side by side, every k-th.
        shown = [label[:8] for label in labels]
        every = max(1, -(-(max(text_width(t) for t in shown) + 3 * TITLE_SCALE) // max(1, int(step))))
        for i in range(0, n, every):
            centre = left + int((i + 0.5) * step)
            x = min(max(centre - text_width(shown[i]) // 2, 0), width - text_width(shown[i]))
            draw_text(put, shown[i], x, height - margin - TITLE_HEIGHT, x + text_width(shown[i]) + 1, axis)
    points = []
    for i, v in enumerate(values):
        x0 = left + int(i * step) + 1
        x1 = left + int((i + 1) * step) - 1
        top = y_of(v)
        points.append(((x0 + x1) // 2, top))
        if args.kind == "bar":
            for x in range(x0, max(x0 + 1, x1)):
                for y in range(min(top, zero), max(top, zero) + 1):
                    put(x, y, ink)
    if args.kind == "line":
        for (xa, ya), (xb, yb) in zip(points, points[1:]):
            steps = max(abs(xb - xa), abs(yb - ya), 1)
            for s in range(steps + 1):
                x = xa + (xb - xa) * s // steps
                y = ya + (yb - ya) * s // steps
                for dx in (0, 1):
                    for dy in (0, 1):
                        put(x + dx, y + dy, ink)
    image = png_bytes(width, height, pixels)
    # Large images go through a file, not stdout (EX-14): the project data folder is
    # inside the workspace, and Crystal gives its path in CRYSTAL_PROJECT_DATA.
    folder = os.environ.get("CRYSTAL_PROJECT_DATA") or os.path.join(os.getcwd(), ".crystal", "data", "tools", "imagetools")
    os.makedirs(folder, exist_ok=True)  # the host may not have been able to create it
    name = "".join(c if c.isalnum() or c in "-_" else "_" for c in data.get("title", "plot"))[:40] or "plot"
    path = os.path.join(folder, name + ".png")
    with open(path, "wb") as handle:
        handle.write(image)
    title = title or "plot"
    text = "%s: %d values from %g to %g, %dx%d %s chart saved to %s" % (
        title, n, min(values), max(values), width, height, args.kind, os.path.relpath(path))
    print(json.dumps({"text": text, "images": [{"mimeType": "image/png", "path": path}]}))


def swatch(args):
    try:
        color = parse_color(args.color)
    except ValueError as exc:
        fail(str(exc))
    size = args.size
    if not 1 <= size <= 256:
        fail("size must be between 1 and 256.")
    image = png_bytes(size, size, [[color] * size for _ in range(size)])
    # Small images can travel inline as base64 (whitespace is allowed).
    print(json.dumps({"text": "A %dx%d swatch of #%02x%02x%02x." % ((size, size) + color),
                      "images": [{"mimeType": "image/png", "base64": base64.encodebytes(image).decode("ascii")}]}))


def pngsize(args):
    try:
        with open(args.path, "rb") as handle:
            head = handle.read(24)
    except OSError as exc:
        print("cannot read %s: %s" % (args.path, exc.strerror), file=sys.stderr)
        sys.exit(1)
    if head[:8] != b"\x89PNG\r\n\x1a\n":
        print("%s is not a PNG file" % args.path, file=sys.stderr)
        sys.exit(1)
    width, height = struct.unpack(">II", head[16:24])
    print("%s: %d x %d pixels" % (args.path, width, height))


def main():
    parser = argparse.ArgumentParser(prog="imagetools")
    sub = parser.add_subparsers(dest="tool", required=True)
    p = sub.add_parser("plot")
    p.add_argument("--width", type=int, default=320)
    p.add_argument("--height", type=int, default=200)
    p.add_argument("--kind", choices=("bar", "line"), default="bar")
    p = sub.add_parser("swatch")
    p.add_argument("--color", required=True)
    p.add_argument("--size", type=int, default=32)
    p = sub.add_parser("pngsize")
    p.add_argument("--path", required=True)
    args = parser.parse_args()
    if args.tool == "plot":
        plot(args, json.loads(sys.stdin.read() or "{}"))
    elif args.tool == "swatch":
        swatch(args)
    else:
        pngsize(args)


if __name__ == "__main__":
    main()
