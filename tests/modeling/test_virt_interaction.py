"""SiameseModel(interaction="virt"): the VIRT-adapted interaction layer, its independence and save/load."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import textwrap

import pytest
import torch
from transformers import AutoModel

from hf_distill import SiameseModel
from hf_distill.modeling.virt_interaction import VirtInteraction, virtual_attention

from ..conftest import PAIRS, make_siamese, seed_everything

ATOL = 1e-6


def batch_of(tokenizer, pairs):
    first, second = zip(*pairs)
    a = tokenizer(list(first), padding=True, return_tensors="pt")
    b = tokenizer(list(second), padding=True, return_tensors="pt")
    return {f"{k}_a": v for k, v in a.items()} | {f"{k}_b": v for k, v in b.items()}


@pytest.fixture
def virt_model(tiny_tokenizer):
    return make_siamese(tiny_tokenizer, num_labels=3, interaction="virt", seed=3)


def test_classifier_reads_u_v_absdiff_max_of_doubled_vectors(tiny_tokenizer):
    hidden = 32
    assert make_siamese(tiny_tokenizer, interaction="virt").classifier.in_features == 4 * 2 * hidden
    assert make_siamese(tiny_tokenizer, interaction="virt", use_product=True).classifier.in_features == 5 * 2 * hidden
    assert make_siamese(tiny_tokenizer).classifier.in_features == 3 * hidden
    plain, virt = make_siamese(tiny_tokenizer).state_dict(), make_siamese(tiny_tokenizer, interaction="virt").state_dict()
    assert plain.keys() == virt.keys()  # the interaction adds no parameters
    assert not list(VirtInteraction().parameters())


def test_logits_match_a_hand_computation(virt_model, tiny_tokenizer):
    batch = batch_of(tiny_tokenizer, PAIRS)
    with torch.no_grad():
        out = virt_model(**batch)
        sides = {}
        for s in "ab":
            enc = virt_model.encode_side(batch[f"input_ids_{s}"], batch[f"attention_mask_{s}"], batch[f"token_type_ids_{s}"],
                                         output_query_key=True)
            sides[s] = (enc.last_hidden_state, enc.query_states[-1], enc.key_states[-1], batch[f"attention_mask_{s}"])
    heads = 2
    expected = []
    for b in range(len(PAIRS)):
        pooled = {}
        for x, y in (("a", "b"), ("b", "a")):
            hx, qx, _, mx = (t[b] for t in sides[x])
            hy, _, ky, my = (t[b] for t in sides[y])
            nx, ny = int(mx.sum()), int(my.sum())
            attention = sum(torch.softmax(qx[h, :nx] @ ky[h, :ny].T / math.sqrt(qx.size(-1)), dim=-1) for h in range(heads)) / heads
            attended = attention @ hy[:ny]  # X~ = mean_h M_XY H_Y over real Y tokens
            pooled[x] = torch.cat([hx[:nx], attended], dim=-1).mean(0)  # mean pooling of [H_X ; X~]
        u, v = pooled["a"], pooled["b"]
        expected.append(virt_model.classifier(torch.cat([u, v, (u - v).abs(), torch.maximum(u, v)])))
    torch.testing.assert_close(out.logits, torch.stack(expected), atol=1e-5, rtol=1e-5)


def test_interaction_reads_the_other_sides_last_layer_keys(virt_model, tiny_tokenizer):
    """The score of (X, Y) depends on Y's last-layer keys through M_XY (a plain Siamese head never sees them)."""
    batch = batch_of(tiny_tokenizer, PAIRS)
    with torch.no_grad():
        a = virt_model.encode_side(batch["input_ids_a"], batch["attention_mask_a"], output_query_key=True)
        b = virt_model.encode_side(batch["input_ids_b"], batch["attention_mask_b"], output_query_key=True)
    keys = b.key_states[-1].clone().requires_grad_(True)
    b.key_states = (*b.key_states[:-1], keys)
    virt_model.score(*virt_model.interact(a, b, batch["attention_mask_a"], batch["attention_mask_b"])).sum().backward()
    real = batch["attention_mask_b"].bool()
    assert keys.grad.abs().sum(dim=(1, 3))[real].min() > 0  # every real Y token's key matters
    assert keys.grad.abs().sum(dim=(1, 3))[~real].max() == 0  # padding does not


def test_embeddings_stay_independent_and_logits_interact(virt_model, tiny_tokenizer):
    batch = batch_of(tiny_tokenizer, PAIRS)
    swapped = batch_of(tiny_tokenizer, [(a, PAIRS[(i + 1) % len(PAIRS)][1]) for i, (a, _) in enumerate(PAIRS)])
    with torch.no_grad():
        out, other = virt_model(**batch), virt_model(**swapped)
    torch.testing.assert_close(out.embeddings_a, other.embeddings_a, atol=ATOL, rtol=0)  # u ignores the other side
    torch.testing.assert_close(out.embeddings_a, virt_model.encode([a for a, _ in PAIRS]), atol=1e-5, rtol=0)
    # ... but the interaction-aware logits of the same X change with its partner.
    assert not torch.allclose(out.logits, other.logits, atol=1e-4)


