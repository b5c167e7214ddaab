"""The embedded testbed: six synthetic domains mirroring the study's table.

| domain    | train / id form            | ood form                         |
|-----------|----------------------------|----------------------------------|
| math      | 1st/2nd largest/smallest of five | the same of eight        |
| science   | MCQ, <answer>LETTER</answer> | same facts, \\boxed{LETTER}     |
| tool      | ReAct call (ToolAlpaca)    | JSON call among schemas (BFCL)   |
| code      | function + unit tests      | stdin/stdout program             |
| logic     | -                          | ordering deduction               |
| knowledge | -                          | MCQ about invented countries     |

plus `copying`, warm-up drills only (see copying.py).
"""

from cptlab.domains.embedded import code, copying, logic, math, science, tool  # noqa: F401

EMBEDDED_DOMAINS = ("math", "science", "tool", "code", "logic", "knowledge")
