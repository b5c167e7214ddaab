"""The study's real benchmarks: one registry entry per dataset split, RAW schema -> canonical rows.

Design
------
Every entry's loader is a `Recipe` (`pipeline.py`): the entry's Source (hub id, config,
split, pinned commit, files read directly, gated or not), its published row counts, its Prompt
format, its row converter and, where the study
filters or holds out, a filter rule and a `Holdout`. Called as
``recipe(n=None, seed=0, path=None, **options)``, it returns canonical rows (see `cptlab.rows`)
through five fixed stages, the same for every dataset:

1. **Open** (`open_source`): ``path`` is a local file or folder (``.json``, ``.jsonl``,
   ``.parquet``, ``.csv``) or a hub name (read at the ``revision`` option); ``path=None`` means
   the Source's hub repositories at their pinned commits (``revision`` names others). A hub
   repository is read from its snapshot in the HF cache (`hub.py`): `cptlab fetch-data` fills
   the cache on a node with internet, and compute nodes read it with ``HF_HUB_OFFLINE=1``;
   the snapshot goes through ``datasets.load_dataset(<folder>, config, split=...)`` and the
   repository's README configs, or, where its loading script keeps `datasets` from reading it
   (LiveCodeBench), its files are read directly. Nothing is read or downloaded at import time.
   JSON/JSONL files are read with the standard library, not with ``datasets``: Arrow unifies
   the schemas of nested objects across rows and pads every missing key with ``None``, which
   corrupts exactly the heterogeneous fields these datasets carry (BFCL function schemas and
   possible answers, ToolAlpaca API documents). JSONL files are indexed by byte offset and
   parsed row by row, so LiveCodeBench's multi-GB test files are never held in memory whole.
   Parquet/CSV files and hub snapshots go through ``datasets``; the converters of the
   nested-schema datasets drop the ``None`` padding Arrow adds (`drop_none`).
2. **Filter** by the study's rules (level/type for SciKnowEval, ``error_type`` for MMLU-Redux,
   the code subset of Dolci, duplicates, ...). Rows excluded by a rule are counted per reason,
   logged as a warning and kept in `EXCLUSIONS[name]` (see `exclusions`): never silently.
3. **Split** train/test where the study holds out part of one dataset (SciKnowEval, each
   domain on its own; Dolci; ToolAlpaca with ``holdout``): the permutation is the one
   ``datasets``' ``Dataset.train_test_split(test_size=f, seed=s)`` draws (numpy PCG64), so the
   split is the public SDPO data preparation's (checked on its SciKnowEval files).
4. **Subsample** ``n`` rows with ``random.Random(seed)`` (sorted, so rows keep source order).
5. **Convert** each selected raw row with the study's prompt format. A raw row that cannot be
   converted (missing answer, empty question, bad JSON, ...) raises `RowError` naming the
   dataset, the raw row index, where it is (file:line) and the problem. With ``strict=False``
   such rows are instead counted and logged like rule exclusions.

Row ids are ``<benchmark>-<key>`` where the key is the dataset's own id when it has one,
otherwise a hash of the row's content: stable across calls, seeds and subsample sizes.
Code rows have no reference program: their `answer` is a fixed note (`CODE_ANSWER`) and the
verifiers run ``metadata["tests"]``.

The study's choices, and defaults where it is silent (all are loader options)
-------------------------------------------------------------------------------
Prompts are the study's wherever it publishes one (docs/rewards.md says which were checked on
real rows); the prompt strings carry a comment naming their source file.

- SciKnowEval: the study's Chemistry domain (``domains``; None takes all four), levels
  ``("L3",)``, 2- and 4-choice MCQ, 10% of each domain held out; no de-duplication. The
  study's prepared files (its ``<domain>.json`` and split files) are a source too.
- ToolAlpaca: each file is a split (``train_data.json``, ``eval_simulated.json``; the study's
  prepared ``tooluse`` files are a source too); ``holdout=0.1`` splits one file instead.
  Instances whose golden calls hold a ``$`` placeholder are excluded, the study's rule;
  failed generations (no reference calls) too.
- Dolci: the test part is 10% of the rows (``holdout=0.1``, ``split_seed=42``); its "code"
  rows (assert tests, `python_unit_tests`) and "code_stdio" rows (stdin/stdout, `stdio_tests`)
  are separate entries, as one entry has one verifier. The study publishes no Dolci loader:
  its code prompt is used.
- LiveCodeBench: release_v6, private tests only (``tests``), the study's prompt (``prompt``;
  functional problems as a top-level function scored by asserts); the study's contest window
  is set in paper.yaml (``start_date`` / ``end_date``).
- GPQA: options shuffled per question with ``option_seed`` (default: the loader's ``seed``);
  the study shuffles unseeded. Every row is kept, repeated incorrect options too, and the
  option texts go into the prompt as published (spaces kept), as the study's do.
- MMLU-Redux: only ``error_type == "ok"`` rows (``keep_error_types``); with
  ``fix_wrong_groundtruth`` the "wrong_groundtruth" rows too, with the annotators'
  ``correct_answer`` where they gave one (else the published ``answer``, as the MMLU-Redux
  authors' own correction does).
- DAPO: exact duplicate problems dropped (the hub copy repeats each ~100 times).

Raw schemas
-----------
The field names are constants at the top of each family module, with the documented schema
they come from, beside each hub repository's pinned commit and layout. They were written from
the public datasets' cards and the loaders of their public evaluation code, and checked against
the real rows of AIME, MATH-500, SciKnowEval, ToolAlpaca and BFCL in ../shared/study-data/;
the others were not checked against downloaded copies (no hub access here; docs/data.md). Where
datasets exist in several published variants, the converters accept the known aliases (e.g.
AIME mirrors).

Layout
------
One module per domain family, each with its raw-schema constants, prompt formats, row
converters and registry entries (`ENTRIES`); importing this package registers them all (in
this order):

- `pipeline`: `Recipe`, the one loader every entry runs, and `Holdout`.
- `common`: reading files and hub snapshots, raw-row errors, `LoadRun` (filter, exclusion
  counting), `holdout_split`, `subsample`, helpers shared by the converters.
- `hub`: `HubRepo` (one repository at its revision), its snapshot in the HF cache, access.
- `math`: dapo_math, aime, math500.
- `science`: sciknoweval_train / _test, gpqa_diamond.
- `tool`: toolalpaca_train / _test, bfcl_multiple.
- `code`: dolci_code(_stdio)_train / _test, livecodebench.
- `logic`: zebralogic.
- `knowledge`: mmlu_redux.
"""

