"""The house rules of loss components: one weight resolver for the trainer and the card, declared terms
only, one owner per term name, and a new component that needs no edit outside its file and the registry."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from hf_distill.losses import HiddenStateLoss, LossComponent, Term
from hf_distill.model_card import build_model_card, detect_methods
from hf_distill.trainer import DistillationTrainer
from tests.conftest import make_cross_encoder
from tests.test_trainer import make_args, pair_dataset

REPO = Path(__file__).resolve().parents[2]


def _pair(tiny_tokenizer):
    teacher = make_cross_encoder(tiny_tokenizer, num_layers=2, seed=1)
    return teacher, make_cross_encoder(tiny_tokenizer, num_layers=2, seed=2)


def _card_rows(trainer) -> dict[str, str]:
    """term -> weight as the card's loss table prints them."""
    text = str(build_model_card(trainer))
    rows = [line.split("|") for line in text.splitlines() if line.startswith("| `")]
    return {cells[1].strip().strip("`"): cells[2].strip() for cells in rows}


def test_term_weights_change_the_loss_and_the_card_the_same_way(tmp_path, tiny_tokenizer):
    teacher, student = _pair(tiny_tokenizer)
    args = make_args(tmp_path, hidden_weight=1.0)
    trainer = DistillationTrainer(model=student, args=args, teachers=teacher, term_weights={"hidden": 0.1},
                                  train_dataset=pair_dataset(8))
    assert trainer.term_weights_now()["hidden"] == pytest.approx(0.1)
    assert _card_rows(trainer)["hidden"] == "0.1"
    batch = trainer._prepare_inputs(trainer.data_collator([pair_dataset(8)[i] for i in range(4)]))
    terms, _, _ = trainer.loss_terms(trainer.model, batch)
    loss = trainer.compute_loss(trainer.model, batch)
    hand = 0.5 * terms["hard"] + 0.5 * terms["soft"] + 0.1 * terms["hidden"]
    assert loss.item() == pytest.approx(hand.item(), rel=1e-6)


def test_a_component_switched_on_by_term_weights_alone_is_built_and_named_in_the_card(tmp_path, tiny_tokenizer):
    teacher, student = _pair(tiny_tokenizer)
    trainer = DistillationTrainer(model=student, args=make_args(tmp_path), teachers=teacher,
                                  term_weights={"hidden": 0.5}, train_dataset=pair_dataset(8))
    assert any(isinstance(c, HiddenStateLoss) for c in trainer.loss_components)
    assert _card_rows(trainer)["hidden"] == "0.5"
    assert "tinybert" in [m.key for m in detect_methods(trainer)]


def test_term_weights_naming_no_term_is_refused(tmp_path, tiny_tokenizer):
    teacher, student = _pair(tiny_tokenizer)
    with pytest.raises(ValueError, match=r"term_weights\['hiden'\] names no loss term of this trainer; valid terms: .*hard"):
        DistillationTrainer(model=student, args=make_args(tmp_path), teachers=teacher, term_weights={"hiden": 1.0},
                            train_dataset=pair_dataset(8))


class _Echo(LossComponent):
    """Returns a term named like another component's."""

    terms = (Term("hidden", None, "a clash"),)

    def forward(self, student_out, teacher_outs, batch):
        return {"hidden": student_out.logits.sum() * 0}


class _Undeclared(LossComponent):
    terms = (Term("declared", None, "declared"),)

    def forward(self, student_out, teacher_outs, batch):
        return {"declared": student_out.logits.sum() * 0, "sneaky": student_out.logits.sum() * 0}


def test_two_components_returning_one_term_name_is_an_error_naming_both(tmp_path, tiny_tokenizer):
    teacher, student = _pair(tiny_tokenizer)
    with pytest.raises(ValueError, match="'hidden' is returned by both _Echo and HiddenStateLoss"):
        DistillationTrainer(model=student, args=make_args(tmp_path, hidden_weight=1.0), teachers=teacher,
                            loss_components=[_Echo()], train_dataset=pair_dataset(8))


