"""VTC-Bench's Thyme framework: how the paper ran DeepEyes and Thyme in the code track.

The reference (cs-w0r1d/VTC-Bench@93a33a4) runs these models through its VLMEvalKit copy, as `Custom-DeepEyes` /
`Custom-Thyme` (`vlmeval/config.py`), both `ThymeAPI` (`vlmeval/api/thyme_api.py`) over an OpenAI-compatible vLLM
server. `ThymeAPI.generate_inner` is reproduced here as rules our episode follows:

- the system prompt `REASONING_SYS_PROMPT` (its OpenCV "Toolbox" and `<code>` format), the user turn the image and
  `generate_prompt_final_qa` of the question as `ThymePromptMixin._build_mmmu_prompt` writes it;
- stop strings `</code>` and `</answer>` (the server strips them); a reply with `<answer>` (or `<|answer|>`)
  ends the item, `</answer>` appended when missing; otherwise the first `<code>` block found by the reference's
  three patterns, cleaned by `clean_code_string`, runs in the sandbox (`CELL`, the reference's
  `execute_code_in_sandbox` rules in our sandbox); a reply with neither ends the generation;
- code that gives an image or printed result comes back as a user turn: the reply again, `<sandbox_output>`, the
  output's lines and images (text parts back to back), the status text, `</sandbox_output>`; code that gives
  neither comes back as `Error: {error}. Please try a different approach.`;
- 5 model calls per generation (`max_iterations`); a generation without an answer is started again from the
  first prompt, 5 generations in all (`max_retry`), then once with the simple prompt (no code, stop `</answer>`,
  the reply wrapped in `<answer>` tags when it has none); these restarts are the suite's reruns;
- the prediction is `post_process`: the first `<answer>...</answer>` (or `<|answer|>` form), then the inside of
  `\\boxed{}`; VLMEvalKit's `BaseAPI.generate` runs the whole item again (10 times in all) while it is empty.

README.md ("Harnesses") lists what runs where and what is not reproduced.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from runtime.code_tools import CodeTool
from runtime.harness import Harness
from runtime.profiles import Budgets
from runtime.protocols import CODE_TOOL, Call, Observation, Parsed, Prompt, Protocol
from runtime.sandbox import SandboxConfig
from runtime.protocols.base import END_OF_TURN, Finish, merge_text, neutralised, reply_text, split_turn, wire_parts
from runtime.trajectory import Trajectory, text

NAME = "thyme-framework"
PRESETS = ("deepeyes", "thyme")  # the models the paper ran through it (code track)
PROMPT_FILE = Path(__file__).parent / "prompts" / "thyme_framework.json"
TEXTS = {key: entry["text"] for key, entry in json.loads(PROMPT_FILE.read_text(encoding="utf-8")).items()}
STOP = ("</code>", "</answer>")  # SPECIAL_STRING_LIST
FALLBACK_STOP = ("</answer>",)
MAX_ITERATIONS = 5  # model calls per generation
MAX_GENERATIONS = 5  # generations before the simple-prompt fallback
API_RETRIES = 10  # the config's retry: BaseAPI.generate runs generate_inner again while the answer is empty
FAIL_MESSAGE = "Failed to obtain answer via API. "  # OpenAIWrapper.fail_msg, the prediction after 10 empty answers
# vlmeval/config.py: each model's own request fields (seed 3407 is not reproduced: the run's seed derives one per turn)
SAMPLING = {"deepeyes": {"temperature": 0.0, "max_tokens": 4096},
            "thyme": {"temperature": 0.1, "top_p": 0.8, "top_k": 20, "presence_penalty": 1.5, "max_tokens": 16384}}

CODE = re.compile(r'<code>\s*(?:```\s*)?(?:python\s*)?([\s\S]*?)\s*(?:```\s*)?</code>', re.IGNORECASE)
UNCLOSED_CODE = re.compile(r'<code>\s*```(?:python|py)?\s*\n(.*?)(?:```|$)', re.DOTALL | re.IGNORECASE)
BARE_CODE = re.compile(r'<code>\s*\n((?:(?!###|\*\*|<sandbox_output>)[\s\S])*)', re.IGNORECASE)
IMAGE_MARK = "\x1ethyme-image\x1e"  # an image among an observation's parts
PART_MARK = "\x1ethyme-part\x1e"  # between an observation's parts (each printed line is one)
ERROR_MARK = "\x1ethyme-error\x1e"  # an observation that is the sandbox's error (the protocol writes the error turn)
SHOWN = re.compile(r"^thyme-shown-\d{6}\.[A-Za-z]+$")  # the copies of the images the reference attaches


def question_text(question: str, options: dict) -> str:
    """`ThymePromptMixin._build_mmmu_prompt` (the mixin's prompt for VTCBench): the question, the non-empty
    options and the instruction, right-stripped."""
    prompt = TEXTS["question"].format(question=question)
    if options:
        prompt += TEXTS["options_header"] + "".join(TEXTS["option"].format(key=k, item=v) for k, v in options.items())
        prompt += TEXTS["options_instruction"]
    return prompt.rstrip()


def user_prompt(question: str, options: dict, image_path: str, image_size: str) -> str:
    return TEXTS["final_qa"].format(user_question=question_text(question, options), user_image_path=image_path,
                                    user_image_size=image_size)


def simple_prompt(question: str, options: dict) -> str:
    return TEXTS["simple_qa"].format(user_question=question_text(question, options))


def read_turn(completion: str) -> tuple[str, bool, str | None]:
    """(the reply as the history keeps it, whether it answers, the code to run or None), as generate_inner reads
    a reply (the server's text, stripped)."""
    reply = completion.strip()
    complete = "</answer>" in reply or "<|answer|>" in reply
    incomplete = not complete and ("<answer>" in reply or reply.count("<|answer|>") > 2)
    if complete or incomplete:
        if incomplete and "</answer>" not in reply and "<|answer|>" not in reply:
            reply += "</answer>"
        return reply, True, None
    match = CODE.search(reply) or UNCLOSED_CODE.search(reply) or BARE_CODE.search(reply)
    return reply, False, clean_code_string(match.group(1).strip()) if match else None


def clean_code_string(code: str) -> str:
    """sandbox.clean_code_string: the first markdown block's code, else the fence lines dropped; a leading
    `python`/`py` line dropped; every ``` removed; the original (stripped) when less than 10 characters remain."""
    original = code
    blocks = re.findall(r'```(?:python|py)?\s*\n(.*?)```', code, re.DOTALL | re.IGNORECASE)
    if blocks:
        code = blocks[0].strip()
    else:
        code = re.sub(r'^```[a-zA-Z]*\s*\n', '', code, flags=re.MULTILINE)
        code = re.sub(r'\n```\s*$', '', code).strip()
    if code.lower().startswith("python\n"):
        code = code[7:].strip()
    elif code.lower().startswith("py\n"):
        code = code[3:].strip()
    code = re.sub(r'```', '', code)
    return original.strip() if len(code.strip()) < 10 else code.strip()


def final_answer(response: str) -> str | None:
    """ThymeAPI's post_process of the last reply; None where the reference raises (a `<|answer|>...<|answer|>`
    pair with no other answer form: it reads the match object of the pattern that failed)."""
    match = re.search(r"<answer>(.*?)</answer>", response, re.DOTALL)
    if match:
        answer = match.group(1).strip()
    elif re.search(r"<\|answer\|>(.*?)<\|/answer\|>", response, re.DOTALL):
        answer = re.search(r"<\|answer\|>(.*?)<\|/answer\|>", response, re.DOTALL).group(1).strip()
    elif re.search(r"<\|answer\|>(.*?)<\|answer\|>", response, re.DOTALL):
        return None
    else:
        answer = response
    return _boxed(answer) if re.search(r'\\boxed\{(.*?)\}', answer) else answer


def _boxed(response: str) -> str:
    """ThymeAPI._extract_box_answer: the last `\\boxed{` to its matching brace (or the end)."""
    rest = response.split('\\boxed{')[-1]
    depth = 1
    for k, char in enumerate(rest):
        depth += (char == '{') - (char == '}')
        if depth == 0:
            return rest[:k]
    return rest


@dataclass(frozen=True)
class ThymeProtocol(Protocol):
    """The Thyme framework's conversation: replies as assistant turns, each code result as a user turn that
    repeats the reply before `<sandbox_output>`. `fallback`: the simple prompt's single reply, always an answer."""

    name: str = NAME
    stop: tuple[str, ...] = STOP
    images_first: bool = False
    fallback: bool = False

    def parse(self, completion: str | dict, finish: Finish = END_OF_TURN) -> Parsed:
        """The answer is the reply as written (the `<|answer|>` forms the post-processing reads are control-token
        look-alikes, which the history keeps neutralised)."""
        own, past = split_turn(reply_text(completion), self.end_of_turn)
        if self.fallback:
            reply = own.strip()
            reply, answers, code = (reply if "<answer>" in reply else f"<answer>{reply}</answer>"), True, None
        else:
            reply, answers, code = read_turn(own)
        calls = (Call(CODE_TOOL, {"code": code}),) if code is not None else ()
        return Parsed(neutralised(reply, tags=False), calls, reply if answers else None, neutralised(own, tags=False),
                      past)

    def observation_parts(self, observation: Observation) -> list[dict]:
        """The sandbox output's parts (each printed line, each image) in the order the reference attaches them."""
        images, parts = list(observation.images), []
        for piece in observation.text.split(PART_MARK) if observation.text else ():
            if piece == IMAGE_MARK:
                if images:
                    parts.append({"type": "image", "image": images.pop(0)})
            else:
                parts.append(text(piece))
        return parts + [{"type": "image", "image": i} for i in images]

    def render(self, trajectory: Trajectory) -> Prompt:
        images: list = []
        messages: list[dict] = []
        for message in trajectory.messages:
            parts = wire_parts(message["content"], trajectory.images, images)
            if message["role"] == "tool":
                said = "".join(p["text"] for p in parts if p["type"] == "text")
                if said.startswith(ERROR_MARK):
                    error = said[len(ERROR_MARK):]
                    content = [{"type": "text", "text": TEXTS["sandbox_error"].format(error_msg=error)}]
                    messages.append({"role": "user", "content": content})
                    continue
                reply = messages[-1]["content"] if messages and messages[-1]["role"] == "assistant" else ""
                content = [text(reply), text(TEXTS["sandbox_open"]), *parts, text(TEXTS["sandbox_status"]),
                           text(TEXTS["sandbox_close"])]
                if not any(p["type"] == "image" for p in content):  # OpenAIWrapper.prepare_itlist joins texts alone
                    content = [text("\n".join(p["text"] for p in content))]
                messages.append({"role": "user", "content": merge_text(content)})
            elif message["role"] == "assistant":  # the API's assistant turns are strings
                messages.append({"role": "assistant", "content": "".join(p.get("text", "") for p in parts)})
            else:
                messages.append({"role": message["role"], "content": merge_text(parts)})
        return Prompt(messages, images, stop=self.stop)


class ThymeLoop(Harness):
    """generate_inner's loop needs nothing said besides results; as a harness, a reply cut at the token limit is
    read as any other (the reference reads whatever the server returns)."""


def profile_for(profile, fallback: bool = False):
    """The Thyme framework's profile over `profile` (the suite's): its prompt, stop strings and caps; `fallback`:
    the simple prompt's single reply."""
    from dataclasses import replace

    return replace(profile, protocol=ThymeProtocol(stop=FALLBACK_STOP if fallback else STOP, fallback=fallback),
                   system_prompt=TEXTS["simple_system" if fallback else "reasoning_system"], question_suffix="",
                   toolset=None, code_tool=None, harness=ThymeLoop(), answer_with_calls="answer",
                   max_calls_per_turn=1, answer_tag_required=True,
                   budgets=Budgets(max_turns=1 if fallback else MAX_ITERATIONS, max_tool_calls=MAX_ITERATIONS,
                                   max_images=profile.budgets.max_images))


# execute_code_in_sandbox and its _sandboxed_execution_target (vlm/thyme/sandbox.py), then generate_inner's reading
# of the result into the sandbox output, run in our sandbox. Not reproduced: autopep8's reformatting (not installed
# here), the 10 s alarm (the sandbox's cell timeout stands in), the read-only chmod of the input (the sandbox's
# inputs are read-only), and the process per cell (variables carry over as the reference pickles them).
CELL = r'''
def _thyme_cell():
    import ast, contextlib, glob, importlib, io, json, math, os, pickle, random, re, shutil, string, sys, textwrap
    import types
    import numpy
    from PIL import Image, UnidentifiedImageError
    import cv2

    image_input, temp_output_dir = os.environ["THYME_IMAGE"], os.environ["THYME_TEMP_DIR"]
    shown_dir = os.path.dirname(temp_output_dir)
    state = {"context": {}, "shown": 0}
    DANGEROUS = [r'\bsys\.', r'\bsocket\.', r'\bsubprocess\.', r'\bexec\(', r'\beval\(', r'\bcompile\(',
                 r'\b__import__\(', r'\bos\.(remove|unlink|rmdir)\b', r'\bshutil\.rmtree\b', r'\bshutil\.move\b',
                 r'\bos\.(rename|renames)\b']
    EXTENSIONS = ('.png', '.jpg', '.jpeg', '.gif', '.bmp', '.tiff', '.webp')
    PREFIX = 'eval/VLMEvalKit/logs/tmp_img/'
    MIN_CROP = 64
    ITEM = "N/A"

    def clean(code):
        original = code
        blocks = re.findall(r'```(?:python|py)?\s*\n(.*?)```', code, re.DOTALL | re.IGNORECASE)
        if blocks:
            code = blocks[0].strip()
        else:
            code = re.sub(r'^```[a-zA-Z]*\s*\n', '', code, flags=re.MULTILINE)
            code = re.sub(r'\n```\s*$', '', code).strip()
        if code.lower().startswith("python\n"):
            code = code[7:].strip()
        elif code.lower().startswith("py\n"):
            code = code[3:].strip()
        code = re.sub(r'```', '', code)
        return original.strip() if len(code.strip()) < 10 else code.strip()

    def align(code):
        lines = code.splitlines()
        found = [(k, line) for k, line in enumerate(lines) if line.strip()][:2]
        if len(found) < 2:
            return code
        (k, first), (_, second) = found
        indent = ' ' * (len(second) - len(second.lstrip(' ')))
        if ' ' * (len(first) - len(first.lstrip(' '))) != indent:
            lines[k] = indent + first.lstrip(' ')
        return "\n".join(lines)

    def number(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return node.value
        return None

    def clamp(x1, y1, x2, y2, w, h):
        w, h = float(w), float(h)
        cx1, cx2, cy1, cy2 = min(x1, x2), max(x1, x2), min(y1, y2), max(y1, y2)
        fx1 = min(max(0.0, cx1), w - 1.0 if w > 0 else 0.0)
        fx2 = min(max(0.0, cx2), w)
        if fx1 >= fx2 and w > 0:
            fx1 = max(0.0, fx2 - 1.0)
            if fx2 <= fx1: fx2 = min(w, fx1 + 1.0)
        fy1 = min(max(0.0, cy1), h - 1.0 if h > 0 else 0.0)
        fy2 = min(max(0.0, cy2), h)
        if fy1 >= fy2 and h > 0:
            fy1 = max(0.0, fy2 - 1.0)
            if fy2 <= fy1: fy2 = min(h, fy1 + 1.0)
        if w > 0 and fx2 - fx1 < MIN_CROP:
            if w < MIN_CROP:
                fx1, fx2 = 0.0, w
            else:
                fx2 = fx1 + MIN_CROP
                if fx2 > w:
                    fx2 = w
                    fx1 = max(0.0, fx2 - MIN_CROP)
        if h > 0 and fy2 - fy1 < MIN_CROP:
            if h < MIN_CROP:
                fy1, fy2 = 0.0, h
            else:
                fy2 = fy1 + MIN_CROP
                if fy2 > h:
                    fy2 = h
                    fy1 = max(0.0, fy2 - MIN_CROP)
        if w > 0 and fx1 >= fx2: fx2 = min(w, fx1 + 1.0)
        if h > 0 and fy1 >= fy2: fy2 = min(h, fy1 + 1.0)
        return [fx1, fy1, fx2, fy2]

    class ImagePath(ast.NodeTransformer):
        replaced = False

        def visit_Assign(self, node):
            if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) and node.targets[0].id == 'image_path':
                if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
                    value = node.value.value
                    if not (os.path.exists(value) and os.path.isfile(value) and value.lower().endswith(EXTENSIONS)):
                        node.value = ast.Constant(value=image_input)
                        self.replaced = True
            return self.generic_visit(node)

    class Crop(ast.NodeTransformer):
        NAMES = ['crop_box', 'bbox', 'box', 'coordinates', 'coords', 'crop_coords', 'left_crop_coords',
                 'right_crop_coords', 'top_crop_coords', 'bottom_crop_coords']
        clamped = False

        def __init__(self, w, h):
            self.w, self.h = w, h

        def fix(self, elts):
            raw = [number(v) for v in elts]
            if any(c is None for c in raw):
                return False
            new = clamp(*raw, self.w, self.h)
            if [int(round(c)) for c in new] != [int(round(c)) for c in raw]:
                self.clamped = True
                for k in range(4):
                    elts[k] = ast.Constant(value=int(round(new[k])))
            return True

        def visit_Assign(self, node):
            done = False
            target = node.targets[0] if len(node.targets) == 1 else None
            value = node.value
            if (isinstance(target, ast.Tuple) and len(target.elts) == 4
                    and all(isinstance(t, ast.Name) for t in target.elts)
                    and isinstance(value, ast.Tuple) and len(value.elts) == 4):
                names = [t.id.lower() for t in target.elts]
                if any(n in names for n in ['x1', 'y1', 'x2', 'y2', 'left', 'top', 'right', 'bottom']):
                    done = self.fix(value.elts)
            elif (not done and isinstance(target, ast.Name) and target.id in self.NAMES and isinstance(value, ast.Tuple)
                  and len(value.elts) == 4):
                self.fix(value.elts)
            # the reference's third case (slices) tests for ast.Index, which Python 3.9+ never builds
            return self.generic_visit(node)

    class Namespace(ast.NodeTransformer):
        updated = False

        def visit_Attribute(self, node):
            if isinstance(node.value, ast.Name) and node.value.id in ["cv", "cv4", "cv3", 'CV']:
                node.value.id = "cv2"
                self.updated = True
            return self.generic_visit(node)

    def images_in(folder):
        found = []
        for extension in ['jpg', 'jpeg', 'png', 'bmp', 'gif', 'tiff']:
            found.extend(glob.glob(os.path.join(folder, f'*.{extension}')))
        return found

    def execute(code, previous):
        """_sandboxed_execution_target: (processed paths, print output, error, context)."""
        builtins = {
            "print": print, "len": len, "str": str, "int": int, "float": float, "list": list, "dict": dict,
            "tuple": tuple, "range": range, "round": round, "abs": abs, "min": min, "max": max, "sum": sum,
            "sorted": sorted, "any": any, "all": all, "zip": zip, "map": map, "filter": filter, "True": True,
            "False": False, "None": None, "isinstance": isinstance, "issubclass": issubclass, "Exception": Exception,
            "ValueError": ValueError, "TypeError": TypeError, "AttributeError": AttributeError,
            "IndexError": IndexError, "KeyError": KeyError, "NotImplementedError": NotImplementedError,
            "enumerate": enumerate, "pow": pow, "divmod": divmod, "bin": bin, "oct": oct, "hex": hex,
            "complex": complex, "__import__": __import__, "globals": globals, "locals": locals, "open": open,
            "os": os, "shutil": shutil, "itertools": __import__('itertools'), "re": re, "time": __import__('time'),
            "datetime": __import__('datetime'), "math": math, "cmath": __import__('cmath'),
            "collections": __import__('collections'), "json": json, "PIL": __import__('PIL'), "random": random,
            "UnidentifiedImageError": UnidentifiedImageError}
        names = {"__builtins__": builtins, "os": os, "random": random, "string": string, "math": math, "Image": Image,
                 "UnidentifiedImageError": UnidentifiedImageError, "numpy": numpy, "np": numpy, "json": json, "re": re,
                 "cv2": cv2}
        always = dict(names)
        local = {"image_path": image_input, "temp_output_dir": temp_output_dir}
        if previous:
            restored = previous.get('locals', {})
            for name, value in restored.items():
                if isinstance(value, numpy.ndarray) and value.dtype == numpy.uint8 and len(value.shape) in [2, 3]:
                    try:
                        restored[name] = Image.fromarray(value)
                    except Exception:
                        pass
            local.update(restored)
            for alias, module in previous.get('globals', {}).items():
                try:
                    local[alias] = importlib.import_module(module)
                except ImportError:
                    pass
        code = textwrap.dedent(align(clean(code))).strip()
        try:
            ast.parse(code)
        except SyntaxError as e:
            return [], "", f"Sandbox for {ITEM}: SyntaxError in generated code: {e}", {'globals': {}, 'locals': {}}
        for make in (lambda: ImagePath(), lambda: Crop(*size) if size else None, lambda: Namespace()):
            transformer = make()
            if transformer is None:
                continue
            try:
                tree = transformer.visit(ast.parse(code))
                if getattr(transformer, "replaced", False) or getattr(transformer, "clamped", False) \
                        or getattr(transformer, "updated", False):
                    code = ast.unparse(tree)
            except Exception:
                pass
        captured, processed, error, printed = io.StringIO(), [], None, None
        try:
            with contextlib.redirect_stdout(captured):
                target = temp_output_dir + '/' if not temp_output_dir.endswith('/') else temp_output_dir
                for match in re.finditer(r"(['\"])(" + re.escape(PREFIX) + r"[^'\"]*)\1", code):
                    suffix = match.group(2)[len(PREFIX):].replace(' ', '')
                    if suffix and os.path.dirname(suffix):
                        os.makedirs(os.path.join(temp_output_dir, os.path.dirname(suffix)), exist_ok=True)
                code = code.replace(PREFIX, target)
                code = re.sub(r':\.\d{1}f}', ':.8f}', code)
                cv2.imshow = cv2.waitKey = cv2.destroyAllWindows = lambda *args, **kwargs: None
                Image.show = lambda *args, **kwargs: None
                exec(code, names, local)
            printed = captured.getvalue().strip()
            if "processed_path" in local and (not previous or "processed_path" not in previous.get('locals', {})):
                value = local["processed_path"]
                if isinstance(value, str) and value.startswith(temp_output_dir) and os.path.isfile(value):
                    processed.append(value)
                elif isinstance(value, str) and value.startswith(temp_output_dir) and not os.path.exists(value):
                    error = f"Sandbox for {ITEM}: 'processed_path' variable set to '{value}', but file does not exist."
                elif value is not None:
                    error = (f"Sandbox for {ITEM}: 'processed_path' variable was '{value}', which is not a valid "
                             f"file path in {temp_output_dir}.")
            if printed:
                possible = images_in(temp_output_dir)
                maybe_error, parsed = "", 0
                for match in re.finditer(rf"({re.escape(temp_output_dir)}[^\s\'\"]+\.(?:jpg|jpeg|png|bmp|gif|tiff))",
                                         printed):
                    parsed += 1
                    if os.path.isfile(match.group(1)):
                        if match.group(1) not in processed:
                            processed.append(match.group(1))
                    elif not error:
                        maybe_error = (f"Sandbox for {ITEM}: Path '{match.group(1)}' found in print, but file does "
                                       "not exist or is not a file.")
                if len(processed) == 0:
                    if parsed == len(possible):
                        processed = possible
                    else:
                        matches = re.findall(r"([^\s\'\"]+\.(?:jpg|jpeg|png|bmp|gif|tiff))", printed)
                        if len(matches) == len(possible):
                            processed = possible
                        else:
                            for path in matches:
                                fulls = [path] if os.path.isabs(path) else [path, os.path.join(os.getcwd(), path)]
                                for full in fulls:
                                    if os.path.isfile(full) and not full.startswith(temp_output_dir):
                                        moved = os.path.join(temp_output_dir, os.path.basename(full))
                                        try:
                                            shutil.move(full, moved)
                                            processed.append(moved)
                                            break
                                        except Exception:
                                            pass
                            if not processed:
                                error = maybe_error
                if not processed and temp_output_dir not in code:
                    try:
                        if os.path.exists(printed) and os.path.isfile(printed):
                            moved = os.path.join(temp_output_dir, os.path.basename(printed))
                            shutil.move(printed, moved)
                            processed.append(moved)
                        else:
                            processed.append(printed)
                    except Exception:
                        pass
        except ImportError as e:
            error = (f"Sandbox for {ITEM}: Code execution failed due to ImportError. Ensure all required modules are "
                     f"available and correctly named: {e}")
        except MemoryError as e:
            error = (f"Sandbox for {ITEM}: Code execution failed due to MemoryError. The operation likely consumed "
                     f"too much memory: {e}")
        except SyntaxError as e:
            error = f"Sandbox for {ITEM}: Code execution failed due to SyntaxError: {e}"
        except Exception as e:
            error = f"Sandbox for {ITEM}: Code execution failed: {e}"
        if printed is not None and not processed:
            error = f"Sandbox for {ITEM}: Path/result output error, unable to match save path"
        kept, modules = {}, {}
        for name, value in local.items():
            if name == "__builtins__" or name in always:
                continue
            if isinstance(value, types.ModuleType):
                modules[name] = value.__name__
            elif callable(value) and not isinstance(value, type):
                continue
            else:
                try:
                    pickle.dumps(value)
                    kept[name] = pickle.loads(pickle.dumps(value))
                except Exception:
                    if isinstance(value, Image.Image):
                        try:
                            kept[name] = numpy.array(value)
                        except Exception:
                            pass
                    elif hasattr(value, 'tolist'):
                        try:
                            kept[name] = value.tolist()
                        except Exception:
                            pass
        return processed, printed or "", error, {'globals': modules, 'locals': kept}

    def show(path):
        """A copy of an image the reference attaches, where the toolbox collects it, named in attachment order."""
        state["shown"] += 1
        copy = os.path.join(shown_dir, f"thyme-shown-{state['shown']:06d}{os.path.splitext(path)[1].lower()}")
        shutil.copyfile(path, copy)
        return ["image", os.path.basename(copy)]

    def run(code):
        """execute_code_in_sandbox, then generate_inner's sandbox output: printed lines, the images named in
        them, then the processed images; one JSON line after the mark."""
        os.makedirs(temp_output_dir, exist_ok=True)
        if any(re.search(p, code, re.IGNORECASE) for p in DANGEROUS):
            processed, printed, context = [], "", None
            error = (f"Sandbox for {ITEM}: Code contains potentially dangerous system operations such as remove. "
                     "Execution denied.")
        else:
            processed, printed, error, context = execute(code, state["context"])
        state["context"] = context
        content = []
        if processed:
            basenames = {os.path.basename(p) for p in processed}
            for line in printed.strip().split('\n') if printed else []:
                line = line.strip()
                if not line:
                    continue
                matches = list(re.finditer(r'([/\w\-_.]+\.(?:jpg|jpeg|png|gif|bmp|webp|tiff))', line, re.IGNORECASE))
                if not matches:
                    content.append(["text", line])
                    continue
                valid = [(m.start(), m.end(), m.group(1)) for m in matches
                         if os.path.basename(m.group(1)) not in basenames and os.path.isfile(m.group(1))]
                if valid:
                    end = 0
                    for start, stop, path in valid:
                        if line[end:start].strip():
                            content.append(["text", line[end:start].strip()])
                        content.append(show(path))
                        end = stop
                    if line[end:].strip():
                        content.append(["text", line[end:].strip()])
                elif os.path.basename(line) not in basenames:
                    content.append(["text", line])
            for path in processed:
                if os.path.exists(path):
                    content.append(show(path))
        print("\x1ethyme-result\x1e" + json.dumps({"error": None if processed else str(error), "content": content}))

    return run


size = None
_thyme_run = _thyme_cell()
del _thyme_cell
'''

RESULT_MARK = "\x1ethyme-result\x1e"
CELL_TIMEOUT_S = 10  # EXEC_TIME_LIMIT
# the cell's result line carries every printed line: room for it (the default 8,192 characters would cut it)
SANDBOX_CONFIG = SandboxConfig(cell_timeout_s=CELL_TIMEOUT_S, max_output_chars=131072)


def prepare(code: str) -> str:
    """The cell that runs the model's code as the reference's sandbox does (the input's size read first, for
    the crop clamping)."""
    return ("try:\n    from PIL import Image as _I\n    with _I.open(__import__('os').environ['THYME_IMAGE']) as _i:\n"
            "        size = _i.size\nexcept Exception:\n    size = None\n"
            f"_thyme_run({code!r})\n")


def describe(result, saved) -> str:
    """The observation: the output's parts, PART_MARK between them and IMAGE_MARK for each image (the images
    are `saved`, in attachment order); an error's text after ERROR_MARK (the protocol writes the error turn)."""
    line = next((line for line in reversed(result.stdout.split("\n")) if line.startswith(RESULT_MARK)), None)
    if line is None and result.timed_out:  # the alarm's TimeoutError, as the reference's cell reports it
        return ERROR_MARK + ("Sandbox for N/A: Code execution failed: Execution timed out after "
                             f"{CELL_TIMEOUT_S} seconds")
    if line is None:  # a crash: the reference's process exits without a result
        return ERROR_MARK + "Sandbox for N/A: Execution failed or timed out (exit code 1)."
    try:  # the line is the model's code's output too: it may be cut, or forged
        outcome = json.loads(line[len(RESULT_MARK):])
        error, content = outcome["error"], outcome["content"]
        if error is not None:
            return ERROR_MARK + str(error)
        parts = [IMAGE_MARK if kind == "image" else value for kind, value in content]
        if not all(isinstance(part, str) for part in parts):
            raise TypeError("an output part is not text")
    except (ValueError, TypeError, KeyError) as err:
        return ERROR_MARK + f"Sandbox for N/A: the cell's output could not be read ({type(err).__name__})."
    return PART_MARK.join(parts)


THYME_SANDBOX = CodeTool(CODE_TOOL, describe, collect=SHOWN, prelude=CELL, prepare=prepare,
                         env=lambda c: {"THYME_IMAGE": str(c.inputs[0]),
                                        "THYME_TEMP_DIR": str(c.output_dir / "tmp_img")})
