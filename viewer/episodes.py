"""What the viewer shows, from each kind of folder tirlab writes: evaluation runs and GRPO rollouts (records with
trajectories) and data_gen exports (dataset rows). Each becomes a list of episodes in one shape:

    {"id", "group", "category", "status", "score", "scores", "stop", "question", "truth", "prediction",
     "turns", "calls", "tools", "prompt_tokens", "completion_tokens", "latency", "step", "reward", "rewards",
     "messages": [{"role", "name", "error", "parts": [{"text": str} | {"image": Path}],
                   "calls": [{"name", "arguments", "region": {"image": Path, "box": [x1, y1, x2, y2]} | None}]}],
     "record": {the source's other fields}}

`group` is what the side-by-side view aligns: a run's mode (and benchmark variant), a rollout's step, a dataset's
form and split; with several sources, the source's name first. Images are files on disk (a run's `images/`, or
written from a dataset's bytes); the page links them and never copies them.
"""

from __future__ import annotations

import hashlib
import json
import os
import math
import re
from collections import Counter
from pathlib import Path
from typing import Iterator

from PIL import Image

from eval.rundir import RunDir, read_records, split_files
from viewer.regions import call_region, reply_region, toolset_of

TEXT_LIMIT = 20_000  # characters of one text part the page shows; a model's output is unbounded
SURROGATE = re.compile("[\ud800-\udfff]")  # a str holds code points: any surrogate in one is a lone half
TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.S)
TOOLS_BLOCK = re.compile(r"<tools>\n(.*?)\n</tools>", re.S)  # not the "<tools></tools>" the prompt's prose names


class ViewerError(ValueError):
    pass


def status(score) -> str:
    if score is None or score != score:  # NaN: a reward function that could not score
        return "unscored"
    return "correct" if score >= 1 else "wrong" if score <= 0 else "partial"


def clip(value, limit: int = TEXT_LIMIT) -> str:
    """Text for the page: at most `limit` characters, lone surrogates (a model's bytes can decode to them) as U+FFFD."""
    value = "" if value is None else value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    if len(value) > limit:
        value = value[:limit] + f"\n[... {len(value) - limit:,} more characters]"
    return SURROGATE.sub("\ufffd", value)


