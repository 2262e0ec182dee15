"""The TIR-Bench and VTC-Bench fixtures have the published formats, and the papers' tables are transcribed
consistently (the checks catch a mistyped cell: deltas, weighted means and item counts must agree)."""

import base64
import csv
import io
import json
import re
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from jsonschema import validate
from PIL import Image

from eval.benchmarks.tir_bench.fixture import write_fixture as write_tir
from eval.benchmarks.vtc_bench.fixture import write_fixture as write_vtc
from tools.toolsets import get_toolset

ROOT = Path(__file__).resolve().parents[3]
TIR_TASKS = {"ocr", "maze", "color", "math", "word_search", "jigsaw", "rotation_game", "refcoco", "spot_difference",
             "visual_search", "symbolic", "contrast", "instrument"}
TIR_ROW_KEYS = {"meta_data", "task", "answer", "prompt", "image_1", "image_2", "id"}
VTC_COLUMNS = ["index", "id", "category", "image", "question", "answer", "A", "B", "C", "D"]
VTC_PREFIXES = {"ocr": "ocr", "perceptual": "perceptual_Restoration", "attention": "attention_focusing",
                "measure": "measure", "color": "color", "counting": "counting", "chart": "chart", "math": "math",
                "spatial": "spatial"}
# the labels of the published GT chains, and "Zoom in" (written with curly quotes there)
GT_LABELS = {"Convert Color", "Draw Contours", "Binarize", "Morphology", "Adjust Brightness", "Color Filter", "Draw Line",
             "Blur", "Rotate", "Crop", "Measure Area", "Edge Detect", "Sharpen", "Histogram Eq", "Line Detect",
             "Circle Detect", "Resize", "Flip", "Approximate Polygon", "Draw Circle", "Watershed", "Denoise",
             "Connected Components", "Template Match", "Measure Perimeter", "Inpaint", "Zoom in"}


# == TIR-Bench ========================================================================================================
@pytest.fixture(scope="module")
def tir(tmp_path_factory):
    """Two rows per task (so jigsaw has two grid sizes), unzipped into a folder of its own."""
    out = write_tir(tmp_path_factory.mktemp("tir"), per_task=2)
    extracted = tmp_path_factory.mktemp("tir-unzipped")
    with zipfile.ZipFile(out / "data.zip") as archive:
        names = archive.namelist()
        archive.extractall(extracted)
    return json.loads((out / "TIR-Bench.json").read_text(encoding="utf-8")), out, extracted, names


def test_tir_rows_have_the_published_keys_tasks_and_unique_ids(tir):
    rows, out, _, _ = tir
    assert len(rows) == 26 and {row["task"] for row in rows} == TIR_TASKS
    assert all(set(row) == TIR_ROW_KEYS for row in rows)
    ids = [row["id"] for row in rows]
    assert all(type(i) is int for i in ids) and len(set(ids)) == len(ids)
    assert all(isinstance(row["prompt"], str) and row["prompt"].strip() for row in rows)
    numbers = [row for row in rows if not isinstance(row["answer"], str)]
    assert [(row["task"], type(row["answer"])) for row in numbers] == [("math", int)]
    assert all(row["meta_data"] == {} for row in rows if row["task"] != "jigsaw")


def test_tir_images_are_zipped_as_the_hub_has_them(tir):
    rows, out, extracted, names = tir
    assert not (out / "data").exists()  # the loader must unzip
    assert all(name.startswith("data/") for name in names)
    for row in rows:
        for field in ("image_1", "image_2"):
            if row[field] is None:
                continue
            assert re.fullmatch(rf"data/{row['task']}/[\w.]+\.(png|jpg)", row[field])
            with Image.open(extracted / row[field]) as image:
                image.verify()
        assert (row["image_2"] is not None) == (row["task"] == "spot_difference")


def test_tir_jigsaw_rows_carry_their_grid_and_a_permutation(tir):
    rows = [row for row in tir[0] if row["task"] == "jigsaw"]
    grids = {row["meta_data"]["difficulty"] for row in rows}
    assert len(grids) == 2 and grids <= {3, 4, 5, 6}
    for row in rows:
        n = row["meta_data"]["difficulty"]
        assert sorted(json.loads(row["answer"])) == list(range(1, n * n + 1))
        assert f"{n}\u00d7{n} pieces" in row["prompt"]


