"""The tools an episode can call, and how its calls run: image tools through `tools/` (the calls of
many episodes batched into one executor call, so a GPU sees one launch per op), tools that reproduce
a benchmark's own code one call at a time in call order (reading and writing the episode's images as
files), code tools in the sandbox (episodes in parallel, each episode's cells in order). Every failure
becomes an error observation for the model; nothing a model writes can raise out of `ToolBox.run`."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
from PIL import Image

from runtime.code_tools import CodeContext, CodeTool, Saved, get_code_tool
from runtime.episode import Episode, ImageBudgetError
from runtime.profiles import Budgets, ModelProfile
from runtime.protocols import Observation, Protocol
from runtime.sandbox.pool import ImageRefused, SandboxError
from tools.executor import Executor
from tools.images import DEFAULT_MAX_PIXELS, to_array
from tools.registry import ToolError
from tools.toolset import Reply, ToolSet, execute
from tools.toolsets import get_toolset

WORKSPACE_FILE = re.compile(r"(?:^|/)image_(\d{1,9})\.png$")  # workspace image N as a file: <scratch>/image_N.png
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

    def start(self, model: ModelProfile | Protocol, question: str | Callable[[list[Path]], str], images: Sequence,
              system: str | None = None, budgets: Budgets | None = None, meta: dict | None = None) -> Episode:
        """A new episode with these tools (see `Episode.start`): a sandbox session is opened for code tools
        (the question and schemas may name its paths) and the tool schemas go into the trajectory. A benchmark
        whose prompt names the image's file gives `question` as a function of the images' paths as its tools
        see them: the sandbox's inputs for code tools, else files in the episode's scratch folder."""
        arrays = [to_array(picture, self.max_pixels) for picture in images]
        if self.code_tools and not arrays:
            raise ValueError("code tools hand the task's image to the code: give at least one image")
        context = session = scratch = None
        if self.code_tools:
            session, context = self._open_session(arrays)
        try:
            if callable(question):
                if context is not None:
                    paths = list(context.inputs)
                else:
                    scratch = Path(tempfile.mkdtemp(prefix="tirlab-episode-"))
                    paths = [_write(scratch / f"image_{i}.png", array) for i, array in enumerate(arrays)]
                question = question(paths)
            for tool in self.code_tools.values():
                question = tool.question(question, context)
            schemas = list(self.toolset.schemas()) if self.toolset else []
            schemas += [tool.schema(context) for tool in self.code_tools.values() if tool.schema]
            episode = Episode.start(model, question, arrays, system, schemas, budgets, meta, self.max_pixels,
                                    scratch=scratch)
        except BaseException:
            if session is not None:
                session.close()
            if scratch is not None:
                shutil.rmtree(scratch, ignore_errors=True)
            raise
        if session is not None:
            episode.resources["sandbox"] = session
        return episode

    def run(self, episodes: Sequence[Episode]) -> None:
        """Run the pending calls of these episodes (all RUNNING_TOOLS) and hand each its observations."""
        results: dict[int, dict[str, Observation]] = {id(e): {} for e in episodes}
        image_jobs, code_jobs, direct_jobs = [], {}, []
        for episode in episodes:
            for pending in episode.pending:
                call, out = pending.call, results[id(episode)]
                if call.error:
                    out[pending.id] = _error(call.error)
                elif call.name in self.code_tools:
                    code_jobs.setdefault(id(episode), (episode, []))[1].append((pending, self.code_tools[call.name]))
                elif self.toolset is None:
                    out[pending.id] = _error(f"unknown tool {call.name!r}: no tools are available")
                elif self.toolset.runs(call.name):
                    direct_jobs.append((episode, pending))
                else:
                    try:
                        invocation = episode.profile.boxes.apply(self.toolset.translate(call.name, call.arguments))
                        source = self._resolve(episode, invocation.image)
                        extras = {p: self._resolve(episode, ref) for p, ref in invocation.extra_images.items()}
                        image_jobs.append((episode, pending, replace(invocation, extra_images=extras), source))
                    except Exception as err:  # noqa: BLE001 - whatever a model's arguments do, it is an observation
                        out[pending.id] = _error(str(err) if isinstance(err, ToolError) else f"{type(err).__name__}: {err}")
        self._run_direct(direct_jobs, results)
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
        for (episode, pending, _, _), output in zip(jobs, outputs):
            if not output.ok:
                results[id(episode)][pending.id] = _error(output.error)
                continue
            indices, text = (), json.dumps(output.data, ensure_ascii=False, default=_plain) if output.data else ""
            if output.image is not None:
                try:
                    indices = (episode.add_image(output.image, f"the {pending.call.name} result"),)
                except Exception as err:  # noqa: BLE001 - e.g. a result over the episode's max_pixels
                    results[id(episode)][pending.id] = _error(str(err))
                    continue
            results[id(episode)][pending.id] = Observation(text, indices)

    def _run_direct(self, jobs, results) -> None:
        """Tools that run a benchmark's own code: one call at a time, each episode's calls in order."""
        for episode, pending in jobs:
            files = _EpisodeFiles(self, episode)
            try:
                reply = self.toolset.run(pending.call.name, pending.call.arguments, files)
            except Exception as err:  # noqa: BLE001 - e.g. a result over the episode's max_pixels
                results[id(episode)][pending.id] = _error(str(err) if isinstance(err, ToolError) else f"{type(err).__name__}: {err}")
                continue
            results[id(episode)][pending.id] = Observation(reply.text, tuple(files.saved), error=reply.error)

    def _run_code(self, job) -> tuple[Episode, dict[str, Observation]]:
        episode, calls = job
        session = episode.resources["sandbox"]
        observations = {}
        for pending, tool in calls:
            code = pending.call.arguments.get("code")
            if isinstance(code, str) and tool.prepare is not None:
                code = tool.prepare(code)
            if isinstance(code, Reply):  # the harness answers without running it (e.g. a refused command)
                observations[pending.id] = Observation(code.text, error=code.error)
                continue
            if not isinstance(code, str) or not code.strip():
                observations[pending.id] = _error("the 'code' argument must be a non-empty string of Python code")
                continue
            try:
                result = session.run(code, self.cell_timeout_s)
            except Exception as err:  # noqa: BLE001 - e.g. the sandbox could not start a worker
                observations[pending.id] = _error(f"the sandbox failed: {err}")
                continue
            saved, notes, refused = [], [], False
            for copy, name in zip(result.images, result.image_names):
                path = session.output_dir / name  # where the code saved it: what the model is told
                if not tool.collect.match(path.name):
                    continue
                if episode.images_left == 0:
                    notes.append(f"Not shown: {path.name} (the episode's image budget is spent)")
                    continue
                try:  # the sandbox's own copy, decoded in the sandbox: never the file the code can still change
                    pixels = session.decode(copy, max_pixels=episode.max_pixels, max_bytes=episode.image_bytes_left)
                    saved.append(Saved(path, episode.add_image(pixels, path.name)))
                except ImageBudgetError as err:  # the episode recorded it
                    notes.append(str(err))
                    refused = True
                except (ImageRefused, SandboxError, ToolError) as err:
                    notes.append(episode.refuse_image(path.name, str(err)))
                    refused = True
            text = "\n".join([tool.describe(result, saved), *notes]).strip("\n")
            observations[pending.id] = Observation(text, tuple(s.index for s in saved), error=not result.ok or refused)
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
        """A tool set's image reference (a workspace index, negative from the end) -> a workspace image."""
        count = len(episode.workspace)
        if isinstance(ref, int) and not isinstance(ref, bool) and -count <= ref < count:
            return episode.workspace[ref]
        raise ToolError(f"image index {ref!r} does not exist; the workspace has images 0 to {count - 1} "
                        "(0 is the original)")

    def image_path(self, episode: Episode, index: int) -> Path:
        """A workspace image as a file in the episode's scratch folder (tool sets that pass paths)."""
        path = episode.scratch / f"image_{index}.png"
        return path if path.exists() else _write(path, episode.workspace[index])


