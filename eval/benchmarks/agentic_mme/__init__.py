"""Agentic-MME (arXiv 2604.03016, github.com/ChoS3nE11ven/Agentic-MME) as a suite: 418 tasks in 3 levels, run as
the benchmark's OpenAI-compatible runners run them (the `thyme` and `deepeyes` presets: as its local-model runners
run them, runners.py), in either interface (`--track`): Atm, the 14 atomic image tools
and the search tools as function calls (atomic/run_atomic_tools_openai.py), or Gen, model-written Python in
`<code>` blocks beside the search tools (general/run_general_script_openai.py). Their system prompts, user turns,
tool schemas, tool replies, requests for a final answer and 15-round / 15-call loop are reproduced; then the
benchmark's own scoring: the final answer by its verifier, and the process axes (S: search checkpoints by an LLM
judge; V_tool: the required visual tool used; V_true: a VLM judge on the images the model made; Overthink).
README.md in this folder explains each part and every known difference.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

from eval.backends import Sampling
from eval.benchmarks.agentic_mme import data, process, runners, scoring, tables
from eval.benchmarks.agentic_mme.images import JUDGE, as_sent, message_limits, sent_made, sent_original
from eval.benchmarks.agentic_mme.web import PROVIDER, runner_error
from eval.benchmarks.data import LazyImages, keep, wanted
from eval.config import NO_JUDGE
from eval.suites import WEB_SETTINGS, Suite
from runtime.code_tools import TRANSFORMED
from runtime.harness import Harness, Nudge
from runtime.profiles import QWEN_STOP, Budgets
from runtime.protocols import CodeProtocol, HermesProtocol, OpenAIProtocol, Prompt, Protocol
from runtime.protocols.base import END_OF_TURN, Call, Finish, Parsed
from runtime.protocols.code import CODE_TOOL
from runtime.toolbox import ToolBox
from runtime.trajectory import message_text, text
from tools.toolset import Reply, Tool, ToolSet
from tools.toolsets.agentic_mme import read_image

FOLDER = Path(__file__).parent
RUNNER = FOLDER / "prompts" / "runner.json"
ORACLE = FOLDER / "prompts" / "oracle_guidance.json"
SEARCH = FOLDER / "prompts" / "search_tools.json"
WEB_REPLAY = FOLDER / "web_replay.jsonl"
TRACKS = ("atm", "gen")
DEFAULT_TRACK = "atm"  # the paper's headline (Gemini 3 Pro, 56.3 % in Atm mode)
MAX_ROUNDS = 15  # --max_rounds: model calls in the loop, before the one that asks for a final answer
MAX_TOOL_CALLS = 15  # --max_tool_calls: function calls in all (Gen's code blocks do not count)
# the runners' request settings: --temperature 0.0 and the token limit of a loop call
SAMPLING = {"atm": {"temperature": 0.0, "max_tokens": 4000}, "gen": {"temperature": 0.0, "max_tokens": 12000}}
MAX_IMAGES = 64  # the runners have no image budget; a Gen cell may save several images
CODE_TIMEOUT_S = 180  # exec_python_file's timeout
CODE_OUTPUT_CHARS = 2000  # how much of stdout or stderr the model reads
IMAGE_TOOLS = ("crop", "rotate", "flip", "resize", "enhance", "grayscale", "autocontrast", "blur", "sharpen",
               "denoise", "edge_detect", "invert", "equalize", "threshold")
SEARCH_TOOLS = ("google_search", "google_lens_search", "fetch_webpage")
DEFAULT_GL, DEFAULT_HL = "us", "en"  # configs/search_config.json
FETCH_CHARS = 12000
# a call past the budget: the runner stops reading the reply's calls there and sends no tool message for it; the
# trajectory keeps it with this note, and the prompt leaves it out
SKIPPED_CALL = "not run: the tool-call budget was spent; the benchmark's runner sends no reply to this call"
LENS_IMAGE = "_image_index"  # where the toolbox puts the workspace image a Gen lens call names
INPUT_FILES = "agentic_mme_inputs"  # trajectory meta: the task's image files, which the runner sends from its copy
# The paper's ablations (section 3.3), as --ablation values. Table 4, tool availability: Full is the default run and
# Perception-only the no-tool baseline (--tools none); image_only is the runners' own switch (run without
# --enable_search: the search tools are not offered, a call to one is answered "Search is not enabled");
# search_only has no switch in the code: tirlab offers the search tools alone (Atm; Gen's code cell is its image
# tool). Table 5, oracle guidance on the full tool set: the task's ground-truth intermediate images (image_cause/)
# beside its input images, and with stepwise_guidance also its checkpoints' descriptions, answers masked.
ABLATIONS = {"image_only": "Table 4 Image-only: the image tools without the search tools",
             "search_only": "Table 4 Search-only: the search tools without the image tools (Atm only)",
             "visual_cues": "Table 5 + Visual Cues: the ground-truth intermediate images beside the input",
             "stepwise_guidance": "Table 5 + Stepwise Guidance: those images and the checkpoints' descriptions"}
ORACLE_ABLATIONS = ("visual_cues", "stepwise_guidance")
SEARCH_OFF = "Search is not enabled"  # the runners' reply to a search call when search is not enabled

# the Gen runner's code reader (general/run_general_script_openai.py parse_model_output); its answer readers are
# scoring.extract_answer_text (Atm), parse_model_output_answer and general_final_answer (Gen)
CODE_RE = re.compile(r"<code>(.*?)</code>", re.IGNORECASE | re.DOTALL)
NEW_IMAGES = re.compile(r"Image (\d+): ([^,\]]+)")


def runner_texts() -> dict[str, str]:
    return {key: entry["text"] for key, entry in json.loads(RUNNER.read_text(encoding="utf-8")).items()}


def oracle_texts() -> dict[str, str]:
    return {key: entry["text"] for key, entry in json.loads(ORACLE.read_text(encoding="utf-8")).items()
            if isinstance(entry, dict)}


def search_schemas(track: str) -> list[dict]:
    return json.loads(SEARCH.read_text(encoding="utf-8"))[f"{track}_search"]["tools"]


def gen_code(reply: str) -> str | None:
    """parse_model_output's code: the first closed `<code>` block, markdown fences taken off; None if empty."""
    found = CODE_RE.search(reply or "")
    code = (found.group(1) if found else "").strip()
    if code:
        code = re.sub(r"^```python\s*\n?", "", code)
        code = re.sub(r"^```\s*\n?", "", code)
        code = re.sub(r"\n?```\s*$", "", code).strip()
    return code or None


