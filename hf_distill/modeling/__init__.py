"""Student model families: Siamese bi-encoder and cross-encoder, Hub-format `PreTrainedModel`s."""

from transformers import AutoConfig, AutoModel, AutoModelForSequenceClassification

from .configuration_hf_distill import CrossEncoderConfig, SiameseConfig
from .modeling_common import capture_queries_keys, pool_tokens
from .modeling_cross_encoder import CrossEncoderModel, CrossEncoderOutput, select_layers
from .modeling_siamese import SiameseEncoding, SiameseModel, SiameseOutput


def _register() -> None:
    """Make `AutoModel.from_pretrained(dir)` work with hf_distill installed, and `trust_remote_code` without."""
    for config_class, model_class, auto_classes in (
        (SiameseConfig, SiameseModel, (AutoModel,)),
        (CrossEncoderConfig, CrossEncoderModel, (AutoModel, AutoModelForSequenceClassification)),
    ):
        AutoConfig.register(config_class.model_type, config_class, exist_ok=True)
        for auto_class in auto_classes:
            auto_class.register(config_class, model_class, exist_ok=True)
        config_class.register_for_auto_class()
    SiameseModel.register_for_auto_class("AutoModel")
    CrossEncoderModel.register_for_auto_class("AutoModelForSequenceClassification")


_register()

__all__ = [
    "CrossEncoderConfig",
    "CrossEncoderModel",
    "CrossEncoderOutput",
    "SiameseConfig",
    "SiameseEncoding",
    "SiameseModel",
    "SiameseOutput",
    "capture_queries_keys",
    "pool_tokens",
    "select_layers",
]
