"""Dense retrieval: block-wise top-k by cosine against brute force, and the metrics by hand."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hf_distill.ranking import Candidate, RankingData
from hf_distill.retrieval import DenseRetrievalEvaluator, passage_pool, recall_at_k, top_k_cosine

from .test_cli import _ranking_folders


@pytest.mark.parametrize("block_size", [1, 3, 7, 100])
def test_blockwise_top_k_equals_brute_force(block_size):
    torch.manual_seed(0)
    queries, passages = torch.randn(5, 8), torch.randn(23, 8) * torch.rand(23, 1) * 3  # norms differ: cosine, not dot
    scores, indices = top_k_cosine(queries, passages, k=6, block_size=block_size)
    full = torch.nn.functional.normalize(queries, dim=-1) @ torch.nn.functional.normalize(passages, dim=-1).T
    expected = full.topk(6, dim=1)
    assert torch.equal(indices, expected.indices) and torch.allclose(scores, expected.values)


def test_ties_keep_the_lower_index_and_k_beyond_the_pool_returns_the_pool():
    passages = torch.tensor([[1.0, 0.0], [0.0, 1.0], [2.0, 0.0], [1.0, 0.0]])
    scores, indices = top_k_cosine(torch.tensor([[1.0, 0.0]]), passages, k=10, block_size=2)
    assert indices.tolist() == [[0, 2, 3, 1]] and scores[0, :3].tolist() == pytest.approx([1.0, 1.0, 1.0])


def test_recall_counts_relevant_documents_retrieved():
    qrels = {"a": {"1": 2, "2": 2, "3": 1}, "b": {"9": 0}}
    run = {"a": {"1": 0.9, "3": 0.5, "7": 0.1}, "b": {"9": 1.0}}
    assert recall_at_k(qrels, run, ["a", "b"], relevance_threshold=2) == pytest.approx((1 / 2 + 0) / 2)


class _Lookup:
    """A bi-encoder by table: each text's embedding is given."""

    def __init__(self, table):
        self.table = table

    def encode(self, texts, batch_size=32, show_progress_bar=False):
        return np.array([self.table[t] for t in texts], dtype=np.float32)


def _pool() -> RankingData:
    queries = {"a": "qa", "b": "qb"}
    texts = {"1": "p1", "2": "p2", "3": "p3"}
    candidates = {"a": [Candidate(d, texts[d], None, i + 1) for i, d in enumerate("12")],
                  "b": [Candidate(d, texts[d], None, i + 1) for i, d in enumerate("32")]}
    return RankingData(queries, candidates, {"a": {"2": 1}, "b": {"1": 3}}, name="pool")


def test_evaluator_searches_the_whole_pool_not_only_each_query_candidates():
    table = {"qa": [1, 0], "qb": [0, 1], "p1": [0.1, 1], "p2": [1, 0.1], "p3": [-1, 0]}
    evaluator = DenseRetrievalEvaluator(_pool(), k=2, relevance_threshold=1, name="pool", show_progress_bar=False)
    assert evaluator.doc_ids == ["1", "2", "3"]
    run = evaluator.retrieve(_Lookup(table))
    assert list(run["a"]) == ["2", "1"] and list(run["b"]) == ["1", "2"]  # b finds passage 1, never its candidate
    metrics = evaluator(_Lookup(table))
    assert metrics["pool_recall@2"] == 1.0 and metrics["pool_mrr@10"] == 1.0 and metrics["pool_ndcg@10"] == pytest.approx(1.0)


def test_doc_ids_must_name_one_passage_and_the_model_must_embed():
    data = RankingData({"a": "q", "b": "r"}, {"a": [Candidate("0", "x", None, 1)], "b": [Candidate("0", "y", None, 1)]}, {})
    with pytest.raises(ValueError, match="doc_id '0' names two different passages"):
        passage_pool(data)
    with pytest.raises(TypeError, match="needs a bi-encoder"):
        DenseRetrievalEvaluator(_pool()).retrieve(object())


def test_a_trec_folder_with_a_siamese_student(tmp_path, tiny_siamese):
    _, trec = _ranking_folders(tmp_path)
    metrics = DenseRetrievalEvaluator.from_trec(trec, relevance_threshold=1, show_progress_bar=False)(tiny_siamese)
    assert set(metrics) == {"trec19_dense_recall@100", "trec19_dense_mrr@10", "trec19_dense_ndcg@10", "trec19_dense_map"}
    assert metrics["trec19_dense_recall@100"] == 1.0  # 4 passages in the pool, all retrieved
