"""hf_distill.evaluation: STS correlation of embeddings and pair-classification accuracy."""

import json
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import scipy.stats
import torch
from transformers import BertConfig, BertTokenizer

from hf_distill import CrossEncoderConfig, CrossEncoderModel, SiameseConfig, SiameseModel
from hf_distill.evaluation import PairClassificationEvaluator, STSEvaluator

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"

# Four pairs whose embeddings (2-d, at the given angles) have cosine 0, 0.5, 1 and sqrt(2)/2.
ANGLES = {"s0": 0, "s1": 90, "s2": 0, "s3": 60, "s4": 10, "s5": 10, "s6": 20, "s7": 65}
PAIRS = [("s0", "s1"), ("s2", "s3"), ("s4", "s5"), ("s6", "s7")]
COSINES = [0.0, 0.5, 1.0, math.sqrt(2) / 2]
GOLD = [0.0, 2.0, 1.0, 3.0]


def hand_accuracy(predicted, gold) -> float:
    return sum(p == g for p, g in zip(predicted, gold)) / len(gold)


def hand_f1(predicted, gold, positive: int) -> float:
    """2 TP / (2 TP + FP + FN) for one class (0 when the class is neither predicted nor gold)."""
    tp = sum(p == g == positive for p, g in zip(predicted, gold))
    wrong = sum((p == positive) != (g == positive) for p, g in zip(predicted, gold))
    return 2 * tp / (2 * tp + wrong) if tp or wrong else 0.0


def hand_macro_f1(predicted, gold, classes: int) -> float:
    return sum(hand_f1(predicted, gold, c) for c in range(classes)) / classes


def hand_pearson(x, y):
    mx, my = sum(x) / len(x), sum(y) / len(y)
    cov = sum((a - mx) * (b - my) for a, b in zip(x, y))
    return cov / math.sqrt(sum((a - mx) ** 2 for a in x) * sum((b - my) ** 2 for b in y))


class FakeBiEncoder:
    def __init__(self):
        self.calls = []

    def encode(self, texts, batch_size=32):
        self.calls.append(list(texts))
        rad = [math.radians(ANGLES[t]) for t in texts]
        return torch.tensor([[2 * math.cos(a), 2 * math.sin(a)] for a in rad])  # not unit norm


def test_sts_evaluator_hand_values():
    first, second = zip(*PAIRS)
    model = FakeBiEncoder()
    out = STSEvaluator(list(first), list(second), GOLD, name="sts")(model)
    assert set(out) == {"sts_spearman_cosine", "sts_pearson_cosine"}
    # cosine ranks [1, 2, 4, 3] vs gold ranks [1, 3, 2, 4]: sum d^2 = 6 -> 1 - 6*6 / (4*15) = 0.4, x100
    assert out["sts_spearman_cosine"] == pytest.approx(40.0)
    assert out["sts_pearson_cosine"] == pytest.approx(100 * hand_pearson(COSINES, GOLD))
    assert len(model.calls) == 1 and sorted(model.calls[0]) == sorted(ANGLES)  # each sentence once


def test_sts_evaluator_encodes_repeated_sentences_once_and_scale():
    model = FakeBiEncoder()
    out = STSEvaluator(["s0", "s0", "s2"], ["s1", "s3", "s3"], [0.0, 1.0, 2.0], scale=1.0)(model)
    assert len(model.calls[0]) == 4
    # cosines 0, 0.5, 0.5 vs gold 0, 1, 2: ranks [1, 2.5, 2.5] vs [1, 2, 3] -> cov 1.5, sxx 1.5, syy 2
    assert out["spearman_cosine"] == pytest.approx(1.5 / math.sqrt(1.5 * 2))


