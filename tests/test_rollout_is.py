"""Rollout importance weights (cptlab.train.rollout_is) on constructed cases, in TRL's modes and
with the study's setting (verl `rollout_is: token`, threshold 2.0: clamped above, no lower bound,
detached)."""

from __future__ import annotations

import math

import pytest
import torch

from cptlab.train.rollout_is import rollout_is_weights, sampling_logps

TRAIN = torch.log(torch.tensor([[0.5, 0.9, 0.2, 0.3]]))
ROLLOUT = torch.log(torch.tensor([[0.5, 0.3, 0.8, 0.3]]))
MASK = torch.tensor([[1, 1, 1, 0]])


def test_the_studys_token_weights_are_clamped_at_two_and_detached():
    train = TRAIN.clone().requires_grad_(True)
    w = rollout_is_weights(train, ROLLOUT, MASK, "token_truncate", None, 2.0)
    torch.testing.assert_close(w, torch.tensor([[1.0, 2.0, 0.25, 1.0]]))  # 0.9/0.3 = 3 -> 2
    assert not w.requires_grad


def test_masked_and_sequence_modes():
    w = rollout_is_weights(TRAIN, ROLLOUT, MASK, "token_mask", 0.5, 2.0)
    torch.testing.assert_close(w, torch.tensor([[1.0, 0.0, 0.0, 1.0]]))
    seq = rollout_is_weights(TRAIN, ROLLOUT, MASK, "sequence_truncate", None, 3.0)
    assert seq.shape == (1, 1)
    torch.testing.assert_close(seq, torch.tensor([[0.75]]))  # 1 * 3 * 0.25
    assert rollout_is_weights(TRAIN, ROLLOUT, MASK, "sequence_mask", 0.8, 3.0).item() == 0.0
    with pytest.raises(ValueError, match="vllm_importance_sampling_mode"):
        rollout_is_weights(TRAIN, ROLLOUT, MASK, "token", None, 2.0)


def test_missing_rollout_logprobs_mean_no_correction():
    rollout = torch.tensor([[math.nan, 0.0, 0.0, 0.0]])
    w = rollout_is_weights(torch.zeros(1, 4), rollout, torch.ones(1, 4), "token_truncate", None, 2)
    assert w.tolist() == [[1.0, 1.0, 1.0, 1.0]]
    assert math.isnan(sampling_logps([[[None], [-0.5, -2.0]]])[0][0])
    assert sampling_logps([[[None], [-0.5, -2.0]]])[0][1] == -0.5  # the sampled token's entry
