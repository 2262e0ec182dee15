"""One task as an explicit state machine: PENDING -> GENERATING -> RUNNING_TOOLS -> ... -> DONE.

    episode = Episode.start(protocol, "How many cats?", [image], tools=toolbox.schemas())
    while not episode.done:
        prompt = episode.prompt()                  # GENERATING: what the model sees
        episode.submit(model(prompt))              # parse -> RUNNING_TOOLS, or DONE with a stop reason
        if episode.state is State.RUNNING_TOOLS:
            toolbox.run([episode])                 # results go back in the protocol's form -> GENERATING

The episode never calls a model or a tool itself, so a driver can batch the generation of many episodes
into one engine call and their image tools into one executor call (`run_episodes`). Budgets (turns,
tool calls, images, context tokens) end it with a recorded stop reason; a malformed completion, an
unknown tool or a failing call becomes an error observation and the episode goes on.
A benchmark whose harness says more than tool results brings a `runtime.harness.Harness` on its profile.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field, replace
from enum import Enum
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from runtime.harness import Nudge
from runtime.profiles import Budgets, ModelProfile
from runtime.protocols import Call, Observation, Prompt, Protocol, final_text
from runtime.protocols.base import Finish, capped, neutralised
from runtime.trajectory import Trajectory, image, text, tool_call
from tools.images import DEFAULT_MAX_PIXELS, to_array
from tools.registry import ToolError


class State(str, Enum):
    PENDING = "pending"
    GENERATING = "generating"
    RUNNING_TOOLS = "running_tools"
    DONE = "done"


class Stop(str, Enum):
    ANSWER = "answer"  # the model gave <answer>...</answer>
    FINAL_MESSAGE = "final_message"  # a reply without tool calls, taken as the answer
    NO_ANSWER = "no_answer"  # a reply without a call or the answer tag its protocol requires: a format failure
    MAX_TURNS = "max_turns"
    MAX_TOOL_CALLS = "max_tool_calls"
    MAX_IMAGES = "max_images"
    MAX_CONTEXT_TOKENS = "max_context_tokens"
    TRUNCATED = "truncated"  # the generation hit its token limit mid-reply
    ERROR = "error"  # the backend failed; the message is in meta["error"]


class EpisodeError(RuntimeError):
    pass


class ImageBudgetError(ToolError):
    """A tool's image that would take the episode past its budget of image memory (Budgets.max_image_mb)."""


@dataclass
class PendingCall:
    id: str
    call: Call


