"""The SDPO teacher kinds (a method's `teacher_model_kind`), in one registry.

Each kind says what TRL's SDPOTrainer runs it as, whether it takes an anchor (`teacher_anchor`,
`teacher_anchor_mix`), what it carries from step to step (saved in every trainer checkpoint and
restored on resume) and which method keys it rules out. cptlab.train.spec checks a method's keys
with it, cptlab.train.stage decides what a resumable checkpoint holds, and cptlab.train.sdpo
builds, saves and restores the teacher from it. The trainer knows a kind by the TRL setup it
runs as (`trl_teacher`: TRL's kind and the trust region), one kind per setup, so a new kind is
also new teacher behaviour in cptlab.train.sdpo (docs/extending.md).

| kind           | the teacher                                              | TRL's kind |
|----------------|----------------------------------------------------------|------------|
| `frozen`       | the anchor (the stage start by default), never updated   | `base`     |
| `ema`          | starts at the anchor, moves towards the student (EMA)    | `ema`      |
| `student`      | the student itself, as it trains                         | `live`     |
| `trust_region` | logits lerp(frozen anchor, student, mix), the study's    | `base`     |

The former names `base` (a frozen teacher, which is the stage start unless `teacher_anchor` says
otherwise, not the base model) and `live` still work; they log a deprecation warning.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import cache

log = logging.getLogger(__name__)

# teacher_anchor's named values (any other value is a checkpoint path)
ANCHOR_STAGE_START = "stage_start"
ANCHOR_BASE = "base"

# The EMA teacher's weights in a trainer checkpoint (the file name of existing state folders).
EMA_TEACHER_STATE = "sdpo_teacher.pt"


@dataclass(frozen=True)
class TeacherKind:
    """One SDPO teacher kind.

    Parameters:
        name (`str`):
            The kind's name in a method's `teacher_model_kind`.
        summary (`str`):
            What the teacher is, in a few words (error messages, documentation).
        trl_kind (`str`):
            TRL's `SDPOConfig.teacher_model_kind` it runs as: `base` (a separate frozen model),
            `ema` (a separate model updated by TRL's `SyncTeacherModelCallback`) or `live` (the
            student).
        anchored (`bool`):
            Whether the teacher is a separate model built from `teacher_anchor`, mixed with the
            student by `teacher_anchor_mix`. A kind without one rejects both keys.
        trust_region (`bool`):
            Whether the teacher's logits are lerp(anchor's, student's, `teacher_trust_region_mix`)
            on the teacher's input.
        state_file (`str`, *optional*):
            The file in each trainer checkpoint holding the teacher's weights, for a kind whose
            teacher changes during a stage: the trainer writes it with every checkpoint, a
            resumed stage restores the teacher from it, and a checkpoint without it is not
            resumed. `None`: the teacher is rebuilt as it began (from the stage start and the
            anchor) and holds nothing else across steps.
    """

    name: str
    summary: str
    trl_kind: str
    anchored: bool
    trust_region: bool = False
    state_file: str | None = None

    def check(self, params) -> str | None:
        """What is wrong with a method's keys (its SDPOSettings) for this kind (None: nothing)."""
        if not self.anchored and (
            params.teacher_anchor != ANCHOR_STAGE_START or params.teacher_anchor_mix != 1.0
        ):
            return (
                f"a {self.name} teacher is {self.summary}; "
                "it takes no teacher_anchor/teacher_anchor_mix"
            )
        return None


TEACHER_KINDS: dict[str, TeacherKind] = {
    kind.name: kind
    for kind in (
        TeacherKind("frozen", "a frozen copy of the anchor", trl_kind="base", anchored=True),
        TeacherKind(
            "ema",
            "the anchor moved towards the student at teacher_update_rate",
            trl_kind="ema",
            anchored=True,
            state_file=EMA_TEACHER_STATE,
        ),
        TeacherKind("student", "the student itself", trl_kind="live", anchored=False),
        TeacherKind(
            "trust_region",
            "the frozen anchor's logits pulled towards the student's",
            trl_kind="base",
            anchored=True,
            trust_region=True,
        ),
    )
}

# Former names -> current ones.
RENAMED = {"base": "frozen", "live": "student"}


def canonical_kind(name: str, where: str = "config") -> str:
    """The registry's name of `name` (a current name or a former one, which logs a warning)."""
    if name in RENAMED:
        _warn_renamed(name, where)
        return RENAMED[name]
    return name


@cache  # once per method and name: configs are resolved many times per run
def _warn_renamed(name: str, where: str) -> None:
    log.warning(
        "%s: teacher_model_kind %r is deprecated; use %r (the same teacher)",
        where,
        name,
        RENAMED[name],
    )


def trl_teacher(trl_kind: str, trust_region: bool) -> TeacherKind:
    """The kind that runs as TRL's `trl_kind`, with or without the trust region: what a
    CptSDPOConfig's teacher is."""
    for kind in TEACHER_KINDS.values():
        if kind.trl_kind == trl_kind and kind.trust_region == trust_region:
            return kind
    raise ValueError(
        f"no teacher kind runs as TRL's {trl_kind!r} "
        f"{'with' if trust_region else 'without'} a trust region"
    )
