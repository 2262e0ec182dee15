"""Maze (TIR-Bench's maze game): find the move string that leads from the red ball (top-left cell) to the
green ball (bottom-right cell) of a drawn maze, among five options or "No answer".

The maze is a perfect maze (exactly one route between any two cells) made by a seeded depth-first
backtracker on an n x n cell grid: n = 5-12 (easy), 13-30 (medium), 31-62 (hard; TIR-Bench uses 5x5 to
62x62). Every cell is `cell` pixels from one wall line to the next, walls are `wall` pixels thick and
black (0, 0, 0), corridors white, the image is n * cell + wall pixels a side (about 400-1000). A red ball
marks the start cell, a green ball the goal.

Options A-E are move strings ('R', 'L', 'U', 'D' = one cell right, left, up, down), F is "No answer".
The true route is one of A-E in 5 of 6 samples; otherwise (answer F) all five are distractors. Each
distractor is checked (by walking it) to be wrong under both readings of a blocked move (the walk fails,
or the move is skipped) and never to pass through the goal: the true route with two consecutive moves swapped (a perfect maze has no 2x2 loop, so
it crosses a wall), the true route with a shortcut through a wall, the true route cut short, the true
route up to a branch and then into a dead end, or a random walk along the corridors of similar length
that never reaches the goal.

The reference draws the solution with `draw_polygon` (tool set "default", closed false, blue, a color
used nowhere else) as a polyline through the centers of the route's cells where it turns, first on image
0 and then on the latest image: one call per 256 vertices (the tool's limit), so one call for every easy
maze and ~97% of medium ones, and 1-5 chained calls on hard ones (depth-first routes turn often). The audit reads the walls back from image 0's
pixels (the wall-line pixel between each pair of neighbouring cells), solves the maze by BFS, and checks
that the drawn pixels (where the last image differs from image 0) never touch a wall pixel, cover the
center of every cell of the route and of no other cell; that the answer's option walks from start to
goal through open walls only (and that F is the answer only when no option does); and that every other
option fails.
"""

from __future__ import annotations

import functools
import random
from collections import deque

import cv2
import numpy as np

from data_gen.sample import AuditError, Sample, require_choice

NAME = "maze"
SCORER = "option_letter"  # eval.scorers
SIZES = {"easy": (5, 12), "medium": (13, 30), "hard": (31, 62)}
SIDE = (400, 1000)  # image side in pixels, roughly
MIN_CELL = 10  # pixels from wall line to wall line
NO_ANSWER_RATE = 1 / 6
LETTERS = "ABCDE"
MAX_VERTICES = 256  # draw_polygon's limit
WALL, FLOOR = (0, 0, 0), (255, 255, 255)
RED, GREEN, PATH = (220, 30, 30), (30, 160, 60), (0, 0, 255)
MOVES = {"R": (0, 1), "L": (0, -1), "D": (1, 0), "U": (-1, 0)}
QUESTION = (
    "Please complete a maze game shown in the figure. Starting from the red ball in the top-left corner, "
    "navigate the maze to reach the green ball in the bottom-right corner. 'R' means move one step to the "
    "right, 'L' means move one step to the left, 'U' means move one step up, and 'D' means move one step "
    "down. Which of the following options can successfully lead out of the maze?"
)
DISTRACTORS = ("swap", "shortcut", "truncate", "branch", "walk")


