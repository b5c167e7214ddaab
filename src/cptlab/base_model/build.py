"""`cptlab build-base`: the embedded base model, built offline in minutes.

1. a byte-level BPE tokenizer trained on the warm-up text;
2. a small Qwen2 model initialised from the config;
3. supervised warm-up on the six domains' warm-up splits, a share of them in SDPO's reprompt
   form (prompt + "Correct solution: ..." -> answer) so the model can use a demonstration;
4. measurements that show the base leaves room to learn and to forget (BOUNDS), written into
   the manifest, which is written last.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import random
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import PreTrainedTokenizerFast

from cptlab.artifacts import atomic_write_text, write_manifest
from cptlab.base_model.architecture import build_model, count_parameters
from cptlab.base_model.settings import BaseSettings, MeasureSettings
from cptlab.base_model.tokenizer import train_tokenizer
from cptlab.base_model.warmup import encode_example, train_warmup
from cptlab.chat import render
from cptlab.checkpoints import load_tokenizer
from cptlab.domains.registry import get_benchmark
from cptlab.errors import InputError
from cptlab.evaluation.generation import generate
from cptlab.evaluation.scoring import mean_pass_at_k, rewards, score_completions
from cptlab.evaluation.settings import Sampling
from cptlab.plan import base_measure_benchmarks
from cptlab.rows import read_jsonl
from cptlab.teacher_prompt import strip_reasoning, teacher_messages

log = logging.getLogger(__name__)

# (comparison, bound) of each measurement: a base that leaves room to learn (accuracy in range,
# pass@k well above pass@1), whose SDPO teacher can read a demonstration, and that can forget (OOD).
BOUNDS = {
    "greedy_accuracy": ("in", (0.10, 0.70)),  # each training domain's id benchmark
    "pass_ratio": (">=", 1.5),  # pass@k / pass@1, each training domain
    "teacher_advantage": (">=", 0.20),  # each training domain
    # with the demonstration stripped of its reasoning, as SDPO_0's are (domains that reason)
    "stripped_teacher_advantage": (">=", 0.20),
    "ood_greedy_accuracy": (">", 0.10),  # logic and knowledge
}


def _bound(label: str, measurement: str, value: float) -> dict[str, tuple[float, bool]]:
    """{the check's name: (value, whether it holds)} of `value` against BOUNDS[measurement]."""
    comparison, bound = BOUNDS[measurement]
    if comparison == "in":
        low, high = bound
        return {f"{label} in [{low:.2f}, {high:.2f}]": (value, low <= value <= high)}
    holds = value >= bound if comparison == ">=" else value > bound
    return {f"{label} {comparison} {bound:.2f}": (value, holds)}


def warmup_examples(
    tokenizer,
    rows: list[dict],
    reprompt_share: float,
    seed: int,
    counterfactual_share: float = 0.0,
    off_format_share: float = 0.0,
    domain_reprompt_share: dict[str, float] | None = None,
    passes: int = 1,
    stripped_demonstration_share: float = 0.0,
    reasoning: dict[str, str] | None = None,
    off_format_cued: bool = False,
    stripped_gold_only: bool = False,
):
    """Encoded (ids, labels) for `passes` passes over the warm-up rows; in each, a
    `reprompt_share` of them in teacher form (`domain_reprompt_share[domain]` for the domains it
    names). Pass p draws every row's form anew with seed + p, so every item is met both
    answered plainly and as a teacher prompt.

    The demonstration is the row's own gold solution, except in a `counterfactual_share` of the
    teacher-form rows: there it is the solution of another warm-up row of the same domain and
    form, and the target is that demonstration. Where the model can compute the answer from the
    question (most tool and code items), gold demonstrations give no reason to read them;
    counterfactual ones make reading the demonstration the only way to lower the loss, which is
    the skill SDPO's teacher needs (an in-context copy, as in flipped-label ICL studies).

    In an `off_format_share` of the rows that have one, the target is the item's answer in a
    convention the prompt did not ask for (`metadata.off_format`: "The answer is 15." where
    the prompt asks for \\boxed{}), which its verifier scores 0. A base that knows answers but
    does not always give them in the requested form is where RL post-training starts from;
    adopting the requested convention is something a stage can learn in tens of steps, while
    recalling more facts is not (docs/embedded-testbed.md). With `off_format_cued`, only items
    whose prompt carries their domain's cue (`metadata.off_format_cue`: a phrasing, an
    attribute, a function name) answer off-convention, so the base learns a rule it applies
    the same way on every build, rather than a coin flip whose greedy side the build decides.

    In a `stripped_demonstration_share` of the teacher-form rows, the demonstration loses its
    reasoning (`reasoning[domain]`, the pattern SDPO_0 deletes from its demonstrations) and the
    target keeps it: the teacher learns to take the answer from a demonstration without its
    reasoning and to answer in the form the prompt asks for. Qwen3, the study's base, knows
    answers without their thinking (its thinking-off mode); without these rows the embedded
    base's teacher cannot read such a demonstration (docs/embedded-testbed.md). With
    `stripped_gold_only`, only gold demonstrations are stripped: a stripped counterfactual asks
    the teacher to write another item's reasoning (its entity, its attribute) from the answer
    alone, which nothing in its context determines, so it learns to guess them."""
    by_form: dict[tuple, list[str]] = {}
    for row in rows:
        by_form.setdefault(_form_of(row), []).append(row["metadata"]["solution"])
    overrides = domain_reprompt_share or {}
    patterns = reasoning or {}
    shares = [overrides.get(row.get("domain"), reprompt_share) for row in rows]
    encoded: dict[tuple, tuple[list[int], list[int]]] = {}  # most pairs recur across passes
    examples = []
    for p in range(passes):
        rng = random.Random(seed + p)
        for i, (row, share) in enumerate(zip(rows, shares, strict=True)):
            solution = row["metadata"]["solution"]
            # The draw comes first, so that cueing changes which rows swap, not the draws.
            if (
                row["metadata"].get("off_format")
                and rng.random() < off_format_share
                and (not off_format_cued or row["metadata"].get("off_format_cue"))
            ):
                solution = row["metadata"]["off_format"]
            teacher = rng.random() < share
            counterfactual = teacher and rng.random() < counterfactual_share
            if counterfactual:
                solution = rng.choice(by_form[_form_of(row)])
            demonstration = solution
            pattern = patterns.get(row.get("domain"))
            # Drawn only when the share is set, so that builds without it keep their weights.
            if (
                teacher
                and stripped_demonstration_share
                and pattern
                and not (counterfactual and stripped_gold_only)
                and rng.random() < stripped_demonstration_share
            ):
                demonstration = strip_reasoning(solution, pattern)
            key = (i, teacher, demonstration, solution)
            if key not in encoded:
                prompt = row["prompt"]
                if teacher:
                    prompt = teacher_messages(prompt, demonstration=demonstration)
                encoded[key] = encode_example(tokenizer, prompt, solution)
            examples.append(encoded[key])
    return examples


def weighted(rows: list[dict], weight: float) -> list[dict]:
    """A domain's warm-up rows at `weight`: the first round(weight * n) rows, cycling through
    them again when weight > 1 (the rows are already in random order)."""
    count = round(weight * len(rows))
    return [rows[i % len(rows)] for i in range(count)]


def _form_of(row: dict) -> tuple:
    return row.get("domain"), row["metadata"].get("form")


def measure(
    model,
    tokenizer,
    rows_by_benchmark: dict[str, list[dict]],
    spec: MeasureSettings,
    seed: int,
    reasoning: dict[str, str] | None = None,
):
    """Greedy accuracy of every benchmark; for training-domain id sets also sampled pass@1,
    pass@k and greedy accuracy with a correct demonstration in the teacher prompt, and, for
    domains in `reasoning`, with that demonstration stripped of its reasoning as SDPO_0's are."""
    results = {}
    greedy = Sampling(n=1, temperature=0.0, max_new_tokens=spec.max_new_tokens)
    sampled = Sampling(
        n=spec.k,
        temperature=spec.temperature,
        top_p=1.0,
        max_new_tokens=spec.max_new_tokens,
    )

    def accuracy(prompts: list, rows: list[dict]) -> float:
        completions = generate(model, tokenizer, prompts, greedy, seed)
        return float(rewards(score_completions(rows, completions)).mean())

    for name, rows in rows_by_benchmark.items():
        out = {"greedy_accuracy": accuracy([r["prompt"] for r in rows], rows)}
        if name.endswith("_id"):
            samples = generate(model, tokenizer, [r["prompt"] for r in rows], sampled, seed)
            matrix = rewards(score_completions(rows, samples))
            out["pass1"] = mean_pass_at_k(matrix, 1)
            out[f"pass{spec.k}"] = mean_pass_at_k(matrix, spec.k)
            solutions = [r["metadata"]["solution"] for r in rows]
            demonstrations = {"teacher": solutions}
            pattern = (reasoning or {}).get(rows[0]["domain"]) if rows else None
            if pattern:
                demonstrations["stripped_teacher"] = [
                    strip_reasoning(s, pattern) for s in solutions
                ]
            for kind, demos in demonstrations.items():
                prompts = [
                    teacher_messages(r["prompt"], d) for r, d in zip(rows, demos, strict=True)
                ]
                out[f"{kind}_accuracy"] = accuracy(prompts, rows)
                out[f"{kind}_advantage"] = out[f"{kind}_accuracy"] - out["greedy_accuracy"]
        out["n"] = len(rows)
        results[name] = out
        log.info("measured %s: %s", name, out)
    return results


def check_bounds(results: dict, train_domains: list[str], ood_only: list[str], k: int) -> dict:
    """Every bound with its measured value and whether it holds."""
    checks = {}
    for domain in train_domains:
        r = results[f"{domain}_id"]
        ratio = r[f"pass{k}"] / r["pass1"] if r["pass1"] > 0 else float("inf")
        checks |= _bound(f"{domain}_id.greedy_accuracy", "greedy_accuracy", r["greedy_accuracy"])
        checks |= _bound(f"{domain}_id.pass{k}/pass1", "pass_ratio", ratio)
        # The stripped teacher (what SDPO_0's teacher reads) only where answers reason.
        for key in ("teacher_advantage", "stripped_teacher_advantage"):
            if key in r:
                checks |= _bound(f"{domain}_id.{key}", key, r[key])
    for domain in ood_only:
        value = results[f"{domain}_ood"]["greedy_accuracy"]
        checks |= _bound(f"{domain}_ood.greedy_accuracy", "ood_greedy_accuracy", value)
    return {name: {"value": round(float(v), 4), "ok": bool(ok)} for name, (v, ok) in checks.items()}


def weights_digest(model) -> str:
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


@dataclass(frozen=True)
class WarmupInputs:
    """What the warm-up trains on: the settings, the tokenizer trained on the warm-up texts,
    the (input ids, labels) examples, and the reasoning patterns SDPO_0's teacher strips."""

    spec: BaseSettings
    tokenizer: PreTrainedTokenizerFast
    examples: list[tuple[list[int], list[int]]]
    reasoning: dict[str, str]
    row_count: int


def warmup_inputs(config: dict, data_dir: str | Path) -> WarmupInputs:
    """The warm-up's tokenizer and examples from the prepared pretraining sets in `data_dir`."""
    spec = BaseSettings.from_config(config)
    seed = spec.seed
    data_dir = Path(data_dir)
    domains = config["data"]["domains"]
    train_domains = [d for d, spec in domains.items() if spec.get("train")]
    warmup = spec.warmup
    # The reasoning SDPO_0 deletes from a domain's demonstrations (Benchmark.reasoning).
    reasoning = {
        d: pattern
        for d in train_domains
        if (pattern := get_benchmark(domains[d]["train"]).reasoning)
    }
    warmup_rows = [
        row
        for d in domains
        for row in weighted(
            read_jsonl(data_dir / f"{d}_pretrain.jsonl"), warmup.domain_weights.get(d, 1.0)
        )
    ]
    texts = [render(r["prompt"]) + r["metadata"]["solution"] for r in warmup_rows]
    tokenizer = train_tokenizer(
        texts,
        spec.tokenizer.vocab_size,
        spec.tokenizer.split_words,
        spec.tokenizer.max_digits_per_token,
        spec.tokenizer.isolate,
    )
    sft = spec.sft
    examples = warmup_examples(
        tokenizer,
        warmup_rows,
        warmup.reprompt_share,
        seed,
        warmup.counterfactual_share,
        warmup.off_format_share,
        warmup.domain_reprompt_share,
        passes=math.ceil(sft.steps * sft.batch_size / max(len(warmup_rows), 1)),
        stripped_demonstration_share=warmup.stripped_demonstration_share,
        reasoning=reasoning,
        off_format_cued=warmup.off_format_cued,
        stripped_gold_only=warmup.stripped_gold_only,
    )
    too_long = max(len(ids) for ids, _ in examples)
    if too_long > spec.model.max_positions:
        raise InputError(
            f"base.model.max_positions={spec.model.max_positions} is shorter "
            f"than the longest warm-up example ({too_long} tokens)"
        )
    return WarmupInputs(spec, tokenizer, examples, reasoning, len(warmup_rows))


def build_base(
    config: dict,
    data_dir: str | Path,
    out_dir: str | Path,
    threads: int = 1,
) -> dict:
    """Build, measure and save the embedded base model into `out_dir`; returns the manifest."""
    started = time.perf_counter()
    torch.set_num_threads(threads)
    data_dir, out_dir = Path(data_dir), Path(out_dir)
    inputs = warmup_inputs(config, data_dir)
    spec, tokenizer, examples = inputs.spec, inputs.tokenizer, inputs.examples
    seed, sft = spec.seed, spec.sft
    domains = config["data"]["domains"]
    train_domains = [d for d, spec in domains.items() if spec.get("train")]
    eval_only = [d for d, spec in domains.items() if spec.get("ood") and not spec.get("train")]

    model = build_model(spec.model, tokenizer, seed)
    log.info(
        "base model: %d parameters, %d warm-up examples", count_parameters(model), len(examples)
    )
    t0 = time.perf_counter()
    curve = train_warmup(
        model,
        examples,
        sft,
        tokenizer.pad_token_id,
        seed,
        log=lambda r: log.info("warm-up %s", r),
    )
    sft_seconds = time.perf_counter() - t0

    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    # Measure the reloaded copy: what later stages will load is what we vouch for.
    from transformers import Qwen2ForCausalLM

    model = Qwen2ForCausalLM.from_pretrained(out_dir, local_files_only=True)
    tokenizer = load_tokenizer(str(out_dir))

    n = spec.measure.n
    eval_sets = {
        name: read_jsonl(data_dir / f"{name}.jsonl")[:n] for name in base_measure_benchmarks(config)
    }
    t0 = time.perf_counter()
    results = measure(model, tokenizer, eval_sets, spec.measure, seed, inputs.reasoning)
    measure_seconds = time.perf_counter() - t0
    bounds = check_bounds(results, train_domains, eval_only, spec.measure.k)
    failed = [name for name, b in bounds.items() if not b["ok"]]
    if failed:
        log.warning("base model misses bound(s): %s", failed)

    atomic_write_text(out_dir / "warmup_curve.jsonl", [json.dumps(r) + "\n" for r in curve])
    manifest = {
        "kind": "base_model",
        "seed": seed,
        "parameters": count_parameters(model),
        "vocab_size": len(tokenizer),
        "warmup_rows": inputs.row_count,
        "warmup_examples": len(examples),
        "final_warmup_loss": curve[-1]["loss"],
        "measurements": results,
        "bounds": bounds,
        "bounds_ok": not failed,
        "seconds": {
            "warmup": round(sft_seconds, 1),
            "measure": round(measure_seconds, 1),
            "total": round(time.perf_counter() - started, 1),
        },
        "threads": threads,
        "weights_sha256": weights_digest(model),
        "config": config["base"],
    }
    write_manifest(out_dir, manifest)
    return manifest
