"""A run directory: everything one evaluation wrote, enough to resume it, merge its shards and report it.

    runs/<name>/
      config.json                  the resolved configuration (and the versions that ran it)
      records.jsonl                one record per (task, mode); records.shard-<i>-of-<n>.jsonl when sharded
                                   (one split per directory: `merge` joins its shards into records.jsonl)
      judgments.jsonl              what an LLM judge later decided about a record (its score fields), by (task, mode)
      done.shard-<i>-of-<n>        shard i finished (recorded and judged every task); merge waits for all
      images/<hash>.png            every image of every trajectory, stored once
      report.md, summary.json, plots/
      report.html, report_files/   every episode, for a browser (viewer/)

A record is written (and flushed to disk) as soon as its episode ends, so an interrupted run loses only
the episodes in flight; starting it again with the same configuration skips every (task, mode) already
recorded. A line cut short by a kill is dropped on resume. Judgments are kept apart, so a run killed while
its judge works keeps every episode, and its resumption judges only what has no judgment yet; `records()`
gives each record with its judgment applied.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Iterable

from runtime.trajectory import drop_partial_line, json_line

# configuration keys that may differ between a run and its resumption (they do not change results)
RESUMABLE = ("shard", "max_active", "concurrency", "timeout_s", "retries", "overwrite", "versions", "limit",
             "judge_retries", "judge_base_url", "judge_api", "web_cache", "web_max_calls", "web_max_cost",
             "web_timeout_s")
# what a run writes per split: records.jsonl (unsharded or merged), records.shard-<i>-of-<n>.jsonl (shard i of n)
SPLIT_FILE = re.compile(r"(records|judgments)(?:\.shard-(\d+)-of-(\d+))?\.jsonl")


class RunDir:
    def __init__(self, path: str | Path, shard: tuple[int, int] = (0, 1)):
        self.path = Path(path)
        self.shard = shard
        self.images = self.path / "images"

    @property
    def records_path(self) -> Path:
        return self._shard_file("records")

    @property
    def judgments_path(self) -> Path:
        return self._shard_file("judgments")

    @property
    def web_record_path(self) -> Path:
        """The web tools' recording (runtime/web.py): every live reply of this shard."""
        return self._shard_file("web_record")

    @property
    def web_usage_path(self) -> Path:
        """What this shard's live web calls cost."""
        return self._shard_file("web_usage", ".json")

    @property
    def done_path(self) -> Path:
        """Written when a shard has recorded and judged all its tasks; `merge` waits for every shard's."""
        index, count = self.shard
        return self.path / f"done.shard-{index}-of-{count}"

    def mark_done(self) -> None:
        _write_atomic(self.done_path, "")

    def _shard_file(self, kind: str, suffix: str = ".jsonl") -> Path:
        index, count = self.shard
        return self.path / (f"{kind}{suffix}" if count == 1 else f"{kind}.shard-{index}-of-{count}{suffix}")

    def open(self, config: dict, overwrite: bool = False) -> set[tuple[str, str]]:
        """Create the directory, or check that it holds this same run; returns the (task id, mode) pairs
        already recorded in this shard."""
        config_path = self.path / "config.json"
        previous = json.loads(config_path.read_text()) if config_path.exists() else None
        # a key only one side has comes from another tirlab version: it cannot have been set differently
        changed = sorted(k for k in set(previous or {}) & set(config)
                         if k not in RESUMABLE and previous[k] != config[k])
        if changed and not overwrite:
            raise ValueError(f"{self.path} holds a run with a different configuration ({', '.join(changed)}); "
                             "resume it with the same settings, choose another --out, or pass --overwrite")
        if overwrite and self.path.exists():
            # a shard of the same configuration starts over alone: the other shards of its split may be running
            # beside it (an array job); a new configuration starts the whole run over
            keep = set()
            if self.shard[1] > 1 and previous is not None and not changed:
                keep = {f for f in [*split_files(self.path).get(self.shard[1], []),
                                    *self.path.glob(f"done.shard-*-of-{self.shard[1]}"),
                                    *self.path.glob(f"web_*.shard-*-of-{self.shard[1]}.json*")]
                        if f.name not in (self.records_path.name, self.judgments_path.name, self.done_path.name,
                                          self.web_record_path.name, self.web_usage_path.name)}
            for stale in [*self.path.glob("records*.jsonl"), *self.path.glob("judgments*.jsonl"),
                          *self.path.glob("web_record*.jsonl"), *self.path.glob("web_usage*.json"),
                          *self.path.glob("done.shard-*"), self.path / "summary.json", self.path / "report.md"]:
                if stale not in keep:
                    stale.unlink(missing_ok=True)
        self.done_path.unlink(missing_ok=True)  # this shard is running again: not done until it ends
        self._check_split()
        self.images.mkdir(parents=True, exist_ok=True)
        _write_atomic(config_path, json.dumps(config, indent=2, ensure_ascii=False) + "\n")
        if not self.records_path.exists():
            return set()
        drop_partial_line(self.records_path)
        return {(r["id"], r["mode"]) for r in read_records(self.records_path)}

    def _check_split(self) -> None:
        """One split per directory: shards of another count, or an unsharded (merged) run beside shards, would
        evaluate tasks twice and could never merge."""
        index, count = self.shard
        others = {n: files for n, files in split_files(self.path).items() if n != count}
        if not others:
            return
        found = "; ".join(_describe_split(n, files) for n, files in sorted(others.items()))
        this = f"--shard {index}/{count}" if count > 1 else "an unsharded run (no --shard)"
        if len(others) > 1:
            todo = "remove the files of the splits you do not want"
        elif count == 1:
            (theirs,) = others
            todo = (f"merge them first (python eval/run_vllm.py merge {self.path}) and run again, or resume them "
                    f"with --shard i/{theirs}")
        elif 1 in others:
            todo = "resume or report that run without --shard"
        else:
            (theirs,) = others
            todo = (f"resume that split with --shard i/{theirs} (recipes/slurm/eval.sbatch: SHARDS={theirs}, or "
                    "SHARDS unset)")
        raise ValueError(f"{self.path} holds {found}, and this is {this}: a run directory holds one split, or "
                         f"tasks would be evaluated twice. To go on: {todo}; or choose another --out, or pass "
                         "--overwrite to start over")

    def append(self, record: dict) -> None:
        _append_line(self.records_path, record)

    def append_judgment(self, record: dict, fields: dict) -> None:
        """What the judge decided about `record`: fields that replace the record's own when it is read."""
        _append_line(self.judgments_path, {"id": record["id"], "mode": record["mode"], **fields})

    def judged(self) -> set[tuple[str, str]]:
        """The (task id, mode) pairs the run has a judgment for (in any judgments file)."""
        if self.judgments_path.exists():
            drop_partial_line(self.judgments_path)
        return {(j["id"], j["mode"]) for f in sorted(self.path.glob("judgments*.jsonl")) for j in read_records(f)}

    def records(self) -> list[dict]:
        """Every record of the run, all shards, each with its judgment applied; a (task, mode) recorded twice is
        an error."""
        records = unique_records(r for f in sorted(self.path.glob("records*.jsonl")) for r in read_records(f))
        judgments = {(j["id"], j["mode"]): j for f in sorted(self.path.glob("judgments*.jsonl"))
                     for j in read_records(f)}
        for record in records:
            judgment = judgments.get((record["id"], record["mode"]))
            if judgment is not None:
                record.update({k: v for k, v in judgment.items() if k not in ("id", "mode")}, judge_pending=False)
        return records


