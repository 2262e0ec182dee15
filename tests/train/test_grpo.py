"""train/grpo.py: real GRPOTrainer steps whose rollouts are our episodes, on the shipped toy agentic model (it calls
`rotate` by itself) and on a tiny Qwen3-VL whose replies are scripted. The images tools returned are in the
training forward pass, tool results are out of the loss, each reward term is the evaluation's, a collapse of tool
use is caught, and a crashed run resumes with the same data order."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from transformers import TrainerCallback

from data_gen.make import main as make_data
from eval.config import TOY_CHECKPOINTS
from runtime.tiny_model import build_model
from train.grpo import build_trainer, main, parse
from train.rewards import accuracy, format, tool
from train.rl_curves import curves, plot
from train.rollout import Generated, pil

ROOT = Path(__file__).resolve().parents[2]
CALL = '<tool_call>\n{"name": "rotate", "arguments": {"degree": 180}}\n</tool_call>'


@pytest.fixture(scope="module")
def rl_data(tmp_path_factory):
    out = tmp_path_factory.mktemp("rl")
    make_data(["rl", "--task", "rotated_ocr", "--n", "16", "--n-test", "2", "--option", "angles=quarter",
               "--option", "render=aligned", "--seed", "500", "--out", str(out), "--workers", "1"])
    return out


def _args(data, model, out, *extra) -> list[str]:
    return ["--model_name_or_path", str(model), "--dataset_name", str(data), "--toolset", "tir_rotate",
            "--output_dir", str(out), "--use_cpu", "--dtype", "float32", "--max_steps", "1",
            "--per_device_train_batch_size", "4", "--num_generations", "2", "--max_completion_length", "256",
            "--max_tokens_per_turn", "64", "--max_images", "4", "--learning_rate", "1e-4", "--seed", "0",
            "--logging_steps", "1", "--report_to", "none", "--save_strategy", "no", "--disable_tqdm", "true",
            "--save_rollouts_steps", "1", "--save_rollouts_count", "64", *extra]


class Scripted:
    """Replies given as text, the same for every episode in a round: a random-weight model cannot call tools."""

    def __init__(self, tokenizer, replies: list[str]):
        self.tokenizer, self.replies, self.round = tokenizer, replies, 0

    def __call__(self, contexts, limits):
        reply = self.replies[min(self.round, len(self.replies) - 1)]
        self.round += 1
        ids = self.tokenizer.encode(reply, add_special_tokens=False) + [self.tokenizer.eos_token_id]
        return [Generated(ids, ended=True) for _ in contexts]

    def finish(self):
        pass


class Batches:
    """What the training forward pass and the loss received."""

    def __init__(self, trainer):
        self.forward, self.loss = [], []
        model = trainer.model

        def hook(module, args, kwargs):
            if torch.is_grad_enabled():  # the pass the loss is taken from, not the reference/old-logprob ones
                self.forward.append({k: v.detach().clone() for k, v in kwargs.items() if torch.is_tensor(v)})

        model.register_forward_pre_hook(hook, with_kwargs=True)
        compute_loss = trainer._compute_loss

        def recording(model, inputs):
            self.loss.append({k: v.detach().clone() for k, v in inputs.items() if torch.is_tensor(v)})
            return compute_loss(model, inputs)

        trainer._compute_loss = recording


def _trainer(rl_data, model, out, *extra):
    return build_trainer(*parse(_args(rl_data, model, out, *extra)))[0]


@pytest.fixture(scope="module", params=["qwen2_5_vl", "qwen3_vl"])
def trained(request, rl_data, tmp_path_factory):
    """One GRPO step: the toy agentic Qwen2.5-VL samples its own calls; the tiny Qwen3-VL's replies are scripted."""
    out = tmp_path_factory.mktemp("grpo")
    if request.param == "qwen2_5_vl":
        trainer = _trainer(rl_data, TOY_CHECKPOINTS / "agentic", out)
    else:
        model = build_model("qwen3_vl", out / "model")
        trainer = _trainer(rl_data, model, out / "run", "--preset", "qwen3-vl")
        trainer.rollouts.generator = Scripted(trainer.processing_class.tokenizer, [CALL, "<answer>word</answer>"])
    batches = Batches(trainer)
    trainer.train()
    return trainer, batches


