"""hf_distill: knowledge distillation of BERT-family text-pair models inside the Hugging Face Trainer.

Importing the package registers the student models with `AutoConfig` / `AutoModel`; the
trainer, arguments and callbacks load on first use (so `hf-distill --help` and a plugin that
registers a loss component before the arguments are built stay cheap).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from .modeling import (
    CrossEncoderConfig,
    CrossEncoderModel,
    CrossEncoderOutput,
    SiameseConfig,
    SiameseModel,
    SiameseOutput,
)

__version__ = "0.1.0"

_LAZY = {
    "CostAttentionCallback": ".callbacks",
    "TeacherAnnealingCallback": ".callbacks",
    "DistillationArguments": ".training_args",
    "DistillationTrainer": ".trainer",
    "add_teacher_logits": ".teachers",
}

if TYPE_CHECKING:
    from .callbacks import CostAttentionCallback, TeacherAnnealingCallback
    from .teachers import add_teacher_logits
    from .trainer import DistillationTrainer
    from .training_args import DistillationArguments


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'hf_distill' has no attribute {name!r}")


__all__ = [
    "CostAttentionCallback",
    "CrossEncoderConfig",
    "CrossEncoderModel",
    "CrossEncoderOutput",
    "DistillationArguments",
    "DistillationTrainer",
    "SiameseConfig",
    "SiameseModel",
    "SiameseOutput",
    "TeacherAnnealingCallback",
    "__version__",
    "add_teacher_logits",
]
