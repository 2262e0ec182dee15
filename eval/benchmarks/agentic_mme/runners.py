"""Agentic-MME's local-model runners, which give the paper its DeepEyesV2 and Thyme-RL rows:
atomic/run_atomic_tools_{thyme,deepeyes}.py (Atm) and general/run_general_script_{thyme,deepeyes}.py (Gen) at
ChoS3nE11ven/Agentic-MME@5e5dfbd. They load the checkpoint with transformers and talk to it in plain text: the
model writes its calls as a JSON list in `<tool_log>...</tool_log>` (no function calling), and every result comes
back as a user turn. The agentic_mme suite runs a `thyme` or `deepeyes` preset through them (`AgenticMme.profile`).

What differs from the OpenAI runners (the rest, images as sent and the search tools, is the same code):

- Atm: the runner's own system prompt (one text for both models); a first reply without a `<tool_log>` is
  dropped and a user turn asks for tools; each call's result is its own user turn: an image tool's new image with
  `[Image N: tool - label]` (its JSON reply is not shown), a failed one's `{"ok": "false", "error": ...}`, a search
  tool's text; calls past the 15th are not run and nothing replaces them, the tools are never withdrawn; a reply
  without a `<tool_log>` ends the task with the whole reply (stripped) as the answer; after 15 rounds without one,
  "Please provide your final answer now ..." and its reply, whole, is the answer.
- Gen: the model's own system prompt (Thyme's gets an "IMPORTANT REMINDER ..." before it from the second round
  on); a `<tool_log>` wins over `<code>` in the same reply and its calls' results go back together as
  `<tool_results>[{"tool_name", "arguments", "output"}, ...]</tool_results>` after the latest image; code runs
  behind the runner's header, which redirects every PIL save to `image_{turn + 1}.png` in the output folder and
  reads `image_*` names from the right folders (DeepEyes' also redirects cv2.imwrite); Thyme generates with
  `</code>` and `</tool_log>` as stop strings (kept in the reply).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from eval.benchmarks.agentic_mme import scoring
from eval.benchmarks.agentic_mme.images import as_sent, message_limits
from runtime.code_tools import ANY_IMAGE, TRANSFORMED, CodeTool, _amme_describe
from runtime.harness import Harness, Nudge
from runtime.profiles import QWEN_STOP, Budgets, BoxConvention
from runtime.protocols import Prompt, Protocol
from runtime.protocols.base import END_OF_TURN, Call, Finish, Parsed, merge_text, wire_parts
from runtime.protocols.code import CODE_TOOL
from runtime.trajectory import message_text, text

FOLDER = Path(__file__).parent
LOCAL = FOLDER / "prompts" / "local_runners.json"
RUNNERS = ("thyme", "deepeyes")  # the presets (ModelProfile names) that run through these runners
MAX_ROUNDS = 15  # --max_rounds
MAX_TOOL_CALLS = 15  # --max_tool_calls
# the wrapper's generate(): greedy at --temperature 0; max_new_tokens 4000 (Atm) or 12000 (Gen) in the loop
SAMPLING = {"atm": {"temperature": 0.0, "max_tokens": 4000}, "gen": {"temperature": 0.0, "max_tokens": 12000}}
THYME_GEN_STOPS = ("</code>", "</tool_log>")  # HF stop_strings: generation ends on them, the text keeps them
IMAGE_TOOLS = frozenset(("crop", "rotate", "flip", "resize", "enhance", "grayscale", "autocontrast", "blur",
                         "sharpen", "denoise", "edge_detect", "invert", "equalize", "threshold"))
BAD_PREFIXES = ("/mnt/data/temp_processed_images/", "/mnt/data/", "/d/data/temp_processed_images/", "/d/data/",
                "/tmp/")  # _clean_*_code takes these out of the code

TOOL_LOG = re.compile(r"<tool_log>(.*?)</tool_log>", re.IGNORECASE | re.DOTALL)
CODE = re.compile(r"<code>(.*?)</code>", re.IGNORECASE | re.DOTALL)
ANSWER = re.compile(r"<answer>(.*?)</answer>", re.IGNORECASE | re.DOTALL)
ANSWER_UNCLOSED = re.compile(r"<answer>(.*)", re.IGNORECASE | re.DOTALL)
THINKING = re.compile(r"<think(?:ing)?>(.*?)</think(?:ing)?>", re.IGNORECASE | re.DOTALL)
PLACEHOLDER = re.compile(r"\$\{([A-Z0-9_]+)\}")


def local_texts() -> dict[str, str]:
    return {key: entry["text"] for key, entry in json.loads(LOCAL.read_text(encoding="utf-8")).items()}


def harness_id(profile_name: str) -> str:
    return f"{profile_name}-runner" if profile_name in RUNNERS else "openai-runner"


# The runners' readers of a reply, as their code reads it.

def parse_tool_log(reply: str) -> tuple[list, list[str]]:
    """atomic parse_tool_log: the first `<tool_log>` block's JSON list ([[...]] flattened), its objects only."""
    found = TOOL_LOG.search(reply or "")
    raw = found.group(1).strip() if found else ""
    if not raw:
        return [], []
    try:
        listed = json.loads(raw)
    except Exception as err:  # noqa: BLE001 - json's own message, as the runner records it
        return [], [f"Failed to parse tool_log JSON: {err}"]
    if not isinstance(listed, list):
        return [], ["tool_log must be a JSON array"]
    if len(listed) == 1 and isinstance(listed[0], list):
        listed = listed[0]
    entries = [x for x in listed if isinstance(x, dict)]
    dropped = len(listed) - len(entries)
    return entries, [f"Some tool_log items ({dropped}) were not JSON objects"] if dropped else []


