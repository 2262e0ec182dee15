"""The reward and tool-use curves of a train/grpo.py run, from its `trainer_state.json`: one PNG, and a markdown
table of the logged values.

    python train/rl_curves.py runs/grpo-toy/run --out docs/rl/curves.png
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PANELS = {  # panel title -> logged keys
    "reward terms (mean)": ["rewards/accuracy/mean", "rewards/format/mean", "rewards/tool/mean", "reward"],
    "tool use": ["tools/call_rate", "tools/calls_per_episode", "tools/success_rate", "episodes/answer_rate"],
    "episodes": ["episodes/turns", "episodes/response_tokens"],
}


def curves(run: str | Path) -> dict[str, list[tuple[int, float]]]:
    state = Path(run) / "trainer_state.json"
    if not state.is_file():
        raise ValueError(f"{state} not found: give the output_dir of a finished train/grpo.py run")
    history = json.loads(state.read_text(encoding="utf-8"))["log_history"]
    keys = [key for panel in PANELS.values() for key in panel]
    return {key: [(entry["step"], entry[key]) for entry in history if key in entry] for key in keys}


def plot(series: dict, out: Path, title: str) -> None:
    from matplotlib.figure import Figure

    figure = Figure(figsize=(13, 3.6))
    for ax, (name, keys) in zip(figure.subplots(1, len(PANELS)), PANELS.items()):
        for key in keys:
            if series[key]:
                steps, values = zip(*series[key])
                ax.plot(steps, values, label=key.removeprefix("rewards/").removesuffix("/mean"))
        ax.set_title(name)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    figure.suptitle(title)
    figure.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=110)


def table(series: dict, every: int) -> str:
    steps = sorted({step for values in series.values() for step, _ in values})
    keys = [key for key, values in series.items() if values]
    shown = [step for i, step in enumerate(steps) if i % every == 0 or step == steps[-1]]
    rows = ["| step | " + " | ".join(keys) + " |", "|---" * (len(keys) + 1) + "|"]
    for step in shown:
        values = {key: dict(series[key]).get(step) for key in keys}
        rows.append(f"| {step} | " + " | ".join("-" if v is None else f"{v:.3g}" for v in values.values()) + " |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", help="a train/grpo.py output_dir")
    parser.add_argument("--out", help="PNG path (default: RUN/curves.png)")
    parser.add_argument("--every", type=int, default=5, help="table: every N-th logged step")
    args = parser.parse_args(argv)
    series = curves(args.run)
    out = Path(args.out or Path(args.run) / "curves.png")
    plot(series, out, f"GRPO: {args.run}")
    print(table(series, args.every))
    print(f"\ncurves: {out}")


if __name__ == "__main__":
    from runtime import cli

    sys.exit(cli.run(main))
