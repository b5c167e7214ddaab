"""The supervised warm-up's loss: the model's own labels loss, computed on fewer logits."""

import torch
from tiny_models import tiny_qwen2

from cptlab.base_model.warmup import collate_examples, completion_loss


def test_completion_loss_equals_the_models_labels_loss():
    model = tiny_qwen2(vocab_size=50)
    generator = torch.Generator().manual_seed(0)
    examples = []
    for length, prompt in ((9, 4), (6, 2), (12, 7)):
        ids = torch.randint(3, 50, (length,), generator=generator).tolist()
        examples.append((ids, [-100] * prompt + ids[prompt:]))
    batch = collate_examples(examples, pad_id=0)
    ours = completion_loss(model, batch)
    reference = model(**batch).loss
    torch.testing.assert_close(ours, reference, rtol=1e-5, atol=1e-6)
    ours.backward()  # and it trains: gradients reach the output layer and the embeddings
    assert model.lm_head.weight.grad is not None and model.lm_head.weight.grad.abs().sum() > 0