class _EpisodeFiles:
    """`ImageFiles` over an episode: its workspace images are the files `ToolBox.image_path` writes."""

    def __init__(self, toolbox: ToolBox, episode: Episode):
        self._toolbox, self._episode = toolbox, episode
        self.saved: list[int] = []  # workspace indices added during the call

    @property
    def original(self) -> str:
        return str(self._toolbox.image_path(self._episode, 0)) if self._episode.workspace else ""

    def read(self, path: str) -> np.ndarray:
        """Any absolute spelling of a workspace image file's path, as the file system resolves it."""
        try:
            real = os.path.realpath(path) if os.path.isabs(path) else ""
        except ValueError:  # e.g. a NUL byte: no such file
            real = ""
        folder, name = os.path.split(real)
        match = WORKSPACE_FILE.search(name)
        index = int(match.group(1)) if match else -1
        if name != f"image_{index}.png" or index >= len(self._episode.workspace) or folder != os.path.realpath(self._episode.scratch):
            raise FileNotFoundError(path)
        return self._episode.workspace[index]

    def save(self, image: np.ndarray) -> str:
        index = self._episode.add_image(image)
        self.saved.append(index)
        return str(self._toolbox.image_path(self._episode, index))


def _error(message: str) -> Observation:
    return Observation(f"Error: {message}", error=True)


def _write(path: Path, array: np.ndarray) -> Path:
    Image.fromarray(array).save(path)
    return path


def _png(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format="PNG")
    return buffer.getvalue()


def _plain(value):
    return value.tolist() if hasattr(value, "tolist") else str(value)
