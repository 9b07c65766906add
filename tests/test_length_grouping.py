"""Length-grouped training on raw-text rows: the length column, the grouped batches, an exact resume."""

from __future__ import annotations

import pytest
import torch
from transformers.trainer_pt_utils import LengthGroupedSampler

from hf_distill.group_collator import GroupCollator
from hf_distill.length_batching import token_lengths
from hf_distill.length_grouping import with_length_column
from hf_distill.ranking_groups import sample_groups
from hf_distill.trainer import DistillationTrainer
from tests.test_ranking_groups import toy_ranking
from tests.test_trainer import make_args, pair_dataset, student_of, teacher  # noqa: F401  (fixture)


def _padding(trainer) -> float:
    """Padded tokens over real tokens across one pass of the training dataloader."""
    padded = real = 0
    for batch in trainer.get_train_dataloader():
        padded += batch["attention_mask"].numel()
        real += int(batch["attention_mask"].sum())
    return padded / real


def test_grouped_training_adds_the_length_column_and_pads_less(tmp_path, teacher):
    data = pair_dataset(96)
    grouped = DistillationTrainer(model=student_of(teacher), args=make_args(tmp_path / "g", train_sampling_strategy="group_by_length"),
                                  train_dataset=data, eval_dataset=pair_dataset(16, seed=1))
    expected = token_lengths(teacher.tokenizer, [data["sentence1"], data["sentence2"]], 32).tolist()
    sampler = grouped._get_train_sampler()
    assert isinstance(sampler, LengthGroupedSampler) and list(sampler.lengths) == expected
    assert isinstance(grouped._get_eval_sampler(grouped.eval_dataset), LengthGroupedSampler)
    shuffled = DistillationTrainer(model=student_of(teacher), args=make_args(tmp_path / "r"), train_dataset=data)
    assert _padding(grouped) < _padding(shuffled)
    grouped.train()  # the column survives pruning and the collator ignores it
    assert grouped.state.global_step == 4
    assert "eval_loss" in grouped.evaluate(pair_dataset(8, seed=2))  # a set given to evaluate is grouped too


def test_a_given_length_column_is_kept_and_rows_without_text_columns_must_bring_one(tmp_path, teacher):
    data = pair_dataset(8).add_column("length", list(range(8)))
    args = make_args(tmp_path, train_sampling_strategy="group_by_length")
    assert with_length_column(data, teacher.tokenizer, None, args)["length"] == list(range(8))
    assert with_length_column(pair_dataset(8), teacher.tokenizer, None, make_args(tmp_path)).column_names == \
        pair_dataset(8).column_names  # random sampling: nothing added
    with pytest.raises(ValueError, match="train_sampling_strategy='group_by_length' needs the train set's row lengths; "
                                         "add a column length_column_name='length'"):
        with_length_column(pair_dataset(8), teacher.tokenizer, collator=None, args=args)


def test_a_query_groups_length_is_its_longest_query_passage_pair(tmp_path, tiny_tokenizer):
    data = toy_ranking(queries=4, candidates=6, relevant=(0, 2))
    scores = {q: {c.doc_id: float(c.rank) for c in cands} for q, cands in data.candidates.items()}
    groups = sample_groups(data, scores, 3, seed=0)
    collator = GroupCollator(tiny_tokenizer, siamese=False)
    args = make_args(tmp_path, train_sampling_strategy="group_by_length")
    lengths = with_length_column(groups, tiny_tokenizer, collator, args)["length"]
    for row, length in zip(groups, lengths):
        pairs = token_lengths(tiny_tokenizer, [[row["query"]] * len(row["passages"]), row["passages"]], 32)
        assert length == max(pairs)


def test_predictions_come_back_in_row_order(tmp_path, teacher):
    data, student = pair_dataset(40, seed=3), student_of(teacher)
    predictions = [
        DistillationTrainer(model=student, args=make_args(tmp_path / s, train_sampling_strategy=s, per_device_eval_batch_size=4),
                            train_dataset=data).predict(data.remove_columns("label")).predictions
        for s in ("random", "group_by_length")
    ]
    torch.testing.assert_close(torch.as_tensor(predictions[1]), torch.as_tensor(predictions[0]))


@pytest.mark.parametrize("checkpoint", [4, 12])  # in the first epoch (10 steps), and in the second
def test_grouped_training_resumes_exactly(tmp_path, teacher, checkpoint):
    data = pair_dataset(40)

    def train(folder, max_steps, resume=None):  # a fresh student each time: only the checkpoint carries state
        student = student_of(teacher)
        args = make_args(folder, max_steps=max_steps, save_strategy="steps", save_steps=4, per_device_train_batch_size=4,
                         train_sampling_strategy="group_by_length", alpha=0.5)
        trainer = DistillationTrainer(model=student, args=args, teachers=teacher, train_dataset=data)
        trainer.train(resume_from_checkpoint=resume)
        return trainer

    full = train(tmp_path / "full", 16)  # past one epoch (10 steps): the second epoch's order must match too
    resumed = train(tmp_path / "full", 16, resume=str(tmp_path / "full" / "out" / f"checkpoint-{checkpoint}"))
    for (name, a), (_, b) in zip(full.model.state_dict().items(), resumed.model.state_dict().items()):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0, msg=f"{name} differs after resume")
