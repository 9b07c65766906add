"""`DistillationArguments`: `TrainingArguments` plus every knob of the distillation methods.

Every field has a `help` and is checked in `__post_init__`, before any model is loaded,
with an error that names the field, the value and what would be valid.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, make_dataclass

from transformers import TrainingArguments

from .losses.logits import REDUCTIONS
from .losses.registry import switch_arguments
from .mapping import parse_layer_mapping
from .teachers import TEACHER_DTYPES

ANNEALING = ("none", "linear")
ATTENTION_LOSSES = ("mse", "kl")
EMD_UPDATES = ("softmax", "normalize")


def _check_choice(name: str, value, valid) -> None:
    if value not in valid:
        raise ValueError(f"{name}={value!r} is not valid; choose one of {', '.join(map(repr, valid))}.")


def _check_range(name: str, value, low: float, high: float | None = None, low_open: bool = False) -> None:
    """A finite number in the range: None, strings, booleans, NaN and inf are refused too."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not number or (value <= low if low_open else value < low) or (high is not None and value > high):
        bound = f"{'>' if low_open else '>='} {low}" + (f" and <= {high}" if high is not None else "")
        raise ValueError(f"{name}={value!r} is out of range; it must be {bound} (a finite number).")


# One weight field per registered loss component (`hf_distill.losses.registry`): hidden_weight,
# attention_weight, embedding_weight, emd_weight, virt_weight, ... each 0 (off) by default.
LossWeightArguments = make_dataclass(
    "LossWeightArguments",
    [(name, float, field(default=0.0, metadata={"help": help})) for name, help in switch_arguments().items()],
    namespace={"__doc__": "The weight arguments of the registered loss components (each > 0 switches one on)."},
)
LossWeightArguments.__module__ = __name__


