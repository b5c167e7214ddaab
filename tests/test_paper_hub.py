"""The study's hub datasets read as on a cluster: from a hub cache that `cptlab fetch-data`
filled, offline, through `huggingface_hub` and `datasets` themselves (nothing mocked).

tests/hub_layout.py lays out the cache as `huggingface_hub` writes it, with each repository in
its real layout (file names, formats, README configs, LiveCodeBench's loading script) at the
commit the registry pins. The loaders read it with HF_HUB_OFFLINE=1; `prepare-data` reads it
in a process of its own, with the environment a compute node has.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hub_layout import (
    HUB_BENCHMARKS,
    HubCache,
    LoopbackHub,
    fixture_rows,
    gpqa_files,
    lcb_files,
    math_ai_files,
    mmlu_redux_files,
    offline,
    study_hub,
)

import cptlab.domains.paper as paper
from cptlab.domains.paper import code, knowledge, math, science
from cptlab.domains.paper.hub import COMMIT
from cptlab.domains.registry import get_benchmark, load_benchmark
from cptlab.errors import InputError
from cptlab.verifiers import score

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "paper"


@pytest.fixture
def hub(tmp_path, monkeypatch) -> tuple[HubCache, dict]:
    """The study's repositories in an offline hub cache; the revisions a config must give."""
    cache = HubCache(tmp_path / "hub")
    revisions = study_hub(cache)
    offline(monkeypatch, cache)
    return cache, revisions


def load(name: str, tmp_path: Path, revisions: dict, **options) -> list[dict]:
    if name in revisions:
        options.setdefault("revision", revisions[name])
    return load_benchmark(name, cache_dir=str(tmp_path / "datasets"), **options)


def content(rows: list[dict]) -> list[tuple]:
    """What a row says, apart from where it was read from (ids and source labels differ)."""
    return [(json.dumps(r["prompt"]), r["answer"]) for r in rows]


# ----- the registry's sources ----------------------------------------------------------------


def test_every_hub_source_has_a_commit_or_the_config_must_give_one() -> None:
    unpinned = set()
    for benchmark in paper.PAPER_BENCHMARKS:
        for repo, revision in benchmark.loader.source.repos():
            if revision is None:
                unpinned.add(repo)
            else:
                assert COMMIT.fullmatch(revision), (benchmark.name, repo, revision)
    # No commit of these two could be verified (docs/data.md): the config names one.
    assert unpinned == {math.MATH500_HUB, "allenai/ZebraLogicBench-private"}
    gated = {b.loader.source.hub for b in paper.PAPER_BENCHMARKS if b.loader.source.gated}
    assert gated == {science.GPQA_HUB, "allenai/ZebraLogicBench-private"}
    # The study's sources (Moenupa/SDPO-CL, data/format/math.py, data/utils/livecodebench.py).
    assert get_benchmark("math500").loader.source.hub == "math-ai/math500"
    assert get_benchmark("aime").loader.source.hub == ("math-ai/aime24", "math-ai/aime25")
    assert get_benchmark("livecodebench").loader.source.files == code.LCB_HUB_FILES


# ----- each hub loader on its repository's layout ----------------------------------------------


@pytest.mark.parametrize("name", sorted(HUB_BENCHMARKS))
def test_hub_benchmarks_read_their_snapshot_offline(name, hub, tmp_path) -> None:
    _, revisions = hub
    rows = load(name, tmp_path, revisions)
    assert rows, name
    fixture = HUB_BENCHMARKS[name]
    if fixture is not None:  # the same rows from a local copy: the same prompts and answers
        local = load_benchmark(name, path=str(FIXTURES / fixture))
        assert content(rows) == content(local)


