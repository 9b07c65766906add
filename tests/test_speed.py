"""`hf_distill.speed`: the one pairs/s meter (quickstart, model card, benchmarks)."""

from __future__ import annotations

import pytest
import torch

from hf_distill.speed import pair_batches, pairs_per_second, time_batches


def test_pair_batches_follow_the_model_family(tiny_cross_encoder, tiny_siamese, pairs):
    cross = pair_batches(tiny_cross_encoder, pairs, batch_size=2, max_length=16)
    assert len(cross) == -(-len(pairs) // 2) and sum(b["input_ids"].size(0) for b in cross) == len(pairs)
    assert "input_ids_a" not in cross[0]
    siamese = pair_batches(tiny_siamese, pairs, batch_size=len(pairs), max_length=16)
    (batch,) = siamese
    assert {"input_ids_a", "attention_mask_a", "input_ids_b", "attention_mask_b"} <= set(batch)
    first_sides = tiny_siamese.tokenizer([a for a, _ in pairs], padding=True, truncation=True, max_length=16)
    assert batch["input_ids_a"].tolist() == first_sides["input_ids"]  # each side tokenised alone
    fixed = pair_batches(tiny_cross_encoder, pairs[:2], max_length=12, padding="max_length")
    assert fixed[0]["input_ids"].shape == (2, 12)


def test_pairs_per_second_counts_every_pass_and_restores_the_mode(tiny_cross_encoder, tiny_siamese, pairs):
    calls = []
    forward = tiny_cross_encoder.forward

    def counting(**inputs):
        calls.append(inputs["input_ids"].size(0))
        return forward(**inputs)

    tiny_cross_encoder.forward = counting
    tiny_cross_encoder.train()
    speed = pairs_per_second(tiny_cross_encoder, pairs, batch_size=2, max_length=16, min_seconds=0.05)
    assert speed > 0 and tiny_cross_encoder.training  # back in training mode
    # one warm-up batch, then whole passes over all pairs
    assert calls[0] == 2 and (sum(calls) - 2) % len(pairs) == 0 and sum(calls) - 2 >= len(pairs)
    assert pairs_per_second(tiny_siamese, pairs, min_seconds=0.01) > 0


def test_time_batches_rate_and_bad_input():
    ticks = []
    rate = time_batches(lambda batch: ticks.append(batch), ["b0", "b1"], pairs_per_pass=10, min_seconds=0.02)
    assert ticks[0] == "b0" and (len(ticks) - 1) % 2 == 0 and rate > 0
    with pytest.raises(ValueError, match="at least one batch"):
        time_batches(lambda batch: None, [], pairs_per_pass=1)
    with pytest.raises(ValueError, match="at least one pair"):
        pairs_per_second(torch.nn.Linear(1, 1), [])
