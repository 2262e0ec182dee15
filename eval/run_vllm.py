"""Evaluate a multimodal model on thinking-with-images tasks, with tools, in a multi-turn loop.

    python eval/run_vllm.py                                   # the embedded default (see below)
    python eval/run_vllm.py --model Qwen/Qwen2.5-VL-7B-Instruct --tools both
    python eval/run_vllm.py --config recipes/eval/qwen2_5_vl_7b.yaml --shard 0/4
    python eval/run_vllm.py merge runs/qwen2.5-vl-7b-instruct-synthetic      # join shards, write the report
    python eval/run_vllm.py report RUN_DIR [OTHER_RUN_DIR ...]              # (re)write a report

Without --model, a GPU machine evaluates Qwen/Qwen2.5-VL-7B-Instruct; a machine without one builds a tiny
random-weight model and runs a small smoke evaluation through the real vLLM CPU engine. Every flag is a
field of `eval.config.EvalConfig` (`--help` lists them).
"""

from __future__ import annotations

import json
import platform
import re
import sys
import time
from dataclasses import fields, replace
from pathlib import Path

from eval.backends import Sampling
from eval.config import GPU_DEFAULT_MODEL, SMOKE_MODEL, EvalConfig, smoke_model_dir
from eval.forcing import ForcedReplies
from eval.judge import JUDGE, Judge, JudgeItem
from eval.loop import EvalLoop, Finished, toolboxes
from eval.presets import get_preset, preset_for
from eval.report import write_report
from eval.rundir import RunDir, merge
from eval.scorers import get_scorer
from eval.suites import Task
from runtime.profiles import Budgets

SMOKE_DEFAULTS = dict(tasks=["rotated_ocr", "rotation_game"], per_task=4, tools="both", force_tool_calls=2,
                      max_tokens=96, max_images=4, max_pixels=0, max_model_len=4096, dtype="float32", max_active=64)
SMOKE_BANNER = (f"No --model and no GPU: evaluating '{SMOKE_MODEL}', a tiny RANDOM-WEIGHT model, on a small suite "
                "through the vLLM CPU engine. Its tool calls are scripted by the harness and its answers are "
                "noise: this run checks the pipeline, not a model.")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in ("merge", "report"):
        return _merge_or_report(argv[0], argv[1:])
    config = resolve(parse(argv))
    evaluate(config)
    return 0


def parse(argv: list[str]) -> EvalConfig:
    from trl import TrlParser

    (config,) = TrlParser((EvalConfig,)).parse_args_and_config(argv)
    config.explicit = _explicit_fields(argv)
    return config


def _explicit_fields(argv: list[str]) -> set[str]:
    names = {f.name for f in fields(EvalConfig)}
    given = {a[2:].split("=")[0].replace("-", "_") for a in argv if a.startswith("--")}
    return names & given


def resolve(config: EvalConfig) -> EvalConfig:
    """Fill the defaults that depend on the machine and the model."""
    explicit = getattr(config, "explicit", set())
    if config.model is None:
        if _has_gpu():
            config = replace(config, model=GPU_DEFAULT_MODEL)
        else:
            config = replace(config, model=SMOKE_MODEL,
                             **{k: v for k, v in SMOKE_DEFAULTS.items() if k not in explicit})
    preset = get_preset(config.preset) if config.preset else preset_for(config.model)
    config = replace(config, preset=preset.name,
                     max_tokens=config.max_tokens or preset.max_tokens,
                     temperature=preset.temperature if config.temperature is None else config.temperature,
                     max_pixels=preset.max_pixels if config.max_pixels is None else config.max_pixels)
    if config.out is None:
        name = re.sub(r"[^A-Za-z0-9._-]+", "-", Path(config.model).name.lower())
        suite = "synthetic" if config.suite == "synthetic" else Path(config.suite).stem
        config = replace(config, out=str(Path("runs") / f"{name}-{suite}"))
    return config


