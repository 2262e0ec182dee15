"""`tir_rotate`: the predefined rotation function of TIR-Bench's function-calling study (section 4.4).

The paper publishes that the model only supplies a degree and that every call rotates the ORIGINAL
image; the function's exact text is not public. This reconstruction rotates clockwise (the rotation-game
options are clockwise degrees) and expands the canvas so nothing is cut off.
"""

from tools.registry import Param
from tools.toolset import ORIGINAL, ToolSet, flat_tool, op_step

TOOLSET = ToolSet(
    "tir_rotate",
    "TIR-Bench's rotate(degree) function (reconstructed: clockwise, expanded canvas, applied to the original image).",
    (
        flat_tool(
            "rotate",
            "Rotate the original image clockwise by `degree` degrees and return the rotated image. The canvas "
            "grows so that no part of the image is cut off; multiples of 90 degrees are exact.",
            (Param("degree", "float", "Clockwise rotation in degrees, e.g. 90, 180, 270 or 15.", low=-360, high=360),),
            lambda a: [op_step("rotate", angle=a["degree"], direction="clockwise", expand=True)],
            image=lambda a: ORIGINAL,
        ),
    ),
)
