"""Analysis: contours, connected components, Hough lines and circles, watershed, GrabCut, flood fill,
template matching, keypoints, inpainting and point measurements.

Conventions: pixel coordinates have the origin at the top-left corner, x to the right, y down; boxes
are [x1, y1, x2, y2] with x2, y2 exclusive; angles are degrees counter-clockwise from the +x axis as
seen on screen (so with y pointing down, a segment going up-right has a positive angle). Colors are
RGB [r, g, b] 0-255. Annotated output images are always RGB (a gray input is drawn on in color);
inpaint and grabcut keep the input's channels.
Every structured result is JSON data with bounded, deterministically sorted lists.

Torch versions exist for connected_components, flood_fill and template_match; the rest are cpu_only.
"""

from __future__ import annotations

import math

import cv2
import numpy as np
import torch
import torch.nn.functional as F

from tools.ops.kernels import gray_cv, gray_torch, otsu_thresholds, plane_hist
from tools.registry import Op, Param, Tolerance, ToolArgumentError, register

# -- shared helpers ------------------------------------------------------------------------------------
_PALETTE = np.array([
    (230, 25, 75), (60, 180, 75), (255, 225, 25), (0, 130, 200), (245, 130, 48), (145, 30, 180),
    (70, 240, 240), (240, 50, 230), (210, 245, 60), (250, 190, 212), (0, 128, 128), (220, 190, 255),
    (170, 110, 40), (255, 250, 200), (128, 0, 0), (170, 255, 195), (128, 128, 0), (255, 215, 180),
    (0, 0, 128), (255, 255, 255),
], np.uint8)
_OTHER = 128  # gray for components found but not returned
_FONT = cv2.FONT_HERSHEY_SIMPLEX


def _canvas(image: np.ndarray) -> np.ndarray:
    """A writable RGB copy to draw on."""
    return cv2.cvtColor(image, cv2.COLOR_GRAY2RGB) if image.ndim == 2 else image.copy()


def _rgb3(image: np.ndarray) -> np.ndarray:
    """The image as 3 channels (no copy when it already is); for cv2 calls that need 8UC3."""
    return cv2.cvtColor(image, cv2.COLOR_GRAY2RGB) if image.ndim == 2 else image


def _r(value: float, digits: int = 3) -> float:
    return round(float(value), digits)


def _box(x, y, w, h) -> list:
    return [int(x), int(y), int(x + w), int(y + h)]


def _label(canvas, text, x, y, color):
    cv2.putText(canvas, text, (int(x), max(10, int(y))), _FONT, 0.4, tuple(color), 1, cv2.LINE_AA)


_BINARIZE = ("canny", "otsu", "otsu_inv", "binary", "binary_inv", "nonzero")
_THRESH = {"otsu": cv2.THRESH_BINARY | cv2.THRESH_OTSU, "otsu_inv": cv2.THRESH_BINARY_INV | cv2.THRESH_OTSU,
           "binary": cv2.THRESH_BINARY, "binary_inv": cv2.THRESH_BINARY_INV}
_BINARIZE_DOC = (
    "How the image becomes a binary mask (gray = luminance of RGB): 'canny' = Canny edges "
    "(canny_low/canny_high); 'otsu' = pixels brighter than an automatic Otsu threshold; 'otsu_inv' = "
    "darker than it; 'binary' = gray > threshold; 'binary_inv' = gray <= threshold; 'nonzero' = gray > 0."
)


def _binarize_params(default: str, allow_canny: bool = True) -> tuple:
    choices = _BINARIZE if allow_canny else _BINARIZE[1:]
    params = [Param("binarize", "str", _BINARIZE_DOC, default, choices=choices),
              Param("threshold", "int", "Gray threshold 0-255 for 'binary' / 'binary_inv'.", 127, 0, 255)]
    if allow_canny:
        params += [Param("canny_low", "int", "Canny lower hysteresis threshold (0-255 gradient units).", 100, 0, 1000),
                   Param("canny_high", "int", "Canny upper hysteresis threshold.", 200, 0, 1000)]
    return tuple(params)


def _binarize(gray, method, threshold, canny_low=100, canny_high=200):
    """(binary uint8 0/255 mask, info dict)."""
    if method == "canny":
        return cv2.Canny(gray, canny_low, canny_high), {"canny": [canny_low, canny_high]}
    if method == "nonzero":
        return gray, {}
    used, binary = cv2.threshold(gray, threshold, 255, _THRESH[method])
    return binary, {"threshold": int(used)}


def _color_param(default, what="Drawing color") -> Param:
    return Param("color", "ints", f"{what} [R, G, B], 0-255.", default, 0, 255, length=3)


def _thickness_param(default=2) -> Param:
    return Param("thickness", "int", "Line thickness in pixels.", default, 1, 20)


# -- torch helpers (exact OpenCV integer semantics) ------------------------------------------------------

def _binarize_t(gray: torch.Tensor, method: str, threshold: int):
    """(bool foreground (N, H, W), per-image info dicts) matching _binarize for the threshold modes."""
    n = gray.shape[0]
    if method == "nonzero":
        return gray > 0, [{} for _ in range(n)]
    values = [int(v) for v in otsu_thresholds(plane_hist(gray).cpu().numpy())] if method.startswith("otsu") else [threshold] * n
    thr = torch.tensor(values, device=gray.device, dtype=torch.int16).view(n, 1, 1)
    above = gray.to(torch.int16) > thr
    return (~above if method.endswith("_inv") else above), [{"threshold": v} for v in values]


_OFFSETS4 = ((0, 1), (0, -1), (1, 0), (-1, 0))
_OFFSETS8 = _OFFSETS4 + ((1, 1), (1, -1), (-1, 1), (-1, -1))
_FORWARD = {4: ((0, 1), (1, 0)), 8: ((0, 1), (1, 0), (1, 1), (1, -1))}  # one direction of every link


def _shift(x: torch.Tensor, dy: int, dx: int, fill) -> torch.Tensor:
    """out[..., y, x] = x[..., y + dy, x + dx], `fill` outside (last two dims)."""
    h, w = x.shape[-2:]
    padded = F.pad(x, (1, 1, 1, 1), value=fill) if x.dtype != torch.bool else F.pad(x.to(torch.uint8), (1, 1, 1, 1), value=int(fill)).bool()
    return padded[..., 1 + dy:1 + dy + h, 1 + dx:1 + dx + w]


def _min_label(valid: torch.Tensor, links: list) -> torch.Tensor:
    """Connected components of a symmetric pixel graph: per valid pixel the smallest flat index
    (n*H*W + y*W + x) in its component; `valid.numel()` elsewhere.

    links: [(dy, dx, mask)] where mask[p] says p and p + (dy, dx) are connected; every undirected link
    must appear at least once. Each round hooks the root of the larger label onto the smaller one for
    every link whose ends still disagree (scatter-min), then compresses paths by pointer jumping, so the
    number of trees in a component at least halves per round."""
    n, h, w = valid.shape
    big = valid.numel()
    dev = valid.device
    src, dst = [], []
    for dy, dx, mask in links:
        p = mask.flatten().nonzero()[:, 0]
        src.append(p)
        dst.append(p + (dy * w + dx))
    src, dst = torch.cat(src), torch.cat(dst)
    parent = torch.arange(big, device=dev)
    while src.numel():
        lp, lq = parent[src], parent[dst]
        differ = lp != lq
        src, dst, lp, lq = src[differ], dst[differ], lp[differ], lq[differ]
        if not src.numel():
            break
        parent.scatter_reduce_(0, torch.maximum(lp, lq), torch.minimum(lp, lq), "amin")
        while True:  # pointer jumping to the roots
            jumped = parent[parent]
            if torch.equal(jumped, parent):
                break
            parent = jumped
    return torch.where(valid, parent.view(n, h, w), big)


