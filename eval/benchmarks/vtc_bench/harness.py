"""VTC-Bench's agent loop: the benchmark's Qwen-Agent `FnCallAgent._run` (eval/qwen_agent/agents/fncall_agent.py
at cs-w0r1d/VTC-Bench@93a33a4), as rules our episode follows. Each round is one model call and uses one of
20 (MAX_LLM_CALL_PER_RUN):

- a round with no calls left (the 20th) shows the model no tools;
- in that round, a reply without "<answer>" is dropped and the model is asked again for an answer (up to 5
  times);
- the result of every call gets a note: the rounds left when 2-5 remain, and, when one remains, the question
  again with the answer format;
- a reply without a call and without an answer tag gets "Please continue the analysis based on the tool" (or, in
  the last round, a request for the answer and one more round);
- a reply without a call but with an answer tag ends the episode; at most 30 rounds in all;
- a reply whose call the server cannot parse is text (and so gets a nudge), as vLLM's hermes parser leaves it.

The texts are protocol data (`prompts/protocol.json`). The reference's variants for o3, o4 and GPT-5.2 and
its Gemini/GPT-4o image handling are for API models and are not reproduced.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from runtime.harness import Harness, Nudge

PROTOCOL = Path(__file__).parent / "prompts" / "protocol.json"
ROUNDS = 20  # MAX_LLM_CALL_PER_RUN
RETRIES = 5  # last-round replies without an answer that are asked again
MAX_ROUNDS = ROUNDS + 10  # the loop's own cap on model calls
QUESTION = re.compile(r"<image>\n\n(.*?)\n\n### User Image Path", re.S)


def protocol_texts() -> dict[str, str]:
    return {key: entry["text"] for key, entry in json.loads(PROTOCOL.read_text(encoding="utf-8")).items()}


class QwenAgentLoop(Harness):
    unreadable_calls_are_text = True  # the harness reads calls from vLLM's hermes parser, which then gives text

    def __init__(self):
        self.texts = protocol_texts()

    def offer_tools(self, episode) -> bool:
        state = self._state(episode)
        state["left"] -= 1  # a round starts: the reference decrements before it calls the model
        return state["left"] != 0

    def after_reply(self, episode, reply: str, has_calls: bool) -> Nudge | None:
        state = self._state(episode)
        if state["left"] == 0 and state["retries"] > 0 and "<answer>" not in reply:
            state["retries"] -= 1
            state["left"] = 1
            return Nudge(self.texts["retry_format_nudge"], keep_reply=False)
        if has_calls or "<answer>" in reply or "</answer>" in reply:
            return None  # the calls run, or the answer ends the episode
        if state["left"] == 0:
            state["left"] += 1
            return Nudge(self.texts["final_format_nudge"])
        return Nudge(self.texts["continue_nudge"])

    def after_tools(self, episode) -> tuple[str, bool]:
        left = self._state(episode)["left"]
        if left == 1:
            return self.texts["last_round_note"].format(question=_question(episode)), False
        if 1 < left <= 5:
            return self.texts["remaining_note"].format(remaining=left), False
        return "", left == 0

    @staticmethod
    def _state(episode) -> dict:
        return episode.harness_state.setdefault("qwen_agent", {"left": ROUNDS, "retries": RETRIES})


def _question(episode) -> str:
    """The question as the reference finds it again: from the first user message's text, between the image
    marker and the image path."""
    first = next((m for m in episode.trajectory.messages if m["role"] == "user"), None)
    texts = [part["text"] for part in (first or {}).get("content", ()) if part["type"] == "text"]
    match = QUESTION.search(texts[0]) if texts else None
    return match.group(1) if match else ""
