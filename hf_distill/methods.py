"""The four papers as presets over the shared components.

Each preset returns a `DistillationMethod`: the student, the teachers and the
`DistillationArguments` defaults of the paper. The trainer builds every loss component and
callback from the arguments, so overriding a preset's argument changes the training, and two
trainers from one preset share no state. Nothing here is special-cased in the trainer.

    method = simplified_tinybert(teacher, num_layers=3, temperature=5.0)   # or bert_emd, dvbert, virt
    args = method.arguments(output_dir="out", num_train_epochs=3)   # paper defaults + yours
    trainer = method.trainer(args, train_dataset=train, eval_dataset=dev)
    trainer.train()
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from torch import nn

from .batch_keys import logits_column
from .citations import reference
from .modeling import CrossEncoderModel, SiameseModel
from .teachers import add_teacher_logits, load_teacher
from .trainer import DistillationTrainer
from .training_args import DistillationArguments
from .wrappers import unwrap_model

# Which entry of `hf_distill.citations.METHODS` each preset implements.
_METHOD_KEYS = {"simplified_tinybert": "tinybert", "bert_emd": "bert_emd", "dvbert": "dvbert", "virt": "virt"}


@dataclass
class DistillationMethod:
    """A method preset: what to train, from whom, and the paper's argument defaults."""

    name: str
    student: nn.Module
    teachers: list
    argument_defaults: dict[str, Any]

    @property
    def citation(self) -> str:
        return reference(_METHOD_KEYS[self.name])

    def arguments(self, **overrides) -> DistillationArguments:
        """`DistillationArguments` with the paper's defaults; your keyword arguments win."""
        return DistillationArguments(**{**self.argument_defaults, **overrides})

    def trainer(self, args: DistillationArguments, **kwargs) -> DistillationTrainer:
        """A `DistillationTrainer` for this method (kwargs: datasets, evaluators, compute_metrics, callbacks...)."""
        return DistillationTrainer(model=self.student, args=args, teachers=kwargs.pop("teachers", self.teachers), **kwargs)


def _eager(model: nn.Module) -> nn.Module:
    """Attention losses compare attention scores: the reference (eager) implementation."""
    unwrap_model(model).set_attn_implementation("eager")
    return model


def simplified_tinybert(
    teacher: CrossEncoderModel | str,
    num_layers: int = 3,
    temperature: float = 1.0,
    strategy: str | Sequence[int] = "uniform",
    layer_mapping: str = "uniform",
) -> DistillationMethod:
    """Simplified TinyBERT (Chen et al. 2020): one stage, attention + hidden + embedding + soft(tau) + hard.

    The cross-encoder student keeps `num_layers` of the teacher's layers (embeddings and head included):
    every L/k-th by default; the paper keeps the first k (`strategy="first"`), which re-ranked worse here
    (recipes/simplified_tinybert/wikiqa.yaml gives the numbers). Student layer i learns teacher layer
    i * L_T / L_S ("uniform"). The paper uses tau in {1, 5, 10}.
    """
    teacher = _eager(load_teacher(teacher))
    student = _eager(CrossEncoderModel.from_teacher(teacher, num_layers, strategy))
    defaults = dict(
        temperature=temperature,
        hard_weight=1.0,
        soft_weight=1.0,
        hidden_weight=1.0,
        attention_weight=1.0,
        embedding_weight=1.0,
        attention_loss="mse",
        layer_mapping=layer_mapping,
    )
    return DistillationMethod("simplified_tinybert", student, [teacher], defaults)


def bert_emd(
    teacher: CrossEncoderModel | str,
    num_layers: int = 4,
    strategy: str | Sequence[int] = "uniform",
    beta: float = 0.01,
    alpha: float = 0.8,
    temperature: float = 1.0,
    emd_temperature: float = 1.0,
    emd_update: str = "softmax",
    separate_weights: bool = False,
    smooth_weights: bool = True,
) -> DistillationMethod:
    """BERT-EMD (Li et al. 2020): all layers many-to-many by Earth Mover's Distance, with cost attention.

    Loss: beta * (EMD_attention + EMD_hidden + embedding) + alpha * soft + (1 - alpha) * hard. Defaults
    follow the official code (beta 0.01, alpha 0.8, tau 1, tau_emd 1, softmax update, averaged weights,
    then one more softmax over the weights: its `add_softmax`). The layer weights are updated after
    every optimizer step by `CostAttentionCallback`, which the trainer builds from these arguments.
    The student keeps the teacher's layers at uniform mapping's targets by default (`strategy="uniform"`,
    layers 3 and 6 of 6 for 2): in our GLUE comparisons those students were better with either mapping
    than students cut from the first layers (docs/results/bert_emd.md).
    """
    teacher = _eager(load_teacher(teacher))
    student = _eager(CrossEncoderModel.from_teacher(teacher, num_layers, strategy))
    defaults = dict(
        temperature=temperature,
        alpha=alpha,
        emd_weight=beta,
        embedding_weight=beta,
        emd_temperature=emd_temperature,
        emd_update=emd_update,
        emd_separate_weights=separate_weights,
        emd_smooth_weights=smooth_weights,
    )
    return DistillationMethod("bert_emd", student, [teacher], defaults)


