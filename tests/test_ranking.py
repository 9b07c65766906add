"""hf_distill.ranking: both ranking layouts, pointwise pairs, re-ranking evaluation (hand example + real data)."""

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import BertConfig, BertTokenizer

from hf_distill import CrossEncoderConfig, CrossEncoderModel, SiameseConfig, SiameseModel
from hf_distill.ranking import Candidate, RankingData, RankingEvaluator, load_qa_pairs, load_trec_run

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


# ---------------------------------------------------------------------------- labelled pairs (WikiQA / TrecQA)
WIKIQA_ROWS = [
    {"qid": "Q1", "question": "who?", "sid": "D1-0", "answer": "no one", "label": 0},
    {"qid": "Q1", "question": "who?", "sid": "D1-1", "answer": "him", "label": 1},
    {"qid": "Q1", "question": "who?", "sid": "D1-2", "answer": "nothing", "label": 0},
    {"qid": "Q2", "question": "why?", "sid": "D2-0", "answer": "dunno", "label": 0},
    {"qid": "Q2", "question": "why?", "sid": "D2-1", "answer": "maybe", "label": 0},
    {"qid": "Q3", "question": "when?", "sid": "D3-0", "answer": "now", "label": 1},
    {"qid": "Q3", "question": "when?", "sid": "D3-1", "answer": "today", "label": 1},
]


def test_load_qa_pairs_only_answerable(tmp_path):
    path = write_jsonl(tmp_path / "wikiqa" / "test.jsonl", WIKIQA_ROWS)
    data = load_qa_pairs(path)
    assert data.name == "wikiqa-test"
    assert list(data.queries) == ["Q1", "Q3"]  # Q2 has no correct answer
    assert data.queries["Q1"] == "who?"
    assert [c.doc_id for c in data.candidates["Q1"]] == ["D1-0", "D1-1", "D1-2"]  # sid is the doc id
    assert [c.rank for c in data.candidates["Q1"]] == [1, 2, 3]
    assert data.candidates["Q1"][1] == Candidate("D1-1", "him", None, 2)
    assert data.qrels["Q1"] == {"D1-0": 0, "D1-1": 1, "D1-2": 0}
    assert (len(data), data.num_pairs) == (2, 5)

    assert list(load_qa_pairs(path, only_answerable=False).queries) == ["Q1", "Q2", "Q3"]
    assert list(load_qa_pairs(path, clean=True).queries) == ["Q1"]  # Q3 is all positive


def test_load_qa_pairs_without_sid_uses_positions(tmp_path):
    rows = [{k: v for k, v in r.items() if k != "sid"} for r in WIKIQA_ROWS]
    data = load_qa_pairs(write_jsonl(tmp_path / "trecqa.jsonl", rows))
    assert [c.doc_id for c in data.candidates["Q1"]] == ["0", "1", "2"]
    assert data.qrels["Q3"] == {"0": 1, "1": 1}


def test_load_qa_pairs_renamed_columns(tmp_path):
    rows = [{"id": "a", "q": "x?", "p": "y", "rel": 1}, {"id": "a", "q": "x?", "p": "z", "rel": 0}]
    data = load_qa_pairs(
        write_jsonl(tmp_path / "x.jsonl", rows),
        qid_column="id",
        query_column="q",
        passage_column="p",
        label_column="rel",
    )
    assert data.qrels == {"a": {"0": 1, "1": 0}}


def test_to_pairs_columns_and_binarized_labels(tmp_path):
    data = load_qa_pairs(write_jsonl(tmp_path / "t.jsonl", WIKIQA_ROWS))
    pairs = data.to_pairs()
    assert pairs.column_names == ["qid", "doc_id", "query", "passage", "label"]
    assert pairs[1] == {"qid": "Q1", "doc_id": "D1-1", "query": "who?", "passage": "him", "label": 1}
    assert pairs["label"] == [0, 1, 0, 1, 1]


