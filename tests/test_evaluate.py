"""`cptlab evaluate` on a tiny random model: EVAL.json fields, responses, interval, greedy
determinism, sampled avg@k, and the backend errors."""

from __future__ import annotations

import itertools
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import run_cli, run_command
from tiny_world import TINY_MODEL, tiny_rows, write_rows

from cptlab.base_model.architecture import build_model
from cptlab.base_model.settings import ArchitectureSettings
from cptlab.base_model.tokenizer import train_tokenizer
from cptlab.chat import prompt_length
from cptlab.checkpoints import load_tokenizer
from cptlab.errors import ConfigError, InputError
from cptlab.evaluation.evaluate import (
    checkpoint_tasks,
    earlier_verdicts,
    score_responses,
    shard_of,
    statistics,
)
from cptlab.evaluation.generation import count_generated
from cptlab.evaluation.scoring import PASS_FRACTION_KEYS, SAMPLED_KEYS
from cptlab.evaluation.settings import EvalSettings
from cptlab.layout import Layout
from cptlab.rows import RowError
from cptlab.verifiers import VERIFIERS, Verdict, register

os.environ.setdefault("OMP_NUM_THREADS", "1")
torch.set_num_threads(1)

EVAL_KEYS = {
    "benchmark", "domain", "split", "checkpoint", "accuracy", "ci_low", "ci_high", "n",
    "too_long", "samples", "temperature", "top_p", "backend", "seed", "seconds",
    "tokens_generated", "test_pass_fraction", "test_pass_fraction_ci_low",
    "test_pass_fraction_ci_high", "memory", "pass_at_1", "pass_at_1_ci_low", "pass_at_1_ci_high",
    "pass_at_k", "pass_at_k_ci_low", "pass_at_k_ci_high", "maj_at_k", "maj_at_k_ci_low",
    "maj_at_k_ci_high", "pass_at", "maj_at_k_vote",
}  # fmt: skip
MAX_TOKENS = 8
EVEN_ID = "tiny_even_id"
LENGTH = "tiny_length"

if EVEN_ID not in VERIFIERS:

    @register(EVEN_ID)
    def _even_id(completion: str, row: dict) -> Verdict:
        """Reward 1 for the items with an even index, whatever the completion."""
        return Verdict(float(int(row["id"][-1]) % 2 == 0), "ok")


