"""What the benchmark loaders share: finding the published files (a local copy, or the hub through
`huggingface_hub`), checking every row (a bad one is skipped with its reason, never silently dropped),
unpacking an image archive once, and images decoded only when an episode needs them."""

from __future__ import annotations

import os
import shutil
import zipfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Callable

import numpy as np

from eval.config import cache_dir
from eval.suites import Skipped, Task


def dataset_folder(repo_id: str, data_dir: str | None, revision: str | None, patterns: list[str]) -> tuple[Path, str]:
    """The folder holding a benchmark's published files, and how the report names it: `data_dir` as it is, or a
    snapshot of the hub dataset `repo_id` (its resolved commit is the dataset revision)."""
    if data_dir is not None:
        folder = Path(data_dir).expanduser()
        if not folder.is_dir():
            raise FileNotFoundError(f"--data_dir {data_dir} is not a folder; give the folder that holds the "
                                    f"{repo_id} files")
        return folder.resolve(), f"{folder.resolve()} (local copy of {repo_id})"
    from huggingface_hub import snapshot_download

    try:
        folder = Path(snapshot_download(repo_id, repo_type="dataset", revision=revision, allow_patterns=patterns))
    except Exception as err:  # noqa: BLE001 - offline, gated, a bad revision: all end the same way for the user
        raise FileNotFoundError(f"could not get the dataset {repo_id} from the hub ({type(err).__name__}: {err}); "
                           f"download it where there is access (`hf download {repo_id} --repo-type dataset "
                           "--local-dir DIR`) and pass --data_dir DIR") from None
    return folder, f"{repo_id}@{folder.name}"  # snapshot folders are named by the commit they hold


class RowError(ValueError):
    """A dataset row that cannot be a task, and the field that says why."""

    def __init__(self, field: str, problem: str):
        super().__init__(f"field {field!r}: {problem}")


def checked_rows(rows: list, make_task: Callable[[dict], Task], where: Callable[[int], str], category: str,
                 first: int = 0) -> tuple[list[Task], list[Skipped]]:
    """Each row as a task, or skipped with its reason (`where(number)` names the file and the row; `category`
    is the row's field reports group it by); ids must be unique. A skipped row keeps its own id unless a task
    or another skipped row has it. No task at all is an error."""
    tasks, refused, seen = [], [], set()
    for number, row in enumerate(rows, first):
        try:
            task = make_task(row)
            if task.id in seen:
                raise RowError("id", f"repeats id {task.id!r}; ids must be unique")
        except RowError as err:
            fields = row if isinstance(row, dict) else {}
            ident = fields.get("id")
            refused.append((f"row-{number}" if ident in (None, "") else str(ident), number,
                            str(fields.get(category) or "unknown"), f"{where(number)}: {err}"))
            continue
        seen.add(task.id)
        tasks.append(task)
    if not tasks:
        raise ValueError(f"no row could be loaded; the first problem: {refused[0][3]}" if refused else
                         "the dataset has no rows")
    taken = Counter([t.id for t in tasks] + [ident for ident, *_ in refused])
    skipped = [Skipped(ident if taken[ident] == 1 else f"{ident}#{number}", group, reason)
               for ident, number, group, reason in refused]
    return tasks, skipped


def wanted(names: list[str], known: tuple[str, ...], what: str) -> set[str]:
    """The categories a run keeps (`--tasks`), every one when none is named; an unknown name is an error that
    lists the known ones."""
    unknown = sorted(set(names) - set(known))
    if unknown:
        raise ValueError(f"unknown {what}(s) {unknown}; the benchmark's are {', '.join(known)}")
    return set(names or known)


def keep(tasks: list[Task], skipped: list[Skipped], categories: set[str],
         known: tuple[str, ...]) -> tuple[list[Task], list[Skipped]]:
    """The tasks and skipped rows of the wanted categories; a row skipped for a category the benchmark does not
    know stays in a run of every category."""
    everything = categories == set(known)
    return ([t for t in tasks if t.category in categories],
            [s for s in skipped if s.category in categories or (everything and s.category not in known)])


def unpacked(archive: Path, name: str) -> Path:
    """`archive` (a zip) extracted once into tirlab's cache, keyed by its size and modification time; the
    folder it was extracted into."""
    stat = archive.stat()
    target = cache_dir() / "datasets" / f"{name}-{stat.st_size}-{int(stat.st_mtime)}"
    if target.is_dir():
        return target
    partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    try:
        with zipfile.ZipFile(archive) as zipped:
            zipped.extractall(partial)
    except zipfile.BadZipFile as err:
        shutil.rmtree(partial, ignore_errors=True)
        raise ValueError(f"{archive} is not a readable zip archive ({err}); download it again") from None
    try:
        partial.rename(target)
    except OSError:  # another process unpacked it first
        shutil.rmtree(partial, ignore_errors=True)
    return target


class LazyImages(Sequence):
    """A task's images, decoded when an episode reads them: a benchmark's full set of images would not fit
    in memory at once."""

    def __init__(self, sources: tuple, decode: Callable[[object], np.ndarray]):
        self.sources, self.decode = tuple(sources), decode

    def __len__(self) -> int:
        return len(self.sources)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self.decode(source) for source in self.sources[index]]
        return self.decode(self.sources[index])

    def __repr__(self) -> str:
        return f"LazyImages({len(self)} image(s))"


def count_check(benchmark: str, expected: dict[str, dict[str, int]], rows: list[tuple[str, dict[str, str]]],
                skipped: list[Skipped] = ()) -> str:
    """How a loaded dataset compares with the item counts its paper states, in one line for the run's output and
    the report. `expected` maps a level ("total", "category", "level", "split", ...) to each group's count
    (the total as {"all": n}); `rows` is every row read, tasks and skipped rows alike, as (id, {level: group}).
    The answer is a match, a subset (fewer rows than the paper in some groups and more in none: a local copy
    or a slice) or the differences, naming the rows of a group the paper does not have and the skipped rows."""
    total = expected.get("total", {}).get("all")
    found = {level: Counter(fields.get(level) for _, fields in rows) for level in expected if level != "total"}
    fewer, more, unknown = [], [], []
    for level, groups in expected.items():
        counts = Counter({"all": len(rows)}) if level == "total" else found[level]
        for group, count in groups.items():
            if counts[group] < count:
                fewer.append(f"{level} {group}: {counts[group]} here, {count} in the paper")
            elif counts[group] > count:
                more.append(f"{level} {group}: {counts[group]} here, {count} in the paper")
        if level != "total":
            strangers = sorted({str(g) for g in counts if g not in groups})
            for group in strangers:
                ids = [ident for ident, fields in rows if str(fields.get(level)) == group]
                unknown.append(f"{level} {group!r}, which the paper does not have: {len(ids)} row(s) "
                               f"({_some(ids)})")
    unloadable = f"; {len(skipped)} row(s) could not be loaded ({_some([s.id for s in skipped])})" if skipped else ""
    stated = f"the paper's {total} items" if total else "the paper's counts"
    if not (fewer or more or unknown):
        return f"{benchmark}: {len(rows)} rows, as {stated} per {', '.join(expected)}{unloadable}"
    if fewer and not (more or unknown):
        return (f"{benchmark}: a subset, {len(rows)} rows of {stated} ({'; '.join(fewer)}){unloadable}")
    return f"{benchmark}: differs from {stated}: {'; '.join(more + fewer + unknown)}{unloadable}"


def _some(ids: list[str], shown: int = 8) -> str:
    return ", ".join(ids[:shown]) + (f" and {len(ids) - shown} more" if len(ids) > shown else "")