# ---------------------------------------------------------------------------- TREC layout
def write_trec(folder: Path) -> Path:
    """The hand example of tests/test_metrics.py in the TREC layout (BM25 order a, b, c, d)."""
    write_jsonl(folder / "queries.jsonl", [{"qid": q, "query": f"query {q}"} for q in ("q1", "q2", "q3", "q4")])
    texts = {d: f"passage {d}" for d in "abcdexyw"}
    write_jsonl(folder / "corpus.jsonl", [{"pid": d, "text": t} for d, t in texts.items()])
    qrels = {
        "q1": {"a": 3, "b": 2, "c": 1, "d": 0, "e": 2},
        "q2": {"x": 1, "y": 0},
        "q3": {"z": 2},
        "q4": {"w": 0},
    }
    judgements = [{"qid": q, "pid": d, "relevance": r} for q, ds in qrels.items() for d, r in ds.items()]
    write_jsonl(folder / "qrels.jsonl", judgements)
    candidates = [  # file order shuffled on purpose: rank decides
        ("q1", "c", 3, 7.0),
        ("q1", "a", 1, 9.0),
        ("q2", "x", 1, 5.0),
        ("q1", "d", 4, 6.0),
        ("q1", "b", 2, 8.0),
        ("q2", "y", 2, 4.0),
        ("q4", "w", 1, 1.0),
    ]
    write_jsonl(folder / "candidates.jsonl", [{"qid": q, "pid": d, "rank": r, "score": s} for q, d, r, s in candidates])
    return folder


# Expected values (threshold 2): see tests/test_metrics.py for the derivations.
IDCG_Q1 = 3 + 2 / math.log2(3) + 2 / math.log2(4) + 1 / math.log2(5)
RERANKED = {  # order c, a, d, b
    "mrr@10": (1 / 2) / 4,
    "ndcg@10": ((1 + 3 / math.log2(3) + 2 / math.log2(5)) / IDCG_Q1 + 1.0) / 4,
    "map": ((1 / 2 + 2 / 4) / 3) / 4,
}
FIRST_STAGE = {  # BM25 order a, b, c, d
    "mrr@10": 1.0 / 4,
    "ndcg@10": ((3 + 2 / math.log2(3) + 1 / math.log2(4)) / IDCG_Q1 + 1.0) / 4,
    "map": ((1 + 1) / 3) / 4,
}
SCORES = {  # model scores by passage text: q1 order c, a, d, b
    "passage c": 4.0,
    "passage a": 3.0,
    "passage d": 2.0,
    "passage b": 1.0,
    "passage x": 1.0,
    "passage y": 0.0,
    "passage w": 0.0,
}


def test_load_trec_run(tmp_path):
    data = load_trec_run(write_trec(tmp_path / "dl"))
    assert data.name == "dl"
    assert list(data.queries) == ["q1", "q2", "q3", "q4"]
    assert [c.doc_id for c in data.candidates["q1"]] == ["a", "b", "c", "d"]
    assert data.candidates["q1"][0] == Candidate("a", "passage a", 9.0, 1)
    assert "q3" not in data.candidates  # kept as a query, scored 0
    assert data.qrels["q1"]["e"] == 2  # judged outside the candidates: kept for the ideal DCG
    assert data.num_pairs == 7
    assert [c.doc_id for c in load_trec_run(tmp_path / "dl", depth=2).candidates["q1"]] == ["a", "b"]

    pairs = data.to_pairs(relevance_threshold=2)
    assert pairs["doc_id"][:4] == ["a", "b", "c", "d"]
    assert pairs["label"][:4] == [1, 1, 0, 0]
    assert data.to_pairs()["label"] == [3, 2, 1, 0, 1, 0, 0]


def test_load_trec_run_missing_text_is_an_error(tmp_path):
    folder = write_trec(tmp_path / "dl")
    write_jsonl(folder / "corpus.jsonl", [{"pid": "a", "text": "only a"}])
    with pytest.raises(ValueError, match="no text"):
        load_trec_run(folder)


def test_evaluator_score_fn_hand_example(tmp_path):
    data = load_trec_run(write_trec(tmp_path / "dl"))
    calls = []

    def score_fn(pairs):
        calls.append(len(pairs))
        return [SCORES[passage] for _, passage in pairs]

    out = RankingEvaluator(data, batch_size=3, relevance_threshold=2, name="dl")(score_fn)
    assert set(out) == {"dl_mrr@10", "dl_ndcg@10", "dl_map"}
    assert out == pytest.approx({f"dl_{k}": v for k, v in RERANKED.items()})
    assert calls == [3, 3, 1]  # chunks of batch_size


def test_evaluator_first_stage(tmp_path):
    data = load_trec_run(write_trec(tmp_path / "dl"))
    assert RankingEvaluator(data, relevance_threshold=2, first_stage=True)() == pytest.approx(FIRST_STAGE)


