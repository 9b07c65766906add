"""Augmentation (TinyBERT-style word replacement), its candidate sources, and transfer sets."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from datasets import ClassLabel, Dataset, Features, Value, load_dataset
from transformers import BertConfig, BertForMaskedLM

from hf_distill.augmentation import augment_pairs, replace_words
from hf_distill.transfer import add_transfer_pairs, load_pairs
from hf_distill.word_candidates import EmbeddingNeighbours, MaskedLMCandidates, match_case, whole_word_pool, word_spans
from tests.conftest import TINY_VOCAB, make_cross_encoder

COLUMNS = ["sentence1", "sentence2"]
# near-duplicate directions in the crafted embedding matrix: each word's nearest neighbour is its partner
PARTNERS = {"man": "woman", "plays": "sings", "guitar": "piano", "dog": "cat", "runs": "kicks", "park": "street",
            "someone": "person", "sunny": "happy", "day": "night"}


def crafted_embeddings(dim: int = 64) -> torch.Tensor:
    """Random rows, except that each PARTNERS pair shares a direction (cosine ~ 0.9999)."""
    generator = torch.Generator().manual_seed(0)
    matrix = torch.randn(len(TINY_VOCAB), dim, generator=generator)
    for word, partner in PARTNERS.items():
        matrix[TINY_VOCAB.index(partner)] = matrix[TINY_VOCAB.index(word)] + 0.01 * torch.randn(dim, generator=generator)
    return matrix


def gold_set(n: int = 4) -> Dataset:
    features = Features({"sentence1": Value("string"), "sentence2": Value("string"), "label": ClassLabel(names=["no", "yes"])})
    texts = [("A man plays the GUITAR.", "the dog runs in the park"), ("someone sings", "it is a sunny day")]
    return Dataset.from_list([{"sentence1": a, "sentence2": b, "label": i % 2} for i, (a, b) in enumerate(texts * (n // 2))],
                             features=features)


def test_word_spans_skip_stop_words_short_and_non_alphabetic_words():
    text = "The man's 3d dog, a cat-like X!"
    assert [text[s:e] for s, e in word_spans(text)] == ["man", "dog", "cat", "like"]
    assert (match_case("Man", "woman"), match_case("MAN", "woman"), match_case("man", "Paris")) == ("Woman", "WOMAN", "Paris")


def test_pool_is_whole_alphabetic_words_that_are_not_stop_words(tiny_tokenizer):
    ids, surfaces = whole_word_pool(tiny_tokenizer)
    assert "man" in surfaces and "guitar" in surfaces
    assert not {"the", "a", "[MASK]", "##a", ".", "b"} & set(surfaces)  # stop words, specials, pieces, punctuation, letters
    assert [TINY_VOCAB[i] for i in ids] == surfaces


def test_embedding_neighbours_are_the_nearest_pool_tokens_by_cosine(tiny_tokenizer):
    source = EmbeddingNeighbours(crafted_embeddings(), tiny_tokenizer, k=3)
    (spans,) = source.candidates(["A man plays the GUITAR xyz."])
    assert [span for span, _ in spans] == [(2, 5), (6, 11), (16, 22)]  # "xyz" is several pieces: left as it is
    assert [found[0] for _, found in spans] == ["woman", "sings", "piano"]
    # k nearest by cosine, checked by brute force
    matrix = torch.nn.functional.normalize(crafted_embeddings(), dim=-1)
    pool = [TINY_VOCAB.index(w) for w in source.surfaces]
    sims = matrix[pool] @ matrix[TINY_VOCAB.index("man")]
    expected = [source.surfaces[j] for j in sims.argsort(descending=True).tolist() if source.surfaces[j] != "man"][:3]
    assert spans[0][1] == expected
    assert EmbeddingNeighbours(crafted_embeddings(), tiny_tokenizer, k=3).table is source.table  # once per vocabulary


def test_replace_words_with_p_one_takes_the_only_candidate_and_keeps_the_rest():
    text = "A man plays the GUITAR."
    spans = [((2, 5), ["woman"]), ((6, 11), ["sings"]), ((16, 22), ["piano"])]
    assert replace_words(text, spans, 1.0, np.random.default_rng(0)) == "A woman sings the PIANO."
    assert replace_words(text, spans, 0.0, np.random.default_rng(0)) == text


def test_augment_pairs_hand_checked_with_p_one_and_k_one(tiny_tokenizer):
    data = gold_set(2)
    out = augment_pairs(data, COLUMNS, tiny_tokenizer, embeddings=crafted_embeddings(), n=5, p=1.0, k=1, seed=0)
    # TinyBERT: draw i changes text i mod 2, the other stays; every draw of a text is the same replacement,
    # so each pair yields two new pairs (one per text; duplicates dropped)
    assert out.features["label"] == data.features["label"] and out.features["origin"] == Value("string")
    rows = out.to_list()
    assert rows[0] == {**data[0], "origin": "gold"}
    assert rows[1] == {"sentence1": "A woman sings the PIANO.", "sentence2": "the dog runs in the park", "label": None,
                       "origin": "augmented"}
    assert rows[2] == {"sentence1": "A man plays the GUITAR.", "sentence2": "the cat kicks in the street", "label": None,
                       "origin": "augmented"}
    assert rows[3] == {**data[1], "origin": "gold"}
    assert rows[4] == {"sentence1": "person plays", "sentence2": "it is a sunny day", "label": None, "origin": "augmented"}
    assert rows[5] == {"sentence1": "someone sings", "sentence2": "it is a happy night", "label": None, "origin": "augmented"}
    assert len(rows) == 6
    assert len(augment_pairs(data, COLUMNS, tiny_tokenizer, embeddings=crafted_embeddings(), p=0.0)) == 2  # p = 0: nothing new
    # change "all": both texts in every draw, one new pair per pair
    both = augment_pairs(data, COLUMNS, tiny_tokenizer, embeddings=crafted_embeddings(), n=5, p=1.0, k=1, change="all").to_list()
    assert both[1] == {"sentence1": "A woman sings the PIANO.", "sentence2": "the cat kicks in the street", "label": None,
                       "origin": "augmented"}
    assert both[3] == {"sentence1": "person plays", "sentence2": "it is a happy night", "label": None, "origin": "augmented"}
    assert len(both) == 4


def test_augment_pairs_is_deterministic_per_seed_and_fingerprinted_on_every_setting(tiny_tokenizer):
    data, teacher = gold_set(4), make_cross_encoder(tiny_tokenizer, seed=3)
    settings = dict(n=8, p=0.5, k=4, seed=0)
    base = augment_pairs(data, COLUMNS, tiny_tokenizer, embeddings=teacher, **settings)
    again = augment_pairs(data, COLUMNS, tiny_tokenizer, embeddings=teacher, **settings)
    assert base.to_list() == again.to_list() and base._fingerprint == again._fingerprint
    origins = base["origin"]
    assert origins.count("gold") == 4 and 4 < len(base) <= 4 + 4 * 8
    assert all((label is None) == (origin == "augmented") for label, origin in zip(base["label"], origins))
    changes = [{"seed": 1}, {"p": 0.6}, {"k": 5}, {"n": 9}, {"change": "all"}]
    for change in changes:
        other = augment_pairs(data, COLUMNS, tiny_tokenizer, embeddings=teacher, **{**settings, **change})
        assert other._fingerprint != base._fingerprint, change
    assert augment_pairs(data, COLUMNS, tiny_tokenizer, embeddings=teacher, **{**settings, "seed": 1}).to_list() != base.to_list()
    other_teacher = make_cross_encoder(tiny_tokenizer, seed=4)
    assert augment_pairs(data, COLUMNS, tiny_tokenizer, embeddings=other_teacher, **settings)._fingerprint != base._fingerprint
    # batching does not change the draws: generators are seeded by (seed, row index)
    assert augment_pairs(data, COLUMNS, tiny_tokenizer, embeddings=teacher, batch_size=1, **settings).to_list() == base.to_list()


def test_augment_pairs_is_read_back_from_the_datasets_cache(tmp_path, tiny_tokenizer, monkeypatch):
    path = tmp_path / "train.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in gold_set(4).to_list()), encoding="utf-8")
    data = load_dataset("json", data_files=str(path), cache_dir=str(tmp_path / "cache"))["train"]
    first = augment_pairs(data, COLUMNS, tiny_tokenizer, embeddings=crafted_embeddings(), n=3, k=2)
    calls = []
    monkeypatch.setattr(EmbeddingNeighbours, "candidates", lambda self, texts: calls.append(texts))
    second = augment_pairs(data, COLUMNS, tiny_tokenizer, embeddings=crafted_embeddings(), n=3, k=2)
    assert calls == [] and second.to_list() == first.to_list()


def masked_lm(tokenizer) -> BertForMaskedLM:
    """A random tiny masked LM whose output bias makes "piano" (then "music") the most likely word anywhere."""
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(TINY_VOCAB), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=37, max_position_embeddings=64)
    model = BertForMaskedLM(config).eval()
    with torch.no_grad():
        bias = model.get_output_embeddings().bias
        bias[TINY_VOCAB.index("piano")] += 100.0
        bias[TINY_VOCAB.index("music")] += 50.0
        bias[TINY_VOCAB.index("the")] += 200.0  # a stop word: never a candidate
    return model


def test_masked_lm_candidates_hand_checked(tiny_tokenizer):
    model = masked_lm(tiny_tokenizer)
    source = MaskedLMCandidates(model, tiny_tokenizer, k=2, device="cpu")
    (spans,) = source.candidates(["a man plays the piano xyz"])
    assert [span for span, _ in spans] == [(2, 5), (6, 11), (16, 21), (22, 25)]  # "xyz" (several pieces) is masked as one
    assert [found for _, found in spans][:2] == [["piano", "music"], ["piano", "music"]]
    assert spans[2][1][0] == "music"  # the word itself is never its own candidate
    # the LM's own top-k at the masked place, restricted to the pool, by hand
    enc = tiny_tokenizer("a man [MASK] the piano xyz", return_tensors="pt")
    with torch.no_grad():
        scores = model(**enc).logits[0, enc["input_ids"][0].tolist().index(tiny_tokenizer.mask_token_id)]
    ids, _ = whole_word_pool(tiny_tokenizer)
    best = [TINY_VOCAB[i] for i in ids[scores[ids].argsort(descending=True).numpy()]][:2]
    assert spans[1][1] == best
    out = augment_pairs(gold_set(2).select([1]), COLUMNS, masked_lm=model, tokenizer=tiny_tokenizer, n=3, p=1.0, k=1)
    assert [(row["sentence1"], row["sentence2"]) for row in out.to_list()[1:]] == [
        ("piano piano", "it is a sunny day"), ("someone sings", "it is a piano piano")]


def test_augment_pairs_refuses_bad_arguments_with_one_clear_line(tiny_tokenizer):
    data = gold_set(2)
    emb = crafted_embeddings()
    cases = [
        (dict(embeddings=emb, p=1.5), r"p=1.5 is not valid"),
        (dict(embeddings=emb, n=0), r"n=0 is not valid"),
        (dict(embeddings=emb, change="both"), r"change='both' is not valid; give one of \['one', 'all'\]"),
        (dict(), r"give exactly one candidate source"),
        (dict(embeddings=emb, masked_lm="x"), r"give exactly one candidate source"),
        (dict(embeddings=torch.zeros(3, 4)), r"embeddings has 3 rows but the tokenizer has"),
        (dict(embeddings="teacher"), r"embeddings=str is not valid"),
    ]
    for kwargs, message in cases:
        with pytest.raises(ValueError, match=message):
            augment_pairs(data, COLUMNS, tiny_tokenizer, **kwargs)
    with pytest.raises(ValueError, match=r"text_columns=\['sentence1', 'nope'\] is not valid"):
        augment_pairs(data, ["sentence1", "nope"], tiny_tokenizer, embeddings=emb)
    labelled = data.add_column("teacher_logits_0", [[0.0, 1.0]] * 2)
    with pytest.raises(ValueError, match=r"teacher logit columns \['teacher_logits_0'\]: augment_pairs adds rows"):
        augment_pairs(labelled, COLUMNS, tiny_tokenizer, embeddings=emb)


def write_transfer_files(tmp_path) -> tuple[str, str]:
    jsonl = tmp_path / "extra.jsonl"
    jsonl.write_text("".join(json.dumps({"q": f"query {i}", "p": f"passage {i}", "score": 9}) + "\n" for i in range(3)))
    csv = tmp_path / "extra.csv"
    csv.write_text("p,q\npassage x,query x\n")
    return str(jsonl), str(csv)


def test_transfer_pairs_are_renamed_unlabelled_and_appended(tmp_path, tiny_tokenizer):
    jsonl, csv = write_transfer_files(tmp_path)
    assert load_pairs(csv, COLUMNS, ["q", "p"]).to_list() == [{"sentence1": "query x", "sentence2": "passage x"}]
    data = gold_set(2)
    mixed = add_transfer_pairs(data, [jsonl], COLUMNS, {"q": "sentence1", "p": "sentence2"})
    assert mixed.features == Features({**data.features, "origin": Value("string")})
    assert mixed.to_list() == [
        {**data[0], "origin": "gold"}, {**data[1], "origin": "gold"},
        *({"sentence1": f"query {i}", "sentence2": f"passage {i}", "label": None, "origin": "transfer"} for i in range(3)),
    ]
    # after augmentation: each row keeps its origin
    augmented = augment_pairs(data, COLUMNS, tiny_tokenizer, embeddings=crafted_embeddings(), n=2, p=1.0, k=1)
    mixed = add_transfer_pairs(augmented, csv, COLUMNS, ["q", "p"])
    assert mixed["origin"] == ["gold", "augmented", "augmented", "gold", "augmented", "augmented", "transfer"]
    assert mixed["label"] == [0, None, None, 1, None, None, None]


def test_transfer_pairs_refuse_bad_files_and_columns(tmp_path):
    jsonl, csv = write_transfer_files(tmp_path)
    data = gold_set(2)
    with pytest.raises(ValueError, match=r"files=.* is not valid; give files of one format"):
        add_transfer_pairs(data, [jsonl, csv], COLUMNS, ["q", "p"])
    with pytest.raises(ValueError, match=r"have no column \['question'\]; their columns: \['q', 'p', 'score'\]"):
        add_transfer_pairs(data, jsonl, COLUMNS, ["question", "p"])
    with pytest.raises(ValueError, match=r"source_columns=\['q'\] is not valid"):
        add_transfer_pairs(data, jsonl, COLUMNS, ["q"])
    with pytest.raises(ValueError, match=r"files=\['missing.jsonl'\] is not valid"):
        load_pairs("missing.jsonl", COLUMNS)

