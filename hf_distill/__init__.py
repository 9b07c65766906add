"""hf_distill: knowledge distillation of BERT-family text-pair models inside the Hugging Face Trainer."""

__version__ = "0.1.0"

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
