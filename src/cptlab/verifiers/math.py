"""Math answers: the last `\\boxed{...}` in the completion, compared exactly, then numerically,
then by math-verify's symbolic equivalence (cptlab.verifiers.symbolic)."""

from __future__ import annotations

import re
from fractions import Fraction

from cptlab.verifiers.base import Verdict, correct, malformed, register, unscorable, wrong
from cptlab.verifiers.symbolic import SymbolicCheckError, SymbolicResult, symbolic_equal

_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")


def last_boxed(text: str) -> str | None:
    """Content of the last `\\boxed{...}` (balanced braces), or None if there is none."""
    starts = [m.end() for m in _BOXED.finditer(text)]
    # Scan from the last box backwards. A box that is still open where the next (later, already
    # failed) box starts can never close either, so each scan stops there: linear, not quadratic.
    limit = len(text)
    for start in reversed(starts):
        depth, i = 1, start
        while i < limit:
            ch = text[i]
            if ch == "\\" and i + 1 < len(text):
                i += 2
                continue
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    return text[start:i]
            i += 1
        limit = start
    return None


def normalize_answer(answer: str) -> str:
    """Strip the surface differences that do not change a math answer."""
    s = answer.strip().strip("$").strip()
    s = re.sub(r"\\(?:text|mathrm|textbf)\{([^{}]*)\}", r"\1", s)
    s = s.replace("\\!", "").replace("\\,", "").replace("\\ ", "").replace(" ", "")
    s = s.replace("\\left", "").replace("\\right", "").replace("dfrac", "frac")
    s = s.rstrip(".")
    if re.fullmatch(r"[+-]?\d{1,3}(,\d{3})+", s):  # thousands separators
        s = s.replace(",", "")
    return s


def as_number(s: str) -> Fraction | None:
    """Parse integers, decimals, a/b and \\frac{a}{b} exactly; None otherwise."""
    m = re.fullmatch(r"([+-]?)\\frac\{([+-]?\d+)\}\{([+-]?\d+)\}", s)
    if m:
        sign = -1 if m.group(1) == "-" else 1
        value = as_number(f"{m.group(2)}/{m.group(3)}")
        return None if value is None else sign * value
    if not re.fullmatch(r"[+-]?(\d+(\.\d*)?|\.\d+)(/[+-]?\d+)?", s):
        return None
    try:
        return Fraction(s)
    except (ValueError, ZeroDivisionError):
        return None


def equivalence(predicted: str, reference: str, use_math_verify: bool = True) -> SymbolicResult:
    """Equal after normalisation, else as numbers, else (for answers up to
    `_MATH_VERIFY_MAX_CHARS`) by math-verify. Raises SymbolicCheckError when math-verify could
    not run."""
    a, b = normalize_answer(predicted), normalize_answer(reference)
    if a == b:
        return SymbolicResult(True)
    na, nb = as_number(a), as_number(b)
    if na is not None and nb is not None:
        return SymbolicResult(na == nb)
    if use_math_verify and max(len(predicted), len(reference)) <= _MATH_VERIFY_MAX_CHARS:
        return symbolic_equal(reference, predicted, timeout_s=_MATH_VERIFY_TIMEOUT_S, delimit=True)
    return SymbolicResult(False)


# Longer answers are not parsed symbolically: a reference answer is short, and math-verify may
# spend its whole timeout (and log the whole input) on a huge degenerate box.
_MATH_VERIFY_MAX_CHARS = 1000
_MATH_VERIFY_TIMEOUT_S = 5


@register("math_boxed")
def math_boxed(completion: str, row: dict) -> Verdict:
    predicted = last_boxed(completion)
    if predicted is None:
        return malformed("no \\boxed{} answer", "No final answer in \\boxed{} was found.")
    if not predicted.strip():
        return malformed("empty \\boxed{}", "The \\boxed{} answer is empty.")
    shown = predicted.strip()[:80]
    answer = normalize_answer(predicted)
    try:
        result = equivalence(predicted, row["answer"])
    except SymbolicCheckError as err:
        return unscorable(str(err), f"The answer {shown} could not be checked.")
    if result.equal:
        return correct(answer=answer)
    if result.note:
        return unscorable(result.note, f"The answer {shown} could not be checked.")
    return wrong(f"The answer {shown} is incorrect.", answer)
