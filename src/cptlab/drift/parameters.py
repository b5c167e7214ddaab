"""Parameter drift of a checkpoint W against a reference W0, per weight matrix.

The measures of "The Path Not Taken" (arXiv 2511.08567) that the study (arXiv 2607.01763)
plots; where the paper leaves a detail open, the choice made here is stated:

nss             normalized spectral shift ||sigma(W) - sigma(W0)||_2 / ||sigma(W0)||_2 over the
                full spectrum (singular values in descending order).
*_pa_left/right principal angles (degrees) between the top-k left (column space) and right (row
                space) singular subspaces of W0 and W; max and mean over the k angles.
pm_overlap      principal-mask overlap, in %: |M(W0) & M(W)| / |M(W0)|, where the principal
                mask M(X) holds the top-alpha share of entries by magnitude of X's rank-k
                reconstruction (the "principal weights" of LIFT, arXiv 2506.00772). 100 means the
                trained matrix keeps the same principal weights (the study's "PM overlap",
                ~99-100).
pm_update_share share of the updated entries that lie on the reference's principal mask, in %:
                |U & M(W0)| / |U|. Chance level (updates blind to the mask) is 100 * alpha; below
                it, updates avoid the principal weights ("off-principal"). NaN without updates.
                (Our reading of the study's "PM update", ~6-8 %.)
update_fraction share of all entries updated, in %. An entry counts as updated when
                |W - W0| > update_threshold * max(|W|, |W0|): a relative test, because a bf16
                weight cannot move by less than its own resolution.
rel_frobenius   ||W - W0||_F / ||W0||_F.

Defaults (the study's exact values are unknown):
- k = 64: LIFT's rank for ~1-8 B models (its scripts use 32-128), small next to the 2560-wide
  matrices of Qwen3-4B. Capped at half the smaller side of a matrix, so the subspaces of small
  matrices stay proper subspaces (the embedded model's 128x128 matrices use k = 64, its 64x128
  ones k = 32); the row's `k` column gives the k used.
- alpha = 0.05: LIFT's "top 5 % principal weights".
- update_threshold = 1e-3: the study's relative change threshold (bf16 resolution).

Speed: matrices are streamed from safetensors one at a time and upcast to float32. With
svd_method "auto", a matrix whose smaller side is at most FULL_SVD_MAX_DIM gets an exact float64
SVD; larger ones get a randomized SVD for the top-k factors (float32 range finder, k + 64
columns, 8 power iterations, the same seeded test matrix for W0 and W so identical matrices give
zero angles to rounding, ~1e-13 degrees) and their full spectrum from the eigenvalues of the
float64 Gram matrix of the smaller side (one GEMM + one symmetric eigensolver, several times
faster than an SVD).
Everything runs on `device` ("auto": CUDA when available). bench/bench_svd.py measures speed and
angle error; one 2560x9728 pair (a Qwen3-4B MLP matrix) takes ~12 s on one CPU thread.
"""

from __future__ import annotations

import logging
import math
import re
from pathlib import Path

import pandas as pd
import torch

from cptlab.drift.settings import SVD_METHODS, DriftSettings
from cptlab.drift.tables import write_table
from cptlab.drift.weights import SafetensorsCheckpoint
from cptlab.errors import InputError

# Randomized SVD: k + 64 columns and 8 power iterations. On a gapless power-law spectrum
# (2048x2048, k = 64) 10 columns / 4 iterations misjudge the drift's max principal angle by 25 %;
# these settings by < 0.1 %, still ~15x faster than a full SVD (bench/bench_svd.py).
OVERSAMPLE = 64
N_ITER = 8
FULL_SVD_MAX_DIM = 512

log = logging.getLogger(__name__)


METRICS = (
    "nss",
    "max_pa_left",
    "mean_pa_left",
    "max_pa_right",
    "mean_pa_right",
    "pm_overlap",
    "pm_update_share",
    "update_fraction",
    "rel_frobenius",
)
COLUMNS = ("name", "layer", "layer_type", "shape", "rows", "cols", "k", "svd_method", *METRICS)

