"""Process metrics of tool-using episodes, as the benchmarks define them (`../shared/notes/benchmarks.md`).

Every function reads trajectories in the runtime's canonical format (`runtime.trajectory`): assistant
messages carry `tool_calls`, tool messages carry `error` and the indices of the images they produced.

- tool-call rate (VTC-Bench's TCR, VisualToolBench's proactivity): share of episodes with at least one call;
- calls per episode (VisualToolBench's volume) and tool success rate (valid calls / calls);
- chain-length MAE against the reference: mean |L_reference - L_total| (VTC-Bench);
- tool efficiency: sum(L_effective) / sum(L_total) (VTC-Bench), where the effective chain is found by
  backtracking from the last call before the answer, through the images each call read, to the calls
  that made them; calls whose results nothing downstream used are not effective;
- overthink: max(0, C_agent - C_reference) / (C_reference + 1) (Agentic-MME);
- the tool-use distribution: calls per tool name.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass

from runtime.toolbox import WORKSPACE_FILE


@dataclass(frozen=True)
class Call:
    name: str
    ok: bool
    reads: tuple[int, ...]  # image indices the call operated on
    made: tuple[int, ...]  # image indices it produced


def calls(messages: list[dict]) -> list[Call]:
    """The tool calls of a trajectory in order, with the images each read and produced. An `image_index`
    (or `<name>_index`) argument names an input, and so does a workspace file path (VTC-Bench's `image` and
    `template_path`: `.../image_N.png`); without either a call reads the latest image, the default of
    tirlab's tool sets and of code tools that open the newest file."""
    images = 0
    pending: dict[str, tuple[str, tuple[int, ...]]] = {}
    out = []
    for message in messages:
        parts = message.get("content") or []
        made = tuple(p["image"] for p in parts if isinstance(p, dict) and p.get("type") == "image")
        if message["role"] == "assistant":
            for call in message.get("tool_calls") or []:
                pending[call["id"]] = (call["function"]["name"], _reads(call["function"]["arguments"], images))
        elif message["role"] == "tool":
            name, reads = pending.pop(message.get("tool_call_id"), (message.get("name", "?"), ()))
            out.append(Call(name, not message.get("error"), reads, made))
        images = max([images, *(index + 1 for index in made)])
    return out


def _reads(arguments, images: int) -> tuple[int, ...]:
    try:
        args = json.loads(arguments) if isinstance(arguments, str) else dict(arguments or {})
    except (TypeError, ValueError):
        return ()
    if not isinstance(args, dict):
        return ()
    indices = [v for k, v in args.items() if (k == "image_index" or k.endswith("_index")) and type(v) is int]
    files = [int(m.group(1)) for v in _strings(args) if (m := WORKSPACE_FILE.search(v))]
    if "image_index" not in args and not files:
        indices.append(-1)
    return tuple(sorted({i if i >= 0 else images + i for i in indices + files if -images <= i < images}))



def _strings(value) -> list[str]:
    """Every string in a call's arguments (paths may sit in a nested `param` object)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def effective_calls(chain: list[Call]) -> int:
    """How many calls lie on the chain that leads to the answer (`effective_chain`)."""
    return len(effective_chain(chain))


def effective_chain(chain: list[Call]) -> list[Call]:
    """The calls on the chain that leads to the answer, in order: the last successful call, and
    recursively every call that produced an image it read."""
    ok = [c for c in chain if c.ok]
    if not ok:
        return []
    maker = {index: k for k, call in enumerate(ok) for index in call.made}
    used, stack = set(), [len(ok) - 1]
    while stack:
        k = stack.pop()
        if k in used:
            continue
        used.add(k)
        stack.extend(maker[i] for i in ok[k].reads if i in maker and maker[i] < k)
    return [ok[k] for k in sorted(used)]


def overthink(agent_calls: int, reference_calls: int) -> float:
    return max(0, agent_calls - reference_calls) / (reference_calls + 1)


def process_metrics(episodes: list[tuple[list[dict], int | None]]) -> dict:
    """Metrics over (messages, reference call count or None) pairs; reference-based metrics use only the
    episodes that have a reference."""
    chains = [(calls(messages), reference) for messages, reference in episodes]
    total = sum(len(chain) for chain, _ in chains)
    referenced = [(len(chain), reference) for chain, reference in chains if reference is not None]
    n = len(chains)
    return {
        "episodes": n,
        "tool_call_rate": sum(bool(chain) for chain, _ in chains) / n if n else 0.0,
        "calls_per_episode": total / n if n else 0.0,
        "tool_success_rate": sum(c.ok for chain, _ in chains for c in chain) / total if total else None,
        "chain_length_mae": (sum(abs(ref - length) for length, ref in referenced) / len(referenced)
                             if referenced else None),
        "tool_efficiency": sum(effective_calls(chain) for chain, _ in chains) / total if total else None,
        "overthink": (sum(overthink(length, ref) for length, ref in referenced) / len(referenced)
                      if referenced else None),
        "tool_distribution": dict(Counter(c.name for chain, _ in chains for c in chain).most_common()),
    }