@dataclass
class Episode:
    profile: ModelProfile
    trajectory: Trajectory
    budgets: Budgets = field(default_factory=Budgets)
    state: State = State.PENDING
    stop_reason: Stop | None = None
    answer: str | None = None
    turns: int = 0
    tool_calls: int = 0
    context_tokens: int = 0
    pending: list[PendingCall] = field(default_factory=list)
    max_pixels: int = DEFAULT_MAX_PIXELS  # the largest image the workspace accepts
    resources: dict = field(default_factory=dict)  # per-episode tool state (sandbox session, ...), see close()
    harness_state: dict = field(default_factory=dict)  # the profile's harness keeps its counters here
    _scratch: Path | None = None
    _tool_image_bytes: int = 0
    _tools_shown: bool = True
    _offered_turn: int = -1
    _out_of_calls: bool = False

    @classmethod
    def start(cls, model: ModelProfile | Protocol, question: str, images: Sequence = (), system: str | None = None,
              tools: Sequence[dict] = (), budgets: Budgets | None = None, meta: dict | None = None,
              max_pixels: int = DEFAULT_MAX_PIXELS, scratch: Path | None = None) -> "Episode":
        """A new episode: the images (index 0 = the original) and the question in one user turn. The
        system prompt and budgets default to the profile's; its question suffix is appended. `scratch` is
        the episode's private folder when the caller made it already (the question names files in it)."""
        profile = ModelProfile.of(model)
        trajectory = Trajectory(tools=list(tools), meta={"protocol": profile.protocol.name, "profile": profile.name,
                                                         **(meta or {})})
        indices = [trajectory.add_image(to_array(picture, max_pixels)) for picture in images]
        system = system if system is not None else profile.system_prompt
        if system:
            trajectory.add("system", system)
        trajectory.add("user", *[image(i) for i in indices], neutralised(question, tags=False) + profile.question_suffix)
        return cls(profile, trajectory, budgets or profile.budgets, max_pixels=max_pixels, _scratch=scratch)

    @property
    def protocol(self) -> Protocol:
        return self.profile.protocol

    @property
    def done(self) -> bool:
        return self.state is State.DONE

    @property
    def workspace(self) -> list[np.ndarray]:
        return self.trajectory.images

    @property
    def scratch(self) -> Path:
        """A private directory for this episode's files, removed by close()."""
        if self._scratch is None:
            self._scratch = Path(tempfile.mkdtemp(prefix="tirlab-episode-"))
        return self._scratch

    def prompt(self) -> Prompt:
        self._expect(State.PENDING, State.GENERATING)
        self.state = State.GENERATING
        harness = self.profile.harness
        if harness is not None and self._offered_turn != self.turns:  # asked once per turn, however often rendered
            self._tools_shown, self._offered_turn = harness.offer_tools(self), self.turns
            if not self._tools_shown:
                self.trajectory.meta.setdefault("turns_without_tools", []).append(self.turns + 1)
        if self._tools_shown or not self.trajectory.tools:
            return self.protocol.render(self.trajectory)
        return self.protocol.render(replace(self.trajectory, tools=[]))

    def submit(self, completion: str | dict, prompt_tokens: int | None = None, completion_tokens: int | None = None,
               truncated: bool = False, stop: str | None = None) -> list[PendingCall]:
        """Record the model's reply; returns the calls to run (the episode is then RUNNING_TOOLS) or [].
        `truncated` and `stop` say why generation ended: at the token limit, or on the stop string `stop`
        (which servers strip from the text); neither: at the model's own end of turn."""
        self._expect(State.GENERATING)
        parsed = self.protocol.parse(completion, Finish(truncated, stop))
        parsed = replace(parsed, calls=capped(parsed.calls, self.profile.max_calls_per_turn))
        reply = parsed.reply
        if parsed.past_turn:
            self.trajectory.meta.setdefault("text_past_end_of_turn", []).append(parsed.past_turn)
        harness = self.profile.harness
        if not self._tools_shown or (harness is not None and harness.unreadable_calls_are_text
                                     and any(not call.parsed for call in parsed.calls)):
            parsed = replace(parsed, content=reply, calls=())  # calls that are only text
        self.turns += 1
        if prompt_tokens is not None:
            self.context_tokens = prompt_tokens + (completion_tokens or 0)
        nudge = None if harness is None else harness.after_reply(self, reply, bool(parsed.calls))
        if nudge is not None and not nudge.keep_reply:
            self.trajectory.meta.setdefault("dropped_replies", []).append(reply)
            return self._nudge(nudge)
        ids = self._call_ids(parsed.calls)
        recorded = [tool_call(i, c.name, c.arguments_json()) for i, c in zip(ids, parsed.calls) if c.parsed]
        self.trajectory.add("assistant", parsed.content, **({"tool_calls": recorded} if recorded else {}))
        if truncated and harness is None:
            return self._finish(Stop.TRUNCATED)
        if truncated:  # a harness takes a cut reply as it comes, as its servers do; the record still says so
            self.trajectory.meta.setdefault("truncated_turns", []).append(self.turns)
        if nudge is not None:
            if parsed.calls:
                raise EpisodeError("a harness may only nudge after a reply without calls, or drop the reply")
            return self._nudge(nudge)
        if parsed.answer is not None and (not parsed.calls or self.profile.answer_with_calls == "answer"):
            self.answer = parsed.answer
            return self._finish(Stop.ANSWER)
        if not parsed.calls and self.profile.answer_tag_required:
            return self._finish(Stop.NO_ANSWER)
        if not parsed.calls:
            self.answer = final_text(self.trajectory)
            return self._finish(Stop.FINAL_MESSAGE)
        self.pending = []
        for call_id, call in zip(ids, parsed.calls):
            if call.error is None and self.tool_calls >= self.budgets.max_tool_calls:
                call = replace(call, error=f"the episode's budget of {self.budgets.max_tool_calls} tool calls is spent; "
                                           "this call was not run")
                self._out_of_calls = True
            self.tool_calls += call.error is None  # only calls that run count against the budget
            self.pending.append(PendingCall(call_id, call))
        self.state = State.RUNNING_TOOLS
        return list(self.pending)

    def observe(self, results: dict[str, Observation]) -> None:
        """Tool results by call id, appended in call order; then the next turn, or DONE on a budget."""
        self._expect(State.RUNNING_TOOLS)
        missing = [p.id for p in self.pending if p.id not in results]
        if missing:
            raise EpisodeError(f"no result for call(s) {missing}; every pending call needs an observation")
        note, stop = self.profile.harness.after_tools(self) if self.profile.harness else ("", False)
        for pending in self.pending:
            observation = results[pending.id]
            # tool output, code output, errors, echoed arguments and file names come from outside the model:
            # none of it may render as a token of the chat template
            observation = replace(observation, text=neutralised(observation.text))
            tool_call_id = pending.id if pending.call.parsed else None
            parts = self.protocol.observation_parts(observation) + ([text(note)] if note else [])
            self.trajectory.add("tool", *parts, tool_call_id=tool_call_id, name=pending.call.name,
                                error=observation.error)
        self.pending = []
        if stop:
            self._finish(Stop.MAX_TURNS)
        elif self._out_of_calls:
            self._finish(Stop.MAX_TOOL_CALLS)
        elif len(self.trajectory.images) >= self.budgets.max_images:
            self._finish(Stop.MAX_IMAGES)
        elif self.turns >= self.budgets.max_turns:
            self._finish(Stop.MAX_TURNS)
        elif self.budgets.max_context_tokens is not None and self.context_tokens >= self.budgets.max_context_tokens:
            self._finish(Stop.MAX_CONTEXT_TOKENS)
        else:
            self.state = State.GENERATING

    def follow_up(self, question: str, images: Sequence = ()) -> None:
        """A scripted user turn after the model answered (VisualToolBench's multi-turn tasks): the answer
        so far is kept in meta["answers"] and the episode waits for the model again."""
        self._expect(State.DONE)
        if self.stop_reason not in (Stop.ANSWER, Stop.FINAL_MESSAGE):
            raise EpisodeError(f"a follow-up needs an answered episode; this one stopped on {self.stop_reason.value}")
        self.trajectory.meta.setdefault("answers", []).append(self.answer)
        indices = [self.trajectory.add_image(to_array(picture, self.max_pixels)) for picture in images]
        self.trajectory.add("user", *[image(i) for i in indices], neutralised(question, tags=False))
        self.state, self.stop_reason, self.answer = State.GENERATING, None, None

    def add_image(self, picture, name: str = "the tool's image") -> int:
        """A tool's image into the workspace: within max_pixels, and within the memory the episode's tool images
        may take (past it: ImageBudgetError, its refusal recorded as `refuse_image` does)."""
        array = to_array(picture, self.max_pixels)
        if array.nbytes > self.image_bytes_left:
            raise ImageBudgetError(self.refuse_image(name, (
                f"its {array.nbytes / 2**20:.1f} MB of pixels are over the {self.image_bytes_left / 2**20:.1f} MB "
                f"of images this episode may still hold (at most {self.budgets.max_image_mb} MB in all)")))
        self._tool_image_bytes += array.nbytes
        return self.trajectory.add_image(array)

    @property
    def image_bytes_left(self) -> int:
        """Bytes of decoded pixels the tools' images may still add (Budgets.max_image_mb in all)."""
        return max(0, (self.budgets.max_image_mb << 20) - self._tool_image_bytes)

    def refuse_image(self, name: str, reason: str) -> str:
        """Record a tool's image that was not shown (counted in the run's report); returns the note for the model."""
        note = f"Not shown: {name} ({reason})"
        self.trajectory.meta.setdefault("refused_images", []).append(note)
        return note

    @property
    def images_left(self) -> int:
        return max(0, self.budgets.max_images - len(self.trajectory.images))

    def fail(self, message: str) -> None:
        """End the episode because its backend failed (the run goes on with the other episodes)."""
        self.trajectory.meta["error"] = message
        self._finish(Stop.ERROR)

    def close(self) -> None:
        """Release the sandbox session and the scratch folder; every one is released even if one fails."""
        resources, self.resources = list(self.resources.values()), {}
        try:
            for resource in resources:
                try:
                    resource.close()
                except Exception as err:  # noqa: BLE001 - the others must still be released
                    self.trajectory.meta.setdefault("close_errors", []).append(f"{type(err).__name__}: {err}")
        finally:
            if self._scratch is not None:
                shutil.rmtree(self._scratch, ignore_errors=True)
                self._scratch = None

    def _nudge(self, nudge: Nudge) -> list:
        """The harness's user message, then another turn unless the turn budget is spent (the message is still
        the conversation's last: a harness's answer extraction may read it)."""
        self.trajectory.add("user", nudge.text)
        return self._finish(Stop.MAX_TURNS) if self.turns >= self.budgets.max_turns else []

    def _call_ids(self, calls) -> list[str]:
        """Unique ids in this episode: a server's own id is kept unless it is missing or already used."""
        used = {c["id"] for m in self.trajectory.messages for c in m.get("tool_calls", ())}
        ids = []
        for call in calls:
            call_id = call.id
            if not call_id or call_id in used:
                call_id = next(f"call_{n}" for n in range(len(used), len(used) + len(calls) + 1) if f"call_{n}" not in used)
            used.add(call_id)
            ids.append(call_id)
        return ids

    def _finish(self, reason: Stop) -> list:
        self.state = State.DONE
        self.stop_reason = reason
        self.trajectory.meta.update(stop_reason=reason.value, answer=self.answer, turns=self.turns,
                                    tool_calls=self.tool_calls)
        return []

    def _expect(self, *states: State) -> None:
        if self.state not in states:
            raise EpisodeError(f"episode is {self.state.value}; this step needs {' or '.join(s.value for s in states)}")


