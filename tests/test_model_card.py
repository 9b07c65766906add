"""Model cards: filled at save_model / push_to_hub from what the trainer saw, valid Hub metadata, complete folders."""

from __future__ import annotations

import fnmatch
import json
import os
import shutil
from pathlib import Path

import pytest
import torch
from huggingface_hub import EvalResult, ModelCard
from transformers import AutoModel

from hf_distill import CrossEncoderModel
from hf_distill.losses.virt import VirtualInteractionLoss
from hf_distill.metrics import compute_metrics_for
from hf_distill.model_card import CITATIONS, build_model_card, detect_methods, measure_speed
from hf_distill.teachers import add_teacher_logits
from hf_distill.trainer import DistillationTrainer
from tests.conftest import make_cross_encoder, make_siamese
from tests.test_trainer import make_args, pair_dataset

TEACHER_ID = "hf-distill-tests/tiny-teacher"
CODE_FILES = {"configuration_hf_distill.py", "modeling_common.py", "modeling_cross_encoder.py"}
ARXIV = {"logit-distillation": "1503.02531", "dvbert": "2104.08675", "tinybert": "2009.07531", "bert-emd": "2010.06133", "virt": "2112.04195"}


def _teacher(tokenizer, seed=1, name=TEACHER_ID, layers=3):
    teacher = make_cross_encoder(tokenizer, num_layers=layers, seed=seed)
    teacher.config._name_or_path = name
    return teacher


def _load(folder: Path) -> ModelCard:
    """Parse the card twice: from the folder (as the Hub reads README.md) and from its text."""
    card = ModelCard.load(folder / "README.md")
    again = ModelCard(card.content)
    assert again.data.to_dict() == card.data.to_dict()
    return card


def _check_common(card: ModelCard, methods: set[str], base_model, pipeline_tag: str) -> None:
    data = card.data
    assert data.library_name == "transformers"
    assert {"hf_distill", "knowledge-distillation", *methods} <= set(data.tags)
    assert data.base_model == base_model
    assert data.pipeline_tag == pipeline_tag
    for method in methods:  # each method found is named and cited
        assert f"arXiv:{ARXIV[method]}" in card.text and f"eprint        = {{{ARXIV[method]}}}" in card.text
    assert "## Evaluation" in card.text and "## Citation" in card.text and "### Hyper-parameters" in card.text


def _check_model_index(card: ModelCard, metrics: set[str], split: str = "validation") -> None:
    results = card.data.eval_results
    assert results and all(isinstance(r, EvalResult) for r in results)
    assert {r.metric_type for r in results} == metrics and set(card.data.metrics) == metrics
    assert all(r.dataset_split == split and isinstance(r.metric_value, float) for r in results)
    assert card.data.to_dict()["model-index"][0]["name"] == card.data.model_name


# ---------------------------------------------------------------------------- one card per method
def test_plain_kd_card_after_save_and_evaluate(tmp_path, tiny_tokenizer):
    teacher = _teacher(tiny_tokenizer)
    student = CrossEncoderModel.from_teacher(teacher, num_layers=1)
    trainer = DistillationTrainer(
        model=student,
        args=make_args(tmp_path, max_steps=2, alpha=0.7, temperature=3.0),
        teachers=teacher,
        train_dataset=pair_dataset(16),
        eval_dataset=pair_dataset(8, seed=4),
        compute_metrics=compute_metrics_for(2),
    )
    trainer.train()
    trainer.save_model()
    out = tmp_path / "out"
    card = _load(out)
    _check_common(card, {"logit-distillation"}, TEACHER_ID, "text-classification")
    assert not card.data.eval_results, "no evaluation ran yet"
    assert "L = 0.3·hard + 0.7·soft" in card.text and "temperature τ = 3" in card.text
    assert "| teacher | hf-distill-tests/tiny-teacher | CrossEncoderModel (bert) | 3 | 32 | 2 |" in card.text

    # The cli saves, then evaluates: the card follows the new metrics.
    trainer.evaluate()
    card = _load(out)
    _check_model_index(card, {"accuracy", "f1"})
    assert "**validation set**" in card.text and "| accuracy |" in card.text


def test_annealing_card_siamese_student_two_teachers(tmp_path, tiny_tokenizer):
    teachers = [_teacher(tiny_tokenizer, seed=1), _teacher(tiny_tokenizer, seed=2, name="hf-distill-tests/tiny-teacher-2")]
    student = make_siamese(tiny_tokenizer, num_layers=1, num_labels=2)
    trainer = DistillationTrainer(
        model=student,
        args=make_args(tmp_path, max_steps=2, annealing="linear"),
        teachers=teachers,
        train_dataset=pair_dataset(16),
        eval_dataset=pair_dataset(8, seed=4),
        compute_metrics=compute_metrics_for(2),
    )
    trainer.train()
    trainer.evaluate()
    trainer.save_model()
    card = _load(tmp_path / "out")
    _check_common(
        card, {"logit-distillation", "dvbert"}, [TEACHER_ID, "hf-distill-tests/tiny-teacher-2"], "sentence-similarity",
    )
    assert {"teacher-annealing", "bi-encoder"} <= set(card.data.tags)
    assert "`L = λ·hard + (1 − λ)·soft_0 + (1 − λ)·soft_1`, with `λ = global_step / max_steps`" in card.text
    assert "sum over 2 teachers" in card.text and "| teacher 1 | hf-distill-tests/tiny-teacher-2 |" in card.text
    assert "model.encode(" in card.text
    _check_model_index(card, {"accuracy", "f1"})


