"""Tiny embedding teachers for the embedding-distillation tests: another architecture (MPNet), another
tokenizer (the tiny vocabulary in another order: other ids, no token types) and another width (48)."""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import BertTokenizerFast, MPNetConfig, MPNetModel

from tests.conftest import SPECIAL_TOKENS, TINY_VOCAB, seed_everything

TEACHER_WIDTH = 48
OTHER_VOCAB = SPECIAL_TOKENS + list(reversed(TINY_VOCAB[len(SPECIAL_TOKENS):]))


def other_tokenizer(folder: Path) -> BertTokenizerFast:
    """A WordPiece tokenizer over the tiny words in reverse order, without token type ids (as MPNet's)."""
    path = Path(folder) / "other_vocab.txt"
    path.write_text("\n".join(OTHER_VOCAB) + "\n", encoding="utf-8")
    return BertTokenizerFast(vocab_file=str(path), do_lower_case=True, model_max_length=64,
                             model_input_names=["input_ids", "attention_mask"])


def mpnet_backbone(width: int = TEACHER_WIDTH, seed: int = 7) -> MPNetModel:
    """A random 2-layer MPNet backbone of the given width over `OTHER_VOCAB`."""
    seed_everything(seed)
    config = MPNetConfig(vocab_size=len(OTHER_VOCAB), hidden_size=width, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=40, max_position_embeddings=80, pad_token_id=0)
    return MPNetModel(config, add_pooling_layer=False)


def embedding_teacher(folder: Path, width: int = TEACHER_WIDTH, seed: int = 7):
    """An embedding teacher (SiameseModel, cosine head, mean pooling) with its own tokenizer and width."""
    from hf_distill.embedding_teachers import load_embedding_teacher

    return load_embedding_teacher(mpnet_backbone(width, seed), tokenizer=other_tokenizer(folder))


def embed_alone(teacher, texts: list[str], max_length: int = 32) -> torch.Tensor:
    """Each text embedded on its own (no padding), as the reference for batched embeddings."""
    rows = []
    for text in texts:
        enc = teacher.tokenizer(text, truncation=True, max_length=max_length, return_tensors="pt")
        with torch.no_grad():
            rows.append(teacher.encode_side(enc["input_ids"], enc["attention_mask"]).embeddings[0])
    return torch.stack(rows)
