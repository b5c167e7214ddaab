"""Collapse forensics: n-gram counts against a direct Counter, the degenerate flags on
constructed outputs, format violations (verifier reasons or a rule), lengths, the artifact's
trend from train logs and from responses, and the `collapse-forensics` subcommand."""

import json
from collections import Counter

import pytest

from cptlab.cli import parser as cli_parser
from cptlab.drift.collapse import (
    DegeneracyRule,
    artifact_trend_from_logs,
    artifact_trend_from_responses,
    collapse_forensics,
    completion_forensics,
    degeneracy_reasons,
    most_frequent_artifact,
)
from cptlab.drift.text import ngrams, repetition_rate, tokenize

TOKENS = {"boxed": "\\boxed"}
NORMAL = "We add the two numbers: 3 + 4 = 7, then double it to get 14. So \\boxed{14}."
LOOP = "\\boxed{14} " * 12
STUTTER = "the answer is " * 10 + "\\boxed{1}"


def test_degenerate_outputs_are_flagged_and_normal_ones_not():
    assert degeneracy_reasons(NORMAL, 4, TOKENS) == []
    why = degeneracy_reasons(LOOP, 4, TOKENS)
    assert any(w.startswith("boxed x12") for w in why) and any("repetition" in w for w in why)
    why = degeneracy_reasons(STUTTER, 4, TOKENS)
    assert why and not any("boxed" in w for w in why)  # a loop without the format token
    # Short outputs are not judged by repetition; the format-token rule still applies.
    assert degeneracy_reasons("ok ok ok ok", 2, TOKENS) == []
    assert degeneracy_reasons("\\boxed{1}" * 2, 4, TOKENS, DegeneracyRule(max_format_repeats=1))


def test_top_ngrams_and_rates_match_a_direct_count():
    texts = [NORMAL, LOOP, STUTTER, "short"]
    report = completion_forensics(texts, ngram=3, format_tokens=TOKENS, top=5)
    counts = Counter(g for t in texts for g in ngrams(tokenize(t), 3))
    total = sum(counts.values())
    expected = [(" ".join(g), c) for g, c in counts.most_common(5)]
    assert [(e["ngram"], e["count"]) for e in report["top_ngrams"]] == expected
    assert report["top_ngrams"][0]["share"] == pytest.approx(expected[0][1] / total)
    rates = [repetition_rate(tokenize(t), 3) for t in texts]
    assert report["repetition_rate"] == pytest.approx(sum(rates) / 4)
    assert report["degenerate"]["count"] == 2
    assert [e["label"] for e in report["degenerate"]["examples"]] == ["1", "2"]
    boxed = report["format_tokens"]["boxed"]
    assert boxed["total"] == 1 + 12 + 1 and boxed["repeated_share"] == 0.25
    assert report["most_frequent_artifact"] == "boxed"
    lengths = report["length"]["tokens"]
    assert lengths["max"] == len(tokenize(LOOP)) == 48 and lengths["min"] == 1
    assert sum(lengths["histogram"]["counts"]) == 4
    assert report["format_violation_rate"] is None  # neither reasons nor a rule


def test_format_violations_from_reasons_or_a_rule():
    texts = [NORMAL, "no answer here", LOOP]
    by_reasons = completion_forensics(texts, format_tokens=TOKENS,
                                      reasons=[None, "no \\boxed{} answer", None])  # fmt: skip
    assert by_reasons["format_violation_rate"] == pytest.approx(1 / 3)
    assert by_reasons["format_violation_source"] == "reasons"
    one_box = completion_forensics(texts, format_tokens=TOKENS,
                                   format_rule=lambda t: t.count("\\boxed") == 1)  # fmt: skip
    assert one_box["format_violation_rate"] == pytest.approx(2 / 3)
    assert most_frequent_artifact(["plain"], TOKENS) is None


def write_responses(path, items):
    path.write_text("".join(json.dumps({"id": i, "completions": c, "rewards": [0.0] * len(c),
                                        "reasons": r}) + "\n"
                            for i, (c, r) in items.items()))  # fmt: skip


