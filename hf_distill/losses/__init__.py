"""Loss components: `nn.Module`s whose forward(student_out, teacher_outs, batch) returns named terms."""

from .emd import EMDLayerLoss, cost_attention_update, earth_movers_flow, layer_cost_matrix
from .layers import AttentionLoss, EmbeddingLoss, HiddenStateLoss, masked_mse
from .logits import PredictionLoss, hard_loss, soft_loss
from .virt import VirtualInteractionLoss

__all__ = [
    "AttentionLoss",
    "EMDLayerLoss",
    "EmbeddingLoss",
    "HiddenStateLoss",
    "PredictionLoss",
    "VirtualInteractionLoss",
    "cost_attention_update",
    "earth_movers_flow",
    "hard_loss",
    "layer_cost_matrix",
    "masked_mse",
    "soft_loss",
]
