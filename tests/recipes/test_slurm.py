"""The SLURM and launch scripts as a cluster runs them, under bash, with fake `srun`, `sbatch`, `scontrol`,
`accelerate`, `nvidia-smi` and python programs that record their arguments and environment (fake srun runs its
command once per task with SLURM_PROCID set): eval.sbatch's shard count and merge, launch.sh's srun CPUs and its
DeepSpeed fallback, recipes/local/eval_shards.sh, and eval_matrix.sh's arrays and final table."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EVAL_SBATCH = ROOT / "recipes" / "slurm" / "eval.sbatch"
SFT_SBATCH = ROOT / "recipes" / "slurm" / "sft.sbatch"
LAUNCH = ROOT / "recipes" / "slurm" / "launch.sh"
EVAL_SHARDS = ROOT / "recipes" / "local" / "eval_shards.sh"
EVAL_MATRIX = ROOT / "recipes" / "slurm" / "eval_matrix.sh"
RECORDED_ENV = ("CUDA_VISIBLE_DEVICES", "SLURM_PROCID", "SRUN_CPUS_PER_TASK", "MASTER_ADDR", "MASTER_PORT",
                "ACCELERATE_CONFIG", "NO_MERGE")

FAKE = f"""#!{sys.executable}
# one fake for every program: what it does depends on the name it was called by
import json, os, subprocess, sys

name = os.path.basename(sys.argv[0])
args = sys.argv[1:]
with open(os.environ["FAKE_LOG"], "a") as log:
    log.write(json.dumps({{"prog": name, "path": sys.argv[0], "argv": args,
                           "env": {{k: os.environ.get(k) for k in {RECORDED_ENV!r}}}}}) + "\\n")
if name == "python":
    if args[:1] == ["-c"]:  # a real import check, in a real Python (PYTHONPATH may hold a fake deepspeed)
        os.execv({sys.executable!r}, [{sys.executable!r}, *args])
    if args[1:2] == ["run_dir"]:  # as eval/run_vllm.py resolves it: a --out flag, else the config's
        outs = [a.split("=", 1)[1] for a in args if a.startswith("--out=")] + [
            args[k + 1] for k, a in enumerate(args[:-1]) if a == "--out"]
        print(outs[-1] if outs else os.environ["FAKE_CONFIG_OUT"])
        sys.exit(0)
    if "--shard" in args:
        index = args[args.index("--shard") + 1].split("/")[0]
        print(f"evaluating shard {{index}}")
        if index in os.environ.get("FAKE_FAIL_SHARDS", "").split(","):
            print("boom: the engine ran out of memory")
            sys.exit(3)
elif name == "srun":
    k = 0
    while args[k].startswith("-"):
        k += 1
    ntasks = int(next(a.split("=")[1] for a in args[:k] if a.startswith("--ntasks=")))
    codes = [subprocess.run(args[k:], env={{**os.environ, "SLURM_PROCID": str(rank)}}).returncode
             for rank in range(ntasks)]
    sys.exit(max(codes))
elif name == "sbatch":
    print("4242")
elif name == "scontrol":
    assert args[:2] == ["show", "hostnames"], args
    print("\\n".join(os.environ["FAKE_HOSTS"].split(",")))
elif name == "nvidia-smi":
    print("\\n".join(os.environ["FAKE_GPUS"].split(",")))