def number(value):
    """A finite number, else None: NaN and infinity (a reward TRL could not compute) are no score."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value if math.isfinite(value) else None


def numbers(values) -> dict:
    return {clip(str(k), 200): number(v) for k, v in values.items()} if isinstance(values, dict) else {}


def group_of(record: dict) -> str:
    """The group a record is shown in: its mode and benchmark variant, or its rollout step."""
    if record.get("step") is not None:
        return f"step {record['step']}"
    group = " ".join(str(part) for part in (record.get("mode"), record.get("variant")) if part)
    return clip(group, 200) or "-"


class ImageSizes:
    """(width, height) of image files, read from their headers once."""

    def __init__(self):
        self._sizes: dict[Path, tuple[int, int]] = {}

    def __call__(self, path: Path) -> tuple[int, int]:
        if path not in self._sizes:
            with Image.open(path) as image:
                self._sizes[path] = image.size
        return self._sizes[path]


# -- evaluation runs and rollouts ------------------------------------------------------------------------------------

def from_records(records: list[dict], image_dirs: list[Path], source: str | None = None) -> list[dict]:
    """Episodes of evaluation (or rollout) records whose images lie in one of `image_dirs`."""
    sizes = ImageSizes()
    found: dict[str, Path] = {}

    def locate(key: str) -> Path:
        if key not in found:
            for folder in image_dirs:
                path = Path(folder) / f"{key}.png"
                if path.is_file():
                    found[key] = path
                    break
            else:
                raise ViewerError(f"image {key}.png is in none of {[str(d) for d in image_dirs]}: copy the run's "
                                  "images/ folder along with its records")
        return found[key]

    episodes = []
    for record in records:
        trajectory = record.get("trajectory") or {}
        images = [locate(key) for key in trajectory.get("images") or []]
        messages = _trajectory_messages(trajectory, images, sizes)
        group = group_of(record)
        score = number(record.get("score"))
        episodes.append({
            "id": clip(str(record.get("id")), 500), "group": f"{source}: {group}" if source else group,
            "category": clip(str(record.get("category") or "-"), 200), "status": status(score),
            "score": score, "scores": numbers(record.get("scores")),
            "stop": clip(str(record.get("stop_reason") or "-"), 200), "question": clip(record.get("question")),
            "truth": clip(record.get("truth")), "prediction": clip(record.get("prediction")),
            "turns": number(record.get("turns")) or 0, "calls": number(record.get("tool_calls")) or 0,
            "tools": _tools_used(messages), "prompt_tokens": number(record.get("prompt_tokens")),
            "completion_tokens": number(record.get("completion_tokens")), "latency": number(record.get("latency_s")),
            "step": number(record.get("step")), "reward": number(record.get("reward")),
            "rewards": numbers(record.get("rewards")) or None,
            "messages": messages,
            "record": {key: value for key, value in record.items() if key not in ("trajectory",)},
        })
    return episodes


def _trajectory_messages(trajectory: dict, images: list[Path], sizes: ImageSizes) -> list[dict]:
    toolset = toolset_of(trajectory.get("tools") or [])
    profile = (trajectory.get("meta") or {}).get("profile")
    workspace = 0  # images the episode held so far: each message shows the images it added
    messages, waiting = [], {}  # waiting: call id -> the call, until its tool reply
    for message in trajectory.get("messages") or []:
        parts = []
        for part in message.get("content") or []:
            if part.get("type") == "image" and isinstance(part.get("image"), int) and part["image"] < len(images):
                parts.append({"image": images[part["image"]]})
                workspace = max(workspace, part["image"] + 1)
            elif part.get("type") == "text":
                parts.append({"text": clip(part.get("text"))})
        calls = []
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            name, arguments = str(function.get("name")), function.get("arguments")
            arguments = arguments if isinstance(arguments, str) else json.dumps(arguments)
            region = call_region(toolset, profile, name, arguments, workspace, lambda i: sizes(images[i]))
            if region:
                region["image"] = images[region["image"]]
            calls.append({"name": clip(name, 200), "arguments": clip(arguments, 5_000), "region": region})
            waiting[call.get("id")] = calls[-1]
        answered = waiting.pop(message.get("tool_call_id"), None) if message.get("role") == "tool" else None
        if answered is not None and message.get("error"):
            answered["region"] = None  # the call did not run (an error, a budget, a refused image): nothing was cut
        elif answered is not None and answered["region"] is None:
            first = next((p.get("text") or "" for p in message.get("content") or [] if p.get("type") == "text"), "")
            region = reply_region(first, len(images), lambda i: sizes(images[i]))
            if region:
                answered["region"] = {**region, "image": images[region["image"]]}
        name = message.get("name")
        messages.append({"role": clip(str(message.get("role")), 50), "name": clip(name, 200) if name else None,
                         "error": bool(message.get("error")), "parts": parts, "calls": calls})
    return messages


def _tools_used(messages: list[dict]) -> list[str]:
    return sorted({call["name"] for message in messages for call in message["calls"]})


def from_run(path: Path, source: str | None = None) -> list[dict]:
    """A run directory: its records.jsonl (an unsharded or merged run; one still running shows what it has)."""
    run = RunDir(path)
    if not run.records_path.is_file():
        raise ViewerError(f"{path} has only shard records: join them first with python eval/run_vllm.py merge {path}")
    return from_records(run.records(), [run.path / "images"], source)


def from_rollouts(path: Path, source: str | None = None) -> list[dict]:
    """GRPO's saved rollouts: `rollouts/step-N/records.jsonl` with `images/` beside each."""
    episodes = []
    for folder in sorted(Path(path).glob("step-*")):
        if (folder / "records.jsonl").is_file():
            episodes += from_records(list(read_records(folder / "records.jsonl")), [folder / "images"], source)
    return episodes


# -- data_gen exports ------------------------------------------------------------------------------------------------

def from_dataset(path: Path, image_dir: Path, source: str | None = None, limit: int | None = None) -> list[dict]:
    """A data_gen export (`data/<split>-*.parquet`: SFT rows, TRL or verl RL prompts), the first `limit` rows of each
    split (None: all); its images are written to `image_dir` once each."""
    import pyarrow.parquet as pq

    files = sorted((Path(path) / "data").glob("*.parquet"))
    if not files:
        raise ViewerError(f"{path} has no data/*.parquet: is it a data_gen export folder?")
    form = Path(path).name
    sizes = ImageSizes()
    episodes, taken = [], Counter()
    for file in files:
        split = file.name.split("-")[0]
        group = f"{source}: {form} {split}" if source else f"{form} {split}"
        for batch in pq.ParquetFile(file).iter_batches(batch_size=256):
            if limit is not None and taken[split] >= limit:
                break
            for row in batch.to_pylist()[:None if limit is None else limit - taken[split]]:
                taken[split] += 1
                episodes.append(_dataset_episode(row, image_dir, sizes, group))
    return episodes


