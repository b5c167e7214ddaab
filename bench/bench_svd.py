"""Randomized vs full SVD for the parameter-drift measures, measured side by side in one run.

    .venv/bin/python bench/bench_svd.py                       # 1024x1024 and 2048x2048, 1 thread
    .venv/bin/python bench/bench_svd.py --sizes 2560x9728 --threads 16 --device cuda

For each size and spectrum a reference W0 and a trained W = W0 + dW (dW: Gaussian, 1e-3 of
W0's RMS entry, like a short RL stage) are drawn, and cptlab.drift.parameters.matrix_drift runs
with svd_method "full" (exact float64 SVD of both) and "randomized" (top-k range finder + float64
Gram spectrum). Printed per row:

  full_s / rand_s      seconds of the whole per-matrix drift computation, each method
  speedup              full_s / rand_s
  svd_speedup          full SVD vs randomized top-k SVD alone (one matrix)
  subspace_err         max principal angle (deg) between the randomized and the exact top-k
                       left subspace of W0: how well the randomized SVD finds the subspace
  maxPA full / rand    the drift measure max_pa_left by each method, and their difference
  nss_relerr           |NSS_rand - NSS_full| / NSS_full (Gram vs SVD spectrum)

Spectra: "lowrank" is a rank-k signal (singular values 10 -> 2) plus noise whose top singular
value is ~1, so the top-k subspace is well separated; "powerlaw" has sigma_i ~ i^-0.5 with no gap
at k, closer to trained LLM weights and the hard case for any truncated SVD.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import torch  # noqa: E402

from cptlab.drift.parameters import (  # noqa: E402
    N_ITER,
    OVERSAMPLE,
    full_svd,
    matrix_drift,
    principal_angles,
    randomized_svd,
    resolve_device,
)


def _orthonormal(rows: int, cols: int, generator: torch.Generator) -> torch.Tensor:
    return torch.linalg.qr(torch.randn(rows, cols, generator=generator, dtype=torch.float64)).Q


def make_pair(m: int, n: int, k: int, spectrum: str, seed: int) -> tuple[torch.Tensor, ...]:
    """(W0, W) in float32 with the named spectrum; W = W0 + 1e-3 * RMS(W0) * Gaussian."""
    g = torch.Generator().manual_seed(seed)
    r = min(m, n)
    if spectrum == "lowrank":
        u, v = _orthonormal(m, k, g), _orthonormal(n, k, g)
        signal = (u * torch.linspace(10.0, 2.0, k, dtype=torch.float64)) @ v.T
        noise = torch.randn(m, n, generator=g, dtype=torch.float64) / (m**0.5 + n**0.5)
        w0 = signal + noise
    elif spectrum == "powerlaw":
        u, v = _orthonormal(m, r, g), _orthonormal(n, r, g)
        w0 = (u * torch.arange(1, r + 1, dtype=torch.float64) ** -0.5) @ v.T
    else:
        raise ValueError(spectrum)
    rms = w0.pow(2).mean().sqrt()
    w = w0 + 1e-3 * rms * torch.randn(m, n, generator=g, dtype=torch.float64)
    return w0.float(), w.float()


def seconds(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", nargs="+", default=["1024x1024", "2048x2048"])
    parser.add_argument("--spectra", nargs="+", default=["lowrank", "powerlaw"])
    parser.add_argument("--k", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=1, help="median over this many runs")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu", help="cpu, cuda or auto")
    parser.add_argument("--oversample", type=int, default=OVERSAMPLE)
    parser.add_argument("--n-iter", type=int, default=N_ITER, help="power iterations")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    print(
        f"device={device} threads={args.threads} k={args.k} oversample={args.oversample} "
        f"n_iter={args.n_iter} repeats={args.repeats}"
    )
    settings = {"oversample": args.oversample, "n_iter": args.n_iter}
    header = (
        f"{'size':>10} {'spectrum':>8} {'full_s':>7} {'rand_s':>7} {'speedup':>7} "
        f"{'svd_speedup':>11} {'subspace_err':>12} {'maxPA_full':>10} {'maxPA_rand':>10} "
        f"{'maxPA_diff':>10} {'nss_relerr':>10}"
    )
    print(header)
    for size in args.sizes:
        m, n = (int(x) for x in size.lower().split("x"))
        for spectrum in args.spectra:
            w0, w = (t.to(device) for t in make_pair(m, n, args.k, spectrum, seed=0))
            results = {}

            def run(method: str, results=results, w0=w0, w=w) -> None:
                results[method] = matrix_drift(w0, w, k=args.k, svd_method=method, **settings)

            full_s = seconds(lambda: run("full"), args.repeats)
            rand_s = seconds(lambda: run("randomized"), args.repeats)
            svd_full_s = seconds(lambda w0=w0: full_svd(w0), args.repeats)
            svd_rand_s = seconds(lambda w0=w0: randomized_svd(w0, args.k, **settings), args.repeats)
            exact = full_svd(w0)[0][:, : args.k]
            approx = randomized_svd(w0, args.k, **settings)[0]
            subspace_err = float(torch.rad2deg(principal_angles(exact, approx)).max())
            full, rand = results["full"], results["randomized"]
            nss_relerr = abs(rand["nss"] - full["nss"]) / full["nss"]
            print(
                f"{size:>10} {spectrum:>8} {full_s:7.2f} {rand_s:7.2f} {full_s / rand_s:7.1f} "
                f"{svd_full_s / svd_rand_s:11.1f} {subspace_err:12.2e} "
                f"{full['max_pa_left']:10.4f} {rand['max_pa_left']:10.4f} "
                f"{rand['max_pa_left'] - full['max_pa_left']:10.1e} {nss_relerr:10.1e}"
            )


if __name__ == "__main__":
    main()