@dataclass(frozen=True)
class AmmeProtocol(Protocol):
    """The model's own protocol, with the runner's message layout around it: Gen reads the first `<code>` block
    (which wins over function calls in the same reply) and shows its output in a user turn, each new image with
    its `[Image N: name]` line; Atm shows an image tool's JSON reply in the tool message and the new image in a
    user turn after it. The harness's requests for a final answer are user turns of their own. Each image is
    shown as the runner sends it (images.py: compressed by the limits of its message's place)."""

    inner: Protocol = None
    track: str = DEFAULT_TRACK
    requests: tuple[str, ...] = ()  # the request texts the harness appends to tool results

    def parse(self, completion, finish: Finish = END_OF_TURN) -> Parsed:
        parsed = self.inner.parse(completion, finish)
        code = gen_code(parsed.reply) if self.track == "gen" else None
        return parsed if code is None else replace(parsed, calls=(Call(CODE_TOOL, {"code": code}),))

    def observation_parts(self, observation):
        return self.inner.observation_parts(observation)

    def render(self, trajectory):
        wired = self.wire_messages(trajectory.messages)
        files = trajectory.meta.get(INPUT_FILES)
        if files is None:
            raise ValueError(f"an Agentic-MME trajectory names its task's image files in meta[{INPUT_FILES!r}] (the "
                             "runner sends them from its copy); start the episode with AgenticMme.start")
        shown, sent, first = [], [], True
        for message, limits in zip(wired, message_limits(wired)):
            if limits is None:
                shown.append(message)
                continue
            parts = []
            for part in message["content"]:
                if part["type"] == "image":
                    index = part["image"]
                    sent.append(as_sent(trajectory.images[index], limits, files[index] if first else None))
                    part = {**part, "image": len(sent) - 1}
                parts.append(part)
            shown.append({**message, "content": parts})
            first = False
        return self.inner.render(replace(trajectory, messages=shown, images=sent))

    def wire_messages(self, messages: list[dict]) -> list[dict]:
        wired, request = [], None
        for message in messages:
            if message["role"] != "tool" and request:
                wired.append({"role": "user", "content": [text(request)]})
                request = None
            if message["role"] == "assistant" and message.get("tool_calls") and all(
                    call["function"]["name"] == CODE_TOOL for call in message["tool_calls"]):
                wired.append({k: v for k, v in message.items() if k != "tool_calls"})  # the code stays in the text
            elif message["role"] == "tool":
                parts = [p for p in message["content"] if not (p["type"] == "text" and p["text"] in self.requests)]
                request = next((p["text"] for p in message["content"] if p not in parts), request)
                if message_text({"content": parts}) != f"Error: {SKIPPED_CALL}":
                    wired += self._tool_turn(message, parts)
            else:
                wired.append(message)
        if request:
            wired.append({"role": "user", "content": [text(request)]})
        return wired

    def _tool_turn(self, message: dict, parts: list[dict]) -> list[dict]:
        images = [p for p in parts if p["type"] == "image"]
        words = [p for p in parts if p["type"] == "text"]
        if self.track == "gen" and message.get("name") == CODE_TOOL:
            names = dict(NEW_IMAGES.findall(message_text({"content": words}).rpartition("[New images: ")[2]))
            shown = []
            for part, number in zip(images, names or [None] * len(images)):
                label = f"[Image {number}: {names[number]}]" if number else f"[Image {part['image']}]"
                shown += [part, text(label)]
            return [{"role": "user", "content": shown + words}]
        tool = {**message, "content": words}
        if not images:
            return [tool]
        return [tool, {"role": "user", "content": images + [text(_image_line(message.get("name"), words, images))]}]


def _image_line(name: str, words: list[dict], images: list[dict]) -> str:
    """The Atm runner's line under a new image: `[Image {new_image_index}: {tool} - {label}]`."""
    try:
        out = json.loads(message_text({"content": words}))
    except ValueError:
        out = {}
    out = out if isinstance(out, dict) else {}
    label = out.get("label", "")
    return f"[Image {out.get('new_image_index', images[-1]['image'])}: {name}" + (f" - {label}" if label else "") + "]"


