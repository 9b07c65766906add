"""Training rows sampled in blocks of neighbours: rows that sit together in the data share a batch.

The data files keep related texts side by side: a pair's two sentences, a premise and its hypotheses,
a question and its candidate answers. A loss that compares the rows of a batch with each other (the
in-batch similarity structure of `similarity_structure`) learns the fine structure only when a batch
holds such neighbours; shuffled rows mostly teach which data set a sentence comes from.
`BlockSampler` cuts the rows into blocks of `block_size` consecutive rows and shuffles whole blocks
with `seed + epoch` (a resumed run draws the same order). Given row lengths, it also sorts the blocks
of each megabatch (`megabatch_batches` batches, fewer on small data) by their longest row, as transformers'
`LengthGroupedSampler` sorts rows: a batch then holds blocks of similar length and pads little.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import torch
from torch.utils.data import Sampler

__all__ = ["BlockSampler"]


class BlockSampler(Sampler[int]):
    """Row indices in shuffled blocks of `block_size` consecutive rows; see the module docstring."""

    def __init__(self, count: int, block_size: int, seed: int, lengths: Sequence[int] | None = None,
                 batch_size: int = 1, megabatch_batches: int = 50):
        for name, value in (("count", count), ("block_size", block_size), ("batch_size", batch_size),
                            ("megabatch_batches", megabatch_batches)):
            low = 0 if name == "count" else 1
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ValueError(f"{name}={value!r} is not valid; give a whole number >= {low}.")
        if lengths is not None and len(lengths) != count:
            raise ValueError(f"lengths has {len(lengths)} entries for count={count} rows; give one length per row.")
        self.count, self.block_size, self.seed, self.epoch = count, block_size, seed, 0
        # as LengthGroupedSampler: at most a quarter of the rows, else one sorted megabatch fixes every epoch's order
        batches = max(1, min(megabatch_batches, count // (4 * batch_size)))
        self.blocks_per_megabatch = max(1, batches * batch_size // block_size)
        self.block_lengths = None if lengths is None else self._longest_per_block(np.asarray(lengths))

    def _longest_per_block(self, lengths: np.ndarray) -> np.ndarray:
        starts = np.arange(0, self.count, self.block_size)
        return np.maximum.reduceat(lengths, starts) if self.count else lengths

    def set_epoch(self, epoch: int) -> None:
        """The Trainer calls this at each epoch: the blocks are shuffled anew, reproducibly."""
        self.epoch = epoch

    def __len__(self) -> int:
        return self.count

    def block_order(self) -> list[int]:
        """This epoch's order of the blocks (block b holds rows b*block_size ...)."""
        generator = torch.Generator().manual_seed(self.seed + self.epoch)
        order = torch.randperm(-(-self.count // self.block_size), generator=generator).tolist()
        if self.block_lengths is None:
            return order
        step = self.blocks_per_megabatch
        megabatches = [order[i : i + step] for i in range(0, len(order), step)]
        return [b for mega in megabatches for b in sorted(mega, key=lambda b: -self.block_lengths[b])]

    def __iter__(self) -> Iterator[int]:
        for block in self.block_order():
            start = block * self.block_size
            yield from range(start, min(start + self.block_size, self.count))
