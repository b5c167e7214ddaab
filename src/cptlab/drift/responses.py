"""Response drift: how far a trained model's answers moved from the base model's, per prompt.

For every evaluation item, the first completion of the trained model is compared with the first
completion of the reference (base) model on the same item:

cosine   cosine similarity of the two sentence embeddings (semantic; see embedders.py).
rouge_l  token-level ROUGE-L F1: 2PR/(P+R) with P = LCS/|trained|, R = LCS/|reference| over
         `cptlab.drift.text.tokenize` tokens (lexical; 1 for identical texts, two empty texts
         count as identical, one empty text gives 0).

The study plots these per stage as violins (in %): a model that keeps answering like the base
model stays near 100.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from cptlab.drift.embedders import Embedder
from cptlab.drift.tables import read_responses, write_table
from cptlab.drift.text import tokenize
from cptlab.errors import InputError

COLUMNS = ("id", "cosine", "rouge_l", "tokens", "reference_tokens")


def lcs_length(a: Sequence[Hashable], b: Sequence[Hashable]) -> int:
    """Length of the longest common subsequence of two sequences.

    Bit-parallel (Allison-Dix / Hyyrö): one big-integer update per element of `b`, so
    O(|a| * |b| / word size) instead of the O(|a| * |b|) table; 8k-token responses take
    milliseconds.
    """
    if not a or not b:
        return 0
    positions: dict[Hashable, int] = {}
    for i, item in enumerate(a):
        positions[item] = positions.get(item, 0) | (1 << i)
    full = (1 << len(a)) - 1
    v = full
    for item in b:
        u = v & positions.get(item, 0)
        v = ((v + u) | (v - u)) & full
    return len(a) - v.bit_count()


def rouge_l(candidate: str | Sequence[str], reference: str | Sequence[str]) -> float:
    """Token-level ROUGE-L F1 of `candidate` against `reference` (texts are tokenized with
    `tokenize`; token lists are used as given)."""
    cand = tokenize(candidate) if isinstance(candidate, str) else list(candidate)
    ref = tokenize(reference) if isinstance(reference, str) else list(reference)
    if not cand and not ref:
        return 1.0
    lcs = lcs_length(cand, ref)
    if lcs == 0:
        return 0.0
    precision, recall = lcs / len(cand), lcs / len(ref)
    return 2 * precision * recall / (precision + recall)


def cosine_similarity(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine similarity of two (n, d) arrays (0 where a row is all zeros)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"embedding arrays differ in shape: {a.shape} vs {b.shape}")
    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    dots = np.einsum("ij,ij->i", a, b)
    return np.divide(dots, norms, out=np.zeros_like(dots), where=norms > 0)


def response_similarity(
    texts: Sequence[str], reference_texts: Sequence[str], embedder: Embedder | None
) -> pd.DataFrame:
    """Per pair: cosine (NaN without an embedder), rouge_l, and both token counts."""
    if len(texts) != len(reference_texts):
        raise ValueError(f"{len(texts)} texts but {len(reference_texts)} reference texts")
    if embedder is not None and len(texts):
        vectors = embedder([*texts, *reference_texts])
        cosine = cosine_similarity(vectors[: len(texts)], vectors[len(texts) :])
    else:
        cosine = np.full(len(texts), np.nan)
    tokens = [tokenize(t) for t in texts]
    ref_tokens = [tokenize(t) for t in reference_texts]
    return pd.DataFrame(
        {
            "cosine": cosine,
            "rouge_l": [rouge_l(a, b) for a, b in zip(tokens, ref_tokens, strict=True)],
            "tokens": [len(t) for t in tokens],
            "reference_tokens": [len(t) for t in ref_tokens],
        }
    )


def matched_ids(mine: dict, theirs: dict, path: str | Path, ref_path: str | Path) -> list[str]:
    """The reference's ids in its order, once every id is known to be in both response sets
    (else ValueError naming the file that lacks one)."""
    for rid in mine:
        if rid not in theirs:
            raise InputError(f"{ref_path}: no id {rid!r} (present in {path})")
    for rid in theirs:
        if rid not in mine:
            raise InputError(f"{path}: no id {rid!r} (present in {ref_path})")
    return list(theirs)


def response_drift(
    responses: str | Path,
    reference_responses: str | Path,
    embedder: Embedder | None,
    out: str | Path | None = None,
) -> pd.DataFrame:
    """Per-item similarity between a checkpoint's responses and the reference model's.

    Both files are evaluation responses JSONL ({"id", "completions", ...} per line); items are
    matched by id and the first completion of each is compared. Every id must be in both files
    (else ValueError naming the file that lacks it). Rows follow the reference file's order, with
    COLUMNS. `embedder` None leaves cosine NaN (lexical only). Written as CSV to `out` if given.
    """
    mine = read_responses(responses)
    theirs = read_responses(reference_responses)
    ids = matched_ids(mine, theirs, responses, reference_responses)
    df = response_similarity(
        [mine[i]["completions"][0] for i in ids],
        [theirs[i]["completions"][0] for i in ids],
        embedder,
    )
    df.insert(0, "id", ids)
    if out is not None:
        write_table(df, out)
    return df


def summarize_similarity(df: pd.DataFrame) -> dict:
    """Median, mean, 10th and 90th percentile of cosine and rouge_l, in % (the study's unit)."""
    summary: dict = {"n": len(df)}
    for column in ("cosine", "rouge_l"):
        values = 100.0 * df[column].dropna().to_numpy(dtype=float)
        if values.size == 0:
            continue
        summary[column] = {
            "median": float(np.median(values)),
            "mean": float(values.mean()),
            "p10": float(np.percentile(values, 10)),
            "p90": float(np.percentile(values, 90)),
        }
    return summary
