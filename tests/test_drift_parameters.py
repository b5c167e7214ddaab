"""Parameter drift: each measure against an independent computation (numpy SVD,
scipy.linalg.subspace_angles) and constructed cases (identical models, a known rotation), and
streaming over single-file and sharded safetensors checkpoints."""

import json
import math

import numpy as np
import pandas as pd
import pytest
import scipy.linalg
import torch
from safetensors.torch import save_file
from tiny_models import tiny_qwen2

from cptlab.cli import parser as cli_parser
from cptlab.drift.parameters import (
    COLUMNS,
    METRICS,
    aggregate_drift,
    layer_info,
    matrix_drift,
    normalized_spectral_shift,
    parameter_drift,
    principal_angles,
    principal_mask,
    randomized_svd,
    relative_frobenius,
    singular_values,
    update_mask,
)

torch.set_num_threads(1)


def orthonormal(rng: np.random.Generator, rows: int, cols: int) -> np.ndarray:
    return np.linalg.qr(rng.standard_normal((rows, cols)))[0]


def low_rank_plus_noise(rng, m, n, k, noise=1e-3) -> np.ndarray:
    """Rank-k signal with singular values 10 .. 5 plus small Gaussian noise (a clear gap)."""
    u, v = orthonormal(rng, m, k), orthonormal(rng, n, k)
    return (u * np.linspace(10, 5, k)) @ v.T + noise * rng.standard_normal((m, n))


# ----- single measures --------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(40, 3, 5), (40, 6, 6), (25, 5, 2)])
def test_principal_angles_match_scipy(shape):
    rng = np.random.default_rng(0)
    n, p, q = shape
    a, b = rng.standard_normal((n, p)), rng.standard_normal((n, q))
    ours = principal_angles(torch.from_numpy(a), torch.from_numpy(b)).numpy()
    np.testing.assert_allclose(ours, scipy.linalg.subspace_angles(a, b), atol=1e-12)


def test_principal_angles_keep_tiny_angles():
    """The sine formula: an angle of 1e-7 rad is resolved (arccos alone would give ~1e-8 rad
    noise or 0)."""
    rng = np.random.default_rng(1)
    q = orthonormal(rng, 30, 4)
    theta = 1e-7
    rotated = q.copy()
    rotated[:, 0] = math.cos(theta) * q[:, 0] + math.sin(theta) * orthonormal(rng, 30, 5)[:, 4]
    perp = rotated[:, 0] - q @ (q.T @ rotated[:, 0])
    expected = np.arcsin(np.linalg.norm(perp))
    ours = principal_angles(torch.from_numpy(q), torch.from_numpy(rotated)).numpy()
    assert ours[0] == pytest.approx(expected, rel=1e-6)
    np.testing.assert_allclose(ours, scipy.linalg.subspace_angles(q, rotated), atol=1e-15)


@pytest.mark.parametrize("shape", [(50, 30), (30, 50)])
def test_singular_values_and_nss_match_numpy(shape):
    rng = np.random.default_rng(2)
    w0 = rng.standard_normal(shape)
    w1 = w0 + 1e-3 * rng.standard_normal(shape)
    s0, s1 = np.linalg.svd(w0, compute_uv=False), np.linalg.svd(w1, compute_uv=False)
    ours = singular_values(torch.from_numpy(w0), block_bytes=8 * 7 * 50).numpy()  # several blocks
    np.testing.assert_allclose(ours, s0, rtol=1e-10)
    expected = np.linalg.norm(s1 - s0) / np.linalg.norm(s0)
    got = normalized_spectral_shift(torch.from_numpy(s0), torch.from_numpy(s1))
    assert got == pytest.approx(expected, rel=1e-12)
    w0_32, w1_32 = torch.from_numpy(w0).float(), torch.from_numpy(w1).float()
    for method in ("full", "randomized"):
        drift = matrix_drift(w0_32, w1_32, k=5, svd_method=method)
        assert drift["nss"] == pytest.approx(expected, rel=2e-3), method  # float32 inputs


