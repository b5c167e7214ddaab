"""Generation backends other than HF `generate` (cptlab.generation). Each is imported lazily:
its heavy dependency is needed only when the config selects it."""
