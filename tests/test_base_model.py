"""`cptlab build-base`: determinism on a micro build, and the foundation bounds on the full
build of the embedded default (opt-in, `make test-slow`)."""

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from cptlab import CPU_KERNEL_PINS
from cptlab.artifacts import read_manifest
from cptlab.base_model.build import build_base, reasoning_patterns
from cptlab.base_model.measure import check_bounds
from cptlab.base_model.shipped import recipe
from cptlab.base_model.tokenizer import train_tokenizer
from cptlab.base_model.weights import warmup_examples, weighted
from cptlab.cli import main
from cptlab.domains.prepare import prepare_benchmark
from cptlab.errors import InputError
from cptlab.validation import load_config


def embedded_config() -> dict:
    return yaml.safe_load(open("config/config.yaml"))


def prepare(config: dict, folder) -> None:
    for domain, spec in config["data"]["domains"].items():
        names = [f"{domain}_pretrain", *([spec["train"]] if "train" in spec else [])]
        for name in names + spec.get("id", []) + spec.get("ood", []):
            prepare_benchmark(config, name, folder / f"{name}.jsonl")


def build(config: dict, folder, out: str, threads: int, shipped: Path | None = None) -> dict:
    """Prepare the data once under `folder`, run `cptlab build-base` into folder/out (copying
    the base in `shipped` where its recipe matches), return its manifest."""
    if not (folder / "data").exists():
        prepare(config, folder / "data")
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))  # key order is mixture order
    argv = [
        "build-base",
        "--config",
        str(path),
        "--data-dir",
        str(folder / "data"),
        "--out",
        str(folder / out),
        "--threads",
        str(threads),
        *(["--shipped", str(shipped)] if shipped else []),
    ]
    assert main(argv) == 0
    return read_manifest(folder / out)


def micro_config() -> dict:
    config = embedded_config()
    config["data"]["sizes"] = {"train": 20, "id": 12, "ood": 12, "pretrain": 60}
    config["base"]["model"].update(hidden_size=32, num_layers=2, intermediate_size=64)
    config["base"]["sft"].update(steps=6, batch_size=8, warmup_steps=2)
    config["base"]["measure"].update(n=4, k=2, max_new_tokens=16)
    return config


def test_same_seed_gives_identical_weights(tmp_path):
    config = micro_config()
    digests = [build(config, tmp_path, run, threads=1)["weights_sha256"] for run in ("a", "b")]
    assert digests[0] == digests[1]
    manifest = read_manifest(tmp_path / "a")
    assert set(manifest["measurements"]) >= {"math_id", "logic_ood", "knowledge_ood"}
    assert (tmp_path / "a" / "model.safetensors").exists()


def test_a_build_of_the_shipped_recipe_copies_it_and_another_builds(tmp_path):
    """A shipped base is copied where its recipe's weights part is this build's, its
    measurements too where that part matches; a changed recipe builds; a corrupt copy is an
    error that names the file."""
    config = micro_config()
    shipped = build(config, tmp_path, "shipped", threads=1)
    assert shipped["shipped"] is None and set(shipped["recipe"]) == {"weights", "measurements"}
    copied = build(config, tmp_path, "copied", threads=1, shipped=tmp_path / "shipped")
    assert copied["shipped"] == {
        "from": str((tmp_path / "shipped").resolve()),
        "weights": True,
        "measurements": True,
    }
    assert copied["files"] == shipped["files"] and copied["bounds"] == shipped["bounds"]
    # Another measurement: the same weights, measured again.
    config["base"]["measure"]["max_new_tokens"] = 12
    remeasured = build(config, tmp_path, "remeasured", threads=1, shipped=tmp_path / "shipped")
    assert remeasured["shipped"]["weights"] and not remeasured["shipped"]["measurements"]
    assert remeasured["weights_sha256"] == shipped["weights_sha256"]
    # Another recipe for the weights: built.
    config["base"]["sft"]["lr"] = 0.001
    rebuilt = build(config, tmp_path, "rebuilt", threads=1, shipped=tmp_path / "shipped")
    assert rebuilt["shipped"] is None and rebuilt["weights_sha256"] != shipped["weights_sha256"]
    config["base"]["sft"]["lr"] = micro_config()["base"]["sft"]["lr"]
    with open(tmp_path / "shipped" / "tokenizer.json", "a") as handle:
        handle.write(" ")
    with pytest.raises(InputError, match="tokenizer.json: missing or not the file"):
        build_base(config, tmp_path / "data", tmp_path / "corrupt", shipped=tmp_path / "shipped")