def test_randomized_svd_within_tolerance_of_full():
    rng = np.random.default_rng(3)
    w = low_rank_plus_noise(rng, 200, 120, 8)
    u, s, vh = np.linalg.svd(w, full_matrices=False)
    ru, rs, rvh = randomized_svd(torch.from_numpy(w).float(), 8, seed=5)
    np.testing.assert_allclose(rs.numpy(), s[:8], rtol=1e-5)
    left = np.rad2deg(scipy.linalg.subspace_angles(u[:, :8], ru.numpy()))
    right = np.rad2deg(scipy.linalg.subspace_angles(vh[:8].T, rvh.numpy().T))
    assert left.max() < 1e-3 and right.max() < 1e-3  # degrees
    # The same seed gives the same factors; wide matrices are handled through the transpose.
    again = randomized_svd(torch.from_numpy(w).float(), 8, seed=5)
    assert torch.equal(again[0], ru)
    wide_u, wide_s, _ = randomized_svd(torch.from_numpy(w.T.copy()).float(), 8)
    np.testing.assert_allclose(wide_s.numpy(), s[:8], rtol=1e-5)
    assert np.rad2deg(scipy.linalg.subspace_angles(vh[:8].T, wide_u.numpy())).max() < 1e-3


def test_principal_mask_matches_numpy_reconstruction():
    rng = np.random.default_rng(4)
    w = rng.standard_normal((30, 20))
    k, alpha = 3, 0.1
    u, s, vh = np.linalg.svd(w, full_matrices=False)
    recon = (u[:, :k] * s[:k]) @ vh[:k]
    count = round(alpha * w.size)
    expected = np.zeros(w.size, dtype=bool)
    expected[np.argsort(-np.abs(recon).ravel())[:count]] = True
    ours = principal_mask(torch.from_numpy(w), k, alpha).numpy()
    assert ours.sum() == count
    np.testing.assert_array_equal(ours.ravel(), expected)


def test_update_mask_share_and_frobenius_on_a_constructed_case():
    w0 = torch.tensor([[1.0, -2.0, 0.0, 4.0], [0.5, 0.0, 3.0, -1.0]])
    w1 = w0.clone()
    w1[0, 0] = 1.0 + 5e-4  # below 1e-3 relative: not an update
    w1[0, 1] = -2.0 - 0.01  # an update
    w1[1, 1] = 1e-6  # from exactly zero: an update
    expected = torch.zeros_like(w0, dtype=torch.bool)
    expected[0, 1] = expected[1, 1] = True
    assert torch.equal(update_mask(w0, w1, 1e-3), expected)
    diff = (w1 - w0).double().numpy()
    assert relative_frobenius(w0, w1) == pytest.approx(
        np.linalg.norm(diff) / np.linalg.norm(w0.double().numpy()), rel=1e-6
    )
    drift = matrix_drift(w0, w1, k=1, alpha=0.25, update_threshold=1e-3, svd_method="full")
    mask0 = principal_mask(w0, 1, 0.25)
    assert drift["update_fraction"] == pytest.approx(100 * 2 / 8)
    assert drift["pm_update_share"] == pytest.approx(100 * int((mask0 & expected).sum()) / 2)


# ----- constructed cases ------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["full", "randomized"])
def test_known_rotation_of_the_left_subspace_gives_the_known_angle(method):
    rng = np.random.default_rng(5)
    m, n, k, theta = 80, 50, 4, 3.0
    u = orthonormal(rng, m, k + 1)  # the last column is orthogonal to the signal subspace
    v = orthonormal(rng, n, k)
    s = np.array([10.0, 8.0, 6.0, 5.0])
    w0 = (u[:, :k] * s) @ v.T
    rotated = u[:, :k].copy()
    rad = np.deg2rad(theta)
    rotated[:, 1] = np.cos(rad) * u[:, 1] + np.sin(rad) * u[:, k]
    w1 = (rotated * s) @ v.T
    drift = matrix_drift(
        torch.from_numpy(w0).float(), torch.from_numpy(w1).float(), k=k, svd_method=method
    )
    assert drift["k"] == k
    assert drift["max_pa_left"] == pytest.approx(theta, abs=1e-3)
    assert drift["mean_pa_left"] == pytest.approx(theta / k, abs=1e-3)
    assert drift["max_pa_right"] < 1e-3  # the row space did not move
    assert drift["nss"] < 1e-6  # a rotation keeps the spectrum


def test_identical_matrices_give_zero_drift():
    w = torch.from_numpy(low_rank_plus_noise(np.random.default_rng(6), 60, 40, 6, 0.1)).float()
    for method in ("full", "randomized"):
        drift = matrix_drift(w, w.clone(), k=6, svd_method=method)
        for name in ("nss", "max_pa_left", "max_pa_right", "update_fraction", "rel_frobenius"):
            assert drift[name] == pytest.approx(0.0, abs=1e-10), (method, name)
        assert drift["pm_overlap"] == 100.0
        assert math.isnan(drift["pm_update_share"])  # no update: the share is undefined


