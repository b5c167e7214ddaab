"""The config's `drift` section with its defaults (no heavy imports: the CLI reads them at
start-up). Why these values: see cptlab.drift.parameters."""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass

from cptlab.config import setting

SVD_METHODS = ("auto", "full", "randomized")
EMBEDDERS = ("minilm", "hashing")  # and "none": no embedder


@dataclass(frozen=True)
class DriftSettings:
    """The `drift` section: why forgetting happens (`cptlab drift-chain`, `dataset-distance`,
    `drift-figures`): parameter and response drift of every checkpoint, distances between data
    sets, collapse forensics.

    Parameters:
        k:
            Rank of the principal subspaces (principal angles, principal mask); capped at half
            the smaller side of each matrix.
        alpha:
            Share of entries in the principal mask.
        update_threshold:
            An entry counts as updated when |W - W0| > update_threshold * max(|W|, |W0|).
        svd_method:
            `auto` (exact SVD up to 512 on the smaller side, randomized top-k SVD above), full or
            randomized.
        embedder:
            Sentence embedder of responses and prompts: minilm (all-MiniLM-L6-v2, offline),
            hashing (lexical fallback) or none (no embedding cosine; data-set distances then use
            hashing).
        max_samples:
            Prompts per data set for the MMD, subsampled.
        tsne_points:
            Prompts per data set on the t-SNE map.
        ngram:
            The n of the collapse forensics' token n-grams (None: the training collapse monitor's
            `training.collapse.ngram`).
        completions_per_item:
            Completions per evaluation item read by the collapse forensics, the first ones
            (None: all, slow with avg@16 evaluations of long answers).
    """

    k: int = setting(64, minimum=1)
    alpha: float = setting(0.05, exclusiveMinimum=0, maximum=1)
    update_threshold: float = setting(1e-3, exclusiveMinimum=0)
    svd_method: str = setting("auto", enum=SVD_METHODS)
    embedder: str = setting("minilm", enum=(*EMBEDDERS, "none"))
    max_samples: int = setting(1000, minimum=2)
    tsne_points: int = setting(300, minimum=2)
    ngram: int | None = setting(None, minimum=1)
    completions_per_item: int | None = setting(1, minimum=1)

    @classmethod
    def from_config(cls, config: Mapping) -> DriftSettings:
        return cls(**(config.get("drift") or {}))


@dataclass(frozen=True)
class ChainSettings:
    """The drift section with the collapse monitor's n-gram size and format tokens."""

    drift: DriftSettings
    ngram: int
    format_tokens: dict[str, str]

    @classmethod
    def from_config(cls, config: Mapping) -> ChainSettings:
        from cptlab.train.spec import training_section

        drift = DriftSettings.from_config(config)
        collapse = training_section(config).collapse
        ngram = drift.ngram if drift.ngram is not None else int(collapse.ngram)
        return cls(drift, ngram, dict(collapse.format_tokens))

    def as_dict(self) -> dict:
        return {**asdict(self.drift), "ngram": self.ngram, "format_tokens": self.format_tokens}


@contextmanager
def thread_limits(threads: int):
    """Cap torch's threads and the BLAS / OpenMP pools (numpy, scikit-learn) at `threads`."""
    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(max(1, int(threads)))
    with threadpool_limits(limits=max(1, int(threads))):
        yield