def parse_model_output(reply: str) -> tuple[str, str, str, list, list[str]]:
    """general parse_model_output: (thinking, code, answer, tool_log, warnings)."""
    raw, warnings = reply or "", []
    thinking_m, code_m, answer_m, log_m = (THINKING.search(raw), CODE.search(raw), ANSWER.search(raw),
                                           TOOL_LOG.search(raw))
    thinking = (thinking_m.group(1) if thinking_m else "").strip()
    code = (code_m.group(1) if code_m else "").strip()
    if code:
        code = re.sub(r"^```python\s*\n?", "", code)
        code = re.sub(r"^```\s*\n?", "", code)
        code = re.sub(r"\n?```\s*$", "", code).strip()
    answer = ""
    if answer_m:
        answer = answer_m.group(1).strip()
    elif ANSWER_UNCLOSED.search(raw):
        answer = ANSWER_UNCLOSED.search(raw).group(1).strip()
        warnings.append("Found unclosed <answer> tag, extracted content anyway")
    elif not code_m and not log_m and not thinking_m and raw.strip():
        answer = raw.strip()
        warnings.append("No <answer> tag found, using entire response as answer")
    tool_log = []
    body = (log_m.group(1) or "").strip() if log_m else ""
    if body:
        try:
            listed = json.loads(body)
            if isinstance(listed, list):
                if len(listed) == 1 and isinstance(listed[0], list):
                    listed = listed[0]
                tool_log = [x for x in listed if isinstance(x, dict)]
                if len(tool_log) != len(listed):
                    warnings.append(f"Some tool_log items ({len(listed) - len(tool_log)}) were not JSON objects and "
                                    "were ignored.")
            else:
                warnings.append("tool_log must be a JSON array; got non-array. Ignored.")
        except Exception as err:  # noqa: BLE001
            warnings.append(f"Failed to parse tool_log JSON: {err}")
    return thinking, code, answer, tool_log, warnings


def normalize_tool_request(entry: dict) -> tuple[str, dict]:
    """_normalize_tool_request: the name from tool_name, tool or name; `arguments` when it is an object, else the
    entry's other keys."""
    name = str(entry.get("tool_name") or entry.get("tool") or entry.get("name") or "").strip()
    if not name:
        return "", {}
    arguments = entry.get("arguments")
    if isinstance(arguments, dict):
        return name, arguments
    return name, {k: v for k, v in entry.items() if k not in {"tool_name", "tool", "name"}}


def expand_placeholders(value, env: dict[str, str]):
    """_expand_placeholders: `${NAME}` in every string, for the names `env` has."""
    if isinstance(value, str):
        return PLACEHOLDER.sub(lambda m: env.get(m.group(1), m.group(0)), value)
    if isinstance(value, list):
        return [expand_placeholders(x, env) for x in value]
    if isinstance(value, dict):
        return {k: expand_placeholders(v, env) for k, v in value.items()}
    return value