def _in_batch_order(sequences: list[list[int]], episodes) -> list:
    """The episodes in the order of the batch's rows (TRL shuffles a generation batch into its steps)."""
    left = list(episodes)
    order = []
    for ids in sequences:
        match = next(pair for pair in left if pair[1].prompt_ids + pair[1].completion_ids[:pair[1].model_end] == ids)
        left.remove(match)
        order.append(match)
    return order


def test_every_image_of_every_episode_is_in_the_training_forward_pass(trained):
    trainer, batches = trained
    processor = trainer.processing_class
    (forward,) = batches.forward
    rows = [ids[mask.bool()].tolist() for ids, mask in zip(forward["input_ids"], forward["attention_mask"])]
    episodes = _in_batch_order(rows, trainer.rollouts.last)
    assert all(len(episode.trajectory.images) >= 2 for episode, _ in episodes), "each episode got a tool image"
    images = [pil(image) for episode, _ in episodes for image in episode.trajectory.images]
    expected = processor.image_processor(images=images, return_tensors="pt")
    assert torch.equal(forward["image_grid_thw"], expected["image_grid_thw"])
    assert torch.equal(forward["pixel_values"], expected["pixel_values"])  # the tools' pixels, not a copy of the input
    merge = processor.image_processor.merge_size ** 2
    tokens = (forward["input_ids"] == processor.image_token_id).sum(dim=1).tolist()
    per_episode = [sum(int(grid.prod()) // merge for grid in processor.image_processor(
        images=[pil(i) for i in episode.trajectory.images], return_tensors="pt")["image_grid_thw"])
        for episode, _ in episodes]
    assert tokens == per_episode
    assert torch.equal(forward["mm_token_type_ids"].bool(), forward["input_ids"] == processor.image_token_id)


def test_tool_results_are_out_of_the_loss_and_the_model_tokens_in(trained):
    trainer, batches = trained
    tokenizer = trainer.processing_class.tokenizer
    (loss,) = batches.loss
    completions = [ids[mask.bool()].tolist() for ids, mask in zip(loss["completion_ids"], loss["completion_mask"])]
    prompts = [ids[mask.bool()].tolist() for ids, mask in zip(loss["prompt_ids"], loss["prompt_mask"])]
    episodes = _in_batch_order([p + c for p, c in zip(prompts, completions)], trainer.rollouts.last)
    for row, (ids, (_, record)) in enumerate(zip(completions, episodes)):
        mask = loss["tool_mask"][row][:len(ids)].tolist()
        assert mask == record.env_mask[:record.model_end]
        model_text = tokenizer.decode([t for t, m in zip(ids, mask) if m])
        tool_text = tokenizer.decode([t for t, m in zip(ids, mask) if not m])
        assert "rotate" in model_text and "<answer>" in model_text and "<|image_pad|>" not in model_text
        assert "<|image_pad|>" in tool_text and "<answer>" not in tool_text and "rotate" not in tool_text


def test_each_reward_term_is_logged_and_rollouts_are_saved_as_records(trained):
    from eval.report import write_report

    trainer, _ = trained
    logged = trainer.state.log_history[0]
    for key in ("rewards/accuracy/mean", "rewards/format/mean", "rewards/tool/mean", "tools/call_rate",
                "tools/calls_per_episode", "tools/success_rate", "episodes/answer_rate", "episodes/turns",
                "episodes/response_tokens", "stop/answer"):
        assert key in logged, key
    assert logged["tools/call_rate"] == 1.0 and logged["tools/calls_per_episode"] == 1.0
    folder = Path(trainer.args.output_dir) / "rollouts" / "step-000000"
    records = [json.loads(line) for line in (folder / "records.jsonl").read_text().splitlines()]
    assert len(records) == len(trainer.rollouts.last)
    for record, (episode, _) in zip(records, trainer.rollouts.last):
        assert record["prediction"] == episode.answer and record["score"] == record["rewards"]["accuracy"]
        weights = trainer.args.reward_weights
        assert record["reward"] == pytest.approx(sum(w * record["rewards"][k]
                                                     for w, k in zip(weights, ("accuracy", "format", "tool"))))
    summary = write_report(folder, records)
    overall = summary["modes"]["tools"]["overall"]
    assert overall["n"] == len(records)
    assert overall["accuracy"] == pytest.approx(sum(r["score"] for r in records) / len(records))
    assert (folder / "report.md").is_file()
    # the rollout viewer: every saved step's episodes, with their reward terms and the tool's image
    page = folder.parent / "viewer.html"
    index = json.loads(page.read_text().split('id="tirlab-index">')[1].split("</script>")[0])
    assert [(row["id"], row["step"], row["rew"]) for row in index["rows"]] == \
        [(r["id"], 0, r["reward"]) for r in records]
    chunk = (folder.parent / "viewer_files" / "chunks" / "00000.js").read_text()
    assert '"rewards": {"accuracy"' in chunk and "step-000000/images/" in chunk