def test_layer_loss_card_names_tinybert_and_the_mapping(tmp_path, tiny_tokenizer):
    teacher = _teacher(tiny_tokenizer, layers=4)
    student = CrossEncoderModel.from_teacher(teacher, num_layers=2, strategy="uniform")
    args = make_args(tmp_path, max_steps=2, hidden_weight=1.0, attention_weight=1.0, embedding_weight=0.5, temperature=2.0)
    trainer = DistillationTrainer(model=student, args=args, teachers=teacher, train_dataset=pair_dataset(16))
    trainer.train()
    trainer.save_model()
    card = _load(tmp_path / "out")
    _check_common(card, {"logit-distillation", "tinybert"}, TEACHER_ID, "text-classification")
    assert "hidden (uniform; student layer → teacher layer, 1-based): 1 → 2, 2 → 4." in card.text
    assert "attention (uniform; student layer → teacher layer, 1-based): 1 → 2, 2 → 4." in card.text
    assert "| `embedding` | 0.5 |" in card.text and "| `attention_weight` | 1 |" in card.text
    assert "Simplified {TinyBERT}" in card.text  # the BibTeX entry
    assert "No evaluation was logged" in card.text and not card.data.eval_results


def test_emd_card_shows_the_flow_picture(tmp_path, tiny_tokenizer):
    teacher = _teacher(tiny_tokenizer)
    student = CrossEncoderModel.from_teacher(teacher, num_layers=2)
    args = make_args(tmp_path, max_steps=2, emd_weight=1.0, alpha=1.0)
    trainer = DistillationTrainer(model=student, args=args, teachers=teacher, train_dataset=pair_dataset(16))
    trainer.train()  # the cost-attention callback draws emd_flow.png into output_dir at the end
    elsewhere = tmp_path / "final"
    trainer.save_model(str(elsewhere))
    assert (elsewhere / "emd_flow.png").exists(), "the picture travels with the card"
    card = _load(elsewhere)
    _check_common(card, {"logit-distillation", "bert-emd"}, TEACHER_ID, "text-classification")
    assert "![BERT-EMD flow matrix](emd_flow.png)" in card.text
    assert "all 2 × 3 student × teacher layer pairs" in card.text and "hidden teacher weights [" in card.text
    assert "`emd_tau`" not in card.text and "| `emd_temperature` | 1 |" in card.text


def test_virt_and_offline_cards_without_training(tmp_path, tiny_tokenizer):
    """Method inference from the trainer set-up alone; the card can be built before any training."""
    teacher = _teacher(tiny_tokenizer, layers=2)
    siamese = make_siamese(tiny_tokenizer, num_labels=2)
    virt = DistillationTrainer(
        model=siamese, args=make_args(tmp_path, alpha=0.5, virt_weight=1.0), teachers=teacher,
        loss_components=[VirtualInteractionLoss("uniform")], train_dataset=pair_dataset(8),
    )
    assert [m.key for m in detect_methods(virt)] == ["logit_kd", "virt"]
    card = ModelCard(str(build_model_card(virt)))
    assert {"virt", "bi-encoder"} <= set(card.data.tags) and "virt (uniform; student layer → teacher layer" in card.text

    data = add_teacher_logits(pair_dataset(8), teacher, ["sentence1", "sentence2"], max_length=32)
    offline = DistillationTrainer(model=CrossEncoderModel.from_teacher(teacher, 1), args=make_args(tmp_path), train_dataset=data)
    offline.model_card_data.update(teachers=[TEACHER_ID], license="apache-2.0", language="en")
    card = ModelCard(str(build_model_card(offline)))
    assert card.data.base_model == TEACHER_ID and card.data.license == "apache-2.0" and card.data.language == "en"
    assert "logit-distillation" in card.data.tags and "teacher_logits_0" in card.text

    fine_tuned = DistillationTrainer(model=make_cross_encoder(tiny_tokenizer, 1), args=make_args(tmp_path), train_dataset=pair_dataset(8))
    card = ModelCard(str(build_model_card(fine_tuned)))
    assert "knowledge-distillation" not in card.data.tags and "no teacher" in card.text


def test_speed_is_reported_when_measured(tmp_path, tiny_tokenizer, monkeypatch):
    import hf_distill.model_card.callback as model_card_module

    teacher = _teacher(tiny_tokenizer)
    trainer = DistillationTrainer(
        model=CrossEncoderModel.from_teacher(teacher, 1), args=make_args(tmp_path, measure_speed_on_save=True),
        teachers=teacher, train_dataset=pair_dataset(16),
    )
    calls = []
    monkeypatch.setattr(model_card_module, "measure_speed", lambda t: calls.append(measure_speed(t, max_pairs=16, min_seconds=0.02)))
    trainer.save_model()
    assert len(calls) == 1 and [row["name"] for row in calls[0]["rows"]] == ["student", "teacher"]
    card = _load(tmp_path / "out")
    assert "### Speed" in card.text and "| teacher |" in card.text and "| 1.0x |" in card.text


