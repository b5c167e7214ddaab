"""The embedded base's measurements and their bounds: a base that leaves room to learn, whose
SDPO teacher can read a demonstration, and that can forget. They are written into its manifest.
"""

from __future__ import annotations

import logging

from cptlab.base_model.settings import MeasureSettings
from cptlab.evaluation.generation import generate
from cptlab.evaluation.scoring import mean_pass_at_k, rewards, score_completions
from cptlab.evaluation.settings import Sampling
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
