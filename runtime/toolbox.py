"""The tools an episode can call, and how its calls run: image tools through `tools/` (the calls of
many episodes batched into one executor call, so a GPU sees one launch per op), code tools in the
sandbox (episodes in parallel, each episode's cells in order). Every failure becomes an error
observation for the model; nothing a model writes can raise out of `ToolBox.run`."""

from __future__ import annotations

import io
import json
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Sequence

import numpy as np
from PIL import Image

from runtime.code_tools import CodeContext, CodeTool, Saved, get_code_tool
from runtime.episode import Episode
from runtime.profiles import Budgets, ModelProfile
from runtime.protocols import Observation, Protocol
from tools.executor import Executor
from tools.images import DEFAULT_MAX_PIXELS, to_array
from tools.registry import ToolError
from tools.toolset import ToolSet, execute
from tools.toolsets import get_toolset

SCRATCH_IMAGE = re.compile(r"^image_(\d{1,9})\.png$")
MAX_CODE_THREADS = 32  # episodes whose cells run at once; the sandbox pool bounds the rest


class ToolBox:
    def __init__(self, toolset: ToolSet | str | None = None, code_tools: Sequence[CodeTool] = (),
                 executor: Executor | None = None, sandbox=None, cell_timeout_s: float | None = None, max_pixels: int = DEFAULT_MAX_PIXELS):
        self.toolset = get_toolset(toolset) if isinstance(toolset, str) else toolset
        self.code_tools = {tool.name: tool for tool in code_tools}
        if len(self.code_tools) != len(code_tools):
            raise ValueError(f"two code tools share a name: {[tool.name for tool in code_tools]}")
        if self.code_tools and sandbox is None:
            raise ValueError("code tools need a sandbox: pass sandbox=runtime.sandbox.SandboxPool()")
        clash = set(self.code_tools) & set(self.toolset.names() if self.toolset else ())
        if clash:
            raise ValueError(f"tool name(s) {sorted(clash)} are both image tools and code tools")
        self.executor = executor or Executor(max_pixels=max_pixels)
        self.sandbox = sandbox
        self.cell_timeout_s = cell_timeout_s
        self.max_pixels = max_pixels

    @classmethod
    def for_profile(cls, profile: ModelProfile, sandbox=None, **kwargs) -> "ToolBox":
        """The tools a model was trained with: its profile's tool set and code tool."""
        code_tools = [get_code_tool(profile.code_tool)] if profile.code_tool else []
        return cls(profile.toolset, code_tools, sandbox=sandbox, **kwargs)

    def start(self, model: ModelProfile | Protocol, question: str, images: Sequence, system: str | None = None,
              budgets: Budgets | None = None, meta: dict | None = None) -> Episode:
        """A new episode with these tools (see `Episode.start`): a sandbox session is opened for code tools
        (the question and schemas may name its paths) and the tool schemas go into the trajectory."""
        arrays = [to_array(picture, self.max_pixels) for picture in images]
        if self.code_tools and not arrays:
            raise ValueError("code tools hand the task's image to the code: give at least one image")
        context = session = None
        if self.code_tools:
            session, context = self._open_session(arrays)
        try:
            for tool in self.code_tools.values():
                question = tool.question(question, context)
            schemas = list(self.toolset.schemas()) if self.toolset else []
            schemas += [tool.schema(context) for tool in self.code_tools.values() if tool.schema]
            episode = Episode.start(model, question, arrays, system, schemas, budgets, meta, self.max_pixels)
        except BaseException:
            if session is not None:
                session.close()
            raise
        if session is not None:
            episode.resources["sandbox"] = session
        return episode

    def run(self, episodes: Sequence[Episode]) -> None:
        """Run the pending calls of these episodes (all RUNNING_TOOLS) and hand each its observations."""
        results: dict[int, dict[str, Observation]] = {id(e): {} for e in episodes}
        image_jobs, code_jobs = [], {}
        for episode in episodes:
            for pending in episode.pending:
                call, out = pending.call, results[id(episode)]
                if call.error:
                    out[pending.id] = _error(call.error)
                elif call.name in self.code_tools:
                    code_jobs.setdefault(id(episode), (episode, []))[1].append((pending, self.code_tools[call.name]))
                elif self.toolset is None:
                    out[pending.id] = _error(f"unknown tool {call.name!r}: no tools are available")
                else:
                    try:
                        invocation = episode.profile.boxes.apply(self.toolset.translate(call.name, call.arguments))
                        source = self._resolve(episode, invocation.image)
                        extras = {p: self._resolve(episode, ref) for p, ref in invocation.extra_images.items()}
                        image_jobs.append((episode, pending, replace(invocation, extra_images=extras), source))
                    except Exception as err:  # noqa: BLE001 - whatever a model's arguments do, it is an observation
                        out[pending.id] = _error(str(err) if isinstance(err, ToolError) else f"{type(err).__name__}: {err}")
        self._run_images(image_jobs, results)
        if code_jobs:
            with ThreadPoolExecutor(max_workers=min(len(code_jobs), MAX_CODE_THREADS)) as pool:
                for episode, observations in pool.map(self._run_code, code_jobs.values()):
                    results[id(episode)].update(observations)
        for episode in episodes:
            episode.observe(results[id(episode)])

    def _run_images(self, jobs, results) -> None:
        if not jobs:
            return
        outputs = execute(self.executor, [(invocation, source) for _, _, invocation, source in jobs])
        for (episode, pending, invocation, _), output in zip(jobs, outputs):
            if not output.ok:
                results[id(episode)][pending.id] = _error(output.error)
                continue
            indices, text = (), json.dumps(output.data, ensure_ascii=False, default=_plain) if output.data else ""
            if output.image is not None:
                try:
                    index = episode.add_image(output.image)
                except Exception as err:  # noqa: BLE001 - e.g. a result over the episode's max_pixels
                    results[id(episode)][pending.id] = _error(str(err))
                    continue
                indices = (index,)
                if isinstance(invocation.image, str):  # a path-based tool set: the result is a file too
                    text = f"Saved to {self.image_path(episode, index)}" + (f"\n{text}" if text else "")
            results[id(episode)][pending.id] = Observation(text, indices)

    def _run_code(self, job) -> tuple[Episode, dict[str, Observation]]:
        episode, calls = job
        session = episode.resources["sandbox"]
        observations = {}
        for pending, tool in calls:
            code = pending.call.arguments.get("code")
            if not isinstance(code, str) or not code.strip():
                observations[pending.id] = _error("the 'code' argument must be a non-empty string of Python code")
                continue
            try:
                result = session.run(code, self.cell_timeout_s)
            except Exception as err:  # noqa: BLE001 - e.g. the sandbox could not start a worker
                observations[pending.id] = _error(f"the sandbox failed: {err}")
                continue
            saved, notes = [], []
            for copy, name in zip(result.images, result.image_names):
                path = session.output_dir / name  # where the code saved it: what the model is told
                if not tool.collect.match(path.name):
                    continue
                if episode.images_left == 0:
                    notes.append(f"Not shown: {path.name} (the episode's image budget is spent)")
                    continue
                try:  # read the sandbox's own copy, never the file the code can still change
                    saved.append(Saved(path, episode.add_image(to_array(copy, self.max_pixels))))
                except Exception as err:  # noqa: BLE001 - an unreadable output file is reported, not fatal
                    notes.append(f"Could not read {path.name}: {err}")
            text = "\n".join([tool.describe(result, saved), *notes]).strip("\n")
            observations[pending.id] = Observation(text, tuple(s.index for s in saved), error=not result.ok)
        return episode, observations

    def _open_session(self, arrays: list[np.ndarray]):
        """A sandbox session holding the task's images. Environment values are written with the
        sandbox's path placeholders ({inputs_dir}, {work_dir}, {output_dir}), filled in by the pool."""
        inputs = {f"image_{i}.png": _png(array) for i, array in enumerate(arrays)}
        sizes = tuple((a.shape[1], a.shape[0]) for a in arrays)
        placeholders = CodeContext(tuple(Path("{inputs_dir}") / name for name in inputs), Path("{work_dir}"),
                                   Path("{output_dir}"), sizes)
        env = {k: str(v) for tool in self.code_tools.values() for k, v in tool.env(placeholders).items()}
        prelude = "\n".join(tool.prelude for tool in self.code_tools.values() if tool.prelude) or None
        session = self.sandbox.session(inputs=inputs, env=env, prelude=prelude)
        context = CodeContext(tuple(session.inputs_dir / name for name in inputs), session.work_dir,
                              session.output_dir, sizes)
        if any(tool.inputs_in_work_dir for tool in self.code_tools.values()):
            for path in context.inputs:
                (session.work_dir / path.name).symlink_to(path)
        return session, context

    def _resolve(self, episode: Episode, ref):
        """A tool set's image reference -> a workspace image: an index (negative from the end) or, for
        tool sets that pass files, the path of a workspace image file."""
        count = len(episode.workspace)
        if isinstance(ref, str):
            match = SCRATCH_IMAGE.match(Path(ref).name)
            if not match or int(match.group(1)) >= count or Path(ref).parent != episode.scratch:
                raise ToolError(f"image {ref!r} does not exist; use a path of an earlier image, e.g. "
                                f"{self.image_path(episode, count - 1)}")
            return episode.workspace[int(match.group(1))]
        if isinstance(ref, int) and not isinstance(ref, bool) and -count <= ref < count:
            return episode.workspace[ref]
        raise ToolError(f"image index {ref!r} does not exist; the workspace has images 0 to {count - 1} "
                        "(0 is the original)")

    def image_path(self, episode: Episode, index: int) -> Path:
        """A workspace image as a file in the episode's scratch folder (tool sets that pass paths)."""
        path = episode.scratch / f"image_{index}.png"
        if not path.exists():
            Image.fromarray(episode.workspace[index]).save(path)
        return path


def _error(message: str) -> Observation:
    return Observation(f"Error: {message}", error=True)


def _png(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format="PNG")
    return buffer.getvalue()


def _plain(value):
    return value.tolist() if hasattr(value, "tolist") else str(value)
