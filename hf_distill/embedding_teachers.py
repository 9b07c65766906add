"""Teachers that embed: a bi-encoder whose sentence embeddings (not class logits) are what it teaches.

An embedding teacher is a `SiameseModel` with a cosine head: any `AutoModel` backbone (MPNet,
BERT, MiniLM...) with a pooling choice, or a saved Siamese model. It reads its own tokenization
of each sentence (its tokenizer and width may differ from the student's) and returns
`embeddings_a` (and `embeddings_b` for a pair); for a pair its `logits` are the cosine of the two
embeddings, which is how it scores pairs beside cross-encoder teachers (DvBERT with mixed teachers).

Precomputed embeddings (`hf_distill.teacher_embeddings.add_teacher_embeddings`, or your own, e.g.
from an embedding API) travel as the dataset columns `teacher_embeddings_{k}_a` / `_b`.

Example:
    >>> teacher = load_embedding_teacher("sentence-transformers/all-mpnet-base-v2")  # pooling read from the folder
    >>> teacher.encode(["A man is eating."]).shape
    torch.Size([1, 768])
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable

from torch import nn
from transformers import PreTrainedModel

from .modeling import SiameseConfig, SiameseModel
from .modeling.modeling_common import model_type_of
from .wrappers import unwrap_model

__all__ = [
    "EMBEDDINGS_PREFIX",
    "SIDES",
    "embedding_column",
    "embedding_columns",
    "embedding_dim",
    "embeds",
    "load_embedding_teacher",
    "sentence_transformers_pooling",
]

EMBEDDINGS_PREFIX = "teacher_embeddings_"
SIDES = ("a", "b")
_EMBEDDINGS_COLUMN = re.compile(rf"^{EMBEDDINGS_PREFIX}(\d+)_([ab])$")
_ST_POOLING = {"pooling_mode_mean_tokens": "mean", "pooling_mode_cls_token": "cls", "pooling_mode_max_tokens": "max"}


def embedding_column(k: int, side: str = "a") -> str:
    """The dataset column of teacher k's precomputed embeddings of one side: `teacher_embeddings_{k}_{a|b}`."""
    if side not in SIDES:
        raise ValueError(f"side={side!r} is not valid; choose 'a' or 'b'.")
    return f"{EMBEDDINGS_PREFIX}{k}_{side}"


def embedding_columns(column_names: Iterable[str]) -> list[str]:
    """The precomputed embedding columns among `column_names`, by teacher then side."""
    found = sorted((int(m.group(1)), m.group(2), name) for name in column_names if (m := _EMBEDDINGS_COLUMN.match(name)))
    return [name for _, _, name in found]


def embeds(model: nn.Module) -> bool:
    """Whether a teacher embeds each sentence alone (a Siamese bi-encoder) rather than reading the joint pair."""
    return isinstance(unwrap_model(model), SiameseModel)


def embedding_dim(model: nn.Module) -> int:
    """Width of a bi-encoder's sentence embeddings."""
    model = unwrap_model(model)
    if not isinstance(model, SiameseModel):
        raise ValueError(f"{type(model).__name__} does not embed sentences; give a SiameseModel (load_embedding_teacher).")
    return model.embedding_dim


def sentence_transformers_pooling(path: str | os.PathLike) -> str | None:
    """The pooling a sentence-transformers folder declares (`1_Pooling/config.json`), if it is one of mean/cls/max."""
    modules = os.path.join(str(path), "modules.json")
    if not os.path.isfile(modules):
        return None
    with open(modules, encoding="utf-8") as handle:
        entries = json.load(handle)
    for entry in entries:
        if entry.get("type", "").endswith("Pooling"):
            config_path = os.path.join(str(path), entry.get("path", ""), "config.json")
            if not os.path.isfile(config_path):
                return None
            with open(config_path, encoding="utf-8") as handle:
                config = json.load(handle)
            chosen = [mode for flag, mode in _ST_POOLING.items() if config.get(flag)]
            return chosen[0] if len(chosen) == 1 else None
    return None


def _from_path(path: str, pooling: str | None, tokenizer, kwargs: dict) -> SiameseModel:
    if model_type_of(path, kwargs) == SiameseConfig.model_type:
        teacher = SiameseModel.from_pretrained(path, **kwargs)
        if pooling is not None and pooling != teacher.config.pooling:
            raise ValueError(f"pooling={pooling!r} differs from the saved Siamese teacher's {teacher.config.pooling!r}.")
    else:
        pooling = pooling or sentence_transformers_pooling(path) or "mean"
        teacher = SiameseModel.from_backbone(path, tokenizer=tokenizer, pooling=pooling, head="cosine", **kwargs)
    if tokenizer is not None:
        teacher.tokenizer = tokenizer
    return teacher


def load_embedding_teacher(
    teacher: str | os.PathLike | PreTrainedModel, pooling: str | None = None, tokenizer=None, **kwargs
) -> SiameseModel:
    """An embedding teacher (a `SiameseModel` with a cosine head) from a path, a backbone or a Siamese model.

    Args:
        teacher: a saved hf_distill Siamese model, a plain backbone folder or Hub id (a
            sentence-transformers folder included: its Transformer and Pooling modules), an
            `AutoModel` backbone, or a `SiameseModel` (returned as it is).
        pooling: 'mean', 'cls' or 'max' for a backbone; default: the sentence-transformers
            folder's pooling when it declares one, else 'mean'.
        tokenizer: the teacher's tokenizer (default: the one saved with it).
        kwargs: passed to `from_pretrained` (revision, dtype, attn_implementation...).
    """
    if isinstance(teacher, SiameseModel):
        if pooling is not None and pooling != teacher.config.pooling:
            raise ValueError(f"pooling={pooling!r} differs from the given teacher's {teacher.config.pooling!r}.")
        if tokenizer is not None:
            teacher.tokenizer = tokenizer
        model = teacher
    elif isinstance(teacher, (str, os.PathLike)):
        model = _from_path(str(teacher), pooling, tokenizer, kwargs)
    elif isinstance(teacher, PreTrainedModel):
        model = SiameseModel.from_backbone(teacher, tokenizer=tokenizer, pooling=pooling or "mean", head="cosine")
    else:
        raise ValueError(f"teacher={teacher!r} is not valid; give a path, an AutoModel backbone or a SiameseModel.")
    if model.tokenizer is None:
        raise ValueError("the embedding teacher carries no tokenizer; pass tokenizer=... (its own).")
    return model.eval()

