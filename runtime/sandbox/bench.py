"""The sandbox benchmark: what a cell costs, and whether 16 episodes share 2 cores.

    python -m runtime.sandbox.bench              # the full run recorded in docs/benchmarks.md
    python -m runtime.sandbox.bench --quick      # small n (the smoke test); same output shape
    python -m runtime.sandbox.bench --json out.json

It measures, in one run: the zygote's start with and without torch preloaded (the cost of preloading
`tools`), session start (fork + lock-down + first answer), the round trip of a trivial cell (`x = 1`) on
a warm worker against the target p50 <= 30 ms, a crop + save of a 1024x1024 image (read from inputs,
saved as PNG to output_dir, collected by the parent), and 16 concurrent episodes (open a session,
several cells including one crop + save, close), all of which must succeed.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from runtime.sandbox.pool import SandboxConfig, SandboxPool

TARGET_P50_MS = 30.0
CROP_SAVE = ("from PIL import Image\n"
             "Image.open(os.path.join(os.environ['INPUTS_DIR'], 'image.png')).crop((256, 256, 768, 768))"
             ".save(f'outputs/crop_{n}.png')\n")


def _percentiles(seconds: list[float]) -> dict:
    ordered = sorted(seconds)
    p95 = ordered[min(len(ordered) - 1, max(0, round(0.95 * len(ordered)) - 1))]
    return {"n": len(ordered), "p50_ms": statistics.median(ordered) * 1e3, "p95_ms": p95 * 1e3}


def _image_png() -> bytes:
    from PIL import Image

    from tools.images import demo_image
    buffer = io.BytesIO()
    Image.fromarray(demo_image(1024, 1024)).save(buffer, format="PNG")
    return buffer.getvalue()


def _machine() -> dict:
    memory = 0
    try:
        with open("/proc/meminfo") as f:
            memory = int(f.readline().split()[1]) * 1024
    except OSError:
        pass
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    return {"cores": os.cpu_count(), "memory_gib": round(memory / 2**30), "cpu": cpu,
            "kernel": platform.release(), "python": platform.python_version(), "arch": platform.machine()}


def _private_mb(pid: int) -> float | None:
    """Memory a worker does not share with the zygote (Private_Clean + Private_Dirty), if readable."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            return sum(int(line.split()[1]) for line in f if line.startswith(("Private_Clean", "Private_Dirty"))) / 1024
    except (OSError, ValueError):
        return None


def _zygote(preload: tuple[str, ...], sessions: int) -> dict:
    start = time.perf_counter()
    with SandboxPool(SandboxConfig(preload=preload)) as pool:
        pool_start = time.perf_counter() - start
        return {"preload": list(preload), "pool_start_s": pool_start, "preload_s": pool._zygote.hello["preload_s"],
                "session_start": _session_starts(pool, sessions)}


def _session_starts(pool: SandboxPool, n: int) -> dict:
    """Percentiles of opening a session (fork + lock-down + first answer) n times."""
    times = []
    for _ in range(n):
        t = time.perf_counter()
        session = pool.session()
        times.append(time.perf_counter() - t)
        session.close()
    return _percentiles(times)


def run(quick: bool = False) -> dict:
    n_trivial, n_sessions, n_crop = (20, 5, 5) if quick else (300, 50, 50)
    png = _image_png()
    report = {"machine": _machine(), "quick": quick,
              "without_torch": _zygote(("numpy", "cv2", "PIL.Image"), n_sessions)}
    start = time.perf_counter()
    with SandboxPool() as pool:
        report["with_torch"] = {"preload": list(pool.config.preload), "pool_start_s": time.perf_counter() - start,
                                "preload_s": pool._zygote.hello["preload_s"]}
        report["with_torch"]["session_start"] = _session_starts(pool, n_sessions)

        with pool.session(inputs={"image.png": png}) as session:
            session.run("import os\nx = 0")
            for _ in range(10):  # warm up
                session.run("x = 1")
            times = []
            for _ in range(n_trivial):
                t = time.perf_counter()
                result = session.run("x = 1")
                times.append(time.perf_counter() - t)
                assert result.ok, result
            trivial = _percentiles(times)
            trivial.update(target_p50_ms=TARGET_P50_MS, passed=trivial["p50_ms"] <= TARGET_P50_MS)
            report["trivial_cell"] = trivial
            report.update(_crop_save(session, png, n_crop))
            report["worker_private_mb"] = _private_mb(session._worker.pid) if session._worker else None
        report["concurrent"] = _concurrent(pool, png, 16)
    return report


def _crop_save(session, png: bytes, runs: int) -> dict:
    """The crop + save cell in the sandbox, interleaved with the same code exec'd in this process with no
    sandbox (the baseline), so that both see the same machine load; then the collected crop decoded by the
    worker (as the toolbox reads it) against `to_array` on it in this process."""
    import tempfile

    from tools.images import to_array
    with tempfile.TemporaryDirectory() as scratch:
        inputs, outputs = Path(scratch, "inputs"), Path(scratch, "outputs")
        inputs.mkdir()
        outputs.mkdir()
        (inputs / "image.png").write_bytes(png)
        local = CROP_SAVE.replace("os.path.join(os.environ['INPUTS_DIR'], 'image.png')",
                                  repr(str(inputs / "image.png")))
        local = local.replace("f'outputs/", f"f'{outputs}/")
        sandboxed, baseline, decoded, read_here = [], [], [], []
        for n in range(runs + 2):  # the first two warm up PIL's PNG plugin and zlib on both sides
            t = time.perf_counter()
            result = session.run(f"n = {n}\n" + CROP_SAVE)
            elapsed = time.perf_counter() - t
            if not result.ok or [p.name for p in result.images] != [f"crop_{n}.png"]:
                raise RuntimeError(f"crop + save failed: {result}")
            t = time.perf_counter()
            exec(local, {"n": n})
            local_s = time.perf_counter() - t
            t = time.perf_counter()
            session.decode(result.images[0], max_pixels=1 << 26, max_bytes=1 << 30)
            decode_s = time.perf_counter() - t
            t = time.perf_counter()
            to_array(result.images[0])
            if n >= 2:
                sandboxed.append(elapsed)
                baseline.append(local_s)
                decoded.append(decode_s)
                read_here.append(time.perf_counter() - t)
    overhead = statistics.median(a - b for a, b in zip(sandboxed, baseline)) * 1e3
    return {"crop_save": _percentiles(sandboxed), "crop_save_in_process": _percentiles(baseline),
            "crop_save_overhead_ms": overhead, "decode": _percentiles(decoded),
            "decode_in_process": _percentiles(read_here),
            "decode_overhead_ms": statistics.median(a - b for a, b in zip(decoded, read_here)) * 1e3}