def test_a_card_that_cannot_be_built_warns_and_the_student_is_saved(tmp_path, tiny_tokenizer, monkeypatch):
    import hf_distill.model_card.render as model_card_module

    def broken(*args, **kwargs):
        raise RuntimeError("no card today")

    monkeypatch.setattr(model_card_module, "build_model_card", broken)
    trainer = DistillationTrainer(model=make_cross_encoder(tiny_tokenizer, 1), args=make_args(tmp_path), train_dataset=pair_dataset(8))
    with pytest.warns(UserWarning, match="model card for .* was not written: RuntimeError: no card today"):
        trainer.save_model()
    assert (tmp_path / "out" / "model.safetensors").exists() and not (tmp_path / "out" / "README.md").exists()


# ---------------------------------------------------------------------------- the pushed folder
class _FakeHub:
    """Stands in for the Hub API (HF_HUB_OFFLINE): upload_folder copies what would be uploaded."""

    def __init__(self, root: Path):
        self.root = root
        self.uploads = []

    def create_repo(self, repo_id, **kwargs):
        return type("RepoUrl", (), {"repo_id": repo_id})()

    def upload_folder(self, repo_id, folder_path, ignore_patterns=(), **kwargs):
        target = self.root / repo_id
        for path in Path(folder_path).rglob("*"):
            relative = path.relative_to(folder_path).as_posix()
            if path.is_file() and not any(fnmatch.fnmatch(relative, p) or fnmatch.fnmatch(relative.split("/")[0], p) for p in ignore_patterns):
                (target / relative).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, target / relative)
        self.uploads.append(repo_id)
        return f"https://huggingface.co/{repo_id}"


def test_push_to_hub_uploads_a_complete_student(tmp_path, tiny_tokenizer, monkeypatch):
    import transformers.trainer

    hub = _FakeHub(tmp_path / "hub")
    monkeypatch.setattr(transformers.trainer, "hf_api", lambda: hub)
    teacher = _teacher(tiny_tokenizer)
    student = CrossEncoderModel.from_teacher(teacher, num_layers=1)
    args = make_args(tmp_path, max_steps=2, hub_model_id="someone/tiny-distilled", save_strategy="steps", save_steps=2)
    trainer = DistillationTrainer(
        model=student, args=args, teachers=teacher, train_dataset=pair_dataset(16), eval_dataset=pair_dataset(8, seed=4),
        compute_metrics=compute_metrics_for(2),
    )
    trainer.train()
    trainer.evaluate()
    trainer.push_to_hub(license="apache-2.0", tags=["demo"])
    assert hub.uploads == ["someone/tiny-distilled"]
    pushed = hub.root / "someone/tiny-distilled"
    files = set(os.listdir(pushed))
    assert "model.safetensors" in files and not any(f.endswith(".bin") and f != "training_args.bin" for f in files)
    assert CODE_FILES <= files, files
    assert {"tokenizer_config.json", "tokenizer.json"} <= files and "README.md" in files
    assert not any(f.startswith("checkpoint-") for f in files), "checkpoints are not pushed"
    config = json.loads((pushed / "config.json").read_text())
    assert config["auto_map"] == {
        "AutoConfig": "configuration_hf_distill.CrossEncoderConfig",
        "AutoModel": "modeling_cross_encoder.CrossEncoderModel",
        "AutoModelForSequenceClassification": "modeling_cross_encoder.CrossEncoderModel",
    }
    card = _load(pushed)
    _check_common(card, {"logit-distillation"}, TEACHER_ID, "text-classification")
    assert card.data.license == "apache-2.0" and "demo" in card.data.tags
    assert card.data.model_name == "tiny-distilled" and 'AutoModel.from_pretrained("someone/tiny-distilled"' in card.text
    _check_model_index(card, {"accuracy", "f1"})

    again = AutoModel.from_pretrained(pushed).eval()
    batch = trainer.data_collator([pair_dataset(8, seed=4)[i] for i in range(8)])
    inputs = {k: v for k, v in batch.items() if not k.startswith("teacher_") and k != "labels"}
    with torch.no_grad():
        torch.testing.assert_close(again(**inputs).logits, student.eval()(**inputs).logits, atol=1e-6, rtol=0)


def test_every_citation_is_bibtex():
    for key, entry in CITATIONS.items():
        bibtex = entry["bibtex"]
        assert bibtex.startswith("@") and bibtex.count("{") == bibtex.count("}"), key
        assert "eprint" in bibtex and "title" in bibtex and "author" in bibtex, key


@pytest.mark.parametrize("folder", ["model_cards"])
def test_model_cards_folder_documents_the_template(folder):
    root = Path(__file__).resolve().parent.parent / folder
    assert "hf_distill/templates/distilled_student.md" in (root / "README.md").read_text()
    assert "hf_distill/templates/distilled_student.md" in (root / "distilled_student.md").read_text()
