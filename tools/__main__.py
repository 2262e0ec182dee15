"""`python -m tools list [--toolset NAME] [--json | --markdown [--update FILE]]`."""

import json
import re
import sys

from runtime import cli
from tools.registry import REGISTRY
from tools.toolsets import TOOLSETS, get_toolset

BEGIN, END = "<!-- tool-table:begin -->", "<!-- tool-table:end -->"


def _params(schema: dict) -> str:
    params = schema["function"]["parameters"]
    props = params["properties"]
    required = set(params.get("required", []))
    if set(props) == {"image", "param"} and props["param"].get("type") == "object":  # VTC-Bench's nested shape
        inner = props["param"]
        required |= {f"param.{k}" for k in inner.get("required", [])}
        props = {f"param.{k}": v for k, v in inner.get("properties", {}).items()} | {"image": props["image"]}
    return ", ".join(name + ("" if name in required else "?") for name in props)


def first_sentence(text: str) -> str:
    match = re.search(r"(?<!\be\.g)(?<!\bi\.e)(?<!\betc)\.(\s|$)", text)
    return text[: match.start() + 1] if match else text


def rows(toolset_name: str) -> list[tuple[str, ...]]:
    toolset = get_toolset(toolset_name)
    out = []
    for tool in toolset.tools:
        fn = tool.schema["function"]
        row = [tool.name, _params(tool.schema)]
        if toolset_name == "default":
            op = REGISTRY[tool.name]
            row += [op.category, "OpenCV only" if op.cpu_only else "torch + OpenCV"]
        out.append(tuple(row) + (first_sentence(fn["description"]),))
    return out


def markdown(toolset_name: str) -> str:
    head = ["tool", "parameters (? = optional)"] + (["group", "implementations"] if toolset_name == "default" else []) + ["what it does"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows(toolset_name)]
    return "\n".join(lines)


def plain(toolset_name: str) -> str:
    table = rows(toolset_name)
    widths = [min(max(len(r[k]) for r in table), 48) for k in range(len(table[0]) - 1)]
    return "\n".join("  ".join(cell[:48].ljust(w) for cell, w in zip(row, widths)) + "  " + row[-1] for row in table)


def update_file(path: str, table: str) -> None:
    text = open(path, encoding="utf-8").read()
    if BEGIN not in text or END not in text:
        raise ValueError(f"{path} has no {BEGIN} ... {END} markers to replace")
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    with open(path, "w", encoding="utf-8") as f:
        f.write(f"{head}{BEGIN}\n{table}\n{END}{tail}")


def main(argv=None) -> None:
    parser = cli.ArgumentParser(prog="python -m tools", description="tirlab image tools")
    sub = parser.add_subparsers(dest="command", required=True)
    show = sub.add_parser("list", help="print a tool set")
    show.add_argument("--toolset", default="default", choices=sorted(TOOLSETS), help="which tool set (default: %(default)s)")
    fmt = show.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="the schemas as a JSON list (OpenAI function format)")
    fmt.add_argument("--markdown", action="store_true", help="a Markdown table")
    show.add_argument("--update", metavar="FILE", help="with --markdown: replace the table between the tool-table markers in FILE")
    args = parser.parse_args(argv)
    if args.update and not args.markdown:
        parser.error("--update needs --markdown")
    if args.json:
        print(json.dumps(get_toolset(args.toolset).schemas(), indent=2))
    elif args.update:
        try:
            update_file(args.update, markdown(args.toolset))
        except ValueError as err:  # the file has no markers
            parser.error(str(err))
    elif args.markdown:
        print(markdown(args.toolset))
    else:
        print(plain(args.toolset))


if __name__ == "__main__":
    sys.exit(cli.run(main))
