"""The weight sync of colocated vLLM rollouts on vLLM's CPU build.

TRL's colocated sync (`VLLMGeneration.sync_weights`) hands each parameter to the vLLM model's
`load_weights`. vLLM's CPU build repacks the linear layers' weights into its kernels' layout
after loading, and the repacked parameters lose the `weight_loader` that `load_weights` calls,
so the first sync fails. vLLM's in-place reload (the worker's `reload_weights`) is made for
this: it restores the checkpoint layout, loads the new weights and repacks them again. On other
platforms TRL's sync runs unchanged.

Tied embeddings are refused on the CPU build: the reload refreshes the embedding but not the
output layer's packed copy of it, so the engine would sample from a half-updated model (measured
with tests/test_vllm.py's perturbation: a mean log-probability gap to the training model of 0.20
after the sync when tied, 0.012 untied, 1.65 before the sync).
"""

from __future__ import annotations

from types import MethodType

from cptlab.errors import ConfigError


def on_vllm_cpu() -> bool:
    from vllm.platforms import current_platform

    return current_platform.is_cpu()


def sync_by_inplace_reload(generation) -> None:
    """Send the training model's weights to the colocated engine through vLLM's in-place
    reload, then drop the prefix cache computed with the old weights (as TRL's sync does)."""
    worker = generation.llm.llm_engine.model_executor.driver_worker
    worker.reload_weights(
        weights_iterator=generation._iter_named_params(), is_checkpoint_format=True
    )
    generation.llm.reset_prefix_cache()


def adapt_weight_sync(trainer) -> None:
    """Give a trainer's colocated vLLM engine the in-place reload where vLLM runs on the CPU."""
    generation = getattr(trainer, "vllm_generation", None)
    if generation is None or generation.mode != "colocate" or not on_vllm_cpu():
        return
    if trainer.model.config.tie_word_embeddings:
        raise ConfigError(
            "training.use_vllm with vllm_mode colocate on vLLM's CPU build needs a model with "
            "untied embeddings (base.model.tie_word_embeddings: false): vLLM's in-place weight "
            "reload does not refresh a tied output layer there"
        )
    generation.sync_weights = MethodType(sync_by_inplace_reload, generation)