def test_padding_does_not_change_scores(virt_model, tiny_tokenizer):
    with torch.no_grad():
        together = virt_model(**batch_of(tiny_tokenizer, PAIRS)).logits
        alone = torch.cat([virt_model(**batch_of(tiny_tokenizer, [pair])).logits for pair in PAIRS])
    torch.testing.assert_close(together, alone, atol=1e-5, rtol=1e-5)


def test_interact_on_stored_encodings_and_its_error(virt_model, tiny_tokenizer):
    batch = batch_of(tiny_tokenizer, PAIRS)
    with torch.no_grad():
        a = virt_model.encode_side(batch["input_ids_a"], batch["attention_mask_a"], output_query_key=True)
        b = virt_model.encode_side(batch["input_ids_b"], batch["attention_mask_b"], output_query_key=True)
        logits = virt_model.score(*virt_model.interact(a, b, batch["attention_mask_a"], batch["attention_mask_b"]))
        expected = virt_model(input_ids_a=batch["input_ids_a"], attention_mask_a=batch["attention_mask_a"],
                              input_ids_b=batch["input_ids_b"], attention_mask_b=batch["attention_mask_b"]).logits
    torch.testing.assert_close(logits, expected, atol=ATOL, rtol=0)
    bare = virt_model.encode_side(batch["input_ids_a"], batch["attention_mask_a"])
    with pytest.raises(ValueError, match=r"side_a has query_states=None.*output_query_key=True"):
        virt_model.interact(bare, b, batch["attention_mask_a"], batch["attention_mask_b"])


def test_virtual_attention_masks_keys():
    q, k = torch.randn(1, 2, 3, 4), torch.randn(1, 2, 5, 4)
    mask = torch.tensor([[1, 1, 0, 1, 0]])
    probs = virtual_attention(q, k, mask)
    assert torch.all(probs[..., [2, 4]] == 0)
    torch.testing.assert_close(probs.sum(-1), torch.ones(1, 2, 3))
    kept = torch.softmax(q @ k[:, :, [0, 1, 3]].transpose(-1, -2) / 2.0, dim=-1)
    torch.testing.assert_close(probs[..., [0, 1, 3]], kept)


# ---------------------------------------------------------------------------- save / load
@pytest.mark.parametrize("options", [{}, {"use_product": True, "pooling": "max"}, {"head": "cosine", "num_labels": 1}])
def test_save_load_roundtrip(tmp_path, tiny_tokenizer, options):
    options = {"num_labels": 3, **options}
    model = make_siamese(tiny_tokenizer, interaction="virt", seed=4, **options)
    batch = batch_of(tiny_tokenizer, PAIRS)
    model.save_pretrained(tmp_path)
    assert (tmp_path / "virt_interaction.py").exists()  # travels with the model for trust_remote_code
    with torch.no_grad():
        expected = model(**batch)
        for again in (SiameseModel.from_pretrained(tmp_path).eval(), AutoModel.from_pretrained(tmp_path).eval()):
            assert type(again) is SiameseModel and again.config.interaction == "virt"
            got = again(**batch)
            for name in ("logits", "embeddings_a", "embeddings_b"):
                torch.testing.assert_close(got[name], expected[name], atol=ATOL, rtol=0, msg=name)
    seed_everything(99)
    other = SiameseModel(model.config).eval()  # guard against a vacuous comparison
    with torch.no_grad():
        assert not torch.allclose(other(**batch).logits, expected.logits, atol=1e-3)


_REMOTE = textwrap.dedent(
    """
    import importlib.abc, sys

    class _NoHfDistill(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "hf_distill" or name.startswith("hf_distill."):
                raise ImportError("hf_distill is not installed here")

    sys.meta_path.insert(0, _NoHfDistill())
    import torch
    from transformers import AutoModel

    case = torch.load(sys.argv[1])
    model = AutoModel.from_pretrained(case["folder"], trust_remote_code=True).eval()
    assert type(model).__module__.startswith("transformers_modules"), type(model).__module__
    assert model.config.interaction == "virt"
    with torch.no_grad():
        logits = model(**case["inputs"]).logits
    torch.testing.assert_close(logits, case["logits"], atol=1e-6, rtol=0)
    print("REMOTE-VIRT-OK")
    """
)


def test_trust_remote_code_without_hf_distill(tmp_path, tiny_tokenizer):
    model = make_siamese(tiny_tokenizer, interaction="virt", seed=5)
    batch = batch_of(tiny_tokenizer, PAIRS)
    folder = tmp_path / "virt-model"
    model.save_pretrained(folder)
    with torch.no_grad():
        logits = model(**batch).logits
    torch.save({"folder": str(folder), "inputs": batch, "logits": logits}, tmp_path / "case.pt")
    work_dir = tmp_path / "elsewhere"  # the repository is not on sys.path from here
    work_dir.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "hf_home"), HF_MODULES_CACHE=str(tmp_path / "hf_modules"))
    result = subprocess.run(
        [sys.executable, "-c", _REMOTE, str(tmp_path / "case.pt")], cwd=work_dir, env=env, stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0 and "REMOTE-VIRT-OK" in result.stdout, result.stdout + result.stderr