EMBED = "model.embed_tokens.weight"
LM_HEAD = "lm_head.weight"
_LAYER = re.compile(r"(?:^|\.)layers\.(\d+)\.")
_TYPE_ALIASES = {"embed_tokens": "embed", "wte": "embed", "lm_head": "lm_head"}

Factors = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """`device` as a torch.device; "auto" is CUDA when available, else the CPU."""
    if str(device) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


# ----- linear algebra ---------------------------------------------------------------------------


def full_svd(matrix: torch.Tensor) -> Factors:
    """Exact thin SVD (U, S, Vh) in float64 on the matrix's device, S descending."""
    return torch.linalg.svd(matrix.to(torch.float64), full_matrices=False)


def randomized_svd(
    matrix: torch.Tensor,
    k: int,
    oversample: int = OVERSAMPLE,
    n_iter: int = N_ITER,
    seed: int = 0,
) -> Factors:
    """Top-k SVD (U: m x k, S: k, Vh: k x n) by a randomized range finder (Halko et al. 2011).

    A seeded Gaussian test matrix of k + oversample columns, `n_iter` power iterations with QR
    re-orthonormalisation in float32 on the matrix's device; the small projected matrix is
    decomposed in float64. The seed fixes the test matrix, so two matrices of the same shape see
    the same one and identical matrices give identical factors. Errors shrink with the spectral
    gap after sigma_k and with n_iter.
    """
    if matrix.ndim != 2:
        raise ValueError(f"randomized_svd needs a matrix, got shape {tuple(matrix.shape)}")
    a = matrix.to(torch.float32)
    transpose = a.shape[0] < a.shape[1]
    if transpose:
        a = a.T
    m, n = a.shape
    k = min(k, n)
    width = min(n, k + oversample)
    generator = torch.Generator(device=a.device)
    generator.manual_seed(seed)
    omega = torch.randn(n, width, generator=generator, device=a.device, dtype=a.dtype)
    q = torch.linalg.qr(a @ omega).Q
    for _ in range(n_iter):
        q = torch.linalg.qr(a.T @ q).Q
        q = torch.linalg.qr(a @ q).Q
    small = (q.T @ a).to(torch.float64)
    u_small, s, vh = torch.linalg.svd(small, full_matrices=False)
    u = q.to(torch.float64) @ u_small
    u, s, vh = u[:, :k], s[:k], vh[:k]
    if transpose:
        return vh.T, s, u.T
    return u, s, vh


