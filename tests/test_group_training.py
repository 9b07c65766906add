"""Training on query groups end to end: the trainer passes a group batch through untouched, the student
(cross-encoder or Siamese) runs once over it, and the group terms are logged, weighted and fall."""

from __future__ import annotations

import random

import pytest
from datasets import Dataset

from hf_distill.group_collator import GroupCollator
from hf_distill.model_card import build_model_card
from hf_distill.trainer import DistillationTrainer

from .conftest import make_cross_encoder, make_siamese
from .test_ranking_groups import TEXT_WORDS
from .test_trainer import make_args


def teacher_groups(n: int = 12, size: int = 4, seed: int = 0) -> Dataset:
    """Groups whose 'teacher' prefers passages sharing words with the query: 3 points per shared word."""
    rng = random.Random(seed)
    rows = []
    for g in range(n):
        query = rng.sample(TEXT_WORDS[:30], 3)
        passages = [" ".join(rng.sample(query, k=min(k, 3)) + rng.sample(TEXT_WORDS[30:], 3)) for k in range(size, 0, -1)]
        scores = [3.0 * len(set(p.split()) & set(query)) - 2.0 for p in passages]
        rows.append({"qid": f"q{g}", "query": " ".join(query), "passages": passages, "teacher_scores": scores,
                     "passage_labels": [1] + [0] * (size - 1)})
    return Dataset.from_list(rows)


def _mean(history: list[dict], name: str, part: slice) -> float:
    values = [entry[name] for entry in history if name in entry][part]
    return sum(values) / len(values)


@pytest.mark.parametrize("family", ["cross_encoder", "siamese"])
def test_group_terms_are_logged_and_fall(tmp_path, tiny_tokenizer, family):
    if family == "siamese":
        student = make_siamese(tiny_tokenizer, head="none", num_labels=2)
        weights = dict(margin_mse_weight=1.0, listwise_kl_weight=1.0, group_ce_weight=1.0, in_batch_weight=0.1)
    else:
        student = make_cross_encoder(tiny_tokenizer, seed=2)
        weights = dict(margin_mse_weight=1.0, listwise_kl_weight=1.0, group_ce_weight=1.0)
    args = make_args(tmp_path, hard_weight=0.0, max_steps=40, per_device_train_batch_size=4, **weights)
    trainer = DistillationTrainer(student.train(), args, train_dataset=teacher_groups(),
                                  data_collator=GroupCollator.for_student(student, max_length=32))
    trainer.train()
    history = trainer.state.log_history
    terms = [name for name in ("margin_mse", "listwise_kl", "group_ce", "in_batch") if f"{name}_weight" in weights]
    for name in terms:
        first, last = _mean(history, name, slice(0, 5)), _mean(history, name, slice(-5, None))
        # the teacher terms start far off; group_ce starts at log(4), a student that cannot tell passages apart
        assert last < (0.85 if name == "group_ce" else 0.7) * first, f"{name}: {first:.4f} -> {last:.4f}"
    assert "hard" not in history[0] and "soft" not in history[0]
    card = str(build_model_card(trainer))
    assert "`margin_mse`" in card and "`listwise_kl`" in card and "Hofst" in card and "RocketQAv2" in card
    assert "`group_ce`" in card and "Rethink Training of BERT Rerankers" in card
    assert "`hard`" not in card and "`soft`" not in card  # groups hold no pointwise label or logit


def test_in_batch_negatives_refuse_a_cross_encoder_student(tmp_path, tiny_tokenizer):
    student = make_cross_encoder(tiny_tokenizer, seed=2)
    args = make_args(tmp_path, hard_weight=0.0, in_batch_weight=1.0, max_steps=1, per_device_train_batch_size=4)
    trainer = DistillationTrainer(student.train(), args, train_dataset=teacher_groups(4),
                                  data_collator=GroupCollator.for_student(student, max_length=32))
    with pytest.raises(ValueError, match="needs a Siamese student"):
        trainer.train()


def test_group_losses_need_no_online_teacher_but_layer_losses_still_do(tmp_path, tiny_tokenizer):
    student = make_cross_encoder(tiny_tokenizer, seed=2)
    with pytest.raises(ValueError, match="hidden_weight > 0 need an online teacher"):
        DistillationTrainer(student, make_args(tmp_path, hard_weight=0.0, margin_mse_weight=1.0, hidden_weight=1.0),
                            train_dataset=teacher_groups(4), data_collator=GroupCollator.for_student(student))