def test_livecodebench_reads_its_files_beside_its_loading_script(hub, tmp_path) -> None:
    """The repository holds code_generation_lite.py, which `datasets` 5.2.0 refuses: its six
    release files are read from the snapshot, every one of them."""
    _, revisions = hub
    rows = {r["id"]: r for r in load("livecodebench", tmp_path, revisions)}
    assert set(rows) == {"livecodebench-abc300_a", "livecodebench-abc390_a",
                         "livecodebench-2063A", "livecodebench-3781"}  # fmt: skip
    assert rows["livecodebench-abc390_a"]["metadata"]["tests"][0] == {
        "input": "10 20\n",
        "output": "30\n",
    }
    window = load("livecodebench", tmp_path, revisions, **code.LCB_STUDY_WINDOW)
    assert {r["id"] for r in window} == {"livecodebench-abc390_a", "livecodebench-3781"}


def test_datasets_refuses_the_livecodebench_repository(tmp_path) -> None:
    """Why the files are read directly: a folder named as the repository, holding its script,
    is refused whatever data_files are given (datasets/load.py, dataset_module_factory)."""
    import datasets

    folder = tmp_path / "code_generation_lite"
    for relative, text in lcb_files().items():
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        (folder / relative).write_text(text)
    with pytest.raises(RuntimeError, match="Dataset scripts are no longer supported, but found "
                       "code_generation_lite.py"):  # fmt: skip
        datasets.load_dataset(str(folder), data_files=list(code.LCB_HUB_FILES), split="train")


def test_gpqa_keeps_repeated_and_spaced_options(hub, tmp_path) -> None:
    _, revisions = hub
    rows = {r["id"]: r for r in load("gpqa_diamond", tmp_path, revisions, option_seed=42)}
    repeated = rows["gpqa_diamond-recRepeatOpt01"]
    assert sorted(repeated["metadata"]["options"]) == ["1/2", "1/3", "1/3", "2"]
    spaced = rows["gpqa_diamond-recSpacedOpt02"]
    assert sorted(spaced["metadata"]["options"]) == [" benzoic acid", " toluene ", "benzene",
                                                     "phenol "]  # fmt: skip
    assert spaced["metadata"]["options"]["ABCD".index(spaced["answer"])] == " benzoic acid"
    for row in (repeated, spaced):
        verifier = get_benchmark("gpqa_diamond").verifier
        assert score(verifier, f"So \\boxed{{{row['answer']}}}", row).reward == 1.0


def test_dolci_single_test_opening_with_a_class_is_a_test(hub, tmp_path) -> None:
    _, revisions = hub
    rows = load("dolci_code_train", tmp_path, revisions, holdout=None)
    row = next(r for r in rows if r["id"] == "dolci_code_train-code-class-7")
    (test,) = row["metadata"]["tests"]
    assert test.startswith("class Counter:") and "assert count_up(c) == 2" in test
    # The study's reward runs a row's tests as one script (paper.yaml: data.rewards: study).
    verifier = get_benchmark("dolci_code_train").verifier_for("study")
    solution = "def count_up(c):\n    c.n += 1\n    return c.n\n"
    assert score(verifier, f"```python\n{solution}```", row).reward == 1.0
    assert score(verifier, "```python\ndef count_up(c):\n    return 0\n```", row).reward == 0.0


def test_mmlu_redux_fix_keeps_rows_whose_correct_answer_is_empty(tmp_path, monkeypatch) -> None:
    cache = HubCache(tmp_path / "hub")
    template = {"question": "Which bone is the longest?", "choices": ["Humerus", "Femur",
                "Tibia", "Radius"], "answer": 0, "error_type": "wrong_groundtruth",
                "source": "mmlu", "potential_reason": ""}  # fmt: skip
    extra = {"anatomy": [{**template, "correct_answer": "B"},
                         {**template, "correct_answer": ""},
                         {**template, "correct_answer": None}]}  # fmt: skip
    cache.add(knowledge.MMLU_REDUX_HUB, knowledge.MMLU_REDUX_REVISION, mmlu_redux_files(extra))
    offline(monkeypatch, cache)
    rows = load("mmlu_redux", tmp_path, {}, fix_wrong_groundtruth=True, subjects=["anatomy"])
    fixed = [r for r in rows if r["metadata"]["error_type"] == "wrong_groundtruth"]
    # The fixture's own row (correct_answer "A"), then the three above.
    assert [(r["answer"], r["metadata"]["answer_from"]) for r in fixed] == [
        ("A", "correct_answer"),
        ("B", "correct_answer"),
        ("A", "answer"),
        ("A", "answer"),
    ]


