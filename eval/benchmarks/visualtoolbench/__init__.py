"""VisualToolBench (arXiv 2510.12712, github.com/xi1ngang/VisualToolBench) as a suite: 1,204 open-ended tasks
(603 single-turn, 601 multi-turn) in five domains, run as the benchmark's scripts run them
(scripts/run_model_response_{single,multi}_turn.py around model_inference.FunC_with_tools): the `high` system
prompt, the six tools of scripts/tools.py as function calls (python_image_processing and python_interpreter in our
sandbox, calculator, and google_search, browser_get_page_text and historical_weather through the web backend),
tool replies as the reference sends them (`str()` of the tool's dict in a tool message; a python_image_processing
call's new images in a user message after it), at most 20 rounds of calls per turn; a multi-turn task's later
turns each bring their prompt and first image, with the earlier turns in context as text (the reference's default:
the golden answers). Then the benchmark's rubric judge (scoring.py), the paper's tables (tables.py) and figures
(figures.py). The paper's ablations are settings: the weak system prompt (`--prompt_variant weak`), no vision tool
(`--ablation no_vision_tools`), no tools (`--tools none`) and the atomic vision tools in place of
python_image_processing (`--toolset visualtoolbench`). README.md in this folder explains each part and every known
difference.
"""

from __future__ import annotations

import ast
import io
import json
import math
import operator
import os
import weakref
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from PIL import Image

from eval.benchmarks.visualtoolbench import data, scoring
from eval.benchmarks.visualtoolbench.web import PROVIDER
from eval.config import NO_JUDGE
from eval.suites import WEB_SETTINGS, Suite
from runtime.code_tools import CodeTool, TRANSFORMED, vtb_cell, vtb_observation, vtb_result
from runtime.harness import Harness
from runtime.profiles import QWEN_STOP, BoxConvention, Budgets
from runtime.protocols import HermesProtocol, Observation, OpenAIProtocol, Protocol
from runtime.protocols.base import END_OF_TURN, Finish, Parsed, reply_text
from runtime.episode import ImageBudgetError
from runtime.sandbox import ImageRefused, SandboxError
from runtime.toolbox import ToolBox
from runtime.trajectory import message_text, text
from tools.registry import ToolError
from tools.toolset import Reply, Tool, ToolSet
from tools.toolsets import get_toolset

FOLDER = Path(__file__).parent
PROMPTS = FOLDER / "prompts"
WEB_REPLAY = FOLDER / "web_replay.jsonl"
SYSTEM_LEVELS = ("low", "mid", "high")
SYSTEM_LEVEL = "high"  # the .sh scripts' --system_prompt_level (the paper's runs)
MAX_ROUNDS = 20  # --max_tool_calls: model replies with calls per turn (FunC_with_tools counts rounds, not calls)
# FunC_with_tools sets no token limit (max_tokens 0: no cap), and a vLLM server serves the paper's open models at the
# checkpoint processor's own image size (max_pixels 0)
UNCAPPED = {"max_tokens": 0, "max_pixels": 0}
# FunC_with_tools's temperature is 1.0 for a model whose name contains one of its reasoning_models (or "thinking"),
# else 0.0
REASONING_MODELS = ("o3", "o1", "o1-pro", "o4-mini", "gpt-5", "gpt-5-mini")
HARNESS = "visualtoolbench-runner"  # scripts/model_inference.py FunC_with_tools, through the model's call format
MAX_IMAGES = 64  # the reference has no image budget
CODE_TIMEOUT_S = 120  # the reference has none (its exec runs in-process); a cell must end
CODE_TOOLS = ("python_image_processing", "python_interpreter")
WEB_TOOLS = ("google_search", "browser_get_page_text", "historical_weather")
TOOL_NAMES = ("python_image_processing", "python_interpreter", "google_search", "browser_get_page_text",
              "historical_weather", "calculator")
VISION_TOOL = "python_image_processing"
# The paper's ablations. Figure 7: the system prompt (App. D.2's strong and weak prompts are prompt.py's
# system_prompt_high and system_prompt_low, word for word), no vision tool, no tools (--tools none). App. F.2 / Table
# 14: python_image_processing replaced by the ten atomic vision tools (tools/toolsets/visualtoolbench.py).
PROMPT_VARIANTS = {"strong": "high", "weak": "low"}
ABLATIONS = ("no_vision_tools",)
ATOMIC_TOOLSET = "visualtoolbench"
CHUNK = "chunk_1"  # the save folder's prefix in a run with one worker (chunk_{i}_task_{id})
# a call after one the reference's loop crashes on (an unknown tool, arguments json.loads cannot read)
NOT_RUN = "not run: the benchmark's loop stopped at an earlier call of this reply"


def system_prompt(level: str = SYSTEM_LEVEL) -> str:
    return json.loads((PROMPTS / "system_prompts.json").read_text(encoding="utf-8"))[level]["text"]


def runner_texts() -> dict[str, str]:
    return {k: v["text"] for k, v in json.loads((PROMPTS / "runner.json").read_text(encoding="utf-8")).items()}


def tool_schemas() -> dict[str, dict]:
    listed = json.loads((PROMPTS / "tools.json").read_text(encoding="utf-8"))["tools"]
    return {schema["function"]["name"]: schema for schema in listed}


