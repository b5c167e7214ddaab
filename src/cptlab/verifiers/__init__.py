"""Verifiers: turn (completion, row) into a reward in [0, 1] and a short feedback text.

Parsing lives in small pure functions (`last_boxed`, `parse_react_calls`, ...) so the synthetic
and the paper-scale benchmarks share them. Every verifier is registered by name in VERIFIERS;
`score` is the only entry point the rest of cptlab uses: it never raises.
"""

from cptlab.verifiers.base import VERIFIERS, Verdict, register, score

# Importing the modules registers their verifiers.
from cptlab.verifiers import bfcl, code, logic, math, mcq, study, study_code, text, tool  # noqa: E402,F401  isort: skip

__all__ = ["VERIFIERS", "Verdict", "register", "score"]
