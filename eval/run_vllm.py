"""Evaluate a multimodal model on thinking-with-images tasks, with tools, in a multi-turn loop.

    python eval/run_vllm.py                                   # the embedded default (see below)
    python eval/run_vllm.py --model Qwen/Qwen2.5-VL-7B-Instruct --tools both
    python eval/run_vllm.py --config recipes/eval/qwen2_5_vl_7b.yaml --shard 0/4
    python eval/run_vllm.py merge runs/qwen2.5-vl-7b-instruct-synthetic      # join shards, write the report
    python eval/run_vllm.py run_dir --config recipes/eval/qwen2_5_vl_7b/synthetic.yaml  # its run directory
    python eval/run_vllm.py report RUN_DIR [OTHER_RUN_DIR ...]              # (re)write a report
    python eval/run_vllm.py rejudge RUN_DIR --judge_model M [--out NEW_DIR]  # judge a run again, model not rerun

Without --model, a GPU machine evaluates Qwen/Qwen2.5-VL-7B-Instruct. A machine without one evaluates the two
shipped toy models through the real vLLM CPU engine on held-out rotated OCR, in one report: the agentic one
calls `rotate` by itself and reads the restored image, the direct one answers without tools. With another
--suite it builds a tiny random-weight model and runs a smoke evaluation (scripted tool calls, noise answers).
Every flag is a field of `eval.config.EvalConfig` (`--help` lists them). A setting, file or model that cannot
work is a message and exit status 2 (`--debug` adds the traceback). The engines and every other process a run
starts end with it, however it ends (runtime/lifecycle.py).
"""

from __future__ import annotations

if __name__ == "__main__":  # first, while this process is small: nothing the run starts will outlive it
    from runtime.lifecycle import supervise

    supervise()

import json  # noqa: E402
import os  # noqa: E402
import platform  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from dataclasses import MISSING, fields, replace  # noqa: E402
from pathlib import Path  # noqa: E402

from eval.backends import Sampling  # noqa: E402
from eval.config import (BACKEND_SETTINGS, GPU_DEFAULT_MODEL, NO_JUDGE, SMOKE_MODEL, SUITES,  # noqa: E402
                         TOY_CHECKPOINTS, TOY_MODELS, TOY_TASK, EvalConfig, smoke_model_dir)
from eval.forcing import ForcedReplies  # noqa: E402
from eval.loop import EvalLoop, Finished  # noqa: E402
from eval.presets import get_preset, preset_for  # noqa: E402
from eval.report import side_by_side, write_report  # noqa: E402
from eval.rundir import RunDir, merge  # noqa: E402
from eval.suites import Suite, Task, check_settings, load_suite  # noqa: E402
from runtime import cli  # noqa: E402
from runtime.profiles import Budgets  # noqa: E402
from runtime.web_http import WebBudgetReached  # noqa: E402

SMOKE_DEFAULTS = dict(tools="both", force_tool_calls=2, max_tokens=96, max_images=4, max_pixels=0, max_model_len=4096,
                      dtype="float32", max_active=64)
SMOKE_SUITES = {  # what a smoke run of each suite needs besides: a small synthetic suite, a judge, room for schemas
    "synthetic": dict(tasks=["rotated_ocr", "rotation_game"], per_task=4),
    # default's 49 schemas outgrow the tiny model; the extraction prompts need more than 4k tokens
    "tir_bench": dict(judge_model="same", toolset="tir_rotate", max_model_len=16384),
    "vtc_bench": dict(max_model_len=32768),  # the 35 tool schemas take ~14k tokens of the tiny tokenizer
    # judged by the model itself (junk verdicts: retried, then unjudged); the runner's prompt and 17 tool schemas
    "visualtoolbench": dict(judge_model="same", max_model_len=16384),
    "agentic_mme": dict(judge_model="same", max_model_len=16384),
}
TOY_DEFAULTS = dict(preset="qwen2.5-vl", tasks=[TOY_TASK], per_task=100, max_tokens=64, max_images=4, max_pixels=0,
                    max_model_len=4096, dtype="float32", max_active=64)
