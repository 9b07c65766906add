"""Bad input fails early with a ValueError that names the field, the value and what is valid."""

from __future__ import annotations

import pytest
import torch

from hf_distill import CrossEncoderConfig, CrossEncoderModel, SiameseConfig, SiameseModel

from ..conftest import make_bert_config, make_cross_encoder, make_siamese

MISSING = "/nonexistent/backbone-that-would-fail-to-load"
NEEDS_EAGER = r"output_attentions=True.*attn_implementation='sdpa'.*attn_implementation=\"eager\""


@pytest.mark.parametrize("pooling", ["avg", "MEAN", "", None])
def test_unknown_pooling(pooling):
    with pytest.raises(ValueError, match=r"pooling=.*not valid.*'mean', 'cls', 'max'") as info:
        SiameseConfig(encoder=make_bert_config().to_dict(), pooling=pooling)
    assert repr(pooling) in str(info.value)


@pytest.mark.parametrize("head", ["softmax", "regression", "cos"])
def test_unknown_head(head):
    with pytest.raises(ValueError, match=rf"head='{head}' is not valid.*'classification', 'cosine', 'none'"):
        SiameseConfig(encoder=make_bert_config().to_dict(), head=head)


def test_unknown_interaction():
    with pytest.raises(ValueError, match=r"interaction='colbert' is not valid.*'none', 'virt'"):
        SiameseConfig(encoder=make_bert_config().to_dict(), interaction="colbert")


@pytest.mark.parametrize(("field", "value"), [("pooling", "avg"), ("head", "softmax")])
def test_from_backbone_validates_before_loading_anything(field, value):
    """The choice is checked first: a missing backbone would raise OSError, not this ValueError."""
    with pytest.raises(ValueError, match=rf"{field}='{value}' is not valid"):
        SiameseModel.from_backbone(MISSING, **{field: value})


@pytest.mark.parametrize("dropout", [-0.1, 1.0, 2])
def test_classifier_dropout_out_of_range(dropout):
    with pytest.raises(ValueError, match=rf"classifier_dropout={dropout!r}.*\[0, 1\)"):
        SiameseConfig(encoder=make_bert_config().to_dict(), classifier_dropout=dropout)
    with pytest.raises(ValueError, match=rf"classifier_dropout={dropout!r}.*\[0, 1\)"):
        CrossEncoderConfig(encoder=make_bert_config().to_dict(), classifier_dropout=dropout)
    with pytest.raises(ValueError, match=r"classifier_dropout="):
        CrossEncoderModel.from_backbone(MISSING, classifier_dropout=dropout)


# ---------------------------------------------------------------------------- from_teacher
@pytest.mark.parametrize("strategy", ["last", "skip", "Uniform"])
def test_unknown_strategy(tiny_teacher, strategy):
    with pytest.raises(ValueError, match=rf"strategy='{strategy}' is not valid.*'first', 'uniform'.*list"):
        CrossEncoderModel.from_teacher(tiny_teacher, num_layers=2, strategy=strategy)


@pytest.mark.parametrize("num_layers", [7, 12, 0, -1])
@pytest.mark.parametrize("strategy", ["first", "uniform"])
def test_num_layers_out_of_range(tiny_teacher, num_layers, strategy):
    with pytest.raises(ValueError, match=rf"num_layers={num_layers} is not valid.*6 layers.*1\.\.6"):
        CrossEncoderModel.from_teacher(tiny_teacher, num_layers=num_layers, strategy=strategy)


def test_num_layers_not_an_int(tiny_teacher):
    with pytest.raises(ValueError, match=r"num_layers=2\.0 is not valid"):
        CrossEncoderModel.from_teacher(tiny_teacher, num_layers=2.0, strategy="first")


@pytest.mark.parametrize(
    ("num_layers", "indices"),
    [(2, [0, 6]), (2, [-1, 3]), (2, [1, 1]), (3, [0, 2]), (1, [0, 2])],
)
def test_bad_explicit_layer_list(tiny_teacher, num_layers, indices):
    with pytest.raises(ValueError, match=rf"strategy=.*not valid for num_layers={num_layers}.*0\.\.5"):
        CrossEncoderModel.from_teacher(tiny_teacher, num_layers=num_layers, strategy=indices)


def test_failed_from_teacher_leaves_teacher_untouched(tiny_teacher):
    with pytest.raises(ValueError):
        CrossEncoderModel.from_teacher(tiny_teacher, num_layers=9, strategy="uniform")
    assert tiny_teacher.config.encoder.num_hidden_layers == 6
    assert len(tiny_teacher.backbone.encoder.layer) == 6


# ---------------------------------------------------------------------------- attentions need eager
def test_siamese_output_attentions_on_sdpa(tiny_tokenizer, siamese_batch):
    model = make_siamese(tiny_tokenizer, attn_implementation="sdpa")
    assert model.backbone.config._attn_implementation == "sdpa"
    with pytest.raises(ValueError, match=NEEDS_EAGER):
        model(**siamese_batch, output_attentions=True)
    with pytest.raises(ValueError, match=r'attn_implementation="eager"'):
        model.encode_side(siamese_batch["input_ids_a"], siamese_batch["attention_mask_a"], output_attentions=True)
    # Everything else works on sdpa, and matches eager attention.
    out = model(**siamese_batch, output_hidden_states=True, output_query_key=True)
    assert out.side_a.attentions is None and len(out.side_a.hidden_states) == 3
    eager = make_siamese(tiny_tokenizer, attn_implementation="eager")
    torch.testing.assert_close(out.logits, eager(**siamese_batch).logits, atol=1e-5, rtol=1e-5)


def test_cross_encoder_output_attentions_on_sdpa(tiny_tokenizer, cross_batch):
    model = make_cross_encoder(tiny_tokenizer, attn_implementation="sdpa")
    with pytest.raises(ValueError, match=NEEDS_EAGER):
        model(**cross_batch, output_attentions=True)
    assert model(**cross_batch, output_attentions=False).attentions is None


def test_output_attentions_on_sdpa_after_loading(tmp_path, tiny_tokenizer, cross_batch):
    """A model saved with eager attention but loaded with the sdpa default refuses as well."""
    make_cross_encoder(tiny_tokenizer).save_pretrained(tmp_path)
    loaded = CrossEncoderModel.from_pretrained(tmp_path, attn_implementation="sdpa")
    with pytest.raises(ValueError, match=r'attn_implementation="eager"'):
        loaded(**cross_batch, output_attentions=True)
    eager = CrossEncoderModel.from_pretrained(tmp_path, attn_implementation="eager")
    assert len(eager(**cross_batch, output_attentions=True).attentions) == 2


def test_encode_without_tokenizer(tiny_bert_config):
    model = SiameseModel(SiameseConfig(encoder=tiny_bert_config.to_dict()))
    with pytest.raises(ValueError, match=r"tokenizer=None"):
        model.encode(["a man"])
