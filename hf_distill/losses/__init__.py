"""Loss components: `nn.Module`s whose forward(student_out, teacher_outs, batch) returns named terms."""

from .logits import PredictionLoss, hard_loss, soft_loss

__all__ = ["PredictionLoss", "hard_loss", "soft_loss"]
