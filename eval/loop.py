"""The evaluation loop: every task is an episode, and every episode is in flight at once.

    for finished in EvalLoop(backend, profile, sampling, toolboxes).run(work):
        ...                                   # score it and write its record

Each pass of the loop (1) starts episodes until `max_active` are live, (2) polls the backend for finished
replies and records them (an episode then runs tools, is done, or, with a scripted follow-up, goes on),
(3) hands the episodes that wait for tools to one tool thread, all of them in one `ToolBox.run` (so a
GPU tool set sees one batched launch per op), and (4) sends the next turn of every episode whose tools
have returned. Generation never waits for tools: while the tool thread works, the engine keeps stepping
through every other episode's turn. The benchmarks' own scripts run one episode, and one turn, at a time.
"""

from __future__ import annotations

import time
import zlib
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_for
from dataclasses import dataclass, replace
from typing import Callable, Iterable, Iterator

from eval.backends import Backend, Completion, Sampling
from eval.forcing import ForcedReplies
from eval.suites import Task
from runtime.episode import Episode, State, Stop
from runtime.profiles import Budgets, ModelProfile
from runtime.toolbox import ToolBox
from runtime.trajectory import Trajectory

MODES = ("tools", "no_tools")
TOOL_CHECK_S = 0.01  # how long a poll waits for replies while tools run, before it looks at the tools again


@dataclass
class Live:
    """One episode in flight, with what its record needs besides the trajectory."""
    task: Task
    mode: str
    episode: Episode
    toolbox: ToolBox
    started: float
    follow_ups: int = 0  # scripted user turns sent so far
    prompt_tokens: int = 0
    completion_tokens: int = 0
    earlier: tuple = ()  # the Finished runs of this task before this one (a suite that reruns answers)


@dataclass(frozen=True)
class Finished:
    task: Task
    mode: str
    trajectory: Trajectory
    stop_reason: str
    answer: str  # the final answer's text ("" when the episode ended without one)
    turns: int
    tool_calls: int
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    error: str | None
    earlier: tuple["Finished", ...] = ()  # earlier runs of the same task and mode, when the suite reran it


