"""`visualtoolbench`: the atomic vision tools of VisualToolBench's ablation (paper App. F.2, Table 14; Figure 6),
offered by `--suite visualtoolbench --toolset visualtoolbench` in place of python_image_processing.

The ten names and their order are the paper's (both versions list the same ones: crop_image, rotate_image,
adjust_brightness, adjust_contrast, adjust_saturation, adjust_sharpness, resize_image, flip_image,
convert_to_grayscale, apply_filter). Neither version gives their parameters, and the benchmark's repository
(github.com/xi1ngang/VisualToolBench, every commit up to d4f200a) has no definition of them: the parameters here are
ours, with PIL semantics, since the names follow PIL idioms (ImageEnhance factors with 1.0 = unchanged,
counter-clockwise `Image.rotate`, `ImageFilter` names), and each tool reads the image `image_index` names (0 = the
task's image; each result is the next index). The benchmark's main tool, `python_image_processing`, runs
model-written code and belongs to the agent runtime's sandbox, not to this tool set.
"""

from tools.registry import Param
from tools.toolset import ToolSet, flat_tool, op_step
from tools.toolsets.default import IMAGE_INDEX

FILTERS = ("blur", "contour", "detail", "edge_enhance", "edge_enhance_more", "emboss", "find_edges", "sharpen",
           "smooth", "smooth_more")


def _tool(name, doc, params, steps):
    return flat_tool(name, doc, (IMAGE_INDEX, *params), steps, image=lambda a: a["image_index"])


def _enhance(what, meaning):
    return _tool(
        f"adjust_{what}",
        f"Adjust the image's {what}: factor 1.0 leaves it unchanged, {meaning}.",
        (Param("factor", "float", "Enhancement factor (1.0 = unchanged).", low=0, high=10),),
        lambda a: [op_step(f"adjust_{what}", factor=a["factor"])],
    )


TOOLSET = ToolSet(
    "visualtoolbench",
    "VisualToolBench's atomic vision tools (names from the paper; parameters tirlab's, PIL semantics).",
    (
        _tool("crop_image", "Crop the box [x1, y1, x2, y2] in pixels (x2, y2 exclusive; clipped to the image).",
              (Param("box", "floats", "Box [x1, y1, x2, y2] in pixels.", length=4),),
              lambda a: [op_step("crop", box=list(a["box"]), units="pixels", bounds="clamp")]),
        _tool("rotate_image",
              "Rotate the image by `angle` degrees, positive = counter-clockwise; `expand` grows the canvas to fit.",
              (Param("angle", "float", "Angle in degrees, positive = counter-clockwise.", low=-3600, high=3600),
               Param("expand", "bool", "Grow the canvas so no corner is cut off.", True)),
              lambda a: [op_step("rotate", angle=a["angle"], direction="counterclockwise", expand=a["expand"],
                                 interpolation="cubic")]),
        _enhance("brightness", "0 gives black and 2.0 doubles the brightness"),
        _enhance("contrast", "0 gives flat gray and higher values increase contrast"),
        _enhance("saturation", "0 gives grayscale and higher values make colors more vivid"),
        _enhance("sharpness", "0 blurs and higher values sharpen"),
        _tool("resize_image", "Resize to `width` x `height` pixels; give one of them to keep the aspect ratio.",
              (Param("width", "int", "Target width in pixels.", None, 1, 16384),
               Param("height", "int", "Target height in pixels.", None, 1, 16384)),
              lambda a: [op_step("resize", **{k: a[k] for k in ("width", "height") if a[k] is not None},
                                 interpolation="cubic")]),
        _tool("flip_image", "Mirror the image: 'horizontal' swaps left and right, 'vertical' swaps top and bottom.",
              (Param("direction", "str", "Which way to mirror.", "horizontal", choices=("horizontal", "vertical")),),
              lambda a: [op_step("flip", direction=a["direction"])]),
        _tool("convert_to_grayscale", "Convert the image to grayscale (luminance).", (),
              lambda a: [op_step("grayscale", method="pil")]),
        _tool("apply_filter", "Apply one of PIL's named filters: " + ", ".join(FILTERS) + ".",
              (Param("filter", "str", "Filter name.", choices=FILTERS),),
              lambda a: [op_step("filter", kind=a["filter"])]),
    ),
)
