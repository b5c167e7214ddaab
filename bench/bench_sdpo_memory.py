"""Peak memory of SDPO's distillation logits, measured on CPU, against the formula of
docs/study-training.md ("Memory at paper scale").

One SDPO micro-batch keeps the student's and the teacher's logits over the completion,
[m, T, V] each. This script runs TRL's own steps on a model whose other tensors are small beside
the logits: `_forward_logits`-style forward (slice, divide by the temperature), the top-k loss with
a tail, and the backward. Each case runs in a fresh process and reports the peak resident memory
above the loaded model, as a multiple of one logits tensor (m * T * V * 4 bytes in float32). The
multiple is what the paper-scale estimate scales by (with 2 bytes per value in bf16).

    python bench/bench_sdpo_memory.py
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys

CASES = [(1, 256), (2, 256), (4, 256), (2, 512)]  # (micro-batch m, completion tokens T)
VOCAB, HIDDEN, PROMPT = 32768, 64, 16


def measure(m: int, t: int) -> dict:
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM
    from trl.experimental.sdpo.loss_utils import compute_topk_self_distillation_loss

    torch.manual_seed(0)
    torch.set_num_threads(1)
    config = Qwen2Config(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        intermediate_size=128,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=PROMPT + t + 8,
        tie_word_embeddings=False,
    )
    student, teacher = Qwen2ForCausalLM(config), Qwen2ForCausalLM(config)
    teacher.requires_grad_(False)
    ids = torch.randint(0, VOCAB, (m, PROMPT + t))

    def logits(model):  # TRL's SDPOTrainer._forward_logits
        out = model(input_ids=ids, use_cache=False, logits_to_keep=t + 1).logits
        return out[:, :-1, :][:, -t:, :] / 1.0

    logits(student).sum().backward()  # warm-up: allocator, gradient buffers
    student.zero_grad(set_to_none=False)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB
    s = logits(student)
    with torch.no_grad():
        tl = logits(teacher)
    loss = compute_topk_self_distillation_loss(
        s, tl, distillation_topk=100, distillation_alpha=0.5, distillation_add_tail=True
    ).mean()
    loss.backward()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    one = m * t * VOCAB * 4
    return {"m": m, "T": t, "one_logits_MB": one / 2**20, "multiple": (peak - base) * 1024 / one}


def main() -> None:
    if len(sys.argv) == 3:
        print(json.dumps(measure(int(sys.argv[1]), int(sys.argv[2]))))
        return
    print("m    T    one logits tensor (MB)   peak above the model / one tensor")
    multiples = []
    for m, t in CASES:
        run = subprocess.run(
            [sys.executable, __file__, str(m), str(t)], capture_output=True, text=True, check=True
        )
        row = json.loads(run.stdout.strip().splitlines()[-1])
        multiples.append(row["multiple"])
        print(f"{m:<4} {t:<4} {row['one_logits_MB']:>10.0f}               {row['multiple']:.2f}")
    k = max(multiples)
    paper = k * 4 * 8192 * 151936 * 2 / 1e9
    print(
        f"\npeak multiple k = {k:.2f}; paper scale (m=4, T=8192, V=151936, bf16): "
        f"{paper:.1f} GB; at m=1: {paper / 4:.1f} GB"
    )


if __name__ == "__main__":
    main()