def test_sts_evaluator_from_jsonl(tmp_path):
    path = tmp_path / "sts.jsonl"
    rows = [{"sentence1": a, "sentence2": b, "score": g, "genre": "x"} for (a, b), g in zip(PAIRS, GOLD)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    evaluator = STSEvaluator.from_jsonl(path, batch_size=2)
    assert evaluator.batch_size == 2
    assert evaluator(FakeBiEncoder())["spearman_cosine"] == pytest.approx(40.0)


def test_sts_evaluator_cross_encoder_scores():
    class FakeRegressor:
        def predict(self, pairs, batch_size=32):
            return torch.tensor([[c] for c in COSINES])  # (N, 1) like a regression head

    first, second = zip(*PAIRS)
    out = STSEvaluator(first, second, GOLD)(FakeRegressor())
    assert out == pytest.approx({"spearman": 40.0, "pearson": 100 * hand_pearson(COSINES, GOLD)})


def test_sts_evaluator_errors():
    with pytest.raises(ValueError, match="same length"):
        STSEvaluator(["a", "b"], ["c"], [1.0, 2.0])
    with pytest.raises(TypeError):
        STSEvaluator(["s0", "s2"], ["s1", "s3"], [0.0, 1.0])(object())


# ---------------------------------------------------------------------------- pair classification
class FakeClassifier:
    def __init__(self, logits, label2id=None):
        self.logits = np.asarray(logits, dtype=float)
        self.config = SimpleNamespace(label2id=label2id or {})

    def predict(self, pairs, batch_size=32):
        assert len(pairs) == len(self.logits)
        return torch.tensor(self.logits)


def test_pair_classification_binary():
    logits = [[0.1, 0.9], [2.0, -1.0], [0.0, 1.0], [0.3, 0.7]]  # argmax 1, 0, 1, 1
    evaluator = PairClassificationEvaluator(["a"] * 4, ["b"] * 4, [1, 0, 0, 1], name="mrpc")
    assert evaluator(FakeClassifier(logits)) == pytest.approx({"mrpc_accuracy": 0.75, "mrpc_f1": 0.8})


def test_pair_classification_string_labels_through_label2id(tmp_path):
    label2id = {"entailment": 0, "neutral": 1, "contradiction": 2}
    labels = ["entailment", "neutral", "neutral", "contradiction", "contradiction", "entailment"]
    path = tmp_path / "nli.jsonl"
    path.write_text("".join(json.dumps({"premise": "p", "hypothesis": "h", "label": y}) + "\n" for y in labels))
    evaluator = PairClassificationEvaluator.from_jsonl(path, text_columns=("premise", "hypothesis"))
    logits = np.eye(3)[[0, 1, 2, 2, 1, 0]]
    out = evaluator(FakeClassifier(logits, label2id))
    assert out == pytest.approx({"accuracy": 4 / 6, "f1_macro": 2 / 3})
    with pytest.raises(ValueError, match="label2id"):
        evaluator(FakeClassifier(logits, {"entailment": 0}))
    # an explicit label2id wins, and a plain predict_fn works
    explicit = PairClassificationEvaluator.from_jsonl(
        path, text_columns=("premise", "hypothesis"), label2id=label2id, batch_size=4
    )
    outputs = iter([logits[:4], logits[4:]])
    assert explicit(lambda pairs: next(outputs)) == pytest.approx(out)


# ---------------------------------------------------------------------------- real (tiny, random) models
def tiny_tokenizer() -> BertTokenizer:
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "man", "dog", "runs", "sits", "is", "the"]
    return BertTokenizer(vocab={w: i for i, w in enumerate(words)})


def tiny_encoder() -> dict:
    return BertConfig(
        vocab_size=12, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32
    ).to_dict()


def test_evaluators_run_real_tiny_models():
    torch.manual_seed(0)
    first = ["a man runs", "the dog sits", "a dog runs", "the man is"]
    second = ["a man sits", "the dog runs", "a dog", "man"]
    siamese = SiameseModel(
        SiameseConfig(
            encoder=tiny_encoder(),
            head="classification",
            id2label={0: "x", 1: "y", 2: "z"},
            label2id={"x": 0, "y": 1, "z": 2},
        )
    )
    siamese.tokenizer = tiny_tokenizer()
    gold = [1.0, 2.0, 3.0, 4.0]
    sts = STSEvaluator(first, second, gold, batch_size=3)(siamese)
    assert set(sts) == {"spearman_cosine", "pearson_cosine"}
    siamese.eval()  # scipy's correlations (x100) of the cosines of each pair's embeddings, encoded one at a time
    cosines = [float(torch.cosine_similarity(siamese.encode([a])[0], siamese.encode([b])[0], dim=0)) for a, b in zip(first, second)]
    siamese.train()
    assert sts["spearman_cosine"] == pytest.approx(100 * scipy.stats.spearmanr(cosines, gold).statistic)
    assert sts["pearson_cosine"] == pytest.approx(100 * scipy.stats.pearsonr(cosines, gold).statistic, abs=1e-4)

    nli = PairClassificationEvaluator(first, second, ["x", "y", "z", "x"], batch_size=3)
    logits = nli.predict_logits(siamese)
    assert logits.shape == (4, 3)
    predicted = logits.argmax(axis=1).tolist()
    assert nli(siamese) == pytest.approx({"accuracy": hand_accuracy(predicted, [0, 1, 2, 0]),
                                          "f1_macro": hand_macro_f1(predicted, [0, 1, 2, 0], classes=3)})
    assert siamese.training  # the evaluator ran in eval mode and restored training mode
    siamese.eval()
    with torch.no_grad():  # the padded batch gives the same logits as one pair alone
        tok = siamese.tokenizer
        a, b = tok([first[3]], return_tensors="pt"), tok([second[3]], return_tensors="pt")
        single = siamese(**{f"{k}_a": v for k, v in a.items()}, **{f"{k}_b": v for k, v in b.items()}).logits
    np.testing.assert_allclose(logits[3], single[0].numpy(), atol=1e-5)

    cross = CrossEncoderModel(CrossEncoderConfig(encoder=tiny_encoder(), num_labels=2))
    cross.tokenizer = tiny_tokenizer()
    binary = PairClassificationEvaluator(first, second, [0, 1, 1, 0])(cross)
    cross.eval()
    with torch.no_grad():  # each pair alone through the cross-encoder: the class it gives the higher logit
        predicted = [int(cross(**cross.tokenizer(a, b, return_tensors="pt")).logits.argmax()) for a, b in zip(first, second)]
    assert binary == pytest.approx({"accuracy": hand_accuracy(predicted, [0, 1, 1, 0]),
                                    "f1": hand_f1(predicted, [0, 1, 1, 0], positive=1)})


# ---------------------------------------------------------------------------- real data
@pytest.mark.skipif(not DATA.is_dir(), reason=f"shared data folder {DATA} is absent")
def test_stsb_test_file_loads():
    evaluator = STSEvaluator.from_jsonl(DATA / "stsb" / "test.jsonl", name="stsb_test")
    assert len(evaluator.scores) == 1379
    assert evaluator.scores.min() >= 0.0 and evaluator.scores.max() <= 5.0
