"""The config's `evaluation` section (EvalSettings) and how to decode (Sampling); no heavy
imports, so the Snakefile reads them too."""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace

from cptlab.config import setting
from cptlab.errors import ConfigError
from cptlab.train.spec import method_settings, training_section


@dataclass(frozen=True)
class Sampling:
    """How to decode. n > 1 or temperature > 0 samples; temperature 0 is greedy (n must be 1)."""

    n: int = 1
    temperature: float = 0.0
    top_p: float = 1.0
    max_new_tokens: int = 64

    def __post_init__(self) -> None:
        if self.temperature == 0 and self.n != 1:
            raise ValueError("greedy decoding (temperature 0) gives one completion: set n=1")


BACKENDS = ("hf", "vllm")


@dataclass(frozen=True)
class WithinStage:
    """`evaluation.within_stage`: the checkpoints inside each stage, evaluated like its end.

    Parameters:
        every:
            Evaluate the checkpoint after every `every` rollout batches of a stage, before its
            last (the stage's end is its own checkpoint). The stage exports the weights at each
            trainer save (`training.save_steps`), so `every` is a multiple of it.
        rows:
            Each benchmark's seeded sample of this many rows (each benchmark a stratum of its
            own, the same rows at every within-stage checkpoint, kept in their file order);
            None: every row the stage ends evaluate.
    """

    every: int = setting(minimum=1)
    rows: int | None = setting(None, minimum=1)

    def steps(self, stage_steps: int) -> list[int]:
        """The within-stage checkpoints (rollout batches done) of a stage of `stage_steps`."""
        return list(range(self.every, stage_steps, self.every))

    def sample(self, rows: list[dict], benchmark: str, seed: int) -> list[dict]:
        """The rows of `benchmark` a within-stage checkpoint scores: `self.rows` of them drawn
        with a generator seeded by (seed, benchmark), in their order; all when there are no
        more."""
        if self.rows is None or len(rows) <= self.rows:
            return rows
        picked = sorted(random.Random(f"{seed}/{benchmark}").sample(range(len(rows)), self.rows))
        return [rows[i] for i in picked]


