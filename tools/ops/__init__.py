"""Importing this package registers every op family in tools.registry.REGISTRY."""

from tools.ops import analysis, color, draw, filters, geometry  # noqa: F401
