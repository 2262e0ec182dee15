"""TIR-Bench protocol data: the extraction demos are byte-exact copies of the benchmark's `demo_prompts.py`, and
the extraction step builds the official prompt and messages."""

import hashlib
from pathlib import Path

import pytest

from eval.benchmarks.tir_bench import extraction
from eval.benchmarks.tir_bench.scoring import TASKS

PROMPTS_DIR = Path(extraction.__file__).parent / "prompts"
SOURCE = {"repo": "https://github.com/agents-x-project/TIR-Bench",
          "commit": "f79c7562b59e4f8142b0437fc725eb3ee1aec76c", "path": "demo_prompts.py"}
# sha256 of each `demo_prompt_<task>` string of demo_prompts.py at SOURCE's commit (UTF-8), recorded when the
# data file was written and checked then against the module itself.
DEMO_SHA256 = {
    "maze": "a8ebad22c52732b76ce4b178f99648bf9a7c65320511081bfb2559ae5249461d",
    "color": "c67c2c3987180887625709cfd10c6768e8767437292bbef2c9032e457db1b358",
    "math": "4df9951c7c0b3fb555234fbd9f548bc3410d05141fe97d01e23c625b3cac7a1b",
    "word_search": "d969c242115f6763c3d9425a2f10daeefce7f7934de13b271802cd37baae694c",
    "jigsaw": "cadd07db8b3fe91315ec4d50275e9fdfce5294cf911a7aee39123e88cf0e31d4",
    "rotation_game": "a50483d52ca87fc29acc5a2446cf143e10a83d94ef041c64d7b9bd019e8c7e23",
    "refcoco": "5115f5cd747b5ea42d47963b191480d25f1ad1290c3337c9e9a6c7929ab6a363",
    "spot_difference": "b052d20c492cc8782973de7c695c3f01c15da0ff37765e5dd0c3164168111ad0",
    "visual_search": "e3c1b90b1b73fd685084502e1ff4b842adf0a397acc68ed6f4deb9eebbd890d4",
    "symbolic": "95e12882fc89224a4f9f11a132f57e0a1615d6d71a5f6211c0e4f65bea4539cc",
    "contrast": "b84fc88bc18589675f6036b67fe817c5068ab2c9cfb2481e5e59d751ab5b40e8",
    "instrument": "39bc3aef3afcf3a66fdf8a48889c22d54f5adccfec2b2c29881a76ab46923095",
}
# sha256 of the 12 user prompts the official `create_test_prompt` builds for this question and response, one
# per task in DEMO_SHA256's order, joined by NUL; computed with the benchmark's own function.
QUESTION, RESPONSE = "How many cats are there?\nA. 1\nB. 2", "I count **2** cats.\nAnswer: B"
OFFICIAL_PROMPTS_SHA256 = "7a6a9a00f743e154c2fdac31755a8e9419ca79a81338d6ed8e859cc5c2698706"


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_demos_are_the_benchmark_texts_with_their_source():
    demos = extraction.demo_prompts()
    assert extraction.demo_source() == SOURCE
    assert list(demos) == list(DEMO_SHA256)
    assert {task: sha256(text) for task, text in demos.items()} == DEMO_SHA256
    assert set(demos) == set(TASKS) - {"ocr"}


def test_extraction_prompts_are_built_as_the_official_step_builds_them():
    built = "\x00".join(extraction.extraction_prompt(task, QUESTION, RESPONSE) for task in DEMO_SHA256)
    assert sha256(built) == OFFICIAL_PROMPTS_SHA256
    prompt = extraction.extraction_prompt("maze", QUESTION, RESPONSE)
    assert prompt.startswith(extraction.demo_prompts()["maze"].strip() + "\n\nQuestion: How many cats")
    assert prompt.endswith(f"\n\nModel response: {RESPONSE}\n\nExtracted answer: ")


def test_extraction_messages_are_the_official_chat_request():
    system, user = extraction.extraction_messages("jigsaw", QUESTION, RESPONSE)
    assert system == {"role": "system",
                      "content": [{"type": "text", "text": " Assistant is a large language model trained by OpenAI."}]}
    assert user == {"role": "user",
                    "content": [{"type": "text", "text": extraction.extraction_prompt("jigsaw", QUESTION, RESPONSE)}]}
    assert extraction.EXTRACTION_MODEL == "gpt-4.1"


def test_a_list_response_is_formatted_as_the_official_f_string_formats_it():
    assert "Model response: ['first', 'second']\n\n" in extraction.extraction_prompt("math", "q", ["first", "second"])


@pytest.mark.parametrize("task", ["ocr", "counting", "Maze"])
def test_a_task_without_demos_is_an_error_naming_it(task):
    with pytest.raises(ValueError, match=f"no extraction demos for task '{task}'"):
        extraction.extraction_messages(task, QUESTION, RESPONSE)


def test_a_missing_response_is_an_error_as_the_official_assert_is():
    with pytest.raises(ValueError, match="needs a model response"):
        extraction.extraction_prompt("math", QUESTION, None)
