"""train/sft.py on tiny local Qwen-VL models and a data_gen pilot export: the label mask is exactly the
assistant turns, both modes learn, a stopped run resumes to the same weights, and bad settings fail early."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

from data_gen.make import main as make_data
from runtime.tiny_model import build_model
from train.config import MODES
from train.data import IGNORE, SFTEncoder, check_dataset, collate, load_sft_dataset
from train.sft import main, parse


@pytest.fixture(scope="module")
def pilot(tmp_path_factory):
    out = tmp_path_factory.mktemp("pilot")
    make_data(["pilot", "--n", "24", "--n-test", "4", "--out", str(out), "--workers", "1"])
    return out


@pytest.fixture(scope="module", params=["qwen2_5_vl", "qwen3_vl"])
def model_dir(request, tmp_path_factory):
    return build_model(request.param, tmp_path_factory.mktemp(request.param))


def _processor(model_dir):
    from transformers import AutoProcessor

    return AutoProcessor.from_pretrained(model_dir)


def _run(pilot, model_dir, out, mode, *extra):
    args = ["--model_name_or_path", str(model_dir), "--dataset_name", str(pilot), "--mode", mode,
            "--output_dir", str(out), "--per_device_train_batch_size", "4", "--logging_steps", "1",
            "--report_to", "none", "--use_cpu", "--learning_rate", "3e-3", "--seed", "0", "--save_strategy", "no",
            *extra]
    main(*parse(args))
    if "--save_steps" not in extra:
        return None
    latest = max(out.glob("checkpoint-*"), key=lambda path: int(path.name.split("-")[1]))
    return json.loads((latest / "trainer_state.json").read_text())


@pytest.mark.parametrize("mode", ["agentic", "direct"])
def test_labels_are_exactly_the_assistant_turns(pilot, model_dir, mode):
    processor = _processor(model_dir)
    rows = load_sft_dataset(str(pilot), mode)
    encoder = SFTEncoder(processor)
    tokenizer = processor.tokenizer
    for row in rows.select(range(4)):
        example = encoder(row)
        ids, labels = example["input_ids"], example["labels"]
        # expected, from the token stream alone: after each `<|im_start|>assistant\n`, through `<|im_end|>\n`
        header = tokenizer("<|im_start|>assistant\n", add_special_tokens=False)["input_ids"]
        end = tokenizer.convert_tokens_to_ids("<|im_end|>")
        expected = torch.full_like(ids, IGNORE)
        tokens = ids.tolist()
        for start in range(len(tokens) - len(header)):
            if tokens[start:start + len(header)] == header:
                reply = start + len(header)
                stop = tokens.index(end, reply) + 2  # <|im_end|> and the newline after it
                expected[reply:stop] = ids[reply:stop]
        assert torch.equal(labels, expected)
        # the labelled spans are the assistant messages' text, nothing else
        replies = [m["content"][0]["text"] for m in row["messages"] if m["role"] == "assistant"]
        assert len(replies) == (1 if mode == "direct" else 2)
        spans, current = [], []
        for token, label in zip(tokens, labels.tolist()):
            if label != IGNORE:
                current.append(token)
            elif current:
                spans.append(current)
                current = []
        spans += [current] if current else []
        assert [tokenizer.decode(span) for span in spans] == [reply + "<|im_end|>\n" for reply in replies]
        assert not (labels == processor.image_token_id).any()
        assert (ids == processor.image_token_id).sum() > 0
        assert "<tool_response>" not in tokenizer.decode(labels[labels != IGNORE])


def test_collate_pads_and_concatenates(pilot, model_dir):
    processor = _processor(model_dir)
    encoder = SFTEncoder(processor)
    examples = [encoder(row) for row in load_sft_dataset(str(pilot), "agentic").select(range(3))]
    batch = collate(examples, pad_token_id=processor.tokenizer.pad_token_id)
    longest = max(len(e["input_ids"]) for e in examples)
    assert batch["input_ids"].shape == (3, longest)
    for k, example in enumerate(examples):
        n = len(example["input_ids"])
        assert torch.equal(batch["input_ids"][k, :n], example["input_ids"])
        assert (batch["labels"][k, n:] == IGNORE).all() and (batch["attention_mask"][k, n:] == 0).all()
    assert batch["pixel_values"].shape[0] == sum(e["pixel_values"].shape[0] for e in examples)
    assert torch.equal(batch["image_grid_thw"], torch.cat([e["image_grid_thw"] for e in examples]))


@pytest.mark.parametrize("mode", ["agentic", "direct"])
def test_both_modes_learn(pilot, model_dir, tmp_path, mode):
    state = _run(pilot, model_dir, tmp_path, mode, "--max_steps", "8", "--save_steps", "8", "--save_strategy",
                 "steps")
    losses = [entry["loss"] for entry in state["log_history"] if "loss" in entry]
    assert len(losses) == 8
    assert losses[-1] < losses[0] - 0.1
    assert (tmp_path / "model.safetensors").exists() and (tmp_path / "processor_config.json").exists()


def test_a_stopped_run_resumes_to_the_same_weights(pilot, tmp_path):
    model_dir = build_model("qwen2_5_vl", tmp_path / "model")
    common = ("--save_strategy", "steps", "--save_steps", "2", "--lr_scheduler_type", "constant")
    _run(pilot, model_dir, tmp_path / "straight", "agentic", "--max_steps", "4", *common)
    _run(pilot, model_dir, tmp_path / "stopped", "agentic", "--max_steps", "2", *common)  # stops at checkpoint-2
    state = _run(pilot, model_dir, tmp_path / "stopped", "agentic", "--max_steps", "4", *common)
    assert state["global_step"] == 4
    straight = load_file(tmp_path / "straight" / "model.safetensors")
    resumed = load_file(tmp_path / "stopped" / "model.safetensors")
    initial = load_file(model_dir / "model.safetensors")
    assert any(not torch.equal(initial[name], weight) for name, weight in straight.items())  # it trained
    for name, weight in straight.items():
        torch.testing.assert_close(resumed[name], weight, msg=name)


def test_freeze_vision(pilot, tmp_path):
    model_dir = build_model("qwen2_5_vl", tmp_path / "model")
    _run(pilot, model_dir, tmp_path / "frozen", "direct", "--max_steps", "2", "--freeze_vision")
    before, after = load_file(model_dir / "model.safetensors"), load_file(tmp_path / "frozen" / "model.safetensors")
    visual = [name for name in before if name.startswith("visual.") or ".visual." in name]
    assert visual and all(torch.equal(before[n], after[n]) for n in visual)
    assert any(not torch.equal(before[n], after[n]) for n in before if n not in visual)


def test_bad_settings_fail_early(pilot, model_dir, tmp_path, capsys):
    processor = _processor(model_dir)
    with pytest.raises(SystemExit):
        parse(["--model_name_or_path", str(model_dir), "--dataset_name", str(pilot), "--mode", "rl",
               "--output_dir", str(tmp_path), "--use_cpu"])
    assert "--mode: invalid choice: 'rl' (choose from 'agentic', 'direct')" in capsys.readouterr().err
    with pytest.raises(ValueError, match=r"holds \['direct'\] rows but --mode is 'agentic'"):
        load_sft_dataset(str(pilot / "direct"), "agentic")
    with pytest.raises(ValueError, match="max_train_samples=99"):
        load_sft_dataset(str(pilot), "agentic", max_samples=99)
    with pytest.raises(ValueError, match="cannot load split"):
        load_sft_dataset(str(tmp_path / "nowhere"), "agentic")
    unlabelled = {mode: load_sft_dataset(str(pilot), mode).remove_columns(["form"]) for mode in MODES}
    with pytest.raises(ValueError, match="that is direct data"):
        check_dataset(unlabelled["direct"], "agentic", "hub/direct")
    with pytest.raises(ValueError, match="that is agentic data"):
        check_dataset(unlabelled["agentic"], "direct", "hub/agentic")
    with pytest.raises(ValueError, match="lacks the column"):
        check_dataset(unlabelled["direct"].remove_columns(["images"]), "direct", "hub/direct")
    if "tools" not in processor.chat_template:  # Qwen2.5-VL's multimodal template renders no tools
        with pytest.raises(ValueError, match="no tool support"):
            SFTEncoder(processor, with_tools=True)
    row = load_sft_dataset(str(pilot), "agentic")[0]
    with pytest.raises(ValueError, match="image tokens reach past max_length=64"):
        SFTEncoder(processor, max_length=64)(row)
    full = SFTEncoder(processor)(row)
    last_image = (full["input_ids"] == processor.image_token_id).nonzero()[-1].item()
    cut = SFTEncoder(processor, max_length=last_image + 5)(row)
    assert len(cut["input_ids"]) == last_image + 5 and torch.equal(cut["input_ids"], full["input_ids"][:last_image + 5])


def test_lora_trains_an_adapter_resumes_and_saves_it_merged(pilot, tmp_path):
    from transformers import AutoModelForImageTextToText

    model_dir = build_model("qwen2_5_vl", tmp_path / "model")
    common = ("--use_peft", "--lora_r", "4", "--lora_alpha", "8", "--save_strategy", "steps", "--save_steps", "2",
              "--lr_scheduler_type", "constant")
    _run(pilot, model_dir, tmp_path / "straight", "agentic", "--max_steps", "4", *common)
    _run(pilot, model_dir, tmp_path / "stopped", "agentic", "--max_steps", "2", *common)
    _run(pilot, model_dir, tmp_path / "stopped", "agentic", "--max_steps", "4", *common)
    straight = load_file(tmp_path / "straight" / "adapter_model.safetensors")
    resumed = load_file(tmp_path / "stopped" / "adapter_model.safetensors")
    assert straight and all("lora_" in name for name in straight)
    assert any(name.endswith("lora_B.weight") and weight.abs().sum() > 0 for name, weight in straight.items())
    for name, weight in straight.items():
        torch.testing.assert_close(resumed[name], weight, msg=name)
    record = json.loads((tmp_path / "straight" / "tirlab_sft.json").read_text())
    assert record["lora"] and record["mode"] == "agentic" and record["train_samples"] == 24
    # the merged checkpoint is a plain model: base weights plus B @ A on the adapted layers
    merged = AutoModelForImageTextToText.from_pretrained(tmp_path / "straight" / "merged").state_dict()
    base = AutoModelForImageTextToText.from_pretrained(model_dir).state_dict()
    assert merged.keys() == base.keys()
    changed = {name for name in base if not torch.equal(base[name], merged[name])}
    assert changed and all(name.endswith("proj.weight") for name in changed)
    assert not any("visual" in name for name in changed)


def test_exports_with_the_same_folder_name_load_their_own_rows(tmp_path):
    """datasets caches a local folder by its base name: without care, the second `pilot/agentic` loaded
    would silently be the first one's rows."""
    for n in (3, 5):
        export = tmp_path / str(n) / "pilot"
        make_data(["pilot", "--n", str(n), "--n-test", "1", "--out", str(export), "--workers", "1"])
        assert len(load_sft_dataset(str(export), "agentic")) == n
        assert len(load_sft_dataset(str(export / "agentic" / "data"), "agentic")) == n  # parquet only, no hf/
    with pytest.raises(ValueError, match=r"no split 'validation'; it has \['train', 'test'\]"):
        load_sft_dataset(str(export), "agentic", split="validation")


