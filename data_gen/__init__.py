"""Synthetic thinking-with-images tasks with reference tool trajectories (issue 4)."""