Generate = Callable[[list[Prompt]], list]


def run_episodes(episodes: Sequence[Episode], generate: Generate, toolbox) -> None:
    """Drive episodes to DONE: each round generates for every episode that waits for the model in one
    `generate` call, then runs every pending tool call in one `toolbox.run`. `generate` returns, per
    prompt, a completion (str or reply dict) or a dict {"completion": ..., "prompt_tokens": ...,
    "completion_tokens": ..., "truncated": ..., "stop": ...}; an exception it raises fails those episodes, not the run."""
    try:
        while True:
            waiting = [e for e in episodes if e.state in (State.PENDING, State.GENERATING)]
            if not waiting:
                break
            prompts = [e.prompt() for e in waiting]
            try:
                outputs = generate(prompts)
            except Exception as err:  # noqa: BLE001 - a backend failure ends these episodes with its message
                for episode in waiting:
                    episode.fail(f"{type(err).__name__}: {err}")
                continue
            if len(outputs) != len(prompts):
                raise EpisodeError(f"generate returned {len(outputs)} completions for {len(prompts)} prompts")
            for episode, output in zip(waiting, outputs):
                try:
                    if isinstance(output, dict) and "completion" in output:
                        episode.submit(output["completion"], output.get("prompt_tokens"),
                                       output.get("completion_tokens"), bool(output.get("truncated")),
                                       output.get("stop"))
                    else:
                        episode.submit(output)
                except Exception as err:  # noqa: BLE001 - a reply the backend garbled ends that episode only
                    episode.fail(f"could not record the reply: {type(err).__name__}: {err}")
            running = [e for e in episodes if e.state is State.RUNNING_TOOLS]
            if running:
                toolbox.run(running)
    finally:
        for episode in episodes:
            episode.close()
