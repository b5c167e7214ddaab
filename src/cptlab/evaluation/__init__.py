"""Evaluating a checkpoint on a benchmark (`cptlab evaluate`).

generation.py    batched HF `generate` with the KV cache (the default backend)
vllm_backend.py  the same through a vLLM engine (imported only when the config selects it)
scoring.py       verdicts of completions, avg@k, pass@k, bootstrap intervals
evaluate.py      run_evaluation(): rows -> completions -> scores, responses file, EVAL.json
cli.py           the `evaluate` subcommand
"""