def test_tir_spot_difference_has_two_equal_images_and_patches_on_the_grid(tir):
    rows, _, extracted, _ = tir
    for row in (r for r in rows if r["task"] == "spot_difference"):
        left, right = (np.asarray(Image.open(extracted / row[f]).convert("RGB")) for f in ("image_1", "image_2"))
        assert left.shape == right.shape and not np.array_equal(left, right)
        n, m = map(int, re.search(r"n is (\d+) and m is (\d+)$", row["prompt"]).groups())
        patches = [int(p) for p in row["answer"].split(", ")]
        assert patches == sorted(set(patches)) and all(1 <= p <= n * m for p in patches)


def test_tir_choice_answers_name_an_option_of_the_prompt(tir):
    for row in tir[0]:
        answer = str(row["answer"])
        if re.fullmatch(r"[A-F]", answer):
            assert re.search(rf"(^|\n){answer}[.:] |\({answer}\) ", row["prompt"]), row["task"]


def test_tir_fixture_is_deterministic_and_can_stay_unzipped(tmp_path):
    a, b = write_tir(tmp_path / "a"), write_tir(tmp_path / "b")
    assert (a / "TIR-Bench.json").read_bytes() == (b / "TIR-Bench.json").read_bytes()
    assert (a / "data.zip").read_bytes() == (b / "data.zip").read_bytes()
    with pytest.raises(FileExistsError):
        write_tir(a)  # never over a copy that is there
    c = write_tir(tmp_path / "c", zipped=False)
    assert not (c / "data.zip").exists()
    assert all((c / row["image_1"]).is_file() for row in json.loads((c / "TIR-Bench.json").read_text()))


# == VTC-Bench ========================================================================================================
@pytest.fixture(scope="module")
def vtc(tmp_path_factory):
    return write_vtc(tmp_path_factory.mktemp("vtc"), per_category=2)


def _dict_rows(path: Path) -> tuple[list[str], list[dict]]:
    with open(path, encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f, delimiter="\t")
        return reader.fieldnames, list(reader)


def test_vtc_tsvs_parse_into_the_published_columns(vtc):
    for name, columns in (("VTC-Bench.tsv", VTC_COLUMNS), ("VTC-Bench_GTToolChain.tsv", VTC_COLUMNS + ["model_tools_gt"])):
        fields, rows = _dict_rows(vtc / name)
        frame = pd.read_csv(vtc / name, sep="\t")
        assert fields == columns and list(frame.columns) == columns
        assert len(rows) == len(frame) == 18
        assert [r["id"] for r in rows] == list(frame["id"]) and frame["index"].is_unique
        assert {r["category"] for r in rows} == set(VTC_PREFIXES)
    main, chains = (_dict_rows(vtc / n)[1] for n in ("VTC-Bench.tsv", "VTC-Bench_GTToolChain.tsv"))
    assert {r["id"]: r["index"] for r in main} == {r["id"]: r["index"] for r in chains}
    indices = [int(r["index"]) for r in chains]
    assert indices == sorted(indices) and indices != list(range(1, 19))  # the published indices have gaps


def test_vtc_tsvs_are_written_as_the_published_files(vtc):
    main = (vtc / "VTC-Bench.tsv").read_bytes().decode("utf-8")
    chains = (vtc / "VTC-Bench_GTToolChain.tsv").read_bytes().decode("utf-8")
    assert main.endswith("\r\n") and not chains.endswith("\n")
    assert main.count("\n") == main.count("\r\n") and chains.count("\n") == chains.count("\r\n")
    assert '""' in main  # a question with a quoted word, quoted as csv does
    for line in chains.split("\r\n")[1:]:
        for cell in line.split("\t"):
            assert (cell.startswith('"') and cell.endswith('"')) == ("," in cell or '"' in cell)


def test_vtc_rows_mix_choice_and_open_questions_and_ids_match_categories(vtc):
    _, rows = _dict_rows(vtc / "VTC-Bench.tsv")
    for row in rows:
        prefix, number = row["id"].rsplit("_", 1)
        assert prefix == VTC_PREFIXES[row["category"]] and number.isdigit()
        assert row["image"] == f"images/{prefix.lower()}/{row['id']}.jpg" and (vtc / row["image"]).is_file()
        filled = [k for k in "ABCD" if row[k]]
        assert filled == list("ABCD"[:len(filled)])
        if filled:
            assert len(filled) >= 2 and row["answer"] in filled
        else:
            assert row["answer"] and row["answer"] not in ("A", "B", "C", "D")
    shapes = {tuple(bool(row[k]) for k in "ABCD") for row in rows}
    assert {(True,) * 4, (False,) * 4, (True, True, False, False)} <= shapes


