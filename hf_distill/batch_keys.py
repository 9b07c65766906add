"""The keys of a distillation batch, spelled once.

A batch holds the student's view of each pair (`input_ids`, `attention_mask`, ... or, for a
Siamese student, `input_ids_a`, `input_ids_b`, ...), gold `labels` when the row has one, and
for teacher k either its own tokenisation under the prefix `teacher_{k}_` (online teachers) or
its precomputed logits as `teacher_logits_{k}` (a dataset column). VIRT's token alignment
travels as `teacher_alignment_{a,b}_{student,teacher,mask}`.

A batch of query groups (`hf_distill.group_collator`) holds the student's view of every passage
(cross-encoder: the (query, passage) pairs, group after group; Siamese: the queries, then the
passages, stacked in one `input_ids_a`), the teacher's precomputed scores `teacher_scores`
(groups x passages, the positive first), `group_mask` (True where a group has a passage), the gold
`passage_labels` when known (-100 where not) and `group_query` (groups of one query share an id).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

TEACHER_PREFIX = "teacher_"
LOGITS_PREFIX = "teacher_logits_"
ALIGNMENT_PREFIX = "teacher_alignment_"
ALIGNMENT_KEYS = tuple(f"{ALIGNMENT_PREFIX}{side}_{what}" for side in "ab" for what in ("student", "teacher", "mask"))
GROUP_SCORES = "teacher_scores"
GROUP_MASK = "group_mask"
GROUP_LABELS = "passage_labels"
GROUP_QUERY = "group_query"
GROUP_KEYS = (GROUP_SCORES, GROUP_MASK, GROUP_LABELS, GROUP_QUERY)  # read by the group losses, never by the student
_LOGITS_COLUMN = re.compile(rf"^{LOGITS_PREFIX}(\d+)$")


def teacher_prefix(k: int) -> str:
    """The prefix of teacher k's tokenised view: `teacher_{k}_`."""
    return f"{TEACHER_PREFIX}{k}_"


def logits_column(k: int) -> str:
    """The dataset column of teacher k's precomputed logits: `teacher_logits_{k}`."""
    return f"{LOGITS_PREFIX}{k}"


def logits_columns(column_names: Iterable[str]) -> list[str]:
    """`teacher_logits_0`, `teacher_logits_1`, ... present among `column_names`, in teacher order (no gaps)."""
    found = sorted((int(m.group(1)), name) for name in column_names if (m := _LOGITS_COLUMN.match(name)))
    indices = [index for index, _ in found]
    if indices != list(range(len(indices))):
        raise ValueError(f"teacher logit columns {[n for _, n in found]} must be numbered 0..K-1 without gaps.")
    return [name for _, name in found]


def is_teacher_key(key: str) -> bool:
    """Keys that only loss components read (teacher views, precomputed logits, alignment)."""
    return key.startswith(TEACHER_PREFIX)


def student_view(batch: Mapping[str, Any], labels: bool = True) -> dict[str, Any]:
    """What the student's forward takes: every key that is neither a teacher's nor a group's (and `labels`
    unless `labels=False`)."""
    return {k: v for k, v in batch.items() if not is_teacher_key(k) and k not in GROUP_KEYS and (labels or k != "labels")}


def teacher_view(batch: Mapping[str, Any], k: int) -> dict[str, Any]:
    """Teacher k's own tokenisation, prefix removed: what its forward takes."""
    prefix = teacher_prefix(k)
    return {key[len(prefix):]: value for key, value in batch.items() if key.startswith(prefix)}
