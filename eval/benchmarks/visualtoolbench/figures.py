"""VisualToolBench's figures redrawn from a run's records (PNG files in the run's plots/ folder, linked from
report.md), with the paper's points beside ours where the paper gives numbers (`paper_results.json`):

- Figure 3: APR per task category (eval_focus), one bar per setting. The paper labels its bars but its text has no
  numbers: ours only.
- Figure 4: APR against tool-call proactivity, success rate and volume; the paper's points are its OpenAI and
  Gemini models, Table 3's overall APR against Table 8's metrics (single- and multi-turn combined by the 603 / 601
  task counts; the success rate by the calls).
- Figure 5: image manipulation operations per category (cropping, resizing, rotation, flipping, brightness, contrast,
  editing, others), counted from the vision tool calls as `image_operations` classifies them. Ours only.
- Figure 6: single-turn APR with the general vision tool and with the atomic tools, beside Table 14's GPT-5 and
  GPT-4.1 (drawn when the records hold an atomic-tool run).
- Figure 7: APR per ablation setting (strong prompt, weak prompt, no vision tool, no tools), beside the paper's
  strong-prompt APR (Table 3) of its three models; the text gives no numbers for the other bars (drawn when the
  records hold more than the main setting).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

from matplotlib.figure import Figure

from eval.benchmarks import figures as charts
from eval.benchmarks.papers import once_per_task, paper_table
from eval.benchmarks.visualtoolbench.data import PAPER_COUNTS, category_name
from eval.benchmarks.visualtoolbench.scoring import tool_metrics
from eval.benchmarks.visualtoolbench.tables import ATOMIC, FIGURE_7, MAIN, NO_TOOLS, PAPER, apr, call_flags, settings

OPERATIONS = ("cropping", "resizing", "rotation", "flipping", "brightness", "contrast", "editing", "others")
# What marks each operation in a python_image_processing cell (PIL, OpenCV, NumPy and scikit-image idioms). A cell
# counts once per operation it contains (a cell that crops and then enhances contrast is one cropping and one
# contrast); a cell with none of the seven named ones counts as "others" (filters, thresholds, grayscale, plots).
CODE_PATTERNS = {
    "cropping": r"\.crop\(|\[\s*[^\[\]]*:[^\[\]]*,\s*[^\[\]]*:[^\[\]]*\]",  # .crop(...) or img[y0:y1, x0:x1]
    "resizing": r"\.resize\(|\.thumbnail\(|cv2\.resize|rescale\(|\bzoom\(",
    "rotation": r"\.rotate\(|cv2\.rotate|getRotationMatrix2D|np\.rot90|ROTATE_\d+|\.transpose\(\s*Image\.ROTATE",
    "flipping": r"FLIP_LEFT_RIGHT|FLIP_TOP_BOTTOM|ImageOps\.(mirror|flip)|cv2\.flip|np\.(flip|fliplr|flipud)\b",
    "brightness": r"ImageEnhance\.Brightness|brightness|convertScaleAbs\([^)]*beta",
    "contrast": r"ImageEnhance\.Contrast|autocontrast|equalize|createCLAHE|contrast",
    "editing": r"ImageDraw|\.rectangle\(|\.ellipse\(|\.text\(|\.paste\(|cv2\.(putText|rectangle|circle|line|"
               r"arrowedLine|drawContours|inpaint)|\binpaint",
}
# The atomic tools (App. F.2) by the same categories
ATOMIC_OPERATIONS = {"crop_image": "cropping", "resize_image": "resizing", "rotate_image": "rotation",
                     "flip_image": "flipping", "adjust_brightness": "brightness", "adjust_contrast": "contrast"}
ATOMIC_OTHERS = ("adjust_saturation", "adjust_sharpness", "convert_to_grayscale", "apply_filter")
# Figure 4's models (OpenAI and Gemini) and Figure 7's
FIGURE_4_MODELS = ("GPT-4o", "GPT-4.1", "o3", "o4-mini", "GPT-5", "GPT-5-think", "Gemini-3-pro", "Gemini-2.5-pro",
                   "Gemini-2.5-flash")
FIGURE_7_MODELS = ("GPT-5", "Claude-opus-4.1", "Gemini-2.5-pro")
TOOL_METRICS = (("proactivity", "tool-call proactivity (TCP)"), ("success_rate", "tool-call success rate (TCSR)"),
                ("volume", "tool calls per task (TCV)"))


def image_operations(calls: list[tuple[str, object]]) -> dict[str, int]:
    """The image manipulation operations of a task's calls ((name, arguments) pairs, arguments as the JSON text or
    dict the model gave): python_image_processing cells by CODE_PATTERNS, atomic tools by their names."""
    counts = Counter()
    for name, arguments in calls:
        if name in ATOMIC_OPERATIONS:
            counts[ATOMIC_OPERATIONS[name]] += 1
        elif name in ATOMIC_OTHERS:
            counts["others"] += 1
        elif name == "python_image_processing":
            code = _code(arguments)
            found = [op for op, pattern in CODE_PATTERNS.items() if re.search(pattern, code, re.IGNORECASE)]
            counts.update(found or ["others"])
    return dict(counts)


def _code(arguments) -> str:
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return arguments
    return str(arguments.get("code", "")) if isinstance(arguments, dict) else ""


def figures(records: list[dict], config: dict, folder: Path) -> list[tuple[str, str]]:
    """(title, file name) of each figure drawn into `folder`, for the report to link."""
    return [(title, name) for title, name, _ in drawn(records, folder).values()]


def drawn(records: list[dict], folder: Path) -> dict[int, tuple[str, str, Figure]]:
    """The figures the records allow, by the paper's number: (title, file name, the figure)."""
    tasks = once_per_task([r for r in records if isinstance(r.get("visualtoolbench"), dict)])
    if not tasks:
        return {}
    folder.mkdir(parents=True, exist_ok=True)
    groups = settings(tasks)
    found = {3: _figure_3(groups, folder), 4: _figure_4(groups, folder), 5: _figure_5(groups, folder)}
    present = {name for name, _ in groups}
    if ATOMIC in present:
        found[6] = _figure_6(groups, folder)
    if present - {MAIN}:
        found[7] = _figure_7(groups, folder)
    return found


