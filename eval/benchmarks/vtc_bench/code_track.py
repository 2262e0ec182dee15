"""VTC-Bench's code track ("Track A: Code Interpreter") as a code tool running in `runtime.sandbox`.

The model calls the function tool `code_interpreter` with `{"reasoning", "code"}`; the published harness
runs the code in a Jupyter kernel and turns the kernel's messages into the reply (CODE_TRACK.md has the
details and every known difference). Here the code runs in the sandbox: `PRELUDE` gives it what the
reference kernel gives it (its imports, IPython's `display`/`Image`, the inline matplotlib backend) and
`describe` writes the reply as the reference's model sees it. `prepare_code` applies what the reference
does to the code before it runs (code fences, forbidden commands, blocking OpenCV calls, empty code) and
hands it to a runner that behaves like an IPython cell (the last expression's value, figures shown at the
end of the cell, image paths found in the output); it takes effect once the toolbox calls a code tool's
`prepare` hook (CODE_TRACK.md, "Runtime change").

The sandbox returns text (stdout, stderr, error) and images. The order of what the kernel would have sent
travels inside stdout and stderr as markers (`\\x1evtc:{json}\\x1e`) written by the prelude; `describe` reads
them back and no marker reaches the model.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from runtime.code_tools import CodeTool, Saved
from runtime.sandbox import CellResult, SandboxConfig
from tools.toolset import Reply

PROMPT_FILE = Path(__file__).parent / "prompts" / "code_interpreter.json"
TOOL_SPEC = json.loads(PROMPT_FILE.read_text(encoding="utf-8"))  # the published name, description, parameters
SCHEMA = {"type": "function", "function": {key: TOOL_SPEC[key] for key in ("name", "description", "parameters")}}
CELL_TIMEOUT_S = 30  # the reference's per-call timeout (CodeInterpreter.call's default; the harness passes none)
# The pool for this track: the reference's timeout; matplotlib and sympy imported once in the zygote instead
# of in every session (pandas cannot be: it starts a thread)
SANDBOX_CONFIG = SandboxConfig(cell_timeout_s=CELL_TIMEOUT_S,
                               preload=SandboxConfig().preload + ("matplotlib.pyplot", "sympy"))

# What the reference's model reads, word for word (the last line from IPython).
FINISHED = "Finished execution."
TIMEOUT = "Timeout: Code execution exceeded the time limit."
SAVED_IMAGE = "The saved image path is: {path}"
FORBIDDEN = "❌ Package installation commands are not allowed. Detected forbidden command pattern: {pattern}"
SYSTEM_EXIT = "An exception has occurred, use %tb to see the full traceback.\n\n"
# Patterns searched (case-insensitive) in the code; the refusal quotes the first that matches.
FORBIDDEN_PATTERNS = (
    r"!pip\s+install", r"!pip\s+-q\s+install", r"!pip3\s+install", r"!pip3\s+-q\s+install",
    r"subprocess.*pip.*install", r"os.system.*pip.*install", r"subprocess.*conda.*install",
    r"os.system.*conda.*install", r"!conda\s+install", r"!apt-get\s+install", r"!apt\s+install", r"!yum\s+install",
)
BLOCKING_CALLS = ("cv2.imshow(", "cv2.waitKey(", "cv2.destroyAllWindows(")  # a line starting with one is dropped
BLOCKING_ASSIGNMENTS = ("= cv2.imshow(", "= cv2.waitKey(")  # and so is a line containing one

FENCED_CODE = re.compile(r"```[^\n]*\n(.+?)```", re.DOTALL)
MATPLOTLIB_MAGIC = re.compile(r"(?m)^([ \t]*)%matplotlib\b.*$")
MARKDOWN_IMAGE = re.compile(r"!\[[^\]]*\]\([^)]+\)")
MARKER = re.compile("\x1evtc:([^\x1e]*)\x1e")
DROPPED_NOTE = re.compile(r"\n?\[\.\.\. \d+ characters dropped\]\n$")
TRACEBACK_FRAME = re.compile(r'  File ".*", line \d+, in ')
CELL_SYNTAX_ERROR = re.compile(r'  File "<cell (\d+)>", line (\d+)\n')
QUALIFIED_NAME = re.compile(r"^[^\s:]*\.(?=[^\s.:]+(?::|$))")
OUTPUT_IMAGE = re.compile(r"^(?:display|printed)-\d{6,}\.(?:png|jpe?g|webp)$")

PRELUDE = r'''
import json
import math
import os
import re
import signal
import threading
import time

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.font_manager import FontProperties
from sympy import Eq, solve, symbols
from PIL import Image

try:
    import seaborn as sns
    sns.set_theme()
except ImportError:
    pass


def input(*args, **kwargs):
    raise NotImplementedError('Python input() function is disabled.')


def _vtc_kernel():
    """IPython's display machinery, its inline matplotlib backend and its way of running a cell, as far as
    VTC-Bench's reply shows them (eval/benchmarks/vtc_bench/code_track.py)."""
    import ast, codeop, io, itertools, json, linecache, os, re, shutil, sys, tokenize, traceback, types
    import matplotlib.figure
    import matplotlib.pyplot as pyplot
    import PIL.Image

    output_dir = os.environ["OUTPUT_DIR"]
    numbered = re.compile(r"(?:display|printed)-(\d+)\.")
    taken = [int(m.group(1)) for m in map(numbered.match, os.listdir(output_dir)) if m]
    file_numbers = itertools.count(max(taken, default=0) + 1)  # names stay new after a restart
    event_ids = itertools.count(1)
    markdown_image = re.compile(r"!\[[^\]]*\]\(([^)]+)\)")
    image_reference = re.compile(
        r"(?i)(?:file://)?/[^\s)]+\.(?:png|jpe?g|webp)|https?://[^\s)]+\.(?:png|jpe?g|webp)")
    marker = re.compile("\x1evtc:[^\x1e]*\x1e")
    cell = {"texts": None, "displayed": None}  # while _vtc_run_cell runs: what the cell showed
    record_limit = 1_000_000

    def mark(event):
        """An event where it happened: in stdout, and the same split point in stderr."""
        event["id"] = next(event_ids)
        sys.stdout.write("\x1evtc:" + json.dumps(event) + "\x1e")
        sys.stderr.write("\x1evtc:" + json.dumps({"id": event["id"]}) + "\x1e")

    def new_path(prefix, extension):
        return os.path.join(output_dir, f"{prefix}-{next(file_numbers):06d}.{extension}")

    def save(data, extension):
        """A displayed image as the reference serves it: decoded and saved again by PIL."""
        path = new_path("display", extension)
        PIL.Image.open(io.BytesIO(data)).save(path)
        if cell["displayed"] is not None:
            cell["displayed"].append(path)
        return path

    def sniff(data):
        if isinstance(data, bytes):
            if data.startswith(b"\x89PNG\r\n\x1a\n"):
                return "png"
            if data.startswith(b"\xff\xd8"):
                return "jpeg"
            if data[:6] in (b"GIF87a", b"GIF89a"):
                return "gif"
            if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
                return "webp"
        return "png"

    class Image:
        """IPython.display.Image: a file (read now), bytes or a URL; png and jpeg are shown as images."""

        def __init__(self, data=None, url=None, filename=None, format=None, embed=None, **options):
            if isinstance(data, os.PathLike):
                data = os.fspath(data)
            if filename is None and url is None and isinstance(data, str):
                if data.startswith("http"):
                    url, data = data, None
                elif os.path.exists(data):
                    filename, data = data, None
            source = filename if filename is not None else url
            if source is None and data is None:
                raise ValueError("No image data found. Expecting filename, url, or data.")
            if format is None and source is not None:
                base, extension = os.path.splitext(source)
                format = extension[1:] or base
            format = (format or sniff(data)).lower()
            self.format = "jpeg" if format == "jpg" else format
            self.embed = url is None if embed is None else embed
            if self.embed and self.format not in ("png", "jpeg", "gif", "webp"):
                raise ValueError(f"Cannot embed the '{self.format}' image format")
            if filename is not None:
                with open(filename, "rb") as file:
                    data = file.read()
            self.data = data

        def __repr__(self):
            return "<IPython.core.display.Image object>"

    def image_of(obj):
        """(bytes, "png" | "jpeg") when IPython would show obj as such an image, else None."""
        if isinstance(obj, Image):
            if not obj.embed or obj.format not in ("png", "jpeg"):
                return None
            if not isinstance(obj.data, bytes):
                raise FileNotFoundError(f"No such file or directory: '{obj.data}'")
            return obj.data, obj.format
        if isinstance(obj, matplotlib.figure.Figure):
            if not obj.axes and not obj.lines:
                return None
            buffer = io.BytesIO()
            obj.canvas.print_figure(buffer, format="png", dpi=obj.dpi, facecolor=obj.get_facecolor(),
                                    edgecolor=obj.get_edgecolor(), bbox_inches="tight")
            return buffer.getvalue(), "png"
        if isinstance(obj, type):
            return None
        for extension in ("png", "jpeg"):
            method = getattr(obj, f"_repr_{extension}_", None)
            data = method() if callable(method) else None
            data = data[0] if isinstance(data, tuple) else data
            if isinstance(data, bytes):
                return data, extension
        return None

    def show(obj, result=False):
        """What display(obj) sends, or (result=True) what the value of a cell's last expression sends."""
        found = image_of(obj)
        path = save(*found) if found else None
        text = repr(obj) if result or not path else None  # IPython's text/plain, as far as it is shown
        if text is not None and cell["texts"] is not None:
            cell["texts"].append(text)
        if result:
            mark({"kind": "result", "text": text, "path": path})
        elif path:
            mark({"kind": "image", "path": path})
        else:
            mark({"kind": "text", "text": text})

    def display(*objs, **options):
        for obj in objs:
            show(obj)

    def show_figures(*args, **kwargs):
        """The inline backend's show(): every open figure, then all closed."""
        for number in pyplot.get_fignums():
            show(pyplot.figure(number))
        pyplot.close("all")

    pyplot.show = show_figures
    matplotlib.figure.Figure.show = lambda figure, *args, **kwargs: show(figure)
    PIL.Image.Image.show = lambda image, *args, **kwargs: None  # the reference's viewer shows nothing
    package, module = types.ModuleType("IPython"), types.ModuleType("IPython.display")
    module.display, module.Image, package.display = display, Image, module
    # no shell: libraries that look for one (matplotlib) go on without; a version that needs no IPython.core
    package.get_ipython, package.version_info = lambda: None, (9, 0, 0)
    sys.modules.update({"IPython": package, "IPython.display": module})

    class Recorder:
        """A stream that passes writes on and keeps the text, to look for image paths in it."""

        def __init__(self, stream, texts):
            self.stream, self.texts, self.size = stream, texts, 0

        def write(self, text):
            if isinstance(text, str) and self.size < record_limit:
                self.texts.append(text[:record_limit - self.size])
                self.size += len(self.texts[-1])
            return self.stream.write(text)

        def __getattr__(self, name):
            return getattr(self.stream, name)

    def attach_printed(texts, displayed):
        """Copies of the existing image files whose absolute paths the cell's output names (markdown
        images first), which the reference's agent attaches to the reply."""
        text = marker.sub("", "".join(texts))
        seen = set(displayed)
        for path in markdown_image.findall(text) + image_reference.findall(text):
            if (path in seen or not path.startswith("/") or not path.lower().endswith(("png", "jpg", "jpeg", "webp"))
                    or not os.path.isfile(path)):
                continue
            seen.add(path)
            copy = new_path("printed", path.rsplit(".", 1)[-1].lower())
            try:
                shutil.copyfile(path, copy)
            except OSError:
                continue
            sys.stdout.write("\x1evtc:" + json.dumps({"kind": "printed", "path": copy, "shown": path}) + "\x1e")

    def quiet(source):
        """IPython shows no value when the cell's last token is ';'."""
        skipped = (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.ENDMARKER)
        try:
            tokens = [t for t in tokenize.generate_tokens(io.StringIO(source).readline) if t.type not in skipped]
        except (tokenize.TokenError, SyntaxError):
            return False
        return bool(tokens) and tokens[-1].string == ";"

    def run_cell(source):
        """Run model code as an IPython cell: parsed as IPython parses it, the last expression's value
        shown, the figures left open shown and closed at the end (after an error too), and image paths
        in the output attached."""
        caller = sys._getframe(1)
        filename, namespace = caller.f_code.co_filename, caller.f_globals
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        flags = ast.PyCF_ONLY_AST | codeop.PyCF_DONT_IMPLY_DEDENT | codeop.PyCF_ALLOW_INCOMPLETE_INPUT
        tree = compile(source, filename, "exec", flags, True)
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) and not quiet(source) else None
        texts, displayed = [], []
        cell.update(texts=texts, displayed=displayed)
        streams = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = Recorder(sys.stdout, texts), Recorder(sys.stderr, texts)
        try:
            exec(compile(tree, filename, "exec"), namespace)
            if last is not None:
                value = eval(compile(ast.Expression(last.value), filename, "eval"), namespace)
                if value is not None:
                    show(value, result=True)
        except BaseException as error:
            texts.append("".join(traceback.format_exception_only(type(error), error)))
            mark({"kind": "error"})
            raise
        finally:
            try:
                if pyplot.get_fignums():
                    show_figures()
            finally:
                sys.stdout, sys.stderr = streams
                cell.update(texts=None, displayed=None)
                attach_printed(texts, displayed)

    return display, Image, run_cell


