"""The reward function handed to TRL: cptlab's verifier behind TRL's reward-function protocol.

A completion that cannot be scored gets reward 0 with a `reason` (counted per step), never an
exception out of training. The last call's verdicts are kept for the SDPO teacher prompt
(environment feedback) and for the collapse monitor.
"""

from __future__ import annotations

import re
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from cptlab.evaluation.scoring import verifier_for
from cptlab.verifiers import Verdict, score


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
    whose subprocesses release the GIL); results keep their order either way.
    """

    __name__ = "verifier"

    def __init__(self, rows: list[dict], workers: int = 1, monitor=None) -> None:
        self.rows = rows
        self.workers = workers
        self.monitor = monitor
        self.last_verdicts: list[Verdict] = []
        self.last_texts: list[str] = []
        self._pending: list[Verdict] = []
        self._pending_rows: list[int] = []

    def _score_one(self, text: str, row: dict) -> Verdict:
        # Verifier names are checked before training (check_verifiers), so nothing here is a
        # configuration error: whatever goes wrong is the completion's zero reward, with a reason.
        try:
            return score(verifier_for(row), text, row)
        except Exception as err:
            return Verdict(0.0, "The answer could not be checked.", f"scoring failed: {err}"[:300])

    def __call__(
        self, prompts: list, completions: list, row_index: list[int], **kwargs: Any
    ) -> list[float]:
        texts = [completion_text(c) for c in completions]
        keys = [(text, int(i)) for text, i in zip(texts, row_index, strict=True)]
        # A group repeats completions, more so as the policy sharpens: each distinct
        # (completion, row) is scored once (a code-sandbox run costs tens of milliseconds).
        unique = list(dict.fromkeys(keys))
        rows = [self.rows[i] for _, i in unique]
        unique_texts = [text for text, _ in unique]
        if self.workers > 1 and len(unique) > 1:
            with ThreadPoolExecutor(self.workers) as pool:
                scored = list(pool.map(self._score_one, unique_texts, rows))
        else:
            scored = [self._score_one(t, r) for t, r in zip(unique_texts, rows, strict=True)]
        by_key = dict(zip(unique, scored, strict=True))
        verdicts = [by_key[key] for key in keys]
        self.last_verdicts = verdicts
        self.last_texts = texts
        self._pending.extend(verdicts)
        self._pending_rows.extend(int(i) for i in row_index)
        if self.monitor is not None:
            self.monitor.observe(texts, kwargs.get("completion_ids"), verdicts)
        return [float(v.reward) for v in verdicts]

    def feedback_for_last(self) -> list[str | None]:
        """The verifier feedback of the last call's completions (aligned with them)."""
        return [v.feedback or None for v in self.last_verdicts]

    def take_step_stats(self, success_reward_threshold: float = 1.0) -> dict:
        """Reward statistics of the verdicts since the previous call, then reset.

        Returns plain numbers plus `reasons` (reason label -> count), mergeable across processes
        with `merge_step_stats`, and `rows`: the training rows this process scored.
        """
        verdicts, self._pending = self._pending, []
        rows, self._pending_rows = self._pending_rows, []
        rewards = [v.reward for v in verdicts]
        return {
            "n": len(rewards),
            "sum": sum(rewards),
            "sumsq": sum(r * r for r in rewards),
            "success": sum(r >= success_reward_threshold for r in rewards),
            "with_reason": sum(v.reason is not None for v in verdicts),
            "reasons": dict(Counter(reason_key(v.reason) for v in verdicts if v.reason)),
            "rows": sorted(set(rows)),
        }


def check_verifiers(rows: list[dict], where: str) -> None:
    """Fail before training, not at the first step, if a row names an unknown verifier."""
    from cptlab.verifiers import VERIFIERS

    for row in rows:
        name = verifier_for(row)
        if name not in VERIFIERS:
            raise KeyError(
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
    }
    return metrics, dict(sorted(reasons.items()))
