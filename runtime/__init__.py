"""The agent runtime: the trajectory format, the episode state machine, the models' tool-call protocols
and the code sandbox. Everything that runs a model with tools (eval/, data_gen/, train/) goes through
it; it imports only `tools/`.

- `runtime.trajectory`: the canonical, JSON-serializable conversation (OpenAI-style messages + images).
- `runtime.episode`: one task as a state machine with budgets, an image workspace and a stop reason.
- `runtime.protocols`: how each model family spells tool calls, and how results go back to it.
- `runtime.profiles`: per-model settings (protocol, tool set, box convention, stop strings).
- `runtime.code_tools`: code-as-a-tool interfaces (Thyme, PyVision, VisualToolBench, Agentic-MME Gen).
- `runtime.sandbox`: the subprocess sandbox that runs model-written code.
"""