def test_max_pixels_reaches_the_image_processor(pilot, tmp_path):
    from train.sft import build_trainer

    model_dir = build_model("qwen2_5_vl", tmp_path / "model")
    patches = {}
    for max_pixels in (None, 28 * 28 * 8):
        args = ["--model_name_or_path", str(model_dir), "--dataset_name", str(pilot), "--mode", "direct",
                "--output_dir", str(tmp_path / "out"), "--use_cpu", "--report_to", "none"]
        trainer, _ = build_trainer(*parse(args + (["--max_pixels", str(max_pixels)] if max_pixels else [])))
        grid = trainer.train_dataset[0]["image_grid_thw"][0]
        patches[max_pixels] = int(grid.prod())
    patch_area = 14 * 14  # Qwen2.5-VL's vision patch
    assert patches[28 * 28 * 8] * patch_area <= 28 * 28 * 8 < patches[None] * patch_area


@pytest.mark.parametrize("logger", ["tensorboard", "trackio", "wandb"])
def test_a_logger_without_its_package_is_named_before_training(logger):
    import importlib.util

    from train.sft import check_loggers

    if importlib.util.find_spec(logger) is None:
        message = f"--report_to {logger} needs the `{logger}` package: pip install {logger}"
        with pytest.raises(ValueError, match=message):
            check_loggers([logger])
    else:
        check_loggers([logger])
    check_loggers("none")


