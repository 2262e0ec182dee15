"""The plumbing of `make gpu-check` (gpu_check/): the wheel set's completeness check on synthetic wheels, the size of
what travels, the step runner's handling of steps that pass, fail, crash, miss a target or run out of time, the
report, the machine-like site of the rehearsal, and one real step (tools/bench.py) run as the rehearsal runs it.
Needs no wheels folder and no network."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from gpu_check import check, rehearsal_site, runner, steps, wheelset

ROOT = Path(__file__).resolve().parents[1]
MACHINE = {"python": "3.12.3", "numpy": "2.5.2", "torch": "2.11.0", "packaging": None, "pyyaml": None}


def make_wheel(folder: Path, name: str, version: str, requires=(), tag: str = "py3-none-any",
               requires_python: str | None = None) -> Path:
    """A minimal wheel: a module and a METADATA with the given Requires-Dist lines."""
    folder.mkdir(parents=True, exist_ok=True)
    stem = name.replace("-", "_")
    path = folder / f"{stem}-{version}-{tag}.whl"
    metadata = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    metadata += [f"Requires-Python: {requires_python}"] if requires_python else []
    metadata += [f"Requires-Dist: {line}" for line in requires]
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{stem}/__init__.py", f"VERSION = {version!r}\n")
        archive.writestr(f"{stem}-{version}.dist-info/METADATA", "\n".join(metadata) + "\n")
        archive.writestr(f"{stem}-{version}.dist-info/WHEEL",
                         f"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: {tag}\n")
        archive.writestr(f"{stem}-{version}.dist-info/RECORD", "")
    return path


def complete_set(folder: Path) -> dict[str, str]:
    make_wheel(folder, "toolkit", "1.0", ["helper>=2", "numpy>=2", "pyyaml", 'colorama; sys_platform == "win32"',
                                          'tomli; python_version < "3.11"', 'pytest; extra == "test"'])
    make_wheel(folder, "helper", "2.1", ["packaging"], tag="cp312-cp312-manylinux_2_17_x86_64", requires_python=">=3.9")
    return {"toolkit": "1.0", "helper": "2.1"}


# -- the wheel set --------------------------------------------------------------------------------------
def test_a_complete_set_passes_and_skips_extras_and_other_platforms(tmp_path):
    pins = complete_set(tmp_path)
    result = wheelset.check_wheels(tmp_path, pins, MACHINE)
    assert result.ok, result.problems
    assert {w.name for w in result.wheels} == {"toolkit", "helper"}
    # pyyaml and packaging are on the machine in unlisted versions: unverified, only where a version is asked for
    assert result.unverified == []
    make_wheel(tmp_path, "other", "1.0", ["pyyaml>=6"])
    result = wheelset.check_wheels(tmp_path, {**pins, "other": "1.0"}, MACHINE)
    assert result.ok and any("pyyaml>=6" in line for line in result.unverified)


def test_a_missing_dependency_is_caught(tmp_path):
    pins = complete_set(tmp_path)
    make_wheel(tmp_path, "needy", "0.1", ["absent-package>=1"])
    result = wheelset.check_wheels(tmp_path, {**pins, "needy": "0.1"}, MACHINE)
    assert not result.ok
    assert any("absent-package>=1" in p and "neither on the machine nor carried" in p for p in result.problems)


def test_a_duplicate_version_is_caught(tmp_path):
    pins = complete_set(tmp_path)
    make_wheel(tmp_path, "helper", "2.0", ["packaging"])
    result = wheelset.check_wheels(tmp_path, pins, MACHINE)
    assert any("helper: 2 versions carried" in p for p in result.problems), result.problems


def test_version_conflicts_with_the_machine_and_between_wheels_are_caught(tmp_path):
    pins = complete_set(tmp_path)
    make_wheel(tmp_path, "old-numpy-user", "1.0", ["numpy<2", "helper>=3"])
    result = wheelset.check_wheels(tmp_path, {**pins, "old-numpy-user": "1.0"}, MACHINE)
    assert any("needs numpy<2; the machine has numpy 2.5.2" in p for p in result.problems), result.problems
    assert any("needs helper>=3; the carried helper is 2.1" in p for p in result.problems), result.problems


def test_wrong_platform_python_and_pins_are_caught(tmp_path):
    pins = complete_set(tmp_path)
    make_wheel(tmp_path, "macwheel", "1.0", tag="cp312-cp312-macosx_11_0_arm64")
    make_wheel(tmp_path, "py313only", "1.0", requires_python=">=3.13")
    result = wheelset.check_wheels(tmp_path, {**pins, "macwheel": "1.0", "py313only": "1.0", "unfetched": "1.0"},
                                   MACHINE)
    problems = "\n".join(result.problems)
    assert "macwheel-1.0-cp312-cp312-macosx_11_0_arm64.whl: built for" in problems
    assert "needs Python >=3.13" in problems
    assert "unfetched==1.0 is pinned in wheels.txt but not downloaded: run `make gpu-wheels`" in problems
    result = wheelset.check_wheels(tmp_path, {"toolkit": "1.0"}, MACHINE)
    assert any("helper 2.1 is carried but not in wheels.txt" in p for p in result.problems)


def test_no_wheel_folder_says_to_run_make_gpu_wheels(tmp_path):
    result = wheelset.check_wheels(tmp_path / "wheels", {"toolkit": "1.0"}, MACHINE)
    assert not result.ok and "run `make gpu-wheels`" in result.problems[0]
    assert "make gpu-wheels" in check.missing_wheels_message(tmp_path / "wheels", gpu=False)
    assert "carry" in check.missing_wheels_message(tmp_path / "wheels", gpu=True)
    assert check.missing_wheels_message(ROOT / "gpu_check", gpu=False) is not None  # a folder without wheels


def test_needed_distributions_must_be_carried_or_on_the_machine(tmp_path):
    pins = complete_set(tmp_path)
    result = wheelset.check_wheels(tmp_path, pins, MACHINE, needed={"numpy": "tools", "kornia": "tools/ops"})
    assert result.problems == ["kornia (tools/ops) is neither on the machine nor carried: add it to "
                               "gpu_check/wheels.txt"]


def test_the_committed_lists_agree_with_the_lock_file():
    pins = wheelset.read_pins()
    lock = {}
    for line in (ROOT / "requirements" / "cpu.lock").read_text().splitlines():
        name, _, version = line.partition("==")
        lock[wheelset.canonicalize_name(name)] = version.split("+")[0]
    assert pins and all(lock.get(name) == version for name, version in pins.items()), \
        {name: (version, lock.get(name)) for name, version in pins.items() if lock.get(name) != version}
    machine = wheelset.read_machine_packages()
    assert machine["torch"] == "2.11.0" and machine["python"].startswith("3.12") and "kornia" not in machine
    assert "trl" in pins and "kornia" in pins  # what the machine lacks and tirlab's checked paths import


def test_the_rehearsal_imitates_the_machines_own_versions(tmp_path):
    pins = tmp_path / "rehearsal_wheels.txt"
    pins.write_text("toolkit==1.0\nhelper==2.1\n")
    machine = {"toolkit": "1.0", "helper": "2.0"}
    make_wheel(tmp_path / "w", "toolkit", "1.0")
    make_wheel(tmp_path / "w", "helper", "2.1", tag="cp312-cp312-manylinux_2_17_x86_64")
    problems = wheelset.check_rehearsal_wheels(tmp_path / "w", pins, machine)
    assert len(problems) == 2
    assert "not pure Python" in problems[0] and "is not the machine's version (2.0" in problems[1]
    assert "run `make gpu-wheels`" in wheelset.check_rehearsal_wheels(tmp_path / "none", pins, machine)[0]
    committed = wheelset.read_pins(wheelset.REHEARSAL_PINS_FILE)  # the real list: the machine's versions
    real_machine = wheelset.read_machine_packages()
    assert committed and all(real_machine[name] == version for name, version in committed.items())


def test_pins_file_rejects_loose_or_repeated_pins(tmp_path):
    bad = tmp_path / "wheels.txt"
    bad.write_text("trl>=1.0\n")
    with pytest.raises(ValueError, match="NAME==VERSION"):
        wheelset.read_pins(bad)
    bad.write_text("trl==1.0\nTRL==1.1\n")
    with pytest.raises(ValueError, match="pinned twice"):
        wheelset.read_pins(bad)


# -- what travels ---------------------------------------------------------------------------------------
def test_travel_size_counts_tracked_and_untracked_files_not_ignored_ones(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(git[:3] + ["init", "-q"], check=True)
    (repo / ".gitignore").write_text("ignored/\n")
    (repo / "tracked.bin").write_bytes(b"x" * 1000)
    subprocess.run(git + ["add", "."], check=True)
    subprocess.run(git + ["commit", "-q", "-m", "one"], check=True)
    (repo / "untracked.bin").write_bytes(b"y" * 500)
    (repo / "ignored").mkdir()
    (repo / "ignored" / "big.bin").write_bytes(b"z" * 10_000)
    wheels = repo / "ignored" / "wheels"
    make_wheel(wheels, "toolkit", "1.0")
    wheel_bytes = sum(p.stat().st_size for p in wheels.glob("*.whl"))
    size = wheelset.travel_size(repo, wheels, limit=10**6)
    assert size["project_bytes"] == 1000 + 500 + len("ignored/\n")
    assert size["wheels_bytes"] == wheel_bytes and size["fits"]
    over = wheelset.travel_size(repo, wheels, limit=size["total_bytes"] - 1)
    assert not over["fits"]
    assert "DOES NOT FIT" in wheelset.describe(wheelset.WheelCheck(), over)


# -- the runner -----------------------------------------------------------------------------------------
def python_step(name: str, code: str, timeout: float = 60) -> runner.Step:
    return runner.Step(name, f"test step {name}", [sys.executable, "-c", textwrap.dedent(code)], timeout)


WRITE = "import json, os\nwrite = lambda r: open(os.environ['GPU_CHECK_RESULT'], 'w').write(json.dumps(r))\n"


def test_the_runner_reports_each_kind_of_outcome_and_runs_every_step(tmp_path):
    step_list = [
        python_step("ok", WRITE + "write({'metrics': {'x': 1.5}, 'checks': [{'name': 'c', 'ok': True}], "
                                  "'targets': [{'name': 't', 'value': 3, 'target': '>= 2', 'met': True}]})"),
        python_step("crash", "import sys; print('the crash message'); sys.exit(3)"),
        python_step("silent", "print('exits 0, writes nothing')"),
        python_step("wrong", WRITE + "write({'checks': [{'name': 'parity', 'ok': False, 'detail': 'rotate off'}]})"),
        python_step("slow", WRITE + "write({'targets': [{'name': 'speedup', 'value': 5, 'target': '>= 20x', "
                                    "'met': False, 'unit': 'x'}, {'name': 'cpu', 'value': 1, 'target': '-', "
                                    "'met': None}]})"),
        # a shell starts in milliseconds: it prints long before its timeout, even on a loaded machine
        runner.Step("hang", "test step hang", ["sh", "-c", "echo hanging; exec sleep 600"], 2),
    ]
    lines = []
    outcomes = runner.run_steps(step_list, dict(__import__("os").environ), tmp_path, tmp_path, budget_s=300,
                                echo=lambda *a, **k: lines.append(" ".join(map(str, a))))
    status = {o.name: o.status for o in outcomes}
    assert status == {"ok": "passed", "crash": "crashed", "silent": "crashed", "wrong": "failed",
                      "slow": "target missed", "hang": "crashed"}
    by_name = {o.name: o for o in outcomes}
    assert "status 3" in by_name["crash"].reason and "the crash message" in by_name["crash"].log_tail
    assert "no readable result" in by_name["silent"].reason
    assert by_name["wrong"].reason == "parity: rotate off"
    assert "speedup: 5 x (target >= 20x)" in by_name["slow"].reason
    assert "timeout" in by_name["hang"].reason and "hanging" in by_name["hang"].log_tail
    assert by_name["ok"].log_tail == "" and by_name["ok"].result["metrics"] == {"x": 1.5}
    assert runner.exit_status(outcomes) == 1
    assert runner.exit_status([by_name["ok"], by_name["slow"]]) == 3  # missed targets only: told apart
    assert runner.exit_status([by_name["ok"]]) == 0
    assert any("CRASHED" in line for line in lines)


def test_the_budget_skips_steps_it_cannot_start(tmp_path):
    step_list = [python_step("first", WRITE + "write({})"), python_step("second", WRITE + "write({})")]
    outcomes = runner.run_steps(step_list, {}, tmp_path, tmp_path, budget_s=runner.MIN_START_S - 1,
                                echo=lambda *a, **k: None)
    assert [o.status for o in outcomes] == ["skipped", "skipped"] and runner.exit_status(outcomes) == 1


def test_the_report_tells_a_rehearsal_and_each_step(tmp_path):
    outcomes = [runner.Outcome("good", "a good step", runner.PASSED, seconds=1.0, timeout_s=10,
                               result={"metrics": {"speed": 12.5}, "tables": ["| a |\n|---|\n| 1 |"],
                                       "targets": [{"name": "t", "value": 1.0, "target": ">= 2", "met": None}]}),
                runner.Outcome("bad", "a bad step", runner.CRASHED, seconds=2.0, timeout_s=10,
                               reason="exited with status 1", log="bad.log", log_tail="Traceback: boom")]
    md, js = runner.write_report(tmp_path, {"rehearsal": True, "about": {"mode": "rehearsal"},
                                            "not_covered": ["vLLM on a GPU"]}, outcomes)
    text = md.read_text()
    assert "REHEARSAL" in text and "Verdict: FAIL" in text and "Not covered:** vLLM on a GPU" in text
    assert "| bad | crashed |" in text and "Traceback: boom" in text and "not judged" in text
    report = json.loads(js.read_text())
    assert report["exit_status"] == 1 and report["counts"]["crashed"] == 1
    summary = "\n".join(runner.summary_lines(md, outcomes, rehearsal=True))
    assert "REHEARSAL" in summary and "CRASHED" in summary and "exited with status 1" in summary


# -- pieces of the steps --------------------------------------------------------------------------------
def test_equal_within_noise_rule():
    assert steps.two_proportion_p(95, 100, 95, 100) == 1.0
    assert steps.two_proportion_p(0, 100, 0, 100) == 1.0
    assert steps.two_proportion_p(95, 100, 90, 100) > steps.NOISE_ALPHA
    assert steps.two_proportion_p(95, 100, 50, 100) < 1e-6
    reference = {"scores": {f"t{k}": 1.0 if k < 95 else 0.0 for k in range(100)}}
    same = steps.compare_with_reference({"scores": dict(reference["scores"])}, reference)
    assert same["equal_within_noise"] and same["tasks"] == 100 and same["tasks_scored_differently"] == 0
    worse = steps.compare_with_reference({"scores": {t: float(k % 2) for k, t in enumerate(reference["scores"])}},
                                         reference)
    assert not worse["equal_within_noise"]
    subset = steps.compare_with_reference({"scores": {"t0": 1.0, "t99": 0.0, "other": 1.0}}, reference)
    assert subset["tasks"] == 2 and subset["missing_from_reference"] == 1


def fake_eval_run(correct: int, images: str = "same", n: int = 100) -> dict:
    return {"n": n, "correct": correct, "accuracy": correct / n, "tool_call_rate": 1.0,
            "scores": {f"t{k}": float(k < correct) for k in range(n)},
            "images": {f"t{k}": f"{images}{k}" for k in range(n)}, "episodes_per_s": {"value": 9.0, "how": "bar"}}


@pytest.mark.parametrize("images, gpu_correct, judged_against, ok", [
    ("same", 94, "the CPU reference", True),   # one task apart: noise
    ("same", 60, "the CPU reference", False),  # the GPU reads much worse
    ("other", 60, "this machine's CPU", True),  # other renderings of the tasks: the machine's CPU reads as badly
])
def test_eval_judges_the_gpu_against_the_cpu_on_the_same_task_images(tmp_path, monkeypatch, images, gpu_correct,
                                                                      judged_against, ok):
    reference = tmp_path / "reference.json"
    model = {k: v for k, v in fake_eval_run(95).items() if k != "episodes_per_s"}
    reference.write_text(json.dumps({"source": "test", "models": {"agentic": model, "direct": model}}))
    monkeypatch.setattr(steps, "TOY_EVAL_REFERENCE", reference)
    calls = []

    def run(form, out, per_task, batch_size, cpu=False):
        calls.append(cpu)
        return fake_eval_run(gpu_correct if not cpu else 61, images)

    monkeypatch.setattr(steps, "run_toy_eval", run)
    result = steps.Result()
    steps.step_eval(steps.Context("gpu", tmp_path, tmp_path, tmp_path, tmp_path), result)
    judged = [c for c in result.data["checks"] if "within noise" in c["name"]]
    assert [c["name"] for c in judged] == [f"{form}: accuracy equal to {judged_against}'s within noise"
                                           for form in ("agentic", "direct")]
    assert all(c["ok"] == ok for c in judged), judged
    assert calls == ([False, False] if images == "same" else [False, True, False, True])


def test_episode_rate_comes_from_the_progress_bar_else_the_wall_clock():
    output = "100%|##| 16/16 [00:00<00:00, 29.04episode/s, acc[tools]=0.938]\n"
    assert steps.episodes_per_second(output, 16, 4.0) == {"value": 29.04, "how": "progress bar: episodes only"}
    assert steps.episodes_per_second("100%| 16/16 [00:40<00:00,  2.50s/episode]", 16, 50.0)["value"] == 0.4
    assert steps.episodes_per_second("no bar", 16, 4.0) == {"value": 4.0, "how": "whole command, start-up included"}


def test_parity_results_are_read_per_op_from_junit(tmp_path):
    report = tmp_path / "parity.xml"
    report.write_text(
        '<testsuites><testsuite>'
        '<testcase name="test_torch_matches_opencv[rotate-cuda]" />'
        '<testcase name="test_torch_matches_opencv[blur-cuda]"><failure message="blur: 0.2 of pixels differ&#10;more"/>'
        '</testcase><testcase name="test_torch_matches_opencv[blur-cpu]" />'
        '<testcase name="test_mixed_batch_keeps_call_order_and_isolates_errors" />'
        '</testsuite></testsuites>')
    ops, others = steps.parity_results(report, "cuda")
    assert ops == {"rotate": {"ok": True, "detail": ""}, "blur": {"ok": False, "detail": "failure: blur: 0.2 of "
                                                                                         "pixels differ"}}
    assert list(others) == ["test_mixed_batch_keeps_call_order_and_isolates_errors"]


def test_the_rehearsal_site_hides_what_the_machine_lacks(tmp_path):
    """A process with the machine-like site imports a machine package and fails on one the machine lacks, and its
    trace records what it imported."""
    site = tmp_path / "machine-site"
    built = rehearsal_site.build(site, {"packaging"}, set())
    assert "packaging" in built["linked"] and "pyyaml" in built["left_out"]
    trace = tmp_path / "trace"
    trace.mkdir()
    env = {"PYTHONPATH": str(check.TRACE_SITE), "GPU_CHECK_TRACE_DIR": str(trace), "GPU_CHECK_STEP": "probe",
           "GPU_CHECK_HIDE_SITE": str(rehearsal_site.site_packages()), "GPU_CHECK_MACHINE_SITE": str(site)}
    code = ("import packaging.version\ntry:\n    import yaml\nexcept ModuleNotFoundError:\n    print('yaml hidden')\n"
            "else:\n    print('yaml found')")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "yaml hidden"
    (record,) = [json.loads(p.read_text()) for p in trace.glob("*.json")]
    assert record["step"] == "probe" and "packaging" in record["modules"] and "yaml" not in record["modules"]


def test_one_real_step_runs_as_the_rehearsal_runs_it(tmp_path):
    """tools/bench.py through the runner, in the rehearsal's environment (trace first on PYTHONPATH)."""
    work, site, trace, logs = tmp_path / "work", tmp_path / "site", tmp_path / "trace", tmp_path / "logs"
    for folder in (site, trace, logs):
        folder.mkdir()
    env = check.step_environment("rehearsal", work, tmp_path / "wheels", site, trace)
    (step,) = check.plan("rehearsal", work, ["tool_bench"])
    outcome = runner.run_step(step, env, logs, ROOT)
    assert outcome.status == runner.PASSED, (outcome.reason, outcome.log_tail)
    result = outcome.result
    assert {c["name"] for c in result["checks"]} == {"every GPU output agrees with the OpenCV loop (op tolerance)"}
    assert all(t["met"] is None for t in result["targets"])  # the rehearsal judges no target
    assert result["metrics"]["device-to-device copy TB/s (read + written)"] > 0
    records = [json.loads(p.read_text()) for p in trace.glob("*.json")]
    assert records and all(r["step"] == "tool_bench" for r in records)
    assert any("kornia" in r["modules"] for r in records)
