"""Search and browsing tools without the live web in the loop. A benchmark's web tools (web search, reverse image
search, page reading, weather) answer from a pluggable backend, so a run is reproducible and needs no network:

- `replay`: answers recorded from a live run, keyed by call (the tool and its arguments), shipped with a suite or
  given with `--web_replay`;
- `record`: replay where a recording has the call, else the user's live provider (`--web_provider
  module:function`, called as `function(tool, arguments) -> reply text`), whose answer is stored for replay;
- `offline`: every call gets an "unavailable" reply.

A call without an answer gets a reply saying so (in the benchmark's own error shape where it has one) that contains
`UNAVAILABLE_MARK`, so reports count such calls (`unavailable_calls`) instead of mistaking them for the model's.
Recordings are JSONL lines `{"tool": name, "arguments": {...}, "reply": text}`; a later line for the same call wins.
"""

from __future__ import annotations

import importlib
import json
import threading
from pathlib import Path
from typing import Callable

from runtime.trajectory import json_line, message_text
from tools.toolset import ImageFiles, Reply, Tool

MODES = ("replay", "record", "offline")
UNAVAILABLE_MARK = "unavailable in this run"
RECORD_FILE = "web_record.jsonl"  # a run's own recording, in its run directory


class Web:
    def __init__(self, mode: str = "replay", replay: list[str | Path] = (), record_to: str | Path | None = None,
                 provider: str | None = None):
        if mode not in MODES:
            raise ValueError(f"unknown web mode {mode!r}; use one of {MODES}")
        if (mode == "record") != (provider is not None):
            raise ValueError("the 'record' web mode needs a provider (module:function), and only it uses one")
        self.mode, self.record_to = mode, Path(record_to) if record_to else None
        self.provider = _provider(provider) if provider else None
        self.answers: dict[str, str] = {}
        for path in replay:
            self.answers.update(read_recording(Path(path)))
        self._lock = threading.Lock()

    def answer(self, tool: str, arguments: dict) -> tuple[str | None, str]:
        """The reply to a call, or None and why there is none."""
        if self.mode == "offline":
            return None, "the run is offline (--web offline)"
        key = call_key(tool, arguments)
        with self._lock:
            if key in self.answers:
                return self.answers[key], ""
            if self.mode == "replay":
                return None, "no recorded answer for this call (--web replay; record one with --web record)"
            try:
                reply = self.provider(tool, arguments)
                if not isinstance(reply, str):
                    raise TypeError(f"it returned {type(reply).__name__}, not the reply text")
            except Exception as err:  # noqa: BLE001 - a failing provider is the call's reply, never the run's end
                return None, f"the web provider failed ({type(err).__name__}: {err})"
            self.answers[key] = reply
            if self.record_to is not None:
                self.record_to.parent.mkdir(parents=True, exist_ok=True)
                with self.record_to.open("a", encoding="utf-8") as out:
                    out.write(json_line({"tool": tool, "arguments": arguments, "reply": reply}) + "\n")
            return reply, ""

    def tool(self, schema: dict, key: Callable[[dict, ImageFiles], dict] | None = None,
             unavailable: Callable[[str], str] | None = None) -> Tool:
        """A tool with this published schema that answers from the web backend. `key(arguments, files)`: what
        identifies the call (default: its arguments; a reverse image search keys on the image's content, not its
        path); `unavailable(message)`: the benchmark's error reply around the message."""
        name = schema.get("function", schema)["name"]

        def run(arguments: dict | str, files: ImageFiles) -> Reply:
            if isinstance(arguments, str):
                try:
                    arguments = json.loads(arguments) if arguments.strip() else {}
                except json.JSONDecodeError as err:
                    arguments = {"unparsed": arguments, "error": err.msg}
            reply, reason = self.answer(name, key(arguments, files) if key else arguments)
            if reply is not None:
                return Reply(reply)
            message = f"{name} is {UNAVAILABLE_MARK}: {reason}"
            return Reply(unavailable(message) if unavailable else message, error=True)

        return Tool(name, schema, run=run)


def call_key(tool: str, arguments: dict) -> str:
    return json.dumps([tool, arguments], sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def read_recording(path: Path) -> dict[str, str]:
    """A recording's answers by call key; a malformed line is an error naming the file and the line."""
    answers = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            if not (isinstance(row, dict) and isinstance(row.get("tool"), str) and isinstance(row.get("reply"), str)
                    and isinstance(row.get("arguments"), dict)):
                raise ValueError('each line is {"tool": name, "arguments": {...}, "reply": text}')
        except ValueError as err:
            raise ValueError(f"{path}, line {number}: not a web recording ({err})") from None
        answers[call_key(row["tool"], row["arguments"])] = row["reply"]
    return answers


def web_from_config(config, shipped: list[Path] = ()) -> Web:
    """The run's web backend: the suite's shipped recordings, the run's own (an earlier `record` run into this run
    directory), then the user's `--web_replay` files; `record` stores new answers in the run directory."""
    own = Path(config.web_record) if config.web_record else Path(config.out or ".") / RECORD_FILE
    replay = [*shipped, *([own] if own.is_file() else []), *config.web_replay]
    return Web(config.web or "replay", replay, own, config.web_provider)


def unavailable_calls(messages: list[dict]) -> int:
    """How many tool replies of a trajectory said the web was unavailable."""
    return sum(1 for m in messages if m.get("role") == "tool" and UNAVAILABLE_MARK in message_text(m))


def _provider(spec: str) -> Callable[[str, dict], str]:
    module, _, function = spec.partition(":")
    try:
        found = getattr(importlib.import_module(module), function)
    except (ImportError, AttributeError, ValueError) as err:
        raise ValueError(f"--web_provider {spec!r}: cannot import it ({err}); give 'module:function', a function "
                         "taking (tool, arguments) and returning the reply text") from None
    if not callable(found):
        raise ValueError(f"--web_provider {spec!r} is not a function")
    return found
