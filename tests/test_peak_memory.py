"""A job's measured memory (cptlab.train.peak_memory), which the rehearsal checks the memory model
against: the count of torch storages on the CPU and the forwards' sizes. A stage's and an
evaluation's records: tests/test_train_stage.py, tests/test_evaluate.py."""

from __future__ import annotations

import gc

import torch

from cptlab.train.peak_memory import TorchBytes, _forward_size, process_memory


def test_torch_bytes_counts_what_operations_create_until_freed():
    weights = torch.zeros(1000)  # 4,000 bytes, before the count starts
    count = TorchBytes()
    count.adopt([weights])
    with count:
        a = torch.zeros(1000)
        view = a.view(10, 100)  # a view creates nothing
        a.add_(1)  # nor does an in-place operation
        with count.excluded():
            torch.zeros(5000)
        b = a * 2
        assert (count.live, count.peak) == (12000, 12000)
        del a, view, b
        gc.collect()
        assert count.live == 4000
        del weights
        gc.collect()
        assert count.live == 0 and count.peak == 12000


def test_a_forwards_size_counts_the_positions_it_keeps():
    ids = torch.zeros(2, 10, dtype=torch.long)
    labels = torch.full((2, 10), -100)
    labels[:, 7:] = 1
    assert _forward_size((ids,), {}) == (2, 10, 20)
    assert _forward_size((), {"input_ids": ids, "logits_to_keep": 4}) == (2, 10, 8)
    assert _forward_size((), {"input_ids": ids, "labels": labels}) == (2, 10, 6)


def test_excluded_code_runs_without_the_mode():
    """vLLM compiles its model with torch.compile(fullgraph=True), which refuses to trace under a
    Python dispatch mode: `excluded()` turns the mode off, then on again."""
    count = TorchBytes()
    double = torch.compile(lambda x: x * 2, fullgraph=True, backend="eager")
    with count:
        with count.excluded():
            double(torch.ones(3))
        kept = torch.zeros(10)
    assert count.peak == kept.untyped_storage().nbytes() == 40


def test_process_memory_reads_the_process_and_its_memory_node():
    memory = process_memory()
    assert memory["device"] == "cpu"
    assert 0 < memory["peak_rss_bytes"] < memory["memory_node_total_bytes"]
    assert memory["memory_node_total_bytes"] <= memory["host_total_bytes"]