def _episode(answer="", answered=True, calls=0, errors=0, malformed=0):
    return {"answer": answer, "answered": answered, "tool_calls": calls, "tool_errors": errors,
            "malformed": malformed}


def test_reward_terms_follow_the_scorer_and_deepeyes():
    episodes = [_episode("wan", calls=1), _episode("wan"), _episode("van", calls=1),
                _episode("", answered=False, calls=1), _episode("wan", calls=2, errors=2),
                _episode("wan", calls=2, errors=1, malformed=1)]
    truth, scorers = ["wan"] * len(episodes), ["text_match"] * len(episodes)
    assert accuracy(None, truth, scorers, episodes) == [1.0, 1.0, 0.0, 0.0, 1.0, 1.0]
    assert format(None, episodes) == [0.0, 0.0, 0.0, -1.0, 0.0, -1.0]
    assert tool(None, truth, scorers, episodes) == [1.0, 0.0, 0.0, 0.0, 0.0, 1.0]
    assert accuracy(None, ["3.5"], ["numeric(abs=0.1)"], [_episode("about 3.45")]) == [1.0]
    # a truth the scorer cannot read leaves the episode unscored, as in evaluation, not the run crashed
    assert accuracy(None, ["not json"], ["json_list"], [_episode("[1]", calls=1)]) == [None]
    assert tool(None, ["not json"], ["json_list"], [_episode("[1]", calls=1)]) == [None]


def test_presets_whose_replies_end_on_stop_strings_are_refused(rl_data, tmp_path):
    with pytest.raises(ValueError, match="preset 'thyme': its replies end on"):
        build_trainer(*parse(_args(rl_data, TOY_CHECKPOINTS / "agentic", tmp_path, "--preset", "thyme")))


def test_a_collapse_of_tool_use_warns_and_can_stop_training(rl_data, tmp_path):
    out = tmp_path / "run"
    args = _args(rl_data, TOY_CHECKPOINTS / "direct", out, "--max_steps", "6", "--tool_call_rate_floor", "0.5",
                 "--tool_collapse_steps", "2", "--stop_on_tool_collapse", "true", "--save_rollouts_steps", "0")
    with pytest.warns(UserWarning, match="tool use collapsed: the tool-call rate has been below 50% for 2"):
        main(*parse(args))
    record = json.loads((out / "tirlab_grpo.json").read_text())
    assert record["tool_collapse"] is True and record["global_step"] == 2
    assert (out / "model.safetensors").is_file()
    series = curves(out)
    assert [value for _, value in series["tools/call_rate"]] == [0.0, 0.0]
    assert [value for _, value in series["rewards/tool/mean"]] == [0.0, 0.0]
    plot(series, out / "curves.png", "collapse")
    assert (out / "curves.png").stat().st_size > 0


class Crash(TrainerCallback):
    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == 2:
            raise KeyboardInterrupt("simulated crash")


def _order(out: Path) -> dict[str, list[str]]:
    return {folder.name: [json.loads(line)["id"] for line in (folder / "records.jsonl").read_text().splitlines()]
            for folder in sorted((out / "rollouts").glob("step-*"))}


def test_a_crashed_run_resumes_from_its_checkpoint_with_the_same_data_order(rl_data, tmp_path):
    steps = ["--max_steps", "4", "--save_strategy", "steps", "--save_steps", "1"]
    main(*parse(_args(rl_data, TOY_CHECKPOINTS / "agentic", tmp_path / "whole", *steps)))
    crashed = tmp_path / "crashed"
    trainer, checkpoint = build_trainer(*parse(_args(rl_data, TOY_CHECKPOINTS / "agentic", crashed, *steps)))
    assert checkpoint is None
    trainer.add_callback(Crash())
    with pytest.raises(KeyboardInterrupt):
        trainer.train()
    trainer, checkpoint = build_trainer(*parse(_args(rl_data, TOY_CHECKPOINTS / "agentic", crashed, *steps)))
    assert checkpoint is not None and checkpoint.endswith("checkpoint-1")
    trainer.train(resume_from_checkpoint=checkpoint)
    assert trainer.state.global_step == 4
    assert _order(crashed) == _order(tmp_path / "whole")
    assert len(_order(crashed)) == 4