def split_files(path: str | Path) -> dict[int, list[Path]]:
    """The records and judgments files in a run directory by the shard count of the split that wrote them
    (1: records.jsonl and judgments.jsonl, an unsharded or merged run)."""
    splits: dict[int, list[Path]] = {}
    for f in sorted(Path(path).glob("*.jsonl")):
        match = SPLIT_FILE.fullmatch(f.name)
        if match:
            splits.setdefault(int(match[3] or 1), []).append(f)
    return splits


def _describe_split(count: int, files: list[Path]) -> str:
    names = ", ".join(f.name for f in files[:4]) + (f" and {len(files) - 4} more" if len(files) > 4 else "")
    return f"an unsharded or merged run ({names})" if count == 1 else f"the shards of a {count}-way split ({names})"


def read_records(path: Path) -> Iterable[dict]:
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.endswith("\n"):
                return  # cut short by a kill; the resumed run writes it again
            try:
                yield json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{path}:{number}: not a JSON record ({err.msg}); remove the line to go on") from None


def unique_records(records: Iterable[dict]) -> list[dict]:
    seen, out = set(), []
    for record in records:
        key = (record["id"], record["mode"])
        if key in seen:
            raise ValueError(f"task {key[0]!r} ({key[1]}) is recorded twice: were two runs with overlapping "
                             "shards merged into one directory?")
        seen.add(key)
        out.append(record)
    return out


def merge(path: str | Path) -> list[dict]:
    """Join the shard files of a run into records.jsonl and judgments.jsonl (checking every shard of the split is
    there). A run merged already is left as it is (a requeued merge job does no harm)."""
    run = RunDir(path)
    shards = sorted(run.path.glob("records.shard-*-of-*.jsonl"))
    if not shards and not (run.path / "records.jsonl").exists():
        raise ValueError(f"{run.path} has no shard files (records.shard-<i>-of-<n>.jsonl) to merge")
    if shards:
        names = [SPLIT_FILE.fullmatch(f.name) for f in shards]
        counts = {int(name[3]) for name in names if name}
        indices = {int(name[2]) for name in names if name}
        if len(counts) != 1 or indices != set(range(next(iter(counts)))):
            found = ", ".join(f.name for f in shards)
            raise ValueError(f"{run.path}: the shards of one split are needed, each once; found {found}")
        (count,) = counts
        running = [i for i in sorted(indices) if not RunDir(run.path, (i, count)).done_path.exists()]
        if running:  # a shard still running (or stopped) would lose what it records after the merge
            raise ValueError(f"{run.path}: shard(s) {', '.join(map(str, running))} of {count} have not finished "
                             f"(no done.shard-<i>-of-{count}): let them finish, or resume them (--shard i/{count}; "
                             f"recipes/slurm/eval.sbatch: SHARDS={count} --array={','.join(map(str, running))}), "
                             "then merge")
        unique_records(r for f in shards for r in read_records(f))
    for kind in ("judgments", "records"):  # judgments first: a merge cut short never leaves them behind
        files = sorted(run.path.glob(f"{kind}.shard-*-of-*.jsonl"))
        if files:
            merged = run.path / f"{kind}.jsonl"
            earlier = list(read_records(merged)) if merged.exists() else []
            lines = earlier + [r for f in files for r in read_records(f)]
            _write_atomic(merged, "".join(json_line(r) for r in lines))
            for shard in files:
                shard.unlink()
    for marker in run.path.glob("done.shard-*"):
        marker.unlink()
    return run.records()


def _append_line(path: Path, entry: dict) -> None:
    with open(path, "a", encoding="utf-8") as out:
        out.write(json_line(entry))
        out.flush()
        os.fsync(out.fileno())


def _write_atomic(path: Path, text: str) -> None:
    temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")  # shards may write at once
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)