from cptlab.domains.paper import code, knowledge, logic, math, science, tool
from cptlab.domains.paper.code import (
    CODE_ANSWER,
    CODE_PROMPT,
    LCB_SYSTEM,
    decode_packed,
)
from cptlab.domains.paper.common import EXCLUSIONS, exclusions, holdout_split, subsample
from cptlab.domains.paper.logic import zebra_grid
from cptlab.domains.paper.math import MATH500_HUB, MATH_INSTRUCTION
from cptlab.domains.paper.science import SCIKNOWEVAL_SYSTEM, gpqa_option_order
from cptlab.domains.registry import register_benchmark

# Registration order (math, science, tool, code, logic, knowledge) is the registry's order.
PAPER_BENCHMARKS = (
    *math.ENTRIES,
    *science.ENTRIES,
    *tool.ENTRIES,
    *code.ENTRIES,
    *logic.ENTRIES,
    *knowledge.ENTRIES,
)
for _benchmark in PAPER_BENCHMARKS:
    register_benchmark(_benchmark)

__all__ = [
    "CODE_ANSWER",
    "CODE_PROMPT",
    "EXCLUSIONS",
    "LCB_SYSTEM",
    "MATH500_HUB",
    "MATH_INSTRUCTION",
    "PAPER_BENCHMARKS",
    "SCIKNOWEVAL_SYSTEM",
    "decode_packed",
    "exclusions",
    "gpqa_option_order",
    "holdout_split",
    "subsample",
    "zebra_grid",
]
