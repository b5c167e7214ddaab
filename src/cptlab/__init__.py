"""cptlab: continual post-training lab.

Chains on-policy post-training stages (GRPO, SDPO and variants) over a sequence of domains,
evaluates every checkpoint, and measures forgetting and drift.
"""

__version__ = "0.1.0"