TOY_FORMS = {"agentic": "on", "direct": "none"}  # shipped checkpoint -> --tools
TOY_BANNER = ("No --model and no GPU: evaluating the shipped toy models (toy Qwen2.5-VL, about 0.9M parameters, "
              "trained from scratch on a CPU by recipes/pilot_rotated_ocr/toy_cpu) on held-out rotated OCR through "
              "the vLLM CPU engine, greedy: the agentic model with the rotate tool (its calls are its own), the "
              "direct model without tools.")
SMOKE_BANNER = (f"No --model and no GPU: evaluating '{SMOKE_MODEL}', a tiny RANDOM-WEIGHT model, on a small suite "
                "through the vLLM CPU engine. Its tool calls are scripted by the harness and its answers are "
                "noise: this run checks the pipeline, not a model.")


def main(argv: list[str] | None = None) -> int:
    """The command line; a setting, a dataset or a run directory the user must fix is a message and status 2."""
    return cli.run(_main, argv)


def _main(argv: list[str]) -> int:
    if argv and argv[0] in ("merge", "report"):
        return _merge_or_report(argv[0], argv[1:])
    if argv and argv[0] == "run_dir":  # where these settings write, resolved as a run resolves it (for scripts)
        print(resolve(parse(argv[1:])).out)
        return 0
    if argv and argv[0] == "rejudge":
        if len(argv) < 2 or argv[1].startswith("--"):
            raise ValueError("usage: python eval/run_vllm.py rejudge RUN_DIR --judge_model M [--judge_base_url URL] "
                             "[--out NEW_DIR]")
        config = parse(argv[2:])
        rejudge(argv[1], {k: getattr(config, k) for k in config.explicit})
        return 0
    config = resolve(parse(argv))
    evaluate_toy_models(config) if config.model == TOY_MODELS else evaluate(config)
    return 0


def parse(argv: list[str]) -> EvalConfig:
    (config,) = cli.parse_trl((EvalConfig,), argv)
    config.explicit = _explicit_fields(argv)
    return config


def _explicit_fields(argv: list[str]) -> set[str]:
    """The settings the user chose, on the command line or in a --config file: defaults that depend on the
    machine or the suite never override them."""
    names = {f.name for f in fields(EvalConfig)}
    given = {a[2:].split("=")[0].replace("-", "_") for a in argv if a.startswith("--")}
    for k, arg in enumerate(argv):
        if arg.startswith("--config=") or (arg == "--config" and k + 1 < len(argv)):
            import yaml

            path = arg.split("=", 1)[1] if "=" in arg else argv[k + 1]
            given |= set((yaml.safe_load(Path(path).read_text()) or {}).keys())
    return names & given


def _changed_fields(config: EvalConfig) -> set[str]:
    """Fields set to something other than their default (a config built in code has no command line)."""
    return {f.name for f in fields(EvalConfig) if getattr(config, f.name) != (
        f.default if f.default_factory is MISSING else f.default_factory())}


def resolve(config: EvalConfig) -> EvalConfig:
    """Fill the defaults that depend on the machine and the model."""
    explicit = getattr(config, "explicit", set()) | _changed_fields(config)
    if config.model is None:
        if _has_gpu():
            config = replace(config, model=GPU_DEFAULT_MODEL)
        elif config.suite == "synthetic":
            config = replace(config, model=TOY_MODELS, **{k: v for k, v in TOY_DEFAULTS.items() if k not in explicit})
            explicit = explicit | set(TOY_DEFAULTS)
        else:
            smoke = {**SMOKE_DEFAULTS, **SMOKE_SUITES.get(config.suite, {})}
            config = replace(config, model=SMOKE_MODEL, **{k: v for k, v in smoke.items() if k not in explicit})
            explicit = explicit | set(smoke)  # the smoke run's settings win over a suite's too
    check_settings(config.suite, explicit)
    unused = [k for k, backend in BACKEND_SETTINGS.items() if k in explicit and config.backend != backend]
    if unused:
        raise ValueError(f"--backend {config.backend} does not use {', '.join('--' + k for k in unused)} (settings of "
                         f"--backend {' / '.join(sorted({BACKEND_SETTINGS[k] for k in unused}))}): drop them or change "
                         "--backend")
    preset = get_preset(config.preset) if config.preset else preset_for(config.model)
    config = replace(config, preset=preset.name,
                     max_tokens=preset.max_tokens if config.max_tokens is None else config.max_tokens,
                     temperature=preset.temperature if config.temperature is None else config.temperature,
                     max_pixels=preset.max_pixels if config.max_pixels is None else config.max_pixels)
    if config.out is None:
        name = re.sub(r"[^A-Za-z0-9._-]+", "-", Path(config.model).name.lower())
        suite = config.suite if config.suite in SUITES else Path(config.suite).stem
        config = replace(config, out=str(Path("runs") / f"{name}-{suite}"))
    config.explicit = explicit
    return config