def test_the_shipped_base_is_the_default_recipe(tmp_path):
    """models/embedded-base was made from config.yaml's recipe with this code, so `make run`
    copies it. When this fails, `make ship-base` rebuilds what changed (the weights, or only
    their measurements) and copies the build there."""
    config = load_config("config/config.yaml")
    prepare(config, tmp_path)
    wanted = recipe(config, tmp_path, reasoning_patterns(config))
    shipped = read_manifest("models/embedded-base")["recipe"]
    for part in ("weights", "measurements"):
        differ = [k for k in wanted[part] if shipped[part].get(k) != wanted[part][k]]
        assert not differ, f"the shipped base's {part}: other {differ} (make ship-base)"


def test_reprompt_share_sets_the_teacher_form_share():
    tokenizer = train_tokenizer(["hello world"] * 10, vocab_size=300)
    row = {"prompt": [{"role": "user", "content": "q"}], "metadata": {"solution": "s"}}
    examples = warmup_examples(tokenizer, [row] * 2000, reprompt_share=0.3, seed=0)
    long = sum(len(ids) > min(len(i) for i, _ in examples) for ids, _ in examples)
    assert 0.27 < long / 2000 < 0.33


@pytest.mark.parametrize("max_digits,pieces_of_17", [(1, ["1", "7"]), (3, ["17"])])
def test_max_digits_per_token_spells_a_number_the_same_in_any_context(max_digits, pieces_of_17):
    texts = ["Compute 17 - 3. What is 17 - 3? Is 1234 odd? \\boxed{14}"] * 50
    tokenizer = train_tokenizer(texts, 400, split_words=False, max_digits_per_token=max_digits)
    pieces = lambda text: [tokenizer.decode([i]) for i in tokenizer(text)["input_ids"]]  # noqa: E731
    digits = lambda text: [p for p in pieces(text) if p.strip().isdigit()]  # noqa: E731
    assert digits("What is 17 - 3?") == [*pieces_of_17, "3"]
    assert digits("Compute 17 - 3.") == [*pieces_of_17, "3"]
    assert all(len(p) <= max_digits for p in digits("Is 1234 odd?"))
    assert "".join(digits("Is 1234 odd?")) == "1234"
    assert tokenizer.decode(tokenizer("Compute 17 - 3.")["input_ids"]) == "Compute 17 - 3."
    merged = train_tokenizer(texts, vocab_size=400, split_words=False)
    assert any(
        any(c.isdigit() for c in p) and len(p.strip()) > 1 and not p.strip().isdigit()
        for p in [merged.decode([i]) for i in merged("What is 17 - 3?")["input_ids"]]
    )


def test_a_benchmark_can_have_its_own_size(tmp_path):
    config = {
        "data": {"seed": 0, "sizes": {"pretrain": 20, "benchmarks": {"copying_pretrain": 50}}}
    }
    assert prepare_benchmark(config, "copying_pretrain", tmp_path / "copying.jsonl") == 50
    assert prepare_benchmark(config, "math_pretrain", tmp_path / "math.jsonl") == 20


def test_isolated_patterns_are_tokens_of_their_own():
    """Without `isolate`, BPE glues an MCQ letter into its option (`"gas (A), "`); with it the
    letter is one token in the options and in the answer alike."""
    texts = ["Options: gas (A), oxide (B), salt (C). <answer>A</answer> A sample."] * 50
    pieces = lambda t, text: [t.decode([i]) for i in t(text)["input_ids"]]  # noqa: E731
    glued = train_tokenizer(texts, 400, split_words=False)
    assert "A" not in pieces(glued, "Options: gas (A), oxide (B), salt (C).")
    isolated = train_tokenizer(texts, 400, split_words=False, isolate=[r"\b[A-D]\b"])
    options = pieces(isolated, "Options: gas (A), oxide (B), salt (C).")
    assert [p for p in options if p in "ABCD"] == ["A", "B", "C"]
    assert pieces(isolated, "<answer>A</answer>").count("A") == 1
    assert isolated.decode(isolated(texts[0])["input_ids"]) == texts[0]


