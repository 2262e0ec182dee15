"""Test helpers shared by several test modules."""

from contextlib import contextmanager

from tools.registry import REGISTRY, register


@contextmanager
def registered(*ops):
    """Register test-only ops for the duration of a test, then remove them from the registry."""
    for op in ops:
        register(op)
    try:
        yield
    finally:
        for op in ops:
            REGISTRY.pop(op.name, None)


class MemoryFiles:
    """`ImageFiles` over a dict {path: RGB array}, for tool sets that read and write files (VTC-Bench)."""

    def __init__(self, images: dict, original: str = ""):
        self.images, self.original, self.saved = dict(images), original, []

    def read(self, path: str):
        if path not in self.images:
            raise FileNotFoundError(path)
        return self.images[path]

    def save(self, image) -> str:
        path = f"/episode/image_{len(self.images)}.png"
        self.images[path] = image
        self.saved.append(image)
        return path
