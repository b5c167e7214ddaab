"""Logic benchmark: ZebraLogic grid puzzles (ood), scored by cell accuracy."""

from __future__ import annotations

import json
from typing import Any

from cptlab.domains.paper.common import (
    BadRawRow,
    RowContext,
    canonical_row,
    content_digest,
    json_value,
    required_text,
    slug,
)
from cptlab.domains.paper.pipeline import Load, Recipe
from cptlab.domains.registry import Benchmark, Prompt, Published, Source

# ZebraLogic (allenai/ZebraLogicBench-private, config "grid_mode", split "test"; gated: a token
# whose account accepted its terms; the public allenai/ZebraLogicBench masks the solutions):
#   id "lgp-test-5x6-16", size "5*6", puzzle (text),
#   solution {"header": ["House", "Name", ...], "rows": [["1", "Eric", ...], ...]}.
ZEBRA_HUB = "allenai/ZebraLogicBench-private"
# No commit of this gated repository could be verified here: data.options.zebralogic.revision
# must name one (`cptlab fetch-data` prints the commit main is at).
ZEBRA_REVISION = None
ZEBRA_CONFIG = "grid_mode"
ZEBRA_ID = "id"
ZEBRA_SIZE = "size"
ZEBRA_PUZZLE = "puzzle"
ZEBRA_SOLUTION = "solution"  # {"header", "rows"}


def zebra_grid(solution: Any) -> dict:
    """{"House 1": {attribute: value}} from ZebraLogic's {"header", "rows"} solution."""
    solution = json_value(solution, "solution")
    if not isinstance(solution, dict):
        raise BadRawRow("solution must be {'header': [...], 'rows': [...]}")
    header, rows = solution.get("header"), solution.get("rows")
    if not isinstance(header, list) or len(header) < 2 or not isinstance(rows, list) or not rows:
        raise BadRawRow("solution needs a header of 2+ columns and 1+ rows")
    grid: dict[str, dict[str, str]] = {}
    for r, cells in enumerate(rows):
        if not isinstance(cells, list) or len(cells) != len(header):
            raise BadRawRow(f"solution row {r} does not have {len(header)} cells")
        values = [required_text(c, f"solution cell ({r}, {k})") for k, c in enumerate(cells)]
        if any(set(v) <= {"_"} for v in values):
            raise BadRawRow("the solution is masked (___): use allenai/ZebraLogicBench-private")
        house = values[0] if values[0].lower().startswith("house") else f"House {values[0]}"
        grid[house] = {str(h): v for h, v in zip(header[1:], values[1:], strict=True)}
    return grid


# cptlab's prompt (the study publishes none for ZebraLogic): the puzzle, then the answer form
# of ZebraLogic's own evaluation, a JSON grid with every cell to fill.
ZEBRA_PROMPT = Prompt(
    "{puzzle}\n\nSolve the puzzle. Explain your reasoning, then give your answer as a JSON object "
    "of the following form, with every ___ replaced by the right value:\n```json\n{template}\n```"
)


def _convert_zebralogic(raw: dict, ctx: RowContext, load: Load) -> dict:
    """The answer is the JSON solution grid (scored by cell accuracy)."""
    puzzle = required_text(raw.get(ZEBRA_PUZZLE), "puzzle")
    grid = zebra_grid(raw.get(ZEBRA_SOLUTION))
    template = {
        "reasoning": "___",
        "solution": {h: {a: "___" for a in attrs} for h, attrs in grid.items()},
    }
    messages = ZEBRA_PROMPT.messages(puzzle=puzzle, template=json.dumps(template, indent=2))
    raw_id = raw.get(ZEBRA_ID)
    key = slug(str(raw_id)) if raw_id else content_digest(puzzle)
    meta = {"size": raw.get(ZEBRA_SIZE), "source_index": ctx.index}
    meta = {k: v for k, v in meta.items() if v is not None}
    answer = json.dumps(grid, ensure_ascii=False)
    return canonical_row("zebralogic", "logic", key, messages, answer, meta)


ENTRIES = (
    Benchmark("zebralogic", "logic", "ood", "zebra_grid",
              Recipe("zebralogic", "logic", Source(ZEBRA_HUB, config=ZEBRA_CONFIG, split="test",
                                           revision=ZEBRA_REVISION, gated=True),
                     ZEBRA_PROMPT, _convert_zebralogic,
                     published=(Published(1000, 1000, "ZebraLogic's 1,000 grid puzzles",
                                          rows=1000),)),
              "ZebraLogic grid puzzles"),
)  # fmt: skip