def image_tool_schema(schemas: dict, image_list: list[str], save_dir: str) -> dict:
    """python_image_processing's schema as get_tools builds it each round: the turn's image paths (a Python list)
    and its save folder in the description."""
    schema = json.loads(json.dumps(schemas["python_image_processing"]))
    function = schema["function"]
    function["description"] = function["description"].format(image_list=image_list, processed_image_save_path=save_dir)
    return schema


# The safe calculator of scripts/tools.py (VisionTools.safe_calculator and _eval_ast), written anew: the expression
# is parsed with ast and walked; nothing is evaluated by Python. Same operators, functions, replies and errors.
OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
             ast.Mod: operator.mod, ast.Pow: operator.pow, ast.USub: operator.neg}
MATH_FUNCTIONS = {"sqrt": math.sqrt, "sin": math.sin, "cos": math.cos, "tan": math.tan, "log": math.log,
                  "exp": math.exp}
# An integer power whose result would have more digits than this is not computed: the reference would spend minutes
# and gigabytes on it and then fail to print it (Python prints at most 4,300 digits); the reply is that failure.
MAX_POWER_DIGITS = 1_000_000
INT_DIGITS_ERROR = ("Exceeds the limit (4300 digits) for integer string conversion; use sys.set_int_max_str_digits() "
                    "to increase the limit")


def _walk(node):
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.BinOp):
        apply = OPERATORS[type(node.op)]
        left, right = _walk(node.left), _walk(node.right)
        if apply is operator.pow and _too_many_digits(left, right):
            raise ValueError(INT_DIGITS_ERROR)
        return apply(left, right)
    if isinstance(node, ast.UnaryOp):
        return OPERATORS[type(node.op)](_walk(node.operand))
    if isinstance(node, ast.Call):
        name = node.func.id  # an attribute or lambda has none: the reference's AttributeError
        if name not in MATH_FUNCTIONS:
            raise ValueError(f"Function {name} not allowed.")
        if len(node.args) != 1:
            raise ValueError("Only one argument permitted.")
        return MATH_FUNCTIONS[name](_walk(node.args[0]))
    raise ValueError("Unsupported expression element.")


def _too_many_digits(base, exponent) -> bool:
    if not (isinstance(base, int) and isinstance(exponent, int)) or exponent <= 0 or abs(base) < 2:
        return False
    return exponent * math.log10(abs(base)) > MAX_POWER_DIGITS


def calculator(expression) -> dict:
    """safe_calculator's reply: the result as text, or "Error" with the exception's message."""
    try:
        tree = ast.parse(expression, mode="eval")
        return {"result": str(_walk(tree.body)), "expression": expression, "status": "success"}
    except Exception as err:  # noqa: BLE001 - the reference turns every failure into its error reply
        return {"result": "Error", "expression": expression, "status": "error", "error": str(err)}


class VisionTools:
    """The reference's tool signatures (named as its class is, so a call with wrong arguments fails with the same
    TypeError text): model_inference calls `function(**arguments)` and answers a failure with {"error": str(e)}."""

    @staticmethod
    def python_image_processing(code, processed_image_save_path=None):
        return {"code": code}

    @staticmethod
    def python_interpreter(code):
        return {"code": code}

    @staticmethod
    def safe_calculator(expression):
        return {"expression": expression}

    @staticmethod
    def google_search(query, num_results=5):
        return {"query": query, "num_results": num_results}

    @staticmethod
    def browser_get_page_text(url):
        return {"url": url}

    @staticmethod
    def historical_weather(location, date):
        return {"location": location, "date": date}


SIGNATURES = {"python_image_processing": VisionTools.python_image_processing,
              "python_interpreter": VisionTools.python_interpreter, "calculator": VisionTools.safe_calculator,
              "google_search": VisionTools.google_search, "browser_get_page_text": VisionTools.browser_get_page_text,
              "historical_weather": VisionTools.historical_weather}


def bound(name: str, arguments) -> dict:
    """The call's arguments by parameter, or a TypeError with the reference's message."""
    return SIGNATURES[name](**arguments)


def web_tools(web, schemas: dict) -> list[Tool]:
    """The three web tools with the published schemas, answered by the web backend (recorded, or live through
    web.py's client: `str()` of the reference's dicts); a call without an answer gets the tool's own error dict."""

    def google_search(arguments, files) -> Reply:
        args = bound("google_search", arguments)
        reply, reason = web.answer("google_search", args, lambda client: client.google_search(**args))
        return reply if reply is not None else Reply(str(
            {"results": [], "query": args["query"], "status": "error", "error": _unavailable("google_search", reason)}),
            error=True)

    def browser_get_page_text(arguments, files) -> Reply:
        args = bound("browser_get_page_text", arguments)
        reply, reason = web.answer("browser_get_page_text", args, lambda client: client.browser_get_page_text(**args))
        return reply if reply is not None else Reply(str(
            {"url": args["url"], "title": "", "text": "", "status": "error",
             "error": _unavailable("browser_get_page_text", reason)}), error=True)

    def historical_weather(arguments, files) -> Reply:
        args = bound("historical_weather", arguments)
        reply, reason = web.answer("historical_weather", args, lambda client: client.historical_weather(**args))
        return reply if reply is not None else Reply(str(
            {"location": args["location"], "date": args["date"], "status": "error",
             "error": _unavailable("historical_weather", reason)}), error=True)

    runs = {"google_search": google_search, "browser_get_page_text": browser_get_page_text,
            "historical_weather": historical_weather}
    return [Tool(name, schemas[name], run=_as_reference(run)) for name, run in runs.items()]


