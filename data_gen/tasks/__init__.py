"""Task generators. Each module has `NAME`, `SCORER` (the name of its answer scorer in `eval.scorers`),
`generate(seed, difficulty, ...) -> Sample` and `check(sample, workspace)`, the audit's evidence check."""

from types import ModuleType

from data_gen.tasks import color_proportion, jigsaw, rotated_ocr, rotation_game

TASKS: dict[str, ModuleType] = {m.NAME: m for m in (rotated_ocr, rotation_game, jigsaw, color_proportion)}


def get_task(name: str) -> ModuleType:
    try:
        return TASKS[name]
    except KeyError:
        raise ValueError(f"unknown task {name!r}; available: {', '.join(TASKS)}") from None
