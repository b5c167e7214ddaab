"""KL to the stage start, measured cheaply on a fixed probe.

Before training, the start model samples one completion for each of a few probe prompts and
the log-probabilities of the sampled tokens are stored. At each measurement the current model
rescores those same tokens (one small no-grad forward, no second model in memory), and

    KL(start || current) per token ~ E_{x ~ start}[(r - 1) - log r],  r = p_current / p_start

(Schulman's k3 estimator: unbiased, never negative). `kl_to_start` is the mean over probe tokens
and `kl_to_start_seq` the mean over probe sequences of its sum.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


def _token_logps(
    model, input_ids, attention_mask, n_completion: int, rows: int | None = None
) -> torch.Tensor:
    """The completion tokens' log-probabilities, in forwards of at most `rows` rows."""
    pieces = []
    for part in torch.split(torch.arange(input_ids.size(0)), rows or input_ids.size(0)):
        ids, mask = input_ids[part], attention_mask[part]
        logits = model(input_ids=ids, attention_mask=mask, use_cache=False).logits
        logits = logits[:, -n_completion - 1 : -1, :].float()
        targets = ids[:, -n_completion:]
        pieces.append(torch.log_softmax(logits, dim=-1).gather(-1, targets.unsqueeze(-1)))
    return torch.cat(pieces).squeeze(-1)


@dataclass
class KLProbe:
    """Probe sequences sampled from the start model and the start model's token log-probs.

    Parameters:
        input_ids (`torch.Tensor`): prompt (left-padded) + completion (right-padded) ids.
        attention_mask (`torch.Tensor`): 1 on real tokens.
        completion_mask (`torch.Tensor`): 1 on completion tokens, over the last columns.
        start_logps (`torch.Tensor`): the start model's log-prob of each completion token.
        every (`int`): measure every N rollout batches.
        rows_per_forward (`int`, *optional*): probe rows per forward
            (`training.log_prob_micro_batch_size_per_device`; None: all at once).
    """

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    completion_mask: torch.Tensor
    start_logps: torch.Tensor
    every: int = 1
    rows_per_forward: int | None = None

    @classmethod
    @torch.no_grad()
    def sample(
        cls,
        model,
        tokenizer,
        prompts: list[list[dict]],
        max_tokens: int,
        temperature: float,
        seed: int,
        every: int = 1,
        chat_template_kwargs: dict | None = None,
        rows_per_forward: int | None = None,
    ) -> KLProbe:
        """Sample the probe from `model` (the stage start) without touching the global RNG."""
        texts = [
            tokenizer.apply_chat_template(
                p, tokenize=False, add_generation_prompt=True, **(chat_template_kwargs or {})
            )
            for p in prompts
        ]
        enc = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
        device = next(model.parameters()).device
        enc = {k: v.to(device) for k, v in enc.items()}
        was_training = model.training
        model.eval()
        devices = [device] if device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices):
            torch.manual_seed(seed)
            out = model.generate(
                **enc,
                do_sample=True,
                temperature=temperature,
                top_p=1.0,
                top_k=0,
                max_new_tokens=max_tokens,
                pad_token_id=tokenizer.pad_token_id,
                eos_token_id=tokenizer.eos_token_id,
            )
        prompt_len = enc["input_ids"].shape[1]
        completion = out[:, prompt_len:]
        # Keep tokens up to and including the first EOS.
        is_eos = completion == tokenizer.eos_token_id
        after_eos = (is_eos.cumsum(dim=1) - is_eos.long()) > 0
        completion_mask = (~after_eos).long()
        input_ids = torch.cat([enc["input_ids"], completion], dim=1)
        attention_mask = torch.cat([enc["attention_mask"], completion_mask], dim=1)
        start = _token_logps(
            model, input_ids, attention_mask, completion.shape[1], rows_per_forward
        )
        model.train(was_training)
        return cls(input_ids, attention_mask, completion_mask, start, every, rows_per_forward)

    @torch.no_grad()
    def measure(self, model) -> dict[str, float]:
        """KL(start || model) on the probe (see the module docstring)."""
        device = next(model.parameters()).device
        n = self.completion_mask.shape[1]
        was_training = model.training
        model.eval()  # no dropout in the measurement
        current = _token_logps(
            model,
            self.input_ids.to(device),
            self.attention_mask.to(device),
            n,
            self.rows_per_forward,
        ).cpu()
        model.train(was_training)
        mask = self.completion_mask.float()
        log_r = (current - self.start_logps.cpu()) * mask
        k3 = (torch.exp(log_r) - 1.0 - log_r) * mask
        tokens = mask.sum().clamp(min=1.0)
        return {
            "kl_to_start": float(k3.sum() / tokens),
            "kl_to_start_seq": float(k3.sum(dim=1).mean()),
        }
