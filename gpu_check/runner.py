"""Run steps, each in its own subprocess with its own timeout, and write the report.

A step is a command that writes a JSON result file (path in GPU_CHECK_RESULT) and exits 0:
    {"metrics": {...}, "checks": [{"name", "ok", "detail"}], "targets": [{"name", "value", "target", "met"}],
     "notes": [...], "tables": [markdown, ...]}
Its status:
- crashed: it exited non-zero, ran past its timeout, or wrote no readable result (the log's tail is reported);
- failed: it finished, but a check failed (a wrong result: an op off its OpenCV reference, a missing wheel);
- target missed: it finished, every check passed, a performance target was not reached ("met": false);
- passed; or skipped: not started, the run's time budget was spent.
A target with "met": null is not judged (the rehearsal's CPU numbers).
Exit status of the whole run: 0 all passed, 1 a step crashed, failed or was skipped, 3 only targets missed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

PASSED, FAILED, CRASHED, TARGET_MISSED, SKIPPED = "passed", "failed", "crashed", "target missed", "skipped"
LOG_TAIL = 3000  # characters of a failing step's log in the report
MIN_START_S = 10  # a step is not started with less of the run's budget left


@dataclass
class Step:
    name: str
    title: str
    command: list[str]
    timeout_s: float
    env: dict = field(default_factory=dict)  # added to the run's environment for this step


@dataclass
class Outcome:
    name: str
    title: str
    status: str
    seconds: float = 0.0
    timeout_s: float = 0.0
    returncode: int | None = None
    result: dict = field(default_factory=dict)
    reason: str = ""  # why it crashed, failed or missed, in a line
    log: str = ""  # path of the full log
    log_tail: str = ""

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def run_step(step: Step, env: dict, log_dir: Path, cwd: Path, timeout_s: float | None = None) -> Outcome:
    """Run one step to its end or its timeout; its log and result go to `log_dir`. Never raises for what the step
    does."""
    timeout = step.timeout_s if timeout_s is None else timeout_s
    log_path, result_path = log_dir / f"{step.name}.log", log_dir / f"{step.name}.result.json"
    result_path.unlink(missing_ok=True)
    outcome = Outcome(step.name, step.title, CRASHED, timeout_s=round(timeout, 1), log=str(log_path))
    started = time.monotonic()
    with open(log_path, "wb") as log:
        try:
            # a session of its own: on a timeout the step and every process it started are stopped together
            process = subprocess.Popen(step.command, cwd=cwd,
                                       env={**env, **step.env, "GPU_CHECK_RESULT": str(result_path)},
                                       stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                       start_new_session=True)
        except OSError as err:
            outcome.reason = f"could not start {step.command[0]}: {err}"
            return outcome
        try:
            outcome.returncode = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            outcome.reason = f"ran past its timeout of {timeout:.0f} s and was stopped"
        except BaseException:  # Ctrl-C: the step's session does not get the terminal's signal, so stop it here
            _stop_group(process)
            raise
        _stop_group(process)  # what the step left running, or all of it after a timeout
    outcome.seconds = round(time.monotonic() - started, 1)
    outcome.log_tail = _tail(log_path)
    if outcome.reason:
        return outcome
    if outcome.returncode != 0:
        outcome.reason = f"exited with status {outcome.returncode}"
        return outcome
    try:
        outcome.result = json.loads(result_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        outcome.reason = f"wrote no readable result ({type(err).__name__}: {err})"
        return outcome
    failed = [c for c in outcome.result.get("checks", []) if not c.get("ok")]
    missed = [t for t in outcome.result.get("targets", []) if t.get("met") is False]
    if failed:
        outcome.status = FAILED
        outcome.reason = "; ".join(f"{c['name']}: {c.get('detail', '')}".rstrip(": ") for c in failed)
    elif missed:
        outcome.status = TARGET_MISSED
        outcome.reason = "; ".join(f"{t['name']}: {_value(t)} (target {t['target']})" for t in missed)
    else:
        outcome.status = PASSED
    if outcome.status == PASSED:
        outcome.log_tail = ""
    return outcome


def run_steps(steps: list[Step], env: dict, log_dir: Path, cwd: Path, budget_s: float, echo=print) -> list[Outcome]:
    """Every step, in order, whatever the earlier ones did; each gets its own timeout or what is left of the
    budget, whichever is less. The last step (the report of versions) keeps its timeout's worth of the budget."""
    deadline = time.monotonic() + budget_s
    outcomes = []
    for k, step in enumerate(steps):
        reserve = steps[-1].timeout_s if k < len(steps) - 1 else 0.0
        left = deadline - time.monotonic() - reserve
        if left < MIN_START_S:
            outcome = Outcome(step.name, step.title, SKIPPED, timeout_s=step.timeout_s,
                              reason=f"not started: {max(left, 0):.0f} s of the run's {budget_s:.0f} s budget left")
        else:
            echo(f"[gpu-check] {step.name}: {step.title} (timeout {min(step.timeout_s, left):.0f} s)", flush=True)
            outcome = run_step(step, env, log_dir, cwd, timeout_s=min(step.timeout_s, left))
        echo(f"[gpu-check] {step.name}: {outcome.status.upper()} in {outcome.seconds:.0f} s"
             + (f" - {outcome.reason}" if outcome.reason else ""), flush=True)
        outcomes.append(outcome)
    return outcomes