def test_collapse_forensics_reads_every_completion(tmp_path):
    write_responses(tmp_path / "resp.jsonl", {
        "q1": ([NORMAL, LOOP], [None, None]),
        "q2": (["nothing", STUTTER], ["no \\boxed{} answer", None]),
    })  # fmt: skip
    out = tmp_path / "drift" / "collapse.json"
    report = collapse_forensics(tmp_path / "resp.jsonl", ngram=4, format_tokens=TOKENS, out=out)
    assert report["n_completions"] == 4
    assert report["format_violation_rate"] == 0.25
    assert {e["label"] for e in report["degenerate"]["examples"]} == {"q1#1", "q2#1"}
    assert json.loads(out.read_text())["responses"].endswith("resp.jsonl")


def test_artifact_trend_from_train_logs():
    records = [
        {"step": 2, "loss": 0.1, "collapse/format/boxed/per_completion": 1.5,
         "collapse/top_ngram_share": 0.2},
        {"step": 1, "loss": 0.2, "collapse/format/boxed/per_completion": 1.0,
         "collapse/top_ngram_share": 0.1},
        {"eval_loss": 0.3},
    ]  # fmt: skip
    df = artifact_trend_from_logs(records, "collapse/format/boxed/")
    assert list(df.columns) == ["step", "collapse/format/boxed/per_completion"]
    assert list(df["step"]) == [1, 2]
    assert list(df["collapse/format/boxed/per_completion"]) == [1.0, 1.5]
    assert len(artifact_trend_from_logs(records, "collapse/").columns) == 3
    with pytest.raises(ValueError, match="no 'step'"):
        artifact_trend_from_logs([{"collapse/x": 1}], "collapse/")


def test_artifact_trend_from_responses(tmp_path):
    write_responses(tmp_path / "s20.jsonl", {"q": ([LOOP, LOOP], [None, None])})
    df = artifact_trend_from_responses(
        {20: tmp_path / "s20.jsonl", 0: [NORMAL, NORMAL], 10: [NORMAL, "\\boxed{1} \\boxed{1}"]},
        "\\boxed",
    )
    assert list(df["step"]) == [0, 10, 20]
    assert list(df["per_completion"]) == [1.0, 1.5, 12.0]
    assert list(df["repeated_share"]) == [0.0, 0.5, 1.0]
    assert df["top_ngram_share"].is_monotonic_increasing


def test_cli_collapse_forensics(tmp_path, capsys):

    write_responses(tmp_path / "resp.jsonl", {"q": ([NORMAL, LOOP], [None, None])})
    write_responses(tmp_path / "s0.jsonl", {"q": ([NORMAL], [None])})
    (tmp_path / "train_log.jsonl").write_text(
        json.dumps({"step": 1, "collapse/format/boxed/per_completion": 1.0}) + "\n"
    )
    parser = cli_parser()
    out = tmp_path / "out"
    args = parser.parse_args(
        ["collapse-forensics", "--responses", str(tmp_path / "resp.jsonl"), "--out",
         str(out / "c.json"), "--format-token", "boxed=\\boxed", "--format-regex", r"\\boxed\{",
         "--log", str(tmp_path / "train_log.jsonl"), "--log-out", str(out / "log.csv"),
         "--step-responses", f"0={tmp_path / 's0.jsonl'}", f"10={tmp_path / 'resp.jsonl'}",
         "--trend-out", str(out / "trend.csv")]
    )  # fmt: skip
    args.run(args)
    report = json.loads((out / "c.json").read_text())
    assert report["format_violation_source"] == "format_rule"
    assert report["degenerate"]["count"] == 1
    assert (out / "log.csv").read_text().startswith("step,collapse/format/boxed/per_completion")
    assert (out / "trend.csv").read_text().splitlines()[2].startswith("10,2,6.5")
    assert json.loads(capsys.readouterr().out)["degenerate_share"] == 0.5