def evaluate(config: EvalConfig, backend=None) -> list[dict]:
    """Run (or resume) the evaluation; returns this shard's new records. `backend`: one the caller owns (and
    closes), instead of the one the configuration names."""
    if config.model == SMOKE_MODEL:
        print(SMOKE_BANNER, flush=True)
    _check_models(config, backend)
    suite = load_suite(config)
    config = _with_suite_defaults(config, suite)
    if not config.max_tokens and config.backend == "openai" and config.api == "openai":
        raise ValueError("the run's replies have no token cap (--max_tokens 0, the suite's paper sets none), and a "
                         "server of the OpenAI API (--api openai) would cap them at its own default: serve the model "
                         "with vLLM (--api vllm) or give --max_tokens N (the report marks it as a deviation)")
    sampling = Sampling(max_tokens=config.max_tokens or None, temperature=config.temperature, top_p=config.top_p,
                        top_k=config.top_k, presence_penalty=config.presence_penalty)
    if config.backend == "hf" and sampling.presence_penalty:
        raise ValueError(f"the run samples with presence penalty {sampling.presence_penalty:g} (the suite's paper "
                         "uses it) and HF generate has none: use --backend vllm or openai, or --presence_penalty 0")
    preset = get_preset(config.preset)
    profile = suite.profile(replace(preset.profile, toolset=config.toolset) if config.toolset else preset.profile)
    tasks = _shard(suite.tasks[:config.limit] if config.limit else suite.tasks, *config.shard_index)
    run = RunDir(config.out, config.shard_index)
    done = run.open(_saved_config(config, suite), overwrite=config.overwrite)
    _record_skipped(suite, config, run, done)
    work = [(task, mode) for task in tasks for mode in config.modes if (task.id, mode) not in done]
    print(f"{config.out}: {len(tasks)} tasks x {len(config.modes)} mode(s); {len(done)} recorded, "
          f"{len(work)} to run", flush=True)
    budgets_for = None
    if config.backend == "reference":
        from data_gen.sample import reference_budgets

        def budgets_for(task: Task) -> Budgets:
            return reference_budgets(len(task.reference), len(task.images))

        if profile.toolset is None and not profile.code_tool:  # it replays hermes calls to the tasks' own tools
            from data_gen.sample import REFERENCE_PROFILE

            profile = REFERENCE_PROFILE
    else:  # the engine shows at most max_images per prompt: the episode's budget says so to the model
        budgets = replace(profile.budgets, max_images=config.max_images,
                          **{k: getattr(config, k) for k in ("max_turns", "max_tool_calls") if getattr(config, k)})
        profile = replace(profile, budgets=budgets)
    judge_reason = suite.needs_judge()
    if judge_reason and not config.judge_model:
        raise ValueError(f"{judge_reason}: pass --judge_model ('same', or a model with --judge_base_url or run in "
                         "vLLM)")
    if config.judge_model == "same" and config.backend == "reference":
        raise ValueError("--judge_model same needs a model backend; the reference policy cannot judge: name a judge "
                         "model, or serve one with --judge_base_url")
    owned = backend is None
    if owned:
        backend = _backend(config, preset, tasks) if work else None
    records = []
    try:
        if work:
            forced = ForcedReplies(config.force_tool_calls) if config.force_tool_calls else None
            boxes = suite.toolboxes(profile)
            loop = EvalLoop(backend, profile, sampling, boxes, budgets_for, config.max_active, forced, config.seed,
                            start=suite.start, rerun=suite.rerun)
            progress = _Progress(len(work))
            try:
                for finished in loop.run(work):
                    record = make_record(finished, run, config, suite)
                    run.append(record)
                    records.append(record)
                    progress.update(record)
            finally:
                boxes.close()
            progress.close()
        backend = _judge_stage(config, suite, run, tasks, backend, owned)
    except KeyboardInterrupt:
        print(f"\ninterrupted: {len(done) + len(records)} records are saved in {run.records_path}; run the same "
              "command again to resume", file=sys.stderr)
        raise
    except WebBudgetReached as stop:
        print(f"\nstopped: {stop}. {len(done) + len(records)} records are saved in {run.records_path}; the episodes "
              "in flight run again when you resume: raise the cap and run the same command again", file=sys.stderr)
        if config.shard_index[1] == 1 and run.records():
            write_report(run.path, run.records(), _saved_config(config, suite))
            print(f"report (so far): {run.path / 'report.md'}", file=sys.stderr)
        raise
    finally:
        if backend is not None and owned:
            backend.close()
    judged = {(r["id"], r["mode"]): r for r in run.records()}  # the new records, as the judge left them
    records = [judged[r["id"], r["mode"]] for r in records]
    if config.shard_index[1] == 1:
        summary = write_report(run.path, run.records(), _saved_config(config, suite))
        print(f"report: {run.path / 'report.md'}; episodes: {run.path / 'report.html'}")
        _print_headline(summary)
    else:
        run.mark_done()
        print(f"shard {config.shard} done; after every shard: python eval/run_vllm.py merge {config.out}")
    return records


