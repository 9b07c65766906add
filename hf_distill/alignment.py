"""Token alignment between a pair's separate encodings and its joint encoding (for VIRT).

A Siamese student encodes X and Y alone (``[CLS] X [SEP]`` and ``[CLS] Y [SEP]``); a cross-encoder
teacher encodes them together (``[CLS] X [SEP] Y [SEP]``). Layer-level transfer between the two
needs, for every example, where each real token of X (and of Y) sits in the student's encoding
and in the teacher's.

How: exact by construction, not by matching offsets. Each side is tokenised ONCE without
special tokens and truncated on its own to ``max_length - (special tokens of one sequence)``
content tokens (so the student sees exactly what `tokenizer(text, truncation=True,
max_length=max_length)` gives). The student's views and the teacher's joint view are then
assembled from those same token ids by the tokenizer's own post-processor (its template:
``[CLS] A [SEP]`` / ``[CLS] A [SEP] B [SEP]`` for BERT, ``<s> A </s></s> B </s>`` for RoBERTa...),
which also says which sequence every position belongs to. Truncation is therefore identical
on both sides, and the positions of X's content tokens in the two views hold the same ids in
the same order. Special tokens ([CLS], [SEP], <s>...) and padding are excluded from the
alignment: they have no counterpart across the views.

Consequence: the teacher's joint view is not truncated again, so it can reach
``2 * max_length - 1`` tokens for BERT (two sides of ``max_length - 2`` content tokens plus 3
special tokens); keep ``max_length`` within half the teacher's position embeddings.

Needs a fast (tokenizers-backed) tokenizer, shared by student and teacher (`check_same_tokenizer`).

Batch keys (see `AlignedPairs.alignment_batch`), under the ``teacher_`` namespace so that neither
the student's forward nor evaluation ever receives them, and distinct from the ``teacher_{k}_`` views:

    teacher_alignment_a_student  (B, N_a) long   positions of X's tokens in the student's X encoding
    teacher_alignment_a_teacher  (B, N_a) long   the same tokens' positions in the teacher's joint encoding
    teacher_alignment_a_mask     (B, N_a) bool   True for real entries (rows are padded to N_a with 0)
    teacher_alignment_b_*        likewise for Y (positions in the student's Y encoding and in the joint one)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from .batch_keys import ALIGNMENT_KEYS, ALIGNMENT_PREFIX
from .compatibility import same_tokenizer

__all__ = [
    "ALIGNMENT_KEYS",
    "ALIGNMENT_PREFIX",
    "AlignedPairs",
    "check_same_tokenizer",
    "tokenize_aligned",
]

@dataclass
class AlignedPairs:
    """One batch of pairs tokenised for a Siamese student and a cross-encoder teacher, aligned.

    Attributes:
        side_a, side_b: the student's views of X and Y (`input_ids`, `attention_mask`, and
            `token_type_ids` when the tokenizer uses them), padded tensors.
        joint: the teacher's view of the pair, built from the same token ids.
        alignment: `a_student`, `a_teacher`, `a_mask`, `b_student`, `b_teacher`, `b_mask` (see the module doc).
    """

    side_a: dict[str, torch.Tensor]
    side_b: dict[str, torch.Tensor]
    joint: dict[str, torch.Tensor]
    alignment: dict[str, torch.Tensor]

    def alignment_batch(self) -> dict[str, torch.Tensor]:
        """The alignment under its batch keys (`teacher_alignment_*`)."""
        return {ALIGNMENT_PREFIX + name: value for name, value in self.alignment.items()}


def _require_fast(tokenizer: Any) -> Any:
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        raise ValueError(
            f"tokenizer={type(tokenizer).__name__} has no backend_tokenizer; token alignment (virt_alignment=True) "
            "needs a fast, tokenizers-backed tokenizer (valid: any `TokenizersBackend` tokenizer)."
        )
    return backend


def check_same_tokenizer(student_tokenizer: Any, teacher_tokenizer: Any, field: str = "teacher_tokenizers[0]") -> None:
    """Raise a ValueError unless both tokenizers give the same ids (vocabulary, special tokens, normalisation)."""
    if not same_tokenizer(student_tokenizer, teacher_tokenizer):
        names = [getattr(t, "name_or_path", "") or type(t).__name__ for t in (teacher_tokenizer, student_tokenizer)]
        raise ValueError(
            f"{field}={names[0]!r} differs from the student's tokenizer {names[1]!r}; token alignment (VIRT) "
            "compares positions, so the teacher must use the student's tokenizer (same vocabulary, special "
            "tokens and normalisation). Valid: a teacher fine-tuned from the same tokenizer."
        )


def _content(tokenizer: Any, texts: Sequence[str], limit: int) -> list:
    """Each text's tokens without special tokens, truncated to `limit` on the tokenizer's truncation side."""
    encoded = tokenizer(list(texts), add_special_tokens=False, truncation=False, padding=False, verbose=False)
    encodings = encoded.encodings
    for encoding in encodings:
        if len(encoding) > limit:
            encoding.truncate(limit, direction=getattr(tokenizer, "truncation_side", "right"))
    return encodings


def _assemble(backend: Any, first, second=None) -> tuple[list[int], list[int], list[list[int]]]:
    """(ids, type_ids, positions) of one or two content encodings with the tokenizer's special tokens.

    positions[k] lists where the content tokens of sequence k landed; they are checked to hold
    exactly that sequence's ids, in order, so the alignment is verified, not assumed.
    """
    parts = [first] if second is None else [first, second]
    processor = backend.post_processor
    if processor is None:  # no template: the sequences are simply concatenated
        ids = [i for part in parts for i in part.ids]
        types, special = [0] * len(ids), [0] * len(ids)
    else:
        encoding = processor.process(first, second, True)
        ids, types, special = list(encoding.ids), list(encoding.type_ids), list(encoding.special_tokens_mask)
    content = [i for i, flag in enumerate(special) if not flag]
    positions, start = [], 0
    for part in parts:
        positions.append(content[start : start + len(part.ids)])
        start += len(part.ids)
    if start != len(content) or any([ids[i] for i in p] != list(part.ids) for p, part in zip(positions, parts)):
        raise RuntimeError(
            "the tokenizer's template did not place the content tokens in order; token alignment cannot be built."
        )
    return ids, types, positions


def _pad(tokenizer: Any, rows: list[tuple[list[int], list[int]]]) -> tuple[dict[str, torch.Tensor], list[int]]:
    """Pad (ids, type_ids) rows on the tokenizer's padding side; also return each row's shift (left padding)."""
    pad_id = tokenizer.pad_token_id
    if pad_id is None:
        raise ValueError("tokenizer.pad_token_id=None: set a padding token (e.g. tokenizer.pad_token = tokenizer.eos_token).")
    pad_type = getattr(tokenizer, "pad_token_type_id", 0) or 0
    length = max(len(ids) for ids, _ in rows)
    left = getattr(tokenizer, "padding_side", "right") == "left"
    input_ids, type_ids, masks, shifts = [], [], [], []
    for ids, types in rows:
        pad = length - len(ids)
        shifts.append(pad if left else 0)
        padded = [([pad_id] * pad, ids), ([pad_type] * pad, types), ([0] * pad, [1] * len(ids))]
        if not left:
            padded = [(real, padding) for padding, real in padded]
        for store, (head, tail) in zip((input_ids, type_ids, masks), padded):
            store.append(head + tail)
    batch = {"input_ids": torch.tensor(input_ids, dtype=torch.long), "attention_mask": torch.tensor(masks, dtype=torch.long)}
    if "token_type_ids" in getattr(tokenizer, "model_input_names", ("token_type_ids",)):
        batch["token_type_ids"] = torch.tensor(type_ids, dtype=torch.long)
    return batch, shifts


def _index_tensors(student: list[list[int]], teacher: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    width = max(1, max(len(p) for p in student))
    shape = (len(student), width)
    student_index = torch.zeros(shape, dtype=torch.long)
    teacher_index = torch.zeros(shape, dtype=torch.long)
    mask = torch.zeros(shape, dtype=torch.bool)
    for row, (s, t) in enumerate(zip(student, teacher)):
        student_index[row, : len(s)] = torch.tensor(s, dtype=torch.long)
        teacher_index[row, : len(t)] = torch.tensor(t, dtype=torch.long)
        mask[row, : len(s)] = True
    return student_index, teacher_index, mask


def tokenize_aligned(tokenizer: Any, first: Sequence[str], second: Sequence[str], max_length: int) -> AlignedPairs:
    """Tokenise pairs (X, Y) for a Siamese student and a cross-encoder teacher sharing `tokenizer`, aligned.

    Args:
        tokenizer: a fast tokenizer (student's and teacher's).
        first, second: the texts X and Y, one per example.
        max_length: the student's limit per side (special tokens included), as `tokenizer(text,
            truncation=True, max_length=max_length)`; the teacher's joint view holds both truncated sides.

    Returns:
        `AlignedPairs` with the student's two views, the teacher's joint view and the alignment.

    Example (BERT, X = "a man", Y = "plays"): student X = [CLS] a man [SEP], joint = [CLS] a man [SEP]
    plays [SEP]; a_student = [1, 2], a_teacher = [1, 2]; b_student = [1], b_teacher = [4].
    """
    if len(first) != len(second):
        raise ValueError(f"first has {len(first)} texts and second {len(second)}; give one Y per X.")
    if not first:
        raise ValueError("first=[] is not valid; give at least one pair.")
    backend = _require_fast(tokenizer)
    limit = max_length - tokenizer.num_special_tokens_to_add(pair=False)
    if limit < 1:
        raise ValueError(f"max_length={max_length} leaves no room for content after the special tokens; give a larger value.")
    content_a, content_b = _content(tokenizer, first, limit), _content(tokenizer, second, limit)

    singles_a, singles_b, joints = [], [], []
    positions: dict[str, list[list[int]]] = {key: [] for key in ("a_student", "b_student", "a_teacher", "b_teacher")}
    for x, y in zip(content_a, content_b):
        for side, encoding, store in (("a", x, singles_a), ("b", y, singles_b)):
            ids, types, (where,) = _assemble(backend, encoding)
            store.append((ids, types))
            positions[f"{side}_student"].append(where)
        ids, types, (where_x, where_y) = _assemble(backend, x, y)
        joints.append((ids, types))
        positions["a_teacher"].append(where_x)
        positions["b_teacher"].append(where_y)

    side_a, shift_a = _pad(tokenizer, singles_a)
    side_b, shift_b = _pad(tokenizer, singles_b)
    joint, shift_joint = _pad(tokenizer, joints)
    alignment: dict[str, torch.Tensor] = {}
    for side, shift_student in (("a", shift_a), ("b", shift_b)):
        student = [[p + s for p in row] for row, s in zip(positions[f"{side}_student"], shift_student)]
        teacher = [[p + s for p in row] for row, s in zip(positions[f"{side}_teacher"], shift_joint)]
        (alignment[f"{side}_student"], alignment[f"{side}_teacher"], alignment[f"{side}_mask"]) = _index_tensors(student, teacher)
    return AlignedPairs(side_a=side_a, side_b=side_b, joint=joint, alignment=alignment)
