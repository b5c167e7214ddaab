"""GPQA-Diamond prompts against the study's own formatting function.

Each row below (tests/hub_layout.py `gpqa_rows`: the loader fixture's questions, one whose
incorrect options repeat one another, one whose options carry spaces, as real GPQA rows do) was
given to the study's `_format_gpqa` (Moenupa/SDPO-CL @ d277934, data/format/gpqa.py, loaded by
path outside the project, Python 3.11), its `random.shuffle` replaced by the option order cptlab
draws for the row (`gpqa_option_order(record_id, 42)`: the study shuffles unseeded, so an order
must be fixed to compare). STUDY holds what it returned, `prompt` and `answer`, as literals;
cptlab's rows must carry the same user message and answer letter. The loader before this check
rejected the repeated-option row and stripped the spaced options.
"""

from __future__ import annotations

from pathlib import Path

from hub_layout import csv_text, gpqa_rows

from cptlab.domains.registry import load_benchmark

# Record ID: (the study's prompt, its answer letter).
STUDY = {
    "rec0AbCdEfGh1": (
        (
            "Return your final response within \\boxed{} and only include the letter "
            "choice (A, B, C, or D) as your final response.\n"
            "Problem: A spin-1/2 particle is in the state (|up> + |down>)/sqrt(2). "
            "What is the expectation value of S_z?\n"
            "Options: A) -hbar/2, B) 0, C) hbar/2, D) hbar\n"
            "Answer:"
        ),
        "B",
    ),
    "rec1IjKlMnOp2": (
        (
            "Return your final response within \\boxed{} and only include the letter "
            "choice (A, B, C, or D) as your final response.\n"
            "Problem: Which reagent converts a primary alcohol to an aldehyde "
            "without over-oxidation?\n"
            "Options: A) PCC, B) KMnO4, C) K2Cr2O7 / H2SO4, D) HNO3\n"
            "Answer:"
        ),
        "A",
    ),
    "rec2QrStUvWx3": (
        (
            "Return your final response within \\boxed{} and only include the letter "
            "choice (A, B, C, or D) as your final response.\n"
            "Problem: In which organelle does the Krebs cycle take place in "
            "eukaryotic cells?\n"
            "Options: A) Golgi apparatus, B) Cytosol, C) Nucleus, D) Mitochondrial "
            "matrix\n"
            "Answer:"
        ),
        "D",
    ),
    "recRepeatOpt01": (
        (
            "Return your final response within \\boxed{} and only include the letter "
            "choice (A, B, C, or D) as your final response.\n"
            "Problem: Which value does the ratio approach?\n"
            "Options: A) 1/2, B) 1/3, C) 2, D) 1/3\n"
            "Answer:"
        ),
        "A",
    ),
    "recSpacedOpt02": (
        (
            "Return your final response within \\boxed{} and only include the letter "
            "choice (A, B, C, or D) as your final response.\n"
            "Problem: What is the product formed?\n"
            "Options: A) benzene, B) phenol , C)  toluene , D)  benzoic acid\n"
            "Answer:"
        ),
        "D",
    ),
}


def test_gpqa_prompts_and_answers_are_the_studys(tmp_path: Path) -> None:
    path = tmp_path / "gpqa_diamond.csv"
    path.write_text(csv_text(gpqa_rows()))
    rows = load_benchmark("gpqa_diamond", path=str(path), option_seed=42,
                          cache_dir=str(tmp_path / "datasets"))  # fmt: skip
    assert len(rows) == len(STUDY)  # every row kept
    for row in rows:
        prompt, answer = STUDY[row["id"].removeprefix("gpqa_diamond-")]
        assert row["prompt"] == [{"role": "user", "content": prompt}]
        assert row["answer"] == answer
