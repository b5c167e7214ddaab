"""The reward function handed to TRL: cptlab's verifier behind TRL's reward-function protocol.

A completion that cannot be scored gets reward 0 with a `reason` (counted per step), never an
exception out of training. The last call's verdicts are kept for the SDPO teacher prompt
(environment feedback) and for the collapse monitor.

A completion is truncated, as the study decides it (verl/workers/reward_manager/naive.py:84 @
d277934), when its token ids (TRL's `completion_ids`, cut after the first end token) hold no
`eos_token_id`, the tokenizer's end token: for Qwen3 `<|im_end|>`. A completion that ended on
another of the generation config's end tokens (`<|endoftext|>`) counts as truncated there too.
The verifiers that use it (`sees_truncation`) get it; no reward depends on it.

A verdict the verifier could not reach (`Verdict.unscorable`: it raised, math-verify timed out,
the sandbox failed) is counted per step and verifier; `UnscorableGuard` stops a stage whose
share of them passes `training.max_unscorable_fraction`, naming the verifier.
"""

from __future__ import annotations

import re
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from cptlab.domains import verifier_for
from cptlab.errors import InputError, StageError
from cptlab.verifiers import Verdict, score
from cptlab.verifiers.base import unscorable


def completion_text(completion: Any) -> str:
    """TRL passes conversational completions as [{"role": "assistant", "content": ...}]."""
    if isinstance(completion, list):
        return "".join(
            m.get("content", "") if isinstance(m.get("content"), str) else "" for m in completion
        )
    return completion if isinstance(completion, str) else str(completion)


def reason_key(reason: str) -> str:
    """A short stable label for a reason (verifier messages may carry the program's output)."""
    head = reason.split(":", 1)[0].strip()
    return re.sub(r"\s+", " ", head)[:60] or "unknown"


class VerifierReward:
    """Scores TRL rollouts with `cptlab.verifiers.score`.

    The dataset given to the trainer has a `row_index` column into `rows`; TRL passes it back
    as a keyword argument. `workers > 1` scores in a thread pool (useful for the code sandbox,
    whose subprocesses release the GIL); results keep their order either way, and every
    verifier gives the verdict it gives on the main thread (math-verify's checks, which need
    the main thread for their time limits, run in worker processes: cptlab.verifiers.symbolic).
    With
    `eos_token_id` (the tokenizer's), a completion whose `completion_ids` lack it is scored as
    truncated; without, no completion is.

    Within a call each distinct (completion, row, truncation) is scored once. With `reuse`
    (`training.reuse_verdicts`) a verdict also serves the later calls of the stage: a policy
    that has sharpened writes the same program for the same row step after step. The rewards
    are the same wherever the verifier is a function of its input (the embedded ones are; a
    program near its time limit is not); how many completions took an earlier verdict is
    counted per step (`verifier/reused_fraction`).
    """

    __name__ = "verifier"

    def __init__(
        self,
        rows: list[dict],
        workers: int = 1,
        monitor=None,
        eos_token_id: int | None = None,
        reuse: bool = False,
    ) -> None:
        self.rows = rows
        self.workers = workers
        self.monitor = monitor
        self.eos_token_id = eos_token_id
        self.reuse = reuse
        self.last_verdicts: list[Verdict] = []
        self.last_texts: list[str] = []
        self._pending: list[Verdict] = []
        self._pending_rows: list[int] = []
        self._pending_reused = 0
        self._pending_unscorable: Counter = Counter()  # (verifier, reason label) -> count
        self._earlier: dict[tuple[str, int, bool], Verdict] = {}  # with `reuse`

    def _score_one(self, key: tuple[str, int, bool]) -> Verdict:
        # Verifier names are checked before training (check_verifiers), so nothing here is a
        # configuration error: whatever goes wrong is the completion's zero reward, with a reason.
        text, index, truncated = key
        row = self.rows[index]
        try:
            return score(verifier_for(row), text, row, truncated=truncated)
        except Exception as err:
            return unscorable(f"scoring failed: {err}"[:300])

    def truncated(self, completion_ids: list | None, count: int) -> list[bool]:
        """Per completion: no end token among its ids (all False without an `eos_token_id`)."""
        if self.eos_token_id is None:
            return [False] * count
        if completion_ids is None or len(completion_ids) != count:
            got = "none" if completion_ids is None else len(completion_ids)
            raise ValueError(f"the reward needs completion_ids for {count} completions, got {got}")
        return [self.eos_token_id not in list(ids) for ids in completion_ids]

    def __call__(
        self, prompts: list, completions: list, row_index: list[int], **kwargs: Any
    ) -> list[float]:
        texts = [completion_text(c) for c in completions]
        truncated = self.truncated(kwargs.get("completion_ids"), len(texts))
        keys = [
            (text, int(i), cut) for text, i, cut in zip(texts, row_index, truncated, strict=True)
        ]
        # A group repeats completions, more so as the policy sharpens: each distinct
        # (completion, row, truncation) is scored once (a code-sandbox run costs milliseconds).
        unique = [key for key in dict.fromkeys(keys) if key not in self._earlier]
        if self.workers > 1 and len(unique) > 1:
            with ThreadPoolExecutor(self.workers) as pool:
                scored = list(pool.map(self._score_one, unique))
        else:
            scored = [self._score_one(key) for key in unique]
        by_key = dict(zip(unique, scored, strict=True))
        self._pending_reused += sum(key in self._earlier for key in keys)
        verdicts = [by_key[key] if key in by_key else self._earlier[key] for key in keys]
        if self.reuse:
            self._earlier.update(by_key)
        self.last_verdicts = verdicts
        self.last_texts = texts
        self._pending.extend(verdicts)
        self._pending_rows.extend(int(i) for i in row_index)
        self._pending_unscorable.update(
            (verifier_for(self.rows[key[1]]), reason_key(v.reason or ""))
            for key, v in zip(keys, verdicts, strict=True)
            if v.unscorable
        )
        if self.monitor is not None:
            self.monitor.observe(texts, kwargs.get("completion_ids"), verdicts)
        return [float(v.reward) for v in verdicts]

    def feedback_for_last(self) -> list[str | None]:
        """The verifier feedback of the last call's completions (aligned with them)."""
        return [v.feedback or None for v in self.last_verdicts]

    def take_step_stats(self, success_reward_threshold: float = 1.0) -> dict:
        """Reward statistics of the verdicts since the previous call, then reset.

        Returns plain numbers plus `reasons` (reason label -> count), mergeable across processes
        with `merge_step_stats`, `unscorable` ([verifier, reason label, count] of the verdicts
        the verifiers could not reach) and `rows`: the training rows this process scored.
        """
        verdicts, self._pending = self._pending, []
        rows, self._pending_rows = self._pending_rows, []
        reused, self._pending_reused = self._pending_reused, 0
        unscorable_counts, self._pending_unscorable = self._pending_unscorable, Counter()
        rewards = [v.reward for v in verdicts]
        return {
            "n": len(rewards),
            "reused": reused,
            "sum": sum(rewards),
            "sumsq": sum(r * r for r in rewards),
            "success": sum(r >= success_reward_threshold for r in rewards),
            "with_reason": sum(v.reason is not None for v in verdicts),
            "reasons": dict(Counter(reason_key(v.reason) for v in verdicts if v.reason)),
            "unscorable": [[*key, count] for key, count in sorted(unscorable_counts.items())],
            "rows": sorted(set(rows)),
        }