@dataclass
class DistillationArguments(LossWeightArguments, TrainingArguments):
    """Training arguments for `DistillationTrainer` (all `TrainingArguments` fields plus these)."""

    # ---------------------------------------------------------------- prediction-level
    temperature: float = field(
        default=1.0, metadata={"help": "Softmax temperature tau (> 0) of the soft loss; the KL is scaled by tau^2."}
    )
    alpha: float = field(
        default=0.5,
        metadata={"help": "Weight of the soft loss in [0, 1]: alpha * soft + (1 - alpha) * hard (without annealing)."},
    )
    hard_weight: float | None = field(
        default=None, metadata={"help": "Explicit weight (>= 0) of the hard loss; overrides 1 - alpha."}
    )
    soft_weight: float | None = field(
        default=None, metadata={"help": "Explicit weight (>= 0) of the soft loss; overrides alpha."}
    )
    teacher_reduction: str = field(
        default="sum", metadata={"help": "How the soft losses of several teachers combine: 'sum' (DvBERT) or 'mean'."}
    )
    annealing: str = field(
        default="none",
        metadata={
            "help": "Teacher annealing: 'none' (fixed alpha weighting) or 'linear' "
            "(lambda = step/total; loss = lambda * hard + (1 - lambda) * soft)."
        },
    )
    teacher_dtype: str = field(
        default="auto", metadata={"help": "dtype of online teachers: 'auto' (as loaded), 'float32', 'bfloat16', 'float16'."}
    )
    # ---------------------------------------------------------------- data
    text_columns: list[str] | None = field(
        default=None,
        metadata={"help": "The two text columns of a pair (default: inferred, e.g. sentence1/sentence2, premise/hypothesis)."},
    )
    label_column: str = field(default="label", metadata={"help": "Column with gold labels (class names or ids, or scores)."})
    label_scale: float = field(
        default=1.0, metadata={"help": "Regression labels are divided by this (> 0), e.g. 5 for STS-B scores on 0-5."}
    )
    max_length: int = field(default=128, metadata={"help": "Truncation length (tokens, >= 8) of every tokenised view."})
    train_block_size: int | None = field(
        default=None,
        metadata={
            "help": "Sample training rows in shuffled blocks of this many consecutive rows (>= 1), so rows that sit "
            "together in the data (a pair's two sides, a question and its answers) share a batch; with "
            "train_sampling_strategy 'group_by_length' blocks of similar length batch together. None: row by row."
        },
    )
    student_length_buckets: int = field(
        default=1,
        metadata={
            "help": "Siamese students: encode each side of a training batch in this many groups of rows of similar "
            "length (>= 1), each padded to its own longest row, not all to the batch's longest: the same embeddings, "
            "less padding (batches of blocks of neighbours hold 1.8x their real tokens at batch 64, 1.17x in 4 "
            "groups). Not with losses on the student's layer outputs. 1: the whole batch at once."
        },
    )
    # ---------------------------------------------------------------- intermediate layers
    attention_loss: str = field(
        default="mse", metadata={"help": "Attention loss: 'mse' on pre-softmax scores (TinyBERT) or 'kl' on probabilities."}
    )
    layer_mapping: str = field(
        default="uniform",
        metadata={"help": "Student-to-teacher layer mapping: 'uniform' (TinyBERT skip), 'last', or pairs like '1:2,2:4'."},
    )
    shared_projection: bool = field(
        default=True, metadata={"help": "One hidden-state projection W_h for all layers (True) or one per layer."}
    )
    # ---------------------------------------------------------------- BERT-EMD
    emd_temperature: float = field(
        default=1.0, metadata={"help": "Temperature (> 0) of the softmax in the cost-attention weight update."}
    )
    emd_update: str = field(
        default="softmax", metadata={"help": "Cost-attention update: 'softmax' (w~/tau_emd) or 'normalize' (w~/sum w~)."}
    )
    emd_separate_weights: bool = field(
        default=False, metadata={"help": "Keep attention and hidden layer weights separate (True) or average them."}
    )
    emd_smooth_weights: bool = field(
        default=False,
        metadata={
            "help": "After each cost-attention update, pass every layer-weight vector through one more softmax "
            "(the official code's add_softmax, on by default there and in `methods.bert_emd`): it keeps the weights "
            "from collapsing onto one layer."
        },
    )
    restore_callback_states_from_checkpoint: bool = field(
        default=True,
        metadata={
            "help": "Restore stateful callbacks (teacher annealing, cost-attention weight history) on resume. "
            "True by default here: distillation schedules are part of the training state."
        },
    )
    # ---------------------------------------------------------------- VIRT
    # ---------------------------------------------------------------- saving and the model card
    merge_adapters_on_save: bool = field(
        default=False,
        metadata={
            "help": "For a PEFT (LoRA) student: the final save_model / push_to_hub writes the student with its adapters "
            "merged (a complete folder that AutoModel.from_pretrained loads) instead of the adapter alone. "
            "Checkpoints keep the adapter, so resume_from_checkpoint works either way."
        },
    )
    measure_speed_on_save: bool = field(
        default=False,
        metadata={
            "help": "At the final save_model, time the student and every online teacher on up to 256 evaluation "
            "(else training) pairs and report pairs/s and the speed-up in the model card (README.md)."
        },
    )

    def __post_init__(self):
        self._validate_distillation_fields()
        super().__post_init__()

    def _validate_distillation_fields(self) -> None:
        _check_range("temperature", self.temperature, 0.0, low_open=True)
        _check_range("alpha", self.alpha, 0.0, 1.0)
        for name in ("hard_weight", "soft_weight"):
            if getattr(self, name) is not None:
                _check_range(name, getattr(self, name), 0.0)
        _check_choice("teacher_reduction", self.teacher_reduction, REDUCTIONS)
        _check_choice("annealing", self.annealing, ANNEALING)
        _check_choice("teacher_dtype", self.teacher_dtype, tuple(TEACHER_DTYPES))
        if self.text_columns is not None and len(self.text_columns) != 2:
            raise ValueError(f"text_columns={self.text_columns!r} is not valid; give exactly two column names.")
        _check_range("label_scale", self.label_scale, 0.0, low_open=True)
        _check_range("max_length", self.max_length, 8)
        self._validate_block_size()
        value = self.student_length_buckets
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"student_length_buckets={value!r} is not valid; give a whole number >= 1.")
        for name in switch_arguments():
            _check_range(name, getattr(self, name), 0.0)
        _check_choice("attention_loss", self.attention_loss, ATTENTION_LOSSES)
        parse_layer_mapping(self.layer_mapping)
        _check_range("emd_temperature", self.emd_temperature, 0.0, low_open=True)
        _check_choice("emd_update", self.emd_update, EMD_UPDATES)
        for name in ("merge_adapters_on_save", "measure_speed_on_save"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name}={getattr(self, name)!r} is not valid; give True or False.")

    def _validate_block_size(self) -> None:
        if self.train_block_size is None:
            return
        if not isinstance(self.train_block_size, int) or isinstance(self.train_block_size, bool) or self.train_block_size < 1:
            raise ValueError(f"train_block_size={self.train_block_size!r} is not valid; give a whole number >= 1 (or None).")
        _check_choice("train_sampling_strategy (with train_block_size)", self.train_sampling_strategy,
                      ("random", "group_by_length"))

    def prediction_weights(self, annealing_lambda: float | None) -> tuple[float, float]:
        """(hard, soft) weights for this step: annealed lambda, else explicit weights, else alpha."""
        if annealing_lambda is not None:
            return annealing_lambda, 1.0 - annealing_lambda
        hard = self.hard_weight if self.hard_weight is not None else 1.0 - self.alpha
        soft = self.soft_weight if self.soft_weight is not None else self.alpha
        return hard, soft