def _check_models(config: EvalConfig, backend) -> None:
    """The models this run will load, before anything loads: a name that is neither a checkpoint folder nor a
    model this machine can fetch would otherwise fail deep in vLLM, after the run directory exists."""
    if backend is None and config.backend in ("vllm", "hf") and config.model != SMOKE_MODEL:
        cli.check_model(config.model)
    if config.judge_model not in (None, NO_JUDGE, "same") and not config.judge_base_url:  # a vLLM engine of its own
        cli.check_model(config.judge_model, "--judge_model")


def _with_suite_defaults(config: EvalConfig, suite: Suite) -> EvalConfig:
    """The settings the suite's paper fixes (its sampling, its image budget) where the run chose none; the
    rest of the sampling settings off. The run directory saves the result."""
    explicit = getattr(config, "explicit", set())
    paper = suite.defaults(config.model, config.preset)
    config = replace(config, **{k: v for k, v in paper.items() if k not in explicit})
    config = replace(config, top_p=1.0 if config.top_p is None else config.top_p,
                     top_k=0 if config.top_k is None else config.top_k,
                     presence_penalty=0.0 if config.presence_penalty is None else config.presence_penalty)
    config.explicit = explicit
    return config


def _record_skipped(suite: Suite, config: EvalConfig, run: RunDir, done: set) -> None:
    """Rows the loader refused are recorded as unscored in every mode (this shard's share of them), unless the run
    takes only the first --limit tasks."""
    skipped = [] if config.limit else _shard(suite.skipped, *config.shard_index)
    for row in skipped:
        for mode in config.modes:
            if (row.id, mode) not in done:
                run.append({"id": row.id, "category": row.category, "mode": mode, "score": None,
                            "score_error": f"not run: {row.reason}", "stop_reason": "skipped", "error": row.reason,
                            "turns": 0, "tool_calls": 0, "model": config.model, "variant": suite.variant_name,
                            "trajectory": None})
    if skipped:
        print(f"{len(skipped)} dataset row(s) could not be loaded; each counts as unscored:\n  "
              + "\n  ".join(f"{row.id}: {row.reason}" for row in skipped[:20])
              + (f"\n  ... {len(skipped) - 20} more in records.jsonl" if len(skipped) > 20 else ""), flush=True)