def _episode(pool: SandboxPool, png: bytes, index: int) -> tuple[bool, float, str]:
    start = time.perf_counter()
    cells = ["import os\nimport numpy as np\nfrom PIL import Image",
             "img = np.asarray(Image.open(os.path.join(os.environ['INPUTS_DIR'], 'image.png')))",
             f"n = {index}\n" + CROP_SAVE,
             "print(img.shape, float(img.mean()) > 0)"]
    try:
        with pool.session(inputs={"image.png": png}) as session:
            results = [session.run(cell, timeout_s=60) for cell in cells]
    except Exception as err:  # noqa: BLE001 - reported as a failed episode
        return False, time.perf_counter() - start, f"{type(err).__name__}: {err}"
    ok = all(r.ok for r in results) and len(results[2].images) == 1 and results[3].stdout == "(1024, 1024, 3) True\n"
    problem = "" if ok else next((r.error or r.stdout for r in results if not r.ok), repr(results[2:]))
    return ok, time.perf_counter() - start, problem


def _concurrent(pool: SandboxPool, png: bytes, episodes: int) -> dict:
    barrier = threading.Barrier(episodes)

    def one(index):
        barrier.wait()
        return _episode(pool, png, index)

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=episodes) as executor:
        outcomes = list(executor.map(one, range(episodes)))
    wall = time.perf_counter() - start
    return {"episodes": episodes, "ok": sum(ok for ok, _, _ in outcomes), "wall_s": wall,
            "episode": _percentiles([seconds for _, seconds, _ in outcomes]),
            "problems": [problem for ok, _, problem in outcomes if not ok]}


def format_report(r: dict) -> str:
    m, with_torch, without = r["machine"], r["with_torch"], r["without_torch"]
    trivial, crop, conc = r["trivial_cell"], r["crop_save"], r["concurrent"]

    def pct(p):
        return f"p50 {p['p50_ms']:.2f} ms, p95 {p['p95_ms']:.2f} ms (n={p['n']})"

    private = r["worker_private_mb"]
    lines = [
        f"sandbox benchmark{' (quick)' if r['quick'] else ''}: {m['cores']} cores, {m['memory_gib']} GiB, {m['cpu']}, "
        f"Linux {m['kernel']} ({m['arch']}), Python {m['python']}",
        f"zygote start, preloading {', '.join(with_torch['preload'])}: {with_torch['pool_start_s']:.2f} s "
        f"(imports {with_torch['preload_s']:.2f} s; the rest is the isolation probe)",
        f"zygote start without torch ({', '.join(without['preload'])}): {without['pool_start_s']:.2f} s "
        f"(imports {without['preload_s']:.2f} s)",
        f"session start (fork + lock-down + first answer): {pct(with_torch['session_start'])}",
        f"session start without torch preloaded: {pct(without['session_start'])}",
        f"trivial cell `x = 1` on a warm worker: {pct(trivial)}; target p50 <= {trivial['target_p50_ms']:.0f} ms: "
        f"{'PASS' if trivial['passed'] else 'FAIL'}",
        f"crop + save of a 1024x1024 PNG (inputs -> crop 512x512 -> outputs, collected): {pct(crop)}",
        f"  the same code in this process, no sandbox, interleaved: {pct(r['crop_save_in_process'])}; "
        f"sandbox overhead p50 {r['crop_save_overhead_ms']:.1f} ms (median of the paired differences)",
        f"the collected 512x512 crop decoded by the worker (session.decode): {pct(r['decode'])}",
        f"  to_array on it in this process, interleaved: {pct(r['decode_in_process'])}; "
        f"overhead p50 {r['decode_overhead_ms']:.1f} ms (median of the paired differences)",
        "worker memory not shared with the zygote after these cells: "
        + (f"{private:.0f} MB" if private is not None else "unknown (no /proc/<pid>/smaps_rollup)"),
        f"{conc['episodes']} concurrent episodes on {m['cores']} cores (open, 4 cells incl. crop + save, close): "
        f"{conc['ok']}/{conc['episodes']} ok ({'PASS' if conc['ok'] == conc['episodes'] else 'FAIL'}), "
        f"wall {conc['wall_s']:.2f} s; per episode {pct(conc['episode'])}",
    ]
    lines += [f"  failed episode: {problem}" for problem in conc["problems"]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m runtime.sandbox.bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small n: checks that everything runs, not timings")
    parser.add_argument("--json", metavar="PATH", help="also write the numbers as JSON")
    args = parser.parse_args(argv)
    report = run(args.quick)
    print(format_report(report))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    return 0 if report["concurrent"]["ok"] == report["concurrent"]["episodes"] else 1


if __name__ == "__main__":
    sys.exit(main())