@pytest.fixture(scope="module")
def aligned_pilot(tmp_path_factory):
    out = tmp_path_factory.mktemp("aligned_pilot")
    make_data(["pilot", "--render", "aligned", "--n", "32", "--n-test", "4", "--out", str(out), "--workers", "1"])
    return out


@pytest.mark.parametrize("mode", ["agentic", "direct"])
def test_a_toy_model_trains_from_scratch(aligned_pilot, tmp_path, mode):
    state = _run(aligned_pilot, "toy:qwen2_5_vl", tmp_path, mode, "--max_steps", "8", "--save_steps", "8",
                 "--save_strategy", "steps", "--per_device_train_batch_size", "8", "--warmup_steps", "2",
                 "--dataloader_num_workers", "0")
    losses = [entry["loss"] for entry in state["log_history"] if "loss" in entry]
    assert len(losses) == 8 and losses[-1] < losses[0] - 0.5
    record = json.loads((tmp_path / "tirlab_sft.json").read_text())
    assert record["from_scratch"] == "toy:qwen2_5_vl" and record["model_name_or_path"] == str(tmp_path / "init")
    assert (tmp_path / "init" / "config.json").is_file() and (tmp_path / "model.safetensors").is_file()
    assert record["eval_tasks"] == ["rotated_ocr:angles=quarter,render=aligned"]
    assert record["generation"]["options"]["render"] == "aligned"
    assert (record["global_step"], record["max_steps"], record["seed"]) == (8, 8, 0)
    # every example's tokens, image tokens included, padding not: 8 steps of 8 rows
    encoder = SFTEncoder(_processor(tmp_path))
    rows = load_sft_dataset(str(aligned_pilot), mode)
    lengths = [len(encoder(row)["input_ids"]) for row in rows]
    assert record["train_tokens"] == 2 * sum(lengths)  # 64 rows seen: every row twice
    assert record["total_flos"] > 0


def test_an_unknown_toy_kind_is_named(aligned_pilot, tmp_path):
    with pytest.raises(ValueError, match="toy models are toy:qwen2_5_vl, toy:qwen3_vl"):
        _run(aligned_pilot, "toy:llava", tmp_path, "direct", "--max_steps", "1")
