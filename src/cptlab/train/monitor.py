"""Collapse monitor: cheap statistics of each step's completions, thresholds, and the errors that
stop a stage.

Self-distillation can amplify a frequent artifact (a repeated `\\boxed`) until outputs
degenerate. Per step the monitor measures, over the step's completions:

    top_ngram_share             count of the most frequent token n-gram / all n-grams
    repeated_ngram_share        mean over completions of 1 - distinct n-grams / n-grams
    duplicate_completion_share  1 - distinct completions / completions
    format_violation_rate       share of verdicts with a `reason` (could not be scored)
    format/<name>/per_completion   mean count of a format token (e.g. `\\boxed`)
    format/<name>/repeated_share   share of completions where it occurs twice or more

An alarm is a metric above its threshold; `patience` consecutive alarming steps trigger the
action (warn, stop, error).
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field

from cptlab.errors import ConfigError, StageError
from cptlab.train.settings import CollapseSettings

log = logging.getLogger(__name__)

ACTIONS = ("warn", "stop", "error")


class NonFiniteError(StageError):
    """A loss or gradient was NaN/inf."""


class CollapseError(StageError):
    """The collapse monitor crossed a threshold with action `error`."""


def _ngrams(ids: list, n: int) -> list[tuple]:
    return [tuple(ids[i : i + n]) for i in range(len(ids) - n + 1)]


def completion_stats(
    texts: list[str],
    token_ids: list[list[int]] | None,
    reasons: list[str | None],
    ngram: int,
    format_tokens: dict[str, str],
) -> dict[str, float]:
    """The monitor's metrics for one batch of completions (see the module docstring)."""
    if not texts:
        return {}
    units = token_ids if token_ids is not None else [t.split() for t in texts]
    counts: Counter = Counter()
    repeated = []
    for seq in units:
        grams = _ngrams(list(seq), ngram)
        counts.update(grams)
        repeated.append(1.0 - len(set(grams)) / len(grams) if grams else 0.0)
    total = sum(counts.values())
    stats = {
        "top_ngram_share": counts.most_common(1)[0][1] / total if total else 0.0,
        "repeated_ngram_share": sum(repeated) / len(repeated),
        "duplicate_completion_share": 1.0 - len(set(texts)) / len(texts),
        "format_violation_rate": sum(r is not None for r in reasons) / len(reasons),
    }
    for name, token in format_tokens.items():
        occurrences = [t.count(token) for t in texts]
        stats[f"format/{name}/per_completion"] = sum(occurrences) / len(texts)
        stats[f"format/{name}/repeated_share"] = sum(c >= 2 for c in occurrences) / len(texts)
    return stats


@dataclass
class CollapseMonitor:
    """Accumulates a step's completions and decides on alarms.

    Parameters:
        ngram (`int`): n of the token n-grams.
        format_tokens (`dict[str, str]`): name -> literal text counted per completion.
        thresholds (`dict[str, float]`): metric name -> level; above it the step alarms.
        patience (`int`): consecutive alarming steps before `action` is taken.
        action (`str`): `warn`, `stop` (end the stage, keep the last good checkpoint) or `error`.
    """

    ngram: int = 4
    format_tokens: dict[str, str] = field(default_factory=lambda: {"boxed": "\\boxed"})
    thresholds: dict[str, float] = field(default_factory=dict)
    patience: int = 2
    action: str = "warn"
    # state
    streak: int = 0
    last_ok_step: int = 0
    message: str = ""
    _texts: list[str] = field(default_factory=list, repr=False)
    _ids: list[list[int]] = field(default_factory=list, repr=False)
    _reasons: list[str | None] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        if self.action not in ACTIONS:
            raise ConfigError(f"collapse.action must be one of {ACTIONS}, got {self.action!r}")
        known = {
            "top_ngram_share",
            "repeated_ngram_share",
            "duplicate_completion_share",
            "format_violation_rate",
        } | {
            f"format/{name}/{kind}"
            for name in self.format_tokens
            for kind in ("per_completion", "repeated_share")
        }
        unknown = sorted(set(self.thresholds) - known)
        if unknown:
            raise ConfigError(
                f"collapse.thresholds names unknown metric(s) {unknown}; known: {sorted(known)}"
            )

    @classmethod
    def from_settings(cls, settings: CollapseSettings) -> CollapseMonitor:
        return cls(
            ngram=settings.ngram,
            format_tokens=dict(settings.format_tokens),
            thresholds=dict(settings.thresholds),
            patience=settings.patience,
            action=settings.action,
        )

    def resume_at(self, step: int) -> None:
        """Start from the checkpoint of `step`. While an alarm streak may end the stage, no
        checkpoint is saved, so a resumed checkpoint's step is the last good one."""
        self.streak, self.last_ok_step = 0, step

    def observe(self, texts: list[str], token_ids, verdicts) -> None:
        """Record one batch of scored completions (called by the reward function)."""
        self._texts.extend(texts)
        if token_ids is not None and len(token_ids) == len(texts):
            self._ids.extend(list(map(list, token_ids)))
        self._reasons.extend(v.reason for v in verdicts)

    def take_batch(self) -> dict:
        """This process's completions since the last call (a picklable dict), then reset."""
        batch = {"texts": self._texts, "ids": self._ids, "reasons": self._reasons}
        self._texts, self._ids, self._reasons = [], [], []
        return batch

    def step_metrics(self, batches: list[dict]) -> dict[str, float]:
        """Metrics over the batches of all processes for one step."""
        texts = [t for b in batches for t in b["texts"]]
        ids = [i for b in batches for i in b["ids"]]
        reasons = [r for b in batches for r in b["reasons"]]
        stats = completion_stats(
            texts, ids if len(ids) == len(texts) else None, reasons, self.ngram, self.format_tokens
        )
        return {f"collapse/{k}": v for k, v in stats.items()}

    def judge(self, step: int, metrics: dict[str, float]) -> str | None:
        """Update the alarm streak with this step's metrics; the action to take, or None.

        Returns `None` (nothing to do), or `"warn"`, `"stop"`, `"error"`; `self.message` then
        explains which metric crossed which threshold.
        """
        crossed = {
            name: (metrics[f"collapse/{name}"], level)
            for name, level in self.thresholds.items()
            if f"collapse/{name}" in metrics and metrics[f"collapse/{name}"] > level
        }
        if not crossed:
            self.streak = 0
            self.last_ok_step = step
            return None
        self.streak += 1
        detail = ", ".join(f"{k}={v:.3g} > {lvl:g}" for k, (v, lvl) in sorted(crossed.items()))
        self.message = (
            f"collapse monitor at step {step}: {detail} "
            f"({self.streak} consecutive step(s), patience {self.patience})"
        )
        if self.streak < self.patience:
            log.warning("%s", self.message)
            return None
        return self.action