def calculator_tool(schemas: dict) -> Tool:
    def run(arguments, files) -> Reply:
        result = calculator(bound("calculator", arguments)["expression"])
        return Reply(str(result), error=result["status"] == "error")

    return Tool("calculator", schemas["calculator"], run=_as_reference(run))


def _unavailable(name: str, reason: str) -> str:
    from runtime.web import UNAVAILABLE_MARK

    return f"{name} is {UNAVAILABLE_MARK}: {reason}"


def _as_reference(run):
    """A tool run as model_inference runs it: a failure (wrong arguments) is the reply {"error": str(e)}."""
    def wrapped(arguments, files) -> Reply:
        try:
            return run(arguments, files)
        except Exception as err:  # noqa: BLE001 - the reference's try around the call
            return Reply(str({"error": str(err)}), error=True)

    return wrapped


def unknown_tool(name: str) -> Reply:
    return Reply(str({"error": repr(name)}), error=True)


_SENT: dict[int, tuple[weakref.ref, np.ndarray]] = {}  # id -> (the image, what the model is shown of it)


def as_sent(image: np.ndarray) -> np.ndarray:
    """An image as the model receives it from the scripts (utils.encode_image_to_base64): RGB, JPEG quality 85
    with `optimize`, decoded. Kept per image while it lives, since every round renders every image again."""
    known = _SENT.get(id(image))
    if known is not None and known[0]() is image:
        return known[1]
    buffer = io.BytesIO()
    Image.fromarray(image).convert("RGB").save(buffer, format="JPEG", quality=85, optimize=True)
    with Image.open(buffer) as decoded:
        sent = np.asarray(decoded.convert("RGB"))
    for key in [k for k, (ref, _) in _SENT.items() if ref() is None]:
        del _SENT[key]
    _SENT[id(image)] = (weakref.ref(image), sent)
    return sent


@dataclass(frozen=True)
class VtbProtocol(Protocol):
    """The model's own protocol, with FunC_with_tools's messages around it: the current turn's user message is
    its prompt then its image; earlier turns are their prompts and answers as text; a tool message holds the
    reply text, and a python_image_processing call's new images follow it in a user message; the tool list is
    rebuilt each round with the turn's images and save folder in python_image_processing's description."""

    inner: Protocol = None
    transformed: str = ""  # the user text before a call's new images, with {id}
    image_tool: str = ""  # python_image_processing's published schema (JSON), its description a template

    def parse(self, completion, finish: Finish = END_OF_TURN) -> Parsed:
        return self.inner.parse(completion, finish)

    def observation_parts(self, observation):
        return self.inner.observation_parts(observation)

    def render(self, trajectory):
        prompt = self.inner.render(replace(trajectory, messages=self.wire_messages(trajectory),
                                           tools=self.wire_tools(trajectory)))
        return replace(prompt, images=[as_sent(image) for image in prompt.images])

    def wire_messages(self, trajectory) -> list[dict]:
        vtb = trajectory.meta.get("visualtoolbench") or {}
        messages = trajectory.messages
        starts = [i for i, m in enumerate(messages) if m["role"] == "user"]
        wired = [m for m in messages[:starts[0]] if m["role"] == "system"] if starts else list(messages)
        if not starts:
            return wired
        for turn, start in enumerate(starts[:-1]):
            wired.append({"role": "user", "content": [p for p in messages[start]["content"] if p["type"] == "text"]})
            wired.append({"role": "assistant", "content": [text(history_answer(vtb, turn))]})
        current = messages[starts[-1]]
        images = [p for p in current["content"] if p["type"] == "image"] if vtb.get("show_images", True) else []
        wired.append({"role": "user", "content": [p for p in current["content"] if p["type"] == "text"] + images})
        for message in messages[starts[-1] + 1:]:
            if message["role"] != "tool":
                wired.append(message)
                continue
            shown = [p for p in message["content"] if p["type"] == "image"]
            wired.append({**message, "content": [p for p in message["content"] if p["type"] == "text"]})
            if shown:
                note = self.transformed.format(id=message.get("tool_call_id"))
                wired.append({"role": "user", "content": [text(note), *shown]})
        return wired

    def wire_tools(self, trajectory) -> list[dict]:
        vtb = trajectory.meta.get("visualtoolbench") or {}
        if not trajectory.tools or "save_dirs" not in vtb:
            return trajectory.tools
        turn = sum(m["role"] == "user" for m in trajectory.messages) - 1
        image_list = [vtb["image_paths"][turn]] if vtb["image_paths"][turn] else []
        starts = [i for i, m in enumerate(trajectory.messages) if m["role"] == "user"]
        for message in trajectory.messages[starts[-1]:]:
            if message["role"] == "tool" and message.get("name") == "python_image_processing":
                image_list += observation_of(message).get("output_paths") or []
        schemas = {s["function"]["name"]: s for s in trajectory.tools}
        if "python_image_processing" in schemas:
            published = {"python_image_processing": json.loads(self.image_tool)}
            schemas["python_image_processing"] = image_tool_schema(published, image_list, vtb["save_dirs"][turn])
        return list(schemas.values())