def test_domain_reprompt_share_overrides_the_share_per_domain():
    tokenizer = train_tokenizer(["hello world"] * 10, vocab_size=300)
    rows = [
        {"domain": d, "prompt": [{"role": "user", "content": "q"}], "metadata": {"solution": "s"}}
        for d in ("math", "tool")
        for _ in range(1000)
    ]
    examples = warmup_examples(
        tokenizer, rows, reprompt_share=0.2, seed=0, domain_reprompt_share={"tool": 0.8}
    )
    short = min(len(ids) for ids, _ in examples)
    share = lambda part: sum(len(ids) > short for ids, _ in part) / len(part)  # noqa: E731
    assert 0.16 < share(examples[:1000]) < 0.24
    assert 0.76 < share(examples[1000:]) < 0.84


def _rows(n: int) -> list[dict]:
    return [
        {
            "domain": "math",
            "prompt": [{"role": "user", "content": f"q{i}"}],
            "metadata": {"solution": f"s{i}", "off_format": f"o{i}", "form": "id"},
        }
        for i in range(n)
    ]


def _target(tokenizer, ids_labels) -> str:
    ids, labels = ids_labels
    kept = [i for i, label in zip(ids, labels, strict=True) if label != -100]
    return tokenizer.decode(kept).removesuffix("<|im_end|>").strip()


def test_counterfactual_demonstrations_are_copied_targets():
    tokenizer = train_tokenizer(["q1 s1 o1 Correct solution"] * 10, vocab_size=300)
    rows = _rows(400)
    examples = warmup_examples(tokenizer, rows, 1.0, seed=0, counterfactual_share=0.5)
    swapped = 0
    for row, example in zip(rows, examples, strict=True):
        target = _target(tokenizer, example)
        prompt = tokenizer.decode(example[0])
        assert f"Correct solution:\n\n{target}\n" in prompt  # the target is the demonstration
        swapped += target != row["metadata"]["solution"]
    assert 0.4 < swapped / len(rows) < 0.6


def test_off_format_share_swaps_the_target_convention():
    tokenizer = train_tokenizer(["q1 s1 o1"] * 10, vocab_size=300)
    rows = _rows(1000)
    examples = warmup_examples(tokenizer, rows, 0.0, seed=0, off_format_share=0.25)
    off = sum(_target(tokenizer, e).startswith("o") for e in examples)
    assert 0.2 < off / len(rows) < 0.3


def test_cued_off_format_answers_only_the_cued_items_off_convention():
    tokenizer = train_tokenizer(["q1 s1 o1"] * 10, vocab_size=300)
    rows = _rows(1000)
    for i, row in enumerate(rows):
        row["metadata"]["off_format_cue"] = i % 2 == 0
    examples = warmup_examples(tokenizer, rows, 0.0, seed=0, off_format_share=0.8)
    cued = warmup_examples(tokenizer, rows, 0.0, seed=0, off_format_share=0.8, off_format_cued=True)
    off = [_target(tokenizer, e).startswith("o") for e in cued]
    assert not any(off[1::2])
    assert 0.75 < sum(off[0::2]) / 500 < 0.85
    # The same draws: a cued row is off-convention exactly where the uncued rule put it.
    assert off[0::2] == [_target(tokenizer, e).startswith("o") for e in examples[0::2]]


def _tool_rows() -> tuple[list[dict], object, dict[str, str]]:
    """400 tool rows whose answers reason (`Thought:`), a tokenizer for them, and the pattern."""
    rows = [
        {
            "domain": "tool",
            "prompt": [{"role": "user", "content": f"q{i}"}],
            "metadata": {"solution": f"Thought: t{i}\nAction: a{i}", "form": "id"},
        }
        for i in range(400)
    ]
    tokenizer = train_tokenizer(["q1 Thought: t1\nAction: a1 Correct solution"] * 10, 300)
    return rows, tokenizer, {"tool": r"Thought:[^\n]*\n?"}


def test_stripped_demonstrations_lose_their_reasoning_and_targets_keep_it():
    rows, tokenizer, reasoning = _tool_rows()
    examples = warmup_examples(
        tokenizer, rows, 1.0, seed=0, stripped_demonstration_share=0.5, reasoning=reasoning
    )
    stripped = 0
    for row, example in zip(rows, examples, strict=True):
        assert _target(tokenizer, example) == row["metadata"]["solution"]
        ids, labels = example
        prompt = tokenizer.decode([i for i, lab in zip(ids, labels, strict=True) if lab == -100])
        stripped += "Thought:" not in prompt.split("Correct solution:")[1]
    assert 0.4 < stripped / len(rows) < 0.6
    # Unset, the share draws nothing: the examples (and so a build's weights) do not change.
    plain = warmup_examples(tokenizer, rows, 0.5, seed=0)
    unset = warmup_examples(tokenizer, rows, 0.5, seed=0, reasoning=reasoning)
    assert plain == unset