def make_record(finished: Finished, run: RunDir, config: EvalConfig, suite: Suite) -> dict:
    task = finished.task
    record = {"id": task.id, "category": task.category, "scorer": task.scorer, "mode": finished.mode,
              "question": task.question, "truth": task.answer, "prediction": finished.answer,
              "stop_reason": finished.stop_reason, "error": finished.error, "turns": finished.turns,
              "tool_calls": finished.tool_calls, "reference_calls": task.reference_calls,
              "prompt_tokens": sum(run.prompt_tokens for run in (*finished.earlier, finished)),
              "completion_tokens": sum(run.completion_tokens for run in (*finished.earlier, finished)),
              "latency_s": round(sum(run.latency_s for run in (*finished.earlier, finished)), 3), "model": config.model,
              "profile": finished.trajectory.meta["profile"],
              "trajectory": finished.trajectory.to_dict(run.images)}
    if finished.earlier:  # the benchmark ran the task again; the record is the last run's, the earlier are kept
        record["earlier_runs"] = [{"stop_reason": e.stop_reason, "answer": e.answer, "turns": e.turns,
                                   "tool_calls": e.tool_calls, "trajectory": e.trajectory.to_dict(run.images)}
                                  for e in finished.earlier]
    record.update(suite.score(task, finished))
    return record


def _judge_stage(config: EvalConfig, suite: Suite, run: RunDir, tasks: list[Task], backend, owned: bool = True):
    """Let the judge look at this shard's records that wait for it and have no judgment yet (also those of an
    earlier, interrupted run). Returns the backend the caller must close (if it owns it)."""
    judged = run.judged()
    pending = [r for r in run.records() if r.get("judge_pending") and (r["id"], r["mode"]) not in judged]
    by_id = {task.id: task for task in tasks}
    items = [(by_id[r["id"]], r) for r in pending if r["id"] in by_id]
    if not items:
        return backend
    if config.judge_model in (None, NO_JUDGE):
        return backend  # the suite scores without a judge where it can; the rest stays unscored
    print(f"judging {len(items)} record(s) with {config.judge_model}", flush=True)
    if config.judge_model == "same" and backend is not None:
        judge_backend, started = backend, False
    elif config.judge_model == "same":  # a resumed run whose episodes were all recorded
        judge_backend, started = _backend(config, get_preset(config.preset), tasks), True
    elif config.judge_base_url:
        from eval.backends.openai_http import OpenAIHTTPBackend

        judge_backend, started = OpenAIHTTPBackend(config.judge_base_url, config.judge_model,
                                                   api_key=os.environ.get(config.api_key_env),
                                                   api=config.judge_api), True
    else:
        from eval.backends.vllm_engine import VLLMEngineBackend, available_memory_share

        if backend is not None and owned:  # free the evaluated model's memory for the judge's engine
            backend.close()
            backend = None
        share = available_memory_share(config.gpu_memory_utilization)
        judge_backend, started = VLLMEngineBackend(config.judge_model, max_model_len=config.max_model_len,
                                                   tensor_parallel_size=config.tensor_parallel_size,
                                                   gpu_memory_utilization=share), True
    try:
        for record, fields in suite.judge(items, judge_backend, config.judge_model, config.judge_retries):
            run.append_judgment(record, fields)
    finally:
        if started:
            judge_backend.close()
    return backend


REJUDGE_SETTINGS = ("judge_model", "judge_base_url", "judge_api", "judge_retries", "api_key_env", "out",
                    "overwrite", "max_model_len", "tensor_parallel_size", "gpu_memory_utilization", "dtype")


