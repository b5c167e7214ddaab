"""Evaluating a checkpoint on a benchmark (`cptlab evaluate`).

settings.py      the config's `evaluation` section (EvalSettings) and how to decode (Sampling)
generation.py    batched HF `generate` with the KV cache (the default backend)
vllm_backend.py  the same through a vLLM engine (imported only when the config selects it)
scoring.py       verdicts of completions, avg@k, pass@k, bootstrap intervals
evaluate.py      run_evaluation(): rows -> completions -> scores, responses file, EVAL.json
cli.py           the `evaluate`, `evaluate-checkpoint` and `merge-shards` subcommands
"""