def _label(name: str) -> str:
    return "this run" if name == MAIN else FIGURE_7.get(name, name)


def _figure_3(groups, folder: Path) -> tuple[str, str]:
    categories = list(PAPER_COUNTS["category"])
    categories += sorted({category_name(r["visualtoolbench"].get("eval_focus")) for _, g in groups for r in g}
                         - set(categories))
    ours = {_label(name): [apr([r for r in group if category_name(r["visualtoolbench"].get("eval_focus")) == c])
                           for c in categories] for name, group in groups}
    title = "Figure 3: APR per task category"
    figure = charts.bars(folder / "figure_3_apr_by_category.png", title, categories, ours, ylabel="APR (%)")
    return title, "figure_3_apr_by_category.png", figure


def _figure_4(groups, folder: Path) -> tuple[str, str]:
    paper = _paper_tool_points()
    panels = []
    for metric, axis in TOOL_METRICS:
        ours = {_label(name): (tool_metrics([call_flags(r) for r in group])[metric], apr(group))
                for name, group in groups if name != NO_TOOLS}
        panels.append((axis.split(" (")[0], axis, "APR (%)", ours,
                       {model: (point[metric], point["apr"]) for model, point in paper.items()}))
    title = "Figure 4: APR against tool-call proactivity, success rate and volume"
    figure = charts.scatter(folder / "figure_4_apr_vs_tool_use.png", "Figure 4: APR against tool use (ours filled; "
                            "the paper's OpenAI and Gemini models hollow, Tables 3 and 8)", panels)
    return title, "figure_4_apr_vs_tool_use.png", figure


def _paper_tool_points() -> dict[str, dict[str, float]]:
    """Figure 4's points from the paper's tables: overall APR (Table 3) and Table 8's single- and multi-turn metrics
    combined by the task counts (proactivity, volume) and by the calls (success rate)."""
    aprs = {row["model"]: row["values"]["overall"] for row in paper_table(PAPER, "Table 3")["rows"]}
    single, multi = PAPER_COUNTS["turncase"]["single-turn"], PAPER_COUNTS["turncase"]["multi-turn"]
    points = {}
    for row in paper_table(PAPER, "Table 8")["rows"]:
        if row["model"] not in FIGURE_4_MODELS or row["model"] not in aprs:
            continue
        v = row["values"]
        calls_single, calls_multi = single * v["single_volume"], multi * v["multi_volume"]
        points[row["model"]] = {
            "apr": aprs[row["model"]],
            "proactivity": (single * v["single_proactivity"] + multi * v["multi_proactivity"]) / (single + multi),
            "success_rate": (calls_single * v["single_success_rate"] + calls_multi * v["multi_success_rate"])
            / (calls_single + calls_multi),
            "volume": (calls_single + calls_multi) / (single + multi)}
    return points


def _figure_5(groups, folder: Path) -> tuple[str, str]:
    ours = {}
    for name, group in groups:
        if name == NO_TOOLS:
            continue
        counts = Counter()
        for record in group:
            counts.update(record.get("image_operations") or {})
        ours[_label(name)] = [counts[op] for op in OPERATIONS]
    title = "Figure 5: image manipulation operations"
    figure = charts.bars(folder / "figure_5_image_operations.png", title, list(OPERATIONS), ours,
                         ylabel="operations", ylim=None)
    return title, "figure_5_image_operations.png", figure


def _figure_6(groups, folder: Path) -> tuple[str, str]:
    labels = ["general vision tool", "atomic vision tools"]
    by_name = dict(groups)
    single = {name: [r for r in by_name.get(name, []) if r["visualtoolbench"].get("turncase") != "multi-turn"]
              for name in (MAIN, ATOMIC)}
    ours = {"this run": [apr(single[MAIN]), apr(single[ATOMIC])]}
    rows = paper_table(PAPER, "Table 14")["rows"]
    paper = {}
    for row in rows:
        paper.setdefault(row["model"], [None, None])[labels.index(row["setup"])] = row["values"]["single_overall"]
    title = "Figure 6: single-turn APR, general vs atomic vision tools"
    figure = charts.bars(folder / "figure_6_general_vs_atomic.png", title, labels, ours, paper, ylabel="APR (%)",
                         ylim=(0, 100))
    return title, "figure_6_general_vs_atomic.png", figure


def _figure_7(groups, folder: Path) -> tuple[str, str]:
    by_name = dict(groups)
    # Figure 7's four settings, then any other combination run (the atomic tools are Figure 6's)
    names = [*FIGURE_7, *(name for name in by_name if name not in FIGURE_7 and name != ATOMIC)]
    ours = {"this run": [apr(by_name[name]) if name in by_name else None for name in names]}
    strong = {row["model"]: row["values"]["overall"] for row in paper_table(PAPER, "Table 3")["rows"]}
    paper = {model: [strong.get(model)] + [None] * (len(names) - 1) for model in FIGURE_7_MODELS}
    title = "Figure 7: APR per ablation setting"
    figure = charts.bars(folder / "figure_7_ablations.png", title, [FIGURE_7.get(n, n) for n in names], ours, paper,
                         ylabel="APR (%)", ylim=(0, 100))
    return title, "figure_7_ablations.png", figure