def _dataset_episode(row: dict, image_dir: Path, sizes: ImageSizes, group: str) -> dict:
    images = [_write_image(image["bytes"], image_dir) for image in row.get("images") or []]
    chat = row.get("messages") or row.get("prompt") or []
    extra = row.get("extra_info") or {}
    truth = row.get("answer") or (row.get("reward_model") or {}).get("ground_truth")
    toolset = None
    messages, workspace = [], 0
    for message in chat:
        content = message.get("content")
        if isinstance(content, str):  # verl: one string, an <image> placeholder per image
            pieces = re.split(r"(<image>)", content)
            content = [{"type": "image"} if p == "<image>" else {"type": "text", "text": p} for p in pieces if p]
        parts, calls = [], []
        for part in content or []:
            if part.get("type") == "image":
                if workspace < len(images):
                    parts.append({"image": images[workspace]})
                    workspace += 1
                continue
            text = part.get("text") or ""
            parts.append({"text": clip(text)})
            if message.get("role") == "system" and toolset is None:
                toolset = toolset_of(_schemas_in(text))
            if message.get("role") == "assistant":
                for block in TOOL_CALL.findall(text):
                    calls.append(_hermes_call(block, toolset, workspace, images, sizes))
        messages.append({"role": message.get("role"), "name": None, "error": False, "parts": parts, "calls": calls})
    question = next((p["text"] for m in messages if m["role"] == "user" for p in m["parts"] if "text" in p), "")
    answers = [p["text"] for m in messages if m["role"] == "assistant" for p in m["parts"] if "text" in p]
    prediction = answers[-1] if answers else ""
    if truth is None:  # an SFT row: the reference answer is its last turn's <answer>
        found = re.search(r"<answer>(.*?)</answer>", prediction, re.S)
        truth = found.group(1) if found else prediction
    calls = sum(len(m["calls"]) for m in messages)
    return {"id": str(row.get("id") or extra.get("id") or ""), "group": group,
            "category": str(row.get("ability") or str(row.get("id") or extra.get("id") or "-").split("-")[0]),
            "status": "reference", "score": None, "scores": {}, "stop": "-", "question": clip(question),
            "truth": clip(truth), "prediction": clip(prediction),
            "turns": sum(m["role"] == "assistant" for m in messages),
            "calls": calls, "tools": _tools_used(messages), "prompt_tokens": None, "completion_tokens": None,
            "latency": None, "step": None, "reward": None, "rewards": None, "messages": messages,
            "record": {k: v for k, v in row.items() if k not in ("images", "messages", "prompt")}}


def _schemas_in(system: str) -> list[dict]:
    """The tool schemas a hermes system prompt lists, one JSON object a line inside <tools>."""
    block = TOOLS_BLOCK.search(system)
    schemas = []
    for line in (block.group(1).splitlines() if block else []):
        try:
            schemas.append(json.loads(line))
        except ValueError:
            return []
    return schemas


def _hermes_call(block: str, toolset, workspace: int, images: list[Path], sizes: ImageSizes) -> dict:
    try:
        call = json.loads(block)
        name, arguments = str(call["name"]), json.dumps(call.get("arguments") or {})
    except (ValueError, KeyError, TypeError):
        return {"name": "(unparsed)", "arguments": clip(block, 5_000), "region": None}
    region = call_region(toolset, None, name, arguments, workspace, lambda i: sizes(images[i]))
    if region:
        region["image"] = images[region["image"]]
    return {"name": name, "arguments": clip(arguments, 5_000), "region": region}


def _write_image(data: bytes, image_dir: Path) -> Path:
    path = Path(image_dir) / f"{hashlib.sha256(data).hexdigest()[:32]}.png"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_bytes(data)
        os.replace(tmp, path)
    return path


# -- what a folder is ------------------------------------------------------------------------------------------------

def kind(path: Path) -> str:
    """"run", "rollouts" or "dataset"; a folder of several (a pilot export with direct/ and agentic/) is "datasets"."""
    path = Path(path)
    if split_files(path) if path.is_dir() else False:
        return "run"
    if any(path.glob("step-*/records.jsonl")):
        return "rollouts"
    if any(path.glob("data/*.parquet")):
        return "dataset"
    if any(path.glob("*/data/*.parquet")):
        return "datasets"
    raise ViewerError(f"{path} is not a run directory (records.jsonl), a rollouts folder (step-*/records.jsonl) "
                      "or a data_gen export (data/*.parquet)")


def load(path: Path, image_dir: Path, source: str | None = None, limit: int | None = None) -> Iterator[dict]:
    """The episodes of any folder tirlab writes; `image_dir` takes the images a dataset holds inside its files, and
    `limit` caps the rows read from each split of a dataset."""
    found = kind(path)
    if found == "run":
        yield from from_run(path, source)
    elif found == "rollouts":
        yield from from_rollouts(path, source)
    elif found == "dataset":
        yield from from_dataset(path, image_dir, source, limit)
    else:
        for sub in sorted({p.parent.parent for p in Path(path).glob("*/data/*.parquet")}):
            yield from from_dataset(sub, image_dir, source, limit)