def test_k_is_capped_at_half_the_smaller_side():
    w = torch.randn(10, 6)
    assert matrix_drift(w, w, k=64)["k"] == 3


# ----- checkpoints ------------------------------------------------------------------------------


def qwen_like_state(seed: int, hidden=12, inter=20, vocab=30, layers=2, head=False) -> dict:
    g = torch.Generator().manual_seed(seed)
    state = {"model.embed_tokens.weight": torch.randn(vocab, hidden, generator=g)}
    for i in range(layers):
        p = f"model.layers.{i}."
        shapes = {
            "self_attn.q_proj.weight": (hidden, hidden),
            "self_attn.k_proj.weight": (hidden // 2, hidden),
            "self_attn.v_proj.weight": (hidden // 2, hidden),
            "self_attn.o_proj.weight": (hidden, hidden),
            "mlp.gate_proj.weight": (inter, hidden),
            "mlp.up_proj.weight": (inter, hidden),
            "mlp.down_proj.weight": (hidden, inter),
            "self_attn.q_proj.bias": (hidden,),
            "input_layernorm.weight": (hidden,),
        }
        for name, shape in shapes.items():
            state[p + name] = torch.randn(*shape, generator=g)
    state["model.norm.weight"] = torch.ones(hidden)
    if head:
        state["lm_head.weight"] = torch.randn(vocab, hidden, generator=g)
    return state


def perturbed(state: dict, scale: float, seed: int) -> dict:
    g = torch.Generator().manual_seed(seed)
    return {k: v + scale * torch.randn(v.shape, generator=g) for k, v in state.items()}


def save_sharded(state: dict, folder) -> None:
    """Two shards and an index, as HF writes them."""
    folder.mkdir(parents=True)
    names = sorted(state)
    half = len(names) // 2
    weight_map = {}
    for i, part in enumerate((names[:half], names[half:]), start=1):
        file = f"model-0000{i}-of-00002.safetensors"
        save_file({n: state[n].contiguous() for n in part}, str(folder / file))
        weight_map.update(dict.fromkeys(part, file))
    index = {"metadata": {"total_size": 0}, "weight_map": weight_map}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))


def save_single(state: dict, folder) -> None:
    folder.mkdir(parents=True)
    save_file({k: v.contiguous() for k, v in state.items()}, str(folder / "model.safetensors"))


def test_streaming_a_sharded_checkpoint_equals_the_in_memory_result(tmp_path):
    base = qwen_like_state(0)
    trained = perturbed(base, 1e-2, 1)
    save_sharded(trained, tmp_path / "trained_sharded")
    save_single(trained, tmp_path / "trained")
    save_single(base, tmp_path / "base")
    out = tmp_path / "drift" / "params.csv"
    df = parameter_drift(
        tmp_path / "trained_sharded", tmp_path / "base", k=3, device="cpu", out=out
    )
    assert list(df.columns) == list(COLUMNS)
    matrices = sorted(n for n, t in base.items() if t.ndim == 2)
    assert list(df["name"]) == matrices  # 1-D tensors skipped, tied lm_head absent
    for row in df.itertuples():
        expected = matrix_drift(base[row.name], trained[row.name], k=3)
        for metric in METRICS:
            assert getattr(row, metric) == pytest.approx(expected[metric], rel=1e-9, abs=1e-12)
    single = parameter_drift(tmp_path / "trained", tmp_path / "base", k=3, device="cpu")
    pd.testing.assert_frame_equal(df, single)
    written = pd.read_csv(out)
    assert list(written["name"]) == matrices
    np.testing.assert_allclose(written["nss"], df["nss"], rtol=1e-12)


def test_identical_checkpoints_give_zero_drift_and_aggregates(tmp_path):
    save_single(qwen_like_state(0), tmp_path / "a")
    df = parameter_drift(tmp_path / "a", tmp_path / "a", k=3, device="cpu")
    for metric in ("nss", "max_pa_left", "max_pa_right", "rel_frobenius", "update_fraction"):
        assert (df[metric].abs() < 1e-10).all(), metric
    assert (df["pm_overlap"] == 100).all()
    by_type = aggregate_drift(df, "layer_type")
    assert set(by_type["layer_type"]) == {
        "embed", "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"
    }  # fmt: skip
    assert by_type.set_index("layer_type").loc["q_proj", "n_matrices"] == 2
    by_layer = aggregate_drift(df, "layer")
    assert list(by_layer["layer"]) == [0, 1] and (by_layer["n_matrices"] == 7).all()
    overall = aggregate_drift(df, None)
    assert overall.loc[0, "n_matrices"] == len(df)


