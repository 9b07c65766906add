"""SiameseModel: shapes, pooling, heads, encode(), and per-layer internals."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from hf_distill import SiameseModel, SiameseOutput
from hf_distill.modeling import pool_tokens

from ..conftest import SENTENCES, make_siamese

HIDDEN = 32
HEADS = 2


def _side(batch: dict, side: str) -> dict:
    return {
        "input_ids": batch[f"input_ids_{side}"],
        "attention_mask": batch[f"attention_mask_{side}"],
        "token_type_ids": batch[f"token_type_ids_{side}"],
    }


# ---------------------------------------------------------------------------- outputs
def test_forward_shapes(tiny_siamese, siamese_batch):
    out = tiny_siamese(**siamese_batch)
    batch, length_a = siamese_batch["input_ids_a"].shape
    assert isinstance(out, SiameseOutput)
    assert out.loss is None
    assert out.logits.shape == (batch, 3)
    assert out.embeddings_a.shape == (batch, HIDDEN)
    assert out.embeddings_b.shape == (batch, HIDDEN)
    assert out.side_a.last_hidden_state.shape == (batch, length_a, HIDDEN)
    assert out.side_a.hidden_states is None and out.side_a.attentions is None and out.side_a.query_states is None


def test_one_side_only_gives_embeddings_without_logits(tiny_siamese, siamese_batch):
    out = tiny_siamese(input_ids_a=siamese_batch["input_ids_a"], attention_mask_a=siamese_batch["attention_mask_a"])
    assert out.logits is None and out.embeddings_b is None and out.side_b is None
    assert out.embeddings_a.shape == (3, HIDDEN)


def test_sides_are_encoded_independently_by_one_shared_backbone(tiny_siamese, siamese_batch):
    out = tiny_siamese(**siamese_batch)
    alone_b = tiny_siamese.encode_side(**_side(siamese_batch, "b"))
    torch.testing.assert_close(out.embeddings_b, alone_b.embeddings, atol=1e-6, rtol=0)
    # Swapping the sides swaps the embeddings.
    swapped = {k.replace("_a", "_x").replace("_b", "_a").replace("_x", "_b"): v for k, v in siamese_batch.items()}
    out_swapped = tiny_siamese(**swapped)
    torch.testing.assert_close(out_swapped.embeddings_a, out.embeddings_b, atol=1e-6, rtol=0)


# ---------------------------------------------------------------------------- pooling
def _padded_side(tokenizer):
    texts = ["someone sings", "children kick a red ball on the street at night"]
    enc = tokenizer(texts, padding=True, return_tensors="pt")
    assert (enc["attention_mask"] == 0).any(), "the batch must contain padding"
    return enc


@pytest.mark.parametrize("pooling", ["mean", "cls", "max"])
def test_pooling_matches_hand_computation_with_padding(tiny_tokenizer, pooling):
    model = make_siamese(tiny_tokenizer, pooling=pooling)
    enc = _padded_side(tiny_tokenizer)
    side = model.encode_side(enc["input_ids"], enc["attention_mask"], enc["token_type_ids"])
    states = side.last_hidden_state
    expected = []
    for row, mask in zip(states, enc["attention_mask"]):
        real = row[mask.bool()]
        expected.append({"mean": real.mean(0), "cls": row[0], "max": real.max(0).values}[pooling])
    torch.testing.assert_close(side.embeddings, torch.stack(expected), atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("pooling", ["mean", "max"])
def test_pooling_ignores_padding(tiny_tokenizer, pooling):
    """A sentence pooled alone equals the same sentence pooled inside a padded batch."""
    model = make_siamese(tiny_tokenizer, pooling=pooling)
    enc = _padded_side(tiny_tokenizer)
    batched = model.encode_side(enc["input_ids"], enc["attention_mask"], enc["token_type_ids"]).embeddings
    alone = tiny_tokenizer(["someone sings"], return_tensors="pt")
    single = model.encode_side(alone["input_ids"], alone["attention_mask"], alone["token_type_ids"]).embeddings
    torch.testing.assert_close(batched[0], single[0], atol=1e-5, rtol=1e-5)
    # ...whereas pooling over every position, padding included, gives something else.
    states = model.encode_side(enc["input_ids"], enc["attention_mask"], enc["token_type_ids"]).last_hidden_state
    naive = states[0].mean(0) if pooling == "mean" else states[0].max(0).values
    assert not torch.allclose(naive, single[0], atol=1e-4)


def test_pool_tokens_on_hand_made_tensors():
    states = torch.tensor([[[1.0, -2.0], [3.0, 4.0], [100.0, 100.0]], [[0.0, 1.0], [-1.0, -5.0], [2.0, 7.0]]])
    mask = torch.tensor([[1, 1, 0], [1, 1, 1]])
    torch.testing.assert_close(pool_tokens(states, mask, "mean"), torch.tensor([[2.0, 1.0], [1 / 3, 1.0]]))
    torch.testing.assert_close(pool_tokens(states, mask, "max"), torch.tensor([[3.0, 4.0], [2.0, 7.0]]))
    torch.testing.assert_close(pool_tokens(states, mask, "cls"), torch.tensor([[1.0, -2.0], [0.0, 1.0]]))


# ---------------------------------------------------------------------------- heads
@pytest.mark.parametrize("use_product", [False, True])
def test_classification_head_over_u_v_abs_diff(tiny_tokenizer, siamese_batch, use_product):
    model = make_siamese(tiny_tokenizer, head="classification", num_labels=3, use_product=use_product)
    assert model.classifier.in_features == (4 if use_product else 3) * HIDDEN
    labels = torch.tensor([0, 2, 1])
    out = model(**siamese_batch, labels=labels)
    u, v = out.embeddings_a, out.embeddings_b
    features = [u, v, (u - v).abs()] + ([u * v] if use_product else [])
    expected = torch.cat(features, dim=-1) @ model.classifier.weight.T + model.classifier.bias
    torch.testing.assert_close(out.logits, expected, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(out.loss, F.cross_entropy(expected, labels), atol=1e-6, rtol=1e-6)


def test_classification_head_is_not_symmetric_in_u_v_order(tiny_siamese):
    """(u, v, |u-v|) keeps the side order: the feature layout is not a symmetric function."""
    u = torch.randn(2, HIDDEN)
    v = torch.randn(2, HIDDEN)
    assert not torch.allclose(tiny_siamese.score(u, v), tiny_siamese.score(v, u))


def test_cosine_head_is_regression_with_mse(tiny_tokenizer, siamese_batch):
    model = make_siamese(tiny_tokenizer, head="cosine", num_labels=1)
    assert model.config.problem_type == "regression"
    assert not hasattr(model, "classifier")
    labels = torch.tensor([0.9, 0.1, 0.5])
    out = model(**siamese_batch, labels=labels)
    expected = F.cosine_similarity(out.embeddings_a, out.embeddings_b, dim=-1)
    assert out.logits.shape == (3, 1)
    torch.testing.assert_close(out.logits.squeeze(-1), expected, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(out.loss, F.mse_loss(expected, labels), atol=1e-6, rtol=1e-6)


def test_cosine_head_from_backbone_forces_one_label(tiny_siamese):
    model = SiameseModel.from_backbone(
        tiny_siamese.backbone, tokenizer=tiny_siamese.tokenizer, head="cosine", num_labels=3
    )
    assert model.config.num_labels == 1 and model.config.problem_type == "regression"


def test_none_head_gives_embeddings_only(tiny_tokenizer, siamese_batch):
    model = make_siamese(tiny_tokenizer, head="none")
    assert not hasattr(model, "classifier")
    out = model(**siamese_batch, labels=torch.tensor([0, 1, 0]))
    assert out.logits is None and out.loss is None
    assert out.embeddings_a.shape == (3, HIDDEN) and out.embeddings_b.shape == (3, HIDDEN)


def test_loss_backpropagates_to_backbone_and_head(tiny_siamese, siamese_batch):
    tiny_siamese.train()
    out = tiny_siamese(**siamese_batch, labels=torch.tensor([0, 1, 2]))
    out.loss.backward()
    assert tiny_siamese.classifier.weight.grad.abs().sum() > 0
    assert tiny_siamese.backbone.get_input_embeddings().weight.grad.abs().sum() > 0


# ---------------------------------------------------------------------------- encode
def _embed_one_by_one(model, texts):
    rows = []
    for text in texts:
        enc = model.tokenizer([text], return_tensors="pt")
        with torch.no_grad():
            rows.append(model.encode_side(enc["input_ids"], enc["attention_mask"], enc["token_type_ids"]).embeddings[0])
    return torch.stack(rows)


@pytest.mark.parametrize("batch_size", [1, 3, 100])
def test_encode_returns_embeddings_in_input_order(tiny_siamese, batch_size):
    texts = list(SENTENCES)
    embeddings = tiny_siamese.encode(texts, batch_size=batch_size)
    assert embeddings.shape == (len(texts), HIDDEN)
    torch.testing.assert_close(embeddings, _embed_one_by_one(tiny_siamese, texts), atol=1e-5, rtol=1e-5)


def test_encode_normalize(tiny_siamese):
    raw = tiny_siamese.encode(SENTENCES, batch_size=4)
    unit = tiny_siamese.encode(SENTENCES, batch_size=4, normalize=True)
    torch.testing.assert_close(unit.norm(dim=-1), torch.ones(len(SENTENCES)), atol=1e-5, rtol=0)
    torch.testing.assert_close(unit, raw / raw.norm(dim=-1, keepdim=True), atol=1e-6, rtol=1e-5)
    assert not torch.allclose(raw.norm(dim=-1), torch.ones(len(SENTENCES)), atol=1e-3)


def test_encode_single_string_empty_list_numpy_and_progress_bar(tiny_siamese):
    single = tiny_siamese.encode(SENTENCES[2])
    assert single.shape == (HIDDEN,)
    torch.testing.assert_close(single, tiny_siamese.encode(SENTENCES)[2], atol=1e-5, rtol=1e-5)
    assert tiny_siamese.encode([]).shape == (0, HIDDEN)
    array = tiny_siamese.encode(SENTENCES[:2], convert_to_numpy=True, show_progress_bar=True)
    assert array.shape == (2, HIDDEN) and array.dtype.name == "float32"


def test_encode_restores_training_mode_and_ignores_dropout(tiny_tokenizer, siamese_batch):
    model = make_siamese(tiny_tokenizer)
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.5
    model.train()
    with torch.no_grad():  # dropout is live in training mode...
        assert not torch.allclose(model(**siamese_batch).embeddings_a, model(**siamese_batch).embeddings_a)
    first = model.encode(SENTENCES)  # ...but encode() runs in eval mode and then restores training mode
    assert model.training
    torch.testing.assert_close(model.encode(SENTENCES), first)


def test_encode_rejects_bad_batch_size_and_missing_tokenizer(tiny_siamese):
    with pytest.raises(ValueError, match="batch_size=0"):
        tiny_siamese.encode(SENTENCES, batch_size=0)
    tiny_siamese.tokenizer = None
    with pytest.raises(ValueError, match="tokenizer"):
        tiny_siamese.encode(SENTENCES)


# ---------------------------------------------------------------------------- internals
def _expected_attention(queries, keys, attention_mask):
    scores = queries @ keys.transpose(-1, -2) / math.sqrt(queries.size(-1))
    additive = (1.0 - attention_mask[:, None, None, :].to(scores.dtype)) * torch.finfo(scores.dtype).min
    return torch.softmax(scores + additive, dim=-1)


def test_hidden_states_attentions_queries_keys_per_layer(tiny_siamese, siamese_batch):
    out = tiny_siamese(**siamese_batch, output_hidden_states=True, output_attentions=True, output_query_key=True)
    layers = tiny_siamese.config.encoder.num_hidden_layers
    for side_name in ("a", "b"):
        side = getattr(out, f"side_{side_name}")
        mask = siamese_batch[f"attention_mask_{side_name}"]
        batch, length = mask.shape
        assert len(side.hidden_states) == layers + 1
        assert all(h.shape == (batch, length, HIDDEN) for h in side.hidden_states)
        torch.testing.assert_close(side.hidden_states[-1], side.last_hidden_state)
        assert len(side.attentions) == layers and len(side.query_states) == layers and len(side.key_states) == layers
        for attention, queries, keys in zip(side.attentions, side.query_states, side.key_states):
            assert attention.shape == (batch, HEADS, length, length)
            assert queries.shape == keys.shape == (batch, HEADS, length, HIDDEN // HEADS)
            torch.testing.assert_close(attention.sum(-1), torch.ones(batch, HEADS, length), atol=1e-5, rtol=0)
            assert attention.masked_select(mask[:, None, None, :] == 0).abs().max() < 1e-6
            torch.testing.assert_close(attention, _expected_attention(queries, keys, mask), atol=1e-5, rtol=1e-5)
    # Layers differ from one another: the captured queries are not one tensor repeated.
    assert not torch.allclose(out.side_a.query_states[0], out.side_a.query_states[1])


def test_queries_keys_carry_gradients_and_hooks_are_removed(tiny_siamese, siamese_batch):
    out = tiny_siamese(**siamese_batch, output_query_key=True)
    out.side_a.query_states[0].sum().backward()
    assert tiny_siamese.backbone.get_input_embeddings().weight.grad is not None
    again = tiny_siamese(**siamese_batch)
    assert again.side_a.query_states is None
    assert all(not m._forward_hooks for m in tiny_siamese.backbone.modules())