def generate(seed: int, difficulty: str = "medium") -> Sample:
    require_choice("difficulty", difficulty, SIZES)
    rng = random.Random(f"{NAME}:{seed}:{difficulty}")
    n = rng.randint(*SIZES[difficulty])
    cell = rng.randint(max(MIN_CELL, -(-SIDE[0] // n)), (SIDE[1] - 2) // n)
    wall = min(8, max(2, cell // 6))
    if n * cell + wall > SIDE[1]:
        cell = (SIDE[1] - wall) // n
    maze, route = _backtracker(n, rng)
    image = _render(maze, cell, wall)
    truth = _moves(n, route)

    no_answer = rng.random() < NO_ANSWER_RATE
    options, kinds = _distractors(rng, maze, route, truth, 5 if no_answer else 4)
    if no_answer:
        answer = "F"
    else:
        slot = rng.randrange(5)
        options.insert(slot, truth)
        kinds.insert(slot, "true")
        answer = LETTERS[slot]
    question = QUESTION + "".join(f"\n{letter}. {moves}" for letter, moves in zip(LETTERS, options)) + "\nF. No answer"

    inner = cell - wall
    thickness = min(12, max(2, inner // 5))
    vertices = [route[0]] + [route[k] for k in range(1, len(truth)) if truth[k - 1] != truth[k]] + [route[-1]]
    points = [(i % n * cell + wall + inner // 2, i // n * cell + wall + inner // 2) for i in vertices]
    calls = []
    for start in range(0, len(points) - 1, MAX_VERTICES - 1):
        chunk = points[start:start + MAX_VERTICES]
        calls.append({"name": "draw_polygon", "arguments": {
            "image_index": 0 if start == 0 else -1, "points": [v for p in chunk for v in p], "closed": False,
            "color": list(PATH), "thickness": thickness}})
    return Sample(
        task=NAME, id=f"{NAME}-{difficulty}-{seed}", image=image, question=question, answer=answer,
        scorer=SCORER, toolset="default", calls=tuple(calls), evidence={"solution": truth},
        meta={"seed": seed, "difficulty": difficulty, "n": n, "cell": cell, "wall": wall, "thickness": thickness,
              "route_length": len(truth), "options": kinds},
    )


def check(sample: Sample, workspace: list[np.ndarray], reports: list[dict]) -> None:
    n, cell, wall = sample.meta["n"], sample.meta["cell"], sample.meta["wall"]
    original, drawn_image = workspace[0], workspace[-1]
    if len(workspace) < 2 or drawn_image.shape != original.shape:
        raise AuditError(f"{sample.id}: the reference drew no image the size of the maze")
    walls = cv2.inRange(original, WALL, WALL) > 0
    maze = _read_maze(walls, n, cell, wall)
    route = _bfs(maze)
    if route is None:
        raise AuditError(f"{sample.id}: the maze read from the image has no route from start to goal")

    drawn = cv2.inRange(cv2.absdiff(drawn_image, original), (0, 0, 0), (0, 0, 0)) == 0
    crossed = int(np.count_nonzero(drawn & walls))
    if crossed:
        raise AuditError(f"{sample.id}: the drawn path crosses {crossed} wall pixels")
    centers = np.arange(n) * cell + wall + (cell - wall) // 2
    covered = drawn[np.ix_(centers, centers)]
    on_route = np.zeros(n * n, bool)
    on_route[route] = True
    on_route = on_route.reshape(n, n)
    if not covered[on_route].all():
        raise AuditError(f"{sample.id}: the drawn path misses {int((~covered[on_route]).sum())} cells of the route")
    if covered[~on_route].any():
        raise AuditError(f"{sample.id}: the drawn path enters {int(covered[~on_route].sum())} cells off the route")

    options = _options(sample.question)
    if list(options) != list(LETTERS) or "\nF. No answer" not in sample.question:
        raise AuditError(f"{sample.id}: the question does not list options A-E and F")
    goal = n * n - 1
    valid = [letter for letter, moves in options.items() if _trace(maze, moves, strict=True)[-1] == goal]
    lenient = [letter for letter, moves in options.items() if _trace(maze, moves, strict=False)[-1] == goal]
    expected = [] if sample.answer == "F" else [sample.answer]
    if valid != expected:
        raise AuditError(f"{sample.id}: the options that reach the goal are {valid or 'none'}, "
                         f"the answer is {sample.answer}")
    if lenient != expected:
        raise AuditError(f"{sample.id}: skipping blocked moves, options {lenient} reach the goal; "
                         f"the answer is {sample.answer}")
    if sample.answer != "F" and not on_route.flat[_trace(maze, options[sample.answer], True)].all():
        raise AuditError(f"{sample.id}: the answer's route leaves the drawn path")


# -- the maze ----------------------------------------------------------------------------------------------
# Cells are numbered row-major, i = r * n + c. A maze is (n, links): links[i] maps each move that is open
# from cell i (no wall, not the border) to the cell it leads to.
def _backtracker(n: int, rng: random.Random):
    """Depth-first backtracker from the start cell; returns the maze and the route to the goal (the
    stack when the goal is reached)."""
    grid = _grid(n)
    links = [{} for _ in range(n * n)]
    seen = bytearray(n * n)
    seen[0] = 1
    stack, route, goal = [0], None, n * n - 1
    while stack:
        i = stack[-1]
        free = [j for j in grid[i] if not seen[j]]
        if not free:
            stack.pop()
            continue
        j = free[rng.randrange(len(free))] if len(free) > 1 else free[0]
        seen[j] = 1
        if j == i + 1:
            links[i]["R"], links[j]["L"] = j, i
        elif j == i - 1:
            links[i]["L"], links[j]["R"] = j, i
        elif j > i:
            links[i]["D"], links[j]["U"] = j, i
        else:
            links[i]["U"], links[j]["D"] = j, i
        stack.append(j)
        if j == goal:
            route = list(stack)
    return (n, links), route


@functools.lru_cache(maxsize=None)
def _grid(n: int) -> tuple:
    """Each cell's neighbours in the grid, walls or not."""
    return tuple(tuple(j for j in (i + 1 if i % n < n - 1 else -1, i + n, i - 1 if i % n else -1, i - n) if 0 <= j < n * n)
                 for i in range(n * n))


def _link(links, n: int, i: int, down: bool) -> None:
    if down:
        links[i]["D"], links[i + n]["U"] = i + n, i
    else:
        links[i]["R"], links[i + 1]["L"] = i + 1, i


def _render(maze, cell: int, wall: int) -> np.ndarray:
    """Blocks (2n+1)^2: even rows/columns are wall lines (posts at even-even), odd-odd are cells;
    expanded to pixels (wall lines `wall` px, cells `cell - wall` px)."""
    n, links = maze
    east = np.array(["R" in link for link in links]).reshape(n, n)
    south = np.array(["D" in link for link in links]).reshape(n, n)
    block = np.zeros((2 * n + 1, 2 * n + 1), bool)  # True = floor
    block[1::2, 1::2] = True
    block[1::2, 2:-1:2] = east[:, :-1]
    block[2:-1:2, 1::2] = south[:-1, :]
    sizes = np.where(np.arange(2 * n + 1) % 2 == 0, wall, cell - wall)
    gray = np.where(block, np.uint8(FLOOR[0]), np.uint8(WALL[0]))  # walls black, floor white
    image = cv2.cvtColor(np.repeat(np.repeat(gray, sizes, axis=0), sizes, axis=1), cv2.COLOR_GRAY2RGB)
    inner = cell - wall
    smooth = inner >= 20  # anti-aliased balls where there is room; kept off the walls either way
    radius = min(round(inner * 0.35), inner // 2 - (2 if smooth else 1))
    for (r, c), color in (((0, 0), RED), ((n - 1, n - 1), GREEN)):
        center = (c * cell + wall + inner // 2, r * cell + wall + inner // 2)
        cv2.circle(image, center, radius, color, -1, cv2.LINE_AA if smooth else cv2.LINE_8)
    return image


def _read_maze(walls: np.ndarray, n: int, cell: int, wall: int):
    """The maze read off the wall pixels: the middle of the wall line between two neighbouring cells is
    black where there is a wall."""
    mids = np.arange(n) * cell + wall + (cell - wall) // 2  # cell centers
    lines = np.arange(1, n) * cell + wall // 2  # interior wall lines
    east = np.zeros((n, n), bool)
    south = np.zeros((n, n), bool)
    east[:, :-1] = ~walls[np.ix_(mids, lines)]
    south[:-1, :] = ~walls[np.ix_(lines, mids)]
    links = [{} for _ in range(n * n)]
    for i in np.flatnonzero(east).tolist():
        _link(links, n, i, False)
    for i in np.flatnonzero(south).tolist():
        _link(links, n, i, True)
    return n, links


def _bfs(maze):
    n, links = maze
    goal, previous, queue = n * n - 1, {0: None}, deque([0])
    while queue:
        here = queue.popleft()
        if here == goal:
            route = [here]
            while previous[route[-1]] is not None:
                route.append(previous[route[-1]])
            return route[::-1]
        for there in links[here].values():
            if there not in previous:
                previous[there] = here
                queue.append(there)
    return None


def _trace(maze, moves: str, strict: bool):
    """The cells a walk visits from the start; a blocked move (a wall or the border) ends the walk when
    `strict` (the walk fails: None at the end), else it is skipped."""
    links = maze[1]
    here, out = 0, [0]
    for m in moves:
        there = links[here].get(m)
        if there is not None:
            here = there
            out.append(here)
        elif strict:
            out.append(None)
            break
    return out


def _moves(n: int, route) -> str:
    names = {1: "R", -1: "L", n: "D", -n: "U"}
    return "".join(names[b - a] for a, b in zip(route, route[1:]))


def _options(question: str) -> dict:
    out = {}
    for line in question.split("\n"):
        if len(line) > 3 and line[0] in LETTERS and line[1:3] == ". ":
            out[line[0]] = line[3:]
    return out


# -- distractors -------------------------------------------------------------------------------------------
def _distractors(rng, maze, route, truth, count):
    """`count` distinct move strings, each failing to reach the goal whether a blocked move ends the walk
    or is skipped, and never passing through the goal; the kinds take turns so that samples mix them."""
    goal = maze[0] ** 2 - 1
    kinds = list(DISTRACTORS)
    rng.shuffle(kinds)
    options, made = [], []
    for attempt in range(200):
        kind = kinds[attempt % len(kinds)]
        moves = _DISTRACTOR[kind](rng, maze, route, truth)
        if not moves or moves == truth or moves in options:
            continue
        if goal in _trace(maze, moves, strict=True) or goal in _trace(maze, moves, strict=False):
            continue
        options.append(moves)
        made.append(kind)
        if len(options) == count:
            return options, made
    raise RuntimeError(f"could not make {count} distractors")  # never seen: walks alone are plentiful


def _swap(rng, maze, route, truth):
    """Two consecutive different moves swapped: the other way round the corner, through a wall."""
    k = rng.choice([k for k in range(len(truth) - 1) if truth[k] != truth[k + 1]])
    return truth[:k] + truth[k + 1] + truth[k] + truth[k + 2:]


def _shortcut(rng, maze, route, truth):
    """Through a wall from a cell of the route to a later one next to it, then on along the route."""
    n = maze[0]
    index = {cell: k for k, cell in enumerate(route)}
    jumps = []
    for i, here in enumerate(route):
        r, c = divmod(here, n)
        for name, (dr, dc) in MOVES.items():
            k = index.get((r + dr) * n + c + dc) if 0 <= r + dr < n and 0 <= c + dc < n else None
            if k is not None and k > i + 1:
                jumps.append((k - i, i, k, name))
    if not jumps:
        return None
    jumps.sort(reverse=True)
    _, i, k, name = rng.choice(jumps[:max(1, len(jumps) // 3)])  # one of the more tempting ones
    return truth[:i] + name + truth[k:]


def _truncate(rng, maze, route, truth):
    return truth[:-rng.randint(1, max(1, len(truth) // 4))]


def _branch(rng, maze, route, truth):
    """Along the route to a fork, then into the side branch until it dead-ends."""
    on_route = set(route)
    forks = [(k, other) for k, here in enumerate(route[:-1]) for other in maze[1][here].values() if other not in on_route]
    if not forks:
        return None
    k, here = rng.choice(forks)
    path = [route[k], here]
    while True:  # a perfect maze's side branch never comes back to the route
        ahead = [x for x in maze[1][path[-1]].values() if x != path[-2]]
        if not ahead:
            break
        path.append(rng.choice(ahead))
    return truth[:k] + _moves(maze[0], path)


def _random_walk(rng, maze, route, truth):
    """A walk along the corridors from the start, about as long as the route, turning back only at dead
    ends and never entering the goal."""
    goal = maze[0] ** 2 - 1
    length = max(4, round(len(truth) * rng.uniform(0.8, 1.2)))
    path = [0]
    while len(path) <= length:
        choices = [x for x in maze[1][path[-1]].values() if x != goal]
        if not choices:
            return None
        forward = [x for x in choices if len(path) < 2 or x != path[-2]]
        path.append(rng.choice(forward or choices))
    return _moves(maze[0], path)


_DISTRACTOR = {"swap": _swap, "shortcut": _shortcut, "truncate": _truncate, "branch": _branch, "walk": _random_walk}