def test_help_lists_every_setting():
    from dataclasses import fields

    from train.config import GRPOScriptArguments, ToolGRPOConfig

    shown = subprocess.run([sys.executable, "train/grpo.py", "--help"], cwd=ROOT, capture_output=True, text=True,
                           timeout=300).stdout
    names = {f.name for cls in (GRPOScriptArguments, ToolGRPOConfig) for f in fields(cls) if f.init}
    assert names and not [name for name in names if f"--{name}" not in shown]


@pytest.mark.parametrize("extra, message", [
    (["--reward_weights", "1", "2"], "reward_weights: one weight per reward term ['accuracy', 'format', 'tool']"),
    (["--toolset", "nope"], "nope"),
    (["--tool_call_rate_floor", "2"], "tool_call_rate_floor must be in [0, 1]"),
])
def test_bad_settings_fail_early_naming_the_key(rl_data, tmp_path, extra, message):
    with pytest.raises(ValueError, match=None) as err:
        build_trainer(*parse(_args(rl_data, TOY_CHECKPOINTS / "agentic", tmp_path, *extra)))
    assert message in str(err.value)


def test_the_recipes_parse_into_complete_runs():
    gpu = ROOT / "recipes" / "grpo_rotated_ocr" / "qwen2_5_vl_7b" / "grpo.yaml"
    script_args, args, model_args = parse(["--config", str(gpu), "--use_cpu", "--bf16", "false"])
    assert args.use_vllm and args.vllm_mode == "colocate" and not args.vllm_enable_sleep_mode
    assert args.preset == "qwen2.5-vl" and args.toolset == "tir_rotate" and args.reward_weights == [0.8, 0.2, 1.2]
    assert args.max_pixels == 1280 * 28 * 28 and args.gradient_checkpointing and args.save_strategy == "steps"
    toy = ROOT / "recipes" / "grpo_rotated_ocr" / "toy_cpu" / "grpo.yaml"
    script_args, args, model_args = parse(["--config", str(toy)])
    assert ROOT / model_args.model_name_or_path == TOY_CHECKPOINTS / "agentic-weak" and not args.use_vllm
    for launcher in ("grpo.sbatch", "launch.sh"):
        subprocess.run(["bash", "-n", str(ROOT / "recipes" / "slurm" / launcher)], check=True)
    subprocess.run(["bash", "-n", str(toy.parent / "run.sh")], check=True)


def test_the_rollout_benchmark_prints_both_ratios_against_as_many_tokens_without_tools(capsys):
    from train.bench_grpo import MATCHED, SEQUENTIAL
    from train.bench_grpo import main as bench

    result = bench(["--prompts", "2", "--generations", "2", "--rounds", "1"])
    shown = capsys.readouterr().out
    assert "| tools, batched |" in shown and shown.count("x PASS") + shown.count("x miss") == 2
    assert set(result["ratios"]) == {MATCHED, SEQUENTIAL}
    assert all(ratio > 0 for ratio in result["ratios"].values())
    tools, matched = result["results"]["tools, batched"], result["results"][MATCHED]
    assert matched["tokens_per_episode"] == tools["tokens_per_episode"] > 0


def test_exact_lengths_end_each_row_at_its_own_length():
    """The benchmark's baseline without tools: a row's end tokens are masked before its length, forced at it."""
    from transformers import AutoModelForImageTextToText

    from train.bench_grpo import ExactLengths

    model = AutoModelForImageTextToText.from_pretrained(TOY_CHECKPOINTS / "agentic").eval()
    end, lengths = model.generation_config.eos_token_id, [1, 4, 9, 30]
    prompt = torch.tensor([[7, 8, 9]] * len(lengths))
    torch.manual_seed(0)
    output = model.generate(prompt, attention_mask=torch.ones_like(prompt), do_sample=True, max_new_tokens=40,
                            pad_token_id=0, logits_processor=[ExactLengths(lengths, 3, [end], end)])
    assert [output[row, 3:].tolist().index(end) + 1 for row in range(len(lengths))] == lengths