class AmmeLoop(Harness):
    """The runners' loop as rules on our episode (one round = one model call):

    - a reply with calls runs them (an answer beside them is ignored); in Gen a `<code>` block runs instead of
      the calls, and an answer beside it ends the run once the code has run;
    - a reply without calls ends the run with its answer (Atm: `<answer>` or else the text; Gen: the same, or the
      text when the answer is empty); an empty one gets a request for the answer (Atm: without tools);
    - the 16th function call is not run: the tools go away and a request for the answer follows;
    - Atm: after the calls of round 14, a request for the answer in the last round, without tools;
    - after round 15 without an answer, one more call without tools asks for it; its reply is the answer.
    """

    unreadable_calls_are_text = True  # the runners read calls from the server's parser: an unreadable one is text

    def __init__(self, track: str):
        self.track, self.texts = track, runner_texts()
        self.request_texts = (self.request(self.texts["reason_budget"].format(max_tool_calls=MAX_TOOL_CALLS)),
                              self.request(self.texts["reason_one_round"]), self.texts[f"{track}_final"])

    def request(self, reason: str) -> str:
        return self.texts[f"{self.track}_request"].format(reason=reason)

    def offer_tools(self, episode) -> bool:
        return not loop_state(episode)["no_tools"]

    def after_reply(self, episode, reply: str, has_calls: bool) -> Nudge | None:
        state, turn = loop_state(episode), episode.turns - 1
        if state["final"]:  # the reply to the last request: whatever it holds is the answer
            _end(episode, self._answer(reply), "final_request")
            return None
        if has_calls:
            if self.track == "gen" and gen_code(reply) is not None:
                state["answer_after_code"] = scoring.parse_model_output_answer(reply) or None
            return None
        answer = self._answer(reply)
        if answer:
            _end(episode, answer, "answer")
            return None
        if turn < MAX_ROUNDS - 1:
            state["no_tools"] = state["no_tools"] or self.track == "atm"
            return Nudge(self.request(self.texts["reason_empty"]))
        state["final"] = state["no_tools"] = True
        return Nudge(self.texts[f"{self.track}_final"])

    def after_tools(self, episode) -> tuple[str, bool]:
        state, turn = loop_state(episode), episode.turns - 1
        answer = state.pop("answer_after_code", None)
        if answer:
            _end(episode, answer, "answer_after_code")
            return "", True
        if state.pop("budget_hit", False):
            state["no_tools"] = True
            if turn < MAX_ROUNDS - 1:
                return self.request(self.texts["reason_budget"].format(max_tool_calls=MAX_TOOL_CALLS)), False
        elif self.track == "atm" and turn == MAX_ROUNDS - 2:
            state["no_tools"] = True
            return self.request(self.texts["reason_one_round"]), False
        if turn >= MAX_ROUNDS - 1:
            state["final"] = state["no_tools"] = True
            return self.texts[f"{self.track}_final"], False
        return "", False

    def _answer(self, reply: str) -> str:
        return scoring.general_final_answer(reply) if self.track == "gen" else scoring.extract_answer_text(reply)


def loop_state(episode) -> dict:
    return episode.harness_state.setdefault("agentic_mme", {"no_tools": False, "final": False, "calls": 0})


def _end(episode, answer: str, how: str) -> None:
    """The runner's final answer, kept in the trajectory (the episode then ends on its own rules)."""
    episode.trajectory.meta["agentic_mme"] = {"answer": answer, "ended": how}