def evaluate(config: EvalConfig) -> list[dict]:
    """Run (or resume) the evaluation; returns this shard's new records."""
    if config.model == SMOKE_MODEL:
        print(SMOKE_BANNER, flush=True)
    preset = get_preset(config.preset)
    profile = preset.profile
    tasks = _shard(_suite(config), *config.shard_index)
    run = RunDir(config.out, config.shard_index)
    done = run.open(_saved_config(config), overwrite=config.overwrite)
    work = [(task, mode) for task in tasks for mode in config.modes if (task.id, mode) not in done]
    print(f"{config.out}: {len(tasks)} tasks x {len(config.modes)} mode(s); {len(done)} recorded, "
          f"{len(work)} to run", flush=True)
    budgets_for = None
    if config.backend == "reference":
        from data_gen.sample import REFERENCE_PROFILE, reference_budgets

        def budgets_for(task: Task) -> Budgets:
            return reference_budgets(len(task.reference), len(task.images))

        profile = REFERENCE_PROFILE
    else:  # the engine shows at most max_images per prompt: the episode's budget says so to the model
        budgets = replace(profile.budgets, max_images=config.max_images,
                          **{k: getattr(config, k) for k in ("max_turns", "max_tool_calls") if getattr(config, k)})
        profile = replace(profile, budgets=budgets)
    judged = [t.id for t in tasks if t.scorer == JUDGE]
    if judged and not config.judge_model:
        raise ValueError(f"{len(judged)} task(s), e.g. {judged[0]!r}, are scored by an LLM judge: pass --judge_model "
                         "('same', or a model with --judge_base_url or run in vLLM)")
    backend = _backend(config, preset, tasks) if work else None
    records, to_judge = [], []
    try:
        if work:
            sampling = Sampling(max_tokens=config.max_tokens, temperature=config.temperature, top_p=config.top_p,
                                top_k=config.top_k)
            forced = ForcedReplies(config.force_tool_calls) if config.force_tool_calls else None
            loop = EvalLoop(backend, profile, sampling, toolboxes(profile), budgets_for, config.max_active, forced,
                            config.seed)
            progress = _Progress(len(work))
            for finished in loop.run(work):
                record = make_record(finished, run, config)
                if record["scorer"] == JUDGE:  # written once judged: an interrupted run redoes it
                    to_judge.append((finished.task, record))
                    continue
                run.append(record)
                records.append(record)
                progress.update(record)
            progress.close()
        if to_judge:
            backend = _judge(config, backend, to_judge)
            for _, record in to_judge:
                run.append(record)
                records.append(record)
    except KeyboardInterrupt:
        print(f"\ninterrupted: {len(done) + len(records)} records are saved in {run.records_path}; run the same "
              "command again to resume", file=sys.stderr)
        raise
    finally:
        if backend is not None:
            backend.close()
    if config.shard_index[1] == 1:
        summary = write_report(run.path, run.records(), _saved_config(config))
        print(f"report: {run.path / 'report.md'}")
        _print_headline(summary)
    else:
        print(f"shard {config.shard} done; after every shard: python eval/run_vllm.py merge {config.out}")
    return records


def make_record(finished: Finished, run: RunDir, config: EvalConfig) -> dict:
    task = finished.task
    score, score_error = None, None
    try:
        if task.scorer != JUDGE:
            score = get_scorer(task.scorer)(finished.answer, task.answer)
    except Exception as err:  # noqa: BLE001 - a scorer that fails on one answer must not stop the run
        score_error = f"{type(err).__name__}: {err}"
    return {"id": task.id, "category": task.category, "scorer": task.scorer, "mode": finished.mode,
            "question": task.question, "truth": task.answer, "prediction": finished.answer, "score": score,
            "score_error": score_error, "stop_reason": finished.stop_reason, "error": finished.error,
            "turns": finished.turns, "tool_calls": finished.tool_calls, "reference_calls": task.reference_calls,
            "prompt_tokens": finished.prompt_tokens, "completion_tokens": finished.completion_tokens,
            "latency_s": round(finished.latency_s, 3), "model": config.model,
            "profile": finished.trajectory.meta["profile"],
            "trajectory": finished.trajectory.to_dict(run.images)}


def _judge(config: EvalConfig, backend, to_judge: list[tuple[Task, dict]]):
    """Score the judge's tasks: on the evaluated model's backend ('same'), a judge server, or a vLLM engine
    started for the judge (the evaluated model's engine is closed first, to free its memory). Returns the
    backend the caller must close."""
    if config.judge_model == "same":
        judge_backend = backend
    elif config.judge_base_url:
        from eval.backends.openai_http import OpenAIHTTPBackend

        judge_backend = OpenAIHTTPBackend(config.judge_base_url, config.judge_model)
    else:
        from eval.backends.vllm_engine import VLLMEngineBackend

        if backend is not None:
            backend.close()
        backend = judge_backend = VLLMEngineBackend(config.judge_model, max_model_len=config.max_model_len,
                                                    tensor_parallel_size=config.tensor_parallel_size,
                                                    gpu_memory_utilization=config.gpu_memory_utilization)
    items = [JudgeItem(task.question, task.answer, record["prediction"], task.meta.get("rubric"), task.images)
             for task, record in to_judge]
    for (_, record), verdict in zip(to_judge, Judge(judge_backend).judge_many(items)):
        record.update(score=verdict.score, score_error=verdict.error,
                      judge={"model": config.judge_model, "reply": verdict.raw, "criteria": verdict.items})
    if judge_backend is not backend:
        judge_backend.close()
    return backend