def test_vtc_gt_chains_look_like_the_published_ones(vtc):
    _, rows = _dict_rows(vtc / "VTC-Bench_GTToolChain.tsv")
    curly = [r["model_tools_gt"] for r in rows if "\u201c" in r["model_tools_gt"]]
    assert curly
    for row in rows:
        cell = row["model_tools_gt"]
        if cell not in curly:
            assert json.loads(cell) and json.dumps(json.loads(cell), ensure_ascii=False) == cell
        labels = json.loads(re.sub("[\u201c\u201d]", '"', cell))
        assert 1 <= len(labels) <= 10 and set(labels) <= GT_LABELS


class _Workspace:
    """The episode's images as files, the way a replaying backend hands them to VTC-Bench's tools."""

    def __init__(self, folder: str, original: np.ndarray):
        self.folder, self.images = folder, [original]
        self.original = self.path(0)

    def path(self, index: int) -> str:
        return f"{self.folder}/image_{index}.png"

    def read(self, path: str) -> np.ndarray:
        indices = [i for i in range(len(self.images)) if self.path(i) == path]
        if not indices:
            raise FileNotFoundError(path)
        return self.images[indices[0]]

    def save(self, image: np.ndarray) -> str:
        self.images.append(image)
        return self.path(len(self.images) - 1)


def test_vtc_reference_calls_replay_through_the_published_tools(vtc):
    """Every call names a real opencv_* tool with {image, param} valid for its published schema, reads the
    previous call's output and runs without an error."""
    published = {tool["name"]: tool["parameters"] for tool in
                 json.loads((ROOT / "tools/toolsets/vtc_bench/schemas.json").read_text())["tools"]}
    calls = json.loads((vtc / "reference_calls.json").read_text())
    _, rows = _dict_rows(vtc / "VTC-Bench_GTToolChain.tsv")
    rows = {r["id"]: r for r in rows}
    assert set(calls) < set(rows) and len(calls) > len(rows) / 2
    toolset = get_toolset("vtc_bench")
    for ident, chain in calls.items():
        assert 1 <= len(chain) <= 4
        assert len(chain) == len(json.loads(re.sub("[\u201c\u201d]", '"', rows[ident]["model_tools_gt"])))
        workspace = _Workspace("/episode/scratch", np.asarray(Image.open(vtc / rows[ident]["image"]).convert("RGB")))
        for step, call in enumerate(chain):
            assert call["name"] in published and set(call["arguments"]) == {"image", "param"}
            assert call["arguments"]["image"] == f"{{workspace}}/image_{step}.png"
            validate(call["arguments"], published[call["name"]])
            arguments = {**call["arguments"], "image": workspace.path(step)}
            reply = toolset.run(call["name"], arguments, workspace)
            saved = f"Edited Image Path: {workspace.path(step + 1)}"
            assert not reply.error and reply.text.endswith(saved), (ident, reply.text)


def test_vtc_base64_cells_decode_to_images(tmp_path):
    """A base64 cell outgrows csv's default field limit (128 KiB), as the hub's do: csv readers must raise it."""
    out = write_vtc(tmp_path, images="base64")
    assert not (out / "images").exists()
    for name in ("VTC-Bench.tsv", "VTC-Bench_GTToolChain.tsv"):
        with pytest.raises(csv.Error, match="field larger than field limit"):
            _dict_rows(out / name)
        limit = csv.field_size_limit(2**31 - 1)
        try:
            fields, rows = _dict_rows(out / name)
        finally:
            csv.field_size_limit(limit)
        assert fields[:len(VTC_COLUMNS)] == VTC_COLUMNS and len(rows) == 9
        assert list(pd.read_csv(out / name, sep="\t")["image"]) == [row["image"] for row in rows]
        for row in rows:
            with Image.open(io.BytesIO(base64.b64decode(row["image"], validate=True))) as image:
                assert image.format == "JPEG" and min(image.size) > 32


def test_vtc_fixture_is_deterministic(tmp_path):
    a, b = write_vtc(tmp_path / "a", images="base64"), write_vtc(tmp_path / "b", images="base64")
    for name in ("VTC-Bench.tsv", "VTC-Bench_GTToolChain.tsv", "reference_calls.json"):
        assert (a / name).read_bytes() == (b / name).read_bytes()
    with pytest.raises(FileExistsError):
        write_vtc(a)


# == the papers' tables ===============================================================================================
def _tables(bench: str) -> dict:
    results = json.loads((ROOT / "eval/benchmarks" / bench / "paper_results.json").read_text(encoding="utf-8"))
    return {table["table"]: table for table in results["tables"]}


