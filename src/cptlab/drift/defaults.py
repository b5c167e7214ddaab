"""Defaults of the parameter-drift measures (no heavy imports: the CLI reads them at start-up).
Why these values: see cptlab.drift.parameters."""

DEFAULT_K = 64
DEFAULT_ALPHA = 0.05
DEFAULT_UPDATE_THRESHOLD = 1e-3
# Randomized SVD: k + 64 columns and 8 power iterations. On a gapless power-law spectrum
# (2048x2048, k = 64) 10 columns / 4 iterations misjudge the drift's max principal angle by 25 %;
# these settings by < 0.1 %, still ~15x faster than a full SVD (bench/bench_svd.py).
DEFAULT_OVERSAMPLE = 64
DEFAULT_N_ITER = 8
SVD_METHODS = ("auto", "full", "randomized")
FULL_SVD_MAX_DIM = 512
