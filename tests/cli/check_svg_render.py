#!/usr/bin/env python3
"""The memory map as a person sees it: renders `tgsched ... --svg` to PNG with a
real SVG renderer (rsvg-convert, librsvg) twice, with and without its labels,
and checks in the rendered pixels that every label is drawn where it stands
(not clipped, not covered), that no two labels overlap, that the labels a
reader needs are there (the fullest step, its live tensors by name and size,
the largest tensors, a legend entry for every colour and mark), that the boxes
live at the fullest step are drawn wide enough to see, and that split copies
have a colour of their own.

usage: check_svg_render.py TGSCHED OUT_DIR [--expect REGEX ...] -- VERB ARGS...
Exit 77 (skipped) when rsvg-convert is missing outside CI; in CI it must exist.
Prints "N passed, M failed"."""
import os
import re
import shutil
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET
import zlib

SVG_NS = "{http://www.w3.org/2000/svg}"
CHAR_W = 6.6 / 11.0  # per px of font size: tools/plan_svg.c's estimate of a sans-serif glyph
# every colour and mark of the picture must be named in its legend
LEGEND = [r"^matmul$", r"^norm$", r"^elementwise$", r"^attention$", r"^copy/layout$", r"^rope$", r"^input/leaf$",
          r"^split copy", r"^other$", r"^in-place:", r"^fullest step \(most bytes live\)", r"^size:", r"^lower bound:"]


def read_png(path):
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            width, height, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and ctype in (2, 6) and interlace == 0, f"unsupported PNG {depth} {ctype} {interlace}"
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, bpp, rows


def label_box(t):
    x, y, size = float(t.get("x")), float(t.get("y")), float(t.get("font-size"))
    w = len(t.text or "") * CHAR_W * size
    anchor = t.get("text-anchor", "start")
    x0 = x - w if anchor == "end" else x - w / 2 if anchor == "middle" else x
    return (x0, y - size * 0.8, x0 + w, y + size * 0.25)


def main():
    exe, out_dir = sys.argv[1], sys.argv[2]
    sep = sys.argv.index("--")
    opts, args = sys.argv[3:sep], sys.argv[sep + 1:]
    expect = [opts[i + 1] for i in range(len(opts)) if opts[i] == "--expect"]
    renderer = shutil.which("rsvg-convert")
    if not renderer:
        if os.environ.get("CI"):
            sys.exit("rsvg-convert is missing: ci/setup installs librsvg2-bin\n0 passed, 1 failed")
        print("skipped: rsvg-convert (librsvg2-bin) is not installed")
        sys.exit(77)
    os.makedirs(out_dir, exist_ok=True)
    svg = os.path.join(out_dir, "map.svg")
    proc = subprocess.run([exe] + args + ["--svg", svg], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        sys.exit(f"tgsched failed ({proc.returncode}): {proc.stderr}\n0 passed, 1 failed")
    ET.register_namespace("", SVG_NS[1:-1])
    tree = ET.parse(svg)
    root = tree.getroot()
    labels = [t for t in root.iter(SVG_NS + "text") if t.get("class") == "label"]
    bare = os.path.join(out_dir, "map-no-labels.svg")
    for parent in root.iter():
        for child in list(parent):
            if child.tag == SVG_NS + "text" and child.get("class") == "label":
                parent.remove(child)
    tree.write(bare)
    full_png, bare_png = os.path.join(out_dir, "map.png"), os.path.join(out_dir, "map-no-labels.png")
    for src, dst in ((svg, full_png), (bare, bare_png)):
        subprocess.run([renderer, src, "-o", dst], check=True)
    w, h, bpp, full = read_png(full_png)
    _, _, bpp2, bare_rows = read_png(bare_png)
    assert bpp == bpp2
    passed, failed = 0, []

    def check(ok, what):
        nonlocal passed
        if ok:
            passed += 1
        else:
            failed.append(what)

    boxes = []
    for t in labels:
        text = t.text or ""
        x0, y0, x1, y1 = label_box(t)
        boxes.append((x0, y0, x1, y1, text))
        inside = 0 <= x0 and x1 <= w and 0 <= y0 and y1 <= h
        check(inside, f"label '{text}' lies outside the {w}x{h} picture")
        if not inside:
            continue
        changed = 0
        for y in range(int(y0), int(y1) + 1):
            a, b = full[y], bare_rows[y]
            for x in range(int(x0), int(x1) + 1):
                i = x * bpp
                if sum(abs(a[i + k] - b[i + k]) for k in range(3)) > 120:
                    changed += 1
        glyphs = len(text.replace(" ", ""))
        check(changed >= 3 * glyphs, f"label '{text}' is not visible: {changed} pixels change for {glyphs} glyphs")
    for i in range(len(boxes)):
        for j in range(i + 1, len(boxes)):
            a, b = boxes[i], boxes[j]
            overlap = a[0] < b[2] - 1 and b[0] < a[2] - 1 and a[1] < b[3] - 1 and b[1] < a[3] - 1
            check(not overlap, f"labels '{a[4]}' and '{b[4]}' overlap")
    texts = [b[4] for b in boxes]
    for pattern in LEGEND + expect:
        check(any(re.search(pattern, s) for s in texts), f"no label matches '{pattern}'")
    # the boxes live at the fullest step (outlined) are wide enough to see
    live = [r for r in root.iter(SVG_NS + "rect") if r.get("stroke-width") == "1.5"]
    check(len(live) > 0, "no box is marked live at the fullest step")
    for r in live:
        check(float(r.get("width")) >= 8.9, f"a live box is {r.get('width')} px wide")
    # split copies (named BACKEND#SOURCE#N) have the legend's split-copy colour, not the inputs'
    root = ET.parse(svg).getroot()  # with its labels again
    legend_fill = {}
    items = list(root)
    for k, el in enumerate(items):
        if el.tag == SVG_NS + "text" and el.get("class") == "label" and k > 0 and items[k - 1].tag == SVG_NS + "rect":
            legend_fill[el.text] = items[k - 1].get("fill")
    copy_fill = legend_fill.get("split copy (scheduler)")
    check(copy_fill is not None and copy_fill != legend_fill.get("input/leaf"), "split copies share the inputs' colour")
    for r in root.iter(SVG_NS + "rect"):
        title = r.find(SVG_NS + "title")
        if title is not None and re.match(r"^[^ ]+#[^ ]+#\d+ ", title.text or ""):
            check(r.get("fill") == copy_fill, f"split copy '{title.text.split()[0]}' is not drawn in the copy colour")
    for f in failed[:40]:
        print("FAIL:", f)
    print(f"{passed} passed, {len(failed)} failed")
    sys.exit(1 if failed else 0)


main()