def history_answer(vtb: dict, turn: int) -> str:
    """What an earlier turn's assistant message says: the golden answer (the reference's --use_GT_answer 1, its
    scripts' setting and default), or the model's own answer."""
    if vtb.get("history", "golden") == "golden":
        return vtb["golden_answers"][turn]
    turns = vtb.get("turns") or []
    return str(turns[turn]["answer"]) if turn < len(turns) else ""


def observation_of(message: dict) -> dict:
    """A tool message's reply as the reference's dict (its text is `str()` of it); {} for text that is not."""
    try:
        found = ast.literal_eval(message_text({"content": [p for p in message["content"] if p["type"] == "text"]}))
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return {}
    return found if isinstance(found, dict) else {}


class VtbLoop(Harness):
    """FunC_with_tools's loop, per turn: a reply with calls runs them all (a round); a reply without calls is the
    turn's answer; after the 20th round the turn ends with "Model hit the maximum number of tool calls" (a later
    turn then starts: the episode asks the model once more without tools, and that reply is not the answer); a call
    the reference's loop crashes on ends the task with "Processing Error: ..." as its answer."""

    unreadable_calls_are_text = True  # the reference's server parses calls: one it cannot read is text

    def __init__(self):
        self.texts = runner_texts()

    def offer_tools(self, episode) -> bool:
        return not loop_state(episode)["capped"]

    def after_reply(self, episode, reply: str, has_calls: bool):
        state = loop_state(episode)
        if not has_calls:
            if state["capped"]:
                end_turn(episode, self.texts["max_tool_calls"], "max_tool_calls", extra_reply=reply)
            else:
                end_turn(episode, reply, "answer")
        return None

    def after_tools(self, episode) -> tuple[str, bool]:
        state = loop_state(episode)
        state["rounds"] += 1
        if state.get("error"):
            end_turn(episode, self.texts["processing_error"].format(error=state["error"]), "processing_error")
            return "", True
        if state["rounds"] >= MAX_ROUNDS:
            vtb = episode.trajectory.meta["visualtoolbench"]
            if len(vtb["turns"]) + 1 >= vtb["turn_count"]:
                end_turn(episode, self.texts["max_tool_calls"], "max_tool_calls")
                return "", True
            state["capped"] = True
        return "", False


def loop_state(episode) -> dict:
    return episode.harness_state.setdefault("visualtoolbench", {"rounds": 0, "capped": False, "error": None})


def end_turn(episode, answer, ended: str, extra_reply: str | None = None) -> None:
    """A turn's answer as the reference records it (model_answer), kept in the trajectory."""
    state = loop_state(episode)
    entry = {"answer": answer, "ended": ended, "rounds": state["rounds"]}
    if extra_reply is not None:
        entry["reply_after_cap"] = extra_reply
    episode.trajectory.meta["visualtoolbench"]["turns"].append(entry)
    state.update(rounds=0, capped=False)


class VtbToolBox(ToolBox):
    """FunC_with_tools's tools: the python tools run the model's code as scripts/tools.py does (`vtb_cell`), in the
    turn's save folder; a reply's calls after one the reference's loop crashes on are not run."""

    def run(self, episodes) -> None:
        offered = {*self.toolset.names(), *self.code_tools}
        for episode in episodes:
            state = loop_state(episode)
            for pending in episode.pending:
                call = pending.call
                if state.get("error"):
                    pending.call = replace(call, error=NOT_RUN)
                elif call.name not in offered:
                    state["error"] = repr(call.name)  # available_functions[name]: a KeyError
                elif call.error is not None:
                    state["error"] = _json_error(call)
        super().run(episodes)

    def _run_code(self, job):
        episode, calls = job
        session = episode.resources["sandbox"]
        vtb = episode.trajectory.meta["visualtoolbench"]
        turn = sum(m["role"] == "user" for m in episode.trajectory.messages) - 1
        _turn_input(episode, session, turn)
        observations = {}
        for pending, tool in calls:
            try:
                code = bound(pending.call.name, pending.call.arguments)["code"]
            except Exception as err:  # noqa: BLE001 - model_inference's reply to a call that raised
                observations[pending.id] = Observation(str({"error": str(err)}), error=True)
                continue
            interpreter = pending.call.name == "python_interpreter"
            try:
                result = session.run(vtb_cell(code, vtb["save_dirs"][turn], interpreter), self.cell_timeout_s)
            except Exception as err:  # noqa: BLE001 - e.g. the sandbox could not start a worker
                observations[pending.id] = Observation(str({"error": f"the sandbox failed: {err}"}), error=True)
                continue
            found = vtb_result(result, interpreter)
            if interpreter:
                observations[pending.id] = Observation(str(found), error=bool(found["stderr"].strip()))
                continue
            indices, paths, refused = _collected(episode, session, result, found["new"])
            observation = "\n".join([str(vtb_observation(found, paths)), *refused])
            failed = found["ok"] != "true" or bool(refused)
            observations[pending.id] = Observation(observation, tuple(indices), error=failed)
        return episode, observations


