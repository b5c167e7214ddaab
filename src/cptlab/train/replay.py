"""Which training rows a stage's steps draw, with replay of earlier stages' rows.

Replay is the classic continual-learning baseline: a share of each stage's prompts comes from
the training rows of the domains trained in earlier stages. `training.replay_share` sets the
share of the stage's prompts (round(share x steps x prompts_per_step) of them, over the whole
stage), drawn without replacement from the union of the earlier rows (cycled when the stage
needs more than there are). The trainer's sampler shuffles the stage's prompts, so each step's
share varies around the stage's; the stage's share is exact.

Rows are addressed by index into `current + replayed` (the reward looks each prompt's verifier
up by that index), so a replayed row is scored by its own domain's verifier.
"""

from __future__ import annotations

import math
import random


def replayed_prompts(share: float, total: int, available: int) -> int:
    """How many of a stage's `total` prompts are replayed (none without earlier rows)."""
    return round(share * total) if available else 0


def stage_row_indices(
    current: int, replayed: int, steps: int, prompts_per_step: int, share: float, seed: int
) -> list[int]:
    """Row indices of the prompts of one stage, in `current + replayed` rows' index space.

    current           rows of the stage's own domain (indices 0..current-1)
    replayed          rows of the earlier domains (indices current..current+replayed-1)
    steps, prompts_per_step  the stage's prompts are steps x prompts_per_step
    share             training.replay_share
    seed              the stage's seed (which earlier rows are drawn)

    Without replay every row appears equally often, enough times to cover every step (no epoch
    ends: resuming mid-stage never depends on a sampler's epoch state).
    """
    total = steps * prompts_per_step
    n_replay = replayed_prompts(share, total, replayed)
    if n_replay == 0:
        copies = max(1, math.ceil(total / current))
        return list(range(current)) * copies
    n_current = total - n_replay
    own = (list(range(current)) * math.ceil(n_current / current))[:n_current]
    order = list(range(current, current + replayed))
    random.Random(seed).shuffle(order)
    replay = (order * math.ceil(n_replay / replayed))[:n_replay]
    return own + replay
