"""Remove each isolation layer in turn and check that a focused test notices.

`python -m runtime.sandbox.layer_mutants` copies the repository (its tracked and unignored files) into a
scratch directory once per layer, applies a small text patch there that takes that one layer out, runs
tests/runtime/test_sandbox_layers.py and test_sandbox_limits.py against the copy, and prints a markdown
table: the layer, the patch, whether the layer's focused test failed (or its pool refused to start), and
how many tests failed in all. It exits 1 if any mutant survives (its focused test passes), 2 if the
unpatched copy already fails. Slow (a pytest run per layer), so not part of the test
suite; tests/runtime/test_sandbox_layers.py only checks that every patch still matches the source.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TESTS = ("tests/runtime/test_sandbox_layers.py", "tests/runtime/test_sandbox_limits.py")
# in a mutant's copy the patch no longer matches, by design
SKIP = "not test_every_layer_mutant_still_matches_the_source"


@dataclass(frozen=True)
class Mutant:
    layer: str
    path: str   # relative to the repository
    old: str    # must occur exactly once in the file
    new: str
    test: str   # the focused test that must fail (or error: its pool refuses to start) without the layer


MUTANTS = (
    Mutant("seccomp: socket() denied", "runtime/sandbox/isolation.py",
           '**dict.fromkeys(("socket", "socketpair", "connect",', '**dict.fromkeys(("socketpair", "connect",',
           "test_seccomp_refuses_a_socket_of_every_family"),
    Mutant("seccomp: memfd_create denied (one memory limit)", "runtime/sandbox/isolation.py",
           '**dict.fromkeys(("memfd_create", "shmget",', '**dict.fromkeys(("shmget",',
           "test_memory_has_one_limit_and_nothing_outside_the_address_space"),
    Mutant("seccomp: inotify denied", "runtime/sandbox/isolation.py",
           '**dict.fromkeys(("inotify_init", "inotify_init1", "inotify_add_watch", "fanotify_mark",',
           '**dict.fromkeys(("fanotify_mark",',
           "test_inotify_and_xattr_writes_are_refused"),
    Mutant("seccomp: xattr writes denied", "runtime/sandbox/isolation.py",
           '**dict.fromkeys(("setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr", "fremovexattr",',
           '**dict.fromkeys(("lremovexattr",',
           "test_inotify_and_xattr_writes_are_refused"),
    Mutant("network namespace (the zygote only says it made one)", "runtime/sandbox/worker.py",
           'netns = (isolation.enter_network_namespace() if options["netns"]',
           'netns = ((True, "empty network namespace (unshare CLONE_NEWNET)") if options["netns"]',
           "test_the_worker_has_an_empty_network_namespace_of_its_own"),
    Mutant("Landlock", "runtime/sandbox/isolation.py",
           '        _syscall("landlock_restrict_self", ctypes.c_int(ruleset), ctypes.c_uint32(0))',
           '        pass',
           "test_landlock_alone_refuses_reads_and_writes_outside_the_work_dir"),
    Mutant("uid switch", "runtime/sandbox/isolation.py",
           "    os.setresuid(uid, uid, uid)  # without PR_SET_KEEPCAPS", "    pass  # without PR_SET_KEEPCAPS",
           "test_each_worker_runs_as_a_uid_of_its_own"),
    Mutant("capability drop (bounding set)", "runtime/sandbox/isolation.py",
           "while CAP_SETPCAP is still held\n        try:\n            prctl(PR_CAPBSET_DROP, cap)",
           "while CAP_SETPCAP is still held\n        try:\n            pass",
           "test_the_worker_holds_no_capabilities"),
    Mutant("private mounts: other sessions hidden", "runtime/sandbox/isolation.py",
           "    _cover(pool_root, [session_dir], 0o711)", "    pass",
           "test_another_sessions_dir_is_invisible"),
    Mutant("session dir owned by the pool", "runtime/sandbox/pool.py",
           "os.chown(directory, 0, uid)", "os.chown(directory, uid, uid)",
           "test_the_session_dir_is_not_the_workers"),
    Mutant("rlimits", "runtime/sandbox/isolation.py",
           "        resource.setrlimit(which, (value, value))", "        pass",
           "test_rlimits_are_set_as_configured"),
    Mutant("disk quota (tmpfs size)", "runtime/sandbox/isolation.py",
           'options = f"size={size},nr_inodes={inodes},', 'options = f"size={size << 10},nr_inodes={inodes << 10},',
           "test_disk_quota_ends_the_cell_with_a_clear_error_and_the_pool_goes_on"),
    Mutant("inputs and aliases (sticky work dir)", "runtime/sandbox/pool.py",
           "self.config.disk_files + 1, 0, uid, 0o1770)", "self.config.disk_files + 1, 0, uid, 0o770)",
           "test_inputs_and_their_aliases_in_the_work_dir_cannot_be_changed"),
    Mutant("thread rule", "runtime/sandbox/pool.py",
           "        restarted = bool(threads)", "        restarted = threads = 0",
           "test_a_thread_cannot_outlive_its_cell"),
    Mutant("frozen between cells", "runtime/sandbox/pool.py",
           "        self.signal(signal.SIGSTOP)\n", "        return True\n",
           "test_the_worker_is_stopped_between_cells"),
    Mutant("report from the worker's checks (network namespace row)", "runtime/sandbox/pool.py",
           'and netns != plan["netns"] and interfaces == ["lo"]:', 'or True:',
           "test_the_report_comes_from_the_workers_checks_not_the_zygotes_word"),
)


def mismatched(repo: Path = REPO) -> list[str]:
    """The mutants whose patch no longer matches its file exactly once (a refactor turned it into a no-op)."""
    return [f"{m.layer}: {m.path} holds the patched text {(repo / m.path).read_text().count(m.old)} times"
            for m in MUTANTS if (repo / m.path).read_text().count(m.old) != 1]


def _copy_repo(target: Path) -> None:
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            check=True, capture_output=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = REPO / name
        if source.is_file() and not source.is_symlink():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)


def _run_tests(copy: Path, timeout: float) -> tuple[dict[str, str], str]:
    """({failing test: FAILED or ERROR}, the tail of pytest's output) for the tests run against `copy`.
    ERROR is a test whose fixture failed: its pool refused to start without the layer."""
    env = {**os.environ, "PYTHONPATH": str(copy), "PYTHONDONTWRITEBYTECODE": "1"}
    check = subprocess.run([sys.executable, "-c", "import runtime.sandbox as s; print(s.__file__)"], cwd=copy,
                           env=env, capture_output=True, text=True)
    if not check.stdout.startswith(str(copy)):
        raise SystemExit(f"the copy is not what Python imports ({check.stdout.strip() or check.stderr[-500:]})")
    try:
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rfE", "-p", "no:cacheprovider", "-k", SKIP,
                               *TESTS], cwd=copy, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {f"(timed out after {timeout:g} s)": "TIMEOUT"}, ""
    output = done.stdout + done.stderr
    failed = {name.split("::")[-1]: kind for kind, name in re.findall(r"^(FAILED|ERROR) (\S+)", output, re.M)}
    if done.returncode not in (0, 1):
        failed.setdefault(f"(pytest exit code {done.returncode})", "ERROR")
    return failed, output[-2000:]


def _cell(text: str) -> str:
    return "`" + text.replace("\n", "\\n").replace("|", "\\|") + "`"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per pytest run")
    parser.add_argument("--only", default="", help="run the mutants whose layer contains this text")
    args = parser.parse_args(argv)
    problems = mismatched()
    if problems:
        print("patches that no longer match the source:\n" + "\n".join(problems), file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="tirlab-mutants-") as scratch:
        pristine = Path(scratch) / "pristine"
        pristine.mkdir()
        _copy_repo(pristine)
        failed, tail = _run_tests(pristine, args.timeout)
        if failed:
            print(f"the unpatched copy already fails ({failed}):\n{tail}", file=sys.stderr)
            return 2
        rows, survivors = [], 0
        for mutant in MUTANTS:
            if args.only not in mutant.layer:
                continue
            copy = Path(scratch) / "mutant"
            shutil.copytree(pristine, copy)
            path = copy / mutant.path
            path.write_text(path.read_text().replace(mutant.old, mutant.new, 1))
            start = time.monotonic()
            failed, _ = _run_tests(copy, args.timeout)
            shutil.rmtree(copy)
            caught = mutant.test in failed
            survivors += not caught
            outcome = (f"{mutant.test}: {'fails' if failed[mutant.test] == 'FAILED' else 'its pool refuses to start'}"
                       if caught else f"NONE: {mutant.test} passes, the mutant survives")
            rows.append(f"| {mutant.layer} | {mutant.path}: {_cell(mutant.old)} -> {_cell(mutant.new)} | {outcome} | "
                        f"{len(failed)} | {time.monotonic() - start:.0f} s |")
            print(rows[-1], file=sys.stderr, flush=True)
    print("| layer removed | patch | focused test | tests failing in all | time |\n|---|---|---|---|---|\n"
          + "\n".join(rows))
    return 1 if survivors else 0


if __name__ == "__main__":
    raise SystemExit(main())
