"""Length batching: hand-checked token counts and batch plans."""

from __future__ import annotations

import numpy as np
import pytest

from hf_distill.length_batching import length_batches, token_lengths


def test_token_lengths_count_special_tokens_and_truncate(tiny_tokenizer):
    first, second = ["a man plays", "dog"], ["the cat", "a red ball on the street"]
    # [CLS] a man plays [SEP] the cat [SEP] = 8; [CLS] dog [SEP] a red ball on the street [SEP] = 10 -> 9
    assert token_lengths(tiny_tokenizer, [first, second], max_length=9, chunk_size=1).tolist() == [8, 9]
    assert token_lengths(tiny_tokenizer, [first], max_length=9).tolist() == [5, 3]


def test_batches_longest_first_stable_on_ties_or_in_row_order():
    lengths = [3, 5, 1, 5, 2]
    assert [b.tolist() for b in length_batches(lengths, 2)] == [[1, 3], [0, 4], [2]]
    assert [b.tolist() for b in length_batches(lengths, 2, sort=False)] == [[0, 1], [2, 3], [4]]
    assert all(b.dtype == np.int64 for b in length_batches(lengths, 2))
    with pytest.raises(ValueError, match=r"batch_size=0 is not valid"):
        length_batches(lengths, 0)