def test_gold_only_never_strips_a_counterfactual_demonstration():
    rows, tokenizer, reasoning = _tool_rows()
    kinds = {"gold stripped": 0, "gold whole": 0, "counterfactual whole": 0}
    for row, (ids, labels) in zip(
        rows,
        warmup_examples(
            tokenizer,
            rows,
            1.0,
            seed=0,
            counterfactual_share=0.5,
            stripped_demonstration_share=1.0,
            reasoning=reasoning,
            stripped_gold_only=True,
        ),
        strict=True,
    ):
        prompt = tokenizer.decode([i for i, lab in zip(ids, labels, strict=True) if lab == -100])
        gold = _target(tokenizer, (ids, labels)) == row["metadata"]["solution"]
        whole = "Thought:" in prompt.split("Correct solution:")[1]
        assert gold or whole, "a counterfactual demonstration was stripped"
        kinds[("gold " if gold else "counterfactual ") + ("whole" if whole else "stripped")] += 1
    # At a share of 1.0 every gold demonstration is stripped.
    assert kinds["gold whole"] == 0
    assert 0.4 < kinds["gold stripped"] / len(rows) < 0.6


def test_domain_weights_subsample_or_repeat():
    rows = _rows(10)
    assert weighted(rows, 0.5) == rows[:5]
    assert weighted(rows, 2.0) == rows + rows
    assert weighted(rows, 0) == []


def test_check_bounds_flags_each_violation():
    good = {"greedy_accuracy": 0.4, "pass1": 0.3, "pass8": 0.6, "teacher_advantage": 0.3}
    results = {
        "math_id": {**good, "stripped_teacher_advantage": 0.25},
        "tool_id": {**good, "greedy_accuracy": 0.9, "stripped_teacher_advantage": 0.1},
        "logic_ood": {"greedy_accuracy": 0.05},
    }
    bounds = check_bounds(results, ["math", "tool"], ["logic"], k=8)
    failed = {name for name, b in bounds.items() if not b["ok"]}
    assert failed == {
        "tool_id.greedy_accuracy in [0.10, 0.70]",
        "tool_id.stripped_teacher_advantage >= 0.20",
        "logic_ood.greedy_accuracy > 0.10",
    }
    assert "math_id.stripped_teacher_advantage >= 0.20" in bounds


@pytest.mark.slow
def test_embedded_build_bounds(tmp_path):
    """The embedded default's build from scratch on two threads (opt-in: `make test-slow`, ~12
    minutes): the foundation bounds hold but the one it is documented to miss. Same config and
    threads as the workflow's build, hence the same weights and measurements; the build time is
    in the manifest, not asserted (shared machines are noisy). Measured on the config's 100
    items per benchmark, as the workflow measures: a smaller sample would test the sample, not
    the build."""
    config = embedded_config()
    manifest = build(config, tmp_path, "base", threads=2)
    assert len(manifest["bounds"]) == 17  # 14, and the stripped teacher of math, science, tool
    failed = sorted(name for name, b in manifest["bounds"].items() if not b["ok"])
    # The default build of 2026-12-03 misses this one by 0.01 on its 100 items (0.125 on all
    # 200; docs/embedded-testbed.md, "Measurements and bounds"): a build that misses another,
    # or meets this one, is a change to look at.
    assert failed == ["logic_ood.greedy_accuracy > 0.10"], f"unmet foundation bounds: {failed}"


# The pins and the record of who set them (this test process's own import of cptlab).
UNPINNED = {*CPU_KERNEL_PINS, "CPTLAB_CPU_KERNEL_PINS_SET"}


def _kernel_pins(environment: dict) -> list[str]:
    """(ATEN_CPU_CAPABILITY as cptlab leaves it, the capability torch then dispatches to), in a
    fresh interpreter whose environment has none of the pins but `environment`."""
    env = {k: v for k, v in os.environ.items() if k not in UNPINNED} | environment
    code = (
        "import os, cptlab, torch; "
        "print(os.environ['ATEN_CPU_CAPABILITY'], torch.backends.cpu.get_cpu_capability())"
    )
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    return run.stdout.split()


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="x86 only")
def test_cptlab_pins_the_cpu_kernels_to_avx2_unless_the_environment_says_otherwise():
    # An AVX-512 machine would otherwise dispatch to AVX512 kernels and build another base.
    assert _kernel_pins({}) == ["avx2", "AVX2"]
    assert _kernel_pins({"ATEN_CPU_CAPABILITY": "default"}) == ["default", "DEFAULT"]


