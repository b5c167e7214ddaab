"""Supervised warm-up of the embedded base model: a plain PyTorch loop, loss on the
assistant's tokens only."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerFast

from cptlab.chat import IM_END, render

if TYPE_CHECKING:  # annotations only: the weights' code does not read the config
    from cptlab.base_model.settings import WarmupTrainingSettings


def encode_example(
    tokenizer: PreTrainedTokenizerFast, prompt: list[dict], completion: str
) -> tuple[list[int], list[int]]:
    """(input ids, labels): the prompt is masked with -100, the completion and <|im_end|> kept."""
    prompt_ids = tokenizer.encode(render(prompt), add_special_tokens=False)
    completion_ids = tokenizer.encode(completion + IM_END, add_special_tokens=False)
    return prompt_ids + completion_ids, [-100] * len(prompt_ids) + completion_ids


def collate_examples(
    examples: list[tuple[list[int], list[int]]], pad_id: int
) -> dict[str, torch.Tensor]:
    """One batch of (input ids, labels) examples, right-padded to the longest: input_ids
    (padded with `pad_id`), labels (padded with -100) and the attention mask."""
    width = max(len(ids) for ids, _ in examples)
    input_ids = torch.full((len(examples), width), pad_id, dtype=torch.long)
    labels = torch.full((len(examples), width), -100, dtype=torch.long)
    attention = torch.zeros((len(examples), width), dtype=torch.long)
    for i, (ids, labs) in enumerate(examples):
        input_ids[i, : len(ids)] = torch.tensor(ids)
        labels[i, : len(labs)] = torch.tensor(labs)
        attention[i, : len(ids)] = 1
    return {"input_ids": input_ids, "labels": labels, "attention_mask": attention}


def completion_loss(model: PreTrainedModel, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Mean next-token cross-entropy over the labelled (completion) tokens, as the model's own
    `labels` loss computes it, but with the output layer applied only where a label is kept:
    prompts are most of the tokens, and the vocabulary projection is a quarter of the model."""
    hidden = model.model(
        input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]
    ).last_hidden_state
    targets = batch["labels"][:, 1:]
    kept = targets != -100
    logits = model.lm_head(hidden[:, :-1][kept])
    return torch.nn.functional.cross_entropy(logits.float(), targets[kept])


def length_bucketed_batches(
    lengths: list[int], batch_size: int, generator: torch.Generator, bucket: int = 16
):
    """Endless stream of index batches: shuffled, then sorted by length within windows of
    `bucket` batches so each batch holds similar lengths (little padding), then the batches
    shuffled again. Every example is used once per pass."""
    while True:
        order = torch.randperm(len(lengths), generator=generator).tolist()
        batches = []
        window = batch_size * bucket
        for start in range(0, len(order), window):
            chunk = sorted(order[start : start + window], key=lengths.__getitem__)
            batches += [chunk[i : i + batch_size] for i in range(0, len(chunk), batch_size)]
        for i in torch.randperm(len(batches), generator=generator).tolist():
            yield batches[i]


def train_warmup(
    model: PreTrainedModel,
    examples: list[tuple[list[int], list[int]]],
    config: WarmupTrainingSettings,
    pad_id: int,
    seed: int,
    log: Callable[[dict], None] = lambda record: None,
    log_every: int = 100,
) -> list[dict]:
    """Train in place; returns the logged loss curve. Deterministic for a seed on CPU."""
    generator = torch.Generator().manual_seed(seed)
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
    optimizer = torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": config.weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ],
        lr=config.lr,
        betas=(0.9, 0.95),
    )

    def lr_at(step: int) -> float:
        if step < config.warmup_steps:
            return config.lr * (step + 1) / config.warmup_steps
        progress = (step - config.warmup_steps) / max(1, config.steps - config.warmup_steps)
        return config.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))

    model.train()
    batches = length_bucketed_batches(
        [len(ids) for ids, _ in examples], config.batch_size, generator
    )
    curve, running, start = [], 0.0, time.perf_counter()
    for step in range(config.steps):
        batch = collate_examples([examples[i] for i in next(batches)], pad_id)
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step)
        loss = completion_loss(model, batch)
        if not torch.isfinite(loss):
            raise FloatingPointError(f"SFT warm-up: non-finite loss {loss.item()} at step {step}")
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        running += loss.item()
        if (step + 1) % log_every == 0 or step + 1 == config.steps:
            n = (step % log_every) + 1
            record = {
                "step": step + 1,
                "loss": running / n,
                "lr": lr_at(step),
                "seconds": time.perf_counter() - start,
            }
            curve.append(record)
            log(record)
            running = 0.0
    model.eval()
    return curve
