"""`GroupCollator`: batches of query groups for cross-encoder and Siamese students.

A group row (`hf_distill.ranking_groups.query_groups`) holds a query, its n passages (the positive first), the
teacher's n scores and optionally the n gold labels. A batch of B groups becomes (keys in
`hf_distill.batch_keys`):

- the student's view of every passage, group after group: for a cross-encoder the P (query,
  passage) pairs tokenised jointly (`input_ids`, ...); for a Siamese student the B queries then the
  P passages, each text alone, stacked in `input_ids_a` / `attention_mask_a` so that one forward
  embeds every text once (one query embedding per group, one embedding per passage);
- `teacher_scores` (B, n_max) and `group_mask` (B, n_max): groups may differ in size (a query with
  few candidates); padding is masked, never scored;
- `passage_labels` (B, n_max, -100 where unknown) when the rows carry gold labels, and
  `group_query` (B,): an id per distinct query, so in-batch negatives skip a query's other groups.

Each passage travels with its own score inside its row, so shuffling rows (the Trainer's sampler)
cannot separate them. Rows without passages (a validation split of pairs) go to `pair_collator`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from .batch_keys import GROUP_LABELS, GROUP_MASK, GROUP_QUERY, GROUP_SCORES

__all__ = ["GROUP_COLUMNS", "GroupCollator"]

GROUP_COLUMNS = {
    "qid": "qid",
    "query": "query",
    "passages": "passages",
    "scores": "teacher_scores",
    "labels": "passage_labels",
    "doc_ids": "doc_ids",
}
_UNLABELLED = -100


@dataclass
class GroupCollator:
    """Turn query-group rows into student batches with the teacher's scores and a group mask.

    Args:
        tokenizer: the student's tokenizer.
        siamese: True for a Siamese student (each text alone, queries then passages), False for a
            cross-encoder (each (query, passage) pair jointly).
        max_length: truncation of every tokenised text or pair.
        pair_collator: collates rows without a passages column (an evaluation split of pairs).
    """

    tokenizer: Any
    siamese: bool
    max_length: int = 128
    pair_collator: Any = None

    @classmethod
    def for_student(cls, student, max_length: int = 128, pair_collator: Any = None) -> "GroupCollator":
        """The collator for a `SiameseModel` or `CrossEncoderModel` with its own tokenizer."""
        from .modeling import SiameseModel
        from .wrappers import unwrap_model

        model = unwrap_model(student)
        if getattr(model, "tokenizer", None) is None:
            raise ValueError("the student carries no tokenizer; set student.tokenizer or build GroupCollator(tokenizer, ...).")
        return cls(model.tokenizer, isinstance(model, SiameseModel), max_length, pair_collator)

    def columns(self) -> list[str]:
        """The dataset columns this collator reads (the trainer keeps exactly these)."""
        pairs = self.pair_collator.columns() if self.pair_collator is not None else []
        names = [GROUP_COLUMNS[k] for k in ("qid", "query", "passages", "scores", "labels")]
        return list(dict.fromkeys([*names, *pairs]))

    @property
    def text_columns(self) -> tuple[str, str]:
        """The text columns, for the model card."""
        return GROUP_COLUMNS["query"], GROUP_COLUMNS["passages"]

    def _tokenize(self, *texts: list[str]) -> dict[str, torch.Tensor]:
        return dict(self.tokenizer(*texts, padding=True, truncation=True, max_length=self.max_length, return_tensors="pt"))

    def __call__(self, rows: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        if rows and GROUP_COLUMNS["passages"] not in rows[0]:
            if self.pair_collator is None:
                raise ValueError(
                    f"GroupCollator got rows without a {GROUP_COLUMNS['passages']!r} column (columns {sorted(rows[0])}); "
                    "give query groups (hf_distill.ranking_groups.query_groups), or pair_collator= for pair rows."
                )
            return self.pair_collator(rows)
        queries = [str(row[GROUP_COLUMNS["query"]]) for row in rows]
        passages = [[str(p) for p in row[GROUP_COLUMNS["passages"]]] for row in rows]
        scores = [_checked_scores(row, len(group)) for row, group in zip(rows, passages)]
        flat = [p for group in passages for p in group]
        if self.siamese:
            batch = {f"{key}_a": value for key, value in self._tokenize(queries + flat).items()}
        else:
            batch = self._tokenize([q for q, group in zip(queries, passages) for _ in group], flat)
        width = max(len(group) for group in passages)
        batch[GROUP_MASK] = torch.tensor([[i < len(g) for i in range(width)] for g in passages])
        batch[GROUP_SCORES] = _padded(scores, width, 0.0, torch.float)
        if GROUP_COLUMNS["labels"] in rows[0]:
            labels = [row[GROUP_COLUMNS["labels"]] or [_UNLABELLED] * len(g) for row, g in zip(rows, passages)]
            batch[GROUP_LABELS] = _padded(labels, width, _UNLABELLED, torch.long)
        keys = [str(row.get(GROUP_COLUMNS["qid"], query)) for row, query in zip(rows, queries)]
        ids = {key: i for i, key in enumerate(dict.fromkeys(keys))}
        batch[GROUP_QUERY] = torch.tensor([ids[key] for key in keys], dtype=torch.long)
        return batch


def _checked_scores(row: dict[str, Any], size: int) -> list[float]:
    """A group's teacher scores, one per passage, or a clear error."""
    scores = row.get(GROUP_COLUMNS["scores"])
    if scores is None or len(scores) != size:
        found = "none" if scores is None else f"{len(scores)}"
        raise ValueError(
            f"query group {row.get(GROUP_COLUMNS['qid'], row.get(GROUP_COLUMNS['query']))!r} has {size} passages but {found} "
            f"{GROUP_COLUMNS['scores']}; every passage needs the teacher's score (hf_distill.ranking_groups.query_groups)."
        )
    if size == 0:
        raise ValueError(f"query group {row.get(GROUP_COLUMNS['qid'])!r} has no passage.")
    return [float(s) for s in scores]


def _padded(values: Sequence[Sequence[float]], width: int, fill: float, dtype: torch.dtype) -> torch.Tensor:
    return torch.tensor([list(v) + [fill] * (width - len(v)) for v in values], dtype=dtype)