def clean_code(runner: str, code: str, turn: int, texts: dict[str, str] | None = None) -> str:
    """_clean_thyme_code / _clean_deepeyes_code: hallucinated folder prefixes taken out, fences dropped, lines
    that look like a tool_log commented out when the code names `tool_name`, and the runner's header first."""
    for bad in BAD_PREFIXES:
        code = code.replace(bad, "")
    code = re.sub(r"^```python\s*\n", "", code, flags=re.MULTILINE)
    code = re.sub(r"\n```\s*$", "", code, flags=re.MULTILINE)
    code = re.sub(r"^```\s*\n", "", code, flags=re.MULTILINE)
    if "tool_name" in code:
        code = "\n".join(f"# {line}" if ("tool_name" in line or "google_search" in line
                                          or line.strip().startswith("[{")) else line for line in code.split("\n"))
    header = (texts or local_texts())[f"{runner}_gen_code_header"].replace("{target_filename}", f"image_{turn + 1}.png")
    return (header + code).strip()


def _call(name, arguments) -> Call:
    """A tool_log entry as a call. The runner reads arguments with `.get`: anything but an object fails the call
    (an image tool's error reply, or a search tool's "Search failed")."""
    name = name if isinstance(name, str) else str(name)
    if isinstance(arguments, dict):
        return Call(name, arguments)
    error = f"'{type(arguments).__name__}' object has no attribute 'get'"
    return Call(name, {}, error if name in IMAGE_TOOLS else f"Search failed: {error}")