def test_tir_table_2_has_22_models_and_random_guess_with_consistent_means():
    table = _tables("tir_bench")["Table 2"]
    rows = table["rows"]
    assert [r["model"] for r in rows][0] == "Random Guess" and len(rows) == 23
    groups = [r["group"] for r in rows[1:]]
    assert (groups.count("open-source"), groups.count("proprietary"), groups.count("tool-using")) == (11, 7, 4)
    assert {"o3", "o3-TU", "DeepEyes"} <= {r["model"] for r in rows} and "03" not in {r["model"] for r in rows}
    assert set(table["columns"]) == {"all", *TIR_TASKS}
    assert set(table["samples"]) == TIR_TASKS and sum(table["samples"].values()) == 1215
    nulls = [(r["model"], k) for r in rows for k, v in r["values"].items() if v is None]
    assert nulls == [("Random Guess", "ocr")]
    # All is the sample-weighted mean of the tasks, except the two rows the paper itself gets wrong (notes)
    for row in rows:
        values = row["values"]
        assert set(values) == set(table["columns"]) and all(v is None or 0 <= v <= 100 for v in values.values())
        scored = {k: n for k, n in table["samples"].items() if values[k] is not None}
        weighted = sum(values[k] * n for k, n in scored.items()) / sum(scored.values())
        assert (abs(weighted - values["all"]) <= 0.1) == (row["model"] not in ("Llava-Next-72B", "DeepEyes")), row["model"]
    hubs = {r["model"]: r.get("hub") for r in rows}
    assert hubs["Qwen2.5-VL-7B"] == "Qwen/Qwen2.5-VL-7B-Instruct" and hubs["DeepEyes"] == "ChenShawn/DeepEyes-7B"


def test_tir_table_3_counts_calls_of_table_2s_proprietary_models():
    tables = _tables("tir_bench")
    rows = tables["Table 3"]["rows"]
    proprietary = {r["model"] for r in tables["Table 2"]["rows"] if r["group"] == "proprietary"}
    assert len(rows) == 6 and {r["model"] for r in rows} <= proprietary
    for row in rows:
        assert list(row["values"]) == tables["Table 3"]["columns"] and len(row["values"]) == 6
        missing = [k for k, v in row["values"].items() if v is None]
        assert missing == ([k for k in row["values"] if k.startswith("code")] if row["model"] == "Gemini-2.5-Flash" else [])
        assert all(0 <= v <= 10 for v in row["values"].values() if v is not None)


def test_vtc_table_4_deltas_means_and_item_counts_agree():
    table = _tables("vtc_bench")["Table 4"]
    rows, samples = table["rows"], table["samples"]
    assert sum(samples.values()) == 680 and set(samples) == set(VTC_PREFIXES)
    models = {(r["model"], r["size"]): r["group"] for r in rows}
    assert len(models) == 19 and len(rows) == 57
    assert sorted(list(models.values()).count(g) for g in set(models.values())) == [2, 4, 5, 8]
    base = {(r["model"], r["size"]): r["values"]["overall"] for r in rows if r["setting"] == "Base"}
    for row in rows:
        values = row["values"]
        assert row["setting"] in ("Base", "Code", "Inter.") and set(values) == set(table["columns"])
        if row["setting"] == "Base":
            assert values["delta"] is None
        else:
            assert abs(values["overall"] - base[(row["model"], row["size"])] - values["delta"]) <= 0.02, row
        assert abs(sum(values[k] * n for k, n in samples.items()) / 680 - values["overall"]) <= 0.02, row
        for category, n in samples.items():
            items = values[category] * n / 100
            assert abs(items - round(items)) < 0.01, (row, category)
    hubs = {(r["model"], r["size"]): r.get("hub") for r in rows}
    assert hubs[("Qwen3-VL-Instruct", "8B")] == "Qwen/Qwen3-VL-8B-Instruct"
    assert hubs[("Qwen3-VL-Thinking", "30B-A3B")] == "Qwen/Qwen3-VL-30B-A3B-Thinking"
    assert hubs[("Thyme", "7B")] == "Kwai-Keye/Thyme-RL" and hubs[("DeepEyes", "7B")] == "ChenShawn/DeepEyes-7B"


def test_vtc_table_5_matches_table_4_and_its_own_efficiency():
    tables = _tables("vtc_bench")
    overall = {(r["model"], r["size"], r["setting"]): r["values"]["overall"] for r in tables["Table 4"]["rows"]}
    rows = tables["Table 5"]["rows"]
    assert len(rows) == 8
    for row in rows:
        values, linked = row["values"], row["table4_row"]
        assert overall[(linked["model"], linked["size"], linked["setting"])] == values["apr"]
        assert abs(100 * values["effective_avg_tools"] / values["all_avg_tools"] - values["efficiency"]) <= 0.6, row
        assert 0 <= values["tcr"] <= 100 and values["effective_avg_tools"] <= values["all_avg_tools"]
