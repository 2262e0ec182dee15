import json

import pytest

from data_gen.sample import audit
from data_gen.tasks import get_task
from eval.metrics import calls, effective_calls, overthink, process_metrics


def _reference(task: str, seed: int = 1, difficulty: str = "easy") -> list[dict]:
    module = get_task(task)
    return audit(module.generate(seed, difficulty), module.check).messages


def _call(index: int, name: str, **arguments) -> dict:
    return {"role": "assistant", "content": [{"type": "text", "text": ""}],
            "tool_calls": [{"id": f"c{index}", "type": "function",
                            "function": {"name": name, "arguments": json.dumps(arguments)}}]}


def _result(index: int, name: str, image: int | None = None, error: bool = False) -> dict:
    content = [{"type": "image", "image": image}] if image is not None else [{"type": "text", "text": "oops"}]
    return {"role": "tool", "tool_call_id": f"c{index}", "name": name, "content": content, "error": error}


def test_reference_chains_follow_image_provenance():
    spot = calls(_reference("spot_difference"))  # crop left -> 1, crop right -> 2, difference(1, 2) -> 3
    assert [(c.name, c.reads, c.made) for c in spot] == [("crop", (0,), (1,)), ("crop", (0,), (2,)),
                                                         ("difference", (1, 2), (3,))]
    assert effective_calls(spot) == 3
    jigsaw = calls(_reference("jigsaw"))  # every crop reads the original: only the last is on the answer's chain
    assert len(jigsaw) == 9 and effective_calls(jigsaw) == 1


def test_wasted_and_failed_calls_are_not_effective():
    user = {"role": "user", "content": [{"type": "image", "image": 0}, {"type": "text", "text": "q"}]}
    messages = [user,
                _call(0, "rotate", angle=90), _result(0, "rotate", 1),        # reads the latest (0)
                _call(1, "blur"), _result(1, "blur", 2),                       # reads 1: on the chain
                _call(2, "invert", image_index=0), _result(2, "invert", 3),   # wasted: nothing reads 3
                _call(3, "crop", image_index=-2, box=[0, 0, 2, 2]), _result(3, "crop", 4),  # -2 -> image 2
                _call(4, "crop", image_index=9), _result(4, "crop", error=True)]  # bad index, failed
    chain = calls(messages)
    assert [c.reads for c in chain] == [(0,), (1,), (0,), (2,), ()]
    assert [c.ok for c in chain] == [True, True, True, True, False]
    assert effective_calls(chain) == 3  # rotate -> blur -> crop
    metrics = process_metrics([(messages, 2), ([user, {"role": "assistant", "content": []}], 1)])
    assert metrics["tool_call_rate"] == 0.5 and metrics["calls_per_episode"] == 2.5
    assert metrics["tool_success_rate"] == 0.8 and metrics["tool_efficiency"] == 3 / 5
    assert metrics["chain_length_mae"] == (3 + 1) / 2
    assert metrics["overthink"] == pytest.approx((3 / 3 + 0) / 2)
    assert metrics["tool_distribution"] == {"crop": 2, "rotate": 1, "blur": 1, "invert": 1}


def test_overthink_is_agentic_mme_formula():
    assert overthink(5, 2) == 1.0 and overthink(1, 2) == 0.0 and overthink(3, 0) == 3.0


def test_no_calls_and_no_reference():
    metrics = process_metrics([([{"role": "user", "content": []}], None)])
    assert metrics["tool_call_rate"] == 0.0 and metrics["tool_success_rate"] is None
    assert metrics["chain_length_mae"] is None and metrics["overthink"] is None
