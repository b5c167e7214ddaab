"""Verifiers: turn (completion, row) into a reward in [0, 1] and a short feedback text.

Parsing lives in small pure functions (`last_boxed`, `parse_react_calls`, ...) so the synthetic
and the paper-scale benchmarks share them. Every verifier is registered by name in VERIFIERS;
`score` is the only entry point the rest of cptlab uses: it never raises.

base.py           the interface (Verdict), the registry and `score`
math.py           the last \\boxed{}: exact, numeric, then symbolic
symbolic.py       math-verify's check, in a worker process when called off the main thread
mcq.py            multiple-choice answers in the study's three forms
tool.py           ReAct traces (ToolAlpaca) and single function calls
bfcl.py           BFCL's official AST checker (simple and multiple)
code.py           programs run in the sandbox against unit or stdin/stdout tests
asserts.py        assert tests split so the program never sees the expected value
logic.py          a boxed entity, or a ZebraLogic grid by cell accuracy
text.py           the whole completion as the answer (warm-up drills)
study.py          the study's reward functions (`data.rewards: study`)
study_code.py     the study's code reward
study_harness.py  the program `study_code` runs in the sandbox
"""

from cptlab.verifiers.base import VERIFIERS, Verdict, register, score

# Importing the modules registers their verifiers.
from cptlab.verifiers import bfcl, code, logic, math, mcq, study, study_code, text, tool  # noqa: E402,F401  isort: skip

__all__ = ["VERIFIERS", "Verdict", "register", "score"]
