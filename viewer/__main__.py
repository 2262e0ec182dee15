"""python -m viewer PATH [PATH ...] [--out FILE] [--title TEXT] [--limit N]: write the trajectory viewer
(viewer/__init__.py says what it shows)."""

from __future__ import annotations

import sys

from runtime import cli
from viewer import ViewerError, view


def main(argv: list[str] | None = None) -> None:
    parser = cli.ArgumentParser(prog="python -m viewer", description=__doc__)
    parser.add_argument("paths", nargs="+", help="run directories, GRPO rollouts folders or data_gen exports")
    parser.add_argument("--out", help="the page to write (default: report.html in a run, viewer.html elsewhere)")
    parser.add_argument("--title", help="the page's title (default: the folders' names)")
    parser.add_argument("--limit", type=int, help="a dataset: show the first LIMIT rows of each split (default: all)")
    args = parser.parse_args(argv)
    if args.limit is not None and args.limit < 1:
        parser.error("--limit must be at least 1")
    try:
        page = view(args.paths, args.out, args.title, args.limit)
    except ViewerError as err:
        parser.error(str(err))
    print(f"viewer: {page} (open it in a browser; it needs the {page.stem}_files folder beside it)")


if __name__ == "__main__":
    sys.exit(cli.run(main))
