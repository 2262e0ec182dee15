"""The hostile-code suite (runtime/sandbox/hostile.py) end to end: every attack is contained, the pool
recovers after each, and docs/security.md shows the table the suite prints today. It runs as
`python -m runtime.sandbox.hostile`, as a user would, so that the parent really has a secret in its
initial environment for the /proc/<pid>/environ attack to look for."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
REQUIRED = {"tcp_connect", "udp_dns", "write_outside", "read_other_session", "fork_bomb", "memory_bomb",
            "infinite_loop", "sleep_forever", "huge_output", "file_size_bomb", "thread_bomb", "kill_parent",
            "ctypes_libc", "subprocess_shell", "delete_inputs", "parent_environment", "symlink_outputs",
            "ptrace_memory", "alias_inputs", "disk_quota", "memory_outside", "thread_outlives_cell",
            "raise_limits", "image_png_rgba", "image_png_chunks", "image_tiff_strips", "image_jpeg_scans",
            "image_nine_at_cap", "channel_stray_flood", "channel_slow_flood", "channel_huge_length",
            "channel_garbage_body", "spy_other_session", "xattrs"}

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="the sandbox needs Linux")


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    out = tmp_path_factory.mktemp("hostile") / "outcomes.json"
    env = {k: v for k, v in os.environ.items() if k != "TIRLAB_HOSTILE_SECRET"}
    proc = subprocess.run([sys.executable, "-m", "runtime.sandbox.hostile", "--markdown", "--json", str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    return proc, json.loads(out.read_text()) if out.exists() else []


def test_every_attack_is_contained_and_the_pool_recovers(suite):
    proc, outcomes = suite
    assert proc.returncode == 0, f"{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    names = {o["name"] for o in outcomes}
    assert len(outcomes) >= 15 and REQUIRED <= names, REQUIRED - names
    breaches = [f"{o['name']}: {o['outcome']}" for o in outcomes if not o["contained"]]
    assert not breaches
    assert not any("BREACH" in o["outcome"] or "FAILED" in o["outcome"] for o in outcomes)


def test_docs_security_shows_the_current_table(suite):
    proc, _ = suite
    table = proc.stdout.strip()
    assert table.startswith("| attempt | what the code tries | outcome |")
    docs = (ROOT / "docs" / "security.md").read_text()
    assert table in docs, ("docs/security.md is stale: paste the output of "
                           "`.venv/bin/python -m runtime.sandbox.hostile --markdown` into it")


def test_the_image_attacks_use_the_evaluation_s_own_caps():
    """The suite's pixel cap and per-episode image budget are the ones the toolbox decodes with (it keeps copies
    of them so that it need not import tools, which pulls in torch)."""
    from runtime.profiles import Budgets
    from runtime.sandbox import hostile
    from tools.images import DEFAULT_MAX_PIXELS

    assert hostile.MAX_PIXELS == DEFAULT_MAX_PIXELS
    assert hostile.EPISODE_IMAGE_BYTES == Budgets().max_image_mb << 20
