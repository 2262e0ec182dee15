"""Task generators. Each module has `NAME`, `generate(seed, difficulty, ...) -> Sample` and
`check(sample, workspace, reports)`, the audit's evidence check (`data_gen.sample.audit`)."""

from types import ModuleType

from data_gen.tasks import (
    color_proportion,
    counting,
    instrument,
    jigsaw,
    low_light,
    maze,
    measurement,
    rotated_ocr,
    rotation_game,
    spot_difference,
    symbolic,
    visual_search,
    word_search,
)

TASKS: dict[str, ModuleType] = {m.NAME: m for m in (
    rotated_ocr, rotation_game, jigsaw, color_proportion, maze, word_search, spot_difference, low_light,
    visual_search, symbolic, counting, measurement, instrument,
)}


def get_task(name: str) -> ModuleType:
    try:
        return TASKS[name]
    except KeyError:
        raise ValueError(f"unknown task {name!r}; available: {', '.join(TASKS)}") from None