def singular_values(matrix: torch.Tensor, block_bytes: int = 1 << 28) -> torch.Tensor:
    """All singular values, descending, in float64: square roots of the eigenvalues of the
    Gram matrix of the smaller side, accumulated in float64 over row blocks (at most
    `block_bytes` of float64 at a time). Absolute error ~1e-16 * sigma_max^2 / sigma_i."""
    a = matrix if matrix.shape[0] >= matrix.shape[1] else matrix.T
    n = a.shape[1]
    gram = torch.zeros(n, n, dtype=torch.float64, device=a.device)
    rows = max(1, block_bytes // (8 * n))
    for start in range(0, a.shape[0], rows):
        block = a[start : start + rows].to(torch.float64)
        gram += block.T @ block
    eig = torch.linalg.eigvalsh(gram)
    return eig.clamp(min=0).sqrt().flip(0)


def normalized_spectral_shift(s_reference: torch.Tensor, s_trained: torch.Tensor) -> float:
    """NSS = ||sigma(W) - sigma(W0)||_2 / ||sigma(W0)||_2 for two descending spectra."""
    s0 = torch.as_tensor(s_reference, dtype=torch.float64)
    s1 = torch.as_tensor(s_trained, dtype=torch.float64, device=s0.device)
    if s0.shape != s1.shape:
        raise ValueError(f"spectra differ in length: {tuple(s0.shape)} vs {tuple(s1.shape)}")
    denominator = torch.linalg.vector_norm(s0)
    if denominator == 0:
        return 0.0 if torch.equal(s0, s1) else math.inf
    return float(torch.linalg.vector_norm(s1 - s0) / denominator)


def principal_angles(basis_a: torch.Tensor, basis_b: torch.Tensor) -> torch.Tensor:
    """Principal angles (radians, descending) between span(basis_a) and span(basis_b).

    The bases (n x p, n x q, full column rank) are re-orthonormalised in float64 first. As in
    Björck & Golub (and scipy.linalg.subspace_angles): cosines are the singular values of A^T B;
    angles with cos^2 >= 1/2 come from the sines, the singular values of B - A A^T B, which stay
    accurate for the tiny angles training produces (arccos loses half the digits there).
    min(p, q) angles.
    """
    a = torch.as_tensor(basis_a).to(torch.float64)
    b = torch.as_tensor(basis_b).to(device=a.device, dtype=torch.float64)
    if a.shape[0] != b.shape[0]:
        raise ValueError(f"bases live in different spaces: {tuple(a.shape)} vs {tuple(b.shape)}")
    if a.shape[1] < b.shape[1]:
        a, b = b, a
    # Same spans, orthonormal to float64 precision (a float32 basis is only so to ~1e-7, which
    # would swamp angles below ~1e-5 degrees).
    a, b = torch.linalg.qr(a).Q, torch.linalg.qr(b).Q
    cross = a.T @ b
    cosines = torch.linalg.svdvals(cross).clamp(-1.0, 1.0)  # descending
    sines = torch.linalg.svdvals(b - a @ cross).clamp(-1.0, 1.0)  # descending
    cos_aligned = cosines.flip(0)  # ascending cosines = descending angles, like `sines`
    from_cos = torch.arccos(cos_aligned)
    from_sin = torch.arcsin(sines[: len(cos_aligned)])
    return torch.where(cos_aligned**2 >= 0.5, from_sin, from_cos)


def top_fraction_mask(values: torch.Tensor, alpha: float) -> torch.Tensor:
    """Boolean mask of the round(alpha * numel) entries of largest |value| (at least one; ties
    at the threshold are all kept)."""
    if not 0.0 < alpha <= 1.0:
        raise ValueError(f"alpha must be in (0, 1], got {alpha}")
    magnitude = values.abs().flatten()
    count = max(1, min(magnitude.numel(), round(alpha * magnitude.numel())))
    threshold = torch.kthvalue(magnitude, magnitude.numel() - count + 1).values
    return (values.abs() >= threshold).reshape(values.shape)


def principal_mask(
    matrix: torch.Tensor, k: int, alpha: float, factors: Factors | None = None
) -> torch.Tensor:
    """The principal mask of `matrix`: its top-alpha entries by magnitude of the rank-k
    reconstruction U_k S_k V_k^T. `factors` (U, S, Vh with at least k components) skips the SVD;
    without them an exact SVD is taken."""
    u, s, vh = factors if factors is not None else full_svd(matrix)
    k = min(k, s.shape[0])
    dtype = matrix.dtype if matrix.is_floating_point() else torch.float32
    reconstruction = (u[:, :k] * s[:k]).to(dtype) @ vh[:k].to(dtype)
    return top_fraction_mask(reconstruction, alpha)


def update_mask(
    reference: torch.Tensor,
    trained: torch.Tensor,
    threshold: float = DriftSettings.update_threshold,
) -> torch.Tensor:
    """Entries that changed: |W - W0| > threshold * max(|W|, |W0|) (a relative test; exactly
    equal entries, zeros included, never count)."""
    return (trained - reference).abs() > threshold * torch.maximum(trained.abs(), reference.abs())


def relative_frobenius(reference: torch.Tensor, trained: torch.Tensor) -> float:
    """||W - W0||_F / ||W0||_F, accumulated in float64."""
    num = torch.linalg.vector_norm(trained - reference, dtype=torch.float64)
    den = torch.linalg.vector_norm(reference, dtype=torch.float64)
    if den == 0:
        return 0.0 if num == 0 else math.inf
    return float(num / den)


def effective_k(k: int, shape: tuple[int, ...]) -> int:
    """k capped at half the smaller side (at least 1): the subspaces stay proper subspaces."""
    return max(1, min(k, min(shape) // 2))


def matrix_drift(
    reference: torch.Tensor,
    trained: torch.Tensor,
    k: int = DriftSettings.k,
    alpha: float = DriftSettings.alpha,
    update_threshold: float = DriftSettings.update_threshold,
    svd_method: str = "auto",
    oversample: int = OVERSAMPLE,
    n_iter: int = N_ITER,
    seed: int = 0,
) -> dict:
    """The drift measures (module docstring) of one matrix pair W0 = `reference`, W = `trained`.

    Returns a dict with "k" (the effective k), "svd_method" (the one used) and METRICS.
    """
    if reference.shape != trained.shape or reference.ndim != 2:
        raise ValueError(
            f"need two matrices of one shape, got {tuple(reference.shape)} and "
            f"{tuple(trained.shape)}"
        )
    if svd_method not in SVD_METHODS:
        raise ValueError(f"svd_method must be one of {SVD_METHODS}, got {svd_method!r}")
    w0 = reference.to(torch.float32)
    w1 = trained.to(device=w0.device, dtype=torch.float32)
    k = effective_k(k, tuple(w0.shape))
    method = svd_method
    if method == "auto":
        method = "full" if min(w0.shape) <= FULL_SVD_MAX_DIM else "randomized"
    if method == "full":
        f0, f1 = full_svd(w0), full_svd(w1)
        s0, s1 = f0[1], f1[1]
    else:
        f0 = randomized_svd(w0, k, oversample, n_iter, seed)
        f1 = randomized_svd(w1, k, oversample, n_iter, seed)
        s0, s1 = singular_values(w0), singular_values(w1)
    left = torch.rad2deg(principal_angles(f0[0][:, :k], f1[0][:, :k]))
    right = torch.rad2deg(principal_angles(f0[2][:k].T, f1[2][:k].T))
    mask0 = principal_mask(w0, k, alpha, f0)
    mask1 = principal_mask(w1, k, alpha, f1)
    updated = update_mask(w0, w1, update_threshold)
    n_updated = int(updated.sum())
    return {
        "k": k,
        "svd_method": method,
        "nss": normalized_spectral_shift(s0, s1),
        "max_pa_left": float(left.max()),
        "mean_pa_left": float(left.mean()),
        "max_pa_right": float(right.max()),
        "mean_pa_right": float(right.mean()),
        "pm_overlap": 100.0 * int((mask0 & mask1).sum()) / int(mask0.sum()),
        "pm_update_share": (
            100.0 * int((updated & mask0).sum()) / n_updated if n_updated else math.nan
        ),
        "update_fraction": 100.0 * n_updated / updated.numel(),
        "rel_frobenius": relative_frobenius(w0, w1),
    }


# ----- checkpoints ------------------------------------------------------------------------------


def layer_info(name: str) -> tuple[int | None, str]:
    """(layer index or None, layer type) of a tensor name, e.g.
    "model.layers.3.self_attn.q_proj.weight" -> (3, "q_proj"),
    "model.embed_tokens.weight" -> (None, "embed"), "lm_head.weight" -> (None, "lm_head")."""
    match = _LAYER.search(name)
    parts = name.split(".")
    if parts[-1] in ("weight", "bias") and len(parts) > 1:
        parts = parts[:-1]
    kind = _TYPE_ALIASES.get(parts[-1], parts[-1])
    return (int(match.group(1)) if match else None), kind


def matrix_pairs(
    checkpoint: SafetensorsCheckpoint, reference: SafetensorsCheckpoint
) -> list[tuple[str, str, str]]:
    """(row name, tensor in checkpoint, tensor in reference) for every 2-D tensor.

    1-D tensors (norms, biases) are skipped. A tied lm_head (no `lm_head.weight` on one side)
    is compared through the embedding of that side; when neither side has one, the embedding
    row stands for it. A matrix on one side only, or of another shape, is an error naming both
    checkpoints.
    """
    mine = {n for n in checkpoint.keys() if len(checkpoint.shape(n)) == 2}
    theirs = {n for n in reference.keys() if len(reference.shape(n)) == 2}
    pairs = []
    for name in sorted(mine | theirs):
        left = name if name in mine else None
        right = name if name in theirs else None
        if name == LM_HEAD:
            left = left or (EMBED if EMBED in mine else None)
            right = right or (EMBED if EMBED in theirs else None)
        if left is None or right is None:
            has, lacks = (checkpoint, reference) if left else (reference, checkpoint)
            raise InputError(f"{lacks.path}: no matrix {name!r} (present in {has.path})")
        if checkpoint.shape(left) != reference.shape(right):
            raise InputError(
                f"{name}: shape {checkpoint.shape(left)} in {checkpoint.path} but "
                f"{reference.shape(right)} in {reference.path}"
            )
        pairs.append((name, left, right))
    return pairs


def parameter_drift(
    checkpoint: str | Path,
    reference: str | Path,
    k: int = DriftSettings.k,
    alpha: float = DriftSettings.alpha,
    update_threshold: float = DriftSettings.update_threshold,
    device: str = "auto",
    svd_method: str = "auto",
    oversample: int = OVERSAMPLE,
    n_iter: int = N_ITER,
    seed: int = 0,
    out: str | Path | None = None,
) -> pd.DataFrame:
    """Drift of every weight matrix of `checkpoint` against `reference` (W0).

    Both are safetensors checkpoints (see cptlab.drift.checkpoint), streamed one matrix pair at a
    time. One row per matrix with COLUMNS: name, layer (nullable int), layer_type, shape "mxn",
    rows, cols, k, svd_method and METRICS (module docstring). Written as CSV to `out` when given.
    """
    ckpt = SafetensorsCheckpoint(checkpoint)
    ref = SafetensorsCheckpoint(reference)
    target = resolve_device(device)
    pairs = matrix_pairs(ckpt, ref)
    if not pairs:
        raise InputError(f"{checkpoint}: no weight matrices")
    rows = []
    for i, (name, mine, theirs) in enumerate(pairs, start=1):
        w1 = ckpt.get(mine, target)
        w0 = ref.get(theirs, target)
        metrics = matrix_drift(
            w0, w1, k, alpha, update_threshold, svd_method, oversample, n_iter, seed
        )
        del w0, w1
        if target.type == "cuda":
            torch.cuda.empty_cache()
        layer, kind = layer_info(name)
        m, n = ref.shape(theirs)
        rows.append(
            {
                "name": name,
                "layer": layer,
                "layer_type": kind,
                "shape": f"{m}x{n}",
                "rows": m,
                "cols": n,
                **metrics,
            }
        )
        log.debug(
            "%d/%d %s: nss=%.3g max_pa_left=%.3g",
            i,
            len(pairs),
            name,
            metrics["nss"],
            metrics["max_pa_left"],
        )
    df = pd.DataFrame(rows, columns=list(COLUMNS))
    df["layer"] = df["layer"].astype("Int64")
    if out is not None:
        write_table(df, out)
    return df


def aggregate_drift(df: pd.DataFrame, by: str | None = "layer_type") -> pd.DataFrame:
    """Mean of each drift metric over the matrices of each `by` group ("layer_type", "layer", or
    None for one overall row), unweighted, NaN skipped, with `n_matrices`. Grouping by "layer"
    leaves out the embedding and lm_head (they have no layer index)."""
    metrics = [m for m in METRICS if m in df.columns]
    if by is None:
        row = df[metrics].mean(numeric_only=True).to_frame().T
        row.insert(0, "n_matrices", len(df))
        row.insert(0, "group", "all")
        return row
    if by not in df.columns:
        raise ValueError(f"cannot aggregate by {by!r}: no such column")
    grouped = df.dropna(subset=[by]).groupby(by, sort=True)
    out = grouped[metrics].mean()
    out.insert(0, "n_matrices", grouped.size())
    return out.reset_index()