def _json_error(call) -> str:
    """The reference's json.loads error for arguments that do not parse."""
    if isinstance(call.raw, str):
        try:
            json.loads(call.raw)
        except ValueError as err:
            return str(err)
    return call.error


def _turn_input(episode, session, turn: int) -> None:
    """A later turn's image where the tool description says it is: written into the sandbox's read-only inputs
    (the path in the work folder links there since the episode started)."""
    if turn == 0:
        return
    target = session.inputs_dir / f"turn_{turn}.png"
    if target.exists():
        return
    starts = [m for m in episode.trajectory.messages if m["role"] == "user"]
    shown = [p["image"] for p in starts[turn]["content"] if p["type"] == "image"]
    if not shown:
        return
    os.chmod(session.inputs_dir, 0o755)
    try:
        Image.fromarray(episode.workspace[shown[0]]).save(target)
        os.chmod(target, 0o444)
    finally:
        os.chmod(session.inputs_dir, 0o555)


def _collected(episode, session, result, new: list[str]) -> tuple[list[int], list[str], list[str]]:
    """The new transformed_image_N.png files the cell reports, as workspace images (from the sandbox's own
    copies), the paths the model is told, and a note for each image refused (beyond the reference, whose
    decoding has no bounds)."""
    copies = {str(session.output_dir / name): copy for copy, name in zip(result.images, result.image_names)}
    indices, paths, refused = [], [], []
    for path in new:
        copy = copies.get(path)
        if copy is None or not TRANSFORMED.match(Path(path).name) or episode.images_left == 0:
            continue
        try:  # the reference opens it with PIL and converts it to RGB; here that happens in the sandbox
            pixels = session.decode(copy, max_pixels=episode.max_pixels, max_bytes=episode.image_bytes_left, mode="rgb")
            indices.append(episode.add_image(pixels, Path(path).name))
        except ImageBudgetError as err:  # the episode recorded it
            refused.append(str(err))
            continue
        except (ImageRefused, SandboxError, ToolError) as err:
            refused.append(episode.refuse_image(Path(path).name, str(err)))
            continue
        paths.append(path)
    return indices, paths, refused


def code_tools(schemas: dict) -> list[CodeTool]:
    """The python tools as code tools (their schemas are rebuilt each round by VtbProtocol)."""
    return [CodeTool(name, lambda result, saved: "", schema=lambda context, name=name: schemas[name])
            for name in CODE_TOOLS]


