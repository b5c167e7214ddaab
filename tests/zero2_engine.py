"""One SDPO step with an EMA teacher under `accelerate launch` with paper.yaml's DeepSpeed
config, in bf16 (tests/test_deepspeed.py runs it): each process writes what its DeepSpeed
engine and its EMA teacher hold after the step, as `rank<i>.json` in the output folder.

    accelerate launch ... tests/zero2_engine.py CONFIG.json BASE_FOLDER OUT_FOLDER
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from transformers import TrainerCallback

sys.path.insert(0, str(Path(__file__).parent))
import tiny_world  # noqa: E402  (registers the tiny benchmark and its verifier)

from cptlab.train.spec import resolve_stage  # noqa: E402
from cptlab.train.stage import build_trainer, parameters_sha256  # noqa: E402


def name(dtype) -> str:
    return str(dtype).removeprefix("torch.")


class ReadTheEngine(TrainerCallback):
    """After training: the engine's data types and its ZeRO optimizer's, the teacher's dtype and
    its float32 weights (before and after)."""

    def __init__(self, out: Path):
        self.out = out
        self.trainer = None
        self.teacher_start = None

    def on_train_begin(self, args, state, control, **kwargs):
        self.teacher_start = parameters_sha256(self.trainer.ema_teacher.state())

    def on_train_end(self, args, state, control, **kwargs):
        engine, ema = self.trainer.model_wrapped, self.trainer.ema_teacher
        zero = engine.optimizer
        model_dtype, grad_accum_dtype = engine.get_data_types()
        found = {
            "engine": type(engine).__name__,
            "zero_optimizer": type(zero).__name__,
            "zero_stage": engine.zero_optimization_stage(),
            "model_dtype": name(model_dtype),
            "grad_accum_dtype": name(grad_accum_dtype),
            "communication_data_type": name(engine.communication_data_type),
            "gradient_accumulation_steps": engine.gradient_accumulation_steps(),
            "optimizer_grad_accum_dtype": name(zero.gradient_accumulation_dtype),
            "float32_grad_partition": zero._use_compact_grad_partition_buffer(0),
            "master_dtype": name(zero.single_partition_of_fp32_groups[0].dtype),
            "teacher_dtype": name(next(iter(ema.parameters())).dtype),
            "teacher_state_dtypes": sorted({name(w.dtype) for w in ema.state()}),
            "teacher_start_sha256": self.teacher_start,
            "teacher_state_sha256": parameters_sha256(ema.state()),
            "student_sha256": parameters_sha256(kwargs["model"].parameters()),
        }
        (self.out / f"rank{args.process_index}.json").write_text(json.dumps(found))


def main() -> None:
    config = json.loads(Path(sys.argv[1]).read_text())
    base, out = sys.argv[2], Path(sys.argv[3])
    read = ReadTheEngine(out)
    settings = resolve_stage(config, "sdpo_ema", "math")
    trainer = build_trainer(settings, tiny_world.tiny_rows(), base, out / "state", 0, None, [read])
    read.trainer = trainer
    trainer.train()


if __name__ == "__main__":
    main()
