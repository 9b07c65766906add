"""Prediction-level distillation: soft (teacher logits), hard (gold labels), and their mixture.

    soft  = tau^2 * KL(softmax(z_T / tau) || softmax(z_S / tau)), batch mean   (classification)
          = MSE(z_S, z_T)                                                    (regression: one output)
    hard  = CE(z_S, y)  or  MSE(z_S, y)
    prediction loss = alpha * soft + (1 - alpha) * hard     (or lambda * hard + (1 - lambda) * soft, annealed)

With K teachers the soft terms are reduced by `sum` (DvBERT) or `mean`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

REDUCTIONS = ("sum", "mean")


def soft_loss(student_logits: torch.Tensor, teacher_logits: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """Distillation loss against one teacher's logits (KL with tau^2 scaling, or MSE for one output)."""
    student_logits = student_logits.float()
    teacher_logits = teacher_logits.float().to(student_logits.device)
    if student_logits.size(-1) == 1:
        return F.mse_loss(student_logits.squeeze(-1), teacher_logits.reshape(student_logits.shape).squeeze(-1))
    if teacher_logits.shape != student_logits.shape:
        raise ValueError(
            f"teacher logits of shape {tuple(teacher_logits.shape)} do not match the student's "
            f"{tuple(student_logits.shape)}: teacher and student need the same number of labels."
        )
    log_p_student = F.log_softmax(student_logits / temperature, dim=-1)
    log_p_teacher = F.log_softmax(teacher_logits / temperature, dim=-1)
    kl = F.kl_div(log_p_student, log_p_teacher, reduction="batchmean", log_target=True)
    return kl * temperature**2


def hard_loss(student_logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Task loss against gold labels: cross-entropy, or MSE for a single output."""
    if student_logits.size(-1) == 1:
        return F.mse_loss(student_logits.squeeze(-1).float(), labels.float())
    return F.cross_entropy(student_logits.float(), labels.long())


class PredictionLoss(nn.Module):
    """Soft and hard terms on the student's logits; the trainer weights them (alpha or annealed lambda).

    Returns the terms `hard` (when labels are present), `soft` (reduced over teachers, when
    teacher logits are present) and, with several teachers, `soft_0`, `soft_1`, ... per teacher.

    Args:
        temperature: tau > 0 softening both distributions.
        reduction: how K teachers' soft terms combine: "sum" (DvBERT) or "mean".
    """

    requires: set[str] = set()

    def __init__(self, temperature: float = 1.0, reduction: str = "sum"):
        super().__init__()
        if temperature <= 0:
            raise ValueError(f"temperature={temperature!r} must be > 0.")
        if reduction not in REDUCTIONS:
            raise ValueError(f"reduction={reduction!r} is not valid; choose 'sum' or 'mean'.")
        self.temperature = temperature
        self.reduction = reduction

    def forward(self, student_out, teacher_outs: Sequence, batch: dict) -> dict[str, torch.Tensor]:
        terms: dict[str, torch.Tensor] = {}
        logits = student_out.logits
        if batch.get("labels") is not None:
            terms["hard"] = hard_loss(logits, batch["labels"])
        per_teacher = [soft_loss(logits, out.logits, self.temperature) for out in teacher_outs]
        if per_teacher:
            stacked = torch.stack(per_teacher)
            terms["soft"] = stacked.sum() if self.reduction == "sum" else stacked.mean()
            if len(per_teacher) > 1:
                terms.update({f"soft_{k}": value for k, value in enumerate(per_teacher)})
        return terms
