"""vLLM's engine, stood in for under TRL's own colocated rollouts, where vLLM is not installed
(`make test`'s environment; `make test-vllm` and the rehearsal run the real engine).

`install(monkeypatch)` replaces only what TRL's `trl.generation.vllm_generation` imports from
vLLM, `LLM` and `SamplingParams`, and says vLLM is available. TRL's `VLLMGeneration` then runs as
it is: its start (`_init_vllm`, with the engine options and `logprobs_mode="processed_logprobs"`
TRL passes), its weight sync (`sync_weights`: every parameter through `_iter_named_params`, handed
to the engine model's `load_weights`, then the prefix cache reset), its requests (`generate`:
one `SamplingParams` per call, n=1 per prompt in colocate mode) and its reading of the results
(`extract_logprobs`). cptlab's weight sync is the GPU build's (TRL's), not the CPU build's.

The engine reads the checkpoint it is given (`model.name_or_path`) into its own copy of the
model, as vLLM does, so it samples from the trained weights only after a sync. It samples each
request token by token with its own seeded generator, stops at the model's end tokens or at
`max_tokens`, and reports each sampled token's log-probability after temperature scaling
(processed log-probabilities), one entry per token for `logprobs=0` and none for `None`.
Sampling options it does not implement raise `NotImplementedError`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

import torch
from transformers import AutoModelForCausalLM


@dataclass
class SamplingParams:
    """The fields of vLLM's `SamplingParams` that TRL's colocated `generate` sets."""

    n: int = 1
    repetition_penalty: float = 1.0
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    max_tokens: int = 16
    logprobs: int | None = None
    seed: int | None = None

    def __post_init__(self) -> None:
        unsupported = {
            "n": self.n != 1,
            "repetition_penalty": self.repetition_penalty != 1.0,
            "temperature": self.temperature <= 0,
            "top_p": self.top_p != 1.0,
            "top_k": self.top_k not in (0, -1),
            "min_p": self.min_p != 0.0,
            "logprobs": self.logprobs not in (None, 0),
        }
        named = [key for key, bad in unsupported.items() if bad]
        if named:
            raise NotImplementedError(f"the vLLM stand-in does not implement {named}")


@dataclass
class Logprob:
    logprob: float
    rank: int


@dataclass
class CompletionOutput:
    token_ids: list[int]
    logprobs: list[dict[int, Logprob]] | None


@dataclass
class RequestOutput:
    prompt_token_ids: list[int]
    outputs: list[CompletionOutput] = field(default_factory=list)


class LLM:
    """vLLM's `LLM`, as TRL's colocated `VLLMGeneration` uses it."""

    def __init__(
        self,
        model: str,
        seed: int = 0,
        logprobs_mode: str = "raw_logprobs",
        max_model_len: int | None = None,
        **engine_options: object,
    ) -> None:
        if logprobs_mode != "processed_logprobs":
            raise NotImplementedError(f"the vLLM stand-in has no logprobs_mode {logprobs_mode!r}")
        self.model = AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32).eval()
        end = self.model.generation_config.eos_token_id
        self.end_tokens = set(end if isinstance(end, list) else [end])
        self.generator = torch.Generator().manual_seed(seed)
        self.loaded: list[str] = []  # the weights each sync handed over, by name
        self.prefix_cache_resets = 0
        self.requests = 0
        limit = max_model_len or self.model.config.max_position_embeddings
        runner = SimpleNamespace(model=SimpleNamespace(load_weights=self._load_weights))
        self.llm_engine = SimpleNamespace(
            model_executor=SimpleNamespace(driver_worker=SimpleNamespace(model_runner=runner)),
            model_config=SimpleNamespace(max_model_len=limit),
        )

    def _load_weights(self, weights) -> None:
        parameters = dict(self.model.named_parameters())
        with torch.no_grad():
            for name, tensor in weights:
                parameters[name].copy_(tensor)  # an unknown name fails, as in vLLM
                self.loaded.append(name)

    def reset_prefix_cache(self) -> bool:
        self.prefix_cache_resets += 1
        return True

    def sleep(self, level: int = 1) -> None:
        pass

    def wake_up(self, tags: list[str] | None = None) -> None:
        pass

    @torch.no_grad()
    def generate(self, prompts: list[dict], sampling_params: SamplingParams, use_tqdm=False):
        outputs = []
        for request in prompts:
            self.requests += 1
            prompt = list(request["prompt_token_ids"])
            tokens: list[int] = []
            logprobs: list[dict[int, Logprob]] = []
            for _ in range(sampling_params.max_tokens):
                logits = self.model(torch.tensor([prompt + tokens])).logits[0, -1].float()
                logp = torch.log_softmax(logits / sampling_params.temperature, dim=-1)
                token = int(torch.multinomial(logp.exp(), 1, generator=self.generator))
                rank = int((logp > logp[token]).sum()) + 1
                tokens.append(token)
                logprobs.append({token: Logprob(float(logp[token]), rank)})
                if token in self.end_tokens:
                    break
            kept = None if sampling_params.logprobs is None else logprobs
            outputs.append(RequestOutput(prompt, [CompletionOutput(tokens, kept)]))
        return outputs


def install(monkeypatch) -> None:
    """Stand the engine in for vLLM in TRL's rollouts for the rest of a test. TRL's engine start
    also writes the launcher's variables (RANK, WORLD_SIZE, MASTER_PORT, ...) into the
    environment, which the caller restores."""
    from trl.generation import vllm_generation

    from cptlab.train import vllm_sync

    monkeypatch.setattr(vllm_generation, "is_vllm_available", lambda *a, **k: True)
    monkeypatch.setattr(vllm_generation, "LLM", LLM, raising=False)
    monkeypatch.setattr(vllm_generation, "SamplingParams", SamplingParams, raising=False)
    monkeypatch.setattr(vllm_sync, "on_vllm_cpu", lambda: False)
