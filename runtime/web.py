"""The web tools' backend: a benchmark's search, reverse image search, page reading and weather calls are answered
by recording or by the live providers the benchmark's runners call, and a live run is reproducible offline:

- `replay` (default): answers recorded earlier, keyed by call (the tool and what identifies its arguments): the
  suite's shipped recordings, the run's own `web_record.jsonl` and the user's `--web_replay` files;
- `live`: a recorded answer where there is one, else the benchmark's own client for the provider (real HTTP through
  `runtime.web_http`), whose reply, success or failure, is stored in the run's recording; `--web replay` with that
  file then gives every tool reply of the run again, offline and without keys;
- `offline`: every call gets an "unavailable" reply.

Within a run each call has one answer (the first, kept across resumes), so a run is a function of its recording.
A reply that a provider fault made (HTTP 429 or 5xx after the retries, a timeout, a body that is not JSON) is
recorded as such: a replay gives it again, while a live run that finds it in another run's recording asks the
provider again. A call without an answer gets a reply that contains `UNAVAILABLE_MARK` (in the benchmark's own
error shape), which reports count as `web_unavailable`.
Recordings are JSONL lines `{"tool", "arguments", "reply"}` plus `"error": true` for an error reply and
`"fault": [...]` for one a provider fault made; a later line for the same call wins. No key is ever written: every
text a provider hands back passes `WebHttp.redact` first.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from runtime.trajectory import drop_partial_line, message_text
from runtime.web_http import WebBudgetReached, WebHttp, WebPolicy, WebUsage
from tools.toolset import Reply

MODES = ("replay", "live", "offline")
UNAVAILABLE_MARK = "unavailable in this run"
CACHE_ENV = "TIRLAB_WEB_CACHE"


@dataclass(frozen=True)
class Recorded:
    reply: Reply
    fault: tuple[str, ...] = ()


@dataclass(frozen=True)
class LiveProvider:
    """A benchmark's live client: the environment variables holding its keys (required ones, named with what needs
    them, and optional ones) and `make(http, keys)`, the client whose methods return the runner's reply."""
    benchmark: str
    keys: dict[str, str]
    optional_keys: dict[str, str]
    make: Callable[[WebHttp, dict[str, str]], object]


class Web:
    def __init__(self, mode: str = "replay", replay: list[str | Path] = (), record_to: str | Path | None = None,
                 provider: LiveProvider | None = None, policy: WebPolicy | None = None,
                 usage_to: str | Path | None = None, environ: dict | None = None, own: list[str | Path] = (),
                 usage: WebUsage | None = None):
        """`replay`: recordings from elsewhere (a suite's, the user's); `own`: the run's own (read last, so they win,
        and final: a fault in them is the run's answer); `usage`: what the run's live calls cost so far."""
        if mode not in MODES:
            raise ValueError(f"unknown web mode {mode!r}; use one of {MODES}")
        self.mode, self.record_to = mode, Path(record_to) if record_to else None
        self.recorded: dict[str, Recorded] = {}
        for path in replay:
            self.recorded.update(read_recording(Path(path)))
        self._asked: set[str] = set()  # answered by this run (its recordings, its live calls): final
        for path in own:
            answers = read_recording(Path(path), own=True)
            self.recorded.update(answers)
            self._asked |= set(answers)
        if self.record_to is not None and self.record_to.is_file():
            drop_partial_line(self.record_to)  # a run killed while it wrote one
        self.usage_to = Path(usage_to) if usage_to else None
        self.http, self.client = None, None
        if mode == "live" and provider is not None:
            environ = os.environ if environ is None else environ
            missing = {name: why for name, why in provider.keys.items() if not environ.get(name, "").strip()}
            if missing:
                raise ValueError(f"--web live calls {provider.benchmark}'s providers and needs "
                                 + "; ".join(f"{name} ({why})" for name, why in missing.items())
                                 + " in the environment: set them (docs/web.md says where to get them), or replay a "
                                 "recording with --web replay --web_replay FILE")
            keys = {name: environ[name].strip() for name in (*provider.keys, *provider.optional_keys)
                    if environ.get(name, "").strip()}
            for name, why in provider.optional_keys.items():
                if name not in keys:
                    print(f"--web live: {name} is not set: {why}", file=sys.stderr)
            self.http = WebHttp(policy, usage or WebUsage(), secrets=keys.values())
            self.client = provider.make(self.http, keys)
        self._lock = threading.RLock()

    def answer(self, tool: str, key: dict, live: Callable[[object], Reply] | None = None) -> tuple[Reply | None, str]:
        """The reply to a call identified by `key`, or None and why there is none. `live(client)`: the call through
        the benchmark's live client, asked in live mode when no answer is recorded."""
        if self.mode == "offline":
            return None, "the run is offline (--web offline)"
        name = call_key(tool, key)
        with self._lock:
            found = self.recorded.get(name)
            if found is not None and (self.mode == "replay" or not found.fault or name in self._asked):
                if self.mode == "live" and name not in self._asked:  # another recording's: the run records it too
                    self._asked.add(name)
                    self._record(tool, key, found)
                return found.reply, ""
            if self.mode == "replay" or self.client is None or live is None:
                return None, "no recorded answer for this call (--web replay; call the providers with --web live)"
            self.http.begin_call()
            try:
                reply = live(self.client)
            except WebBudgetReached:
                raise
            except Exception as err:  # noqa: BLE001 - a client bug is the call's reply, never the run's end
                return None, self.http.redact(f"the web client failed ({type(err).__name__}: {err})")
            finally:
                self._save_usage()
            recorded = Recorded(Reply(self.http.redact(reply.text), reply.error), tuple(self.http.call_faults()))
            self.recorded[name] = recorded
            self._asked.add(name)
            self._record(tool, key, recorded)
            return recorded.reply, ""

    def _record(self, tool: str, key: dict, recorded: Recorded) -> None:
        if self.record_to is None:
            return
        line = {"tool": tool, "arguments": key, "reply": recorded.reply.text}
        line |= {"error": True} if recorded.reply.error else {}
        line |= {"fault": list(recorded.fault)} if recorded.fault else {}
        self.record_to.parent.mkdir(parents=True, exist_ok=True)
        with self.record_to.open("a", encoding="utf-8") as out:
            # ASCII-escaped: a reply's U+2028 or U+0085 must not break the line for readers that split on them
            out.write(json.dumps(line) + "\n")

    def _save_usage(self) -> None:
        if self.usage_to is None:
            return
        self.usage_to.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.usage_to.with_name(self.usage_to.name + ".tmp")
        temporary.write_text(json.dumps(self.http.usage.to_json(), indent=1, sort_keys=True), encoding="utf-8")
        os.replace(temporary, self.usage_to)


