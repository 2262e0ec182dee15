import subprocess
import sys
from pathlib import Path

import datasets
import pytest
from PIL import Image

from data_gen.make import build

ROOT = Path(__file__).resolve().parents[2]


def test_pilot_export_round_trips(tmp_path):
    build("rotated_ocr", 12, 4, tmp_path, "medium", {"angles": "quarter"}, 1, ("direct", "agentic"), "test pilot")
    for form, images, roles in (("direct", 1, ["user", "assistant"]),
                                ("agentic", 2, ["system", "user", "assistant", "user", "assistant"])):
        files = {split: str(tmp_path / form / "data" / f"{split}-00000-of-00001.parquet") for split in ("train", "test")}
        parquet = datasets.load_dataset("parquet", data_files=files)
        disk = datasets.load_from_disk(str(tmp_path / form / "hf"))
        for loaded in (parquet, disk):
            assert (len(loaded["train"]), len(loaded["test"])) == (12, 4)
            assert "Image" in repr(loaded["train"].features["images"])
            row = loaded["train"][0]
            assert [m["role"] for m in row["messages"]] == roles and row["form"] == form
            assert len(row["images"]) == images and all(isinstance(im, Image.Image) for im in row["images"])
            placeholders = sum(p["type"] == "image" for m in row["messages"] for p in m["content"])
            assert placeholders == images
        assert parquet["train"]["id"] == disk["train"]["id"]
        card = (tmp_path / form / "README.md").read_text()
        assert card.startswith("---\nconfigs:") and "path: data/train-*.parquet" in card and '"n": 12' in card
    agentic = datasets.load_from_disk(str(tmp_path / "agentic" / "hf"))["train"][0]["messages"]
    assert agentic[3]["content"][0]["text"] == "<tool_response>\n" and agentic[3]["content"][2]["text"] == "\n</tool_response>"
    assert '"name": "rotate"' in agentic[2]["content"][0]["text"]
    assert agentic[4]["content"][0]["text"].startswith("<answer>")


def test_cli_runs_with_workers(tmp_path):
    result = subprocess.run([sys.executable, "data_gen/make.py", "sft", "--task", "rotated_ocr", "--n", "8",
                             "--n-test", "2", "--option", "angles=any", "--forms", "agentic", "--workers", "2",
                             "--out", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "10 samples audited and exported" in result.stdout
    assert (tmp_path / "agentic" / "data" / "train-00000-of-00001.parquet").is_file()
    assert not (tmp_path / "direct").exists()


def test_cli_rejects_an_unknown_task(tmp_path):
    result = subprocess.run([sys.executable, "data_gen/make.py", "sft", "--task", "nope", "--n", "2",
                             "--out", str(tmp_path), "--workers", "1"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 2 and "unknown task 'nope'" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("options, message", [
    (["--option", "angles"], "KEY=VALUE"),
    (["--option", "angles=diagonal"], "angles must be"),
    (["--option", "base=1"], "takes no option(s) ['base']"),
])
def test_cli_names_a_bad_option(tmp_path, options, message):
    result = subprocess.run([sys.executable, "data_gen/make.py", "sft", "--task", "rotated_ocr", "--n", "2",
                             "--out", str(tmp_path), "--workers", "1", *options], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 2 and message in result.stderr and "Traceback" not in result.stderr


def test_contact_sheet_shows_every_task(tmp_path):
    from PIL import Image as PILImage

    from data_gen.contact_sheet import CAPTION, CELL, contact_sheet
    from data_gen.tasks import TASKS
    with PILImage.open(contact_sheet(tmp_path / "sheet.png", per_task=2)) as sheet:
        assert sheet.size == (2 * CELL, len(TASKS) * (CELL + CAPTION))


def test_docs_contact_sheet_is_current():
    from data_gen.contact_sheet import CAPTION, CELL
    from data_gen.tasks import TASKS
    with Image.open(ROOT / "docs" / "data_gen_samples.png") as sheet:
        assert sheet.size[1] == len(TASKS) * (CELL + CAPTION), "regenerate: python data_gen/make.py sheet --out docs/data_gen_samples.png"


def test_rl_export_in_verl_and_trl_layouts(tmp_path):
    from data_gen.make import build_rl
    from eval.scorers import get_scorer
    build_rl("rotated_ocr", 6, 2, tmp_path, "medium", {}, 1)
    verl = datasets.load_dataset("parquet", data_files=str(tmp_path / "verl" / "data" / "train-*.parquet"))["train"]
    row = verl[0]
    assert set(row) == {"data_source", "prompt", "images", "ability", "env_name", "reward_model", "extra_info"}
    assert row["prompt"][0]["content"].startswith("<image>") and row["data_source"] == "tirlab/rotated_ocr"
    assert isinstance(row["images"][0], Image.Image) and row["env_name"] == "tir_rotate"
    scorer = get_scorer(row["extra_info"]["scorer"])
    truth = row["reward_model"]["ground_truth"]
    assert scorer(f"<answer>{truth}</answer>", truth) == 1.0 and scorer("<answer>nope</answer>", truth) == 0.0
    trl = datasets.load_from_disk(str(tmp_path / "trl" / "hf"))
    assert len(trl["train"]) == 6 and len(trl["test"]) == 2
    assert [p["type"] for p in trl["train"][0]["prompt"][0]["content"]] == ["image", "text"]
    assert verl["extra_info"][0]["id"] == trl["train"][0]["id"]


def test_push_to_a_local_folder_is_a_loadable_hub_layout(tmp_path):
    """`push` to a folder writes what a Hub dataset repo gets (card + shards): `load_dataset(folder)`
    finds the splits through the card's data_files, as `load_dataset("user/name")` would."""
    build("rotated_ocr", 6, 2, tmp_path / "export", "easy", {}, 1, ("direct",), "push test")
    hub = tmp_path / "hub"
    (hub / "data").mkdir(parents=True)
    (hub / "data" / "train-00000-of-00003.parquet").write_bytes(b"a stale shard from an earlier push")
    result = subprocess.run([sys.executable, "data_gen/make.py", "push", str(tmp_path / "export" / "direct"), str(hub)],
                            cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert sorted(p.relative_to(hub).as_posix() for p in hub.rglob("*") if p.is_file()) == [
        "README.md", "data/test-00000-of-00001.parquet", "data/train-00000-of-00001.parquet"]
    # force_redownload: datasets caches a local folder by its base name, not its files (see train/data.py)
    loaded = datasets.load_dataset(str(hub), download_mode="force_redownload", verification_mode="no_checks")
    assert (len(loaded["train"]), len(loaded["test"])) == (6, 2)
    assert isinstance(loaded["train"][0]["images"][0], Image.Image)


@pytest.mark.parametrize("destination, message", [
    ("not a repo", "neither a Hub repo id"),
    ("someone/data", "needs a token"),
])
def test_push_names_a_bad_destination(tmp_path, monkeypatch, destination, message):
    from data_gen.export import push
    build("rotated_ocr", 2, 0, tmp_path, "easy", {}, 1, ("direct",), "push test")
    monkeypatch.delenv("HF_TOKEN", raising=False)
    with pytest.raises(ValueError, match=message):
        push(tmp_path / "direct", destination)
    with pytest.raises(ValueError, match="not an export"):
        push(tmp_path, "./elsewhere")
