"""Sampling in blocks of neighbouring rows: whole blocks, shuffled per epoch, grouped by length, resumed exactly
(in several processes too)."""

from __future__ import annotations

from itertools import groupby

import pytest
import torch

from hf_distill.block_sampling import BlockSampler
from hf_distill.length_grouping import EpochSeededLengthGroupedSampler
from hf_distill.trainer import DistillationTrainer
from hf_distill.training_args import DistillationArguments
from tests.test_trainer import make_args, pair_dataset, student_of, teacher  # noqa: F401  (fixture)


def _blocks(order: list[int], size: int) -> list[list[int]]:
    return [list(rows) for _, rows in groupby(order, key=lambda row: row // size)]


def test_blocks_stay_whole_and_move_with_the_seed_and_the_epoch():
    sampler = BlockSampler(10, 3, seed=0)
    order = list(sampler)
    assert sorted(order) == list(range(10)) and order == list(BlockSampler(10, 3, seed=0)) and len(sampler) == 10
    assert sorted(_blocks(order, 3)) == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]  # every block whole, rows in file order
    orders = set()
    for epoch in range(6):
        sampler.set_epoch(epoch)
        orders.add(tuple(sampler.block_order()))
    assert len(orders) > 1 and {tuple(BlockSampler(10, 3, seed=s).block_order()) for s in range(6)} != {(0, 1, 2, 3)}


def test_with_lengths_each_megabatch_holds_the_same_blocks_sorted_by_their_longest_row():
    lengths = [1, 9, 2, 2, 5, 1, 3, 3, 7, 7, 4, 0, 6, 2, 8, 1]  # blocks of 2: longest rows 9, 2, 5, 3, 7, 4, 6, 8
    longest = [9, 2, 5, 3, 7, 4, 6, 8]
    for seed in range(5):
        plain = BlockSampler(16, 2, seed=seed).block_order()
        grouped = BlockSampler(16, 2, seed=seed, lengths=lengths, batch_size=2, megabatch_batches=2)
        assert grouped.blocks_per_megabatch == 2  # 2 batches of 2 rows: 2 blocks of 2
        order = grouped.block_order()
        for start in range(0, 8, 2):
            assert sorted(order[start : start + 2]) == sorted(plain[start : start + 2])
            assert [longest[b] for b in order[start : start + 2]] == sorted((longest[b] for b in plain[start : start + 2]),
                                                                            reverse=True)
        assert sorted(_blocks(list(grouped), 2)) == [[i, i + 1] for i in range(0, 16, 2)]


def test_on_small_data_megabatches_shrink_so_grouping_by_length_still_shuffles():
    # 64 rows in batches of 4: 50 batches would make one megabatch, sorted the same way every epoch
    sampler = BlockSampler(64, 2, seed=0, lengths=list(range(64)), batch_size=4)
    assert sampler.blocks_per_megabatch == 8  # as LengthGroupedSampler: 64 // (4 * 4) batches of 4 rows, blocks of 2
    orders = set()
    for epoch in range(4):
        sampler.set_epoch(epoch)
        orders.add(tuple(sampler.block_order()))
    assert len(orders) == 4


def test_bad_settings_are_refused_with_the_field_and_what_is_valid(tmp_path):
    with pytest.raises(ValueError, match="block_size=0 is not valid; give a whole number >= 1"):
        BlockSampler(4, 0, seed=0)
    with pytest.raises(ValueError, match="count=-1 is not valid; give a whole number >= 0"):
        BlockSampler(-1, 2, seed=0)
    with pytest.raises(ValueError, match="lengths has 3 entries for count=4 rows"):
        BlockSampler(4, 2, seed=0, lengths=[1, 2, 3])
    with pytest.raises(ValueError, match="train_block_size=0 is not valid; give a whole number >= 1"):
        DistillationArguments(output_dir=str(tmp_path), train_block_size=0)
    with pytest.raises(ValueError, match="train_sampling_strategy \\(with train_block_size\\)='sequential' is not valid"):
        DistillationArguments(output_dir=str(tmp_path), train_block_size=4, train_sampling_strategy="sequential")


def test_the_trainer_samples_blocks_grouped_by_length_and_resumes_exactly(tmp_path, teacher, monkeypatch):
    data = pair_dataset(40)
    trainer = DistillationTrainer(model=student_of(teacher), train_dataset=data, args=make_args(
        tmp_path / "s", train_block_size=4, train_sampling_strategy="group_by_length", per_device_train_batch_size=8))
    sampler = trainer._get_train_sampler()
    # 40 rows: megabatches of 40 // (4 * 8) = 1 batch of 8 rows, 2 blocks of 4 (as LengthGroupedSampler)
    assert isinstance(sampler, BlockSampler) and sampler.block_lengths is not None and sampler.blocks_per_megabatch == 2
    assert sorted(_blocks(list(sampler), 4)) == [list(range(i, i + 4)) for i in range(0, 40, 4)]

    def train(max_steps, resume=None):  # a fresh student each time: only the checkpoint carries state
        args = make_args(tmp_path / "full", max_steps=max_steps, save_strategy="steps", save_steps=4, train_block_size=4,
                         per_device_train_batch_size=4, alpha=0.5)
        run = DistillationTrainer(model=student_of(teacher), args=args, teachers=teacher, train_dataset=data)
        run.train(resume_from_checkpoint=resume)
        return run

    epochs: list[int] = []
    monkeypatch.setattr(BlockSampler, "set_epoch", lambda self, epoch: (epochs.append(epoch), setattr(self, "epoch", epoch)))
    full = train(16)  # past one epoch (10 steps): the second epoch's order must match too
    assert sorted(set(epochs)) == [0, 1]  # the Trainer reshuffles the blocks each epoch
    resumed = train(16, resume=str(tmp_path / "full" / "out" / "checkpoint-12"))
    for (name, a), (_, b) in zip(full.model.state_dict().items(), resumed.model.state_dict().items()):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0, msg=f"{name} differs after resume")