def test_a_path_may_name_another_hub_repository_at_a_commit(hub, tmp_path) -> None:
    cache, revisions = hub
    cache.add("someone/gpqa-copy", "9" * 40, gpqa_files())
    with pytest.raises(InputError, match="hub repository someone/gpqa-copy needs a commit"):
        load_benchmark("gpqa_diamond", path="someone/gpqa-copy")
    rows = load("gpqa_diamond", tmp_path, revisions, path="someone/gpqa-copy", revision="9" * 40)
    assert len(rows) == 5
    # MATH-500's other source, at the commit public code pins, in place of the study's.
    h4 = math_ai_files("MATH-500", fixture_rows("math500/test.jsonl"))
    cache.add(math.MATH500_H4_HUB, math.MATH500_H4_REVISION, h4)
    other = load("math500", tmp_path, {}, path=math.MATH500_H4_HUB,
                 revision=math.MATH500_H4_REVISION)  # fmt: skip
    assert content(other) == content(load("math500", tmp_path, revisions))


# ----- revisions -------------------------------------------------------------------------------


def test_a_revision_option_reads_another_commit_and_refs_resolve(hub, tmp_path) -> None:
    cache, revisions = hub
    other = "a" * 40
    files = gpqa_files()
    files["gpqa_diamond.csv"] = "".join(files["gpqa_diamond.csv"].splitlines(True)[:2])
    cache.add(science.GPQA_HUB, other, files, ("refs/pr/3",))
    assert len(load("gpqa_diamond", tmp_path, revisions)) == 5
    assert len(load("gpqa_diamond", tmp_path, revisions, revision=other)) == 1
    assert len(load("gpqa_diamond", tmp_path, revisions, revision="refs/pr/3")) == 1
    # The study's LiveCodeBench ref, refs/pr/6, resolved through the cache's refs/.
    cache.add(code.LCB_HUB, "b" * 40, lcb_files(), ("refs/pr/6",))
    assert len(load("livecodebench", tmp_path, revisions, revision="refs/pr/6")) == 4
    aime = {"math-ai/aime24": math.AIME_REVISIONS[0], "math-ai/aime25": math.AIME_REVISIONS[1]}
    assert len(load("aime", tmp_path, revisions, revision=aime)) == 6
    with pytest.raises(InputError, match=r"aime: 2 hub repositories: give data.options.aime"):
        load("aime", tmp_path, revisions, revision="c" * 40)


def test_a_source_without_a_commit_is_an_error_naming_the_key(hub, tmp_path) -> None:
    for name, repo in (("math500", "math-ai/math500"),
                       ("zebralogic", "allenai/ZebraLogicBench-private")):  # fmt: skip
        with pytest.raises(InputError, match=rf"^{name}: no commit of {repo} is pinned in cptlab"
                           rf".*data.options.{name}.revision"):  # fmt: skip
            load_benchmark(name)


def test_a_snapshot_missing_from_the_cache_names_fetch_data(hub, tmp_path) -> None:
    _, revisions = hub
    missing = "d" * 40
    with pytest.raises(
        InputError,
        match=rf"gpqa_diamond: Idavidrein/gpqa@{missing} is not in "
        r"the HF cache and the hub cannot be reached: run `cptlab fetch-data",
    ):
        load("gpqa_diamond", tmp_path, revisions, revision=missing)


def test_a_snapshot_without_a_file_it_reads_is_named(hub, tmp_path) -> None:
    cache, revisions = hub
    files = lcb_files()
    del files["test6.jsonl"]
    cache.add(code.LCB_HUB, "e" * 40, files)
    with pytest.raises(InputError, match=r"livecodebench: .*@e{40} has no test6.jsonl in its "
                       r"snapshot"):  # fmt: skip
        load("livecodebench", tmp_path, revisions, revision="e" * 40)


# ----- prepare-data as a cluster's compute node runs it ----------------------------------------


