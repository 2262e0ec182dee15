"""Evaluation of MLLMs served by vLLM in a multi-turn tool loop."""