def check_verifiers(rows: list[dict], where: str) -> None:
    """Fail before training, not at the first step, if a row names an unknown verifier."""
    from cptlab.verifiers import VERIFIERS

    for row in rows:
        name = verifier_for(row)
        if name not in VERIFIERS:
            raise InputError(
                f"{where}: row {row['id']!r} needs verifier {name!r}; known: {sorted(VERIFIERS)}"
            )


def merge_step_stats(parts: list[dict]) -> tuple[dict[str, float], dict[str, int]]:
    """(metrics, reason counts) from the per-process stats of one step."""
    n = sum(p["n"] for p in parts)
    reasons: Counter = Counter()
    for p in parts:
        reasons.update(p["reasons"])
    if n == 0:
        return {}, dict(reasons)
    mean = sum(p["sum"] for p in parts) / n
    # unbiased, like TRL's reward_std
    var = max(0.0, sum(p["sumsq"] for p in parts) - n * mean * mean) / max(n - 1, 1)
    metrics = {
        "verifier/reward_mean": mean,
        "verifier/reward_std": var**0.5,
        "verifier/success_fraction": sum(p["success"] for p in parts) / n,
        "verifier/reason_fraction": sum(p["with_reason"] for p in parts) / n,
        "verifier/completions": float(n),
        "verifier/reused_fraction": sum(p.get("reused", 0) for p in parts) / n,
        "verifier/unscorable_fraction": sum(c for p in parts for *_, c in p["unscorable"]) / n,
    }
    return metrics, dict(sorted(reasons.items()))


class UnscorableError(StageError):
    """The verifiers could not judge more of a stage's completions than the config allows."""


@dataclass
class UnscorableGuard:
    """Counts, over a stage, the completions its verifiers could not judge, and ends the stage
    once they pass `max_fraction` of all completions scored so far: a verifier that fails
    systematically (a missing dependency, a checker that cannot run where it is called) would
    otherwise train on zero rewards that judge nothing.

    Parameters:
        max_fraction (`float`): the largest share of unscorable completions allowed
            (`training.max_unscorable_fraction`); 1.0 never stops.
    """

    max_fraction: float
    completions: int = 0
    counts: Counter = field(default_factory=Counter)  # (verifier, reason label) -> count

    def add(self, parts: list[dict]) -> None:
        """One step's `take_step_stats` of every process."""
        self.completions += sum(p["n"] for p in parts)
        for part in parts:
            self.counts.update({(verifier, label): c for verifier, label, c in part["unscorable"]})

    def check(self, step: int) -> None:
        """Raise UnscorableError naming the verifiers once the share passes `max_fraction`."""
        total = sum(self.counts.values())
        if not self.completions or total / self.completions <= self.max_fraction:
            return
        by_verifier: Counter = Counter()
        for (verifier, _), count in self.counts.items():
            by_verifier[verifier] += count
        named = ", ".join(f"{v} ({c})" for v, c in by_verifier.most_common())
        reasons = "; ".join(f"{label} ({c})" for (_, label), c in self.counts.most_common(3))
        raise UnscorableError(
            f"step {step}: the verifiers could not judge {total} of the stage's "
            f"{self.completions} completions ({total / self.completions:.1%}, above "
            f"training.max_unscorable_fraction {self.max_fraction}): {named}; reasons: {reasons}"
        )