@dataclass(frozen=True)
class EvalSettings:
    """The `evaluation` section: how every checkpoint is evaluated (`cptlab evaluate`).

    Parameters:
        n:
            The first n items of each benchmark (None: all).
        samples:
            Completions per item: 1 with temperature 0 is greedy; k > 1 is avg@k (the study:
            16).
        temperature:
            Sampling temperature; 0 is greedy (the study: 0.6).
        top_p:
            Nucleus sampling (the study: 0.95).
        max_new_tokens:
            Completion limit in tokens.
        batch_size:
            Sequences per HF generate call (prompts x samples).
        compact_generation:
            `hf` backend: decode with the training loop's compact loop
            (cptlab.train.compact_generation), a row leaving the batch at its end token: greedy
            completions equal to generate's, sampled ones other draws. Off where a seed's
            samples must be generate's.
        backend:
            `hf`: batched transformers generate; `vllm`: a vLLM engine.
        seed:
            Generation and bootstrap seed.
        vllm:
            vLLM engine options (gpu_memory_utilization, tensor_parallel_size, dtype,
            kv_cache_space_gib).
        chat_template_kwargs:
            Passed to apply_chat_template for every checkpoint, e.g. {enable_thinking: false}
            for Qwen3; null: each checkpoint with the template it was trained with (its method's
            training.chat_template_kwargs; the base: the training section's), as the study
            evaluates.
        max_prompt_length:
            Items whose templated prompt has more tokens are not scored, and are counted in
            EVAL.json (the study drops them: 2048); null: every item is scored.
        shards:
            {benchmark: n}: each checkpoint evaluates that benchmark's rows in n jobs
            (contiguous parts), merged into its EVAL.json, so that each job fits its time limit
            (`cptlab plan-hours`); the other benchmarks, and those with n 1, are evaluated
            together in the checkpoint's one job. An overlay's mapping replaces its parent's.
        within_stage:
            The checkpoints inside each stage, each evaluated in a job of its own like the stage
            ends (cached, invalidated by provenance; the same samples, decoding and metrics);
            null: the stage ends only. The stage exports its weights at each trainer save
            (training.save_steps) while within-stage evaluation is on.
        reuse_verdicts:
            Each checkpoint of a chain takes the verdict of the checkpoint its stage started
            from (the previous stage's end, or the base) where it gives the same completion to
            the same item, instead of scoring it again: greedy decoding repeats most
            completions from one checkpoint to the next, and a code verdict is a sandbox run.
            The same numbers wherever the verifiers are functions of their input (the embedded
            ones are; a program near its time limit is not); EVAL.json counts the reused
            verdicts (`verdicts_reused`), and each evaluation waits for that earlier one.
    """

    n: int | None = setting(None, minimum=1)
    samples: int = setting(1, minimum=1)
    temperature: float = setting(0.0, minimum=0)
    top_p: float = setting(1.0, exclusiveMinimum=0, maximum=1)
    max_new_tokens: int = setting(64, minimum=1)
    batch_size: int = setting(64, minimum=1)
    compact_generation: bool = False
    backend: str = setting("hf", enum=BACKENDS)
    seed: int = 0
    vllm: dict = field(default_factory=dict)
    chat_template_kwargs: dict | None = None
    max_prompt_length: int | None = setting(None, minimum=1)
    shards: dict = setting(factory=dict, additionalProperties={"type": "integer", "minimum": 1})
    within_stage: WithinStage | None = None
    reuse_verdicts: bool = False

    def __post_init__(self) -> None:
        # YAML writes 0 for 0.0: keep the record's types stable.
        for name in ("temperature", "top_p"):
            object.__setattr__(self, name, float(getattr(self, name)))
        if isinstance(self.within_stage, dict):
            object.__setattr__(self, "within_stage", WithinStage(**self.within_stage))
        if self.backend not in BACKENDS:
            raise ConfigError(f"evaluation.backend: {self.backend!r} not in {BACKENDS}")
        if self.compact_generation and self.backend != "hf":
            raise ConfigError(
                "evaluation.compact_generation decodes with the hf backend; "
                f"backend is {self.backend!r}"
            )
        if self.samples < 1:
            raise ConfigError(f"evaluation.samples: must be >= 1, got {self.samples}")
        if self.samples > 1 and self.temperature == 0:
            raise ConfigError(
                f"evaluation.samples={self.samples} needs temperature > 0 "
                "(temperature 0 is greedy: one completion per item)"
            )

    @classmethod
    def from_config(cls, config: dict) -> EvalSettings:
        return cls(**(config.get("evaluation") or {}))

    @classmethod
    def for_checkpoint(cls, config: dict, method: str | None = None) -> EvalSettings:
        """The settings that evaluate the base (method None) or a checkpoint of `method`'s
        chain: with the chat template that checkpoint was trained with, unless
        `evaluation.chat_template_kwargs` names one for every checkpoint. The study evaluates
        each run with its training template (one data config for both), so a method that
        trains with thinking on (SDPO_0^CoT at paper scale) is evaluated with it on."""
        settings = cls.from_config(config)
        if settings.chat_template_kwargs is not None:
            return settings
        if method is None:
            trained = training_section(config).chat_template_kwargs
        else:
            trained = method_settings(config, method)[2].chat_template_kwargs
        return replace(settings, chat_template_kwargs=dict(trained))

    def earlier_checkpoint(
        self, method: str | None, seed: int | str | None, stage: int | str
    ) -> tuple[str, int | str, int] | None:
        """The checkpoint whose verdicts stage `stage` of chain (method, seed), its end and
        the checkpoints inside it, reuses (`reuse_verdicts`): (method, seed, stage - 1), stage 0
        being the base (cptlab.layout); None for the base, or with `reuse_verdicts` off."""
        if not self.reuse_verdicts or method is None or int(stage) == 0:
            return None
        return method, seed, int(stage) - 1

    def within_stage_steps(self, stage_steps: int) -> list[int]:
        """The within-stage checkpoints of a stage of `stage_steps` rollout batches (none when
        within-stage evaluation is off)."""
        return [] if self.within_stage is None else self.within_stage.steps(stage_steps)

    def shard_count(self, benchmark: str) -> int:
        """The jobs per checkpoint that evaluate `benchmark` (1: the checkpoint's shared job)."""
        return int(self.shards.get(benchmark, 1))

    def split(self, benchmarks: list[str]) -> tuple[list[str], list[str]]:
        """(the benchmarks evaluated together in a checkpoint's one job, those in shards)."""
        sharded = [b for b in benchmarks if self.shard_count(b) > 1]
        return [b for b in benchmarks if b not in sharded], sharded

    @property
    def sampling(self) -> Sampling:
        return Sampling(
            n=self.samples,
            temperature=self.temperature,
            top_p=self.top_p,
            max_new_tokens=self.max_new_tokens,
        )
