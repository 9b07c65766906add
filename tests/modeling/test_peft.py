"""PEFT: LoRA on either student trains, merges into a plain student, and saves/loads like one."""

from __future__ import annotations

import math

import pytest
import torch
from peft import LoraConfig, get_peft_model  # a dependency of hf_distill: missing, these tests fail, not skip

from hf_distill import CrossEncoderModel, SiameseModel

from ..conftest import make_cross_encoder, make_siamese, seed_everything


def _student(kind, tokenizer, siamese_batch, cross_batch):
    if kind == "siamese":
        return make_siamese(tokenizer, seed=11), siamese_batch, torch.tensor([0, 2, 1])
    return make_cross_encoder(tokenizer, seed=11), cross_batch, torch.tensor([1, 0, 1])


def _lora_state(model) -> dict[str, torch.Tensor]:
    return {name: p.detach().clone() for name, p in model.named_parameters() if "lora_" in name}


@pytest.mark.parametrize("kind", ["siamese", "cross_encoder"])
def test_lora_train_merge_save_reload(kind, tmp_path, tiny_tokenizer, siamese_batch, cross_batch):
    model, batch, labels = _student(kind, tiny_tokenizer, siamese_batch, cross_batch)
    with torch.no_grad():
        base_logits = model(**batch).logits.clone()
    frozen_before = {name: p.detach().clone() for name, p in model.named_parameters()}

    seed_everything(0)
    lora = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=["query", "value"]))
    trainable = [name for name, p in lora.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in name for name in trainable)
    # 2 layers x (query, value) x (A, B)
    assert len(trainable) == 2 * 2 * 2
    lora.eval()
    with torch.no_grad():  # LoRA starts as the identity (B = 0)
        torch.testing.assert_close(lora(**batch).logits, base_logits, atol=1e-6, rtol=0)

    # One optimizer step on the task loss.
    lora.train()
    optimizer = torch.optim.AdamW([p for p in lora.parameters() if p.requires_grad], lr=1e-2)
    lora_before = _lora_state(lora)
    loss_before = lora(**batch, labels=labels).loss
    loss_before.backward()
    optimizer.step()
    optimizer.zero_grad()
    lora_after = _lora_state(lora)
    assert any(not torch.equal(lora_before[n], lora_after[n]) for n in lora_before), "LoRA weights did not change"
    with torch.no_grad():
        loss_after = lora(**batch, labels=labels).loss
    assert loss_after < loss_before
    # The base weights stayed frozen.
    for name, p in lora.get_base_model().named_parameters():
        if "lora_" not in name:
            assert torch.equal(p, frozen_before[name.replace(".base_layer", "")]), name

    lora.eval()
    with torch.no_grad():
        adapted = lora(**batch).logits.clone()
    assert not torch.allclose(adapted, base_logits, atol=1e-6)

    merged = lora.merge_and_unload()
    assert type(merged) is (SiameseModel if kind == "siamese" else CrossEncoderModel)
    assert not any("lora_" in name for name, _ in merged.named_parameters())
    with torch.no_grad():
        torch.testing.assert_close(merged(**batch).logits, adapted, atol=1e-5, rtol=1e-5)

    merged.save_pretrained(tmp_path)
    again = type(merged).from_pretrained(tmp_path).eval()
    assert again.tokenizer is not None
    assert not any("lora_" in name or "base_layer" in name for name in again.state_dict())
    with torch.no_grad():
        torch.testing.assert_close(again(**batch).logits, merged(**batch).logits, atol=1e-6, rtol=0)


def test_lora_siamese_query_keys_and_encode_still_work(tiny_tokenizer, siamese_batch):
    """Hooks find the LoRA-wrapped query/key projections; encode() goes through the adapter."""
    model = make_siamese(tiny_tokenizer, seed=12)
    lora = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=["query", "value"]))
    with torch.no_grad():  # a non-trivial adapter, so that adapted and base queries differ
        for name, parameter in lora.named_parameters():
            if "lora_B" in name:
                parameter.normal_(std=0.5)
    lora.eval()
    out = lora(**siamese_batch, output_query_key=True, output_attentions=True)
    assert len(out.side_a.query_states) == 2 and len(out.side_a.key_states) == 2
    mask = siamese_batch["attention_mask_a"]
    for attention, queries, keys in zip(out.side_a.attentions, out.side_a.query_states, out.side_a.key_states):
        scores = queries @ keys.transpose(-1, -2) / math.sqrt(queries.size(-1))
        scores = scores + (1.0 - mask[:, None, None, :].float()) * torch.finfo(scores.dtype).min
        torch.testing.assert_close(attention, torch.softmax(scores, dim=-1), atol=1e-5, rtol=1e-5)
    embeddings = lora.get_base_model().encode(["a man plays the guitar ."])
    assert embeddings.shape == (1, 32)
