"""Prediction-level distillation: soft (teacher logits), hard (gold labels), and their mixture.

    soft  = tau^2 * KL(softmax(z_T / tau) || softmax(z_S / tau)), batch mean   (classification)
          = MSE(z_S, z_T)                                                    (regression: one output)
    hard  = CE(z_S, y)  or  MSE(z_S, y)
    prediction loss = alpha * soft + (1 - alpha) * hard     (or lambda * hard + (1 - lambda) * soft, annealed)

With K teachers the per-teacher soft terms are summed (DvBERT) or averaged. Rows without a gold
label (augmented or transfer rows: class -100, score NaN) contribute only the soft terms.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from ..modeling.modeling_common import task_loss
from .base import LossComponent, Term

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


UNLABELLED_CLASS = -100  # the ignored index: a row without a gold class (augmented, transfer)


def labelled_rows(labels: torch.Tensor) -> torch.Tensor:
    """True for rows with a gold label: class ids other than -100, regression targets that are not NaN."""
    return ~torch.isnan(labels) if labels.is_floating_point() else labels != UNLABELLED_CLASS


def hard_loss(student_logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor | None:
    """Task loss against gold labels, averaged over the labelled rows only (None when no row has a label).

    Cross-entropy, or MSE for a single output. Rows without a gold label (class -100, score NaN)
    are augmented or transfer rows: they learn from the teachers alone.
    """
    keep = labelled_rows(labels)
    if not bool(keep.any()):
        return None
    return task_loss(student_logits[keep], labels[keep])  # the student's own task loss, on the labelled rows


def _hard_weight(args, annealing_lambda: float | None, has_teachers: bool) -> float:
    return args.prediction_weights(annealing_lambda)[0] if has_teachers else 1.0


def _soft_weight(share: float):
    def weight(args, annealing_lambda: float | None, has_teachers: bool) -> float:
        return args.prediction_weights(annealing_lambda)[1] * share if has_teachers else 0.0

    return weight


class PredictionLoss(LossComponent):
    """Soft and hard terms on the student's logits, weighted by alpha (or the annealed lambda).

    Terms: `hard` (rows with a gold label; absent from a batch without any) and `soft` for one
    teacher, or `soft_0`, `soft_1`, ... for several, each weighted by the soft weight (reduction
    "sum", DvBERT) or the soft weight / K ("mean"), so their weighted sum is the combined soft loss.

    Args:
        temperature: tau > 0 softening both distributions.
        reduction: how K teachers' soft terms combine: "sum" (DvBERT) or "mean".
        num_teachers: K, the number of teachers (online, or precomputed logit columns).
    """

    method = "logit_kd"

    def __init__(self, temperature: float = 1.0, reduction: str = "sum", num_teachers: int = 1):
        super().__init__()
        if temperature <= 0:
            raise ValueError(f"temperature={temperature!r} must be > 0.")
        if reduction not in REDUCTIONS:
            raise ValueError(f"reduction={reduction!r} is not valid; choose 'sum' or 'mean'.")
        self.temperature = temperature
        self.reduction = reduction
        self.num_teachers = num_teachers

    def declared_terms(self) -> tuple[Term, ...]:
        hard = Term("hard", "hard_weight", "cross-entropy (MSE for one score) on the gold labels", weight=_hard_weight)
        soft = f"τ²·KL(teacher ‖ student) at temperature τ = {self.temperature:g} (MSE for one score)"
        if self.num_teachers <= 1:
            return hard, Term("soft", "soft_weight", soft, weight=_soft_weight(1.0))
        share = 1.0 if self.reduction == "sum" else 1.0 / self.num_teachers
        return hard, *(
            Term(f"soft_{k}", "soft_weight", f"{soft}, teacher {k}", weight=_soft_weight(share), group="soft")
            for k in range(self.num_teachers)
        )

    def forward(self, student_out, teacher_outs: Sequence, batch: dict) -> dict[str, torch.Tensor]:
        terms: dict[str, torch.Tensor] = {}
        logits = student_out.logits
        if logits is None:  # sentences alone: no pair to score (embedding losses read the embeddings)
            return terms
        if batch.get("labels") is not None:
            hard = hard_loss(logits, batch["labels"])
            if hard is not None:
                terms["hard"] = hard
        per_teacher = [soft_loss(logits, out.logits, self.temperature) for out in teacher_outs]
        if len(per_teacher) == 1:
            terms["soft"] = per_teacher[0]
        else:
            terms.update({f"soft_{k}": value for k, value in enumerate(per_teacher)})
        return terms