def offline_config(tmp_path: Path, revisions: dict, **options) -> Path:
    data_options = {name: {"revision": rev} for name, rev in revisions.items()}
    for name, more in options.items():
        data_options.setdefault(name, {}).update(more)
    config = {"extends": str(ROOT / "config" / "paper.yaml"), "data": {"options": data_options}}
    path = tmp_path / "offline.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def cptlab(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, "HF_HUB_CACHE": str(tmp_path / "hub"),
                   "HF_DATASETS_CACHE": str(tmp_path / "datasets"), **env}  # fmt: skip
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        if name not in env:
            environment.pop(name, None)
    return subprocess.run([sys.executable, "-m", "cptlab", *args], env=environment, cwd=ROOT,
                          capture_output=True, text=True)  # fmt: skip


def prepare(tmp_path: Path, config: Path, name: str) -> subprocess.CompletedProcess:
    """`cptlab prepare-data` as a compute node runs it: offline, from the HF cache."""
    out = tmp_path / "data" / f"{name}.jsonl"
    return cptlab(tmp_path, "prepare-data", "--config", str(config), "--benchmark", name,
                  "--out", str(out), HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")  # fmt: skip


@pytest.mark.integration
def test_prepare_data_reads_the_cache_offline_and_checks_the_count(tmp_path) -> None:
    cache = HubCache(tmp_path / "hub")
    revisions = study_hub(cache)
    config = offline_config(tmp_path, revisions)
    done = prepare(tmp_path, config, "livecodebench")
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in (tmp_path / "data" / "livecodebench.jsonl").open()]
    assert {r["id"] for r in rows} == {"livecodebench-abc390_a", "livecodebench-3781"}
    assert "livecodebench: 2 rows, expected 1-175 (published: none for the study's window" in (
        done.stderr
    )
    # The fixture's 5 GPQA questions are not the published 198: the run stops, one line.
    stopped = prepare(tmp_path, config, "gpqa_diamond")
    assert stopped.returncode == 2
    (line,) = [ln for ln in stopped.stderr.splitlines() if ln.startswith("cptlab prepare-data")]
    assert line.startswith(
        "cptlab prepare-data: error: gpqa_diamond: 5 rows, expected 198 (published 198: "
        "GPQA-Diamond (Rein et al. 2023)): outside the expected range"
    )
    assert not (tmp_path / "data" / "gpqa_diamond.jsonl").exists()


# ----- counts that stop a bad run --------------------------------------------------------------


def paper_config(**options) -> dict:
    from cptlab.validation import load_config

    return load_config(ROOT / "config" / "paper.yaml", {"data": {"options": options}})


def test_a_count_outside_the_published_range_stops_prepare_data(tmp_path, caplog) -> None:
    """AIME's fixture holds 6 of the published 60 problems: the run stops with one line; a
    count the config states, a cap or no check let it through, each said in the log."""
    from cptlab.domains.prepare import prepare_benchmark

    out = tmp_path / "aime.jsonl"
    fixture = {"path": str(FIXTURES / "aime")}
    with pytest.raises(InputError) as stopped:
        prepare_benchmark(paper_config(aime=fixture), "aime", out)
    assert str(stopped.value) == (
        "aime: 6 rows, expected 60 (published 60: AIME 2024 I+II and 2025 I+II, 30 problems "
        "a year): outside the expected range; check the source and its revision, or set "
        "data.options.aime.expected_rows"
    )
    assert not out.exists()
    cases = {
        "aime: 6 rows, expected 6 (data.options.aime.expected_rows)": {"expected_rows": [6, 6]},
        "aime: 6 rows, unchecked (data.options.aime.expected_rows: null)": {"expected_rows": None},
    }
    with caplog.at_level("INFO", logger="cptlab.domains.prepare"):
        for line, more in cases.items():
            assert prepare_benchmark(paper_config(aime={**fixture, **more}), "aime", out) == 6
            assert line in caplog.messages
        capped = paper_config(aime=fixture)
        capped["data"]["sizes"] = {"id": 4}
        assert prepare_benchmark(capped, "aime", out) == 4
    assert (
        "aime: 4 rows, expected 4 (published 60: AIME 2024 I+II and 2025 I+II, 30 problems a "
        "year, first 4 (data.sizes))"
    ) in caplog.messages
    with pytest.raises(InputError, match=r"expected_rows: \[9, 2\] is not \[low, high\]"):
        prepare_benchmark(paper_config(aime={**fixture, "expected_rows": [9, 2]}), "aime", out)


