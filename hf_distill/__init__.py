"""hf_distill: knowledge distillation of BERT-family text-pair models inside the Hugging Face Trainer."""

__version__ = "0.1.0"

from .modeling import (
    CrossEncoderConfig,
    CrossEncoderModel,
    CrossEncoderOutput,
    SiameseConfig,
    SiameseModel,
    SiameseOutput,
)

__all__ = [
    "CrossEncoderConfig",
    "CrossEncoderModel",
    "CrossEncoderOutput",
    "SiameseConfig",
    "SiameseModel",
    "SiameseOutput",
    "__version__",
]
