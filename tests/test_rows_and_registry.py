"""The canonical row schema, the benchmark registry and `cptlab prepare-data`."""

import json
import re

import pytest

from cptlab.cli import main
from cptlab.domains import BENCHMARKS, benchmarks_of, get_benchmark, load_benchmark, verifier_for
from cptlab.domains.embedded.tool import TOOLS
from cptlab.errors import InputError
from cptlab.evaluation.scoring import score_completions
from cptlab.rows import RowError, read_jsonl, validate_row
from cptlab.teacher_prompt import strip_reasoning
from cptlab.validation import load_config

# The domains the default config runs: the list the code reads (data.domains).
EMBEDDED_DOMAINS = load_config("config/config.yaml")["data"]["domains"]

GOOD = {
    "id": "x-1",
    "domain": "math",
    "benchmark": "math_id",
    "prompt": [{"role": "user", "content": "Compute 1 + 1."}],
    "answer": "2",
    "metadata": {},
}


def test_valid_row_passes():
    assert validate_row(dict(GOOD)) == GOOD


@pytest.mark.parametrize(
    "change, message",
    [
        ({"answer": ""}, "empty reference 'answer'"),
        ({"answer": None}, "'answer' must be a string"),
        ({"prompt": []}, "non-empty list"),
        ({"prompt": [{"role": "user", "content": "   "}]}, "no non-empty user message"),
        ({"prompt": [{"role": "robot", "content": "hi"}]}, "unknown role"),
        ({"metadata": []}, "'metadata' must be an object"),
        ({"id": ""}, "empty 'id'"),
    ],
)
def test_malformed_rows_name_the_row_and_problem(change, message):
    with pytest.raises(RowError, match=message) as err:
        validate_row({**GOOD, **change}, where="data.jsonl:3")
    assert "data.jsonl:3" in str(err.value)


def test_missing_key_is_named():
    row = dict(GOOD)
    del row["answer"]
    with pytest.raises(RowError, match=r"missing key\(s\) \['answer'\]"):
        validate_row(row)


