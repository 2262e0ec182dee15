"""The install's requirements: a GPU cluster keeps the CUDA-coupled builds its image has (torch, torchvision,
transformers, numpy: ranges that admit both stacks tested, the CPU lock's and the GPU check machine's), and no
extra drags in a torch of its own except vLLM's, which is an extra of its own."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
CUDA_COUPLED = ("torch", "torchvision", "transformers", "numpy")


def _pins(path: Path) -> dict[str, Version]:
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, version = line.split("==", 1)
            pins[name.strip().lower()] = Version(version.strip())
    return pins


def _requirements(lines) -> dict[str, Requirement]:
    return {Requirement(line).name.lower(): Requirement(line) for line in lines}


@pytest.mark.parametrize("name", CUDA_COUPLED)
def test_cuda_coupled_packages_take_both_tested_stacks(name):
    requirement = _requirements(PROJECT["dependencies"])[name]
    cpu = _pins(ROOT / "requirements" / "cpu.lock")[name]
    gpu_machine = _pins(ROOT / "gpu_check" / "machine_packages.txt")[name]
    assert requirement.specifier.contains(Version(cpu.base_version), prereleases=False), (name, cpu)
    assert requirement.specifier.contains(gpu_machine), (name, gpu_machine)
    assert not any(spec.operator == "==" for spec in requirement.specifier), f"{name} is pinned exactly"


def test_no_extra_but_vllms_brings_a_torch_stack():
    extras = PROJECT["optional-dependencies"]
    for extra, lines in extras.items():
        names = set(_requirements(lines))
        if extra == "vllm":
            assert names == {"vllm"}
        else:
            assert not names & {"torch", "torchvision", "vllm"}, extra
    assert {"deepspeed", "tensorboard"} <= set(_requirements(extras["gpu"]))
