"""A benchmark's own agent loop around the model, for harnesses that say more than tool results.

VTC-Bench's Qwen-Agent loop, for example, appends notes on the rounds left to tool results, answers a reply
without a call by asking the model to go on, drops a last-round reply without an answer and asks again, and
shows no tools in its last round. `Episode` asks the profile's `Harness` at three fixed points (before a
prompt, after a reply, after tool results); with none, the episode runs tirlab's own loop.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from runtime.episode import Episode


@dataclass(frozen=True)
class Nudge:
    """A harness's user message after a reply: the reply is kept (`keep_reply`) or, as some harnesses do
    when they retry a turn, dropped from the conversation."""
    text: str
    keep_reply: bool = True


class Harness:
    """A benchmark's own agent loop around the model. Each hook sees the episode (its per-episode state is
    `episode.harness_state`); the defaults are tirlab's loop. Under a harness, a reply cut at the token limit
    does not end the episode: the harness takes it as its server would hand it over."""

    # the benchmark's server parses calls (vLLM's hermes parser): a reply with a call it cannot read is text
    unreadable_calls_are_text: bool = False

    def offer_tools(self, episode: Episode) -> bool:
        """Whether the next prompt shows the tools; without them, calls in the reply are not run."""
        return True

    def after_reply(self, episode: Episode, reply: str, has_calls: bool) -> Nudge | None:
        """Called for every reply before its calls run; a Nudge replaces the default (run the calls, or end
        on a reply without them) with a user message and another turn."""
        return None

    def after_tools(self, episode: Episode) -> tuple[str, bool]:
        """Text appended to each tool result of this turn, and whether the episode ends here."""
        return "", False
