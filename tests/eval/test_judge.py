"""The LLM judge: prompts and verdict parsing on realistic judge replies, then the whole pipeline on real
backends (the vLLM CPU engine and HF generate) with the tiny random-weight Qwen2.5-VL. A random model judges
nothing sensibly, so the end-to-end tests check the plumbing: structured outputs make every reply a verdict,
and replies that are not verdicts become errors, never exceptions."""

import re

import numpy as np
import pytest

from eval.backends import Completion, Sampling
from eval.judge import DEFAULT_TEMPLATE, VERDICT_REGEX, Judge, JudgeItem, JudgeTemplate, parse_verdict, verdict

PIZZA = JudgeItem(question='How much is a gluten-free 14" pizza with one topping?', truth="$16",
                  prediction="A 14-inch one-topping pizza is $14, plus $3 for gluten-free: $17.",
                  rubric=['Identifies the price of a one-topping 14" pizza as $13.',
                          "Adds $3 for the gluten-free crust.", "Reports $16 as the price of the pizza."])
IMAGE = np.full((56, 56, 3), 200, np.uint8)


# --- prompts ----------------------------------------------------------------------------------------------------

def test_a_reference_item_is_one_prompt_with_its_inputs_and_the_json_format():
    item = JudgeItem("What is {x} + 1 when x = 2?", "3", "<answer>3</answer>")
    (prompt,) = Judge(backend=None).prompts(item)
    (message,) = prompt.messages
    assert message["role"] == "user" and prompt.images == []
    (part,) = message["content"]
    text = part["text"]
    assert "**Question:** What is {x} + 1 when x = 2?" in text  # braces in inputs are not template fields
    assert "**Golden Answer:** 3" in text and "**Model Answer:** <answer>3</answer>" in text
    assert text.rstrip().endswith('{"explanation": "Brief explanation of your judgement", "judge_result": "Correct" '
                                  'or "Incorrect"}')


def test_a_rubric_item_is_one_prompt_per_criterion_with_the_images_first():
    item = JudgeItem(PIZZA.question, "", PIZZA.prediction, PIZZA.rubric, images=(IMAGE, IMAGE))
    prompts = Judge(backend=None).prompts(item)
    assert len(prompts) == 3
    for prompt, criterion in zip(prompts, PIZZA.rubric):
        content = prompt.messages[0]["content"]
        assert content[:2] == [{"type": "image"}, {"type": "image"}] and len(prompt.images) == 2
        assert f"**Rubric Criterion:** {criterion}" in content[2]["text"]
        assert "**Golden Answer:** (none given)" in content[2]["text"]
        assert '"judge_result": "Met" or "Not Met"' in content[2]["text"]


@pytest.mark.parametrize("template, problem", [
    (JudgeTemplate("{question} {truth}", DEFAULT_TEMPLATE.rubric), "must use ['prediction']"),
    (JudgeTemplate("{prediction} {answer}", DEFAULT_TEMPLATE.rubric), "uses the fields ['answer', 'prediction']"),
    (JudgeTemplate(DEFAULT_TEMPLATE.reference, "{prediction}"), "must use ['criterion', 'prediction']"),
    (JudgeTemplate('{prediction} {"judge_result": "Met"}', DEFAULT_TEMPLATE.rubric), "reference template uses"),
    (JudgeTemplate("{prediction} }", DEFAULT_TEMPLATE.rubric), "is not a str.format template"),
])
def test_bad_templates_are_refused_when_the_judge_is_built(template, problem):
    with pytest.raises(ValueError, match=re.escape(problem)):
        Judge(backend=None, template=template)


@pytest.mark.parametrize("rubric, truth, problem", [
    ([], "x", "a rubric is a non-empty list"),
    (["ok", ""], "x", "a rubric is a non-empty list"),
    (["ok", 3], "x", "a rubric is a non-empty list"),
    ("Reports $16.", "x", "a rubric is a non-empty list"),
    (None, "  ", "needs a reference answer (truth), a rubric, or both"),
])
def test_bad_items_are_refused(rubric, truth, problem):
    with pytest.raises(ValueError, match=re.escape(problem)):
        JudgeItem("q", truth, "p", rubric)