@pytest.mark.parametrize("make_sampler", [
    lambda: BlockSampler(32, 4, seed=0),
    lambda: EpochSeededLengthGroupedSampler(2, lengths=[i % 7 for i in range(32)], seed=0),
], ids=["blocks", "grouped_by_length"])
def test_an_epoch_resumed_in_its_middle_in_several_processes_draws_that_epochs_batches(tmp_path, teacher, make_sampler):
    """accelerate nests a resumed process's sampler skip -> shard -> batch sampler, one deeper than its
    `set_epoch` reaches: without the trainer's hook the resumed epoch would replay epoch 0's order."""
    from accelerate.data_loader import BatchSamplerShard, DataLoaderShard
    from torch.utils.data import BatchSampler
    from transformers import Trainer

    trainer = DistillationTrainer(model=student_of(teacher), train_dataset=pair_dataset(32),
                                  args=make_args(tmp_path, train_block_size=4))

    def second_process_loader() -> tuple[BlockSampler, DataLoaderShard]:
        sampler = make_sampler()
        shard = BatchSamplerShard(BatchSampler(sampler, 2, drop_last=False), num_processes=2, process_index=1)
        return sampler, DataLoaderShard(list(range(32)), batch_sampler=shard)

    sampler, loader = second_process_loader()
    loader.set_epoch(3)
    uninterrupted = [batch.tolist() for batch in loader]
    assert sampler.epoch == 3 and uninterrupted != [batch.tolist() for batch in second_process_loader()[1]]
    sampler, loader = second_process_loader()
    resumed = trainer.get_resumed_dataloader(loader, 3)
    resumed.set_epoch(3)  # what the Trainer calls on the loader of the resumed epoch
    assert sampler.epoch == 3 and [batch.tolist() for batch in resumed] == uninterrupted[3:]
    sampler, loader = second_process_loader()
    plain = Trainer.get_resumed_dataloader(trainer, loader, 3)
    plain.set_epoch(3)
    assert sampler.epoch == 0  # the reason for the hook: accelerate alone does not reach the sampler


def test_an_epoch_resumed_in_its_middle_with_dispatched_batches_draws_that_epochs_batches(tmp_path, teacher):
    """With `dispatch_batches`, accelerate's `DataLoaderDispatcher.set_epoch` reaches only its batch sampler's
    `sampler`, which the skip wrapper lacks: without the trainer's hook the resumed epoch replays epoch 0's order."""
    from accelerate import PartialState
    from accelerate.data_loader import DataLoaderDispatcher
    from torch.utils.data import BatchSampler

    PartialState()
    trainer = DistillationTrainer(model=student_of(teacher), train_dataset=pair_dataset(32),
                                  args=make_args(tmp_path, train_block_size=4))

    def dispatched_loader() -> tuple[BlockSampler, DataLoaderDispatcher]:
        sampler = BlockSampler(32, 4, seed=0)
        return sampler, DataLoaderDispatcher(list(range(32)), batch_sampler=BatchSampler(sampler, 2, drop_last=False))

    sampler, loader = dispatched_loader()
    loader.set_epoch(3)
    uninterrupted = list(BatchSampler(sampler, 2, drop_last=False))
    assert sampler.epoch == 3 and uninterrupted != list(BatchSampler(dispatched_loader()[0], 2, drop_last=False))
    sampler, loader = dispatched_loader()
    resumed = trainer.get_resumed_dataloader(loader, 3)
    resumed.set_epoch(3)  # what the Trainer calls on the loader of the resumed epoch
    assert sampler.epoch == 3 and list(resumed.batch_sampler) == uninterrupted[3:]