def test_a_count_holds_for_the_options_it_was_published_for() -> None:
    from cptlab.domains.prepare import published_rows

    assert published_rows("mmlu_redux", {}).rows == 5330
    fixed = published_rows("mmlu_redux", {"fix_wrong_groundtruth": True})
    assert (fixed.low, fixed.high, fixed.rows) == (5330, 5700, None)
    assert published_rows("mmlu_redux", {"subjects": ["anatomy"]}) is None
    assert published_rows("livecodebench", {}).rows == 1055
    window = published_rows("livecodebench", dict(code.LCB_STUDY_WINDOW))
    assert (window.low, window.high) == (1, 175)
    assert published_rows("livecodebench", {"start_date": "2024-01-01"}) is None
    assert published_rows("math_id", {}) is None  # a synthetic benchmark: nothing published


# ----- fetch-data's sources ----------------------------------------------------------------------


def test_fetch_data_reads_each_hub_repository_once_and_no_local_path() -> None:
    from cptlab.domains.fetch import hub_sources

    config = paper_config(gpqa_diamond={"path": str(FIXTURES / "gpqa_diamond")},
                          livecodebench={"revision": "refs/pr/6"})  # fmt: skip
    sources = {s.repo: s for s in hub_sources(config)}
    assert science.GPQA_HUB not in sources  # read from a local path
    assert [s.benchmark for s in hub_sources(config)].count("dolci_code_train") == 1
    assert "dolci_code_test" not in {s.benchmark for s in hub_sources(config)}  # same repository
    lcb = sources[code.LCB_HUB]
    assert (lcb.revision, lcb.pinned, lcb.patterns) == (
        "refs/pr/6",
        False,
        ["README.md", *code.LCB_HUB_FILES],
    )
    assert sources["allenai/ZebraLogicBench-private"].revision is None
    assert {"math-ai/aime24", "math-ai/aime25", knowledge.MMLU_REDUX_HUB} <= set(sources)


@pytest.mark.integration
def test_fetch_data_names_what_it_cannot_fetch_then_prepare_data_runs_offline(tmp_path) -> None:
    """`cptlab fetch-data` against a hub on the loopback interface (real `huggingface_hub`
    calls): the gated repository the token cannot read and the source with no commit are named
    first, one line each; every other snapshot lands in the cache, from which `prepare-data`
    then reads offline."""
    hub = LoopbackHub()
    revisions = study_hub(hub)
    hub.gated.add(science.GPQA_HUB)
    config = offline_config(tmp_path, {"math500": revisions["math500"]})
    with hub as endpoint:
        fetched = cptlab(tmp_path, "fetch-data", "--config", str(config), HF_ENDPOINT=endpoint)
    assert fetched.returncode == 2, fetched.stderr
    lines = fetched.stdout.splitlines()
    assert lines[:2] == [
        "gpqa_diamond: Idavidrein/gpqa is gated: accept its terms at "
        "https://huggingface.co/datasets/Idavidrein/gpqa with the account of your token "
        "(HF_TOKEN or `hf auth login`)",
        "zebralogic: no commit of allenai/ZebraLogicBench-private is pinned in cptlab: set "
        f"data.options.zebralogic.revision (its main is at {revisions['zebralogic']})",
    ]
    assert f"livecodebench: livecodebench/code_generation_lite@{code.LCB_REVISION} -> " in (
        fetched.stdout
    )
    assert "cptlab fetch-data: error: 2 hub source(s) cannot be fetched (named above)" in (
        fetched.stderr
    )
    assert "HTTP Request" not in fetched.stderr
    done = prepare(tmp_path, config, "livecodebench")
    assert done.returncode == 0, done.stderr
    assert len((tmp_path / "data" / "livecodebench.jsonl").read_text().splitlines()) == 2