@dataclass(frozen=True)
class LocalProtocol(Protocol):
    """The runners' conversation as their wrapper hands it to the chat template: system, the task's user turn,
    then assistant replies and user turns (results, reminders, requests), texts that are empty left out."""

    runner: str = "thyme"
    track: str = "atm"
    texts: dict = field(default_factory=dict, compare=False, hash=False)
    requests: tuple[str, ...] = ()  # the harness's requests it appends to tool results: user turns of their own

    def parse(self, completion, finish: Finish = END_OF_TURN) -> Parsed:
        reply, past_turn = self.own_turn(completion)
        if finish.stop in self.stop and finish.stop in THYME_GEN_STOPS and not finish.length:
            reply += finish.stop  # HF's stop strings stay in the text the runner reads and sends back
        if self.track == "atm":
            entries, _ = parse_tool_log(reply)
            calls = [_call(e.get("tool_name", ""), e.get("arguments", {})) for e in entries]
        else:
            _, code, _, entries, _ = parse_model_output(reply)
            named = [normalize_tool_request(e) for e in entries]
            # code runs from <code> blocks only: a tool_log entry named like the code tool is an unknown search tool
            calls = [Call(name, arguments) if name != CODE_TOOL else
                     Call(name, None, error=f"Error: Unknown tool: {name}") for name, arguments in named if name]
            if not calls and code.strip():
                calls = [Call(CODE_TOOL, {"code": code})]
        return Parsed(reply, tuple(calls), None, reply, past_turn)

    def render(self, trajectory) -> Prompt:
        from eval.benchmarks.agentic_mme import INPUT_FILES

        files = trajectory.meta.get(INPUT_FILES)
        if files is None:
            raise ValueError(f"an Agentic-MME trajectory names its task's image files in meta[{INPUT_FILES!r}]; start "
                             "the episode with AgenticMme.start")
        wired = self.wire_messages(trajectory.messages)
        shown, sent = [], []
        for message, limits in zip(wired, message_limits(wired)):
            parts = []
            for part in message["content"]:
                if part["type"] == "image":
                    index = part["image"]
                    source = files[index] if index < len(files) else None  # the runner's PNG copy of an input
                    sent.append(as_sent(trajectory.images[index], limits, source))
                    part = {**part, "image": len(sent) - 1}
                parts.append(part)
            shown.append({"role": message["role"], "content": merge_text(wire_parts(parts, sent, []))})
        return Prompt([m for m in shown if m["content"] or m["role"] == "user"], sent, stop=self.stop)

    def wire_messages(self, messages: list[dict]) -> list[dict]:
        """Canonical messages -> the runner's turns (content parts; images as workspace indices)."""
        from eval.benchmarks.agentic_mme import SKIPPED_CALL

        wired, request, calls, results, batch = [], None, {}, [], 0
        replies = sum(m["role"] == "assistant" for m in messages)
        for at, message in enumerate(messages):
            if message["role"] != "tool":
                wired += self._results(results, messages[:batch])
                results = []
                if request:
                    wired.append({"role": "user", "content": [text(request)]})
                    request = None
            elif not results:
                batch = at
            if message["role"] == "system":
                system = message_text(message)
                if self.runner == "thyme" and self.track == "gen" and replies >= 1:
                    system = self.texts["thyme_gen_early_answer"] + system
                wired.append({"role": "system", "content": [text(system)]})
            elif message["role"] == "assistant":
                for call in message.get("tool_calls", ()):
                    calls[call["id"]] = call["function"]
                words = message_text(message)
                if words:  # the wrapper leaves an empty reply out
                    wired.append({"role": "assistant", "content": [text(words)]})
            elif message["role"] == "tool":
                parts = [p for p in message["content"] if not (p["type"] == "text" and p["text"] in self.requests)]
                request = next((p["text"] for p in message["content"] if p not in parts), request)
                if message_text({"content": parts}) == f"Error: {SKIPPED_CALL}":
                    if self.track == "gen":
                        results.append(None)  # the results turn is still sent, without this call
                    continue
                if self.track == "gen" and message.get("name") != CODE_TOOL:
                    results.append((calls.get(message.get("tool_call_id"), {}), message, parts))
                else:
                    wired += self._result_turn(message, parts)
            else:
                wired.append({"role": message["role"], "content": [p for p in message["content"]
                                                                   if p["type"] == "image" or p["text"]]})
        wired += self._results(results, messages[:batch])
        if request:
            wired.append({"role": "user", "content": [text(request)]})
        return wired

    def _result_turn(self, message: dict, parts: list[dict]) -> list[dict]:
        images = [p for p in parts if p["type"] == "image"]
        words = message_text({"content": [p for p in parts if p["type"] == "text"]})
        if self.track == "gen":  # a code cell: each new image with its [Image N: name], then the cell's report
            names = dict(re.findall(r"Image (\d+): ([^,\]]+)", words.rpartition("[New images: ")[2]))
            shown = []
            for part, number in zip(images, names or [None] * len(images)):
                label = f"[Image {number}: {names[number]}]" if number else f"[Image {part['image']}]"
                shown += [part, text(label)]
            return [{"role": "user", "content": shown + [text(words)]}]
        name = message.get("name")
        if name in IMAGE_TOOLS and images:
            from eval.benchmarks.agentic_mme import _image_line

            return [{"role": "user", "content": images + [text(_image_line(name, [text(words)], images))]}]
        if name in IMAGE_TOOLS and message.get("error") and not _json_error(words):
            words = json.dumps({"ok": "false", "error": words.removeprefix("Error: ")}, ensure_ascii=False)
        return [{"role": "user", "content": [text(words)]}]

    def _results(self, results: list, before: list[dict]) -> list[dict]:
        """Gen: one user turn for a reply's search calls: the latest image, then `<tool_results>` with each run
        call's name, arguments and output as the runner's tools return them (search_tools.SearchTools: the
        Serper response `raw` and the lens upload's `final_image_url` are not in a recording and are left out)."""
        if not results:
            return []
        listed = [{"tool_name": call.get("name", ""), "arguments": _arguments(call.get("arguments")),
                   "output": _output(call.get("name", ""), _arguments(call.get("arguments")), message, parts)}
                  for call, message, parts in (r for r in results if r is not None)]
        current = current_image(before)
        body = "<tool_results>" + json.dumps(listed, ensure_ascii=False) + "</tool_results>"
        return [{"role": "user", "content": [{"type": "image", "image": current}, text(body)]}]


def _json_error(words: str) -> bool:
    try:
        return isinstance(json.loads(words), dict)
    except ValueError:
        return False


def _arguments(raw) -> dict:
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return {}
    return raw if isinstance(raw, dict) else {}


def _output(name: str, arguments: dict, message: dict, parts: list[dict]) -> dict:
    reply = message_text({"content": [p for p in parts if p["type"] == "text"]})
    if message.get("error"):
        return {"ok": False, "error": reply.removeprefix("Error: ")}
    if name == "google_search":
        return {"tool": "google_search", "query": str(arguments.get("query") or ""),
                "gl": arguments.get("gl") or "us", "hl": arguments.get("hl") or "en", "page": 1, "type": "search",
                "context": reply}
    if name == "google_lens_search":
        return {"tool": "google_lens_search", "page": 1, "num": 5, "context": reply}
    return {"url": str(arguments.get("url") or ""), "text": reply}


