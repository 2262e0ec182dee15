import pytest

from eval.scorers import deepeyes_reward, extract_answer, get_scorer


@pytest.mark.parametrize("name, prediction, truth, score", [
    ("text_match", "<think>hm</think><answer> Hello  World. </answer>", "hello world", 1.0),
    ("text_match", "hello world", "hello world", 1.0),  # no tags: the whole reply
    ("text_match", "<answer>hello</answer> <answer>world</answer>", "world", 1.0),  # the last answer
    ("text_match", "<answer>hello word</answer>", "hello world", 0.0),
    ("option_letter", "<answer>(B) 40%</answer>", "B", 1.0),
    ("option_letter", "<answer>B. forty</answer>", "b", 1.0),
    ("option_letter", "<answer>Both</answer>", "B", 0.0),
    ("option_letter", "<answer>A</answer>", "B", 0.0),
    ("json_list", "<answer>[2, 0, 1]</answer>", "[2, 0, 1]", 1.0),
    ("json_list", "<answer>[2, 1, 0]</answer>", "[2, 0, 1]", 0.0),
    ("json_list", "<answer>[2, 0,</answer>", "[2, 0, 1]", 0.0),
    ("list_iou", "<answer>[2, 6, 7]</answer>", "[2, 6, 11]", 0.5),
    ("list_iou", '```json\n{"different_patches": [11, 2, 6]}\n```', "[2, 6, 11]", 1.0),
    ("list_iou", "<answer>[]</answer>", "[]", 1.0),
    ("list_iou", "<answer>[2, true]</answer>", "[2]", 0.0),
    ("list_iou", "<answer>none</answer>", "[2]", 0.0),
    ("text_match", "so the reading is \\boxed{\\text{6.7}}", "\\text{6.7}", 1.0),  # the last box, braces balanced
    ("numeric", "first \\boxed{3} then \\boxed{12}", "12", 1.0),
    ("jigsaw_positions", "<answer>[1, 3, 2, 4]</answer>", "[1, 2, 3, 4]", 0.5),
    ("jigsaw_positions", "<answer>1, 2, 3</answer>", "[1, 2, 3, 4]", 0.75),  # TIR-Bench's comma form, short
    ("jigsaw_positions", "<answer>none</answer>", "[1, 2]", 0.0),
    ("numeric", "<answer>about 1,024.0 px</answer>", "1024", 1.0),
    ("numeric", "<answer>none</answer>", "3", 0.0),
])
def test_scorers(name, prediction, truth, score):
    assert get_scorer(name)(prediction, truth) == score


def test_unknown_scorer_is_named():
    with pytest.raises(ValueError, match="unknown scorer 'bleu'"):
        get_scorer("bleu")


def test_deepeyes_reward_pays_tools_only_with_a_correct_answer():
    assert deepeyes_reward("<answer>cat</answer>", "cat", "text_match", used_tool=True) == pytest.approx(2.2)
    assert deepeyes_reward("<answer>dog</answer>", "cat", "text_match", used_tool=True) == pytest.approx(0.2)
    assert deepeyes_reward("cat", "cat", "text_match", used_tool=False) == pytest.approx(0.8)
    assert extract_answer("<answer>x") == "x"
