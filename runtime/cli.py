"""What tirlab's command line programs share: a mistake of the user's (a bad flag, a missing or malformed config
file, an unknown model, dataset, suite or image) prints what is wrong and what to do, and exits with status 2.
The traceback comes only with `--debug` or TIRLAB_DEBUG=1 (which the programs a run starts inherit).

    if __name__ == "__main__":
        sys.exit(cli.run(main))            # main(argv); its int result is the exit status

tirlab raises ValueError for settings and inputs the user must fix, and so do the libraries it reads them with
(datasets, TRL's parser); FileNotFoundError names a missing file, ConnectionError a server that cannot be reached
(a Hub dataset, offline). Any other exception is a crash and keeps its traceback. Ctrl-C ends a program without
one; a run stopped by its web budget exits with status 3.
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
import traceback
from pathlib import Path

from runtime.lifecycle import Interrupted
from runtime.web_http import WebBudgetReached

DEBUG_ENV = "TIRLAB_DEBUG"
USER_ERRORS = (ValueError, FileNotFoundError, ConnectionError)  # ConnectionError: e.g. a Hub dataset, offline


def run(main, argv: list[str] | None = None, *, debug_takes_values: bool = False) -> int:
    """Run `main(argv)` as a command line program; returns its exit status. `debug_takes_values`: the program
    has a `--debug VALUE` option of its own (transformers' TrainingArguments), which keeps a `--debug` followed
    by a value."""
    argv = _take_debug_flag(list(sys.argv[1:] if argv is None else argv), debug_takes_values)
    try:
        result = main(argv)
    except USER_ERRORS as err:
        if debugging():
            traceback.print_exc()
        else:
            print(f"error: {err}\n(--debug or {DEBUG_ENV}=1 shows the traceback)", file=sys.stderr)
        return 2
    except WebBudgetReached:  # the program said what stopped it and how to resume
        return 3
    except Interrupted as stop:  # SIGTERM, SIGHUP: the program closed what it had open on its way here
        if debugging():
            traceback.print_exc()
        return 128 + stop.signum
    except KeyboardInterrupt:
        if not debugging():  # Python ends by SIGINT after its clean-up, as a shell expects; no traceback
            sys.excepthook = _quiet_interrupt
        raise
    return result if isinstance(result, int) else 0


def debugging() -> bool:
    return os.environ.get(DEBUG_ENV, "") not in ("", "0")


def _take_debug_flag(argv: list[str], debug_takes_values: bool) -> list[str]:
    def ours(k: int) -> bool:
        return argv[k] == "--debug" and not (debug_takes_values and k + 1 < len(argv)
                                             and not argv[k + 1].startswith("-"))

    rest = [arg for k, arg in enumerate(argv) if not ours(k)]
    if len(rest) < len(argv):
        os.environ[DEBUG_ENV] = "1"
    return rest


def _quiet_interrupt(kind, value, tb) -> None:
    if not issubclass(kind, KeyboardInterrupt):
        sys.__excepthook__(kind, value, tb)


class BriefErrors:
    """An argparse parser whose errors take two lines: the problem, then the usage when it fits on one line, or
    where the help is (TRL's parsers have hundreds of options)."""

    def error(self, message: str):
        usage = self.format_usage().strip()
        hint = usage if "\n" not in usage else f"`{self.prog} --help` lists the options"
        self.exit(2, f"{self.prog}: error: {message}\n{hint}\n")


class ArgumentParser(BriefErrors, argparse.ArgumentParser):
    pass


def parse_trl(dataclass_types: tuple, argv: list[str]) -> tuple:
    """TRL's parse of the flags and a `--config` YAML file into dataclasses, with a missing or malformed config
    file, an unknown setting in it or an unknown flag as a ValueError that says which."""
    from trl import TrlParser

    class Parser(BriefErrors, TrlParser):
        pass

    parser = Parser(dataclass_types)
    if "--config" in argv:
        at = argv.index("--config") + 1
        if at == len(argv):
            raise ValueError("--config needs the path of a YAML file")
        _check_config(parser, argv[at])
    *parsed, unknown = parser.parse_args_and_config(argv, return_remaining_strings=True)
    flags = [arg for arg in unknown if arg.startswith("-")]
    if flags:
        raise ValueError(f"unknown option(s) {' '.join(flags)}{_did_you_mean(flags[0].split('=')[0], _flags(parser))}"
                         f"; `{parser.prog} --help` lists the options")
    if unknown:
        raise ValueError(f"unexpected argument(s) {' '.join(unknown)}; `{parser.prog} --help` lists the options")
    return tuple(parsed)


def _check_config(parser: argparse.ArgumentParser, path: str) -> None:
    import yaml

    try:
        config = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"--config {path}: no such file") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(err, "problem", None) or err
        raise ValueError(f"--config {path} is not valid YAML: {problem}{where}") from None
    if not isinstance(config, dict):
        raise ValueError(f"--config {path} must hold a YAML mapping of settings (`name: value` lines)")
    settings = {action.dest for action in parser._actions} | {"env"}  # `env:` sets environment variables (TRL)
    unknown = sorted(set(config) - settings)
    if unknown:
        raise ValueError(f"Unknown arguments from config file {path}: {', '.join(map(str, unknown))}"
                         f"{_did_you_mean(str(unknown[0]), sorted(settings))}; `{parser.prog} --help` lists them")


def _flags(parser: argparse.ArgumentParser) -> list[str]:
    return [flag for action in parser._actions for flag in action.option_strings]


def _did_you_mean(word: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.75)
    return f" (did you mean {close[0]}?)" if close else ""


def check_model(name: str, flag: str = "--model", revision: str | None = None) -> None:
    """Fail before anything loads when `name` is neither a local checkpoint folder nor a Hugging Face Hub model
    this machine can fetch (offline: one in the local cache)."""
    path = Path(name).expanduser()
    if path.is_dir() and not (path / "config.json").is_file():
        raise ValueError(f"{flag} {name}: the folder has no config.json; give a model checkpoint folder or a "
                         "Hugging Face Hub name")
    if path.exists():  # a checkpoint folder, or a single-file checkpoint (GGUF)
        return
    from huggingface_hub import constants, hf_hub_download
    from huggingface_hub.errors import (EntryNotFoundError, GatedRepoError, HFValidationError,
                                        LocalEntryNotFoundError, RepositoryNotFoundError, RevisionNotFoundError)
    from huggingface_hub.utils import validate_repo_id

    try:
        validate_repo_id(name)
    except HFValidationError:
        raise ValueError(f"{flag} {name}: no such folder (and not a Hugging Face Hub name)") from None
    try:
        hf_hub_download(name, "config.json", revision=revision)
    except LocalEntryNotFoundError:
        reason = "HF_HUB_OFFLINE is set" if constants.HF_HUB_OFFLINE else "the Hub cannot be reached"
        raise ValueError(f"{flag} {name}: not a local folder, not in the Hugging Face cache, and {reason}; download "
                         f"it where there is a network (`hf download {name}`) or give a checkpoint folder") from None
    except GatedRepoError:
        raise ValueError(f"{flag} {name} is gated: accept its terms on https://huggingface.co/{name} and log in "
                         "(`hf auth login`)") from None
    except RepositoryNotFoundError:
        raise ValueError(f"{flag} {name}: no such model on the Hugging Face Hub (if it is private: "
                         "`hf auth login`)") from None
    except RevisionNotFoundError:
        raise ValueError(f"{flag} {name} has no revision {revision!r}") from None
    except EntryNotFoundError:  # a repository without config.json: whatever loads it says what it lacks
        pass