def current_image(messages: list[dict]) -> int:
    """The Gen runner's current image after these messages, as a workspace index: the transformed_image_N.png
    with the largest N the code saved, else the latest image it saved, else the original."""
    saved = {}
    for message in messages:
        if message["role"] == "tool" and message.get("name") == CODE_TOOL:
            images = [p["image"] for p in message["content"] if p["type"] == "image"]
            listed = re.findall(r"Image (\d+): ([^,\]]+)", message_text(message).rpartition("[New images: ")[2])
            saved.update({name: index for (_, name), index in zip(listed, images)})
    numbered = sorted((int(TRANSFORMED.match(n).group(1)), i) for n, i in saved.items() if TRANSFORMED.match(n))
    return numbered[-1][1] if numbered else (list(saved.values())[-1] if saved else 0)


class LocalLoop(Harness):
    """The local runners' loop as rules on our episode (one round = one model call):

    - Atm: a first reply without calls is dropped, and a user turn asks for tools (the round counts);
    - a reply with calls runs them (Gen: the `<tool_log>`'s, else its `<code>`; an answer beside code ends the
      task once the code has run, its output unseen; an answer beside calls is ignored);
    - a reply without calls ends the task: Atm with the whole reply, Gen with its answer (parse_model_output's);
      an empty answer in the last round asks for it instead;
    - calls past the 15th are not run (the toolbox); the loop goes on;
    - after round 15 without an answer, one more call asks for it, and its reply is the answer (Atm: whole;
      Gen: its answer, else the whole reply).
    """

    def __init__(self, runner: str, track: str, texts: dict[str, str]):
        self.runner, self.track, self.texts = runner, track, texts
        self.final = texts[f"{track}_final"]

    def offer_tools(self, episode) -> bool:
        return not _state(episode)["final"]

    def after_reply(self, episode, reply: str, has_calls: bool) -> Nudge | None:
        state, turn = _state(episode), episode.turns - 1
        if state["final"]:
            answer = reply.strip() if self.track == "atm" else scoring.general_final_answer(reply)
            _end(episode, answer, "final_request")
            return None
        if self.track == "atm" and turn == 0 and not has_calls:
            return Nudge(self.texts["atm_use_tools"], keep_reply=False)
        if has_calls:
            if self.track == "gen":
                _, _, answer, entries, _ = parse_model_output(reply)
                if answer and not any(normalize_tool_request(e)[0] for e in entries):  # code ran: the answer ends it
                    state["answer_after_code"] = answer
            return None
        answer = reply.strip() if self.track == "atm" else parse_model_output(reply)[2]
        if answer or turn < MAX_ROUNDS - 1:
            _end(episode, answer, "answer")
            return None
        state["final"] = True
        return Nudge(self.final)

    def after_tools(self, episode) -> tuple[str, bool]:
        state, turn = _state(episode), episode.turns - 1
        state.pop("budget_hit", None)  # these runners go on after the budget; later calls are just not run
        answer = state.pop("answer_after_code", None)
        if answer:
            _end(episode, answer, "answer_after_code")
            return "", True
        if turn >= MAX_ROUNDS - 1:
            state["final"] = True
            return self.final, False
        return "", False


def _state(episode) -> dict:
    from eval.benchmarks.agentic_mme import loop_state

    state = loop_state(episode)
    state.setdefault("final", False)
    return state


def _end(episode, answer: str, how: str) -> None:
    episode.trajectory.meta["agentic_mme"] = {"answer": answer, "ended": how}


def local_profile(profile, track: str):
    """The preset's profile run as its local runner runs it: the runner's prompts, loop and reply format."""
    texts = local_texts()
    runner = profile.name
    loop = LocalLoop(runner, track, texts)
    stop = QWEN_STOP + (THYME_GEN_STOPS if runner == "thyme" and track == "gen" else ())
    protocol = LocalProtocol(name=f"{runner}-runner-agentic_mme_{track}", stop=stop, runner=runner, track=track,
                             texts=texts, requests=(loop.final,))
    return replace(profile, protocol=protocol, system_prompt=texts[f"{runner}_{track}_system"], question_suffix="",
                   toolset=None, code_tool=None, answer_with_calls="calls", harness=loop, max_calls_per_turn=None,
                   answer_tag_required=False, boxes=BoxConvention(),  # the runners' crop reads 0-1000 itself
                   budgets=Budgets(max_turns=MAX_ROUNDS + 1, max_tool_calls=100 * MAX_TOOL_CALLS, max_images=64))