class EvalLoop:
    def __init__(self, backend: Backend, profile: ModelProfile, sampling: Sampling,
                 toolbox_for: Callable[[Task, str], ToolBox], budgets_for: Callable[[Task], Budgets] | None = None,
                 max_active: int = 256, forced: ForcedReplies | None = None, seed: int = 0,
                 start: Callable[[ToolBox, ModelProfile, Task, str, Budgets], Episode] | None = None,
                 rerun: Callable[[Finished], bool] | None = None):
        if max_active < 1:
            raise ValueError(f"max_active must be at least 1, got {max_active}")
        if forced is not None and backend.name != "vllm":
            raise ValueError(f"forced replies need the vLLM engine backend, not {backend.name!r}")
        self.backend = backend
        self.profile = profile
        self.sampling = sampling
        self.toolbox_for = toolbox_for  # (task, mode) -> the ToolBox its episode uses
        self.budgets_for = budgets_for or (lambda task: profile.budgets)
        self.max_active = max_active
        self.forced = forced  # see eval/forcing.py: smoke runs of random-weight models
        self.seed = seed
        self.start = start or start_episode  # a suite's own first prompt (benchmark templates)
        self.rerun = rerun  # whether a finished run is run again from the start (a benchmark's own retries)

    def run(self, work: Iterable[tuple[Task, str]]) -> Iterator[Finished]:
        """Run (task, mode) pairs; yields each episode as it finishes, in finishing order."""
        work = iter(work)
        waiting: dict[str, Live] = {}  # request key -> the episode whose reply it is
        live: list[Live] = []
        tool_queue: list[Live] = []
        tool_job: Future | None = None
        tool_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tirlab-tools")
        self._unsent: list[Live] = []  # episodes whose prompt failed to build: finished, never submitted
        try:
            while True:
                while len(live) < self.max_active and (pair := next(work, None)) is not None:
                    try:
                        item = self._start(*pair)
                    except Exception as err:  # noqa: BLE001 - e.g. an image that does not decode: this task fails
                        yield self._unstarted(*pair, err)
                        continue
                    live.append(item)
                    self._send(item, waiting)
                if not live:
                    return
                finished: list[Live] = []
                if self.backend.in_flight():
                    # with tools running, look briefly (one engine step) and check them; otherwise wait for a reply
                    for key, completion in self.backend.poll(timeout=TOOL_CHECK_S if tool_job else None):
                        self._receive(waiting.pop(key), completion, tool_queue, finished, waiting)
                if tool_job is not None and (tool_job.done() or not self.backend.in_flight()):
                    for item in tool_job.result():
                        self._after_tools(item, finished, waiting)
                    tool_job = None
                if tool_job is None and tool_queue:
                    tool_job, tool_queue = tool_thread.submit(self._run_tools, tool_queue), []
                finished += self._unsent
                self._unsent.clear()
                for item in finished:
                    live.remove(item)
                    done = self._finish(item)
                    again = self._start(item.task, item.mode, earlier=(*item.earlier, done)) \
                        if self.rerun is not None and self.rerun(done) else None
                    if again is None:
                        yield done
                    else:
                        live.append(again)
                        self._send(again, waiting)
                if not finished and tool_job is None and not tool_queue and not self.backend.in_flight() and live:
                    raise RuntimeError(f"{len(live)} episode(s) wait for nothing: a backend lost a request")
        finally:
            if tool_job is not None:
                wait_for([tool_job])
            tool_thread.shutdown()
            for item in live:
                item.episode.close()

    def _start(self, task: Task, mode: str, earlier: tuple = ()) -> Live:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        toolbox = self.toolbox_for(task, mode)
        episode = self.start(toolbox, self.profile, task, mode, self.budgets_for(task))
        return Live(task, mode, episode, toolbox, time.perf_counter(), earlier=earlier)

    def _send(self, item: Live, waiting: dict[str, Live]) -> None:
        episode = item.episode
        key = f"{episode.turns}:{item.mode}:{item.task.id}"
        run = f":run{len(item.earlier)}" if item.earlier else ""  # a rerun must not replay the same samples
        seed = zlib.crc32(f"{self.seed}:{key}{run}".encode())  # reproducible per turn, whatever the batch around it
        script = self.forced.script(episode.trajectory.tools, episode.turns, seed) if self.forced else None
        sampling = replace(self.sampling, seed=seed, script=script)
        try:
            prompt = episode.prompt()
        except Exception as err:  # noqa: BLE001 - a prompt that cannot be built ends that episode only
            episode.fail(f"could not build the prompt: {type(err).__name__}: {err}")
            self._unsent.append(item)
            return
        waiting[key] = item
        self.backend.submit(key, prompt, sampling)

    def _receive(self, item: Live, completion: Completion, tool_queue: list[Live], finished: list[Live],
                 waiting: dict[str, Live]) -> None:
        episode = item.episode
        item.prompt_tokens += completion.prompt_tokens or 0
        item.completion_tokens += completion.completion_tokens or 0
        if completion.error:
            episode.fail(completion.error)
        else:
            try:
                episode.submit(completion.reply, completion.prompt_tokens, completion.completion_tokens,
                               completion.truncated, completion.stop)
            except Exception as err:  # noqa: BLE001 - a reply the backend garbled ends that episode only
                episode.fail(f"could not record the reply: {type(err).__name__}: {err}")
        if episode.state is State.RUNNING_TOOLS:
            tool_queue.append(item)
        elif episode.state is State.GENERATING:  # a harness's user turn (Nudge) after the reply: the next turn
            self._send(item, waiting)
        else:
            self._after_turn(item, finished, waiting)

    def _after_tools(self, item: Live, finished: list[Live], waiting: dict[str, Live]) -> None:
        if item.episode.state is State.GENERATING:
            self._send(item, waiting)
        else:
            self._after_turn(item, finished, waiting)

    def _after_turn(self, item: Live, finished: list[Live], waiting: dict[str, Live]) -> None:
        """A done episode gets its next scripted user turn, if the model answered and one is left."""
        episode, follow_ups = item.episode, item.task.follow_ups
        if episode.state is State.DONE and item.follow_ups < len(follow_ups) and episode.stop_reason in (
                Stop.ANSWER, Stop.FINAL_MESSAGE):
            follow_up = follow_ups[item.follow_ups]
            item.follow_ups += 1
            episode.follow_up(follow_up.text, follow_up.images)
            self._send(item, waiting)
        elif episode.state is State.DONE:
            finished.append(item)

    @staticmethod
    def _run_tools(batch: list[Live]) -> list[Live]:
        by_toolbox: dict[int, list[Live]] = {}
        for item in batch:
            by_toolbox.setdefault(id(item.toolbox), []).append(item)
        for items in by_toolbox.values():
            try:
                items[0].toolbox.run([item.episode for item in items])
            except Exception as err:  # noqa: BLE001 - ToolBox.run turns tool failures into observations; this is a bug
                for item in items:
                    if item.episode.state is State.RUNNING_TOOLS:
                        item.episode.fail(f"the tool runtime failed: {type(err).__name__}: {err}")
        return batch

    def _unstarted(self, task: Task, mode: str, err: Exception) -> Finished:
        message = f"the episode could not start: {type(err).__name__}: {err}"
        trajectory = Trajectory(meta={"profile": self.profile.name, "task": task.id, "mode": mode, "error": message})
        return Finished(task, mode, trajectory, Stop.ERROR.value, "", 0, 0, 0, 0, 0.0, message)

    @staticmethod
    def _finish(item: Live) -> Finished:
        episode = item.episode
        episode.close()
        return Finished(item.task, item.mode, episode.trajectory, episode.stop_reason.value, episode.answer or "",
                        episode.turns, episode.tool_calls, item.prompt_tokens, item.completion_tokens,
                        time.perf_counter() - item.started, episode.trajectory.meta.get("error"), item.earlier)


def start_episode(toolbox: ToolBox, profile: ModelProfile, task: Task, mode: str, budgets: Budgets) -> Episode:
    return toolbox.start(profile, task.question, task.images, budgets=budgets,
                         meta={"task": task.id, "category": task.category, "mode": mode})


class ToolBoxes:
    """The ToolBoxes of a run: `key(task, mode)` names the one an episode uses, `make(key)` builds it on first
    use; `close()` releases the sandbox pools they hold."""

    def __init__(self, key: Callable[[Task, str], object], make: Callable[[object], ToolBox]):
        self.key, self.make, self.boxes = key, make, {}

    def __call__(self, task: Task, mode: str) -> ToolBox:
        key = self.key(task, mode)
        if key not in self.boxes:
            self.boxes[key] = self.make(key)
        return self.boxes[key]

    def close(self) -> None:
        for box in self.boxes.values():
            if box.sandbox is not None:
                box.sandbox.close()


def toolboxes(profile: ModelProfile) -> ToolBoxes:
    """One ToolBox per tool set (a task's own, unless the model brings its own) and one without tools."""

    def make(key) -> ToolBox:
        if key is None:
            return ToolBox(None)
        if profile.code_tool:
            from runtime.sandbox import SandboxPool

            return ToolBox.for_profile(profile, sandbox=SandboxPool())
        return ToolBox(key)

    return ToolBoxes(lambda task, mode: None if mode == "no_tools" else (profile.toolset or task.toolset), make)