def exit_status(outcomes: list[Outcome]) -> int:
    if any(o.status in (CRASHED, FAILED, SKIPPED) for o in outcomes):
        return 1
    return 3 if any(o.status == TARGET_MISSED for o in outcomes) else 0


def counts(outcomes: list[Outcome]) -> dict[str, int]:
    return {status: sum(o.status == status for o in outcomes)
            for status in (PASSED, TARGET_MISSED, FAILED, CRASHED, SKIPPED)}


# -- the report ---------------------------------------------------------------------------------------------
def write_report(directory: Path, header: dict, outcomes: list[Outcome]) -> tuple[Path, Path]:
    """report.json (everything) and report.md (for a person) in `directory`."""
    report = {**header, "counts": counts(outcomes), "exit_status": exit_status(outcomes),
              "steps": [o.to_dict() for o in outcomes]}
    json_path, md_path = directory / "report.json", directory / "report.md"
    json_path.write_text(json.dumps(report, indent=1, default=str) + "\n", encoding="utf-8")
    md_path.write_text(render_markdown(report), encoding="utf-8")
    return md_path, json_path


def render_markdown(report: dict) -> str:
    rehearsal = report.get("rehearsal")
    title = "# GPU acceptance check: REHEARSAL on a CPU" if rehearsal else "# GPU acceptance check"
    lines = [title, ""]
    if rehearsal:
        lines += ["**Rehearsal**: no CUDA here. Every step ran on the CPU at small sizes to test the plumbing; its "
                  "numbers are no measurement of a GPU and its performance targets are not judged.", ""]
    for key, value in report.get("about", {}).items():
        lines.append(f"- {key}: {value}")
    c = report["counts"]
    lines += ["", f"**Verdict: {_verdict(report)}** ({c[PASSED]} passed, {c[TARGET_MISSED]} target(s) missed, "
              f"{c[FAILED]} failed, {c[CRASHED]} crashed, {c[SKIPPED]} skipped; exit status {report['exit_status']})",
              "", "| step | status | time | timeout | what |", "|---|---|---:|---:|---|"]
    for step in report["steps"]:
        lines.append(f"| {step['name']} | {step['status']} | {step['seconds']:.0f} s | {step['timeout_s']:.0f} s | "
                     f"{step['title']} |")
    for note in report.get("not_covered", []):
        lines += ["", f"**Not covered:** {note}"]
    for step in report["steps"]:
        lines += ["", f"## {step['name']}: {step['title']}", "", f"Status: **{step['status']}**"
                  + (f" - {step['reason']}" if step["reason"] else ""), ""]
        result = step.get("result") or {}
        targets = result.get("targets", [])
        if targets:
            lines += ["| target | value | required | met |", "|---|---:|---|---|"]
            for t in targets:
                met = {True: "yes", False: "**NO**", None: "not judged"}[t.get("met")]
                lines.append(f"| {t['name']} | {_value(t)} | {t['target']} | {met} |")
            lines.append("")
        checks = result.get("checks", [])
        if checks:
            lines += [f"- check {c['name']}: {'ok' if c['ok'] else '**FAILED**'}"
                      + (f" - {c['detail']}" if c.get("detail") else "") for c in checks]
            lines.append("")
        for key, value in result.get("metrics", {}).items():
            if not isinstance(value, (dict, list)):
                lines.append(f"- {key}: {_number(value)}")
        lines += [""] + [f"{table}\n" for table in result.get("tables", [])]
        lines += [f"- note: {note}" for note in result.get("notes", [])]
        if step.get("log_tail"):
            lines += ["", f"Log tail ({step['log']}):", "", "```", step["log_tail"], "```"]
    return "\n".join(lines).rstrip() + "\n"


def summary_lines(report_path: Path, outcomes: list[Outcome], rehearsal: bool) -> list[str]:
    """The short summary printed at the end."""
    what = "REHEARSAL (no CUDA: CPU, small sizes, targets not judged)" if rehearsal else "GPU acceptance check"
    lines = [f"== {what}: {_verdict({'counts': counts(outcomes), 'exit_status': exit_status(outcomes)})}"]
    for o in outcomes:
        headline = (o.result or {}).get("headline", "")
        lines.append(f"  {o.status.upper():13s} {o.name:12s} {o.seconds:5.0f} s  {o.reason or headline}"[:400])
    lines.append(f"  report: {report_path}")
    return lines


def _verdict(report: dict) -> str:
    return {0: "PASS", 3: "TARGETS MISSED"}.get(report["exit_status"], "FAIL")


def _value(target: dict) -> str:
    return _number(target.get("value")) + (f" {target['unit']}" if target.get("unit") else "")


def _number(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1e5 else f"{value:,.0f}"
    return "-" if value is None else str(value)


def _tail(path: Path) -> str:
    try:
        with open(path, "rb") as log:
            log.seek(0, os.SEEK_END)
            log.seek(max(0, log.tell() - LOG_TAIL))
            return log.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _stop_group(process: subprocess.Popen, grace_s: float = 5.0) -> None:
    """SIGTERM to the step's process group (the step and all it started), SIGKILL to what is left after a grace."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        return  # nothing left
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        process.poll()  # reaps the step itself once it is gone; the group lives on while anything in it does
        try:
            os.killpg(process.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        pass