def _component_table(fg: torch.Tensor, connectivity: int):
    """OpenCV-numbered components of a batch of binary masks.

    Returns (rank map (N, H, W) int64 with -1 on background, per-component global tensors: image index,
    area, x1, y1, x2 (inclusive), y2 (inclusive), sum x, sum y; count per image). Components are numbered
    image by image in OpenCV's order: for 4-connectivity the raster order of each component's first
    pixel, for 8-connectivity the raster order of its first 2x2 block (OpenCV's block-based scan)."""
    n, h, w = fg.shape
    links = [(dy, dx, fg & _shift(fg, dy, dx, False)) for dy, dx in _FORWARD[connectivity]]
    rep = _min_label(fg, links)
    dev = fg.device
    reps = rep[fg]
    uniq, inverse = torch.unique(reps, return_inverse=True)
    if connectivity == 8:
        ys = torch.arange(h, device=dev).view(1, h, 1)
        xs = torch.arange(w, device=dev).view(1, 1, w)
        img = torch.arange(n, device=dev).view(n, 1, 1)
        blocks = ((h + 1) // 2) * ((w + 1) // 2)
        key = (img * blocks + (ys // 2) * ((w + 1) // 2) + xs // 2).expand(n, h, w)[fg]
        comp_key = torch.full((uniq.numel(),), n * blocks, device=dev, dtype=torch.long)
        comp_key.scatter_reduce_(0, inverse, key, "amin")
        order = torch.argsort(comp_key)
        rank_of = torch.empty_like(order)
        rank_of[order] = torch.arange(order.numel(), device=dev)
        inverse = rank_of[inverse]
        first = uniq[order]
    else:
        first = uniq
    comp_img = first // (h * w)
    rank = torch.full((n, h, w), -1, device=dev, dtype=torch.long)
    rank[fg] = inverse
    k = first.numel()
    yy, xx = torch.meshgrid(torch.arange(h, device=dev), torch.arange(w, device=dev), indexing="ij")
    px, py = xx.expand(n, h, w)[fg], yy.expand(n, h, w)[fg]
    area = torch.bincount(inverse, minlength=k)

    def reduce(values, how, init):
        return torch.full((k,), init, device=dev, dtype=torch.long).scatter_reduce_(0, inverse, values, how)

    stats = [comp_img, area, reduce(px, "amin", w), reduce(py, "amin", h), reduce(px, "amax", -1),
             reduce(py, "amax", -1), reduce(px, "sum", 0), reduce(py, "sum", 0)]
    return rank, stats, torch.bincount(comp_img, minlength=n)


# == contours (also contour_area / arc_length / approx_poly) ===========================================
_RETRIEVAL = {"external": cv2.RETR_EXTERNAL, "list": cv2.RETR_LIST, "tree": cv2.RETR_TREE}
_CONTOUR_SORT = {
    "area": lambda r: (-r[2], r[0]), "perimeter": lambda r: (-r[3], r[0]),
    "left_to_right": lambda r: (r[4][0], r[4][1], r[0]), "top_to_bottom": lambda r: (r[4][1], r[4][0], r[0]),
    "index": lambda r: r[0],
}
_MAX_VERTICES = 64


def contours_cv(image, binarize, threshold, canny_low, canny_high, mode, sort_by, rank, max_contours, min_area,
                epsilon_ratio, draw, label, color, thickness):
    binary, info = _binarize(gray_cv(image), binarize, threshold, canny_low, canny_high)
    found, _ = cv2.findContours(binary, _RETRIEVAL[mode], cv2.CHAIN_APPROX_SIMPLE)
    records = []
    for i, c in enumerate(found):
        area = cv2.contourArea(c)
        if area >= min_area:
            records.append((i, c, area, cv2.arcLength(c, True), cv2.boundingRect(c)))
    records.sort(key=_CONTOUR_SORT[sort_by])
    if rank:
        chosen = [(rank, records[rank - 1])] if rank <= len(records) else []
    else:
        chosen = list(enumerate(records[:max_contours], 1))
    canvas = _canvas(image)
    rgb = tuple(color)
    if draw == "all":
        cv2.drawContours(canvas, found, -1, rgb, thickness)
    elif draw == "selected":
        cv2.drawContours(canvas, [rec[1] for _, rec in chosen], -1, rgb, thickness)
    out = []
    for k, (index, c, area, perimeter, (x, y, w, h)) in chosen:
        m = cv2.moments(c)
        if m["m00"]:
            cx, cy = m["m10"] / m["m00"], m["m01"] / m["m00"]
        else:  # a degenerate (zero-area) contour: the mean of its points
            cx, cy = (float(v) for v in c.reshape(-1, 2).mean(axis=0))
        approx = cv2.approxPolyDP(c, epsilon_ratio * perimeter, True).reshape(-1, 2)
        if draw == "polygons":
            cv2.polylines(canvas, [approx.reshape(-1, 1, 2)], True, rgb, thickness)
        if label == "rank":
            _label(canvas, f"#{k}", x, y - 4, rgb)
        elif label == "area":
            _label(canvas, f"{area:.1f}", x, y - 4, rgb)
        elif label == "perimeter":
            _label(canvas, f"{perimeter:.1f}", x + w // 2, y + h // 2, rgb)
        elif label == "vertices":
            mx, my = approx.mean(axis=0)
            _label(canvas, f"{len(approx)}pts", mx, my, rgb)
        out.append({
            "rank": k, "index": index, "area": _r(area, 1), "perimeter": _r(perimeter), "bbox": _box(x, y, w, h),
            "centroid": [_r(cx, 2), _r(cy, 2)], "vertices": len(approx),
            "polygon": approx[:_MAX_VERTICES].tolist(), "epsilon": _r(epsilon_ratio * perimeter),
        })
    data = {"total_contours": len(found), "matching_contours": len(records), "returned_contours": len(out),
            "mode": mode, "binarize": binarize, **info, "sort_by": sort_by, "contours": out}
    if rank and not out:
        data["note"] = f"rank {rank} requested but only {len(records)} contours match"
    return canvas, data


register(Op(
    "contours",
    "Find object outlines (cv2.findContours on a binary mask made by `binarize`) and measure each: area "
    "(cv2.contourArea, pixels^2), perimeter (cv2.arcLength of the closed contour, pixels), bounding box "
    "[x1, y1, x2, y2], centroid [x, y] (from moments), and a simplified polygon (cv2.approxPolyDP with "
    "epsilon = epsilon_ratio * perimeter: `vertices` is its corner count, e.g. 3 = triangle, 4 = "
    "quadrilateral; `polygon` lists up to 64 corners). Contours are sorted by `sort_by` (area and "
    "perimeter largest first) and the first `max_contours` are returned, or only the `rank`-th one "
    "(1 = first). The output image is RGB with contours or polygons drawn and optional labels.",
    (
        *_binarize_params("canny"),
        Param("mode", "str", "'external' = outer outlines only; 'list' = all outlines including holes; "
              "'tree' = all (same as list here).", "external", choices=tuple(_RETRIEVAL)),
        Param("sort_by", "str", "Order of the returned contours.", "area", choices=tuple(_CONTOUR_SORT)),
        Param("rank", "int", "Return only the contour at this 1-based position of the sorted list (0 = return "
              "the first max_contours).", 0, 0, 100000),
        Param("max_contours", "int", "Maximum number of contours returned.", 20, 1, 200),
        Param("min_area", "float", "Ignore contours with area below this (pixels^2).", 0.0, 0, 1e9),
        Param("epsilon_ratio", "float", "Polygon simplification: max distance from the outline as a fraction "
              "of the perimeter (0 keeps every point; 0.02 is typical).", 0.02, 0, 1),
        Param("draw", "str", "What is drawn: 'all' contours found, 'selected' = only the returned ones, "
              "'polygons' = the simplified polygons of the returned ones, 'none'.", "all",
              choices=("all", "selected", "polygons", "none")),
        Param("label", "str", "Text drawn next to each returned contour: its rank (#1, #2, ...), area, "
              "perimeter, vertex count, or nothing.", "rank",
              choices=("rank", "area", "perimeter", "vertices", "none")),
        _color_param((0, 255, 0)), _thickness_param(),
    ),
    contours_cv, category="analysis",
    examples=(
        {}, {"binarize": "otsu", "mode": "list", "max_contours": 5},
        {"binarize": "binary_inv", "threshold": 100, "rank": 1, "draw": "selected", "label": "area", "color": [0, 0, 255]},
        {"draw": "polygons", "label": "vertices", "epsilon_ratio": 0.05, "sort_by": "left_to_right", "min_area": 10},
        {"canny_low": 50, "canny_high": 150, "label": "perimeter", "sort_by": "perimeter", "thickness": 1},
    ),
))


# == connected components ================================================================================
def _component_data(info, count, areas, x1, y1, x2, y2, cx, cy, min_area, max_components):
    """The data dict from per-component stats (numpy arrays; index i is label i + 1), and the chosen indices."""
    keep = np.nonzero(areas >= min_area)[0]
    order = keep[np.argsort(-areas[keep], kind="stable")][:max_components]
    comps = [{
        "label": int(i) + 1, "area": int(areas[i]), "bbox": [int(x1[i]), int(y1[i]), int(x2[i]), int(y2[i])],
        "centroid": [_r(cx[i]), _r(cy[i])],
    } for i in order]
    return {"total_components": int(count), "matching_components": int(keep.size), "returned_components": len(comps),
            **info, "components": comps}, order


def connected_components_cv(image, binarize, threshold, connectivity, min_area, max_components):
    binary, info = _binarize(gray_cv(image), binarize, threshold)
    n, labels, stats, centroids = cv2.connectedComponentsWithStats(binary, connectivity=connectivity)
    s = stats[1:]
    area = s[:, cv2.CC_STAT_AREA]
    x, y = s[:, cv2.CC_STAT_LEFT], s[:, cv2.CC_STAT_TOP]
    data, order = _component_data(info, n - 1, area, x, y, x + s[:, cv2.CC_STAT_WIDTH], y + s[:, cv2.CC_STAT_HEIGHT],
                                  centroids[1:, 0], centroids[1:, 1], min_area, max_components)
    lut = np.full((n, 3), _OTHER, np.uint8)
    lut[0] = 0
    lut[order + 1] = _PALETTE[np.arange(order.size) % len(_PALETTE)]
    return lut[labels], data


def connected_components_torch(batch, binarize, threshold, connectivity, min_area, max_components):
    n, _, h, w = batch.shape
    fg, infos = _binarize_t(gray_torch(batch)[:, 0], binarize, threshold)
    rank, stats, counts = _component_table(fg, connectivity)
    img, area, x1, y1, x2, y2, sx, sy = (t.cpu().numpy() for t in stats)
    counts = counts.cpu().numpy()
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    lut = np.full((area.size + 1, 3), _OTHER, np.uint8)
    lut[-1] = 0  # background (rank -1)
    data = []
    for k in range(n):
        sl = slice(starts[k], starts[k] + counts[k])
        # OpenCV's centroid is (exact integer sum) / area in float64: the same division here
        d, order = _component_data(infos[k], counts[k], area[sl], x1[sl], y1[sl], x2[sl] + 1, y2[sl] + 1,
                                   sx[sl] / area[sl], sy[sl] / area[sl], min_area, max_components)
        data.append(d)
        lut[starts[k] + order] = _PALETTE[np.arange(order.size) % len(_PALETTE)]
    table = torch.from_numpy(lut).to(batch.device)
    out = table[torch.where(rank >= 0, rank, area.size)].permute(0, 3, 1, 2).contiguous()  # last row: black
    return out, data


register(Op(
    "connected_components",
    "Label the connected regions of a binary mask (cv2.connectedComponentsWithStats). The mask comes from "
    "`binarize` (default: Otsu, bright regions are foreground). Returns total_components (background "
    "excluded), and for the largest `max_components` with area >= min_area: label (OpenCV's number), area "
    "(pixels), bbox [x1, y1, x2, y2] and centroid [x, y], sorted by area (largest first, ties by label). "
    "The output image is the label map: background black, each returned component in its own color (in "
    "the order listed), other components gray.",
    (
        *_binarize_params("otsu", allow_canny=False),
        Param("connectivity", "int", "4 = pixels touching by edges; 8 = also by corners.", 8, choices=(4, 8)),
        Param("min_area", "int", "Ignore components smaller than this many pixels.", 0, 0, 1 << 30),
        Param("max_components", "int", "Maximum number of components listed.", 20, 1, 500),
    ),
    connected_components_cv, connected_components_torch, category="analysis",
    examples=(
        {}, {"connectivity": 4}, {"binarize": "otsu_inv", "min_area": 5, "max_components": 5},
        {"binarize": "binary", "threshold": 150, "connectivity": 4}, {"binarize": "binary_inv", "threshold": 90},
        {"binarize": "nonzero", "max_components": 3},
    ),
))


# == Hough lines ===========================================================================================
def _orientation(dx: float, dy: float) -> float:
    """Undirected line angle in [0, 180): degrees counter-clockwise from +x on screen (y points down)."""
    angle = math.degrees(math.atan2(-dy, dx)) % 180.0
    return 0.0 if angle >= 179.9995 else angle


def hough_lines_cv(image, canny_low, canny_high, threshold, min_line_length, max_line_gap, max_lines, color, thickness):
    edges = cv2.Canny(gray_cv(image), canny_low, canny_high)
    found = cv2.HoughLinesP(edges, 1, np.pi / 180, threshold, None, min_line_length, max_line_gap)
    # OpenCV 5 returns (N, 4); OpenCV 4 returned (N, 1, 4): reshape handles both (and None = no lines).
    segs = [] if found is None else found.reshape(-1, 4).tolist()
    lines = []
    for x1, y1, x2, y2 in segs:
        length = math.hypot(x2 - x1, y2 - y1)
        lines.append({"segment": [x1, y1, x2, y2], "length": _r(length, 2), "angle": _r(_orientation(x2 - x1, y2 - y1), 2)})
    lines.sort(key=lambda d: (-d["length"], d["segment"]))
    lines = lines[:max_lines]
    canvas = _canvas(image)
    for d in lines:
        x1, y1, x2, y2 = d["segment"]
        cv2.line(canvas, (x1, y1), (x2, y2), tuple(color), thickness)
    return canvas, {"total_lines": len(segs), "returned_lines": len(lines), "lines": lines}


register(Op(
    "hough_lines",
    "Detect straight line segments: Canny edges, then the probabilistic Hough transform (cv2.HoughLinesP, "
    "1 pixel / 1 degree resolution). Returns segments [x1, y1, x2, y2] (pixels) with length (pixels) and "
    "angle (degrees in [0, 180), counter-clockwise from the +x axis as seen on screen: 0 = horizontal, "
    "90 = vertical), longest first. The output image shows the returned segments drawn.",
    (
        Param("canny_low", "int", "Canny lower threshold.", 80, 0, 1000),
        Param("canny_high", "int", "Canny upper threshold.", 200, 0, 1000),
        Param("threshold", "int", "Minimum number of edge pixels (votes) supporting a line.", 80, 1, 100000),
        Param("min_line_length", "int", "Shorter segments are rejected (pixels).", 50, 0, 100000),
        Param("max_line_gap", "int", "Largest gap between points joined into one segment (pixels).", 10, 0, 100000),
        Param("max_lines", "int", "Maximum number of segments returned.", 20, 1, 500),
        _color_param((255, 0, 0)), _thickness_param(),
    ),
    hough_lines_cv, category="analysis",
    examples=({}, {"threshold": 20, "min_line_length": 15, "max_lines": 5},
              {"canny_low": 50, "canny_high": 150, "threshold": 10, "min_line_length": 5, "max_line_gap": 2, "color": [0, 255, 0]}),
))


# == Hough circles ===========================================================================================
_CIRCLE_SORT = {"votes": None, "radius": lambda c: (-c[2], c[0], c[1]), "x": lambda c: (c[0], c[1]), "y": lambda c: (c[1], c[0])}


def hough_circles_cv(image, dp, min_dist, param1, param2, min_radius, max_radius, blur, max_circles, sort_by, color, thickness):
    gray = gray_cv(image)
    if blur > 1:
        gray = cv2.medianBlur(gray, blur)
    found = cv2.HoughCircles(gray, cv2.HOUGH_GRADIENT, dp, min_dist, None, param1, param2, min_radius, max_radius)
    circles = [] if found is None else found.reshape(-1, found.shape[-1])[:, :3].tolist()
    if _CIRCLE_SORT[sort_by] is not None:
        circles.sort(key=_CIRCLE_SORT[sort_by])
    chosen = circles[:max_circles]
    canvas = _canvas(image)
    for x, y, r in chosen:
        center = (int(round(x)), int(round(y)))
        cv2.circle(canvas, center, int(round(r)), tuple(color), thickness)
        cv2.circle(canvas, center, 2, tuple(color), -1)
    data = [{"center": [_r(x, 1), _r(y, 1)], "radius": _r(r, 1)} for x, y, r in chosen]
    return canvas, {"total_circles": len(circles), "returned_circles": len(data), "circles": data}


def _hough_circles_check(args, height, width):
    if args["blur"] > 1 and args["blur"] % 2 == 0:
        raise ToolArgumentError("hough_circles", "blur", f"must be odd (a median filter size) or 0/1 for none, got {args['blur']}")
    if args["max_radius"] and args["max_radius"] < args["min_radius"]:
        raise ToolArgumentError("hough_circles", "max_radius", f"({args['max_radius']}) must be 0 (no limit) or >= min_radius ({args['min_radius']})")


register(Op(
    "hough_circles",
    "Detect circles with the Hough gradient method (cv2.HoughCircles, HOUGH_GRADIENT) on the median-blurred "
    "gray image. Returns circles as center [x, y] and radius (pixels), and the image with them drawn. "
    "Lower param2 finds more (and more false) circles; set min_radius/max_radius when the size is known.",
    (
        Param("dp", "float", "Inverse accumulator resolution (1 = full resolution, 2 = half).", 1.2, 1, 4),
        Param("min_dist", "float", "Minimum distance between circle centers (pixels).", 50, 1, 100000),
        Param("param1", "float", "Upper Canny threshold used inside (the lower is half of it).", 100, 1, 1000),
        Param("param2", "float", "Accumulator threshold for centers: smaller = more circles.", 50, 1, 1000),
        Param("min_radius", "int", "Minimum radius (pixels).", 10, 0, 100000),
        Param("max_radius", "int", "Maximum radius (pixels); 0 = no limit.", 0, 0, 100000),
        Param("blur", "int", "Median blur size applied first (odd; 0 or 1 = none).", 5, 0, 31),
        Param("max_circles", "int", "Maximum number of circles returned.", 20, 1, 500),
        Param("sort_by", "str", "Order: 'votes' (strongest first), 'radius' (largest first), 'x', 'y'.", "votes",
              choices=tuple(_CIRCLE_SORT)),
        _color_param((0, 255, 0)), _thickness_param(),
    ),
    hough_circles_cv, check=_hough_circles_check, category="analysis",
    examples=({}, {"min_dist": 10, "param2": 15, "min_radius": 3, "max_radius": 30, "sort_by": "radius"},
              {"dp": 1.0, "param1": 80, "param2": 10, "min_radius": 0, "blur": 3, "max_circles": 3}),
))


# == watershed =================================================================================================
def _region_stats(markers: np.ndarray, labels) -> list:
    """Area, box and centroid of the given (label, area) regions of a label map, in one pass over the
    pixels (a scan per region made a 40-object picture several times slower)."""
    if not labels:
        return []
    h, w = markers.shape
    index = markers + 1  # labels start at -1 (watershed lines)
    size = int(index.max()) + 1
    sums_x = np.bincount(index.ravel(), np.tile(np.arange(w, dtype=np.float64), h), size)
    sums_y = np.bincount(index.ravel(), np.repeat(np.arange(h, dtype=np.float64), w), size)
    in_column = np.zeros((size, w), bool)
    in_column[index, np.arange(w)[None, :]] = True
    in_row = np.zeros((size, h), bool)
    in_row[index, np.arange(h)[:, None]] = True
    out = []
    for lab, area in labels:
        k = lab + 1
        x1, y1 = int(in_column[k].argmax()), int(in_row[k].argmax())
        x2, y2 = w - int(in_column[k, ::-1].argmax()), h - int(in_row[k, ::-1].argmax())
        out.append({"label": int(lab), "area": int(area), "bbox": [x1, y1, x2, y2],
                    "centroid": [_r(sums_x[k] / area, 2), _r(sums_y[k] / area, 2)]})
    return out


def watershed_cv(image, objects, fg_ratio, max_regions, color):
    gray = gray_cv(image)
    mode = cv2.THRESH_BINARY | cv2.THRESH_OTSU if objects == "bright" else cv2.THRESH_BINARY_INV | cv2.THRESH_OTSU
    _, thresh = cv2.threshold(gray, 0, 255, mode)
    kernel = np.ones((3, 3), np.uint8)
    opening = cv2.morphologyEx(thresh, cv2.MORPH_OPEN, kernel, iterations=2)
    sure_bg = cv2.dilate(opening, kernel, iterations=3)
    dist = cv2.distanceTransform(opening, cv2.DIST_L2, 5)
    _, sure_fg = cv2.threshold(dist, fg_ratio * dist.max(), 255, cv2.THRESH_BINARY)
    sure_fg = sure_fg.astype(np.uint8)
    unknown = cv2.subtract(sure_bg, sure_fg)
    _, markers = cv2.connectedComponents(sure_fg)
    markers += 1
    markers[unknown == 255] = 0
    canvas = _canvas(image)
    markers = cv2.watershed(canvas, markers)
    canvas[markers == -1] = color
    areas = np.bincount(markers.ravel() + 1)  # index = label + 1
    regions = [(lab, areas[lab + 1]) for lab in range(2, areas.size - 1) if areas[lab + 1]]
    regions.sort(key=lambda r: (-r[1], r[0]))
    chosen = _region_stats(markers, regions[:max_regions])
    return canvas, {"region_count": len(regions), "returned_regions": len(chosen),
                    "background_pixels": int(areas[2]) if areas.size > 2 else 0, "boundary_pixels": int(areas[0]),
                    "regions": chosen}


register(Op(
    "watershed",
    "Separate touching objects with the classic marker-based watershed: Otsu threshold, morphological "
    "opening, distance transform; pixels farther than fg_ratio * (max distance) from the background are "
    "sure object seeds, then cv2.watershed grows them. Returns region_count (objects, background "
    "excluded) and the largest `max_regions` regions with label, area (pixels), bbox [x1, y1, x2, y2] and "
    "centroid [x, y]. The output image has region boundaries (and the image border) painted in `color`.",
    (
        Param("objects", "str", "Whether objects are brighter ('bright') or darker ('dark') than the background.",
              "bright", choices=("bright", "dark")),
        Param("fg_ratio", "float", "Seed threshold as a fraction of the largest distance to background (0-1).", 0.5, 0.01, 0.99),
        Param("max_regions", "int", "Maximum number of regions listed.", 20, 1, 500),
        _color_param((255, 0, 0), "Boundary color"),
    ),
    watershed_cv, category="analysis",
    examples=({}, {"objects": "dark", "max_regions": 5}, {"fg_ratio": 0.3, "color": [0, 0, 255]}),
))


# == GrabCut ===================================================================================================
_GRABCUT_PRESETS = {"center": (0.1, 0.8), "tight": (0.2, 0.6), "loose": (0.05, 0.9)}


def _grabcut_rect(box, preset, height, width):
    if box is None:
        offset, size = _GRABCUT_PRESETS[preset]
        return int(width * offset), int(height * offset), int(width * size), int(height * size)
    x1, y1, x2, y2 = (int(v) for v in box)
    x1, x2 = min(x1, x2), max(x1, x2)
    y1, y2 = min(y1, y2), max(y1, y2)
    return x1, y1, x2 - x1, y2 - y1


def _grabcut_check(args, height, width):
    x, y, w, h = _grabcut_rect(args["box"], args["preset"], height, width)
    where = "box" if args["box"] is not None else "preset"
    if x < 0 or y < 0 or x + w > width or y + h > height:
        raise ToolArgumentError("grabcut", where, f"the box [{x}, {y}, {x + w}, {y + h}] leaves the {width}x{height} image")
    if w < 2 or h < 2:
        raise ToolArgumentError("grabcut", where, f"the box [{x}, {y}, {x + w}, {y + h}] is smaller than 2x2 pixels")
    if w * h >= width * height:
        raise ToolArgumentError("grabcut", where, "the box covers the whole image; leave some background outside it")


def grabcut_cv(image, box, preset, iterations):
    rgb = _rgb3(image)
    rect = _grabcut_rect(box, preset, *image.shape[:2])
    mask = np.zeros(image.shape[:2], np.uint8)
    cv2.setRNGSeed(0)  # grabCut's k-means initialisation draws from OpenCV's RNG: make it reproducible
    cv2.grabCut(rgb, mask, rect, np.zeros((1, 65), np.float64), np.zeros((1, 65), np.float64), iterations,
                cv2.GC_INIT_WITH_RECT)
    fg = (mask == cv2.GC_FGD) | (mask == cv2.GC_PR_FGD)
    out = image * (fg[:, :, None] if image.ndim == 3 else fg).astype(np.uint8)
    count = int(fg.sum())
    data = {"rect": _box(*rect), "foreground_pixels": count, "foreground_fraction": _r(count / fg.size, 4)}
    if count:
        ys, xs = np.nonzero(fg.any(axis=1))[0], np.nonzero(fg.any(axis=0))[0]
        data["foreground_bbox"] = [int(xs[0]), int(ys[0]), int(xs[-1]) + 1, int(ys[-1]) + 1]
    return out, data


register(Op(
    "grabcut",
    "Segment the foreground object inside a box with GrabCut (cv2.grabCut, initialised from the "
    "rectangle; everything outside the box is background). Give `box` [x1, y1, x2, y2] in pixels, or a "
    "`preset`: 'center' (the middle 80% of each side), 'tight' (60%), 'loose' (90%). The output image is "
    "the input with background pixels set to black; data gives foreground pixel count, fraction of the "
    "image, and the foreground bounding box.",
    (
        Param("box", "floats", "Box [x1, y1, x2, y2] around the object (pixels); overrides preset.", None, length=4),
        Param("preset", "str", "Box used when no box is given.", "center", choices=tuple(_GRABCUT_PRESETS)),
        Param("iterations", "int", "GrabCut iterations.", 5, 1, 20),
    ),
    grabcut_cv, check=_grabcut_check, category="analysis",
    examples=({}, {"preset": "tight", "iterations": 2}, {"box": [8, 6, 50, 40], "iterations": 3}),
))


# == flood fill ===================================================================================================
def _flood_check(args, height, width):
    for name, value, limit in (("x", args["x"], width), ("y", args["y"], height)):
        if value >= limit:
            raise ToolArgumentError("flood_fill", name, f"{value} is outside the {width}x{height} image (allowed 0-{limit - 1})")


def flood_fill_cv(image, x, y, lo_diff, up_diff, color, connectivity, fixed_range):
    h, w = image.shape[:2]
    mask = np.zeros((h + 2, w + 2), np.uint8)
    flags = connectivity | (255 << 8) | (cv2.FLOODFILL_FIXED_RANGE if fixed_range else 0)
    if image.ndim == 3:
        canvas = image.copy()
        area, _, _, rect = cv2.floodFill(canvas, mask, (x, y), tuple(color), tuple(lo_diff), tuple(up_diff), flags)
    else:  # fill on the gray values (first entry of lo_diff / up_diff), paint the color on an RGB copy
        area, _, _, rect = cv2.floodFill(image, mask, (x, y), 0, lo_diff[0], up_diff[0], flags | cv2.FLOODFILL_MASK_ONLY)
        canvas = cv2.cvtColor(image, cv2.COLOR_GRAY2RGB)
        canvas[mask[1:-1, 1:-1] > 0] = color
    return canvas, {"seed": [x, y], "filled_pixels": int(area), "filled_fraction": _r(area / (h * w), 4), "bbox": _box(*rect)}


def flood_fill_torch(batch, x, y, lo_diff, up_diff, color, connectivity, fixed_range):
    n, c, h, w = batch.shape
    dev = batch.device
    src = batch.to(torch.int16)
    lo = torch.tensor(lo_diff[:c], device=dev, dtype=torch.int16).view(1, c, 1, 1)
    up = torch.tensor(up_diff[:c], device=dev, dtype=torch.int16).view(1, c, 1, 1)
    xs = torch.tensor(x, device=dev)
    ys = torch.tensor(y, device=dev)
    idx = torch.arange(n, device=dev)
    seed_flat = idx * h * w + ys * w + xs
    offsets = _OFFSETS4 if connectivity == 4 else _OFFSETS8
    if fixed_range:
        seed_val = src[idx, :, ys, xs].view(n, c, 1, 1)
        ok = ((src >= seed_val - lo) & (src <= seed_val + up)).all(dim=1)
        links = [(dy, dx, ok & _shift(ok, dy, dx, False)) for dy, dx in _FORWARD[connectivity]]
        lab = _min_label(ok, links)
        region = lab == lab.flatten()[seed_flat].view(n, 1, 1)
    else:
        # p reaches its neighbor q = p + d when src(p) - lo <= src(q) <= src(p) + up (every channel)
        reach = []
        for dy, dx in offsets:
            diff = _shift(src, dy, dx, 0) - src  # src(q) - src(p)
            inside = _shift(torch.ones((n, h, w), dtype=torch.bool, device=dev), dy, dx, False)
            reach.append((dy, dx, ((diff >= -lo) & (diff <= up)).all(dim=1) & inside))
        if torch.equal(lo, up):  # symmetric links: connected components of the seed
            forward = [link for link in reach if (link[0], link[1]) in _FORWARD[connectivity]]
            lab = _min_label(torch.ones((n, h, w), dtype=torch.bool, device=dev), forward)
            region = lab == lab.flatten()[seed_flat].view(n, 1, 1)
        else:  # directed links: propagate from the seed until nothing changes
            region = torch.zeros((n, h, w), dtype=torch.bool, device=dev)
            region[idx, ys, xs] = True
            while True:
                prev = region
                for _ in range(8):
                    grown = region
                    for dy, dx, link in reach:
                        # q is reached from p = q - d when p is in the region and link[p] holds
                        grown = grown | _shift(region & link, -dy, -dx, False)
                    region = grown
                if torch.equal(region, prev):
                    break
    canvas = batch if c == 3 else batch.expand(n, 3, h, w)
    paint = torch.tensor(color, device=dev, dtype=torch.uint8).view(1, 3, 1, 1)
    out = torch.where(region[:, None], paint, canvas)
    area = region.sum(dim=(1, 2))
    rows, cols = region.any(dim=2), region.any(dim=1)
    ar_h, ar_w = torch.arange(h, device=dev), torch.arange(w, device=dev)
    y1 = torch.where(rows, ar_h, h).amin(1)
    y2 = torch.where(rows, ar_h, -1).amax(1) + 1
    x1 = torch.where(cols, ar_w, w).amin(1)
    x2 = torch.where(cols, ar_w, -1).amax(1) + 1
    stats = torch.stack([area, x1, y1, x2, y2], 1).cpu().tolist()
    data = [{"seed": [x[k], y[k]], "filled_pixels": a, "filled_fraction": _r(a / (h * w), 4), "bbox": [bx1, by1, bx2, by2]}
            for k, (a, bx1, by1, bx2, by2) in enumerate(stats)]
    return out, data


register(Op(
    "flood_fill",
    "Flood fill from the seed pixel (x, y) (cv2.floodFill): paint `color` over the connected region of "
    "similar pixels. With fixed_range a pixel joins when every channel lies within [seed - lo_diff, seed + "
    "up_diff]; without it, when it lies within that range of an already filled neighbour (a gradual "
    "change can spread). Gray images use the first entry of lo_diff/up_diff. The output image is RGB with "
    "the region painted; data gives filled_pixels, filled_fraction and the region's bbox [x1, y1, x2, y2].",
    (
        Param("x", "int", "Seed column (pixels from the left).", 0, 0, 1 << 20),
        Param("y", "int", "Seed row (pixels from the top).", 0, 0, 1 << 20),
        Param("lo_diff", "ints", "How much darker than the reference each channel may be [R, G, B] (0-255).", (10, 10, 10), 0, 255, length=3),
        Param("up_diff", "ints", "How much brighter than the reference each channel may be [R, G, B] (0-255).", (10, 10, 10), 0, 255, length=3),
        _color_param((0, 255, 0), "Fill color"),
        Param("connectivity", "int", "4 = spread through edge neighbours; 8 = also diagonal.", 4, choices=(4, 8)),
        Param("fixed_range", "bool", "Compare with the seed (true) or with the neighbour (false).", True),
    ),
    flood_fill_cv, flood_fill_torch, vectorized=("x", "y"), check=_flood_check, category="analysis",
    examples=(
        {"x": 5, "y": 5}, {"x": 30, "y": 20, "connectivity": 8, "lo_diff": [20, 20, 20], "up_diff": [20, 20, 20]},
        {"x": 10, "y": 40, "fixed_range": False, "lo_diff": [3, 3, 3], "up_diff": [3, 3, 3], "color": [255, 0, 255]},
        {"x": 60, "y": 2, "fixed_range": False, "lo_diff": [2, 6, 4], "up_diff": [5, 1, 4], "connectivity": 8},
        {"x": 0, "y": 47, "lo_diff": [40, 5, 5], "up_diff": [0, 30, 30]},
    ),
))


# == template matching ============================================================================================
_TM = {"ccoeff_normed": cv2.TM_CCOEFF_NORMED, "ccorr_normed": cv2.TM_CCORR_NORMED, "sqdiff_normed": cv2.TM_SQDIFF_NORMED,
       "ccoeff": cv2.TM_CCOEFF, "ccorr": cv2.TM_CCORR, "sqdiff": cv2.TM_SQDIFF}


def _hw(image) -> tuple:
    """(height, width) of a numpy (H, W[, C]) or torch (C, H, W) image."""
    return tuple(image.shape[-2:]) if isinstance(image, torch.Tensor) else tuple(image.shape[:2])


def _template_check(args, height, width):
    th, tw = _hw(args["template"])
    if th > height or tw > width:
        raise ToolArgumentError("template_match", "template",
                                f"is {tw}x{th} pixels, larger than the {width}x{height} image; crop a smaller template")


def _box_outline(canvas: np.ndarray, x1, y1, x2, y2, color, thickness):
    """A sharp-cornered outline drawn inside the box [x1, x2) x [y1, y2)."""
    t = max(1, min(thickness, (x2 - x1 + 1) // 2, (y2 - y1 + 1) // 2))
    canvas[y1:y1 + t, x1:x2] = color
    canvas[y2 - t:y2, x1:x2] = color
    canvas[y1:y2, x1:x1 + t] = color
    canvas[y1:y2, x2 - t:x2] = color


def _match_data(method, score, x, y, tw, th):
    return {"method": method, "score": _r(score, 4) if method.endswith("normed") else _r(score, 1),
            "box": [x, y, x + tw, y + th], "center": [_r(x + tw / 2, 1), _r(y + th / 2, 1)], "template_size": [tw, th]}


def template_match_cv(image, template, method, color, thickness):
    if image.ndim == 3 and template.ndim == 2:
        template = cv2.cvtColor(template, cv2.COLOR_GRAY2RGB)
    elif image.ndim == 2 and template.ndim == 3:
        template = cv2.cvtColor(template, cv2.COLOR_RGB2GRAY)
    scores = cv2.matchTemplate(image, template, _TM[method])
    lo, hi, lo_at, hi_at = cv2.minMaxLoc(scores)
    score, (x, y) = (lo, lo_at) if method.startswith("sqdiff") else (hi, hi_at)
    th, tw = template.shape[:2]
    canvas = _canvas(image)
    _box_outline(canvas, x, y, x + tw, y + th, color, thickness)
    return canvas, _match_data(method, score, x, y, tw, th)


def _integral_window(x: torch.Tensor, th: int, tw: int) -> torch.Tensor:
    """Sum of x over every th x tw window: (N, C, H, W) -> (N, C, H-th+1, W-tw+1), float64."""
    s = F.pad(x.cumsum(-1).cumsum(-2), (1, 0, 1, 0))
    return s[..., th:, tw:] - s[..., :-th, tw:] - s[..., th:, :-tw] + s[..., :-th, :-tw]


def _match_scores(images: torch.Tensor, templ: torch.Tensor, method: str) -> torch.Tensor:
    """cv2.matchTemplate for a batch (N, C, H, W) and templates (N, C, th, tw), float64 -> (N, oh, ow)."""
    n, c, h, w = images.shape
    th, tw = templ.shape[-2:]
    # correlation by FFT in float64 (circular, but the valid window never wraps)
    spectrum = torch.fft.rfft2(images) * torch.fft.rfft2(templ, s=(h, w)).conj()
    num = torch.fft.irfft2(spectrum.sum(1), s=(h, w))[:, :h - th + 1, :w - tw + 1]
    if method == "ccorr":
        return num
    area = th * tw
    t_mean = templ.mean(dim=(-2, -1))  # (N, C)
    t_sq = (templ * templ).mean(dim=(-2, -1))
    wsum = _integral_window(images, th, tw)
    wnd_mean2 = torch.zeros_like(num)
    if method.startswith("ccoeff"):
        num = num - (wsum * t_mean.view(n, c, 1, 1)).sum(1)
        wnd_mean2 = (wsum * wsum).sum(1) / area
        if method == "ccoeff":
            return num
    wnd_sum2 = _integral_window(images * images, th, tw).sum(1)
    t_var = (t_sq - t_mean * t_mean).sum(1)  # sum over channels of the population variances
    t_sum2 = (t_var + (t_mean * t_mean).sum(1)) * area
    if method.startswith("sqdiff"):
        num = (wnd_sum2 - 2 * num + t_sum2.view(n, 1, 1)).clamp_min(0)
        if method == "sqdiff":
            return num
    norm = t_var if method == "ccoeff_normed" else t_sum2 / area
    t_norm = (norm.sqrt() * math.sqrt(area)).view(n, 1, 1)
    diff2 = (wnd_sum2 - wnd_mean2).clamp_min(0)
    t = torch.where(diff2 <= torch.clamp(10 * 1.1920929e-07 * wnd_sum2, max=0.5), 0.0, diff2.sqrt() * t_norm)
    other = torch.where(num.abs() < t * 1.125, torch.sign(num), torch.full_like(num, 1.0 if method == "sqdiff_normed" else 0.0))
    out = torch.where(num.abs() < t, num / torch.where(t > 0, t, 1.0), other)
    if method == "ccoeff_normed":
        out = torch.where((t_var < 2.220446049250313e-16).view(n, 1, 1), torch.ones_like(out), out)
    return out


def template_match_torch(batch, template, method, color, thickness):
    n, c, h, w = batch.shape
    images = batch.double()
    templs = []
    for t in template:
        if t.shape[0] != c:
            t = gray_torch(t[None])[0] if c == 1 else t.expand(3, *t.shape[-2:])
        templs.append(t.double())
    shapes = sorted({tuple(t.shape) for t in templs})
    best = [None] * n
    for shape in shapes:
        members = [k for k in range(n) if tuple(templs[k].shape) == shape]
        scores = _match_scores(images[members], torch.stack([templs[k] for k in members]), method).float()
        flat = scores.flatten(1)
        pick = flat.argmin(1) if method.startswith("sqdiff") else flat.argmax(1)
        vals = flat.gather(1, pick[:, None])[:, 0]
        ow = scores.shape[-1]
        for k, p, v in zip(members, pick.cpu().tolist(), vals.cpu().tolist()):
            best[k] = (p % ow, p // ow, v, shape[-1], shape[-2])
    canvas = (batch if c == 3 else batch.expand(n, 3, h, w)).clone()
    paint = torch.tensor(color, device=batch.device, dtype=torch.uint8).view(3, 1, 1)
    data = []
    for k, (x, y, v, tw, th) in enumerate(best):
        t = max(1, min(thickness, (tw + 1) // 2, (th + 1) // 2))
        img = canvas[k]
        img[:, y:y + t, x:x + tw] = paint
        img[:, y + th - t:y + th, x:x + tw] = paint
        img[:, y:y + th, x:x + t] = paint
        img[:, y:y + th, x + tw - t:x + tw] = paint
        data.append(_match_data(method, v, x, y, tw, th))
    return canvas, data


register(Op(
    "template_match",
    "Find where a small template image best matches inside the image (cv2.matchTemplate + minMaxLoc). "
    "`method`: 'ccoeff_normed' (default; score -1..1, 1 = perfect, robust to brightness), 'ccorr_normed' "
    "(0..1), 'sqdiff_normed' (0 = perfect, lower is better), or the unnormalised 'ccoeff', 'ccorr', "
    "'sqdiff'. Returns the best match box [x1, y1, x2, y2] (pixels, the template's size), its center and "
    "score; the output image has the box outlined. A color template is converted to gray for a gray "
    "image and vice versa.",
    (
        Param("template", "image", "The template image (must not be larger than the image)."),
        Param("method", "str", "Matching score.", "ccoeff_normed", choices=tuple(_TM)),
        _color_param((255, 0, 0), "Box color"), _thickness_param(),
    ),
    template_match_cv, template_match_torch, vectorized=("template",), check=_template_check, category="analysis",
    tolerance=Tolerance(why="exact box and image; scores agree to float32 rounding (OpenCV correlates in float32 "
                        "via DFT, torch in float64). Exact ties between positions (flat synthetic areas) are "
                        "broken by OpenCV's rounding noise, so there the box may be another equally good one"),
    examples=tuple(
        {"template": tpl, "method": m, **extra}
        for tpl, m, extra in (
            (np.ascontiguousarray(np.random.default_rng(11).integers(0, 256, (9, 13, 3), dtype=np.uint8)), "ccoeff_normed", {}),
            (np.ascontiguousarray(np.random.default_rng(12).integers(0, 256, (16, 12), dtype=np.uint8)), "ccorr_normed", {"thickness": 1}),
            (np.ascontiguousarray(np.random.default_rng(13).integers(0, 256, (7, 7, 3), dtype=np.uint8)), "sqdiff_normed", {"color": [0, 0, 255]}),
            (np.ascontiguousarray(np.random.default_rng(14).integers(0, 256, (11, 20, 3), dtype=np.uint8)), "ccoeff", {"thickness": 3}),
            (np.ascontiguousarray(np.random.default_rng(15).integers(0, 256, (5, 9, 3), dtype=np.uint8)), "sqdiff", {}),
            (np.ascontiguousarray(np.random.default_rng(16).integers(0, 256, (6, 6), dtype=np.uint8)), "ccorr", {}),
        )
    ),
))


# == difference =====================================================================================================
def _difference_check(args, height, width):
    if _hw(args["other"]) != (height, width):
        oh, ow = _hw(args["other"])
        raise ToolArgumentError("difference", "other",
                                f"is {ow}x{oh} pixels but the image is {width}x{height}; crop or resize one of them "
                                "so both have the same size")


def _difference_data(changed, grid) -> dict:
    """What changed, from the (H, W) boolean numpy mask of changed pixels."""
    h, w = changed.shape
    count = int(changed.sum())
    data = {"changed_pixels": count, "changed_fraction": _r(count / (h * w), 6), "box": None}
    if count:
        ys, xs = np.nonzero(changed.any(1)), np.nonzero(changed.any(0))
        data["box"] = [int(xs[0][0]), int(ys[0][0]), int(xs[0][-1]) + 1, int(ys[0][-1]) + 1]
    if grid is not None:
        rows, cols = grid
        ys, xs = [r * h // rows for r in range(rows + 1)], [c * w // cols for c in range(cols + 1)]
        data["cells"] = [r * cols + c + 1 for r in range(rows) for c in range(cols)
                         if changed[ys[r]:ys[r + 1], xs[c]:xs[c + 1]].any()]
    return data


def difference_cv(image, other, threshold, grid):
    if image.ndim == 2 and other.ndim == 3:
        other = gray_cv(other)
    elif image.ndim == 3 and other.ndim == 2:
        other = cv2.cvtColor(other, cv2.COLOR_GRAY2RGB)
    diff = cv2.absdiff(image, other)
    largest = diff if diff.ndim == 2 else cv2.max(cv2.max(diff[..., 0], diff[..., 1]), diff[..., 2])  # 10x diff.max(2)
    return diff, _difference_data(largest > threshold, grid)


def difference_torch(batch, other, threshold, grid):
    c = batch.shape[1]
    others = torch.stack([gray_torch(o[None])[0] if c == 1 and o.shape[0] == 3 else o.expand(c, *o.shape[-2:])
                          for o in other])
    diff = (batch.to(torch.int16) - others.to(torch.int16)).abs().to(torch.uint8)
    changed = (diff.amax(1) > threshold).cpu().numpy()
    return diff, [_difference_data(mask, grid) for mask in changed]


register(Op(
    "difference",
    "Compare two images of the same size pixel by pixel (cv2.absdiff): the output image is |image - other| "
    "per channel (black where they agree, bright where they differ). A color image is compared with a gray "
    "one in gray. Returns `changed_pixels` (pixels whose largest channel difference exceeds `threshold`), "
    "`changed_fraction`, `box` [x1, y1, x2, y2] around all changed pixels (null when none), and with `grid` "
    "= [rows, columns] the `cells` that contain a change: the image is split into rows x columns equal "
    "cells numbered 1, 2, ... row by row from the top-left, as in spot-the-difference puzzles.",
    (
        Param("other", "image", "The image to compare with (same width and height)."),
        Param("threshold", "int", "A pixel counts as changed when some channel differs by more than this "
                                  "(0 = any change; raise it to ignore compression noise).", 0, 0, 254),
        Param("grid", "ints", "Report which cells of a [rows, columns] grid contain a change.", None, 1, 64, length=2),
    ),
    difference_cv, difference_torch, vectorized=("other",), check=_difference_check, category="analysis",
    examples=tuple(
        {"other": other, **extra}
        for other, extra in (
            (np.ascontiguousarray(np.random.default_rng(21).integers(0, 256, (48, 64, 3), dtype=np.uint8)), {}),
            (np.ascontiguousarray(np.random.default_rng(22).integers(0, 256, (48, 64), dtype=np.uint8)), {"threshold": 40, "grid": [3, 4]}),
            (np.ascontiguousarray(np.random.default_rng(23).integers(0, 256, (48, 64, 3), dtype=np.uint8)), {"threshold": 200, "grid": [5, 7]}),
        )
    ),
))


# == keypoints ======================================================================================================
_KEYPOINT_METHODS = ("orb", "sift", "fast", "harris", "shi_tomasi")


def keypoints_cv(image, method, max_points, quality_level, min_distance, fast_threshold, color):
    gray = gray_cv(image)
    pts = []  # (x, y, response, size)
    if method == "harris":
        r = cv2.cornerHarris(np.float32(gray), 2, 3, 0.04)
        peak = r.max()
        if peak > 0:
            ys, xs = np.nonzero((r == cv2.dilate(r, None)) & (r > quality_level * peak))
            pts = [(float(x), float(y), float(r[y, x]), None) for y, x in zip(ys, xs)]
    elif method == "shi_tomasi":
        found = cv2.goodFeaturesToTrack(gray, max_points, quality_level, min_distance)
        eig = cv2.cornerMinEigenVal(gray, 3) if found is not None else None
        if found is not None:
            pts = [(float(x), float(y), float(eig[int(y), int(x)]), None) for x, y in found.reshape(-1, 2)]
    else:
        if method == "fast":
            detector = cv2.FastFeatureDetector_create(fast_threshold, True)
        elif method == "orb":
            detector = cv2.ORB_create(max(500, max_points))
        else:
            detector = cv2.SIFT_create()
        pts = [(kp.pt[0], kp.pt[1], kp.response, kp.size) for kp in detector.detect(gray, None)]
    pts.sort(key=lambda p: (-p[2], p[1], p[0]))
    chosen = pts[:max_points]
    canvas = _canvas(image)
    for x, y, _, size in chosen:
        center = (int(round(x)), int(round(y)))
        if size:
            cv2.circle(canvas, center, max(2, int(round(size / 2))), tuple(color), 1, cv2.LINE_AA)
        cv2.circle(canvas, center, 2, tuple(color), -1)
    points = []
    for x, y, resp, size in chosen:
        p = {"x": _r(x, 2), "y": _r(y, 2), "response": float(f"{resp:.6g}")}
        if size is not None:
            p["size"] = _r(size, 2)
        points.append(p)
    return canvas, {"method": method, "total_points": len(pts), "returned_points": len(points), "points": points}


register(Op(
    "keypoints",
    "Detect interest points (corners / blobs): 'orb' (cv2.ORB), 'sift' (cv2.SIFT), 'fast' (FAST corners), "
    "'harris' (cornerHarris, local maxima above quality_level * strongest), 'shi_tomasi' "
    "(goodFeaturesToTrack). Returns up to max_points points, strongest first, as x, y (pixels), response "
    "(detector strength) and size (feature diameter, ORB/SIFT/FAST only); the output image marks them.",
    (
        Param("method", "str", "Detector.", "orb", choices=_KEYPOINT_METHODS),
        Param("max_points", "int", "Maximum number of points returned.", 50, 1, 1000),
        Param("quality_level", "float", "harris / shi_tomasi: keep points with response >= this fraction of the "
              "strongest.", 0.01, 0.0001, 1),
        Param("min_distance", "float", "shi_tomasi: minimum distance between points (pixels).", 5, 0, 10000),
        Param("fast_threshold", "int", "fast: intensity difference threshold (0-255).", 10, 1, 255),
        _color_param((255, 0, 0), "Marker color"),
    ),
    keypoints_cv, category="analysis",
    examples=({}, {"method": "sift", "max_points": 10}, {"method": "fast", "fast_threshold": 20},
              {"method": "harris", "quality_level": 0.05, "color": [0, 255, 0]},
              {"method": "shi_tomasi", "max_points": 25, "min_distance": 3}),
))


# == inpaint ===========================================================================================================
def _inpaint_check(args, height, width):
    if args["mask"] == "box":
        if args["box"] is None:
            raise ToolArgumentError("inpaint", "box", "is required when mask is 'box'")
        x1, y1, x2, y2 = (int(v) for v in args["box"])
        if min(x1, x2) < 0 or min(y1, y2) < 0 or max(x1, x2) > width or max(y1, y2) > height:
            raise ToolArgumentError("inpaint", "box", f"{list(args['box'])} leaves the {width}x{height} image")
    elif args["box"] is not None:
        raise ToolArgumentError("inpaint", "box", "is only used with mask='box'")


def inpaint_cv(image, mask, box, canny_low, canny_high, threshold, radius, method):
    if mask == "box":
        x1, y1, x2, y2 = (int(v) for v in box)
        region = np.zeros(image.shape[:2], np.uint8)
        region[min(y1, y2):max(y1, y2), min(x1, x2):max(x1, x2)] = 255
    elif mask == "canny":
        region = cv2.dilate(cv2.Canny(gray_cv(image), canny_low, canny_high), np.ones((3, 3), np.uint8), iterations=1)
    else:
        region = cv2.threshold(gray_cv(image), threshold, 255, cv2.THRESH_BINARY if mask == "bright" else cv2.THRESH_BINARY_INV)[1]
        if mask == "dark":  # strictly darker than the threshold
            region[gray_cv(image) == threshold] = 0
    out = cv2.inpaint(image, region, radius, cv2.INPAINT_TELEA if method == "telea" else cv2.INPAINT_NS)
    count = int(cv2.countNonZero(region))
    return out, {"mask": mask, "mask_pixels": count, "mask_fraction": _r(count / region.size, 4)}


register(Op(
    "inpaint",
    "Fill in (repaint from the surroundings) the pixels of a mask with cv2.inpaint. `mask`: 'canny' = "
    "Canny edges (canny_low/canny_high) dilated by 1 pixel, e.g. to erase thin lines or text; 'bright' = "
    "gray > threshold (glare, white marks); 'dark' = gray < threshold; 'box' = the rectangle `box` "
    "[x1, y1, x2, y2] (remove an object). `method`: 'telea' or 'ns' (Navier-Stokes). Returns the repaired "
    "image and how many pixels were masked.",
    (
        Param("mask", "str", "Which pixels are repainted.", "canny", choices=("canny", "bright", "dark", "box")),
        Param("box", "floats", "Region [x1, y1, x2, y2] in pixels, for mask='box'.", None, length=4),
        Param("canny_low", "int", "Canny lower threshold (mask='canny').", 100, 0, 1000),
        Param("canny_high", "int", "Canny upper threshold (mask='canny').", 200, 0, 1000),
        Param("threshold", "int", "Gray threshold 0-255 (mask='bright' / 'dark').", 127, 0, 255),
        Param("radius", "int", "Neighbourhood radius used to repaint each pixel (pixels).", 3, 1, 50),
        Param("method", "str", "Inpainting algorithm.", "telea", choices=("telea", "ns")),
    ),
    inpaint_cv, check=_inpaint_check, category="analysis",
    examples=({}, {"mask": "bright", "threshold": 200, "method": "ns"}, {"mask": "dark", "threshold": 40, "radius": 5},
              {"mask": "box", "box": [10, 10, 30, 25]}),
))


# == measure ===========================================================================================================
def _segment_length(seg) -> float:
    return math.hypot(seg[2] - seg[0], seg[3] - seg[1])


def _measure_check(args, height, width):
    for name in ("points", "scale_bar"):
        seg = args[name]
        if seg is None:
            continue
        x1, y1, x2, y2 = seg
        if min(x1, x2) < 0 or min(y1, y2) < 0 or max(x1, x2) > width or max(y1, y2) > height:
            raise ToolArgumentError("measure", name, f"{list(seg)} leaves the {width}x{height} image (pixel coordinates: x in [0, {width}], y in [0, {height}])")
    if args["scale_bar"] is not None:
        if args["pixels_per_unit"] is not None:
            raise ToolArgumentError("measure", "pixels_per_unit", "give either pixels_per_unit or scale_bar, not both")
        if args["scale_bar_length"] is None:
            raise ToolArgumentError("measure", "scale_bar_length", "is required with scale_bar (the length the bar stands for, in `unit`)")
        if _segment_length(args["scale_bar"]) == 0:
            raise ToolArgumentError("measure", "scale_bar", "has zero length; give its two different end points")
    elif args["scale_bar_length"] is not None:
        raise ToolArgumentError("measure", "scale_bar", "is required with scale_bar_length")


def measure_cv(image, points, pixels_per_unit, scale_bar, scale_bar_length, unit, color, thickness):
    x1, y1, x2, y2 = points
    dx, dy = x2 - x1, y2 - y1
    length = math.hypot(dx, dy)
    angle = math.degrees(math.atan2(-dy, dx)) if length else 0.0
    data = {"points": [_r(v, 2) for v in points], "dx": _r(dx, 2), "dy": _r(dy, 2), "length_px": _r(length),
            "angle": _r(angle, 2), "orientation": _r(_orientation(dx, dy), 2)}
    canvas = _canvas(image)
    p1, p2 = (int(round(x1)), int(round(y1))), (int(round(x2)), int(round(y2)))
    text = f"{length:.1f}px"
    if scale_bar is not None:
        pixels_per_unit = _segment_length(scale_bar) / scale_bar_length
        b1, b2 = (int(round(scale_bar[0])), int(round(scale_bar[1]))), (int(round(scale_bar[2])), int(round(scale_bar[3])))
        cv2.line(canvas, b1, b2, (0, 160, 255), thickness)
        data["scale_bar"] = {"length_px": _r(_segment_length(scale_bar)), "length": scale_bar_length}
    if pixels_per_unit is not None:
        data.update({"pixels_per_unit": _r(pixels_per_unit, 6), "unit": unit, "length": _r(length / pixels_per_unit, 6)})
        text = f"{length / pixels_per_unit:.4g} {unit}"
    cv2.line(canvas, p1, p2, tuple(color), thickness)
    for p in (p1, p2):
        cv2.circle(canvas, p, thickness + 1, tuple(color), -1)
    _label(canvas, text, (p1[0] + p2[0]) / 2 + 4, (p1[1] + p2[1]) / 2 - 4, color)
    return canvas, data


register(Op(
    "measure",
    "Measure the segment between two points you give, `points` = [x1, y1, x2, y2] in pixels. Returns dx, "
    "dy, length_px (Euclidean distance in pixels), angle (degrees in (-180, 180], direction from point 1 "
    "to point 2, counter-clockwise from the +x axis as seen on screen: 0 = right, 90 = up, -90 = down; "
    "image y grows downward) and orientation (the same line without direction, in [0, 180)). To convert "
    "to physical units give pixels_per_unit, or a scale bar: its end points `scale_bar` [x1, y1, x2, y2] "
    "and the length it stands for `scale_bar_length` (in `unit`); then `length` = length_px / "
    "pixels_per_unit. The output image shows the segment (and scale bar) with the length written.",
    (
        Param("points", "floats", "Segment end points [x1, y1, x2, y2] in pixels.", length=4),
        Param("pixels_per_unit", "float", "Scale: how many pixels make one unit.", None, 1e-9, 1e9),
        Param("scale_bar", "floats", "End points [x1, y1, x2, y2] of a scale bar in the image (pixels).", None, length=4),
        Param("scale_bar_length", "float", "The length the scale bar represents, in `unit`.", None, 1e-12, 1e12),
        Param("unit", "str", "Name of the physical unit (e.g. 'mm', 'm', 'km').", "unit"),
        _color_param((255, 0, 0)), _thickness_param(),
    ),
    measure_cv, check=_measure_check, category="analysis",
    examples=({"points": [5, 40, 60, 10]}, {"points": [0, 0, 30, 40], "pixels_per_unit": 2.5, "unit": "mm"},
              {"points": [10, 10, 10, 45], "scale_bar": [40, 44, 60, 44], "scale_bar_length": 5, "unit": "cm"}),
))