display, IPythonImage, _vtc_run_cell = _vtc_kernel()
del _vtc_kernel
'''


def prepare_code(code: str) -> str | Reply:
    """What the reference does to the code before its kernel sees it, then the call of the prelude's cell
    runner: the first fenced block if there is one, stripped; a refusal for package installs; lines of
    blocking OpenCV GUI calls dropped; an empty reply for code left empty; `%matplotlib` lines (a no-op
    magic in the kernel) turned into `pass`."""
    fenced = FENCED_CODE.search(code)
    code = (fenced.group(1) if fenced else code).strip()
    for pattern in FORBIDDEN_PATTERNS:
        if re.search(pattern, code, re.IGNORECASE):
            return Reply(FORBIDDEN.format(pattern=pattern), error=True)
    code = "\n".join(line for line in code.split("\n") if not _blocking(line.strip()))
    if not code.strip():
        return Reply("")
    code = MATPLOTLIB_MAGIC.sub(r"\1pass", code)
    return f"_vtc_run_cell({code!r})"


def _blocking(line: str) -> bool:
    return line.startswith(BLOCKING_CALLS) or any(call in line for call in BLOCKING_ASSIGNMENTS)


def describe(result: CellResult, saved: list[Saved]) -> str:
    """The reply text as the reference's model sees it: the kernel's messages as sections
    ("stdout:\\n\\n```\\n...\\n```"), in the order they were sent, with the image references taken out,
    then "The saved image path is: ..." for each image, in order (or "Finished execution." for none)."""
    out_segments, out_events, printed = _split(result.stdout)
    err_segments, err_events, _ = _split(result.stderr)
    stderr_before = dict(zip([event["id"] for event in err_events], err_segments))
    error = _error_text(result)
    pieces, figures = [], 0

    def section(kind, text):
        if text:
            pieces.append(f"\n\n{kind}:\n\n```\n{text}\n```")

    def image(path):
        nonlocal figures
        if path:
            figures += 1
            pieces.append(f"\n\n![fig-{figures:03d}]({path})")

    for segment, event in zip(out_segments, out_events):
        section("stdout", segment)
        section("stderr", stderr_before.pop(event["id"], ""))
        kind = event.get("kind")
        if kind == "image":
            image(event.get("path"))
        elif kind == "text":
            section("display_data", event.get("text"))
        elif kind == "result":
            section("execute_result", event.get("text"))
            image(event.get("path"))
        elif kind == "error":
            section("error", error)
            error = None
    section("stdout", out_segments[-1])
    section("stderr", "".join(stderr_before.values()) + err_segments[-1])
    section("error", error)
    raw = "".join(pieces).lstrip("\n")
    raw = raw if raw.strip() else FINISHED
    shown = {event.get("path"): event.get("shown") for event in printed}
    paths = [shown.get(str(s.path)) or str(s.path) for s in saved]
    if not paths:
        return raw
    text = MARKDOWN_IMAGE.sub("", raw).strip()
    return text + "".join(SAVED_IMAGE.format(path=path) for path in paths)  # parts a template writes back to back


def _split(text: str) -> tuple[list[str], list[dict], list[dict]]:
    """(the text between positioned events, those events, the events without a position)."""
    segments, events, unplaced, current, position = [], [], [], [], 0
    for match in MARKER.finditer(text):
        current.append(text[position:match.start()])
        position = match.end()
        try:
            event = json.loads(match.group(1))
        except ValueError:
            continue
        if "id" in event:
            segments.append("".join(current))
            events.append(event)
            current = []
        else:
            unplaced.append(event)
    tail = text[position:]
    cut = tail.find("\x1evtc:")  # a marker cut by the sandbox's output limit: keep only the limit's note
    if cut >= 0:
        note = DROPPED_NOTE.search(tail)
        tail = tail[:cut] + (note.group(0) if note else "")
    segments.append("".join(current) + tail)
    return segments, events, unplaced


def _error_text(result: CellResult) -> str | None:
    if result.timed_out:
        return TIMEOUT
    return _minimal_error(result.error) if result.error else None


def _minimal_error(error: str) -> str:
    """A Python traceback as IPython's `%xmode Minimal` shows it: no frames; the exception's class by its
    own name; a syntax error in a cell as "Cell In[n], line l" with one caret. The reference's kernel
    ran its init code as In[1] and runs a timer call after every cell, so the model's k-th cell is In[2k]
    (the sandbox's cell k+1: the prelude is cell 1), and it puts the timer's start on the line before the
    code."""
    lines = error.splitlines(keepends=True)
    if lines and lines[0].startswith("Traceback (most recent call last):"):
        index = 1
        while index < len(lines) and TRACEBACK_FRAME.match(lines[index]):
            index += 1
            while index < len(lines) and lines[index].startswith("    "):
                index += 1
        lines = lines[index:]
    if not lines:
        return error
    header = CELL_SYNTAX_ERROR.fullmatch(lines[0])
    if header:
        cell, line = int(header.group(1)), int(header.group(2))
        shown = [f"  Cell In[{2 * (cell - 1)}], line {line + 1}\n"]
        rest = lines[1:]
        if rest and rest[0].startswith("    "):
            shown.append(rest.pop(0))
            caret = rest.pop(0).index("^") if rest and rest[0].strip() and not rest[0].strip(" ^\n") else 4
            shown.append(" " * caret + "^\n")
        return "".join(shown + rest)
    first = QUALIFIED_NAME.sub("", lines[0])
    return (SYSTEM_EXIT if first.startswith("SystemExit") else "") + "".join([first, *lines[1:]])


CODE_INTERPRETER = CodeTool(TOOL_SPEC["name"], describe, collect=OUTPUT_IMAGE, schema=lambda context: SCHEMA,
                            prelude=PRELUDE, prepare=prepare_code)