def rejudge(source: str | Path, settings: dict, backend=None) -> list[dict]:
    """Judge a finished run again with another judge, without running the model again: its records and images go
    to a new run directory (default: RUN_DIR-judged-<judge>), where every record that waited for a judge is judged
    anew and the report is written; the original run keeps its judgments. Resumable like a run. `backend`: one the
    caller owns, for --judge_model same."""
    source = Path(source)
    if not (source / "config.json").is_file() or not (source / "records.jsonl").is_file():
        shards = " (merge its shards first: python eval/run_vllm.py merge RUN_DIR)" if any(
            source.glob("records.shard-*")) else ""
        raise ValueError(f"{source} is not a finished run directory (config.json and records.jsonl){shards}")
    other = sorted(set(settings) - set(REJUDGE_SETTINGS))
    if other:
        raise ValueError(f"rejudge changes the judge only; {', '.join('--' + k for k in other)} would change the run: "
                         f"choose among {', '.join('--' + k for k in REJUDGE_SETTINGS)}")
    if settings.get("judge_model") in (None, NO_JUDGE):
        raise ValueError("rejudge needs --judge_model: the judge to use instead of the run's")
    saved = json.loads((source / "config.json").read_text())
    names = {f.name for f in fields(EvalConfig)}
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", Path(settings["judge_model"]).name.lower())
    config = EvalConfig(**{**{k: v for k, v in saved.items() if k in names}, "out": f"{source}-judged-{name}",
                           "overwrite": False, **settings})
    if Path(config.out).resolve() == source.resolve():
        raise ValueError("--out must name a new directory: the run keeps its own judgments")
    suite = load_suite(config)
    run = RunDir(config.out)
    run.open(_saved_config(config, suite), overwrite=config.overwrite)
    if not run.records_path.exists():
        for image in (source / "images").glob("*.png"):  # content-addressed: a link is as good as a copy
            if not (run.images / image.name).exists():
                try:
                    os.link(image, run.images / image.name)
                except OSError:
                    shutil.copyfile(image, run.images / image.name)
        partial = run.records_path.with_name("records.jsonl.partial")
        shutil.copyfile(source / "records.jsonl", partial)
        os.replace(partial, run.records_path)
    print(f"{config.out}: judging the records of {source} with {config.judge_model}", flush=True)
    backend = _judge_stage(config, suite, run, suite.tasks, backend, owned=backend is None)
    summary = write_report(run.path, run.records(), _saved_config(config, suite))
    print(f"report: {run.path / 'report.md'}")
    _print_headline(summary)
    return run.records()


def evaluate_toy_models(config: EvalConfig) -> dict:
    """The embedded default without a GPU: each shipped toy model on the same held-out tasks, the agentic one
    with tools and the direct one without, each in its own run under `config.out`, then one report of both
    there (its modes: tools = the agentic model, no_tools = the direct one). Returns that report's summary."""
    print(TOY_BANNER, flush=True)
    records = []
    for form, tools in TOY_FORMS.items():
        part = replace(config, model=str(TOY_CHECKPOINTS / form), tools=tools, out=str(Path(config.out) / form))
        part.explicit = config.explicit | {"model", "tools", "out"}
        evaluate(part)
        records += RunDir(part.out).records()
    saved = dict(config.to_dict(), tools="on (agentic model), none (direct model)",
                 model=", ".join(f"{form}: {TOY_CHECKPOINTS / form}" for form in TOY_FORMS))
    images = [Path(config.out) / form / "images" for form in TOY_FORMS]
    summary = write_report(Path(config.out), records, saved, images)
    report = Path(config.out) / "report.md"
    report.write_text(report.read_text(encoding="utf-8") + _toy_examples(records), encoding="utf-8")
    print(f"report (both models): {report}")
    print(f"every episode, side by side (open in a browser): {report.with_name('report.html')}{side_by_side(records)}")
    _print_headline(summary)
    return summary