class VisualToolBench(Suite):
    name = "visualtoolbench"
    # the suite-specific settings it reads (eval.suites.SUITE_SETTINGS); any other one is refused. Not --max_turns
    # or --max_tool_calls: the runner counts its own rounds, 20 of calls per turn
    settings = frozenset({"data_dir", "revision", "scoring", "tasks", "critical", *WEB_SETTINGS, "prompt_variant",
                          "ablation", "toolset"})
    judge_regex = False  # constrain a vLLM judge's replies to a verdict object (tests of random-weight judges)
    judge_max_tokens = 2048  # the reference sets none; enough for a reasoning judge's reply

    def __init__(self, tasks, skipped, dataset: str, scoring_mode: str, judge: str | None, critical: str = "weight",
                 web=None, history: str = "golden", prompt_variant: str = "strong", ablation: str | None = None,
                 atomic: bool = False, counts: str = ""):
        super().__init__(tasks, skipped)
        self.dataset, self.scoring, self.judge_model, self.critical = dataset, scoring_mode, judge, critical
        self.web, self.history, self.counts = web, history, counts
        self.prompt_variant, self.ablation, self.atomic = prompt_variant, ablation, atomic
        self.schemas, self.texts = tool_schemas(), runner_texts()

    @classmethod
    def from_config(cls, config) -> VisualToolBench:
        from runtime.web import web_from_config

        prompt_variant, ablation, atomic = ablation_settings(config.prompt_variant, config.ablation, config.toolset,
                                                             config.tools)
        critical = config.critical or "weight"  # EvalConfig checked it is one of scoring.CRITICAL_RULES
        tasks, skipped, dataset, counts = data.load(config.data_dir, config.revision, *data.selection(config.tasks))
        print(counts)
        judge = None if config.judge_model in (None, NO_JUDGE) else config.judge_model
        web = web_from_config(config, shipped=[WEB_REPLAY] if WEB_REPLAY.is_file() else [], provider=PROVIDER)
        return cls(tasks, skipped, dataset, config.scoring, judge, critical, web, prompt_variant=prompt_variant,
                   ablation=ablation, atomic=atomic, counts=counts)

    @property
    def variant_name(self) -> str | None:
        """The ablation setting (None: the paper's main one, strong prompt and the general vision tool), so that
        merged runs report one row per setting; the no-tool baseline is the records' mode."""
        return setting_name(self.prompt_variant, self.ablation, self.atomic) if (
            self.prompt_variant != "strong" or self.ablation or self.atomic) else None

    def offered_tools(self) -> tuple[str, ...]:
        """The tools the model is offered in the tools mode, in the runner's order."""
        vision = () if self.ablation == "no_vision_tools" else \
            tuple(get_toolset(ATOMIC_TOOLSET).names()) if self.atomic else (VISION_TOOL,)
        return (*vision, *(name for name in TOOL_NAMES if name != VISION_TOOL))

    def describe(self) -> dict:
        return {
            "benchmark": "VisualToolBench (arXiv 2510.12712)",
            "dataset": self.dataset,
            "harness": HARNESS,
            "counts": self.counts,
            "setting": setting_name(self.prompt_variant, self.ablation, self.atomic),
            "protocol": (f"scripts/model_inference.py FunC_with_tools: system prompt "
                         f"'{PROMPT_VARIANTS[self.prompt_variant]}', the tools {', '.join(self.offered_tools())} as "
                         f"function calls in the model's own call format (none of its preset's "
                         f"prompts or tools), {MAX_ROUNDS} rounds of calls per turn; multi-turn tasks with the "
                         f"earlier turns' {'golden' if self.history == 'golden' else 'model'} answers in context; "
                         "web tools answered from recorded replies (--web); temperature 0 (1 for OpenAI's reasoning "
                         "models), no token cap (up to the context length), images at the checkpoint processor's "
                         "own size"),
            "scoring": f"{self.scoring}, critical rubrics by {self.critical} (the benchmark's run_judge_*.py at "
                       "xi1ngang/VisualToolBench@d4f200a)",
            "judge": (f"{self.judge_model}, one request per rubric per turn (the paper's judge: {scoring.JUDGE_MODEL})"
                      if self.judge_model else f"none: every task stays unscored (the paper's judge: "
                                               f"{scoring.JUDGE_MODEL}; give --judge_model)"),
        }

    def defaults(self, model: str, preset: str) -> dict:
        # the reference's name rule is for API model names: a checkpoint's path could contain "o3" by chance
        reasoning = preset == "openai" and ("thinking" in model or any(name in model for name in REASONING_MODELS))
        return {"temperature": 1.0 if reasoning else 0.0, **UNCAPPED, "max_images": MAX_IMAGES}

    def profile(self, profile):
        """Every preset gets exactly the runner's tools in its own call format: an API speaks OpenAI function calls;
        a checkpoint the paper's way of serving it (vLLM's hermes parser, as for every Qwen2.5-VL fine-tune: DeepEyes,
        Thyme) with the profile's tool placement and stop strings, none of its own prompt, wrappers, reminder or
        tools (an unknown tool would end the task)."""
        inner = profile.protocol
        if not isinstance(inner, OpenAIProtocol):
            inner = inner.plain() if isinstance(inner, HermesProtocol) else HermesProtocol(stop=QWEN_STOP)
        protocol = VtbProtocol(name=f"{inner.name}-visualtoolbench", stop=inner.stop, images_first=False,
                               end_of_turn=inner.end_of_turn, inner=inner, transformed=self.texts["transformed_images"],
                               image_tool=json.dumps(self.schemas["python_image_processing"]))
        # the atomic tools' boxes are pixels, as their schemas say: no model's own box convention
        return replace(profile, protocol=protocol, system_prompt=system_prompt(PROMPT_VARIANTS[self.prompt_variant]),
                       question_suffix="", toolset=None, code_tool=None, answer_with_calls="calls", harness=VtbLoop(),
                       max_calls_per_turn=None, answer_tag_required=False, budgets=self._budgets(1),
                       boxes=BoxConvention())

    @staticmethod
    def _budgets(turns: int) -> Budgets:
        # the harness counts the rounds; the episode's own caps stay out of its way
        return Budgets(max_turns=(MAX_ROUNDS + 1) * turns, max_tool_calls=10_000, max_images=MAX_IMAGES)

    def toolboxes(self, profile):
        from eval.loop import ToolBoxes

        def make(mode) -> ToolBox:
            if mode == "no_tools":
                return ToolBox(None)
            from runtime.sandbox import SandboxConfig, SandboxPool

            sandbox = SandboxPool(SandboxConfig(cell_timeout_s=CODE_TIMEOUT_S, max_output_chars=131072,
                                                preload=SandboxConfig().preload + ("matplotlib.pyplot",)))
            offered = self.offered_tools()
            atomic = get_toolset(ATOMIC_TOOLSET).tools if self.atomic else ()
            general = ToolSet("visualtoolbench_general", "VisualToolBench's calculator and web tools",
                              (*atomic, *web_tools(self.web, self.schemas), calculator_tool(self.schemas)),
                              unknown_tool)
            return VtbToolBox(general, [t for t in code_tools(self.schemas) if t.name in offered], sandbox=sandbox)

        return ToolBoxes(lambda task, mode: mode, make)

    def start(self, toolbox, profile, task, mode, budgets):
        turns = 1 + len(task.follow_ups)
        if mode == "no_tools":  # --no_tool_use: no system prompt, one reply per turn
            profile = replace(profile, harness=None, system_prompt=None)
        episode = toolbox.start(profile, task.question, task.images, system=profile.system_prompt,
                                budgets=replace(self._budgets(turns), max_images=budgets.max_images),
                                meta={"task": task.id, "category": task.category, "mode": mode})
        vtb = {"turn_count": turns, "golden_answers": task.meta["golden_answers"], "history": self.history,
               "turns": [], "show_images": not (mode == "no_tools" and task.meta["multi_turn"])}
        session = episode.resources.get("sandbox")
        if session is not None:
            vtb.update(_sandbox_paths(session, task))
        episode.trajectory.meta["visualtoolbench"] = vtb
        return episode

    def score(self, task, finished) -> dict:
        from runtime.web import unavailable_calls

        messages = finished.trajectory.messages
        vtb = finished.trajectory.meta.get("visualtoolbench") or {}
        turns = list(vtb.get("turns") or [])
        if finished.mode == "no_tools":  # one reply per turn, taken as it is
            turns = [{"answer": message_text(m), "ended": "answer", "rounds": 0} for m in messages
                     if m["role"] == "assistant"]
        call_results = [scoring.call_succeeded(observation_of(m) or message_text(m)) for m in messages
                        if m["role"] == "tool"]
        from eval.benchmarks.visualtoolbench.figures import image_operations

        calls = [(c["function"]["name"], c["function"].get("arguments")) for m in messages
                 for c in m.get("tool_calls", ())]
        offered = self.offered_tools()  # a call of a tool the run does not have manipulated nothing
        example = reference_example(task, turns)
        fields = {"prediction": str(turns[-1]["answer"]) if turns else "", "turn_answers": turns,
                  "variant": self.variant_name, "calls_by_name": dict(Counter(name for name, _ in calls)),
                  "image_operations": image_operations([c for c in calls if c[0] in offered]),
                  "web_unavailable": unavailable_calls(messages), "reference_example": example}
        unscored = None
        if finished.error:
            unscored = f"the episode failed: {finished.error}"
        elif task.meta["multi_turn"] and any(t["ended"] == "processing_error" for t in turns):
            unscored = ("the reference's loop fails on this task (" + turns[-1]["answer"] + "): its result has no "
                        "turns, which its judge cannot read")
        elif task.meta["multi_turn"] and len(turns) < len(task.meta["turn_prompts"]):
            unscored = f"the run stopped before the last turn ({finished.stop_reason})"
        elif not turns:
            unscored = f"the episode ended without an answer ({finished.stop_reason})"
        elif not self.judge_model:
            unscored = f"no judge (--judge_model; the paper's is {scoring.JUDGE_MODEL})"
        pending = unscored is None
        task_score = scoring.TaskScore(task.id, self.scoring, self.critical, None, unscored or "not judged yet")
        fields.update(score=None, score_error=unscored or "not judged yet", judge_pending=pending,
                      visualtoolbench=scoring.task_record(task_score, example, call_results,
                                                          self.judge_model or "none"))
        return fields

    def needs_judge(self) -> str | None:
        return None  # without a judge the tasks stay unscored, and the report says so

    def judge(self, items, backend, judge_name: str, retries: int):
        """One judge request per rubric per turn, every record's requests in one batch through `ask`; a reply
        the scoring mode refuses is asked again, up to --judge_retries attempts (the reference: 3)."""
        from eval.judge import VERDICT_REGEX, ask
        from runtime.protocols import Prompt

        plans = {}
        for k, (task, record) in enumerate(items):
            example, rubrics = record["reference_example"], clean_rubrics(task)
            try:
                plans[k] = (example, rubrics, scoring.rubric_requests(example, rubrics))
            except scoring.UnscorableTask as err:
                plans[k] = (example, rubrics, str(err))
        keys = [(k, n) for k, (_, _, requests) in plans.items() if not isinstance(requests, str)
                for n in range(len(requests))]
        attempts = {key: [] for key in keys}
        sampling = scoring.judge_sampling(self.judge_max_tokens, regex=VERDICT_REGEX if self.judge_regex else None)

        def prompt(key, attempt):
            request = plans[key[0]][2][key[1]]
            return Prompt([{"role": "user", "content": [{"type": "text", "text": request.prompt or ""}]}], []), sampling

        def accept(key, completion) -> bool:
            outcome = (scoring.JudgeRequestError(completion.error) if completion.error
                       else reply_text(completion.reply) or None)
            attempts[key].append(outcome)
            return scoring.reply_accepted(outcome, self.scoring)

        ready = [key for key in keys if plans[key[0]][2][key[1]].prompt is not None]
        if ready:
            ask(backend, ready, prompt, attempts=max(1, retries), accept=accept)
        for k, (task, record) in enumerate(items):
            example, rubrics, requests = plans[k]
            calls = record["visualtoolbench"]
            results = [True] * (calls["tool_calls"] - calls["failed_calls"]) + [False] * calls["failed_calls"]
            if isinstance(requests, str):
                result = scoring.TaskScore(task.id, self.scoring, self.critical, None, requests)
            else:
                result = scoring.score_task(example, rubrics, [attempts[(k, n)] or None for n in range(len(requests))],
                                            scoring=self.scoring, critical=self.critical)
            accuracy = result.accuracy
            yield record, {"score": None if accuracy is None else float(accuracy),
                           "score_error": result.unscored, "judge_pending": False,
                           "visualtoolbench": scoring.task_record(result, example, results, judge_name),
                           "judge": {"model": judge_name, "unjudged": result.unjudged,
                                     "rubrics": [_plain(r) for r in result.rubrics]}}

    @staticmethod
    def tables(records: list[dict], config: dict) -> list[str]:
        from eval.benchmarks.visualtoolbench import tables

        return tables.tables(records, config)

    @staticmethod
    def figures(records: list[dict], config: dict, folder: Path) -> list[tuple[str, str]]:
        from eval.benchmarks.visualtoolbench import figures

        return figures.figures(records, config, folder)