def _local_prepare(code: str) -> str:
    """A cell as the runner runs its script: a fresh namespace, LOCAL_INPUT_IMAGE_PATH at the latest image, and
    the header's patches of PIL (and cv2) undone afterwards, since our worker, unlike the runner's fresh process,
    outlives the cell."""
    return (
        "import os as _os, re as _re\nimport PIL.Image as _PI\n"
        "_out = _os.environ['PROCESSED_IMAGE_SAVE_PATH']\n"
        "_files = [f for f in _os.listdir(_out) if _os.path.isfile(_os.path.join(_out, f))]\n"
        "_numbered = sorted((int(_re.match(r'(?i)^transformed_image_(\\d+)\\.png$', f).group(1)), f) for f in _files "
        "if _re.match(r'(?i)^transformed_image_(\\d+)\\.png$', f))\n"
        "_images = sorted((f for f in _files if _os.path.splitext(f)[1].lower() in "
        "('.png', '.jpg', '.jpeg', '.bmp', '.gif', '.tiff', '.tif')), "
        "key=lambda f: _os.stat(_os.path.join(_out, f)).st_mtime)\n"
        "_latest = _numbered[-1][1] if _numbered else (_images[-1] if _images else None)\n"
        "_os.environ['LOCAL_INPUT_IMAGE_PATH'] = _os.path.join(_out, _latest) if _latest else "
        "_os.environ['ORIGINAL_IMAGE_PATH']\n"
        "_kept = (_PI.open, _PI.Image.save)\n"
        "try:\n    import cv2 as _cv2\n    _kept_cv2 = _cv2.imwrite\nexcept ImportError:\n    _cv2 = None\n"
        "try:\n"
        f"    exec(compile({code!r}, 'model_code.py', 'exec'), {{'__name__': '__main__'}})\n"
        "finally:\n    _PI.open, _PI.Image.save = _kept\n"
        "    if _cv2 is not None:\n        _cv2.imwrite = _kept_cv2\n"
    )


# The Gen runners' cell: the inputs as image_0.png, ... in the working directory (the runner's run folder), the
# report as the OpenAI Gen runner's (the same code)
LOCAL_CODE_TOOL = CodeTool(CODE_TOOL, _amme_describe, collect=ANY_IMAGE, prepare=_local_prepare,
                           inputs_in_work_dir=True,
                           env=lambda c: {"ORIGINAL_IMAGE_PATH": str(c.inputs[0]),
                                          "PROCESSED_IMAGE_SAVE_PATH": str(c.output_dir)})


def local_gen_toolbox(runner: str, search, sandbox):
    """Gen's tools: the search tools (their calls counted against the budget) and the runner's code cell."""
    from eval.benchmarks.agentic_mme import AmmeToolBox, unknown_tool
    from tools.toolset import ToolSet

    texts = local_texts()

    class LocalGenToolBox(AmmeToolBox):
        def run(self, episodes) -> None:
            for episode in episodes:
                turn = episode.turns - 1
                session = episode.resources.get("sandbox")
                for pending in episode.pending:
                    call = pending.call
                    if call.name == CODE_TOOL and call.error is None:
                        pending.call = replace(call, arguments={"code": clean_code(runner, call.arguments["code"], turn,
                                                                                   texts)})
                    elif call.error is None and session is not None:
                        current = current_image(episode.trajectory.messages)
                        name = "image_0.png" if current == 0 else _saved_name(episode.trajectory.messages, current)
                        folder = session.output_dir if current else session.inputs_dir
                        env = {"LOCAL_INPUT_IMAGE_PATH": str(Path(folder) / name),
                               "PROCESSED_IMAGE_SAVE_PATH": str(session.output_dir)}
                        pending.call = replace(call, arguments=expand_placeholders(call.arguments, env))
            super().run(episodes)

    return LocalGenToolBox("gen", ToolSet("agentic_mme_search", "Agentic-MME's search tools (Gen)", tuple(search),
                                          unknown_tool), code_tools=[LOCAL_CODE_TOOL], sandbox=sandbox)


def _saved_name(messages: list[dict], index: int) -> str:
    for message in messages:
        if message["role"] == "tool" and message.get("name") == CODE_TOOL:
            images = [p["image"] for p in message["content"] if p["type"] == "image"]
            listed = re.findall(r"Image (\d+): ([^,\]]+)", message_text(message).rpartition("[New images: ")[2])
            for (_, name), at in zip(listed, images):
                if at == index:
                    return name
    return f"image_{index}.png"