def _toy_examples(records: list[dict], count: int = 8) -> str:
    """The first episodes of both toy models side by side: the agentic model's own calls and answers."""
    direct = {r["id"]: r for r in records if r["mode"] == "no_tools"}
    lines = ["", "## Episodes, side by side", "", "| task | truth | agentic: its calls | agentic: answer | "
             "direct: answer |", "|---|---|---|---|---|"]
    for record in [r for r in records if r["mode"] == "tools"][:count]:
        calls = [f"{call['function']['name']}({call['function']['arguments']})".replace("|", "\\|")
                 for m in record["trajectory"]["messages"] for call in m.get("tool_calls") or []]
        other = direct.get(record["id"], {})
        lines.append(f"| {record['id']} | {record['truth']} | {'; '.join(calls) or '(none)'} | "
                     f"{record['prediction']} {'✓' if record['score'] else '✗'} | "
                     f"{other.get('prediction', '-')} {'✓' if other.get('score') else '✗'} |")
    return "\n".join(lines) + "\n"


def _shard(tasks: list[Task], index: int, count: int) -> list[Task]:
    return tasks[index::count]


def _backend(config: EvalConfig, preset, tasks: list[Task]):
    model = config.model
    if model == SMOKE_MODEL:
        model = str(_smoke_model(config.max_model_len))
    processor_kwargs = {"max_pixels": config.max_pixels} if config.max_pixels else {}
    if config.backend == "vllm":
        from eval.backends.vllm_engine import VLLMEngineBackend

        return VLLMEngineBackend(model, max_model_len=config.max_model_len, limit_images=config.max_images,
                                 dtype=config.dtype, seed=config.seed,
                                 tensor_parallel_size=config.tensor_parallel_size,
                                 gpu_memory_utilization=config.gpu_memory_utilization,
                                 mm_processor_kwargs=processor_kwargs or None,
                                 forced_replies=config.force_tool_calls > 0)
    if config.backend == "openai":
        from eval.backends.openai_http import OpenAIHTTPBackend
        from runtime.protocols import OpenAIProtocol

        # a protocol that reads calls from the text gets the server's parsed tool calls back as text
        text_replies = not isinstance(preset.profile.protocol, OpenAIProtocol)
        return OpenAIHTTPBackend(config.base_url, model, api_key=os.environ.get(config.api_key_env),
                                 concurrency=config.concurrency, timeout_s=config.timeout_s, retries=config.retries,
                                 send_stop=config.send_stop, text_replies=text_replies, api=config.api)
    if config.backend == "hf":
        from eval.backends.hf_generate import HFGenerateBackend

        return HFGenerateBackend(model, dtype=config.dtype, batch_size=config.batch_size,
                                 processor_kwargs=processor_kwargs, max_model_len=config.max_model_len)
    from eval.backends.reference import ReferenceBackend

    missing = [t.id for t in tasks if t.reference_calls and not t.reference]
    if missing and len(missing) == len(tasks):
        raise ValueError(f"--backend reference replays reference calls; none of the {len(tasks)} task(s) has any")
    if missing:
        print(f"{len(missing)} task(s) have a reference chain length but no reference calls (e.g. {missing[0]!r}): "
              "the reference policy answers them without tools", flush=True)
    return ReferenceBackend(tasks)


def _smoke_model(max_model_len: int) -> Path:
    """The tiny smoke model, built once; built again when the cached one is too short for the run (a copy
    cached by an older tirlab)."""
    directory = smoke_model_dir()
    config = directory / "config.json"
    if not config.exists() or _positions(json.loads(config.read_text())) < max_model_len:
        from runtime.tiny_model import build_model

        print(f"building the tiny random-weight smoke model in {directory}", flush=True)
        build_model("qwen2_5_vl", directory)
    return directory


def _positions(model_config: dict) -> int:
    return (model_config.get("text_config") or model_config).get("max_position_embeddings", 0)


def _saved_config(config: EvalConfig, suite: Suite) -> dict:
    import torch
    import transformers

    saved = config.to_dict()
    saved["protocol"] = suite.describe()
    paper = suite.defaults(config.model, config.preset)
    if paper:  # what the suite's paper fixes for this model, and where this run differs from it
        saved["paper_protocol"] = paper
        saved["deviations"] = {k: {"run": saved[k], "paper": v} for k, v in paper.items() if saved[k] != v}
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
    write_report(run.path, records, config, [Path(path) / "images" for path in paths])
    print(f"{len(records)} records; report: {run.path / 'report.md'}; episodes: {run.path / 'report.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