def call_key(tool: str, arguments: dict) -> str:
    return json.dumps([tool, arguments], sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def read_recording(path: Path, own: bool = False) -> dict[str, Recorded]:
    """A recording's answers by call key; a malformed line is an error naming the file and the line, but for the
    unfinished last line of a run's own recording (the run was killed while it wrote it), which is left out."""
    answers = {}
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        if own and number == len(lines) and _unfinished(line):
            print(f"{path}, line {number}: an unfinished last line (a run stopped while writing it), left out",
                  file=sys.stderr)
            break
        try:
            row = json.loads(line)
            if not (isinstance(row, dict) and isinstance(row.get("tool"), str) and isinstance(row.get("reply"), str)
                    and isinstance(row.get("arguments"), dict) and isinstance(row.get("error", False), bool)
                    and isinstance(row.get("fault", []), list)):
                raise ValueError('each line is {"tool": name, "arguments": {...}, "reply": text}, with "error": '
                                 'true/false and "fault": [...] where a provider failed')
        except ValueError as err:
            raise ValueError(f"{path}, line {number}: not a web recording ({err})") from None
        answers[call_key(row["tool"], row["arguments"])] = Recorded(Reply(row["reply"], row.get("error", False)),
                                                                    tuple(map(str, row.get("fault", []))))
    return answers


def web_from_config(config, shipped: list[Path] = (), provider: LiveProvider | None = None) -> Web:
    """The run's web backend: the suite's shipped recordings and the user's `--web_replay` files, then the run
    directory's own (every shard's, from earlier runs into it; not this shard's under --overwrite, which deletes
    them); `live` asks `provider` for the rest and records it in this shard's `web_record.jsonl` (or
    --web_record), its costs in `web_usage.json`."""
    from eval.config import cache_dir
    from eval.rundir import RunDir

    run = RunDir(config.out or ".", config.shard_index)
    record = Path(config.web_record) if config.web_record else run.web_record_path
    own = sorted({record, *run.path.glob("web_record*.jsonl")} - ({record} if config.overwrite else set()))
    usage = None
    if run.web_usage_path.is_file() and not config.overwrite:
        usage = WebUsage.from_json(json.loads(run.web_usage_path.read_text(encoding="utf-8")))
    cache = config.web_cache or os.environ.get(CACHE_ENV) or str(cache_dir() / "web")
    policy = WebPolicy(max_calls=config.web_max_calls, max_cost=config.web_max_cost,
                       timeout_s=config.web_timeout_s, cache_dir=None if cache == "none" else Path(cache))
    return Web(config.web or "replay", [*shipped, *config.web_replay], record, provider, policy, run.web_usage_path,
               own=[path for path in own if path.is_file()], usage=usage)


def read_usage(run_dir: Path) -> WebUsage | None:
    """A run's web usage (requests, retries, cache hits, faults and estimated cost by endpoint, every shard's
    summed), if it made live calls."""
    paths = sorted(Path(run_dir).glob("web_usage*.json"))
    if not paths:
        return None
    total = WebUsage()
    for path in paths:
        usage = WebUsage.from_json(json.loads(path.read_text(encoding="utf-8")))
        for name in ("requests", "retries", "cache_hits", "faults", "cost"):
            getattr(total, name).update(getattr(usage, name))
    return total


def unavailable_calls(messages: list[dict]) -> int:
    """How many tool replies of a trajectory said the web was unavailable."""
    return sum(1 for m in messages if m.get("role") == "tool" and UNAVAILABLE_MARK in message_text(m))


def _unfinished(line: str) -> bool:
    try:
        json.loads(line)
        return False
    except ValueError:
        return True