def test_tied_and_untied_lm_head(tmp_path):
    base = qwen_like_state(0)  # tied: no lm_head.weight
    untied = perturbed(qwen_like_state(0, head=True), 1e-3, 2)
    save_single(base, tmp_path / "base")
    save_single(untied, tmp_path / "untied")
    df = parameter_drift(tmp_path / "untied", tmp_path / "base", k=3, device="cpu")
    row = df.set_index("name").loc["lm_head.weight"]
    assert row["layer_type"] == "lm_head" and pd.isna(row["layer"])
    expected = matrix_drift(base["model.embed_tokens.weight"], untied["lm_head.weight"], k=3)
    assert row["nss"] == pytest.approx(expected["nss"], rel=1e-9)


def test_bf16_checkpoints_are_upcast(tmp_path):
    base = {k: v.to(torch.bfloat16) for k, v in qwen_like_state(0, layers=1).items()}
    save_single(base, tmp_path / "bf16")
    df = parameter_drift(tmp_path / "bf16", tmp_path / "bf16", k=2, device="cpu")
    assert (df["rel_frobenius"] == 0).all()


def test_a_tiny_qwen2_saved_by_transformers(tmp_path):
    """The real layout: HF names, tied embeddings, and sharding by `save_pretrained`."""
    model = tiny_qwen2(vocab_size=40, seed=0)
    model.save_pretrained(tmp_path / "base")
    with torch.no_grad():
        model.model.layers[1].mlp.down_proj.weight.mul_(1.01)
    model.save_pretrained(tmp_path / "trained", max_shard_size="4KB")
    assert (tmp_path / "trained" / "model.safetensors.index.json").exists()
    df = parameter_drift(tmp_path / "trained", tmp_path / "base", k=4, device="cpu")
    assert len(df) == 1 + 2 * 7  # embedding + 7 projections per layer; lm_head tied
    moved = df[df["rel_frobenius"] > 0]
    assert list(moved["name"]) == ["model.layers.1.mlp.down_proj.weight"]
    assert moved.iloc[0]["rel_frobenius"] == pytest.approx(0.01, rel=1e-4)
    assert moved.iloc[0]["nss"] == pytest.approx(0.01, rel=1e-4)  # uniform scaling
    assert moved.iloc[0]["max_pa_left"] < 1e-3  # ... keeps the singular vectors
    assert moved.iloc[0]["update_fraction"] == 100.0


def test_layer_info():
    assert layer_info("model.layers.3.self_attn.q_proj.weight") == (3, "q_proj")
    assert layer_info("model.layers.12.mlp.down_proj.weight") == (12, "down_proj")
    assert layer_info("model.embed_tokens.weight") == (None, "embed")
    assert layer_info("lm_head.weight") == (None, "lm_head")


def test_bad_checkpoints_name_the_file(tmp_path):
    save_single(qwen_like_state(0), tmp_path / "a")
    save_single(qwen_like_state(0, hidden=8), tmp_path / "narrow")
    save_single(qwen_like_state(0, layers=1), tmp_path / "short")
    with pytest.raises(FileNotFoundError, match="missing"):
        parameter_drift(tmp_path / "missing", tmp_path / "a")
    with pytest.raises(ValueError, match="shape"):
        parameter_drift(tmp_path / "narrow", tmp_path / "a", device="cpu")
    with pytest.raises(ValueError, match=r"short.*no matrix 'model\.layers\.1"):
        parameter_drift(tmp_path / "a", tmp_path / "short", device="cpu")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="empty"):
        parameter_drift(tmp_path / "empty", tmp_path / "a")


def test_cli_drift_params(tmp_path, capsys):

    save_single(qwen_like_state(0), tmp_path / "base")
    save_single(perturbed(qwen_like_state(0), 1e-2, 1), tmp_path / "trained")
    parser = cli_parser()
    out = tmp_path / "out"
    args = parser.parse_args(
        ["drift-params", "--checkpoint", str(tmp_path / "trained"), "--reference",
         str(tmp_path / "base"), "--out", str(out / "m.csv"), "--by-type-out",
         str(out / "t.csv"), "--by-layer-out", str(out / "l.csv"), "--k", "3", "--device", "cpu"]
    )  # fmt: skip
    args.run(args)
    assert len(pd.read_csv(out / "m.csv")) == 15
    assert "q_proj" in set(pd.read_csv(out / "t.csv")["layer_type"])
    assert list(pd.read_csv(out / "l.csv")["layer"]) == [0, 1]
    assert json.loads(capsys.readouterr().out)["rel_frobenius"] > 0
