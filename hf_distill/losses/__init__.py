"""Loss components: `LossComponent`s whose forward(student_out, teacher_outs, batch) returns named terms.

Each declares its terms, the argument weighing each, what it needs, its method and citation
(`base.py`); the registry (`registry.py`) lists those `DistillationArguments` switch on by weight.
"""

from .base import LossComponent, Term, check_returned_terms, declared_terms, resolve_weights
from .emd import EMDLayerLoss, cost_attention_update, earth_movers_flow
from .emd_costs import layer_cost_matrix
from .group_contrastive import GroupContrastiveLoss, group_contrastive
from .in_batch_negatives import InBatchNegativesLoss, in_batch_negatives
from .layers import AttentionLoss, EmbeddingLoss, HiddenStateLoss, masked_mse
from .listwise_kl import ListwiseKLLoss, listwise_kl
from .logits import PredictionLoss, hard_loss, soft_loss
from .margin_mse import MarginMSELoss, margin_mse
from .registry import LOSS_COMPONENTS, build_components, register_loss
from .virt import VirtualInteractionLoss

__all__ = [
    "LOSS_COMPONENTS",
    "AttentionLoss",
    "EMDLayerLoss",
    "EmbeddingLoss",
    "GroupContrastiveLoss",
    "HiddenStateLoss",
    "InBatchNegativesLoss",
    "ListwiseKLLoss",
    "LossComponent",
    "MarginMSELoss",
    "PredictionLoss",
    "Term",
    "VirtualInteractionLoss",
    "build_components",
    "check_returned_terms",
    "cost_attention_update",
    "declared_terms",
    "earth_movers_flow",
    "group_contrastive",
    "hard_loss",
    "in_batch_negatives",
    "layer_cost_matrix",
    "listwise_kl",
    "margin_mse",
    "masked_mse",
    "register_loss",
    "resolve_weights",
    "soft_loss",
]
