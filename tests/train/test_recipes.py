"""The training recipes: every pilot recipe parses into a complete, paper-faithful run configuration, and the
accelerate configs load as accelerate reads them."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from eval.presets import preset_for
from train.sft import parse

ROOT = Path(__file__).resolve().parents[2]
# the paper's setup on real models; the toy recipes (toy_cpu/) are checked with the sweep in test_pilot.py
PILOT = sorted(p for p in (ROOT / "recipes" / "pilot_rotated_ocr").glob("*/*.yaml") if p.parent.name != "toy_cpu")


@pytest.mark.parametrize("recipe", PILOT, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_pilot_recipes_are_the_papers_setup(recipe):
    raw = yaml.safe_load(recipe.read_text())
    assert raw["bf16"] is True  # on the GPUs it is written for; here it is overridden to parse on a CPU
    script_args, training_args, model_args = parse(["--config", str(recipe), "--use_cpu", "--bf16", "false"])
    assert training_args.mode == recipe.stem
    model = {"qwen2_5_vl_7b": "Qwen/Qwen2.5-VL-7B-Instruct", "qwen3_vl_8b": "Qwen/Qwen3-VL-8B-Instruct"}
    assert model_args.model_name_or_path == model[recipe.parent.name]
    assert training_args.num_train_epochs == 5 and script_args.max_train_samples == 15000
    assert not model_args.use_peft and not training_args.freeze_vision  # every parameter trained
    assert training_args.gradient_checkpointing and training_args.max_length is None
    assert script_args.dataset_name == "data/pilot"
    # trained at the image size eval/run_vllm.py evaluates the family at
    assert training_args.max_pixels == preset_for(model_args.model_name_or_path).max_pixels
    assert Path(training_args.output_dir).name == f"{recipe.stem}-15000"


def test_a_recipe_with_an_unknown_key_is_refused(tmp_path):
    recipe = tmp_path / "typo.yaml"
    recipe.write_text("mode: agentic\nnum_train_epoch: 5\n")
    with pytest.raises(ValueError, match="Unknown arguments from config file.*num_train_epoch"):
        parse(["--config", str(recipe), "--use_cpu", "--output_dir", str(tmp_path)])


@pytest.mark.parametrize("name,kind,stage", [("zero2", "DEEPSPEED", 2), ("zero3", "DEEPSPEED", 3),
                                             ("fsdp", "FSDP", None)])
def test_accelerate_configs_load(name, kind, stage):
    from accelerate.commands.config.config_args import ClusterConfig

    config = ClusterConfig.from_yaml_file(str(ROOT / "recipes" / "accelerate" / f"{name}.yaml"))
    assert config.distributed_type.value == kind and config.mixed_precision == "bf16"
    if stage:
        assert config.deepspeed_config["zero_stage"] == stage
    else:  # FSDP2, wrapping the model's own _no_split_modules, full state dicts that from_pretrained loads
        assert config.fsdp_config["fsdp_version"] == 2
        assert config.fsdp_config["fsdp_state_dict_type"] == "FULL_STATE_DICT"
        assert "fsdp_transformer_layer_cls_to_wrap" not in config.fsdp_config
