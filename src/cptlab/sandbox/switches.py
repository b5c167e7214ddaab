"""Switches that turn parts of the sandbox off, so that the tests and benchmarks can exercise
its fallback paths ("namespaces", "seccomp", "readonly", "launcher_server", "warm_interpreter",
"prepared_tree", "prebuilt"). Read at each use, so that setting `disabled` takes effect at once.
"""

from __future__ import annotations

# Protections the tests may switch off to exercise the fallback paths. Never set in production.
disabled: frozenset[str] = frozenset()