"""


@pytest.fixture
def fakes(tmp_path):
    """Fake programs in tmp/bin (the PATH) and tmp/venv/bin (accelerate and the python beside it, off the PATH)."""
    bin_dir, venv = tmp_path / "bin", tmp_path / "venv" / "bin"
    for directory, names in ((bin_dir, ("python", "srun", "sbatch", "scontrol", "nvidia-smi")),
                             (venv, ("python", "accelerate"))):
        directory.mkdir(parents=True)
        for name in names:
            (directory / name).write_text(FAKE)
            (directory / name).chmod(0o755)
    return tmp_path


def _run(script: Path, args: list[str], tmp: Path, cwd: Path, **env) -> subprocess.CompletedProcess:
    log = tmp / "calls.jsonl"
    log.unlink(missing_ok=True)
    environment = {"PATH": f"{tmp / 'bin'}:/usr/bin:/bin", "HOME": str(tmp), "FAKE_LOG": str(log), **env}
    done = subprocess.run(["bash", str(script), *args], cwd=cwd, env=environment, capture_output=True, text=True,
                          timeout=60)
    done.calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return done


def _calls(done, prog: str) -> list[dict]:
    return [c for c in done.calls if c["prog"] == prog]


# eval.sbatch ---------------------------------------------------------------------------------------------------

def _array(task: int, first: int, last: int, count: int) -> dict:
    return dict(SLURM_ARRAY_JOB_ID="777", SLURM_ARRAY_TASK_ID=str(task), SLURM_ARRAY_TASK_MIN=str(first),
                SLURM_ARRAY_TASK_MAX=str(last), SLURM_ARRAY_TASK_COUNT=str(count))


def _eval_sbatch(fakes: Path, array: dict, *flags: str, **env) -> subprocess.CompletedProcess:
    return _run(EVAL_SBATCH, ["recipes/eval/qwen2_5_vl_7b/synthetic.yaml", *flags], fakes, cwd=fakes,
                SLURM_SUBMIT_DIR=str(fakes), PYTHON=str(fakes / "bin" / "python"),
                FAKE_CONFIG_OUT=str(fakes / "runs" / "from-config"), **array, **env)


def _evaluations(done) -> list[list[str]]:
    return [c["argv"] for c in _calls(done, "python") if "run_dir" not in c["argv"]]


def _shard_files(out: Path, count: int, indices) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for index in indices:
        (out / f"records.shard-{index}-of-{count}.jsonl").write_text('{"id": "t", "mode": "tools"}\n')


def test_a_whole_array_is_the_split_and_its_first_task_queues_the_merge(fakes):
    out = fakes / "runs" / "from-config"
    done = _eval_sbatch(fakes, _array(0, 0, 3, 4))
    assert done.returncode == 0, done.stderr
    assert _evaluations(done) == [["eval/run_vllm.py", "--config", "recipes/eval/qwen2_5_vl_7b/synthetic.yaml",
                                   "--shard", "0/4", "--tensor_parallel_size", "1"]]
    (merge,) = _calls(done, "sbatch")
    assert merge["argv"] == ["--dependency=afterok:777", "--kill-on-invalid-dep=yes", "--job-name=tirlab-eval-merge",
                             "--ntasks=1", "--cpus-per-task=4", "--gpus-per-task=0", "--output=logs/%x-%j.out",
                             f"--wrap={fakes / 'bin' / 'python'} eval/run_vllm.py merge {out}"]
    other = _eval_sbatch(fakes, _array(2, 0, 3, 4), GPUS_PER_SHARD="2")
    assert other.returncode == 0, other.stderr
    assert _evaluations(other)[0][3:] == ["--shard", "2/4", "--tensor_parallel_size", "2"]
    assert not _calls(other, "sbatch")  # one merge per array
    unmerged = _eval_sbatch(fakes, _array(0, 0, 3, 4), NO_MERGE="1")  # a caller merges (eval_matrix.sh)
    assert unmerged.returncode == 0 and _evaluations(unmerged) and not _calls(unmerged, "sbatch")


def test_a_resubmitted_index_takes_the_count_from_SHARDS_not_from_its_array(fakes):
    done = _eval_sbatch(fakes, _array(5, 5, 5, 1), SHARDS="8")
    assert done.returncode == 0, done.stderr
    assert _evaluations(done)[0][3:5] == ["--shard", "5/8"]
    assert len(_calls(done, "sbatch")) == 1  # the lowest index of this array queues its merge


def test_a_resubmitted_index_takes_the_count_from_the_shard_files(fakes):
    _shard_files(fakes / "runs" / "from-config", 8, [0, 1, 2, 4])
    done = _eval_sbatch(fakes, _array(0, 0, 0, 1))  # --array=0 alone: a whole split of one, were there no files
    assert done.returncode == 0, done.stderr
    assert _evaluations(done)[0][3:5] == ["--shard", "0/8"]
    assert "8 shards, as the shard files in" in done.stdout


def test_without_SHARDS_or_shard_files_a_partial_array_is_refused(fakes):
    done = _eval_sbatch(fakes, _array(5, 5, 5, 1))
    assert done.returncode == 2
    assert "cannot tell the shard count" in done.stderr and "SHARDS=N sbatch" in done.stderr
    assert _evaluations(done) == [] and not _calls(done, "sbatch")
    stepped = _eval_sbatch(fakes, _array(0, 0, 6, 4))  # --array=0-7:2: not the split 0-3
    assert stepped.returncode == 2 and "cannot tell the shard count" in stepped.stderr


def test_SHARDS_that_disagrees_with_the_shard_files_is_refused_naming_both(fakes):
    _shard_files(fakes / "runs" / "from-config", 8, [0, 1])
    done = _eval_sbatch(fakes, _array(3, 3, 3, 1), SHARDS="4")
    assert done.returncode == 2 and _evaluations(done) == []
    assert "SHARDS=4, but" in done.stderr and "8-way split" in done.stderr and "SHARDS=8" in done.stderr


def test_an_index_outside_the_split_is_refused(fakes):
    done = _eval_sbatch(fakes, _array(9, 8, 9, 2), SHARDS="8")
    assert done.returncode == 2 and _evaluations(done) == []
    assert "array index 9 is not a shard of a 8-way split (0-7)" in done.stderr


def test_a_job_that_is_not_an_array_is_refused(fakes):
    done = _eval_sbatch(fakes, {"SLURM_JOB_ID": "1"})
    assert done.returncode == 2 and "submit with --array" in done.stderr and done.calls == []


def test_the_merge_and_the_shard_files_use_the_users_out(fakes):
    mine = fakes / "mine"
    _shard_files(mine, 3, [1])
    done = _eval_sbatch(fakes, _array(0, 0, 0, 1), "--out", str(mine), "--max_tokens", "64")
    assert done.returncode == 0, done.stderr
    (resolve,) = [c["argv"] for c in _calls(done, "python") if "run_dir" in c["argv"]]
    assert resolve == ["eval/run_vllm.py", "run_dir", "--config", "recipes/eval/qwen2_5_vl_7b/synthetic.yaml",
                       "--out", str(mine), "--max_tokens", "64"]
    assert _evaluations(done)[0][3:] == ["--shard", "0/3", "--tensor_parallel_size", "1", "--out", str(mine),
                                         "--max_tokens", "64"]
    (merge,) = _calls(done, "sbatch")
    assert merge["argv"][-1] == f"--wrap={fakes / 'bin' / 'python'} eval/run_vllm.py merge {mine}"


def test_one_shard_writes_its_report_itself(fakes):
    done = _eval_sbatch(fakes, _array(0, 0, 0, 1))
    assert done.returncode == 0, done.stderr
    assert _evaluations(done)[0][3:5] == ["--shard", "0/1"] and not _calls(done, "sbatch")


# launch.sh -----------------------------------------------------------------------------------------------------

@pytest.fixture
def deepspeed_site(tmp_path):
    site = tmp_path / "site"
    (site / "deepspeed").mkdir(parents=True)
    (site / "deepspeed" / "__init__.py").write_text("")
    return site


def _launch(fakes: Path, script: Path = LAUNCH, deepspeed: Path | None = None, **env) -> subprocess.CompletedProcess:
    args = ["recipes/pilot_rotated_ocr/qwen2_5_vl_7b/agentic.yaml", "--max_steps", "5"]
    if script == LAUNCH:
        args = ["train/sft.py", *args]
    env = dict(SLURM_NNODES="2", SLURM_JOB_NODELIST="node-[a,b]", FAKE_HOSTS="node-a,node-b",
               ACCELERATE=str(fakes / "venv" / "bin" / "accelerate"), SLURM_SUBMIT_DIR=str(ROOT), **env)
    if deepspeed:
        env["PYTHONPATH"] = str(deepspeed)
    return _run(script, args, fakes, cwd=ROOT, **env)


def _launches(done) -> list[dict]:
    return sorted(_calls(done, "accelerate"), key=lambda c: c["env"]["SLURM_PROCID"])


def _expected_launch(config: str, rank: int) -> list[str]:
    return ["launch", "--config_file", config, "--num_machines", "2", "--num_processes", "16", "--machine_rank",
            str(rank), "--main_process_ip", "node-a", "--main_process_port", "29500", "train/sft.py", "--config",
            "recipes/pilot_rotated_ocr/qwen2_5_vl_7b/agentic.yaml", "--max_steps", "5"]


def test_sft_sbatch_launches_one_accelerate_per_node_with_the_jobs_cpus(fakes, deepspeed_site):
    done = _launch(fakes, SFT_SBATCH, deepspeed_site, SLURM_CPUS_PER_TASK="64")
    assert done.returncode == 0, done.stderr
    (srun,) = _calls(done, "srun")
    assert srun["argv"][:3] == ["--ntasks=2", "--ntasks-per-node=1", "--cpus-per-task=64"]
    assert srun["argv"][3:5] == ["bash", "-c"] and srun["env"]["SRUN_CPUS_PER_TASK"] == "64"
    launches = _launches(done)
    assert [c["argv"] for c in launches] == [_expected_launch("recipes/accelerate/zero3.yaml", r) for r in (0, 1)]
    assert {c["env"]["MASTER_ADDR"] for c in launches} == {"node-a"}
    assert done.stderr == ""  # DeepSpeed imports: nothing to say


def test_without_cpus_per_task_srun_gets_none(fakes, deepspeed_site):
    done = _launch(fakes, deepspeed=deepspeed_site)
    assert done.returncode == 0, done.stderr
    (srun,) = _calls(done, "srun")
    assert srun["argv"][:3] == ["--ntasks=2", "--ntasks-per-node=1", "bash"]
    assert srun["env"]["SRUN_CPUS_PER_TASK"] is None


def test_the_default_falls_back_to_fsdp_where_deepspeed_does_not_import_and_says_so(fakes):
    done = _launch(fakes, SLURM_CPUS_PER_TASK="8")
    assert done.returncode == 0, done.stderr
    assert [c["argv"] for c in _launches(done)] == [_expected_launch("recipes/accelerate/fsdp.yaml", r)
                                                    for r in (0, 1)]
    # the check ran in the Python beside accelerate, not the python on the PATH
    (check,) = [c for c in done.calls if c["argv"] == ["-c", "import deepspeed"]]
    assert check["path"] == str(fakes / "venv" / "bin" / "python")
    (line,) = done.stderr.splitlines()
    assert "DeepSpeed does not import" in line and "No module named 'deepspeed'" in line
    assert "recipes/accelerate/fsdp.yaml" in line and "gpu extra" in line


def test_an_explicit_deepspeed_config_without_deepspeed_stops_before_srun(fakes):
    done = _launch(fakes, ACCELERATE_CONFIG="recipes/accelerate/zero2.yaml")
    assert done.returncode == 2
    assert not _calls(done, "srun") and not _calls(done, "accelerate")
    assert done.stderr.startswith("launch.sh: ACCELERATE_CONFIG=recipes/accelerate/zero2.yaml is a DeepSpeed config")
    assert "gpu extra" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("config", ["recipes/accelerate/zero2.yaml", "recipes/accelerate/fsdp.yaml"])
def test_an_explicit_config_that_can_run_is_used_as_it_is(fakes, deepspeed_site, config):
    done = _launch(fakes, deepspeed=deepspeed_site if "zero" in config else None, ACCELERATE_CONFIG=config)
    assert done.returncode == 0, done.stderr
    assert [c["argv"] for c in _launches(done)] == [_expected_launch(config, r) for r in (0, 1)]
    assert done.stderr == ""


def test_outside_an_allocation_launch_says_so(fakes):
    done = _run(LAUNCH, ["train/sft.py", "r.yaml"], fakes, cwd=ROOT)
    assert done.returncode != 0 and "inside a SLURM allocation" in done.stderr and done.calls == []


# recipes/local/eval_shards.sh ----------------------------------------------------------------------------------

def _local(fakes: Path, *flags: str, **env) -> subprocess.CompletedProcess:
    return _run(EVAL_SHARDS, ["recipes/eval/qwen2_5_vl_7b/synthetic.yaml", *flags], fakes, cwd=ROOT,
                PYTHON=str(fakes / "bin" / "python"), LOGS=str(fakes / "logs"),
                FAKE_CONFIG_OUT=str(fakes / "runs" / "from-config"), **env)


def test_local_shards_get_their_own_gpus_and_are_merged(fakes):
    out = fakes / "runs" / "mine"
    done = _local(fakes, "--out", str(out), GPUS="0,1,2,3", GPUS_PER_SHARD="2")
    assert done.returncode == 0, done.stderr
    shards = sorted((c for c in _calls(done, "python") if "--shard" in c["argv"]), key=lambda c: c["argv"])
    assert [(c["argv"], c["env"]["CUDA_VISIBLE_DEVICES"]) for c in shards] == [
        (["eval/run_vllm.py", "--config", "recipes/eval/qwen2_5_vl_7b/synthetic.yaml", "--shard", f"{i}/2",
          "--tensor_parallel_size", "2", "--out", str(out)], devices) for i, devices in enumerate(["0,1", "2,3"])]
    assert _calls(done, "python")[-1]["argv"] == ["eval/run_vllm.py", "merge", str(out)]
    assert (fakes / "logs" / "mine.shard-1-of-2.log").read_text() == "evaluating shard 1\n"


def test_local_shards_default_to_the_gpus_nvidia_smi_lists(fakes):
    done = _local(fakes, FAKE_GPUS="0,1,2")
    assert done.returncode == 0, done.stderr
    shards = {c["argv"][4]: c["env"]["CUDA_VISIBLE_DEVICES"] for c in _calls(done, "python") if "--shard" in c["argv"]}
    assert shards == {"0/3": "0", "1/3": "1", "2/3": "2"}
    assert _calls(done, "python")[-1]["argv"] == ["eval/run_vllm.py", "merge", str(fakes / "runs" / "from-config")]


def test_a_failed_local_shard_is_named_with_its_log_and_nothing_is_merged(fakes):
    done = _local(fakes, GPUS="0,1", FAKE_FAIL_SHARDS="1")
    assert done.returncode == 1
    log = fakes / "logs" / "from-config.shard-1-of-2.log"
    assert f"shard 1/2 failed (exit status 3); its log: {log}" in done.stderr
    assert "shard 0/2 failed" not in done.stderr and "boom" in log.read_text()
    assert not [c for c in _calls(done, "python") if "merge" in c["argv"]]


def test_local_shards_refuse_a_run_directory_of_another_split(fakes):
    _shard_files(fakes / "runs" / "from-config", 4, [0])
    done = _local(fakes, GPUS="0,1")
    assert done.returncode == 2 and "4-way split" in done.stderr and "make 2" in done.stderr
    assert not [c for c in _calls(done, "python") if "--shard" in c["argv"]]


# eval_matrix.sh -------------------------------------------------------------------------------------------------

def _matrix(fakes: Path, *flags: str, **env) -> subprocess.CompletedProcess:
    return _run(EVAL_MATRIX, list(flags), fakes, cwd=fakes, PYTHON="python", RECIPES=str(ROOT / "recipes" / "eval"),
                FAKE_CONFIG_OUT="runs/from-config", **env)


def test_the_matrix_submits_one_array_per_cell_then_the_table_after_all_of_them(fakes):
    done = _matrix(fakes, "--limit", "5", SHARDS="2", MODELS="deepeyes_7b thyme_7b", CELLS="tir_bench agentic_mme_atm")
    assert done.returncode == 0, done.stderr
    arrays = [c["argv"] for c in _calls(done, "sbatch") if "--array=0-1" in c["argv"]]
    assert all(c["env"]["NO_MERGE"] == "1" for c in _calls(done, "sbatch")[:-1])  # the last job is the one merge
    assert arrays == [["--parsable", "--array=0-1", "recipes/slurm/eval.sbatch",
                       str(ROOT / "recipes" / "eval" / model / f"{cell}.yaml"), "--limit", "5"]
                      for model in ("deepeyes_7b", "thyme_7b") for cell in ("agentic_mme_atm", "tir_bench")]
    resolved = [c["argv"] for c in _calls(done, "python")]
    assert all(argv[:2] == ["eval/run_vllm.py", "run_dir"] and argv[-2:] == ["--limit", "5"] for argv in resolved)
    final = _calls(done, "sbatch")[-1]["argv"]
    assert final[0] == "--dependency=afterany:4242:4242:4242:4242" and "--gpus-per-task=0" in final
    assert final[-1].endswith("python -m eval.matrix runs/from-config runs/from-config runs/from-config "
                              "runs/from-config > runs/matrix.md")


def test_the_matrix_refuses_a_selection_with_no_recipe(fakes):
    done = _matrix(fakes, MODELS="llama")
    assert done.returncode == 2 and "no recipe matches MODELS='llama'" in done.stderr
    assert not _calls(done, "sbatch")
