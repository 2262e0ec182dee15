"""One split per run directory: a shard of another count, or an unsharded run beside shard files (or a shard beside
a merged run), is refused with a message that names the files and what to do; --overwrite on a shard keeps the
other shards of its split. And `run_vllm.py run_dir` prints the run directory exactly as a run resolves it."""

from __future__ import annotations

import pytest

from eval.run_vllm import main
from eval.rundir import RunDir, split_files

CONFIG = {"model": "reference", "per_task": 2}


def _shard(path, index: int, count: int, overwrite: bool = False) -> RunDir:
    run = RunDir(path, (index, count))
    run.open(CONFIG, overwrite=overwrite)
    run.append({"id": f"task-{index}", "mode": "tools"})
    return run


def test_the_shards_of_one_split_resume_side_by_side(tmp_path):
    _shard(tmp_path, 0, 2)
    _shard(tmp_path, 1, 2)
    assert RunDir(tmp_path, (0, 2)).open(CONFIG) == {("task-0", "tools")}  # resumed
    assert {n: [f.name for f in files] for n, files in split_files(tmp_path).items()} == {
        2: ["records.shard-0-of-2.jsonl", "records.shard-1-of-2.jsonl"]}


def test_a_shard_of_another_count_is_refused_naming_the_files(tmp_path):
    _shard(tmp_path, 0, 2)
    _shard(tmp_path, 1, 2)
    with pytest.raises(ValueError) as refused:
        RunDir(tmp_path, (5, 8)).open(CONFIG)
    message = str(refused.value)
    assert (f"{tmp_path} holds the shards of a 2-way split (records.shard-0-of-2.jsonl, records.shard-1-of-2.jsonl), "
            "and this is --shard 5/8") in message
    assert "resume that split with --shard i/2 (recipes/slurm/eval.sbatch: SHARDS=2" in message
    assert not (tmp_path / "records.shard-5-of-8.jsonl").exists()


def test_an_unsharded_run_beside_shard_files_is_refused(tmp_path):
    _shard(tmp_path, 1, 3)
    with pytest.raises(ValueError) as refused:
        RunDir(tmp_path).open(CONFIG)
    message = str(refused.value)
    assert "the shards of a 3-way split (records.shard-1-of-3.jsonl), and this is an unsharded run" in message
    assert f"merge them first (python eval/run_vllm.py merge {tmp_path})" in message
    assert not (tmp_path / "records.jsonl").exists()


def test_a_shard_beside_a_merged_run_is_refused(tmp_path):
    run = RunDir(tmp_path)
    run.open(CONFIG)
    run.append({"id": "task-0", "mode": "tools"})
    with pytest.raises(ValueError, match=r"holds an unsharded or merged run \(records.jsonl\), and this is --shard "
                                         r"0/4: .* resume or report that run without --shard"):
        RunDir(tmp_path, (0, 4)).open(CONFIG)


def test_overwrite_on_a_shard_keeps_the_other_shards_of_its_split(tmp_path):
    _shard(tmp_path, 0, 2)
    _shard(tmp_path, 1, 2)
    (tmp_path / "records.shard-0-of-3.jsonl").write_text("")  # another split: gone with --overwrite
    (tmp_path / "report.md").write_text("stale")
    assert RunDir(tmp_path, (1, 2)).open(CONFIG, overwrite=True) == set()
    assert sorted(f.name for f in tmp_path.glob("*.jsonl")) == ["records.shard-0-of-2.jsonl"]
    assert not (tmp_path / "report.md").exists()
    assert RunDir(tmp_path).open(CONFIG, overwrite=True) == set()  # unsharded: everything starts over
    assert list(tmp_path.glob("*.jsonl")) == []


def test_the_command_line_refuses_mixed_counts_with_a_message_and_no_traceback(tmp_path, capsys):
    flags = ["--model", "reference", "--backend", "reference", "--tasks", "maze", "--per_task", "2",
             "--out", str(tmp_path / "run")]
    assert main([*flags, "--shard", "0/2"]) == 0
    capsys.readouterr()
    assert main([*flags, "--shard", "1/3"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {tmp_path / 'run'} holds the shards of a 2-way split (records.shard-0-of-2.jsonl)")
    assert "Traceback" not in err


def test_run_dir_resolves_the_output_folder_as_a_run_does(tmp_path, capsys):
    with_out = tmp_path / "with_out.yaml"
    with_out.write_text(f"model: reference\nbackend: reference\nout: {tmp_path / 'from-yaml'}\n")
    without_out = tmp_path / "without_out.yaml"
    without_out.write_text("model: Qwen/Qwen2.5-VL-7B-Instruct\nbackend: reference\nsuite: synthetic\n")

    def run_dir(*argv: str) -> str:
        assert main(["run_dir", *argv]) == 0
        return capsys.readouterr().out

    assert run_dir("--config", str(with_out)) == f"{tmp_path / 'from-yaml'}\n"
    assert run_dir("--config", str(with_out), "--out", str(tmp_path / "mine")) == f"{tmp_path / 'mine'}\n"
    # no out anywhere: the default, runs/<model>-<suite>
    assert run_dir("--config", str(without_out)) == "runs/qwen2.5-vl-7b-instruct-synthetic\n"
    assert run_dir("--config", str(without_out), "--suite", "tir_bench") == "runs/qwen2.5-vl-7b-instruct-tir_bench\n"


def test_run_dir_reports_a_bad_config_like_a_run(tmp_path, capsys):
    assert main(["run_dir", "--config", str(tmp_path / "missing.yaml")]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "missing.yaml: no such file" in captured.err and "Traceback" not in captured.err


def test_merge_waits_for_every_shard_to_finish(tmp_path):
    """A shard still running (a resubmitted index, say) would lose what it records after a merge: merge waits for
    every shard's done marker, and a shard that runs again is not done until it ends."""
    from eval.rundir import merge

    first, second = _shard(tmp_path, 0, 2), _shard(tmp_path, 1, 2)
    first.mark_done()
    with pytest.raises(ValueError, match=r"shard\(s\) 1 of 2 have not finished .* SHARDS=2 --array=1\), then merge"):
        merge(tmp_path)
    second.mark_done()
    RunDir(tmp_path, (1, 2)).open(CONFIG)  # resumed: running again
    with pytest.raises(ValueError, match=r"shard\(s\) 1 of 2 have not finished"):
        merge(tmp_path)
    second.mark_done()
    assert {(r["id"], r["mode"]) for r in merge(tmp_path)} == {("task-0", "tools"), ("task-1", "tools")}
    assert sorted(f.name for f in tmp_path.iterdir() if f.is_file()) == ["config.json", "records.jsonl"]


def test_overwrite_with_a_new_configuration_starts_the_whole_split_over(tmp_path):
    _shard(tmp_path, 0, 2).mark_done()
    _shard(tmp_path, 1, 2)
    run = RunDir(tmp_path, (1, 2))
    assert run.open({**CONFIG, "per_task": 5}, overwrite=True) == set()
    assert list(tmp_path.glob("*.jsonl")) == [] and list(tmp_path.glob("done.*")) == []
