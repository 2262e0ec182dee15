"""The evaluation's configuration: one dataclass, set by flags or a YAML file (`--config recipes/....yaml`),
resolved into concrete values and saved in the run directory, so a run can be resumed and reproduced."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

GPU_DEFAULT_MODEL = "Qwen/Qwen2.5-VL-7B-Instruct"
SMOKE_MODEL = "tiny-random-qwen2.5-vl"  # built locally by runtime.tiny_model: random weights, CPU smoke runs
# The embedded default without a GPU: two toy Qwen2.5-VL models (about 0.9M parameters) trained from scratch on
# a CPU by recipes/pilot_rotated_ocr/toy_cpu (its README: the command that reproduces them and their hashes),
# one with the rotate tool (agentic) and one without (direct), on held-out rotated OCR.
TOY_MODELS = "toy-rotated-ocr"
TOY_CHECKPOINTS = Path(__file__).resolve().parents[1] / "recipes" / "pilot_rotated_ocr" / "toy_cpu" / "checkpoints"
TOY_TASK = "rotated_ocr:angles=quarter,render=aligned"  # the task spec they were trained on (held-out seeds)
BACKENDS = ("vllm", "openai", "hf", "reference")
SUITES = ("synthetic", "tir_bench", "vtc_bench", "visualtoolbench", "agentic_mme")
# settings that only one backend reads (a run that sets one for another backend is refused, not ignored)
BACKEND_SETTINGS = {"base_url": "openai", "concurrency": "openai", "timeout_s": "openai", "retries": "openai",
                    "send_stop": "openai", "api": "openai", "batch_size": "hf"}
SCORING = ("official", "strict")
WEB_MODES = ("replay", "live", "offline")
NO_JUDGE = "none"  # --judge_model none: no LLM judge; what needs one stays unscored (TIR-Bench reads answers by rule)
TOOL_MODES = {"on": ("tools",), "none": ("no_tools",), "both": ("tools", "no_tools")}


def _help(text: str, **kwargs):
    return field(metadata={"help": text}, **kwargs)


@dataclass
class EvalConfig:
    model: str | None = _help(f"Hub name or local checkpoint. Default: {GPU_DEFAULT_MODEL} on a GPU machine. "
                              "Without one: the synthetic suite evaluates the shipped toy models (agentic with "
                              "tools, direct without) on held-out rotated OCR; another suite runs a smoke test of "
                              f"'{SMOKE_MODEL}', a tiny random-weight model built locally.", default=None)
    preset: str | None = _help("Model preset (eval/presets.py): qwen2.5-vl, qwen3-vl, deepeyes, thyme, generic, "
                               "openai. Default: from the model's name or config.", default=None)
    backend: str = _help(f"One of {BACKENDS}: vLLM in this process, an OpenAI-compatible server, HF generate, or "
                         "a replay of each task's reference trajectory.", default="vllm")
    base_url: str | None = _help("Server URL for --backend openai, e.g. http://127.0.0.1:8000/v1.", default=None)
    api_key_env: str = _help("Environment variable holding the API key for --backend openai.",
                             default="OPENAI_API_KEY")
    suite: str = _help(f"One of {SUITES}, or a tasks .jsonl file. 'synthetic': the data_gen tasks on held-out "
                       "seeds; the others are the public benchmarks (eval/benchmarks/<name>/README.md).",
                       default="synthetic")
    data_dir: str | None = _help("A benchmark's data as a local folder (the hub layout, for clusters without hub "
                                 "access); default: downloaded from the hub.", default=None)
    revision: str | None = _help("The benchmark dataset's hub revision (commit, tag or branch).", default=None)
    scoring: str = _help("Benchmark suites: 'official' (the benchmark's own scoring, quirks included) or 'strict' "
                         "(tirlab's scorers). Both are recorded; this one is the headline.", default="official")
    prompt_variant: str | None = _help("A benchmark's published prompt variant (vtc_bench: strong, weak, strong_chain, "
                                       "weak_chain; visualtoolbench: strong, weak; tir_bench --study "
                                       "function_calling: plain, hint, options, all when omitted).", default=None)
    track: str | None = _help("vtc_bench: 'interface' (the opencv_* tools) or 'code' (model-written Python); "
                              "agentic_mme: 'atm' (atomic tools) or 'gen' (model-written Python); "
                              "tir_bench --study function_calling: 'function' or 'code' (both when omitted).",
                              default=None)
    ablation: str | None = _help("A paper's ablation setting, by the suite's own names (agentic_mme: image_only, "
                                 "search_only (Table 4), visual_cues, stepwise_guidance (Table 5); visualtoolbench: "
                                 "no_vision_tools (Figure 7)); each suite's README lists its values.", default=None)
    study: str | None = _help("tir_bench: 'function_calling', the rotation-game study of the paper's section 4.4.",
                              default=None)
    critical: str | None = _help("visualtoolbench: which rubrics a task must meet to pass: 'weight' (weight >= 4, "
                                 "the benchmark's own rule; the default) or 'flag' (the rubric's critical field).",
                                 default=None)
    web: str | None = _help("Search, page and weather tools: 'replay' (recorded answers: the suite's, the run's own "
                            "and --web_replay), 'live' (replay, else the benchmark's own providers over the network, "
                            "keys from the environment, every reply recorded in the run directory) or 'offline' "
                            "(every call answers 'unavailable', counted in the report). Default: replay.",
                            default=None)
    web_replay: list[str] = _help("More recordings of web answers (.jsonl), e.g. another run's web_record.jsonl.",
                                  default_factory=list)
    web_record: str | None = _help("--web live: where new answers are recorded (default: web_record.jsonl in the run "
                                   "directory).", default=None)
    web_cache: str | None = _help("--web live: the provider responses shared by every run, so a query is paid for "
                                  "once ('none': no cache). Default: $TIRLAB_WEB_CACHE, else web/ in tirlab's cache "
                                  "($TIRLAB_CACHE, ~/.cache/tirlab).",
                                  default=None)
    web_max_calls: int | None = _help("--web live: stop the run (resumable) before the provider request that would "
                                      "pass this many in the run (every try counts).", default=None)
    web_max_cost: float | None = _help("--web live: stop the run (resumable) before the estimated provider cost in "
                                       "US dollars would pass this (prices: docs/web.md).", default=None)
    web_timeout_s: float | None = _help("--web live: a provider request's read timeout in seconds. Default: each "
                                        "runner's own (15 s, 10 s or 45 s).", default=None)
    tasks: list[str] = _help("Synthetic suite: which data_gen tasks (default: all).", default_factory=list)
    per_task: int = _help("Synthetic suite: samples per task.", default=8)
    difficulty: str = _help("Synthetic suite: easy, medium or hard.", default="medium")
    limit: int | None = _help("Evaluate only the first N tasks of the suite.", default=None)
    toolset: str | None = _help("The tool set offered in the tools mode (tools/toolsets/), e.g. agentic_mme for "
                                "fewer schemas than default's 49 (default: the preset's own, else the task's); "
                                "--suite visualtoolbench: visualtoolbench, the paper's atomic vision tools.",
                                default=None)
    tools: str = _help("'on', 'none' (the same tasks without tools) or 'both' (side by side in one report).",
                       default="on")
    out: str | None = _help("Run directory (default: runs/<model>-<suite>). An existing run with the same "
                            "configuration is resumed.", default=None)
    overwrite: bool = _help("Start over in an existing run directory (with --shard: that shard's own files and "
                            "those of any other split; the other shards of its split are kept).", default=False)
    shard: str = _help("Evaluate shard i of n ('i/n', 0-based); merge with `run_vllm.py merge RUN_DIR`.",
                       default="0/1")
    seed: int = _help("Sampling seed (each turn's seed derives from it, the task and the turn).", default=0)
    max_tokens: int | None = _help("Tokens per reply; 0: no cap, up to --max_model_len (default: what the "
                                   "suite's paper used for the model, else the preset's).", default=None)
    temperature: float | None = _help("Sampling temperature (default: the preset's, greedy).", default=None)
    top_p: float | None = _help("Nucleus sampling (default: the suite's, else 1).", default=None)
    top_k: int | None = _help("Top-k sampling (0: off; default: the suite's, else off).", default=None)
    presence_penalty: float | None = _help("Presence penalty (default: the suite's, else 0).", default=None)
    max_turns: int | None = _help("Model replies per episode (default: the profile's, or the benchmark's; "
                                  "visualtoolbench's runner counts its own rounds and refuses it).", default=None)
    max_tool_calls: int | None = _help("Tool calls per episode (default: the profile's, or the benchmark's; not "
                                       "visualtoolbench).", default=None)
    max_images: int = _help("Images per prompt, inputs and tool outputs (the engine's per-prompt limit).",
                            default=16)
    max_pixels: int | None = _help("Largest image the processor feeds the model, in pixels; 0: the checkpoint "
                                   "processor's own (default: what the suite's paper used, else the preset's).",
                                   default=None)
    force_tool_calls: int = _help("Script each episode's first N replies as a tool call drawn from the tool's "
                                  "schema, then an answer (eval/forcing.py): for random-weight smoke models only.",
                                  default=0)
    max_active: int = _help("Episodes in flight at once.", default=256)
    max_model_len: int = _help("vLLM: context length.", default=32768)
    tensor_parallel_size: int = _help("vLLM: GPUs per engine (tensor parallel).", default=1)
    gpu_memory_utilization: float = _help("vLLM: share of GPU memory for weights and KV cache.", default=0.9)
    dtype: str = _help("Model dtype (auto, bfloat16, float32).", default="auto")
    concurrency: int = _help("--backend openai: requests in flight at once.", default=32)
    timeout_s: float = _help("--backend openai: seconds per request before a retry.", default=600.0)
    retries: int = _help("--backend openai: retries of a failed request.", default=4)
    send_stop: bool = _help("--backend openai: send the protocol's stop strings (transformers serve 5.19 fails "
                            "on them for vision models: --send_stop false).", default=True)
    api: str = _help("--backend openai: what the server understands. 'vllm' (vLLM's server): every sampling "
                     "field is sent, vLLM's own (top_k, min_p, repetition_penalty, frequency_penalty) included, so "
                     "the server fills none from the checkpoint's generation_config.json and samples as --backend "
                     "vllm does; 'openai' (transformers serve, OpenAI, other strict servers): the OpenAI API's fields "
                     "only, and a run that needs vLLM's (--top_k, structured outputs) is refused.", default="vllm")
    batch_size: int = _help("--backend hf: prompts per generate call.", default=8)
    judge_model: str | None = _help("The LLM judge (tasks scored by 'judge', TIR-Bench's answer extraction, "
                                    "VTC-Bench's judge): 'same' (the evaluated model's backend) or a model, served "
                                    "by --judge_base_url or else started in vLLM after the run.", default=None)
    judge_retries: int = _help("Attempts per judge request that fails or cannot be read, before its item counts "
                               "as unscored.", default=3)
    judge_base_url: str | None = _help("OpenAI-compatible server of the judge model.", default=None)
    judge_api: str = _help("What the --judge_base_url server understands, as --api: 'openai' (OpenAI and other "
                           "strict servers) or 'vllm' (a vLLM server: every sampling field sent, none filled from "
                           "the judge checkpoint's generation_config.json).", default="openai")

    def __post_init__(self):
        if isinstance(self.tools, bool):  # YAML reads a bare `tools: on` / `tools: none`-like `off` as a boolean
            self.tools = "on" if self.tools else "none"
        problems = []
        if self.backend not in BACKENDS:
            problems.append(f"--backend must be one of {BACKENDS}, got {self.backend!r}")
        if self.tools not in TOOL_MODES:
            problems.append(f"--tools must be one of {list(TOOL_MODES)}, got {self.tools!r}")
        for name in ("api", "judge_api"):
            if getattr(self, name) not in ("vllm", "openai"):
                problems.append(f"--{name} must be 'vllm' or 'openai' (what the server understands), got "
                                f"{getattr(self, name)!r}")
        if self.backend == "openai" and not self.base_url:
            problems.append("--backend openai needs --base_url (e.g. http://127.0.0.1:8000/v1)")
        if self.suite not in SUITES and not Path(self.suite).is_file():
            problems.append(f"--suite must be one of {SUITES} or a tasks .jsonl file; {self.suite!r} is neither")
        if self.toolset is not None:
            from tools.toolsets import TOOLSETS

            if self.toolset not in TOOLSETS:
                problems.append(f"--toolset must be one of {sorted(TOOLSETS)}, got {self.toolset!r}")
        if self.critical not in (None, "weight", "flag"):
            problems.append(f"--critical must be 'weight' or 'flag', got {self.critical!r}")
        if self.web not in (None, *WEB_MODES):
            problems.append(f"--web must be one of {WEB_MODES}, got {self.web!r}")
        live_only = [name for name in ("web_record", "web_cache", "web_max_calls", "web_max_cost", "web_timeout_s")
                     if getattr(self, name) is not None]
        if live_only and self.web != "live":
            problems.append(f"{', '.join('--' + name for name in live_only)}: only read by --web live")
        problems += [f"--{name} must be positive, got {getattr(self, name)}" for name in
                     ("web_max_calls", "web_max_cost", "web_timeout_s") if (getattr(self, name) or 0) < 0
                     or getattr(self, name) == 0]
        problems += [f"--web_replay {path}: no such file" for path in self.web_replay if not Path(path).is_file()]
        if self.scoring not in SCORING:
            problems.append(f"--scoring must be one of {SCORING}, got {self.scoring!r}")
        try:
            self.shard_index
        except ValueError as err:
            problems.append(str(err))
        if self.force_tool_calls and self.backend != "vllm":
            problems.append("--force_tool_calls needs --backend vllm (it scripts replies in the engine)")
        if problems:
            raise ValueError("bad evaluation config:\n  " + "\n  ".join(problems))

    @property
    def shard_index(self) -> tuple[int, int]:
        try:
            index, count = (int(x) for x in self.shard.split("/"))
        except ValueError:
            raise ValueError(f"--shard must be 'i/n' with 0 <= i < n, got {self.shard!r}") from None
        if not 0 <= index < count:
            raise ValueError(f"--shard must be 'i/n' with 0 <= i < n, got {self.shard!r}")
        return index, count

    @property
    def modes(self) -> tuple[str, ...]:
        return TOOL_MODES[self.tools]

    def to_dict(self) -> dict:
        return asdict(self)


def cache_dir() -> Path:
    """tirlab's cache: the smoke model, unpacked benchmark images (TIRLAB_CACHE, default ~/.cache/tirlab)."""
    return Path(os.environ.get("TIRLAB_CACHE", Path.home() / ".cache" / "tirlab"))


def smoke_model_dir() -> Path:
    """Where the tiny random-weight smoke model is built (once) and cached."""
    return cache_dir() / SMOKE_MODEL