def test_an_undeclared_term_cannot_be_logged_without_being_weighted(tmp_path, tiny_tokenizer):
    teacher, student = _pair(tiny_tokenizer)
    trainer = DistillationTrainer(model=student, args=make_args(tmp_path), teachers=teacher,
                                  loss_components=[_Undeclared()], train_dataset=pair_dataset(8))
    with pytest.raises(ValueError, match=r"_Undeclared returned the undeclared terms \['sneaky'\]"):
        trainer.train()


def test_a_plain_module_is_refused_as_a_component(tmp_path, tiny_tokenizer):
    teacher, student = _pair(tiny_tokenizer)
    with pytest.raises(ValueError, match="loss component Linear is not valid; subclass hf_distill.losses.LossComponent"):
        DistillationTrainer(model=student, args=make_args(tmp_path), teachers=teacher,
                            loss_components=[torch.nn.Linear(2, 2)], train_dataset=pair_dataset(8))


NEW_COMPONENT = '''
"""A newcomer's loss: the student's logits pulled towards zero, as one file."""
from hf_distill.losses.base import LossComponent, Term


class CenterLoss(LossComponent):
    terms = (Term("center", "center_weight", "mean squared student logit (pulls scores to zero)"),)
    method = None
    switch = "center_weight"
    switch_help = "Weight (>= 0) of the center loss."
    citation = "@misc{center2026, title = {Center}, year = {2026}}"

    @classmethod
    def from_arguments(cls, args, student_config, teacher_config):
        return cls()

    def forward(self, student_out, teacher_outs, batch):
        return {"center": student_out.logits.float().pow(2).mean()}
'''

SCRIPT = '''
import json, os, sys
sys.path[:0] = [{plugin!r}, {repo!r}]
from hf_distill.losses.registry import register_loss   # the one registry entry
from center_loss import CenterLoss
register_loss(CenterLoss)

from hf_distill.model_card import build_model_card
from hf_distill.trainer import DistillationTrainer
from tests.conftest import make_cross_encoder
from tests.test_trainer import make_args, pair_dataset
from transformers import BertTokenizerFast

tokenizer = BertTokenizerFast(vocab={vocab!r}, do_lower_case=True, model_max_length=64)
teacher = make_cross_encoder(tokenizer, num_layers=2, seed=1)
student = make_cross_encoder(tokenizer, num_layers=2, seed=2)
from pathlib import Path
args = make_args(Path({out!r}), center_weight=0.7, max_steps=3)
trainer = DistillationTrainer(model=student, args=args, teachers=teacher, train_dataset=pair_dataset(8))
batch = trainer._prepare_inputs(trainer.data_collator([pair_dataset(8)[i] for i in range(4)]))
terms, _, _ = trainer.loss_terms(trainer.model, batch)
loss = trainer.compute_loss(trainer.model, batch)
hand = 0.5 * terms["hard"] + 0.5 * terms["soft"] + 0.7 * terms["center"]
trainer.train()
print(json.dumps(dict(
    loss=loss.item(), hand=hand.item(),
    logged=[e["center"] for e in trainer.state.log_history if "center" in e],
    card=str(build_model_card(trainer)),
)))
'''


def test_a_new_component_shows_in_loss_logs_and_card_with_no_edit_elsewhere(tmp_path, tiny_vocab_file):
    """Its file plus `register_loss`: DistillationArguments gains `center_weight`, and the term is trained,
    logged and described in the card."""
    plugin = tmp_path / "plugin"
    plugin.mkdir()
    (plugin / "center_loss.py").write_text(textwrap.dedent(NEW_COMPONENT))
    script = SCRIPT.format(plugin=str(plugin), repo=str(REPO), vocab=tiny_vocab_file, out=str(tmp_path))
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    import json

    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["loss"] == pytest.approx(result["hand"], rel=1e-6)
    assert len(result["logged"]) == 3
    assert "0.7·center" in result["card"] and "mean squared student logit" in result["card"]
    assert "@misc{center2026" in result["card"]