def test_evaluator_ties_follow_first_stage_order(tmp_path):
    data = load_trec_run(write_trec(tmp_path / "dl"))
    constant = RankingEvaluator(data, relevance_threshold=2)(lambda pairs: [0.0] * len(pairs))
    assert constant == pytest.approx(FIRST_STAGE)


class FakeCrossEncoder:
    """predict() scores pairs from their passage text; records what it saw."""

    def __init__(self, num_outputs):
        self.num_outputs = num_outputs
        self.seen = None

    def predict(self, pairs, batch_size=32, show_progress_bar=False):
        self.seen = list(pairs)
        s = torch.tensor([SCORES[p] for _, p in pairs])
        if self.num_outputs == 1:
            return s
        if self.num_outputs == 2:  # class-1 minus class-0 logit = s
            return torch.stack([-s / 2, s / 2], dim=1)
        return torch.stack([torch.zeros_like(s), s, torch.zeros_like(s)], dim=1)  # class 1 gets the mass


@pytest.mark.parametrize("num_outputs", [1, 2, 3])
def test_evaluator_cross_encoder_heads(tmp_path, num_outputs):
    data = load_trec_run(write_trec(tmp_path / "dl"))
    model = FakeCrossEncoder(num_outputs)
    out = RankingEvaluator(data, relevance_threshold=2)(model)
    assert out == pytest.approx(RERANKED)
    assert sorted(model.seen) == sorted((data.queries[q], c.text) for q, cs in data.candidates.items() for c in cs)


def test_evaluator_two_class_positive_label_zero(tmp_path):
    data = load_trec_run(write_trec(tmp_path / "dl"))
    model = FakeCrossEncoder(2)  # positive_label=0 reverses the order
    out = RankingEvaluator(data, relevance_threshold=2, positive_label=0)(model)
    assert out["mrr@10"] != pytest.approx(RERANKED["mrr@10"])


def test_evaluator_bi_encoder_cosine(tmp_path):
    data = load_trec_run(write_trec(tmp_path / "dl"))

    class FakeBiEncoder:
        def __init__(self):
            self.encoded = []

        def encode(self, texts, batch_size=32):
            self.encoded.append(list(texts))
            # queries point along x; a passage at angle theta has cosine cos(theta) with every query
            angle = {t: (1 - SCORES.get(t, 5.0) / 5.0) * math.pi / 2 for t in texts}
            return np.array([[math.cos(angle[t]), math.sin(angle[t])] for t in texts]) * 3.0  # not unit norm

    model = FakeBiEncoder()
    assert RankingEvaluator(data, relevance_threshold=2)(model) == pytest.approx(RERANKED)
    assert len(model.encoded[0]) == 3  # distinct queries with candidates, encoded once each


def test_evaluator_rejects_unusable_models(tmp_path):
    evaluator = RankingEvaluator(load_trec_run(write_trec(tmp_path / "dl")))
    with pytest.raises(TypeError, match="cannot score"):
        evaluator(torch.nn.Linear(2, 2))
    with pytest.raises(ValueError, match="needs a model"):
        evaluator()


# ---------------------------------------------------------------------------- real (tiny, random) models
def tiny_tokenizer() -> BertTokenizer:
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "query", "passage"] + list("abcdexyzwq1234")
    return BertTokenizer(vocab={w: i for i, w in enumerate(words)})


def tiny_encoder() -> dict:
    return BertConfig(
        vocab_size=21, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32
    ).to_dict()


# write_trec's judgements and q1's candidates: the metrics of any order of them, by hand (threshold 2, linear gains)
TREC_QRELS = {"q1": {"a": 3, "b": 2, "c": 1, "d": 0, "e": 2}, "q2": {"x": 1, "y": 0}, "q3": {"z": 2}, "q4": {"w": 0}}


def hand_metrics(order: dict[str, list[str]]) -> dict[str, float]:
    """MRR@10, NDCG@10 and MAP over write_trec's 4 queries for the given candidate order of each query."""
    rr = ndcg = ap = 0.0
    for qid, qrels in TREC_QRELS.items():
        ranked = order.get(qid, [])
        relevant = [rank for rank, doc in enumerate(ranked, 1) if qrels.get(doc, 0) >= 2]
        rr += 1 / relevant[0] if relevant else 0.0
        ap += sum(i / rank for i, rank in enumerate(relevant, 1)) / max(1, sum(r >= 2 for r in qrels.values()))
        ideal = sum(g / math.log2(i + 1) for i, g in enumerate(sorted(qrels.values(), reverse=True), 1))
        dcg = sum(qrels.get(doc, 0) / math.log2(rank + 1) for rank, doc in enumerate(ranked, 1))
        ndcg += dcg / ideal if ideal else 0.0
    return {"mrr@10": rr / 4, "ndcg@10": ndcg / 4, "map": ap / 4}