# --- parsing ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("reply, passed", [
    ('{"explanation": "The model reports $17, not $16.", "judge_result": "Not Met"}', False),
    ('{\n    "explanation": "It adds $3 for the crust.",\n    "judge_result": "Met"\n}', True),  # VisualToolBench's
    ('```json\n{"explanation": "Same value.", "judge_result": "Correct"}\n```', True),
    ('Sure! Here is my judgement:\n{"explanation": "4 = 4", "judge_result": "Correct"}\nHope this helps.', True),
    ('<think>Maybe {"judge_result": "Met"}? No, $17 is wrong.</think>\n{"explanation": "x", "judge_result": "Not Met"}',
     False),  # the last verdict wins, not the thinking's
    ('{"explanation": "ok", "judge_result": "incorrect"}', False),
    ('{"explanation": "ok", "judge_result": "NOT MET."}', False),
    ('{"explanation": "ok", "judge_result": "not_met"}', False),
    ('{"explanation": "ok", "judge_result": "Not-Met"}', False),
    ('{"explanation": "ok", "judge_result": " met "}', True),
    ('{"explanation": "ok", "judge_result": "**Correct**"}', True),
    ('{"judge_result": true}', True),
    ('{"judge_result": false, "explanation": 3}', False),
    ('{"verdict": {"explanation": "nested", "judge_result": "Met"}}', True),
    ('{"explanation": "Le modèle donne 17 $ — faux. 答案错误", "judge_result": "Incorrect"}', False),
    ('{"explanation": "has a } and a { inside", "judge_result": "Met"}', True),
])
def test_verdicts_are_read_from_realistic_replies(reply, passed):
    assert parse_verdict(reply)[0] is passed and parse_verdict(reply)[2] is None


@pytest.mark.parametrize("reply, problem", [
    ("The answer is correct.", 'no JSON object with a "judge_result"'),
    ("", 'no JSON object with a "judge_result"'),
    ('{"explanation": "The model is right", "result": "Correct"}', 'no JSON object with a "judge_result"'),
    ('{"explanation": "The model is right", "judge_result": "Corr', 'no JSON object with a "judge_result"'),
    ("{'explanation': 'single quotes', 'judge_result': 'Met'}", 'no JSON object with a "judge_result"'),
    ('{"explanation": "unsure", "judge_result": "Partially Met"}', '"judge_result" is "Partially Met", not'),
    ('{"explanation": "unsure", "judge_result": 1}', '"judge_result" is 1, not'),
    ('{"explanation": "unsure", "judge_result": null}', '"judge_result" is null, not'),
    ("{" * 5000 + "[" * 5000, 'no JSON object with a "judge_result"'),
    ('{"judge_result": ' + "[" * 100000 + "]" * 100000 + "}", 'no JSON object with a "judge_result"'),  # too deep
])
def test_replies_without_a_verdict_are_errors_not_exceptions(reply, problem):
    passed, _, error = parse_verdict(reply)
    assert passed is None and problem in error