def dvbert(
    student: SiameseModel | str,
    teachers: Sequence[CrossEncoderModel | str],
    task: str = "classification",
    num_labels: int = 3,
    annealing: bool = True,
    soft_weight: float = 1.0,
    hard_weight: float = 1.0,
) -> DistillationMethod:
    """DvBERT (Cheng 2021): a Siamese student taught by K cross-encoders, with teacher annealing.

    The student pools by mean and scores with a softmax classifier over (u, v, |u-v|)
    (`task="classification"`) or cosine similarity (`task="regression"`, STS). The loss is
    lambda * hard + (1 - lambda) * sum_k soft_k with lambda = step / total (annealing); with
    `annealing=False` it is the "loss weighting" alternative hard_weight * hard + soft_weight * sum_k soft_k.
    Precompute the teachers' logits once with `method.label(dataset, text_columns)`.
    """
    if task not in ("classification", "regression"):
        raise ValueError(f"task={task!r} is not valid; choose 'classification' or 'regression'.")
    if isinstance(student, str):
        head = "cosine" if task == "regression" else "classification"
        student = SiameseModel.from_backbone(student, pooling="mean", head=head, num_labels=num_labels)
    teachers = [load_teacher(t) for t in teachers]
    if not teachers:
        raise ValueError("teachers=[] is not valid; DvBERT needs at least one cross-encoder teacher.")
    defaults: dict[str, Any] = dict(teacher_reduction="sum")
    if annealing:
        defaults["annealing"] = "linear"
    else:
        defaults.update(hard_weight=hard_weight, soft_weight=soft_weight)
    return _DvBERT("dvbert", student, teachers, defaults)


class _DvBERT(DistillationMethod):
    def label(self, dataset, text_columns: Sequence[str], batch_size: int = 64, max_length: int = 128):
        """The dataset with one `teacher_logits_{k}` column per teacher (each with its own tokenizer)."""
        for k, teacher in enumerate(self.teachers):
            dataset = add_teacher_logits(
                dataset, teacher, text_columns, column=logits_column(k), batch_size=batch_size, max_length=max_length
            )
        return dataset

    def trainer(self, args: DistillationArguments, **kwargs) -> DistillationTrainer:
        """Precomputed logits in the training set replace the online teachers (DvBERT labels offline)."""
        train = kwargs.get("train_dataset")
        if train is not None and logits_column(0) in train.column_names:
            kwargs.setdefault("teachers", [])
        return super().trainer(args, **kwargs)


def virt(
    teacher: CrossEncoderModel | str,
    student: SiameseModel | str,
    alpha: float = 1.0,
    interaction: bool = False,
    layer_mapping: str = "uniform",
    num_labels: int | None = None,
) -> DistillationMethod:
    """VIRT (Li et al. 2022): the cross-encoder's X->Y / Y->X attention distilled into a Siamese student.

    Loss: task loss + alpha * L_virt (alpha = 1 is the paper's best), L_virt the MSE between the
    student's virtual attention (its own queries of one side against keys of the other) and the
    teacher's attention sub-blocks renormalised over the target side. `interaction=True` adds the
    VIRT-adapted interaction layer at match time (embeddings stay independent). Teacher and student
    share a tokenizer and head count. No official code exists: see docs/virt.md for this reading.
    """
    teacher = _eager(load_teacher(teacher))
    if isinstance(student, str):
        student = SiameseModel.from_backbone(
            student,
            pooling="mean",
            head="classification",
            num_labels=num_labels or teacher.config.num_labels,
            interaction="virt" if interaction else "none",
            id2label=dict(teacher.config.id2label),
            label2id=dict(teacher.config.label2id),
        )
    student = _eager(student)
    defaults = dict(alpha=0.0, virt_weight=alpha, layer_mapping=layer_mapping)
    return DistillationMethod("virt", student, [teacher], defaults)


__all__ = ["DistillationMethod", "bert_emd", "dvbert", "simplified_tinybert", "virt"]
