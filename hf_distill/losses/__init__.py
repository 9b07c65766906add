"""Loss components: `LossComponent`s whose forward(student_out, teacher_outs, batch) returns named terms.

Each declares its terms, the argument weighing each, what it needs, its method and citation
(`base.py`); the registry (`registry.py`) lists those `DistillationArguments` switch on by weight.
"""

from .base import LossComponent, Term, check_returned_terms, declared_terms, resolve_weights
from .emd import EMDLayerLoss, cost_attention_update, earth_movers_flow
from .emd_costs import layer_cost_matrix
from .layers import AttentionLoss, EmbeddingLoss, HiddenStateLoss, masked_mse
from .logits import PredictionLoss, hard_loss, soft_loss
from .registry import LOSS_COMPONENTS, build_components, register_loss
from .virt import VirtualInteractionLoss

__all__ = [
    "LOSS_COMPONENTS",
    "AttentionLoss",
    "EMDLayerLoss",
    "EmbeddingLoss",
    "HiddenStateLoss",
    "LossComponent",
    "PredictionLoss",
    "Term",
    "VirtualInteractionLoss",
    "build_components",
    "check_returned_terms",
    "cost_attention_update",
    "declared_terms",
    "earth_movers_flow",
    "hard_loss",
    "layer_cost_matrix",
    "masked_mse",
    "register_loss",
    "resolve_weights",
    "soft_loss",
]