def test_verdicts_from_completions():
    met, not_met = ('{"explanation": "yes", "judge_result": "Met"}', '{"explanation": "no", "judge_result": "Not Met"}')
    graded = verdict(PIZZA, [Completion(not_met), Completion(met), Completion({"content": not_met})])
    assert graded.score == pytest.approx(1 / 3) and graded.error is None
    assert [entry["met"] for entry in graded.items] == [False, True, False]
    assert graded.items[1] == {"criterion": PIZZA.rubric[1], "met": True, "explanation": "yes", "error": None}
    assert graded.raw == "\n\n".join([not_met, met, not_met])

    broken = verdict(PIZZA, [Completion(met), Completion('{"explanation": "I', truncated=True),
                             Completion("", error="HTTP 500 after 3 tries")])
    assert broken.score is None and [entry["met"] for entry in broken.items] == [True, None, None]
    assert broken.error.startswith('criterion 2: no JSON object with a "judge_result" in the reply (the reply stopped '
                                   "at max_tokens: raise Sampling.max_tokens); criterion 3: the judge request failed: "
                                   "HTTP 500 after 3 tries")

    reference = JudgeItem("2 + 2?", "4", "4")
    assert verdict(reference, [Completion('{"explanation": "4", "judge_result": "Correct"}')]).score == 1.0
    assert verdict(reference, [Completion('{"explanation": "5", "judge_result": "Incorrect"}')]).score == 0.0
    assert verdict(reference, [Completion("Correct!")]).items is None


@pytest.mark.parametrize("reply", ['{"explanation": "", "judge_result": "Met"}',
                                   '{"explanation": "The model reports $16.", "judge_result": "Not Met"}',
                                   '{"explanation": "Same value.", "judge_result": "Correct"}'])
def test_replies_in_the_structured_format_parse(reply):
    assert re.fullmatch(VERDICT_REGEX, reply) and parse_verdict(reply)[2] is None


# --- end to end on real backends --------------------------------------------------------------------------------

def test_structured_outputs_make_every_judgment_a_verdict_on_vllm(tiny_engine):
    judge = Judge(tiny_engine, Sampling(max_tokens=512, regex=VERDICT_REGEX))
    items = [JudgeItem("What is 2 + 2?", "4", "<answer>4</answer>"),
             JudgeItem(PIZZA.question, PIZZA.truth, PIZZA.prediction, PIZZA.rubric, images=(IMAGE,)),
             JudgeItem("Which city is shown?", "Paris", "It is London.", images=(IMAGE, IMAGE))]
    reference, rubric, seen = judge.judge_many(items)
    for graded in (reference, seen):
        assert graded.error is None and graded.score in (0.0, 1.0) and graded.items is None
        assert re.fullmatch(VERDICT_REGEX, graded.raw)
    assert rubric.error is None and len(rubric.items) == 3
    assert rubric.score == sum(entry["met"] for entry in rubric.items) / 3
    assert all(re.fullmatch(VERDICT_REGEX, reply) for reply in rubric.raw.split("\n\n"))
    assert tiny_engine.in_flight() == 0


def test_free_replies_of_a_random_model_are_errors_on_vllm(tiny_engine):
    free, cut = (Judge(tiny_engine, Sampling(max_tokens=24)).judge_many([PIZZA]),
                 Judge(tiny_engine, Sampling(max_tokens=3, regex=VERDICT_REGEX)).judge_many([PIZZA]))
    for (graded,) in (free, cut):
        assert graded.score is None and graded.error.startswith('criterion 1: no JSON object with a "judge_result"')
        assert [entry["met"] for entry in graded.items] == [None, None, None]
    assert "stopped at max_tokens" in cut[0].error and cut[0].raw.startswith('{"e')


def test_a_backend_without_structured_outputs_fails_each_judgment_cleanly(tiny_model_dir):
    from eval.backends.hf_generate import HFGenerateBackend

    backend = HFGenerateBackend(str(tiny_model_dir), dtype="float32", device="cpu")
    (graded,) = Judge(backend, Sampling(max_tokens=8, regex=VERDICT_REGEX)).judge_many([JudgeItem("q", "4", "4")])
    assert graded.score is None and graded.error == ("the judge request failed: structured outputs (a reply regex) "
                                                     "need a vLLM backend")
    (graded,) = Judge(backend, Sampling(max_tokens=8)).judge_many([JudgeItem("q", "4", "4", images=(IMAGE,))])
    assert graded.score is None and graded.error.startswith('no JSON object with a "judge_result"')
    assert backend.in_flight() == 0