def test_read_jsonl_names_file_and_line(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_bytes(json.dumps(GOOD).encode() + b"\n" + b'{"id": "\xff\xfe"}\n')
    with pytest.raises(RowError, match=r"rows.jsonl:2: invalid UTF-8"):
        read_jsonl(path)
    path.write_text(json.dumps(GOOD) + "\n{not json\n")
    with pytest.raises(RowError, match=r"rows.jsonl:2: invalid JSON"):
        read_jsonl(path)


def test_unknown_benchmark_and_domain_are_named():
    with pytest.raises(InputError, match="unknown benchmark 'mathh_id'"):
        get_benchmark("mathh_id")
    with pytest.raises(InputError, match="unknown domain 'chemistry'"):
        benchmarks_of("chemistry")


def test_every_embedded_domain_has_its_splits():
    for domain, spec in EMBEDDED_DOMAINS.items():
        splits = {b.split for b in benchmarks_of(domain)}
        expected = (
            {"pretrain"}
            | ({"train", "id"} if spec.get("train") else set())
            | ({"ood"} if spec.get("ood") else set())
        )
        assert splits == expected, domain


@pytest.mark.parametrize(
    "name",
    sorted(
        b
        for b in BENCHMARKS
        if BENCHMARKS[b].defaults == {} and b.split("_")[0] in EMBEDDED_DOMAINS
    ),
)
def test_synthetic_benchmarks_are_deterministic_and_gold_solutions_score_one(name):
    rows = load_benchmark(name, n=30, seed=3)
    assert rows == load_benchmark(name, n=30, seed=3)
    assert rows != load_benchmark(name, n=30, seed=4)
    verdicts = score_completions(rows, [[r["metadata"]["solution"]] for r in rows])
    bad = [(r["id"], v[0]) for r, v in zip(rows, verdicts, strict=True) if v[0].reward != 1.0]
    assert not bad, bad[:3]


@pytest.mark.parametrize(
    "domain, answer_only",
    [
        ("math", lambda text, row: text.startswith(("\\boxed{", "The answer is \\boxed{"))),
        ("science", lambda text, row: text == f"<answer>{row['answer']}</answer>"),
        ("tool", lambda text, row: text.startswith("Action: ")),
    ],
)
def test_sdpo_0_demonstrations_lose_their_reasoning_and_stay_right(domain, answer_only):
    """SDPO_0 deletes a train benchmark's `reasoning` from demonstrations (SDPO_0^CoT keeps
    it): on the reference solutions what remains is the answer alone, still scored right."""
    benchmark = get_benchmark(f"{domain}_train")
    rows = load_benchmark(benchmark.name, n=60, seed=0)
    stripped = [strip_reasoning(r["metadata"]["solution"], benchmark.reasoning) for r in rows]
    assert all(answer_only(text, row) for text, row in zip(stripped, rows, strict=True))
    changed = sum(t != r["metadata"]["solution"] for t, r in zip(stripped, rows, strict=True))
    assert changed >= len(rows) / 4  # math: one of its two answer forms reasons
    verdicts = score_completions(rows, [[text] for text in stripped])
    assert all(v[0].reward == 1.0 for v in verdicts)
    # Evaluation benchmarks carry none; code answers have no reasoning to strip.
    assert get_benchmark(f"{domain}_id").reasoning is None
    assert get_benchmark("code_train").reasoning is None


@pytest.mark.parametrize("domain", ["math", "science", "tool"])
def test_a_stripped_demonstration_never_looks_like_a_whole_reference(domain):
    """A teacher shown a stripped demonstration must be able to tell that the answer reasoned:
    were a reference form the stripped form of another (math's former bare `\\boxed{n}`), the
    warm-up would teach SDPO_0's teacher that such a demonstration asks for a bare answer."""
    benchmark = get_benchmark(f"{domain}_train")
    rows = load_benchmark(benchmark.name, n=200, seed=0)

    def shape(text: str, row: dict) -> str:  # the answer's form, whatever the item
        return text.replace(row["answer"], "<v>")

    solutions = [(r["metadata"]["solution"], r) for r in rows]
    whole = {shape(text, r) for text, r in solutions if not re.search(benchmark.reasoning, text)}
    stripped = {
        shape(strip_reasoning(text, benchmark.reasoning), r)
        for text, r in solutions
        if re.search(benchmark.reasoning, text)
    }
    assert stripped and not stripped & whole, sorted(stripped & whole)[:3]


def _second_tool_phrasing(text: str) -> bool:
    request = text.split("Request: ")[1].split("\n")[0]
    for tool in TOOLS:
        patterns = [re.escape(t).replace(r"\{", "{") for t in tool.requests]
        patterns = [re.sub(r"\{\w+\\?}", ".+", t) for t in patterns]
        if re.fullmatch(patterns[1], request):
            return True
        if re.fullmatch(patterns[0], request):
            return False
    raise AssertionError(request)


@pytest.mark.parametrize(
    "domain, cue_in_prompt",
    [
        ("math", lambda text: text.startswith(("Find", "Give"))),
        ("science", lambda text: text.startswith("What is the color of")),
        ("tool", _second_tool_phrasing),
        ("code", lambda text: re.match(r"Write a Python function (calc|transform)\(", text)),
    ],
)
def test_off_format_cue_is_visible_in_the_prompt(domain, cue_in_prompt):
    """`base.warmup.off_format_cued` answers off-convention only where the prompt shows the cue
    (a phrasing, an attribute, a function name), so the base can learn where it applies."""
    rows = load_benchmark(f"{domain}_id", n=300, seed=0)
    cues = [r["metadata"]["off_format_cue"] for r in rows]
    assert 0.2 < sum(cues) / len(cues) < 0.6
    for row, cue in zip(rows, cues, strict=True):
        text = row["prompt"][-1]["content"]
        assert bool(cue_in_prompt(text)) == cue, text


def test_splits_never_share_an_item():
    for domain in ("math", "science", "tool", "code"):
        prompts = {}
        for split, n in (("train", 300), ("id", 200), ("pretrain", 300)):
            rows = load_benchmark(f"{domain}_{split}", n=n, seed=0)
            prompts[split] = {json.dumps(r["prompt"]) for r in rows}
        assert not prompts["train"] & prompts["id"], domain
        assert not prompts["pretrain"] & prompts["id"], domain
        assert not prompts["pretrain"] & prompts["train"], domain


def test_pretrain_rows_carry_their_forms_verifier():
    rows = load_benchmark("science_pretrain", n=10, seed=0)
    assert {verifier_for(r) for r in rows} == {"mcq_answer_tag", "mcq_boxed_letter"}


def test_too_many_rows_for_the_item_space_is_a_clear_error():
    with pytest.raises(ValueError, match="item space of this domain is too small"):
        load_benchmark("science_id", n=10**4, seed=0)


def test_prepare_data_cli_writes_valid_rows(tmp_path):
    out = tmp_path / "math_id.jsonl"
    assert (
        main(
            [
                "prepare-data",
                "--config",
                "config/config.yaml",
                "--benchmark",
                "math_id",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    rows = read_jsonl(out)
    id_rows = load_config("config/config.yaml")["data"]["sizes"]["id"]
    assert len(rows) == id_rows and rows[0]["benchmark"] == "math_id"


def test_cli_bad_input_is_one_clear_line(tmp_path, capsys):
    assert (
        main(
            [
                "prepare-data",
                "--config",
                "config/config.yaml",
                "--benchmark",
                "nope",
                "--out",
                str(tmp_path / "x.jsonl"),
            ]
        )
        == 2
    )
    assert "unknown benchmark 'nope'" in capsys.readouterr().err
