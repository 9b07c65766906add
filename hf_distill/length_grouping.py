"""Length-grouped training on raw-text rows: the length column transformers' samplers read.

`train_sampling_strategy="group_by_length"` (or `"batch_rebalance"`) makes transformers batch rows of
similar length, so a dynamically padded batch wastes little: on the embedding recipes' 84,414
sentences, random batches of 64 hold 3.8x the real tokens, grouped ones 1.07x. Its sampler reads each
row's length from the column `length_column_name`, or else from tokenised `input_ids`, which the
raw-text rows of this package lack. `with_length_column` adds that column (the student's truncated
token count of each row's texts); `LengthGroupedSampling` hands every sampler, training and
evaluation alike, a dataset that has it (`predict` keeps the rows' order), shuffles with `seed + epoch`
so that a resumed run draws the same batches, and the trainer keeps the column past column pruning.
With `train_block_size` it samples whole blocks of neighbouring rows instead (`BlockSampler`).
A run resumed in the middle of an epoch sets that epoch on the sampler in several processes too
(`get_resumed_dataloader`).
"""

from __future__ import annotations

import numpy as np
import torch
from transformers.trainer_pt_utils import LengthGroupedSampler

from .block_sampling import BlockSampler
from .length_batching import token_lengths

__all__ = [
    "GROUPING_STRATEGIES", "EpochSeededLengthGroupedSampler", "LengthGroupedSampling", "epoch_sampler",
    "groups_by_length", "with_length_column",
]

GROUPING_STRATEGIES = ("group_by_length", "batch_rebalance")


def groups_by_length(args) -> bool:
    """Whether `args` asks transformers for a length-aware sampler."""
    return getattr(args, "train_sampling_strategy", "random") in GROUPING_STRATEGIES


def with_length_column(dataset, tokenizer, collator, args, name: str = "train"):
    """`dataset` with `args.length_column_name` added from its text columns when length grouping is on and
    the column is missing; unchanged otherwise. Rows that are not plain text (query groups) must bring it."""
    import datasets

    if dataset is None or not groups_by_length(args) or not isinstance(dataset, datasets.Dataset):
        return dataset
    column = args.length_column_name
    if column in dataset.column_names:
        return dataset
    text_columns = _text_columns(dataset, collator)
    if not text_columns:
        raise ValueError(
            f"train_sampling_strategy={args.train_sampling_strategy!r} needs the {name} set's row lengths; "
            f"add a column length_column_name={column!r} (tokens per row) or use train_sampling_strategy='random'."
        )
    return dataset.add_column(column, _row_lengths(tokenizer, [dataset[c] for c in text_columns], args.max_length))


def _text_columns(dataset, collator) -> list[str] | None:
    """The collator's text columns (or its pair collator's, for a split of pairs) that `dataset` holds."""
    for candidate in (collator, getattr(collator, "pair_collator", None)):
        columns = getattr(candidate, "text_columns", None)
        if columns and all(c in dataset.column_names for c in columns):
            return list(columns)
    return None


def _row_lengths(tokenizer, texts: list[list], max_length: int) -> list[int]:
    """Tokens per row; for a query group (a query and a list of passages), its longest (query, passage) pair,
    which sets the group's padded width."""
    if len(texts) == 2 and texts[1] and isinstance(texts[1][0], list):
        sizes = [len(passages) for passages in texts[1]]
        queries = [query for query, n in zip(texts[0], sizes) for _ in range(n)]
        flat = token_lengths(tokenizer, [queries, [p for passages in texts[1] for p in passages]], max_length)
        bounds = np.cumsum([0, *sizes])
        return [int(flat[a:b].max()) if b > a else 0 for a, b in zip(bounds[:-1], bounds[1:])]
    return token_lengths(tokenizer, texts, max_length).tolist()


class EpochSeededLengthGroupedSampler(LengthGroupedSampler):
    """transformers' `LengthGroupedSampler` shuffling with `seed + epoch` (as accelerate's seedable random sampler
    does), not the process-wide RNG: a run resumed after its first epoch draws the same order as the run it goes on."""

    def __init__(self, batch_size: int, lengths: list[int], seed: int):
        super().__init__(batch_size, lengths=lengths, generator=torch.Generator())
        self.seed, self.epoch = seed, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self):
        self.generator.manual_seed(self.seed + self.epoch)
        return super().__iter__()


def epoch_sampler(wrapper, depth: int = 6):
    """The first object with `set_epoch` under `wrapper`, following the `batch_sampler` and `sampler` links
    that torch and accelerate wrap samplers in; None when there is none."""
    for _ in range(depth):
        if wrapper is None or hasattr(wrapper, "set_epoch"):
            return wrapper
        inner = getattr(wrapper, "batch_sampler", None)
        wrapper = inner if inner is not None else getattr(wrapper, "sampler", None)
    return None


class LengthGroupedSampling:
    """Trainer mixin: the length-aware samplers see the length column, whichever dataset is sampled (the
    training set, the eval set, or one given to `evaluate`); `predict` keeps the rows' order."""

    def _get_train_sampler(self, train_dataset=None):
        dataset = train_dataset if train_dataset is not None else self.train_dataset
        dataset = with_length_column(dataset, self.processing_class, self.data_collator, self.args)
        seed = self.args.data_seed if self.args.data_seed is not None else self.args.seed
        if getattr(self.args, "train_block_size", None) and dataset is not None:
            lengths = dataset[self.args.length_column_name] if groups_by_length(self.args) else None
            return BlockSampler(len(dataset), self.args.train_block_size, seed, lengths,
                                self.args.train_batch_size * self.args.gradient_accumulation_steps)
        sampler = super()._get_train_sampler(dataset)
        if type(sampler) is LengthGroupedSampler and sampler.generator is None:
            return EpochSeededLengthGroupedSampler(sampler.batch_size, sampler.lengths, seed)
        return sampler

    def get_resumed_dataloader(self, dataloader, num_batches):
        """transformers' loader that skips the batches a resumed epoch has trained, whose `set_epoch` reaches the
        sampler. In several processes accelerate nests it three wrappers deep (skip, shard, batch), one deeper
        than `DataLoaderShard.set_epoch` and the Trainer look, and the resumed epoch would draw epoch 0's order;
        `DataLoaderDispatcher.set_epoch` looks only at its batch sampler's `sampler`, which the skip wrapper lacks."""
        resumed = super().get_resumed_dataloader(dataloader, num_batches)
        skipping = getattr(resumed, "batch_sampler", None)
        sampler = epoch_sampler(skipping)
        if sampler is not None and not hasattr(skipping, "set_epoch"):
            skipping.set_epoch = sampler.set_epoch  # DataLoaderShard.set_epoch calls its batch sampler's first
        if sampler is not None and not hasattr(skipping, "sampler"):
            skipping.sampler = sampler  # DataLoaderDispatcher.set_epoch calls only its batch sampler's sampler's
        return resumed

    def _get_eval_sampler(self, eval_dataset):
        return super()._get_eval_sampler(
            with_length_column(eval_dataset, self.processing_class, self.data_collator, self.args, "eval"))

    def get_test_dataloader(self, test_dataset):
        """In row order: transformers would group a test set by length too, and `predict` would return its
        predictions shuffled."""
        return self._get_dataloader(dataset=test_dataset, description="test", batch_size=self.args.eval_batch_size,
                                    sampler_fn=self._in_row_order)

    def _in_row_order(self, dataset):
        """transformers' evaluation sampler without length grouping (sharded in order by accelerate when distributed)."""
        return torch.utils.data.SequentialSampler(dataset) if self.args.world_size <= 1 else None