def own_score(model, qid: str, doc: str) -> float:
    """One pair scored alone, in eval mode: a 2-class cross-encoder's log-odds of class 1, a bi-encoder's cosine."""
    query, passage = f"query {qid}", f"passage {doc}"
    with torch.no_grad():
        if isinstance(model, CrossEncoderModel):
            logits = model(**model.tokenizer(query, passage, return_tensors="pt")).logits[0]
            return float(logits[1] - logits[0])
        u, v = (model.encode([text], batch_size=1)[0] for text in (query, passage))
        return float(torch.nn.functional.cosine_similarity(u, v, dim=0))


def test_evaluator_runs_real_cross_encoder_and_siamese(tmp_path):
    """The evaluator's metrics of a random model = the hand metrics of the order the model's own scores give."""
    torch.manual_seed(0)
    data = load_trec_run(write_trec(tmp_path / "dl"))
    evaluator = RankingEvaluator(data, batch_size=2, relevance_threshold=2)
    cross = CrossEncoderModel(CrossEncoderConfig(encoder=tiny_encoder(), num_labels=2))
    cross.tokenizer = tiny_tokenizer()
    siamese = SiameseModel(SiameseConfig(encoder=tiny_encoder(), head="none"))
    siamese.tokenizer = tiny_tokenizer()
    candidates = {"q1": ["a", "b", "c", "d"], "q2": ["x", "y"], "q4": ["w"]}
    for model in (cross, siamese):
        out = evaluator(model)
        assert model.training  # predict/encode restore the mode the trainer left
        model.eval()
        order = {qid: sorted(docs, key=lambda d, q=qid: -own_score(model, q, d)) for qid, docs in candidates.items()}
        model.train()
        assert order["q1"] != ["a", "b", "c", "d"]  # the model reorders BM25's a, b, c, d: its scores, not the first stage
        assert out == pytest.approx(hand_metrics(order), abs=1e-6)


def test_ranking_data_rejects_bad_structure():
    with pytest.raises(ValueError, match="no query text"):
        RankingData({}, {"q": []}, {})
    with pytest.raises(ValueError, match="twice"):
        RankingData({"q": "x"}, {"q": [Candidate("a", "t", None, 1), Candidate("a", "t", None, 2)]}, {})


# ---------------------------------------------------------------------------- real data
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason=f"shared data folder {DATA} is absent")


@needs_data
def test_wikiqa_test_standard_protocol():
    data = load_qa_pairs(DATA / "wikiqa" / "test.jsonl")
    assert (len(data), data.num_pairs) == (243, 2351)  # questions with >= 1 correct answer
    assert len(load_qa_pairs(DATA / "wikiqa" / "test.jsonl", clean=True)) == 237
    assert len(load_qa_pairs(DATA / "wikiqa" / "test.jsonl", only_answerable=False)) == 633
    assert len(load_qa_pairs(DATA / "wikiqa" / "validation.jsonl")) == 126


@needs_data
def test_trecqa_test_questions():
    data = load_qa_pairs(DATA / "trecqa" / "test.jsonl")
    assert len(data) == 95 - 6  # 6 of 95 questions have no positive


@needs_data
def test_dl19_bm25_reference():
    data = load_trec_run(DATA / "msmarco_trec_dl" / "dl19")
    assert (len(data), data.num_pairs) == (43, 4300)
    out = RankingEvaluator(data, relevance_threshold=2, first_stage=True, name="dl19")()
    assert out["dl19_ndcg@10"] == pytest.approx(0.5058, abs=1e-3)
    assert out["dl19_mrr@10"] == pytest.approx(0.7024, abs=1e-3)
    # Scoring the BM25 scores themselves through the evaluator gives the same numbers.
    bm25 = {(data.queries[q], c.text): c.score for q, cs in data.candidates.items() for c in cs}
    rescored = RankingEvaluator(data, batch_size=1000, relevance_threshold=2, name="dl19")(
        lambda pairs: [bm25[p] for p in pairs]
    )
    assert rescored == pytest.approx(out)