if LENGTH not in VERIFIERS:

    @register(LENGTH)
    def _length(completion: str, row: dict) -> Verdict:
        """A reward in {0, 1/4, ..., 1} that varies with the completion's length."""
        return Verdict((len(completion) % 5) / 4, "ok")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A tiny random model and 10 `math_id` rows; items with an even index score 1."""
    folder = tmp_path_factory.mktemp("eval")
    rows = tiny_rows(n=10, verifier=EVEN_ID)
    for row in rows:
        row["benchmark"] = "math_id"
        row["id"] = row["id"].replace("tiny_train", "math_id")
    data = write_rows(folder / "data" / "math_id.jsonl", rows)
    for row in rows:
        row["metadata"]["verifier"] = LENGTH
    write_rows(folder / "length" / "math_id.jsonl", rows)
    return folder, save_model(folder / "model", rows), data


def save_model(folder: Path, rows: list[dict]) -> Path:
    """A random tiny model with weights large enough (std 0.3) that its greedy completions
    depend on the prompt."""
    tokenizer = train_tokenizer(
        [r["prompt"][0]["content"] + " " + r["metadata"]["solution"] for r in rows], 300
    )
    model = build_model(ArchitectureSettings(**TINY_MODEL), tokenizer, seed=0)
    torch.manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:
                p.normal_(0.0, 0.3)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def config_file(folder: Path, name: str, **evaluation) -> Path:
    spec = {
        "n": 6, "samples": 1, "temperature": 0.0, "top_p": 1.0, "max_new_tokens": MAX_TOKENS,
        "batch_size": 4, "backend": "hf", "seed": 0,
    }  # fmt: skip
    spec.update(evaluation)
    config = {
        "experiment": "t",
        "data": {"seed": 0, "domains": {"math": {"id": ["math_id"]}}},
        "base": {"seed": 0},
        "evaluation": spec,
    }
    path = folder / f"{name}.json"
    path.write_text(json.dumps(config))
    return path


def evaluate_argv(world, name: str, data=None, **evaluation) -> list[str]:
    folder, model, default = world
    out, responses = folder / name / "eval.json", folder / name / "responses.jsonl"
    return [
        "evaluate", "--config", str(config_file(folder, name, **evaluation)),
        "--checkpoint", str(model), "--data", str(data or default), "--benchmark", "math_id",
        "--out", str(out), "--responses", str(responses), "--threads", "1",
    ]  # fmt: skip


def evaluate(world, name: str, data=None, **evaluation) -> tuple[dict, list[dict], Path]:
    folder = world[0]
    out, responses = folder / name / "eval.json", folder / name / "responses.jsonl"
    run_command(evaluate_argv(world, name, data, **evaluation))
    lines = [json.loads(x) for x in responses.read_text().splitlines()]
    return json.loads(out.read_text()), lines, out


def test_eval_json_and_responses(world):
    record, lines, out = evaluate(world, "greedy")
    assert set(record) == EVAL_KEYS
    assert (record["benchmark"], record["domain"], record["split"]) == ("math_id", "math", "id")
    assert record["checkpoint"] == str(world[1])
    assert record["n"] == 6 and len(lines) == 6  # first n items
    assert [x["id"] for x in lines] == [f"math_id-{i:04d}" for i in range(6)]
    assert all(len(x["completions"]) == len(x["rewards"]) == len(x["reasons"]) == 1 for x in lines)
    rewards = [x["rewards"][0] for x in lines]
    assert rewards == [1.0, 0.0, 1.0, 0.0, 1.0, 0.0]
    assert record["accuracy"] == pytest.approx(0.5)
    assert record["ci_low"] <= record["accuracy"] <= record["ci_high"]
    assert record["ci_low"] < record["ci_high"]
    assert (record["samples"], record["temperature"], record["backend"]) == (1, 0.0, "hf")
    assert 6 <= record["tokens_generated"] <= 6 * MAX_TOKENS
    assert record["seconds"] > 0
    # the process's peak resident memory so far, the memory model's measure (rehearsal results)
    assert record["memory"]["device"] == "cpu"
    assert 0 < record["memory"]["peak_rss_bytes"] < record["memory"]["host_total_bytes"]
    # its verifier counts no tests
    assert [record[k] for k in PASS_FRACTION_KEYS] == [None] * 3
    assert not any("test_pass_fractions" in x for x in lines)
    # EVAL.json marks completion: it is written after the responses file
    assert out.stat().st_mtime_ns >= (out.parent / "responses.jsonl").stat().st_mtime_ns


def test_code_benchmarks_report_the_test_pass_fraction_beside_the_accuracy():
    """The study's reward is all-pass (`accuracy`); verl reports the mean fraction of tests
    passed (`acc`, feedback/code.py): both, averaged over samples then items."""
    add = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
    tests = {"testtype": "stdin", "fn_name": "", "time_limit": 1}
    rows = [
        {"id": "two", "metadata": {"verifier": "study_code", "study_tests": {
            **tests, "inputs": ["1 2\n", "3 4\n"], "outputs": ["3\n", "8\n"]}}},
        {"id": "one", "metadata": {"verifier": "study_code", "study_tests": {
            **tests, "inputs": ["1 2\n"], "outputs": ["3\n"]}}},
    ]  # fmt: skip
    responses, _ = score_responses(rows, [[add, "no code"], [add, "```python\nprint(0)\n```"]])
    result = statistics(responses)
    assert result["accuracy"] == pytest.approx((0.0 + 0.5) / 2)
    assert result["test_pass_fraction"] == pytest.approx((0.25 + 0.5) / 2)
    low, high = result["test_pass_fraction_ci_low"], result["test_pass_fraction_ci_high"]
    assert low <= result["test_pass_fraction"] <= high
    fractions = [r["test_pass_fractions"] for r in responses]
    assert fractions == [[0.5, 0.0], [1.0, 0.0]]


def _chance_any_correct(rewards: list[float], k: int) -> float:
    """pass@k by enumeration: the share of the k-subsets of the samples holding a correct one."""
    subsets = list(itertools.combinations(rewards, k))
    return sum(any(r >= 1 for r in subset) for subset in subsets) / len(subsets)


def test_pass_at_k_is_the_unbiased_estimator_and_maj_at_k_the_plurality_answer():
    """pass@j against an enumeration of the j-subsets of each item's samples; maj@k: the most
    frequent answer (a tie to the first given, no vote without an answer) is judged, and an
    item without answers votes with its verdicts (more than half right)."""
    responses = [
        # the plurality "a" is wrong although one sample is right
        {"rewards": [0.0, 1.0, 0.0, 0.0], "answers": ["a", "b", "a", None]},
        # a tie between "x" (first, right) and "y"
        {"rewards": [1.0, 0.0, 1.0, 0.0], "answers": ["x", "y", "x", "y"]},
        # no answer to compare (a program): 3 of 4 verdicts right
        {"rewards": [1.0, 1.0, 1.0, 0.0]},
        # half right is no majority; a partial reward (0.5) is not a success
        {"rewards": [1.0, 0.5, 1.0, 0.0]},
    ]
    record = statistics(responses, seed=0)
    for j in (1, 2, 4):
        expected = np.mean([_chance_any_correct(r["rewards"], j) for r in responses])
        assert record["pass_at"][str(j)] == pytest.approx(expected)
    assert record["pass_at_1"] == pytest.approx(np.mean([1 / 4, 2 / 4, 3 / 4, 2 / 4]))
    assert record["pass_at_k"] == pytest.approx(1.0)  # every item has a right sample
    assert record["maj_at_k"] == pytest.approx(np.mean([0.0, 1.0, 1.0, 0.0]))
    assert record["maj_at_k_vote"] == "answers"
    for metric in ("pass_at_1", "maj_at_k"):
        assert record[f"{metric}_ci_low"] <= record[metric] <= record[f"{metric}_ci_high"]
    assert record["accuracy"] == pytest.approx(np.mean([0.25, 0.5, 0.75, 0.625]))


def test_greedy_evaluation_has_no_pass_at_k():
    record = statistics([{"rewards": [1.0]}, {"rewards": [0.0]}])
    assert all(record[key] is None for key in SAMPLED_KEYS) and record["pass_at"] is None


def test_verifiers_give_the_normalised_answers_that_maj_at_k_votes_on():
    """math_boxed compares normalised answers: `\\boxed{ 4 }` and `\\boxed{4}` are one vote, so
    two right answers outvote one wrong one; mcq gives its letter."""
    math = {"id": "m", "answer": "4", "metadata": {"verifier": "math_boxed"}}
    letter = {"id": "q", "answer": "B", "metadata": {"verifier": "mcq_letter"}}
    responses, _ = score_responses(
        [math, letter],
        [["\\boxed{5}", "\\boxed{ 4 }", "\\boxed{4}"], ["A", "B", "no letter here"]],
    )
    assert responses[0]["answers"] == ["5", "4", "4"]
    assert responses[1]["answers"] == ["A", "B", None]
    record = statistics(responses)
    assert record["maj_at_k"] == pytest.approx(0.5)  # math: "4" wins; mcq: a tie, "A" first


def test_greedy_is_deterministic(world):
    first, lines_a, _ = evaluate(world, "det_a")
    second, lines_b, _ = evaluate(world, "det_b", batch_size=2)  # other batching, same text
    assert len({x["completions"][0] for x in lines_a}) >= 4  # prompt-dependent text
    assert lines_a == lines_b
    assert first["accuracy"] == second["accuracy"]


def test_sampled_avg_at_k(world):
    data = world[0] / "length" / "math_id.jsonl"  # rewards vary with the completion
    sampled = {"samples": 3, "temperature": 1.0, "n": 5}
    record, lines, _ = evaluate(world, "sampled", data, seed=7, **sampled)
    assert record["n"] == 5 and len(lines) == 5 and record["samples"] == 3
    assert record["seed"] == 7
    assert evaluate(world, "sampled_again", data, seed=7, **sampled)[1] == lines  # reproducible
    assert evaluate(world, "sampled_other", data, seed=8, **sampled)[1] != lines
    assert all(len(x["completions"]) == 3 for x in lines)
    for x in lines:
        assert x["rewards"] == [(len(c) % 5) / 4 for c in x["completions"]]
    assert any(len(set(x["rewards"])) > 1 for x in lines)
    per_item = [sum(x["rewards"]) / 3 for x in lines]
    assert record["accuracy"] == pytest.approx(sum(per_item) / 5)
    assert len({c for x in lines for c in x["completions"]}) > 5  # samples differ
    assert record["ci_low"] <= record["accuracy"] <= record["ci_high"]


def test_samples_above_one_need_a_temperature(world):
    with pytest.raises(ConfigError, match="temperature > 0"):
        evaluate(world, "bad", samples=4, temperature=0.0)


def test_rows_of_another_benchmark_are_refused(world):
    folder, model, data = world
    with pytest.raises(RowError, match="expected only 'math_ood'"):
        run_command(
            [
                "evaluate", "--config", str(config_file(folder, "other")),
                "--checkpoint", str(model), "--data", str(data), "--benchmark", "math_ood",
                "--out", str(folder / "o.json"), "--responses", str(folder / "o.jsonl"),
            ]
        )  # fmt: skip
    assert not (folder / "o.json").exists()


def checkpoint_results(world, root: Path, **evaluation) -> Layout:
    """A results folder whose base is the world's model, with math_id (rewards by parity) and
    math_ood (rewards by completion length) prepared, and its effective config."""
    folder, model, data = world
    layout = Layout(root)
    shutil.copytree(model, layout.base_dir)
    layout.data_dir.mkdir(parents=True)
    shutil.copy2(data, layout.data_file("math_id"))
    length_rows = [
        json.loads(x) for x in (folder / "length" / "math_id.jsonl").read_text().splitlines()
    ]
    for row in length_rows:
        row["benchmark"], row["domain"] = "math_ood", "math"
        row["id"] = row["id"].replace("math_id", "math_ood")
    write_rows(layout.data_file("math_ood"), length_rows)
    config = json.loads(config_file(folder, "checkpoint", **evaluation).read_text())
    config["data"]["domains"]["math"]["ood"] = ["math_ood"]
    layout.config_file.write_text(json.dumps(config))
    return layout


def evaluate_checkpoint_argv(layout: Layout, *extra: str) -> list[str]:
    return ["evaluate-checkpoint", "--config", str(layout.config_file),
            "--results-dir", str(layout.root), *extra]  # fmt: skip


def test_a_checkpoint_is_evaluated_on_every_benchmark_in_one_load(world, tmp_path):
    """`evaluate-checkpoint`, the workflow's: the files the layout names, the same records as
    `evaluate` of each benchmark alone."""
    layout = checkpoint_results(world, tmp_path / "results")
    run_command(evaluate_checkpoint_argv(layout))
    alone, _, _ = evaluate(world, "alone")
    for name in ("math_id", "math_ood"):
        record = json.loads(layout.eval_file(name).read_text())
        assert record["benchmark"] == name and record["checkpoint"] == str(layout.base_dir)
        assert len(layout.responses_file(name).read_text().splitlines()) == record["n"] == 6
    together = json.loads(layout.eval_file("math_id").read_text())
    assert {k: together[k] for k in ("accuracy", "ci_low", "ci_high", "n")} == {
        k: alone[k] for k in ("accuracy", "ci_low", "ci_high", "n")
    }


def test_shards_are_contiguous_in_order_and_cover_every_row():
    rows = [{"i": i} for i in range(10)]
    parts = [shard_of(rows, index, 4) for index in range(1, 5)]
    assert [len(p) for p in parts] == [2, 3, 2, 3]
    assert [r for p in parts for r in p] == rows
    assert [len(shard_of(rows[:2], index, 3)) for index in (1, 2, 3)] == [0, 1, 1]
    with pytest.raises(ValueError, match="must be in 1..4"):
        shard_of(rows, 5, 4)


def test_a_split_benchmark_merges_to_what_one_job_gives(world, tmp_path):
    """evaluation.shards: the checkpoint's job evaluates the other benchmarks, each shard job
    a contiguous part, and `merge-shards` writes the files one job would have written: the
    same responses (greedy decoding does not depend on the batch) and statistics."""
    whole = checkpoint_results(world, tmp_path / "whole")
    run_command(evaluate_checkpoint_argv(whole))
    split = checkpoint_results(world, tmp_path / "split", shards={"math_ood": 4})
    run_command(evaluate_checkpoint_argv(split))
    assert split.eval_file("math_id").is_file() and not split.eval_file("math_ood").exists()
    with pytest.raises(FileNotFoundError, match="shard 1 of 4 is missing"):
        run_command(["merge-shards", "--config", str(split.config_file),
                     "--results-dir", str(split.root), "--benchmark", "math_ood"])  # fmt: skip
    for index in range(1, 5):
        run_command(evaluate_checkpoint_argv(split, "--shard", f"math_ood:{index}"))
    shard_rows = [
        json.loads(split.shard_files("math_ood", index, 4)[0].read_text())["n"]
        for index in range(1, 5)
    ]
    assert shard_rows == [1, 2, 1, 2]  # the first 6 rows (evaluation.n) in 4 parts
    run_command(["merge-shards", "--config", str(split.config_file),
                 "--results-dir", str(split.root), "--benchmark", "math_ood"])  # fmt: skip
    merged = json.loads(split.eval_file("math_ood").read_text())
    one_job = json.loads(whole.eval_file("math_ood").read_text())
    assert (
        split.responses_file("math_ood").read_text() == whole.responses_file("math_ood").read_text()
    )
    same = ("accuracy", "ci_low", "ci_high", "n", "too_long", *PASS_FRACTION_KEYS)
    assert {k: merged[k] for k in same} == {k: one_job[k] for k in same}
    assert merged["shards"] == 4 and merged["checkpoint"] == str(split.base_dir)
    assert merged["tokens_generated"] == one_job["tokens_generated"]
    shards = [json.loads(split.shard_files("math_ood", i, 4)[0].read_text()) for i in range(1, 5)]
    assert merged["memory"] == max((s["memory"] for s in shards), key=lambda m: m["peak_rss_bytes"])


def test_a_shard_the_config_does_not_name_is_refused(world, tmp_path):
    layout = checkpoint_results(world, tmp_path / "results", shards={"math_ood": 2})
    with pytest.raises(InputError, match="evaluation.shards does not split it"):
        run_command(evaluate_checkpoint_argv(layout, "--shard", "math_id:1"))
    with pytest.raises(ValueError, match="must be in 1..2"):
        run_command(evaluate_checkpoint_argv(layout, "--shard", "math_ood:3"))
    with pytest.raises(ValueError, match="expected BENCHMARK:I"):
        run_command(evaluate_checkpoint_argv(layout, "--shard", "math_ood"))
    assert not any(layout.eval_dir().rglob("*.json"))


def test_count_generated_stops_at_the_first_end_token():
    pad, eos = 0, 9
    generated = torch.tensor([[5, 6, eos, pad, pad], [5, 6, 7, 8, 5], [eos, pad, pad, pad, pad]])
    assert count_generated(generated, [eos]) == 3 + 5 + 1


def test_vllm_missing_is_a_clear_error(world, capsys):
    try:
        import vllm  # noqa: F401

        pytest.skip("vllm is installed")
    except ImportError:
        pass
    code, err = run_cli(evaluate_argv(world, "vllm_missing", backend="vllm"), capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "evaluation.backend=vllm but vllm is not installed" in err


@pytest.mark.vllm
def test_vllm_refuses_an_unsupported_head_size_in_one_line(world, capsys):
    """The tiny model's heads have size 16: vLLM's CPU attention refuses them, and the command
    says so in one line before any engine starts (`make test-vllm`; tests/test_vllm.py)."""
    pytest.importorskip("vllm")
    from cptlab.evaluation.vllm_backend import cpu_head_sizes

    if cpu_head_sizes() is None or 16 in cpu_head_sizes():
        pytest.skip("this vLLM build takes head size 16")
    code, err = run_cli(evaluate_argv(world, "vllm_head", backend="vllm"), capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "head size 16" in err and "evaluation.backend=hf" in err


def test_prompts_over_the_length_limit_are_counted_not_scored(world):
    """evaluation.max_prompt_length drops items as the study's filter does (the templated
    prompt's tokens), and EVAL.json counts them."""
    folder, model, data = world
    rows = [json.loads(x) for x in data.read_text().splitlines()][:6]
    lengths = [prompt_length(load_tokenizer(model), r["prompt"], {}) for r in rows]
    limit = sorted(lengths)[len(lengths) // 2]
    kept = [r["id"] for r, n in zip(rows, lengths, strict=True) if n <= limit]
    assert 0 < len(kept) < len(rows), lengths  # the limit splits the items
    record, lines, _ = evaluate(world, "limited", max_prompt_length=limit)
    assert [x["id"] for x in lines] == kept
    assert (record["n"], record["too_long"]) == (len(kept), len(rows) - len(kept))
    assert evaluate(world, "unlimited")[0]["too_long"] == 0


def test_a_limit_no_prompt_fits_is_an_error_naming_the_key(world, capsys):
    code, err = run_cli(evaluate_argv(world, "none_fit", max_prompt_length=1), capsys)
    assert code == 2 and "evaluation.max_prompt_length=1" in err


def test_each_checkpoint_is_evaluated_with_its_training_template():
    """chat_template_kwargs null (the default): the base with the training section's template,
    a stage with its method's (SDPO_0^CoT thinks at paper scale); a value: every checkpoint."""
    config = {
        "training": {"chat_template_kwargs": {"enable_thinking": False}},
        "methods": {
            "grpo": {"trainer": "grpo"},
            "cot": {
                "trainer": "sdpo",
                "training": {"chat_template_kwargs": {"enable_thinking": True}},
            },
        },
        "evaluation": {},
    }  # fmt: skip
    assert EvalSettings.for_checkpoint(config).chat_template_kwargs == {"enable_thinking": False}
    assert EvalSettings.for_checkpoint(config, "grpo").chat_template_kwargs == {
        "enable_thinking": False
    }
    assert EvalSettings.for_checkpoint(config, "cot").chat_template_kwargs == {
        "enable_thinking": True
    }
    config["evaluation"]["chat_template_kwargs"] = {"enable_thinking": False}
    assert EvalSettings.for_checkpoint(config, "cot").chat_template_kwargs == {
        "enable_thinking": False
    }


COUNTED = "tiny_counted"
COUNTED_CALLS: list[str] = []

if COUNTED not in VERIFIERS:

    @register(COUNTED)
    def _counted(completion: str, row: dict) -> Verdict:
        """Right when the completion is the row's answer; "?" is malformed; each call kept."""
        COUNTED_CALLS.append(completion)
        if completion == "?":
            return Verdict(0.0, "unreadable", reason="malformed")
        return Verdict(float(completion == row["answer"]), "ok", answer=completion)


def test_a_checkpoint_reuses_the_earlier_verdicts_of_the_same_completions_only(tmp_path):
    """evaluation.reuse_verdicts: a verdict of the earlier checkpoint serves the same completion
    of the same item, and gives the response that scoring it again gives; another item's, a
    new completion, and a verdict with a reason (malformed) are scored again."""
    rows = [{"id": f"r{i}", "answer": str(i), "metadata": {"verifier": COUNTED}} for i in range(3)]
    earlier = tmp_path / "earlier.responses.jsonl"
    first, reused = score_responses(rows, [["0"], ["x"], ["?"]])
    assert reused == 0
    earlier.write_text("".join(json.dumps(r) + "\n" for r in first))
    memo = earlier_verdicts(earlier)
    assert set(memo) == {("r0", "0"), ("r1", "x")}  # the malformed "?" has a reason
    later = [["0", "x"], ["1"], ["?"]]  # "x" is r1's earlier completion, not r0's
    COUNTED_CALLS.clear()
    with_memo, reused = score_responses(rows, later, memo)
    assert reused == 1 and COUNTED_CALLS == ["x", "1", "?"]
    assert with_memo == score_responses(rows, later)[0]
    # positive control: the verdict served is the memo's, not a new one
    memo["r0", "0"] = Verdict(0.5, "", answer="memo")
    served, _ = score_responses(rows, later, memo)
    assert served[0]["rewards"][0] == 0.5 and served[0]["answers"][0] == "memo"


def test_a_chain_checkpoint_reads_the_verdicts_of_the_one_its_stage_started_from():
    """Stage 1 (its end and the checkpoints inside it) reads the base's responses, stage k the
    end of stage k - 1; the base reads none, and nothing is read with the key off."""
    layout = Layout(Path("results"))
    on = EvalSettings(reuse_verdicts=True, within_stage={"every": 10})
    assert on.earlier_checkpoint(None, None, 0) is None
    assert on.earlier_checkpoint("grpo", 0, 1) == ("grpo", 0, 0)
    assert on.earlier_checkpoint("grpo", 0, "3") == ("grpo", 0, 2)
    assert EvalSettings().earlier_checkpoint("grpo", 0, 2) is None
    tasks = checkpoint_tasks(on, layout, ["math_id"], ("grpo", 0, 1))
    assert [t.earlier for t in tasks] == [layout.responses_file("math_id")]
    tasks = checkpoint_tasks(on, layout, ["math_id"], ("grpo", 0, 2), step=10)
    assert tasks[0].earlier == layout.responses_file("math_id", "grpo", 0, 1)
    assert tasks[0].out == layout.eval_file("math_id", "grpo", 0, 2, 10)
    assert checkpoint_tasks(on, layout, ["math_id"], (None, None, 0))[0].earlier is None