def ablation_settings(prompt_variant, ablation, toolset, tools: str = "on") -> tuple[str, str | None, bool]:
    """The run's ablation setting from --prompt_variant, --ablation and --toolset: (prompt variant, ablation,
    atomic vision tools), or a ValueError listing the values this suite knows."""
    if tools == "none" and (prompt_variant or ablation or toolset):
        given = [f"--{name} {value}" for name, value in (("prompt_variant", prompt_variant), ("ablation", ablation),
                                                          ("toolset", toolset)) if value]
        raise ValueError(f"{', '.join(given)} changes the run with tools, and --tools none has none (no system prompt, "
                         "no tools): drop it, or run with --tools on or both")
    prompt_variant = prompt_variant or "strong"
    if prompt_variant not in PROMPT_VARIANTS:
        raise ValueError(f"--prompt_variant {prompt_variant!r} is not one of VisualToolBench's: "
                         f"{', '.join(PROMPT_VARIANTS)} (the paper's strong and weak system prompts, Figure 7)")
    if ablation is not None and ablation not in ABLATIONS:
        raise ValueError(f"--ablation {ablation!r} is not one of VisualToolBench's: {', '.join(ABLATIONS)} (Figure 7; "
                         "its no-tool setting is --tools none, the atomic vision tools --toolset "
                         f"{ATOMIC_TOOLSET})")
    if toolset is not None and toolset != ATOMIC_TOOLSET:
        raise ValueError(f"--toolset {toolset!r}: VisualToolBench offers its own tools; the one tool set it takes is "
                         f"{ATOMIC_TOOLSET!r}, the paper's atomic vision tools in place of python_image_processing "
                         "(App. F.2, Table 14)")
    if toolset and ablation:
        raise ValueError(f"--toolset {ATOMIC_TOOLSET} replaces the vision tool and --ablation {ablation} removes it: "
                         "give one of them")
    return prompt_variant, ablation, toolset == ATOMIC_TOOLSET