def _suite(config: EvalConfig) -> list[Task]:
    if config.suite == "synthetic":
        from data_gen.tasks import TASKS
        from eval.suites.synthetic import synthetic_suite

        tasks = list(synthetic_suite(config.tasks or tuple(TASKS), config.per_task, config.difficulty))
    else:
        from eval.suites.jsonl import jsonl_suite

        tasks = list(jsonl_suite(config.suite))
    return tasks[:config.limit] if config.limit else tasks


def _shard(tasks: list[Task], index: int, count: int) -> list[Task]:
    return tasks[index::count]


def _backend(config: EvalConfig, preset, tasks: list[Task]):
    model = config.model
    if model == SMOKE_MODEL:
        model = str(_smoke_model())
    processor_kwargs = {"max_pixels": config.max_pixels} if config.max_pixels else {}
    if config.backend == "vllm":
        from eval.backends.vllm_engine import VLLMEngineBackend

        return VLLMEngineBackend(model, max_model_len=config.max_model_len, limit_images=config.max_images,
                                 dtype=config.dtype, seed=config.seed,
                                 tensor_parallel_size=config.tensor_parallel_size,
                                 gpu_memory_utilization=config.gpu_memory_utilization,
                                 mm_processor_kwargs=processor_kwargs or None)
    if config.backend == "openai":
        import os

        from eval.backends.openai_http import OpenAIHTTPBackend
        from runtime.protocols import OpenAIProtocol

        # a protocol that reads calls from the text gets the server's parsed tool calls back as text
        text_replies = not isinstance(preset.profile.protocol, OpenAIProtocol)
        return OpenAIHTTPBackend(config.base_url, model, api_key=os.environ.get(config.api_key_env),
                                 concurrency=config.concurrency, timeout_s=config.timeout_s, retries=config.retries,
                                 send_stop=config.send_stop, text_replies=text_replies)
    if config.backend == "hf":
        from eval.backends.hf_generate import HFGenerateBackend

        return HFGenerateBackend(model, dtype=config.dtype, batch_size=config.batch_size,
                                 processor_kwargs=processor_kwargs)
    from eval.backends.reference import ReferenceBackend

    missing = [t.id for t in tasks if t.reference_calls and not t.reference]
    if missing:
        raise ValueError(f"--backend reference replays reference calls; {len(missing)} task(s) have none, e.g. "
                         f"{missing[0]!r}")
    return ReferenceBackend(tasks)


def _smoke_model() -> Path:
    directory = smoke_model_dir()
    if not (directory / "config.json").exists():
        from runtime.tiny_model import build_model

        print(f"building the tiny random-weight smoke model in {directory}", flush=True)
        build_model("qwen2_5_vl", directory)
    return directory


def _saved_config(config: EvalConfig) -> dict:
    import torch
    import transformers

    saved = config.to_dict()
    saved["versions"] = {"python": platform.python_version(), "torch": torch.__version__,
                         "transformers": transformers.__version__, "vllm": _version("vllm")}
    return saved


def _version(package: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    for name in (package, f"{package}-cpu"):
        try:
            return version(name)
        except PackageNotFoundError:
            continue
    return None


def _has_gpu() -> bool:
    import torch

    return torch.cuda.is_available()


class _Progress:
    """A progress bar with live accuracy per mode."""

    def __init__(self, total: int):
        from tqdm import tqdm

        self.bar = tqdm(total=total, unit="episode", dynamic_ncols=True)
        self.scores: dict[str, list[float]] = {}
        self.started = time.perf_counter()

    def update(self, record: dict) -> None:
        self.scores.setdefault(record["mode"], []).append(record["score"] or 0.0)
        self.bar.set_postfix({f"acc[{mode}]": f"{sum(s) / len(s):.3f}" for mode, s in self.scores.items()})
        self.bar.update(1)

    def close(self) -> None:
        self.bar.close()


def _print_headline(summary: dict) -> None:
    for mode, stats in summary["modes"].items():
        overall = stats["overall"]
        print(f"{mode}: accuracy {overall['accuracy']:.3f} over {overall['n']} tasks, tool-call rate "
              f"{overall['tool_call_rate']:.2f}, {overall['calls_per_episode']:.2f} calls per task")


def _merge_or_report(command: str, paths: list[str]) -> int:
    if not paths:
        others = " [OTHER_RUN_DIR ...]" if command == "report" else ""
        print(f"usage: python eval/run_vllm.py {command} RUN_DIR{others}", file=sys.stderr)
        return 2
    run = RunDir(paths[0])
    records = merge(run.path) if command == "merge" else run.records()
    for other in paths[1:]:
        records += RunDir(other).records()
    config = json.loads((run.path / "config.json").read_text()) if (run.path / "config.json").exists() else {}
    write_report(run.path, records, config)
    print(f"{len(records)} records; report: {run.path / 'report.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
