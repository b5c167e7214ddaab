"""Collapse forensics: what a checkpoint's outputs degenerate into, and how fast.

Self-distillation can amplify a frequent formatting artifact (a repeated `\\boxed`) through the
teacher-student loop until outputs degenerate (the study's finding 6). Per checkpoint, over all
completions of an evaluation responses file, `collapse_forensics` reports:

top_ngrams            the most repeated token n-grams (count, share of all n-grams)
repetition_rate       mean over completions of 1 - distinct n-grams / n-grams
top_ngram_share       mean over completions of the share of its most frequent n-gram
format_violation_rate share of completions breaking the format: by `format_rule` when one is
                      passed, else by the verifier (a non-null entry in "reasons")
format_tokens         per format token (name -> literal text, as the training monitor's
                      `collapse.format_tokens`): mean count per completion, share of completions
                      with 2 or more
length                tokens and characters per completion: mean, median, p10, p90, min, max,
                      and a 10-bin histogram
degenerate            completions flagged by the DegeneracyRule (below), their share, and why

A completion is degenerate when (with at least `min_ngrams` n-grams) its repetition rate is at
least `max_repetition` (a loop of any period), or a single n-gram covers at least `max_top_share`
of its n-grams, or when any format token occurs more than `max_format_repeats` times.

`artifact_trend_from_logs` and `artifact_trend_from_responses` follow the most frequent artifact
over training steps, from the train log's per-step collapse metrics and from saved responses.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from cptlab.drift.tables import read_responses, write_json
from cptlab.drift.text import ngrams, repetition_rate, tokenize, top_ngram_share
from cptlab.errors import InputError

DEFAULT_FORMAT_TOKENS = {"boxed": "\\boxed"}


@dataclass(frozen=True)
class DegeneracyRule:
    """When a completion counts as degenerate (see the module docstring)."""

    min_ngrams: int = 8
    max_repetition: float = 0.5
    max_top_share: float = 0.2
    max_format_repeats: int = 3


def degeneracy_reasons(
    text: str,
    ngram: int,
    format_tokens: Mapping[str, str],
    rule: DegeneracyRule = DegeneracyRule(),
) -> list[str]:
    """Why `text` is degenerate under `rule` (an empty list when it is not)."""
    tokens = tokenize(text)
    why = []
    if len(tokens) - ngram + 1 >= rule.min_ngrams:
        rate = repetition_rate(tokens, ngram)
        if rate >= rule.max_repetition:
            why.append(f"repetition {rate:.2f} >= {rule.max_repetition}")
        share = top_ngram_share(tokens, ngram)
        if share >= rule.max_top_share:
            why.append(f"top {ngram}-gram share {share:.2f} >= {rule.max_top_share}")
    for name, token in format_tokens.items():
        count = text.count(token)
        if count > rule.max_format_repeats:
            why.append(f"{name} x{count} > {rule.max_format_repeats}")
    return why


def _distribution(values: Sequence[float]) -> dict:
    a = np.asarray(values, dtype=np.float64)
    if a.size == 0:
        return {"n": 0}
    counts, edges = np.histogram(a, bins=10)
    return {
        "n": int(a.size),
        "mean": float(a.mean()),
        "median": float(np.median(a)),
        "p10": float(np.percentile(a, 10)),
        "p90": float(np.percentile(a, 90)),
        "min": float(a.min()),
        "max": float(a.max()),
        "histogram": {"edges": edges.tolist(), "counts": counts.tolist()},
    }


def format_token_stats(texts: Sequence[str], format_tokens: Mapping[str, str]) -> dict:
    """Per format token: mean count per text, share of texts with it twice or more, total."""
    out = {}
    for name, token in format_tokens.items():
        counts = [t.count(token) for t in texts]
        out[name] = {
            "token": token,
            "per_completion": float(np.mean(counts)) if counts else 0.0,
            "repeated_share": float(np.mean([c >= 2 for c in counts])) if counts else 0.0,
            "total": int(sum(counts)),
        }
    return out


def most_frequent_artifact(texts: Sequence[str], format_tokens: Mapping[str, str]) -> str | None:
    """The name of the format token with the most occurrences over `texts` (None when none
    occurs)."""
    stats = format_token_stats(texts, format_tokens)
    best = max(stats, key=lambda name: stats[name]["total"], default=None)
    return best if best is not None and stats[best]["total"] > 0 else None


def completion_forensics(
    texts: Sequence[str],
    ngram: int = 4,
    format_tokens: Mapping[str, str] = DEFAULT_FORMAT_TOKENS,
    reasons: Sequence[str | None] | None = None,
    format_rule: Callable[[str], bool] | None = None,
    rule: DegeneracyRule = DegeneracyRule(),
    labels: Sequence[str] | None = None,
    top: int = 20,
    max_listed: int = 50,
) -> dict:
    """The forensics report (module docstring) of a list of completions.

    reasons: the verifier's reason per completion (None = scored normally), used for the
        format-violation rate when no `format_rule` is given; without either it is None.
    format_rule: text -> True when the text follows the format.
    labels: a name per completion for the degenerate list (default: its index).
    """
    labels = list(labels) if labels is not None else [str(i) for i in range(len(texts))]
    if len(labels) != len(texts):
        raise ValueError(f"{len(labels)} labels for {len(texts)} completions")
    tokens = [tokenize(t) for t in texts]
    counts: Counter = Counter()
    for seq in tokens:
        counts.update(ngrams(seq, ngram))
    total = sum(counts.values())
    if format_rule is not None:
        violation = float(np.mean([not format_rule(t) for t in texts])) if texts else None
        violation_source = "format_rule"
    elif reasons is not None and len(reasons) == len(texts):
        violation = float(np.mean([r is not None for r in reasons])) if texts else None
        violation_source = "reasons"
    else:
        violation, violation_source = None, None
    flagged = []
    for label, text in zip(labels, texts, strict=True):
        why = degeneracy_reasons(text, ngram, format_tokens, rule)
        if why:
            flagged.append({"label": label, "why": why, "head": text[:120]})
    n = len(texts)
    return {
        "n_completions": n,
        "ngram": ngram,
        "top_ngrams": [
            {"ngram": " ".join(g), "count": c, "share": c / total}
            for g, c in counts.most_common(top)
        ],
        "repetition_rate": float(np.mean([repetition_rate(t, ngram) for t in tokens]))
        if n
        else 0.0,
        "top_ngram_share": float(np.mean([top_ngram_share(t, ngram) for t in tokens]))
        if n
        else 0.0,
        "duplicate_share": 1.0 - len(set(texts)) / n if n else 0.0,
        "format_violation_rate": violation,
        "format_violation_source": violation_source,
        "format_tokens": format_token_stats(texts, format_tokens),
        "most_frequent_artifact": most_frequent_artifact(texts, format_tokens),
        "length": {
            "tokens": _distribution([len(t) for t in tokens]),
            "chars": _distribution([len(t) for t in texts]),
        },
        "degenerate": {
            "rule": asdict(rule),
            "count": len(flagged),
            "share": len(flagged) / n if n else 0.0,
            "examples": flagged[:max_listed],
        },
    }


def collapse_forensics(
    responses: str | Path,
    ngram: int = 4,
    format_tokens: Mapping[str, str] = DEFAULT_FORMAT_TOKENS,
    format_rule: Callable[[str], bool] | None = None,
    rule: DegeneracyRule = DegeneracyRule(),
    top: int = 20,
    out: str | Path | None = None,
) -> dict:
    """`completion_forensics` over every completion of an evaluation responses JSONL file
    (labels "<id>#<sample>"; the file's "reasons" feed the format-violation rate when no
    `format_rule` is given). Adds "responses": the file. Written as JSON to `out` if given."""
    records = read_responses(responses)
    texts, reasons, labels = [], [], []
    reasons_ok = True
    for rid, record in records.items():
        completions = record["completions"]
        item_reasons = record.get("reasons")
        if not isinstance(item_reasons, list) or len(item_reasons) != len(completions):
            reasons_ok = False
            item_reasons = [None] * len(completions)
        for j, text in enumerate(completions):
            texts.append(text)
            reasons.append(item_reasons[j])
            labels.append(f"{rid}#{j}")
    report = completion_forensics(
        texts,
        ngram,
        format_tokens,
        reasons if reasons_ok else None,
        format_rule,
        rule,
        labels,
        top,
    )
    report = {"responses": str(responses), **report}
    if out is not None:
        write_json(report, out)
    return report


def artifact_trend_from_logs(
    records: Sequence[Mapping], prefix: str, step_key: str = "step"
) -> pd.DataFrame:
    """The per-step metrics whose names start with `prefix` (e.g. the training monitor's
    "collapse/format/boxed/" or "collapse/"), from train-log records (one dict per step).

    Returns a DataFrame with `step_key` and one column per matching key (records without any
    matching key are dropped), sorted by step.
    """
    rows = []
    for i, record in enumerate(records):
        values = {k: v for k, v in record.items() if k.startswith(prefix)}
        if not values:
            continue
        if step_key not in record:
            raise InputError(f"train-log record {i} has no {step_key!r}")
        rows.append({step_key: record[step_key], **values})
    columns = sorted({k for row in rows for k in row if k != step_key})
    df = pd.DataFrame(rows, columns=[step_key, *columns])
    return df.sort_values(step_key, kind="stable").reset_index(drop=True)


def artifact_trend_from_responses(
    responses_by_step: Mapping[int, str | Path | Sequence[str]],
    token: str,
    ngram: int = 4,
) -> pd.DataFrame:
    """How often `token` (literal text, e.g. "\\\\boxed") occurs in the responses saved at each
    training step. Values are a responses JSONL path (all completions) or a list of texts.

    Columns: step, completions, per_completion (mean count), repeated_share (share with >= 2),
    top_ngram_share (mean per completion), sorted by step.
    """
    rows = []
    for step, source in responses_by_step.items():
        if isinstance(source, str | Path):
            texts = [t for r in read_responses(source).values() for t in r["completions"]]
        else:
            texts = list(source)
        counts = [t.count(token) for t in texts]
        rows.append(
            {
                "step": step,
                "completions": len(texts),
                "per_completion": float(np.mean(counts)) if texts else 0.0,
                "repeated_share": float(np.mean([c >= 2 for c in counts])) if texts else 0.0,
                "top_ngram_share": (
                    float(np.mean([top_ngram_share(tokenize(t), ngram) for t in texts]))
                    if texts
                    else 0.0
                ),
            }
        )
    df = pd.DataFrame(
        rows, columns=["step", "completions", "per_completion", "repeated_share", "top_ngram_share"]
    )
    return df.sort_values("step", kind="stable").reset_index(drop=True)
