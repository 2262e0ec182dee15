"""Per-model settings: which protocol a model speaks, how it gives boxes, what it stops on, the prompts
and tools it was trained with, and its budgets. A profile is data that `Episode` and `ToolBox` read.

| profile | protocol | boxes | calls run per turn | a reply with no call and no `<answer>` |
|---|---|---|---|---|
| qwen2_5_vl | hermes, tools in the system prompt (its multimodal template has none) | pixels, min side 28 | all | the answer |
| qwen3_vl | hermes, tools through the native template | 0-1000, min side 32 | all | the answer |
| deepeyes | hermes, DeepEyes' own system prompt and turn reminder | pixels, min side 28 | the first | no answer |
| thyme | `<code>`, output inside the assistant turn, stops on `</code>` | - | the first block | the answer |
| pyvision | `<code>`, output as an `<interpreter>` user turn | - | the first block | the answer |
| agentic_mme_gen | `<code>`, Agentic-MME's Gen mode; calls win over an answer in the same turn | - | all | the answer |
| openai | OpenAI function calling; tool images in a user message | tool set's own | all | the answer |
| visualtoolbench | OpenAI function calling with `python_image_processing` | - | all | the answer |

"All" calls per turn follows Qwen's templates and vLLM's hermes parser, which read every `<tool_call>` of a
reply (parallel calls); DeepEyes' harness runs the first. A reply with neither a call nor an answer is the
answer where the published harness takes the final message (Qwen's, TIR-Bench's raw responses), and no
answer where the protocol requires the answer tag (DeepEyes): the episode stops on `no_answer`
and reports count it as a format failure.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from runtime.harness import Harness
from runtime.protocols import CodeProtocol, HermesProtocol, OpenAIProtocol, Protocol
from tools.registry import get_op
from tools.toolset import Invocation

QWEN_STOP = ("<|im_end|>",)

# Visual-Agent/DeepEyes, verl/workers/agent/envs/mm_process_engine/prompt.py (SYSTEM_PROMPT_V2, USER_PROMPT_V2)
DEEPEYES_SYSTEM = (
    "You are a helpful assistant.\n\n# Tools\nYou may call one or more functions to assist with the user query.\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
    '{"type":"function","function":{"name":"image_zoom_in_tool","description":"Zoom in on a specific region of an '
    'image by cropping it based on a bounding box (bbox) and an optional object label.","parameters":{"type":"object",'
    '"properties":{"bbox_2d":{"type":"array","items":{"type":"number"},"minItems":4,"maxItems":4,"description":"The '
    "bounding box of the region to zoom in, as [x1, y1, x2, y2], where (x1, y1) is the top-left corner and (x2, y2) "
    'is the bottom-right corner."},"label":{"type":"string","description":"The name or label of the object in the '
    'specified bounding box (optional)."}},"required":["bbox"]}}}\n</tools>\n\n# How to call a tool\n'
    "Return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
    '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>\n\n**Example**:  \n<tool_call>  \n'
    '{"name": "image_zoom_in_tool", "arguments": {"bbox_2d": [10, 20, 100, 200], "label": "the apple on the desk"}}  \n'
    "</tool_call>"
)
DEEPEYES_TURN = ("\nThink first, call **image_zoom_in_tool** if needed, then answer. Format strictly as:  "
                 "<think>...</think>  <tool_call>...</tool_call> (if tools needed)  <answer>...</answer> ")

CODE_SYSTEM = (
    "Solve the question about the image. You can write Python code in <code>```python ... ```</code> to process "
    "the image (PIL, NumPy and OpenCV are available); the code runs and you see what it prints and the images it "
    "saves to the folder in the PROCESSED_IMAGE_SAVE_PATH environment variable. Give the final answer in "
    "<answer>...</answer>."
)

# Agentic-MME's Gen-mode system prompt, word for word (general/run_general_script_openai.py REACT_SYSTEM_PROMPT at
# ChoS3nE11ven/Agentic-MME@5e5dfbd; eval/benchmarks/agentic_mme/prompts/runner.json holds it with its source). It
# names the search tools the benchmark offers as function calls: the agentic_mme suite gives them, a run of
# other tasks with this profile does not.
AMME_GEN_SYSTEM = (
    "You are a multimodal reasoning agent that solves visual questions step by step.\n"
    "\n"
    "You have access to:\n"
    "1. **Search tools** (via function calling): google_search, google_lens_search, fetch_webpage\n"
    "2. **Code execution**: Write Python code in <code> blocks for image manipulation and analysis\n"
    "\n"
    "## Image Management\n"
    "- Images are tracked by index: Image 0 is the original input, Images 1, 2, ... are processed results\n"
    "- Image N corresponds to transformed_image_N.png (e.g., Image 1 = transformed_image_1.png)\n"
    "- After your code runs, new images will be shown with their index (e.g., \"[Image 1: transformed_image_1.png]\")\n"
    "- You can reference any image by its index when using search tools\n"
    "\n"
    "## Workflow (ReAct Pattern)\n"
    "\n"
    "For each step:\n"
    "1. **Think**: Analyze what you know and what you need\n"
    "2. **Act**: Use search tools OR write code as needed\n"
    "3. **Observe**: Review results (code output and processed images will be shown with their indices)\n"
    "4. **Repeat** until you have enough information\n"
    "5. **Answer**: Provide your final answer\n"
    "\n"
    "## Response Format\n"
    "\n"
    "Use these XML blocks as needed (all are OPTIONAL):\n"
    "\n"
    "<think>\n"
    "Your reasoning process. Analyze the image, plan your approach, interpret tool results.\n"
    "</think>\n"
    "\n"
    "<code>\n"
    "Python code for image processing. \n"
    "\n"
    "Available paths (via environment variables):\n"
    "- os.environ['ORIGINAL_IMAGE_PATH']: Path to the original input image (Image 0)\n"
    "- os.environ['PROCESSED_IMAGE_SAVE_PATH']: Directory to save processed images\n"
    "\n"
    "Naming convention for saved images:\n"
    "- Save as: transformed_image_1.png, transformed_image_2.png, etc. (starting from 1)\n"
    "- Full path: os.path.join(os.environ['PROCESSED_IMAGE_SAVE_PATH'], 'transformed_image_1.png')\n"
    "- Image N corresponds to transformed_image_N.png\n"
    "\n"
    "You can read any previously saved image from the output directory, including downloaded images (downloaded_image_N.png).\n"
    "Libraries available: PIL, cv2, numpy, matplotlib, scipy\n"
    "Use print() to output values. Do NOT use display() or plt.show().\n"
    "</code>\n"
    "\n"
    "<answer>\n"
    "Your final answer. Only include when you have enough information.\n"
    "</answer>\n"
    "\n"
    "## Critical Rules\n"
    "\n"
    "1. **Do NOT combine action and answer in the same turn**: \n"
    "   - If you use <code> or call a search tool, do NOT include <answer> in the same response\n"
    "   - Wait for the results before providing your answer\n"
    "   - <answer> should only appear when you are ready to give the final answer with NO more actions needed\n"
    "\n"
    "2. **Image feedback**: After your code runs, you will automatically receive:\n"
    "   - The stdout/stderr output\n"
    "   - New images with their indices (e.g., \"[Image 1: transformed_image_1.png]\")\n"
    "   - All newly generated images displayed directly\n"
    "\n"
    "3. **Using specific images with search tools**: \n"
    "   - Use google_lens_search with \"image_path\" parameter to search a specific image\n"
    "   - Example: {\"image_path\": \"transformed_image_1.png\"} to search Image 1\n"
    "   - Or use \"image_ref\": \"original\" for Image 0, \"current\" for the latest image\n"
    "\n"
    "# 4. **Downloading images from web**: \n"
    "#    - Use download_image to fetch images from URLs found in search results\n"
    "#    - Downloaded images are saved as downloaded_image_N.png and shown to you\n"
    "#    - You can then crop/process them with <code> blocks\n"
    "\n"
    "## Important\n"
    "\n"
    "- Search tools are called via function calling, NOT in <code>\n"
    "- Code in <code> blocks will be executed locally\n"
    "- Think step by step in <think>\n"
    "- Only provide <answer> when confident and after observing all results\n"
)


@dataclass(frozen=True)
class Budgets:
    max_turns: int = 10  # model replies (DeepEyes evaluates with about 10)
    max_tool_calls: int = 20  # VisualToolBench's cap
    max_images: int = 32  # workspace images, inputs included
    max_context_tokens: int | None = None  # prompt + reply tokens, as the backend reports them
    max_image_mb: int = 256  # the decoded pixels of the tools' images an episode holds in memory

    def __post_init__(self):
        for name in ("max_turns", "max_tool_calls", "max_images", "max_image_mb"):
            if getattr(self, name) < 1:
                raise ValueError(f"budget {name} must be at least 1, got {getattr(self, name)}")


@dataclass(frozen=True)
class BoxConvention:
    """How a model's crop boxes are read, overriding the tool set's own where set: Qwen2.5-VL and
    DeepEyes give absolute pixels (minimum side 28), Qwen3-VL relative 0-1000 (minimum side 32)."""

    units: str | None = None  # "pixels" | "norm1000"
    bounds: str | None = None  # "clamp" | "error"
    min_side: int | None = None

    def apply(self, invocation: Invocation) -> Invocation:
        """`units` applies to every step with coordinates (crops and drawings), `bounds` and `min_side`
        to crops."""
        steps = []
        for step in invocation.steps:
            names = {p.name for p in get_op(step.op).params}
            overrides = {k: v for k, v in (("units", self.units), ("bounds", self.bounds), ("min_side", self.min_side))
                         if v is not None and k in names and (k == "units" or step.op == "crop")}
            steps.append(replace(step, args={**step.args, **overrides}) if overrides else step)
        return replace(invocation, steps=tuple(steps))


@dataclass(frozen=True)
class ModelProfile:
    name: str
    protocol: Protocol
    boxes: BoxConvention = BoxConvention()
    system_prompt: str | None = None
    question_suffix: str = ""  # appended to the task's question (a format reminder some models were trained with)
    toolset: str | None = None  # the image tool set the model was trained with, if any
    code_tool: str | None = None  # the code-tool interface (runtime.code_tools), if the model writes code
    budgets: Budgets = field(default_factory=Budgets)
    answer_with_calls: str = "answer"  # a reply with both an answer and calls: "answer" ends it, "calls" runs them
    harness: Harness | None = None  # a benchmark's own loop (notes, nudges, rounds without tools), if any
    max_calls_per_turn: int | None = None  # calls of a reply beyond it are answered with an error, not run
    answer_tag_required: bool = False  # a reply without a call or <answer> has no answer (else it is the answer)

    def __post_init__(self):
        if self.answer_with_calls not in ("answer", "calls"):
            raise ValueError(f"answer_with_calls must be 'answer' or 'calls', got {self.answer_with_calls!r}")
        if self.max_calls_per_turn is not None and self.max_calls_per_turn < 1:
            raise ValueError(f"max_calls_per_turn must be at least 1 (or None: no cap), got {self.max_calls_per_turn}")

    @classmethod
    def of(cls, model: "ModelProfile | Protocol") -> "ModelProfile":
        """A profile, or a bare one around a protocol (no prompts, the tool set's own boxes)."""
        return model if isinstance(model, ModelProfile) else cls(model.name, model)


PROFILES: dict[str, ModelProfile] = {p.name: p for p in (
    ModelProfile("qwen2_5_vl", HermesProtocol(tools_in="system", stop=QWEN_STOP),
                 BoxConvention("pixels", "clamp", 28)),
    ModelProfile("qwen3_vl", HermesProtocol(tools_in="template", stop=QWEN_STOP),
                 BoxConvention("norm1000", "clamp", 32)),
    ModelProfile("deepeyes", HermesProtocol(name="hermes-deepeyes", tools_in="system", stop=QWEN_STOP,
                                            response_prefix="<tool_response>", response_suffix="</tool_response>",
                                            observation_suffix=DEEPEYES_TURN, tools_prompt=DEEPEYES_SYSTEM,
                                            verbatim=True, open_calls_run=False),
                 BoxConvention("pixels", "clamp", 28), question_suffix=DEEPEYES_TURN, toolset="deepeyes",
                 budgets=Budgets(max_turns=11), max_calls_per_turn=1, answer_tag_required=True),
    ModelProfile("thyme", CodeProtocol(name="thyme", style="thyme", first_block_only=True,
                                       stop=("</code>", "</answer>", "<|im_end|>")),
                 system_prompt=CODE_SYSTEM, code_tool="thyme", budgets=Budgets(max_turns=5)),
    ModelProfile("pyvision", CodeProtocol(name="pyvision", style="pyvision", first_block_only=True,
                                          stop=("</code>", "<|im_end|>")),
                 system_prompt=CODE_SYSTEM, code_tool="pyvision"),
    ModelProfile("agentic_mme_gen", CodeProtocol(name="agentic_mme_gen", style="plain"),
                 system_prompt=AMME_GEN_SYSTEM, code_tool="agentic_mme_gen",
                 budgets=Budgets(max_turns=15, max_tool_calls=15), answer_with_calls="calls"),
    ModelProfile("openai", OpenAIProtocol(tool_images="user")),
    ModelProfile("visualtoolbench", OpenAIProtocol(name="openai-visualtoolbench", tool_images="user"),
                 code_tool="python_image_processing"),
)}


def get_profile(name: str) -> ModelProfile:
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(f"unknown model profile {name!r}; available: {', '.join(PROFILES)}") from None
