"""The embedded testbed: synthetic domains mirroring the study's table.

| domain    | train / id form            | ood form                         |
|-----------|----------------------------|----------------------------------|
| math      | 1st/2nd largest/smallest of five | the same of eight        |
| science   | MCQ, <answer>LETTER</answer> | same facts, \\boxed{LETTER}     |
| tool      | ReAct call (ToolAlpaca)    | JSON call among schemas (BFCL)   |
| code      | function + unit tests      | stdin/stdout program             |
| logic     | -                          | ordering deduction               |
| knowledge | -                          | MCQ about invented countries     |

plus `copying`, warm-up drills only (see copying.py).

common.py   item streams split into disjoint buckets; `register_domain`
facts.py    the invented fact tables of the MCQ domains (science, knowledge)
math.py     ranking numbers, \\boxed{} answers
science.py  MCQs over the fact tables: science and knowledge
tool.py     ReAct calls (ToolAlpaca-like) and JSON calls among schemas (BFCL-like)
code.py     functions checked by unit tests; stdin/stdout programs
logic.py    ordering deductions (evaluated only)
copying.py  in-context copying and lookup drills, warm-up only

A domain is one module imported here; the default config's `data.domains` names the ones it
runs (docs/extending.md).
"""

from cptlab.domains.embedded import code, copying, logic, math, science, tool  # noqa: F401