class AmmeToolBox(ToolBox):
    """The runners' tool-call budget (every function call counts, Gen's code blocks do not; the reply's calls
    after the one that exceeds it are not run), and Gen's lens calls resolved to the image they name."""

    def __init__(self, track: str, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.track = track

    def run(self, episodes) -> None:
        for episode in episodes:
            state = loop_state(episode)
            for pending in episode.pending:
                if pending.call.name == CODE_TOOL and self.track == "gen":
                    continue
                state["calls"] += 1
                if state["calls"] > MAX_TOOL_CALLS or state.get("budget_hit"):
                    state["budget_hit"] = True
                    pending.call = replace(pending.call, error=SKIPPED_CALL)
                    episode.tool_calls -= 1  # the episode counts the calls it hands out; this one does not run
                elif pending.call.name == "google_lens_search" and self.track == "gen" and pending.call.error is None:
                    arguments = {**pending.call.arguments, LENS_IMAGE: gen_lens_image(episode, pending.call.arguments)}
                    pending.call = replace(pending.call, arguments=arguments)
        super().run(episodes)


def gen_lens_image(episode, arguments: dict) -> int | str:
    """The Gen runner's image for google_lens_search, as a workspace index: `image_ref` current (the latest
    transformed_image_N.png, else the latest image the code saved, else the original) or original, else
    `image_path` by its file name among the images the code saved, else the original. A name it does not know
    stays a name (the reference then fails to upload it)."""
    saved = {}  # file name -> workspace index, in the order the code saved them
    for message in episode.trajectory.messages:
        if message["role"] == "tool" and message.get("name") == CODE_TOOL:
            images = [p["image"] for p in message["content"] if p["type"] == "image"]
            listed = NEW_IMAGES.findall(message_text(message).rpartition("[New images: ")[2])
            saved.update({name: index for (_, name), index in zip(listed, images)})
    reference = str(arguments.get("image_ref") or "").strip().lower()
    if reference in ("current", "cur", "latest"):
        numbered = sorted((int(TRANSFORMED.match(n).group(1)), i) for n, i in saved.items() if TRANSFORMED.match(n))
        return numbered[-1][1] if numbered else (list(saved.values())[-1] if saved else 0)
    if reference in ("orig", "original", "input") or not arguments.get("image_path"):
        return 0
    path = str(arguments["image_path"])
    return saved.get(Path(path).name, path)


def image_sha256(image) -> str:
    """The replay key of a reverse image search: the SHA-256 of the image's RGB pixels, shape first."""
    digest = hashlib.sha256(f"{image.shape[0]}x{image.shape[1]}:".encode())
    digest.update(image.astype("uint8").tobytes())
    return digest.hexdigest()


def search_tools(web, track: str) -> list[Tool]:
    """The three search tools with the runner's schemas, answered by the web backend (recorded, or live through
    web.py's client), replies as the runner hands them to the model (`context` or `text`, or `Error: ...`)."""
    schemas = {s["function"]["name"]: s for s in search_schemas(track)}

    def answer(name: str, key: dict, live) -> Reply:
        reply, reason = web.answer(name, key, live)
        if reply is None:
            from runtime.web import UNAVAILABLE_MARK

            return Reply(f"Error: Search failed: {name} is {UNAVAILABLE_MARK}: {reason}"[:len("Error: ") + 200], True)
        return reply

    def google_search(arguments, files) -> Reply:
        # Atm passes str(args.get("query", "")) on (a null query is "None"); Gen refuses an empty one
        query = str(arguments.get("query") or "") if track == "gen" else str(arguments.get("query", ""))
        if track == "gen" and not query:
            return Reply("Error: google_search requires 'query' argument", error=True)
        key = {"query": query, "gl": arguments.get("gl") or DEFAULT_GL, "hl": arguments.get("hl") or DEFAULT_HL}
        return answer("google_search", key, lambda client: client.google_search(key["query"], key["gl"], key["hl"]))

    def google_lens_search(arguments, files) -> Reply:
        try:
            index = arguments.get(LENS_IMAGE, 0) if track == "gen" else _atm_lens_image(arguments, files)
            if isinstance(index, str):
                return answer("google_lens_search", {"image_path": index},
                              lambda client: client.google_lens_search_path(index))
            image = _workspace_image(files, index)
        except Exception as err:  # noqa: BLE001 - the runner turns any failure into its error reply
            return Reply(f"Error: {runner_error(str(err))}", error=True)
        return answer("google_lens_search", {"image_sha256": image_sha256(image)},
                      lambda client: client.google_lens_search(image))

    def fetch_webpage(arguments, files) -> Reply:
        url = str(arguments.get("url") or "") if track == "gen" else str(arguments.get("url", ""))
        if track == "gen" and not url:
            return Reply("Error: fetch_webpage requires 'url' argument", error=True)
        try:
            limit = int(arguments.get("max_chars", FETCH_CHARS) or FETCH_CHARS)
        except (TypeError, ValueError) as err:
            return Reply(f"Error: {runner_error(str(err))}", error=True)
        reply = answer("fetch_webpage", {"url": url}, lambda client: client.fetch_webpage(url))
        # fetch_webpage: `if max_chars and len(text) > max_chars: text = text[:max_chars]` (a negative limit cuts
        # from the end)
        return reply if reply.error or len(reply.text) <= limit else Reply(reply.text[:limit])

    runs = {"google_search": google_search, "google_lens_search": google_lens_search, "fetch_webpage": fetch_webpage}
    return [Tool(name, schemas[name], run=_with_arguments(run)) for name, run in runs.items()]


def _with_arguments(run):
    """The runners read a call's arguments with json.loads and take {} when they do not parse."""
    def wrapped(arguments, files) -> Reply:
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except ValueError:
                arguments = {}
        return run(arguments if isinstance(arguments, dict) else {}, files)

    return wrapped


def _atm_lens_image(arguments: dict, files) -> int:
    if "image_index" in arguments:
        index, count = int(arguments["image_index"]), _workspace_size(files)
        if index < 0 or index >= count:
            raise ValueError(f"Invalid image_index {index}. Valid range: 0-{count - 1}")
        return index
    reference = str(arguments.get("image_ref") or "").strip().lower()
    return _workspace_size(files) - 1 if reference in ("current", "cur", "latest") else 0


def _workspace_image(files, index: int):
    return files.read(str(Path(files.original).parent / f"image_{index}.png"))


def _workspace_size(files) -> int:
    count = 0
    while True:
        try:
            _workspace_image(files, count)
        except FileNotFoundError:
            return count
        count += 1


def unknown_tool(name: str) -> Reply:
    return Reply(f"Error: Unknown tool: {name}", error=True)


def search_not_enabled(track: str):
    """The runners' reply to a call the tool set lacks when search is off: Atm answers every call that is not an
    image tool "Search is not enabled"; Gen answers so for the search tools and "Unknown tool" otherwise."""
    def reply(name: str) -> Reply:
        if track == "atm" or name in SEARCH_TOOLS:
            return Reply(f"Error: {SEARCH_OFF}", error=True)
        return unknown_tool(name)

    return reply


def masked(text: str, words: list[str], mask: str) -> str:
    """`text` with each of `words` (whole words, any case, the longest first) replaced by `mask`."""
    for word in sorted({w.strip() for w in words if w and w.strip()}, key=len, reverse=True):
        text = re.sub(rf"(?<!\w){re.escape(word)}(?!\w)", mask, text, flags=re.IGNORECASE)
    return text


def guidance_steps(config: dict) -> list[str]:
    """The task's checkpoint descriptions in their order, with the answer-related words masked: the golden answer,
    the answers search checkpoints name ("expected to find: X") and the visual checks' expected answers (but
    yes / no, which say nothing of the answer)."""
    checkpoints = data.checkpoints(config)
    golden = config.get("golden_answer") if isinstance(config.get("golden_answer"), dict) else {}
    words = [str(golden.get("value") or "")]
    for checkpoint in checkpoints:
        words.append(scoring.search_expected_answer(str(checkpoint.get("description") or "")) or "")
        check = checkpoint.get("visual_check") if isinstance(checkpoint.get("visual_check"), dict) else {}
        expected = str(check.get("expected_answer") or "")
        words.append("" if expected.strip().lower() in ("yes", "no") else expected)
    mask = oracle_texts()["mask"]
    return [masked(str(c.get("description") or ""), words, mask) for c in checkpoints if c.get("description")]


# What the reference's evaluator reads from a run, rebuilt from our trajectory: the runner's tool_use_list and the
# images in its tool_images folder.

def tool_use_list(messages: list[dict], track: str, ran=None) -> list[dict]:
    """The runner's tool_use_list. Atm: every call in order (an image tool only when it succeeded, with the tool's
    JSON reply as its output, as the runner records it). Gen: the search calls, then the image operations
    scoring.infer_tool_ops reads from the code, then one entry per code cell; `index` numbers them in that
    order. `ran(code, turn)`: the script a cell ran, where the runner changes the model's code (the local runners'
    header), which is what the reference reads its operations from."""
    calls, turn, searches, ops, cells = {}, 0, [], [], []
    for message in messages:
        if message["role"] == "assistant":
            turn += 1
            for call in message.get("tool_calls", ()):
                calls[call["id"]] = (call["function"]["name"], _arguments(call["function"]["arguments"]), turn - 1)
        if message["role"] != "tool" or message.get("tool_call_id") not in calls:
            continue
        name, arguments, at = calls[message["tool_call_id"]]
        reply = message_text({"content": [p for p in message["content"] if p["type"] == "text"]})
        if reply.startswith(f"Error: {SKIPPED_CALL}"):
            continue
        if name == CODE_TOOL:
            cells.append({"tool_name": "run_visual_processing_code", "raw_tool_name": "script_exec",
                          "arguments": {"turn": at}, "output": {"ok": "false" if message.get("error") else "true"}})
            ops += [{"tool_name": op, "raw_tool_name": "python_image_processing",
                     "arguments": {"op": op, "save": "", "line": line}, "output": {}}
                    for op, line in scoring.infer_tool_ops(ran(arguments.get("code", ""), at) if ran else
                                                           arguments.get("code", ""))]
            continue
        if name in IMAGE_TOOLS and track == "atm":
            if message.get("error"):
                continue
            out = _json_object(reply) or {"ok": "true"}
        elif message.get("error"):
            out = {"ok": False, "error": reply.removeprefix("Error: ")}
        else:
            out = {"url": arguments.get("url", ""), "text": reply} if name == "fetch_webpage" else {"context": reply}
        searches.append({"tool_name": name, "raw_tool_name": name, "arguments": arguments, "output": out, "turn": at})
    return [{"index": k, **use} for k, use in enumerate(searches + ops + cells)]


def images_made(messages: list[dict], track: str, inputs: int) -> list[dict]:
    """The images the model made, as the files of the runner's tool_images folder: {"index" (workspace),
    "name"} in the order they were made. Atm's toolbox names them transformed_image_1.png, 2, ...; Gen's are
    the files the code saved, by the names its `[New images: ...]` line gives."""
    made = []
    for message in messages:
        indices = [p["image"] for p in message["content"] if p["type"] == "image" and p["image"] >= inputs] \
            if message["role"] == "tool" else []
        if not indices:
            continue
        if track == "gen" and message.get("name") == CODE_TOOL:
            listed = dict(NEW_IMAGES.findall(message_text(message).rpartition("[New images: ")[2]))
            made += [{"index": index, "name": listed.get(str(index), f"image_{index}.png")} for index in indices]
        else:
            made += [{"index": index, "name": f"transformed_image_{len(made) + 1}.png"} for index in indices]
    return made


def _arguments(raw) -> dict:
    found = _json_object(raw) if isinstance(raw, str) else raw
    return found if isinstance(found, dict) else {}


def _json_object(text: str) -> dict | None:
    try:
        found = json.loads(text)
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


def _profile_name(preset: str | None) -> str | None:
    from eval.presets import get_preset

    return get_preset(preset).profile.name if preset else None


class AgenticMme(Suite):
    name = "agentic_mme"
    # the suite-specific settings it reads (eval.suites.SUITE_SETTINGS); any other one is refused
    settings = frozenset({"data_dir", "revision", "scoring", "tasks", "track", "ablation", *WEB_SETTINGS,
                          "max_turns", "max_tool_calls"})
    judge_regex = False  # the S judge's verdict format enforced by structured outputs (tests of random-weight judges)

    def __init__(self, tasks, skipped, dataset: str, scoring_mode: str, judge: str | None, track: str = DEFAULT_TRACK,
                 web=None, images_dir: Path | None = None, ablation: str | None = None, loaded: dict | None = None):
        super().__init__(tasks, skipped)
        self.dataset, self.scoring, self.judge_model, self.track = dataset, scoring_mode, judge, track
        self.web, self.images_dir, self.ablation, self.loaded = web, images_dir, ablation, loaded or {}
        self.texts = runner_texts()
        self.runner = None  # the preset's profile name: which of the benchmark's runners runs it

    @classmethod
    def from_config(cls, config) -> AgenticMme:
        from runtime.web import web_from_config

        track = config.track or DEFAULT_TRACK
        if track not in TRACKS:
            raise ValueError(f"unknown --track {track!r} for agentic_mme; use one of {TRACKS} (atm: the atomic tools, "
                             "gen: model-written Python)")
        if config.prompt_variant:
            raise ValueError("agentic_mme has one prompt per track; drop --prompt_variant (choose --track atm or gen; "
                             "the paper's oracle-guidance settings are --ablation visual_cues / stepwise_guidance)")
        ablation = config.ablation
        check_ablation(ablation, track, config.tools, _profile_name(config.preset))
        levels = wanted(config.tasks, data.LEVELS, "Agentic-MME level")
        tasks, skipped, dataset, loaded = data.load(config.data_dir, config.revision, cues=ablation in ORACLE_ABLATIONS)
        print(loaded["counts"])
        for flag in loaded["flags"]:
            print(f"Agentic-MME: flagged: {flag}")
        judge = None if config.judge_model == NO_JUDGE else config.judge_model
        web = web_from_config(config, shipped=[WEB_REPLAY] if WEB_REPLAY.is_file() else [],
                              provider=None if ablation == "image_only" else PROVIDER)
        suite = cls(*keep(tasks, skipped, levels, data.LEVELS), dataset, config.scoring, judge, track, web,
                    Path(config.out) / "images" if config.out else None, ablation, loaded)
        suite.runner = _profile_name(config.preset)
        return suite

    @property
    def variant_name(self) -> str:
        """The track, and the ablation when there is one (merged runs report one row per setting)."""
        return f"{self.track}-{self.ablation}" if self.ablation else self.track

    def describe(self) -> dict:
        return {
            "benchmark": "Agentic-MME (arXiv 2604.03016)",
            "dataset": self.dataset,
            "harness": runners.harness_id(self.runner),
            "protocol": self._local_protocol() if self.runner in runners.RUNNERS else (
                f"{self.track.capitalize()} mode: "
                + ("the 14 atomic image tools and the search tools as function calls "
                   "(atomic/run_atomic_tools_openai.py)" if self.track == "atm" else
                   "Python in <code> blocks beside the search tools as function calls "
                   "(general/run_general_script_openai.py)")
                + f"; {MAX_ROUNDS} rounds, {MAX_TOOL_CALLS} tool calls, then a request for the answer; "
                  f"temperature 0, {SAMPLING[self.track]['max_tokens']} tokens per reply; images as the runner "
                  "compresses them (2048*2048 first, then adaptive), the server's processor after that; "
                  "search answered from recorded replies (--web)"),
            "scoring": f"{self.scoring} (official: the benchmark's evaluation/eval_runs_search.py at ChoS3nE11ven/"
                       "Agentic-MME@5e5dfbd; strict: tirlab's reading of the same checks)",
            "judge": (f"{self.judge_model} for the S checkpoints (text) and V_true (on the images the model made); "
                      "the paper's judge and the script's default: gpt-4o-mini" if self.judge_model else
                      "none: accuracy and V_tool only; S and V_true stay unscored"),
            "ablation": ABLATIONS[self.ablation] if self.ablation else "none (Table 4's Full setting)",
            **({"counts": self.loaded["counts"]} if self.loaded.get("counts") else {}),
            **({"flags": "; ".join(self.loaded["flags"])} if self.loaded.get("flags") else {}),
        }

    def _local_protocol(self) -> str:
        script = (f"atomic/run_atomic_tools_{self.runner}.py" if self.track == "atm" else
                  f"general/run_general_script_{self.runner}.py")
        how = ("the 14 atomic image tools and the search tools as a JSON list in <tool_log>, each result a user turn"
               if self.track == "atm" else "search tools in <tool_log> (results in <tool_results> after the latest "
               "image), else Python in <code> behind the runner's header")
        return (f"{self.track.capitalize()} mode through the benchmark's {self.runner} runner ({script}): {how}; "
                f"{runners.MAX_ROUNDS} rounds, {runners.MAX_TOOL_CALLS} tool calls (later ones not run), then a "
                f"request for the answer; greedy (temperature 0), {runners.SAMPLING[self.track]['max_tokens']} new "
                "tokens per reply" + (", stop strings </code> and </tool_log>" if self.runner == "thyme" and
                                       self.track == "gen" else "")
                + "; images as the runner compresses them (2048*2048 first, then adaptive), then the checkpoint "
                  "processor's own size limits; search answered from recorded replies (--web)")

    def defaults(self, model: str, preset: str) -> dict:
        if _profile_name(preset) in runners.RUNNERS:  # the local runners' generate(): the processor's own image size
            return {**runners.SAMPLING[self.track], "max_pixels": 0, "max_images": MAX_IMAGES}
        # the OpenAI runners reach open models through a vLLM server: the checkpoint processor's own image size
        return {**SAMPLING[self.track], "max_pixels": 0, "max_images": MAX_IMAGES}

    def profile(self, profile):
        self.runner = profile.name
        if profile.name in runners.RUNNERS:
            return runners.local_profile(profile, self.track)
        inner = profile.protocol
        if isinstance(inner, HermesProtocol):  # the model's own call format, none of its preset's own prompts
            inner = inner.plain()
        if isinstance(inner, CodeProtocol) or not isinstance(inner, (HermesProtocol, OpenAIProtocol)):
            inner = HermesProtocol(stop=QWEN_STOP)  # the runners speak function calls, served by vLLM's hermes parser
        loop = AmmeLoop(self.track)
        protocol = AmmeProtocol(name=f"{inner.name}-agentic_mme_{self.track}", stop=inner.stop,
                                images_first=inner.images_first, end_of_turn=inner.end_of_turn, inner=inner,
                                track=self.track, requests=loop.request_texts)
        return replace(profile, protocol=protocol, system_prompt=self.texts[f"{self.track}_system"], question_suffix="",
                       toolset=None, code_tool=None, answer_with_calls="calls", harness=loop, max_calls_per_turn=None,
                       answer_tag_required=False,
                       # the harness counts the calls (the runner's budget); the episode's own cap stays out of its way
                       budgets=Budgets(max_turns=MAX_ROUNDS + 1, max_tool_calls=100 * MAX_TOOL_CALLS,
                                       max_images=MAX_IMAGES))

    def toolboxes(self, profile):
        from eval.loop import ToolBoxes

        def make(mode) -> ToolBox:
            if mode == "no_tools":
                return ToolBox(None)
            search = [] if self.ablation == "image_only" else search_tools(self.web, self.track)
            unknown = search_not_enabled(self.track) if self.ablation == "image_only" else unknown_tool
            if self.track == "gen" and profile.name in runners.RUNNERS:
                from runtime.sandbox import SandboxConfig, SandboxPool

                sandbox = SandboxPool(SandboxConfig(cell_timeout_s=CODE_TIMEOUT_S,
                                                    preload=SandboxConfig().preload + ("matplotlib.pyplot",)))
                return runners.local_gen_toolbox(profile.name, search, sandbox)
            if self.track == "gen":
                from runtime.code_tools import get_code_tool
                from runtime.sandbox import SandboxConfig, SandboxPool

                sandbox = SandboxPool(SandboxConfig(cell_timeout_s=CODE_TIMEOUT_S,
                                                    preload=SandboxConfig().preload + ("matplotlib.pyplot",)))
                return AmmeToolBox("gen", ToolSet("agentic_mme_search", "Agentic-MME's search tools (Gen)",
                                                  tuple(search), unknown),
                                   code_tools=[get_code_tool("agentic_mme_gen")], sandbox=sandbox)
            from tools.toolsets import get_toolset

            atomic = () if self.ablation == "search_only" else get_toolset("agentic_mme").tools
            return AmmeToolBox("atm", ToolSet("agentic_mme_atm", "Agentic-MME's atomic and search tools (Atm)",
                                              atomic + tuple(search), unknown))

        return ToolBoxes(lambda task, mode: mode, make)

    def start(self, toolbox, profile, task, mode, budgets):
        if mode == "no_tools":  # the direct baseline: the same user turn, no system prompt, one reply
            profile = replace(profile, harness=None, system_prompt=None)
        count = len(task.images)
        template = self.texts["user_single" if count == 1 else "user_multi"]
        question = template.format(prompt=task.question, labels=", ".join(f"Image {i}" for i in range(count)))
        files = getattr(task.images, "sources", None)
        if files is None:
            raise ValueError(f"Agentic-MME task {task.id} holds no image files: the runner sends each image from its "
                             "file, so load the tasks with eval.benchmarks.agentic_mme.data.load")
        images = task.images
        if self.ablation in ORACLE_ABLATIONS and mode == "tools":
            question, files = self._oracle_question(task, question, files)
            images = LazyImages(files, read_image)
        return toolbox.start(profile, question, images, system=profile.system_prompt, budgets=budgets,
                             meta={"task": task.id, "category": task.category, "mode": mode,
                                   INPUT_FILES: [str(path) for path in files]})

    def _oracle_question(self, task, question: str, files) -> tuple[str, tuple]:
        """Table 5's user turn: the task's ground-truth intermediate images after its own (in the workspace, so the
        tools can use them too), labelled, and with stepwise_guidance the masked checkpoint descriptions."""
        texts, cues = oracle_texts(), task.meta.get("cue_images") or []
        if cues:
            labels = ", ".join(f"Image {k}" for k in range(len(files), len(files) + len(cues)))
            question += "\n\n" + texts["cues"].format(labels=labels, images="image" if len(cues) == 1 else "images")
        steps = guidance_steps(task.meta["config"]) if self.ablation == "stepwise_guidance" else []
        if steps:
            question += "\n\n" + texts["steps"].format(mask=texts["mask"], steps="\n".join(
                f"{k}. {step}" for k, step in enumerate(steps, 1)))
        return question, tuple(files) + tuple(cues)

    def score(self, task, finished) -> dict:
        """The answer by check_final_answer_only (official) or strict_score (strict), and eval_process on the run
        (tools mode) with no judge reply yet: a task that needs a judge waits for it (`judge_pending`), or without
        a judge keeps those requests `missing` (S, V and V_true unscored)."""
        from runtime.web import unavailable_calls

        messages = finished.trajectory.messages
        ended = finished.trajectory.meta.get("agentic_mme") or {}
        if finished.mode == "no_tools":
            replies = [message_text(m) for m in messages if m["role"] == "assistant"]
            ended = {"answer": scoring.extract_answer_text(replies[-1]) if replies else "", "ended": "answer"}
        answer = ended.get("answer", "")
        names = [c["function"]["name"] for m in messages for c in m.get("tool_calls", ())]
        local_gen = self.runner in runners.RUNNERS and self.track == "gen"
        inputs = len(finished.trajectory.meta.get(INPUT_FILES) or task.images)  # the oracle's cue images count too
        uses = tool_use_list(messages, self.track,
                             (lambda code, turn: runners.clean_code(self.runner, code, turn)) if local_gen else None)
        effective = sum(u.get("raw_tool_name") != "script_exec" for u in uses)
        config, reference = task.meta["config"], task.reference_calls or 0
        fields = {"prediction": answer, "variant": self.variant_name, "reference_end": ended.get("ended"),
                  "calls_by_name": dict(Counter(names)), "web_unavailable": unavailable_calls(messages),
                  "tool_use_list": uses, "effective_calls": effective, "reference_calls": reference,
                  "overthink": scoring.overthink(effective, reference),
                  "images_made": images_made(messages, self.track, inputs),
                  "cue_images": inputs - len(task.images), "checkpoints": len(data.checkpoints(config))}
        if ended.get("ended") == "answer_after_code":  # the runner stops here, with the answer it read
            fields["stop_reason"] = "answer"
        scores, errors = {}, {}
        for mode, check in (("official", lambda: float(scoring.check_final_answer_only(config, answer)["correct"])),
                            ("strict", lambda: scoring.strict_score(config, answer))):
            try:
                scores[mode] = check()
            except scoring.UnscorableItem as err:  # the reference's evaluator fails on this task: no score
                scores[mode], errors[mode] = None, f"{mode} scoring cannot score this task: {err}"
        fields.update(scores=scores, score=scores[self.scoring], score_error=errors.get(self.scoring),
                      judge_pending=False)
        if finished.mode == "tools":
            fields.update(self._process(config, fields, {}))
            fields["judge_pending"] = bool(self.judge_model) and fields["process"].get("missing", 0) > 0
        return fields

    def _process(self, config: dict, record: dict, judgments: dict) -> dict:
        """eval_process on the record with the judgments known (the others read as failed replies)."""
        try:
            evaluation, asked = process.evaluate(config, record, judgments, wait=False)
        except scoring.UnscorableItem as err:
            return {"eval": None, "process": {"error": f"the benchmark's evaluator cannot score this task: {err}"}}
        return {"eval": evaluation, "process": process.summary(evaluation, asked, judgments), "judgments": judgments}

    def needs_judge(self) -> str | None:
        return None  # without a judge, accuracy and V_tool are scored; S, V and V_true stay unscored

    def judge(self, items, backend, judge_name: str, retries: int):
        """The reference's two judges on every record that waits for them, batched: each round walks every record
        (process.evaluate) up to its next request without a reply, asks all of those at once through `ask()`,
        and records the judgments; a reply that fails or cannot be read is asked again, up to --judge_retries
        attempts in all (3 by default: the OpenAI client's, whose default max_retries is 2, that the reference's
        judges use), then counts as `unjudged` and reads as the reference reads it (not passed)."""
        from eval.judge import ask

        judgments = {k: {} for k in range(len(items))}
        while True:
            requests = {}
            for k, (task, record) in enumerate(items):
                try:
                    process.evaluate(task.meta["config"], record, judgments[k], wait=True)
                except scoring.JudgePending as pending:
                    requests[k, pending.request.key] = pending.request
                except scoring.UnscorableItem:
                    continue
            if not requests:
                break
            attempts = {}

            def prompt(key, attempt):
                attempts[key] = attempt + 1
                return self._judge_prompt(requests[key], items[key[0]][1])

            completions = ask(backend, list(requests), prompt, attempts=max(1, retries),
                              accept=lambda key, done: process.judgment(requests[key], done, 1)["status"] == process.OK)
            for key, completion in completions.items():
                judgments[key[0]][key[1]] = process.judgment(requests[key], completion, attempts[key])
        for k, (task, record) in enumerate(items):
            fields = self._process(task.meta["config"], record, judgments[k])
            yield record, {**fields, "judge": {"model": judge_name, "attempts": max(1, retries),
                                               **{n: (fields["process"] or {}).get(n) for n in
                                                  ("judge_requests", "unjudged")}}}

    def _judge_prompt(self, request: process.Request, record: dict):
        """The reference's request: the search judge's prompt as the one user turn (temperature 0, 300 tokens), or
        the visual judge's system prompt, then the image as image_to_data_url(path) sends it (its default limits:
        the run's PNG, or the orig.png copy of the task's image) and the checkpoint's question (temperature 0,
        100)."""
        from runtime.trajectory import load_image

        if request.kind == "S":
            content = [{"type": "text", "text": m["content"]} for m in request.messages]
            return (Prompt([{"role": "user", "content": content}], []),
                    Sampling(**scoring.SEARCH_JUDGE_SAMPLING, regex=process.S_VERDICT if self.judge_regex else None))
        system = scoring.judge_prompts()["visual_system"]
        files = record["trajectory"].get("meta", {}).get(INPUT_FILES, [])  # a record made before they were noted: none
        if request.image < len(files):
            image = sent_original(files[request.image], JUDGE)
        else:
            image = sent_made(load_image(record["trajectory"]["images"][request.image], self.images_dir), JUDGE)
        return (Prompt([{"role": "system", "content": [{"type": "text", "text": system}]},
                        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": request.question}]}],
                       [image]),
                Sampling(**scoring.VISUAL_JUDGE_SAMPLING))

    @staticmethod
    def tables(records: list[dict], config: dict) -> list[str]:
        return tables.sections(records, config)

    @staticmethod
    def figures(records: list[dict], config: dict, folder: Path) -> list[tuple[str, str]]:
        return tables.figures(records, config, folder)


def check_ablation(ablation: str | None, track: str, tools: str, profile: str | None) -> None:
    """An --ablation value this suite can run, or a clear error that lists them."""
    if ablation is None:
        return
    if ablation not in ABLATIONS:
        raise ValueError(f"unknown --ablation {ablation!r} for agentic_mme; use one of: "
                         + "; ".join(f"{name} ({what})" for name, what in ABLATIONS.items())
                         + ". Table 4's Full is the run without --ablation, its Perception-only is --tools none")
    if tools != "on":
        raise ValueError(f"--ablation {ablation} changes the tool run; run it with --tools on (Table 4's "
                         "Perception-only row is the run with --tools none and no --ablation)")
    if ablation == "search_only" and track != "atm":
        raise ValueError("--ablation search_only runs in Atm mode only (--track atm): in Gen mode the code cell is the "
                         "image tool, and the runner has no way to turn it off")
    if profile in runners.RUNNERS:
        raise ValueError(f"--ablation {ablation} runs with the benchmark's OpenAI runners; the {profile} preset's "
                         "local runner (runners.py) has none of the paper's ablations here: use the model's generic "
                         "preset")