def setting_name(prompt_variant: str, ablation: str | None, atomic: bool) -> str:
    """A setting as the report names it (the records' `variant`)."""
    tools = "no vision tool" if ablation == "no_vision_tools" else \
        "atomic vision tools" if atomic else "general vision tool"
    return f"{prompt_variant} prompt, {tools}"


def _plain(value):
    return json.loads(json.dumps(value, default=lambda v: getattr(v, "__dict__", str(v))))


def _sandbox_paths(session, task) -> dict:
    """The paths the tool description names: each turn's first image at the dataset's relative path under the
    sandbox's work folder (a link to the read-only input), and the save folder of each turn, as the scripts name
    them (<run>/chunk_1_task_<id>[/turn_<t>])."""
    images = []
    for turn, relative in enumerate(task.meta["image_paths"]):
        if relative is None:
            images.append(None)
            continue
        link = session.work_dir / relative
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(session.inputs_dir / ("image_0.png" if turn == 0 else f"turn_{turn}.png"))
        images.append(str(link))
    base = session.output_dir / f"{CHUNK}_task_{task.id}"
    saves = [str(base / f"turn_{t}") if task.meta["multi_turn"] else str(base) for t in range(len(images))]
    return {"image_paths": images, "save_dirs": saves}


def clean_rubrics(task) -> list[dict]:
    """The judge scripts' clean-rubrics item for a task, from the dataset's rubrics."""
    rubrics = task.meta["rubrics_by_turn"]
    if task.meta["multi_turn"]:
        return [{"task_id": task.id, "turns": [{"rubrics": r} for r in rubrics]}]
    return [{"task_id": task.id, "rubrics": rubrics[0]}]


def reference_example(task, turns: list[dict]) -> dict:
    """The model-response example the reference's scripts write for a task, from our turns' answers."""
    meta = task.meta
    head = {"id": task.id, "task_id": task.id, "turncase": meta["turncase"], "eval_focus": meta["eval_focus"],
            "prompt_category": meta["prompt_category"]}
    if meta["multi_turn"]:
        return {**head, "turns": [{"turn_number": t, "prompt": meta["turn_prompts"][t],
                                   "golden_answer": meta["golden_answers"][t],
                                   "model_answer": turns[t]["answer"], "num_tool_calls": turns[t]["rounds"]}
                                  for t in range(len(turns))], "total_turns": len(meta["turn_prompts"])}
    answer = turns[0] if turns else {"answer": "", "rounds": 0}
    return {**head, "prompt": meta["turn_prompts"][0], "golden_answer": meta["golden_answers"][0],
            "model_answer": answer["answer"], "num_tool_calls": answer["rounds"]}