def test_cptlab_leaves_onednn_uncapped():
    # Capping oneDNN's ISA keeps AMX off, and vLLM's bf16 CPU kernels then abort
    # (tests/test_vllm.py's colocated rollouts, on an AMX machine).
    env = {k: v for k, v in os.environ.items() if k != "ONEDNN_MAX_CPU_ISA"}
    code = "import os, cptlab; print(os.environ.get('ONEDNN_MAX_CPU_ISA', 'unset'))"
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert run.stdout.split() == ["unset"], run.stderr


# bf16 attention on (batch, heads, 64 tokens, head dim 32): the sizes from which torch 2.13's CPU
# flash attention packs for AMX.
BF16_ATTENTION = (
    "import torch, torch.nn.functional as F; q = torch.randn(2, 4, 64, 32, dtype=torch.bfloat16)"
    "\ntry:\n    F.scaled_dot_product_attention(q, q, q); print('ran')"
    "\nexcept RuntimeError as err:\n    print('failed:', err)"
)


def _bf16_attention(environment: dict) -> tuple[str, str]:
    """(ATEN_CPU_CAPABILITY after `import cptlab`, the bf16 attention's outcome) in a fresh
    interpreter whose environment has none of the pins but `environment`."""
    env = {k: v for k, v in os.environ.items() if k not in UNPINNED} | environment
    code = "import os, cptlab; print(os.environ.get('ATEN_CPU_CAPABILITY', 'unset'))\n"
    run = subprocess.run(
        [sys.executable, "-c", code + BF16_ATTENTION], env=env, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    capability, outcome = run.stdout.strip().split("\n", 1)
    return capability, outcome


def _has_amx() -> bool:
    cpuinfo = Path("/proc/cpuinfo")
    return cpuinfo.exists() and "amx_tile" in cpuinfo.read_text()


def test_native_cpu_kernels_leave_torchs_dispatch_and_bf16_attention_runs():
    """CPTLAB_CPU_KERNELS=native, which the jobs of a half-precision config get
    (tests/test_rehearsal_config.py), pins nothing and drops the pins that a cptlab process
    above it set (the workflow's driver): bf16 attention runs on any x86-64 CPU. A value the
    user set stays."""
    native = {"CPTLAB_CPU_KERNELS": "native"}
    assert _bf16_attention(native) == ("unset", "ran")
    code = "import os, cptlab; print(os.environ['CPTLAB_CPU_KERNEL_PINS_SET'])"
    env = {k: v for k, v in os.environ.items() if k not in UNPINNED}
    driver = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    if platform.machine().lower() in ("x86_64", "amd64"):
        assert driver.stdout.split() == ["ATEN_CPU_CAPABILITY,MKL_CBWR"], driver.stderr
    inherited = {**CPU_KERNEL_PINS, "CPTLAB_CPU_KERNEL_PINS_SET": "ATEN_CPU_CAPABILITY,MKL_CBWR"}
    assert _bf16_attention({**inherited, **native}) == ("unset", "ran")
    assert _bf16_attention({"ATEN_CPU_CAPABILITY": "default", **native})[0] == "default"


@pytest.mark.skipif(not _has_amx(), reason="the pin breaks bf16 attention only on CPUs with AMX")
def test_the_avx2_pin_still_breaks_bf16_attention_on_amx():
    """Why half-precision jobs run unpinned. Should a torch release fix its AVX2 build's AMX
    path, this fails, and the pin could serve those jobs again."""
    capability, outcome = _bf16_attention({})
    assert capability == "avx2"
    assert "pack_vnni2 is only supported when avx512 is supported" in outcome


def test_an_unknown_cpu_kernel_setting_is_refused():
    env = {**os.environ, "CPTLAB_CPU_KERNELS": "avx512"}
    run = subprocess.run([sys.executable, "-c", "import cptlab"], env=env, capture_output=True)
    assert run.returncode != 0 and b"expected avx2 or native" in run.stderr
