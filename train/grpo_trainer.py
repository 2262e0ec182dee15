"""`ToolGRPOTrainer`: TRL's GRPOTrainer with our episodes as rollouts (train/rollout.py), every image of a rollout
in its training forward pass, the tool-use watch and saved rollout samples."""

from __future__ import annotations

import json
import logging
import warnings
from collections import Counter
from pathlib import Path

from accelerate.utils import gather_object
from transformers import TrainerCallback
from trl import GRPOTrainer

from runtime.trajectory import json_line, message_text
from train.rollout import pil, tool_use_stats
from viewer import view

logger = logging.getLogger("tirlab.grpo")
# TRL builds a forward pass with images that are not in the dataset's prompt (pixel values from the image
# processor, image-token positions from the token ids) only when it ran tools itself; a truthy `tools` while the
# batch is scored sends our rollouts' images down that path
SEQUENCE_IMAGES = [lambda: None]
ROLLOUTS = "rollouts"


class ToolUseWatch(TrainerCallback):
    """Counts generation batches in a row whose tool-call rate is below the floor; at `steps` it warns (and
    stops training after a save when `stop` is set)."""

    def __init__(self, floor: float, steps: int, stop: bool):
        self.floor, self.steps, self.stop = floor, steps, stop
        self.streak = 0
        self.collapsed = False

    def update(self, call_rate: float, step: int) -> None:
        self.streak = self.streak + 1 if call_rate < self.floor else 0
        if self.streak == self.steps:
            self.collapsed = True
            message = (f"tool use collapsed: the tool-call rate has been below {self.floor:.0%} for {self.steps} "
                       f"generation batches in a row (now {call_rate:.0%}, step {step})"
                       + ("; stopping" if self.stop else "; training goes on (--stop_on_tool_collapse stops it)"))
            logger.warning(message)
            warnings.warn(message, stacklevel=2)

    def on_step_end(self, args, state, control, **kwargs):
        if self.stop and self.collapsed:
            control.should_save = True
            control.should_training_stop = True
        return control


class ToolGRPOTrainer(GRPOTrainer):
    def __init__(self, *args, rollouts, **kwargs):
        config = kwargs["args"]
        self.rollouts = rollouts
        self.watch = ToolUseWatch(config.tool_call_rate_floor, config.tool_collapse_steps,
                                  config.stop_on_tool_collapse)
        super().__init__(*args, rollout_func=rollouts, callbacks=[self.watch], **kwargs)
        if not self._is_vlm:
            raise ValueError("train/grpo.py trains vision-language models (Qwen2.5-VL, Qwen3-VL): the processor "
                             "has no image processor")
        from train.rollout import HFGenerator, VLLMGenerator

        generator = VLLMGenerator if self.use_vllm else HFGenerator
        self.rollouts.generator = generator(self, self.rollouts.tokens.media_token_ids)
        self._saved_step = None

    def _generate(self, prompts):
        (prompt_ids, completion_ids, env_mask, completions, logprobs, extra, _,
         _) = super()._generate(prompts)
        images = [[pil(image) for image in row] for row in extra.pop("images")]
        mode = "train" if self.model.training else "eval"
        summaries = gather_object(extra["episode"])
        for key, value in tool_use_stats(summaries).items():
            self._metrics[mode][key].append(value)
        if mode == "train":
            self.watch.update(sum(s["tool_calls"] > 0 for s in summaries) / max(len(summaries), 1),
                              self.state.global_step)
            self._metrics[mode]["tools/low_rate_streak"].append(self.watch.streak)
        if any(images):
            self.tools = SEQUENCE_IMAGES  # reset after scoring (_generate_and_score_completions)
            return prompt_ids, completion_ids, env_mask, completions, logprobs, extra, images, images
        return prompt_ids, completion_ids, env_mask, completions, logprobs, extra, None, []

    def _generate_and_score_completions(self, inputs):
        try:
            return super()._generate_and_score_completions(inputs)
        finally:
            self.tools = None

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        rewards = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        every = self.args.save_rollouts_steps
        step = self.state.global_step
        if (self.model.training and every and step % every == 0 and self._saved_step != step
                and self.accelerator.is_main_process):
            self._saved_step = step
            local = rewards[:len(inputs)].tolist()  # the main process's rows come first in the gathered tensor
            self.save_rollouts(step, inputs, local)
        return rewards

    def save_rollouts(self, step: int, inputs: list[dict], rewards: list[list[float]]) -> Path:
        """A sample of this step's episodes as an evaluation run's records (eval/report.py reads them), each with
        its reward terms, under output_dir/rollouts/step-N."""
        folder = Path(self.args.output_dir) / ROLLOUTS / f"step-{step:06d}"
        (folder / "images").mkdir(parents=True, exist_ok=True)
        names = [func.__name__ for func in self.reward_funcs]
        weights = self.reward_weights.tolist()
        lines, seen = [], Counter()
        for row, (episode, record), terms in list(zip(inputs, self.rollouts.last, rewards))[
                :self.args.save_rollouts_count]:
            summary = row["episode"]
            task_id = row.get("id", "")
            seen[task_id] += 1  # a group holds num_generations episodes of one task
            trajectory = episode.trajectory
            lines.append(json_line({
                "id": f"{task_id}#{seen[task_id]}", "task": task_id, "category": "rl", "scorer": row["scorer"],
                "mode": "tools",
                "question": next(message_text(m) for m in trajectory.messages if m["role"] == "user"),
                "truth": row["answer"], "prediction": summary["answer"], "stop_reason": summary["stop_reason"],
                "error": summary["error"], "turns": summary["turns"], "tool_calls": summary["tool_calls"],
                "reference_calls": None, "prompt_tokens": len(record.prompt_ids),
                "completion_tokens": summary["response_tokens"], "latency_s": 0.0,
                "model": self.args.output_dir, "profile": trajectory.meta.get("profile"),
                "trajectory": trajectory.to_dict(folder / "images"), "score": terms[0], "score_error": None,
                "step": step, "rewards": dict(zip(names, terms)),
                "reward": sum(w * t for w, t in zip(weights, terms) if t == t)}))
        (folder / "records.jsonl").write_text("".join(lines), encoding="utf-8")
        (folder / "config.json").write_text(json.dumps({"model": self.args.output_dir, "step": step,
                                                        "preset": self.args.preset}, indent=2) + "\n",
                                            encoding="utf-8")
        try:  # every saved step in one page: rollouts/viewer.html
            view([folder.parent])
        except Exception as err:  # noqa: BLE001 - looking at rollouts must never stop training
            logger.warning("the rollout viewer was not written: %s", err)
        return folder