class FakeVLLM:
    """TRL's VLLMGeneration as the generator sees it: records what each generate call was given."""

    def __init__(self):
        self.calls, self.generation_kwargs, self.max_completion_length = [], None, None

    def generate(self, prompts, images, num_generations):
        self.calls.append((len(prompts), self.max_completion_length))
        completions = [[7] * self.max_completion_length for _ in prompts]
        return None, completions, None, None


class FakeAccelerator:
    """Two processes; the other one has `other` (prompts waiting, token limit) in every round."""

    def __init__(self, other):
        self.num_processes, self.device, self.other, self.reductions = 2, "cpu", other, 0

    def reduce(self, tensor, reduction):
        self.reductions += 1
        waiting, limit = self.other.pop(0) if self.other else (0, 1)
        return torch.maximum(tensor, torch.tensor([waiting, limit]))


def _generator(mode: str, tensor_parallel: int, other, sleep: bool = False):
    from types import SimpleNamespace

    from train.rollout import VLLMGenerator

    trainer = SimpleNamespace(vllm_generation=FakeVLLM(), accelerator=FakeAccelerator(other), eos_token_ids=[2],
                              processing_class=SimpleNamespace(tokenizer=SimpleNamespace(eos_token_id=2)),
                              args=SimpleNamespace(vllm_mode=mode, vllm_tensor_parallel_size=tensor_parallel,
                                                   vllm_enable_sleep_mode=sleep))
    return VLLMGenerator(trainer, suppressed=[]), trainer


def test_colocated_vllm_with_tensor_parallel_1_generates_only_its_own_prompts():
    """Each process's colocated engine is its own: no fillers, no shared token limit, no wait for the others."""
    generator, trainer = _generator("colocate", 1, other=[(8, 512)] * 4)
    generated = generator([([1, 2, 3], [])] * 3, [16, 4, 9])
    generator.finish()
    assert trainer.vllm_generation.calls == [(3, 16)] and trainer.accelerator.reductions == 0
    assert [len(g.ids) for g in generated] == [16, 4, 9]


@pytest.mark.parametrize("mode,tensor_parallel,sleep", [("server", 1, False), ("colocate", 2, False),
                                                        ("colocate", 1, True)])
def test_collective_vllm_modes_join_every_round_at_the_busiest_process_size(mode, tensor_parallel, sleep):
    """Server mode and colocated tensor parallelism slice gathered prompts by position, and sleep mode gathers the
    weights at every generate call: every process generates as many prompts as the busiest, at the longest limit,
    until no process has an episode waiting."""
    generator, trainer = _generator(mode, tensor_parallel, other=[(5, 64), (2, 32)], sleep=sleep)
    generated = generator([([1, 2, 3], [])] * 3, [16, 4, 9])
    generator.finish()  # the other process still has a round; then nobody has
    assert trainer.vllm_generation.calls == [(5, 64), (2, 32)]
    assert [len(g.ids) for g in generated] == [16, 4, 9]


def test_the_documented_grpo_server_command_has_every_flag_trls_client_needs():
    """TRL's `build_command` (the `trl vllm-serve` command line) imposes the server settings its client relies
    on; the command docs/rl.md gives must carry each of them, with its value."""
    import re
    import shlex

    from trl.scripts.vllm_serve import ScriptArguments, build_command

    text = (ROOT / "docs" / "rl.md").read_text()
    block = re.search(r"```bash\n\s*(VLLM_SERVER_DEV_MODE=1 vllm serve .*?)```", text, re.S)
    assert block, "docs/rl.md shows no `VLLM_SERVER_DEV_MODE=1 vllm serve` command"
    documented = shlex.split(block.group(1).replace("\\\n", " "))
    built = build_command(ScriptArguments(model="M"))
    imposed = built[built.index("--enable-scale-out"):]  # what TRL adds beyond translating its own arguments
    assert imposed[0] == "--enable-scale-out" and "--weight-transfer-config" in imposed
    for k, flag in enumerate(imposed):
        if flag.startswith("--"):
            assert flag in documented, f"docs/rl.md's server command lacks {flag}"
            value = imposed[k + 1] if k + 1 < len(imposed) and not imposed[k + 1].startswith("--") else None
            if value is not None:
                assert documented[documented.index(flag) + 1] == value, flag
