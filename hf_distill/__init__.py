"""hf_distill: knowledge distillation of BERT-family text-pair models inside the Hugging Face Trainer.

Importing the package registers the student models with `AutoConfig` / `AutoModel` (so
`import hf_distill` then `AutoModel.from_pretrained(folder)` loads a saved student); the
trainer, arguments and callbacks load on first use (so a plugin that registers a loss component
before the arguments are built stays cheap).

One exception: run as the `hf-distill` console script, the model names load on first use too,
because registering them imports torch (seconds) and `hf-distill --help` / `--version` should
answer at once. The dispatcher imports `hf_distill.modeling` (which registers the models) before
any command that loads one.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import TYPE_CHECKING

__version__ = "0.1.0"

_MODELING = ("CrossEncoderConfig", "CrossEncoderModel", "CrossEncoderOutput", "SiameseConfig", "SiameseModel",
             "SiameseOutput")


def _console_script() -> bool:
    """True when this process is the `hf-distill` console script (hf-distill.exe or -script.py on Windows)."""
    argv = getattr(sys, "argv", None) or [""]
    name = os.path.splitext(os.path.basename(str(argv[0])))[0]
    return name in ("hf-distill", "hf-distill-script")


if not _console_script():  # import registers the models with AutoConfig / AutoModel
    _modeling = importlib.import_module(".modeling", __name__)
    globals().update({name: getattr(_modeling, name) for name in _MODELING})

_LAZY = {
    **dict.fromkeys(_MODELING, ".modeling"),
    "CostAttentionCallback": ".callbacks",
    "TeacherAnnealingCallback": ".callbacks",
    "DistillationArguments": ".training_args",
    "DistillationTrainer": ".trainer",
    "add_teacher_logits": ".teachers",
}

if TYPE_CHECKING:
    from .callbacks import CostAttentionCallback, TeacherAnnealingCallback
    from .modeling import (
        CrossEncoderConfig,
        CrossEncoderModel,
        CrossEncoderOutput,
        SiameseConfig,
        SiameseModel,
        SiameseOutput,
    )
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
