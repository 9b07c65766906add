"""Collators that tokenise text columns on the fly, once per view.

The student's view depends on its family (Siamese: each side alone; cross-encoder: the
joint pair); each online teacher gets its own view with its own tokenizer, under keys
prefixed `teacher_{k}_`: the joint pair for a cross-encoder, each side alone for a teacher that
embeds (a bi-encoder). Precomputed teacher logits travel as `teacher_logits_{k}`, precomputed
embeddings as `teacher_embeddings_{k}_a` / `_b`. Rows may also be sentences alone (one text
column): a Siamese student and embedding teachers then see side a only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from .alignment import check_same_tokenizer, tokenize_aligned
from .batch_keys import teacher_prefix
from .compatibility import same_tokenizer

# Column pairs recognised without configuration, in order of preference.
KNOWN_TEXT_COLUMNS = (
    ("sentence1", "sentence2"),
    ("premise", "hypothesis"),
    ("question", "answer"),
    ("query", "passage"),
    ("sentence_a", "sentence_b"),
    ("text_a", "text_b"),
    ("anchor", "positive"),
)
# Single text columns (sentences alone, e.g. unlabelled text for embedding distillation), used when no pair is found.
KNOWN_SENTENCE_COLUMNS = ("sentence", "text")


def infer_text_columns(column_names: Sequence[str]) -> tuple[str, ...]:
    """The pair of text columns of a dataset, by the usual names; else its one sentence column."""
    for pair in KNOWN_TEXT_COLUMNS:
        if all(c in column_names for c in pair):
            return pair
    for column in KNOWN_SENTENCE_COLUMNS:
        if column in column_names:
            return (column,)
    raise ValueError(
        f"text_columns=None and no known pair of text columns in {list(column_names)}; "
        f"set text_columns to two of them (known pairs: {', '.join('/'.join(p) for p in KNOWN_TEXT_COLUMNS)}; "
        f"sentences alone: a column named {' or '.join(map(repr, KNOWN_SENTENCE_COLUMNS))})."
    )


def labels_to_ids(values: Sequence[Any], label2id: dict[str, int] | None, regression: bool, scale: float = 1.0):
    """Gold labels as a tensor: strings through `label2id`, floats for regression (divided by `scale`).

    A row without a gold label (None: an augmented or transfer row) becomes NaN (regression) or
    -100 (classes), which the hard loss leaves out.
    """
    if regression:
        return torch.tensor([float("nan") if v is None else float(v) / scale for v in values], dtype=torch.float)
    ids = []
    for value in values:
        if value is None:
            ids.append(-100)
        elif isinstance(value, str):
            if not label2id or value not in label2id:
                valid = sorted(label2id) if label2id else []
                raise ValueError(f"label={value!r} is not in the model's label2id; valid labels: {valid}.")
            ids.append(label2id[value])
        else:
            ids.append(int(value))
    return torch.tensor(ids, dtype=torch.long)


def check_labels(name: str, dataset, label_column: str, label2id: dict[str, int] | None, regression: bool) -> None:
    """Refuse, before training, class labels the collator would fail on mid-run: names not in `label2id`,
    ids outside 0..num_labels-1 (-100, the ignored index, is allowed). Arrow-backed datasets only
    (`datasets.Dataset`: one `unique` scan of the column); regression scores are not checked."""
    if regression or not hasattr(dataset, "unique") or label_column not in (getattr(dataset, "column_names", None) or []):
        return
    from datasets import ClassLabel, Value

    if not isinstance(dataset.features.get(label_column), (ClassLabel, Value)):
        return
    values = [v for v in dataset.unique(label_column) if v is not None]
    valid = sorted(label2id) if label2id else []
    unknown = sorted(v for v in values if isinstance(v, str) and v not in valid)
    if unknown:
        raise ValueError(
            f"label={unknown[0]!r} (column {label_column!r} of the {name} dataset; all unknown: {unknown[:20]}) is not in "
            f"the model's label2id; valid labels: {valid}."
        )
    num_labels = len(label2id) if label2id else None
    if num_labels:
        bad = sorted(v for v in values if isinstance(v, int) and not isinstance(v, bool) and v != -100 and not 0 <= v < num_labels)
        if bad:
            raise ValueError(
                f"label={bad[0]!r} (column {label_column!r} of the {name} dataset; all out of range: {bad[:20]}) is not a "
                f"valid class id; valid: 0..{num_labels - 1} (num_labels={num_labels}) or -100 (ignored)."
            )


@dataclass
class PairCollator:
    """Turn rows with two text columns, or one (sentences), and optional label / teacher outputs into model batches.

    Args:
        tokenizer: the student's tokenizer.
        siamese: True for a Siamese student (each side tokenised alone), False for a cross-encoder.
        text_columns: the two text columns, or one for sentences alone (Siamese students only).
        teacher_tokenizers: one tokenizer per online teacher (their joint-pair views).
        teacher_embeds: per online teacher, True when it embeds each side alone (a bi-encoder teacher:
            views `teacher_{k}_input_ids_a`, `..._b`); default: every teacher reads the joint pair.
        label_column: gold labels; strings are mapped with `label2id`.
        regression: labels are floats (divided by `label_scale`).
        max_length: truncation for every view.
        teacher_logit_columns: precomputed logits columns to pass through as tensors.
        teacher_embedding_columns: precomputed embedding columns (`teacher_embeddings_{k}_{a,b}`) likewise.
        virt_alignment: Siamese student only: build the student's two views and the first teacher's
            joint view from the same token ids and add the token alignment between them
            (`teacher_alignment_*` keys, see `hf_distill.alignment`), for VIRT. The first teacher
            must share the student's tokenizer; further teachers keep their own views.
    """

    tokenizer: Any
    siamese: bool
    text_columns: Sequence[str]
    teacher_tokenizers: Sequence[Any] = field(default_factory=list)
    label_column: str | None = "label"
    label2id: dict[str, int] | None = None
    regression: bool = False
    label_scale: float = 1.0
    max_length: int = 128
    teacher_logit_columns: Sequence[str] = field(default_factory=list)
    virt_alignment: bool = False
    teacher_embeds: Sequence[bool] = field(default_factory=list)
    teacher_embedding_columns: Sequence[str] = field(default_factory=list)

    def __post_init__(self):
        self._check_views()
        if self.virt_alignment:
            if not self.siamese:
                raise ValueError("virt_alignment=True needs siamese=True: VIRT aligns a Siamese student's two views.")
            if not self.teacher_tokenizers:
                raise ValueError("virt_alignment=True needs teacher_tokenizers=[...]: the aligned teacher is the first one.")
            check_same_tokenizer(self.tokenizer, self.teacher_tokenizers[0], "teacher_tokenizers[0]")
        # A cross-encoder student's joint view is exactly what a teacher with an equivalent tokenizer
        # would get: reuse it instead of tokenising the batch once more per teacher.
        self.teacher_embeds = list(self.teacher_embeds) or [False] * len(self.teacher_tokenizers)
        self._reuses_student_view = [
            not self.siamese and not embeds and same_tokenizer(self.tokenizer, t, settings=True)
            for t, embeds in zip(self.teacher_tokenizers, self.teacher_embeds)
        ]

    def _check_views(self) -> None:
        if not 1 <= len(self.text_columns) <= 2:
            raise ValueError(f"text_columns={list(self.text_columns)!r} is not valid; give two text columns, or one (sentences).")
        if len(self.text_columns) == 1 and (not self.siamese or self.virt_alignment):
            raise ValueError(
                f"text_columns={list(self.text_columns)!r} (sentences alone) needs a Siamese student without VIRT; "
                "a cross-encoder and VIRT read pairs: give two text columns."
            )
        if self.teacher_embeds and len(self.teacher_embeds) != len(self.teacher_tokenizers):
            raise ValueError(
                f"teacher_embeds has {len(self.teacher_embeds)} entries for {len(self.teacher_tokenizers)} teacher tokenizers; give one per teacher."
            )

    def columns(self) -> list[str]:
        """The dataset columns this collator reads (the trainer keeps exactly these)."""
        label = [self.label_column] if self.label_column else []
        return [*self.text_columns, *label, *self.teacher_logit_columns, *self.teacher_embedding_columns]

    def _tokenize(self, tokenizer, *texts: list[str]) -> dict[str, torch.Tensor]:
        return dict(tokenizer(*texts, padding=True, truncation=True, max_length=self.max_length, return_tensors="pt"))

    def _sides(self, tokenizer, texts: list[list[str]], prefix: str = "") -> dict[str, torch.Tensor]:
        """Each side tokenised alone: keys `{prefix}{name}_a` (and `_b`)."""
        views = {}
        for suffix, side in zip(("_a", "_b"), texts):
            views.update({prefix + k + suffix: v for k, v in self._tokenize(tokenizer, side).items()})
        return views

    def __call__(self, rows: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        texts = [[str(row[c]) for row in rows] for c in self.text_columns]
        batch: dict[str, torch.Tensor] = {}
        joint: dict[str, torch.Tensor] | None = None
        aligned = tokenize_aligned(self.tokenizer, *texts, self.max_length) if self.virt_alignment else None
        if aligned is not None:
            for suffix, view in (("_a", aligned.side_a), ("_b", aligned.side_b)):
                batch.update({k + suffix: v for k, v in view.items()})
            batch.update({teacher_prefix(0) + name: v for name, v in aligned.joint.items()})
            batch.update(aligned.alignment_batch())
        elif self.siamese:
            batch.update(self._sides(self.tokenizer, texts))
        else:
            joint = self._tokenize(self.tokenizer, *texts)
            batch.update(joint)
        for k, tokenizer in enumerate(self.teacher_tokenizers):
            if aligned is not None and k == 0:
                continue  # the aligned joint view, built from the student's token ids
            if self.teacher_embeds[k]:
                batch.update(self._sides(tokenizer, texts, teacher_prefix(k)))
                continue
            view = joint if self._reuses_student_view[k] else self._tokenize(tokenizer, *texts)
            batch.update({teacher_prefix(k) + name: v for name, v in view.items()})
        values = [row.get(self.label_column) for row in rows] if self.label_column else []
        if any(value is not None for value in values):  # rows without a gold label learn from the teachers only
            batch["labels"] = labels_to_ids(values, self.label2id, self.regression, self.label_scale)
        for column in [*self.teacher_logit_columns, *self.teacher_embedding_columns]:
            if column not in rows[0]:
                continue  # evaluation sets carry no teacher outputs
            batch[column] = torch.tensor([row[column] for row in rows], dtype=torch.float)
        return batch
