"""Model presets: what the harness needs to know about a model family besides its weights.

A preset names the runtime profile (protocol, box convention, prompts, stop strings, tool set, budgets:
`runtime/profiles.py`), the image size the processor may use, and the sampling the family is evaluated
with. `--preset` picks one; without it, the model's name or its config's `model_type` decides.

| preset | profile (runtime/profiles.py) | max pixels | hub examples |
|---|---|---|---|
| qwen2.5-vl | Hermes, tools in the system prompt, pixel boxes | 1280·28² | Qwen/Qwen2.5-VL-7B-Instruct |
| qwen3-vl | Hermes through the native template, 0-1000 boxes | 1280·32² | Qwen/Qwen3-VL-8B-Instruct |
| deepeyes | its system prompt, `image_zoom_in_tool`, one call a turn | 1280·28² | ChenShawn/DeepEyes-7B |
| thyme | `<code>` run in the sandbox, output in the assistant turn | 1280·28² | Kwai-Keye/Thyme-RL |
| generic | Hermes through the model's own template | model's | any chat VLM |
| openai | OpenAI function calling (HTTP backend: the server parses calls) | server's | an API |

Every preset samples greedily with 2048 tokens per reply at its image size, unless the suite's paper ran the
model otherwise (a benchmark suite's `defaults`: its sampling, reply cap and image size) or the run says
otherwise. On a benchmark, the preset gives the model's call format; the tools and prompts are the benchmark's
(or, where the paper ran the model in its own framework, that framework's: eval/benchmarks/README.md).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from runtime.profiles import ModelProfile, get_profile
from runtime.protocols import HermesProtocol


@dataclass(frozen=True)
class Preset:
    name: str
    profile: ModelProfile
    max_pixels: int | None = None  # passed to the processor (vLLM and HF alike, so both see the same image)
    max_tokens: int = 2048
    temperature: float = 0.0

    @property
    def processor_kwargs(self) -> dict:
        return {"max_pixels": self.max_pixels} if self.max_pixels else {}


GENERIC = ModelProfile("generic", HermesProtocol(name="hermes-template", tools_in="template"))

PRESETS: dict[str, Preset] = {p.name: p for p in (
    Preset("qwen2.5-vl", get_profile("qwen2_5_vl"), max_pixels=1280 * 28 * 28),
    Preset("qwen3-vl", get_profile("qwen3_vl"), max_pixels=1280 * 32 * 32),
    Preset("deepeyes", get_profile("deepeyes"), max_pixels=1280 * 28 * 28),
    Preset("thyme", get_profile("thyme"), max_pixels=1280 * 28 * 28),
    Preset("generic", GENERIC),
    Preset("openai", get_profile("openai")),
)}

# name fragments (lower case) -> preset, checked in order: fine-tunes first, then their base families
_BY_NAME = (("deepeyes", "deepeyes"), ("thyme", "thyme"), ("qwen3-vl", "qwen3-vl"), ("qwen3_vl", "qwen3-vl"),
            ("qwen2.5-vl", "qwen2.5-vl"), ("qwen2_5_vl", "qwen2.5-vl"))


def get_preset(name: str) -> Preset:
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"unknown preset {name!r}; available: {', '.join(PRESETS)}") from None


def preset_for(model: str) -> Preset:
    """The preset a model name implies: its name, else (a local checkpoint) its config's model_type,
    else generic."""
    lowered = model.lower()
    for fragment, name in _BY_NAME:
        if fragment in lowered:
            return PRESETS[name]
    config = Path(model) / "config.json"
    if config.is_file():
        model_type = json.loads(config.read_text()).get("model_type", "")
        for fragment, name in _BY_NAME:
            if fragment == model_type:
                return PRESETS[name]
    return PRESETS["generic"]
