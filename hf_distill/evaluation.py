"""Model-level evaluators for text pairs: STS correlation of embeddings and pair-classification accuracy.

An evaluator is a callable `evaluator(model) -> dict[str, float]` that runs the model on a
fixed set itself (unlike `compute_metrics`, which sees the Trainer's eval-loop logits). That
is what a Siamese student needs on STS: DvBERT and SBERT report the Spearman correlation of
cosine(u, v) with the gold scores, whatever head the student was trained with. Keys are bare
(prefixed by `name + "_"` when a name is given); the Trainer adds `eval_`.
Ranking (MRR/NDCG) lives in `hf_distill.ranking.RankingEvaluator`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ._io import as_numpy as _as_numpy, is_module as _is_module, read_jsonl as _read_jsonl
from .metrics import accuracy, f1, pearson, spearman

__all__ = ["PairClassificationEvaluator", "STSEvaluator"]


class STSEvaluator:
    """Spearman and Pearson correlation (x100 by default) of a model's pair scores with gold similarity.

    With a bi-encoder (anything with `.encode(texts)`, e.g. `SiameseModel`): cosine of the two
    sentence embeddings -> {"spearman_cosine", "pearson_cosine"}. With a cross-encoder
    (anything with `.predict(pairs)` returning one score per pair, e.g. a regression
    `CrossEncoderModel` teacher) -> {"spearman", "pearson"}. Values are multiplied by `scale`
    (100, the STS convention of DvBERT/SBERT tables; scale=1 gives raw correlations, as
    `hf_distill.metrics` returns).

    Example:
        >>> evaluator = STSEvaluator.from_jsonl("data/stsb/test.jsonl", name="stsb_test")
        >>> evaluator(siamese)  # {"stsb_test_spearman_cosine": 84.1, "stsb_test_pearson_cosine": 83.7}
    """

    def __init__(
        self,
        sentences1: Sequence[str],
        sentences2: Sequence[str],
        scores: Sequence[float],
        batch_size: int = 32,
        name: str = "",
        max_length: int | None = None,
        scale: float = 100.0,
        show_progress_bar: bool = False,
    ):
        if not len(sentences1) == len(sentences2) == len(scores):
            raise ValueError(
                f"sentences1, sentences2 and scores must have the same length, got "
                f"{len(sentences1)}, {len(sentences2)} and {len(scores)}."
            )
        if len(scores) < 2:
            raise ValueError("a correlation needs at least 2 pairs.")
        self.sentences1 = [str(s) for s in sentences1]
        self.sentences2 = [str(s) for s in sentences2]
        self.scores = np.asarray(scores, dtype=np.float64)
        self.batch_size = batch_size
        self.name = name
        self.max_length = max_length
        self.scale = scale
        self.show_progress_bar = show_progress_bar

    @classmethod
    def from_jsonl(
        cls,
        path: str | Path,
        sentence1_column: str = "sentence1",
        sentence2_column: str = "sentence2",
        score_column: str = "score",
        **kwargs: Any,
    ) -> "STSEvaluator":
        """Build from a jsonl with `sentence1`, `sentence2`, `score` (any scale: correlations ignore it)."""
        rows = _read_jsonl(Path(path))
        return cls(
            [r[sentence1_column] for r in rows],
            [r[sentence2_column] for r in rows],
            [float(r[score_column]) for r in rows],
            **kwargs,
        )

    def __call__(self, model: Any) -> dict[str, float]:
        """Score every pair with the model and correlate with the gold scores."""
        if hasattr(model, "encode"):
            predicted, suffix = self._cosine_scores(model), "_cosine"
        elif hasattr(model, "predict"):
            predicted, suffix = self._pair_scores(model), ""
        else:
            raise TypeError(f"{type(model).__name__} has neither .encode(texts) nor .predict(pairs).")
        prefix = f"{self.name}_" if self.name else ""
        return {
            f"{prefix}spearman{suffix}": self.scale * spearman(predicted, self.scores),
            f"{prefix}pearson{suffix}": self.scale * pearson(predicted, self.scores),
        }

    def _cosine_scores(self, model: Any) -> np.ndarray:
        texts = list(dict.fromkeys(self.sentences1 + self.sentences2))  # encode each distinct sentence once
        kwargs: dict[str, Any] = {"batch_size": self.batch_size}
        if self.show_progress_bar:
            kwargs["show_progress_bar"] = True
        if self.max_length is not None:
            kwargs["max_length"] = self.max_length
        embeddings = _as_numpy(model.encode(texts, **kwargs))
        if embeddings.ndim != 2 or embeddings.shape[0] != len(texts):
            raise ValueError(f"encode() returned shape {embeddings.shape} for {len(texts)} texts; expected (N, dim).")
        embeddings = embeddings / np.maximum(np.linalg.norm(embeddings, axis=1, keepdims=True), 1e-12)
        index = {text: i for i, text in enumerate(texts)}
        u = embeddings[[index[s] for s in self.sentences1]]
        v = embeddings[[index[s] for s in self.sentences2]]
        return (u * v).sum(axis=1)

    def _pair_scores(self, model: Any) -> np.ndarray:
        kwargs: dict[str, Any] = {"batch_size": self.batch_size}
        if self.max_length is not None:
            kwargs["max_length"] = self.max_length
        scores = _as_numpy(model.predict(list(zip(self.sentences1, self.sentences2)), **kwargs))
        if scores.ndim == 2 and scores.shape[1] == 1:
            scores = scores[:, 0]
        if scores.shape != (len(self.scores),):
            raise ValueError(f"predict() returned shape {scores.shape}; an STS model must give one score per pair.")
        return scores


class PairClassificationEvaluator:
    """Accuracy (and F1: of class 1 for 2 classes, macro otherwise) of a model's argmax on labelled pairs.

    Works with a `CrossEncoderModel` (`.predict(pairs)` -> logits), a `SiameseModel` with a
    classification head (each side tokenised alone, the head reads (u, v, |u-v|)), or a plain
    `predict_fn(list[(a, b)]) -> logits`. String labels map to ids through the model config's
    `label2id` (or `label2id=` given here). Values are raw, in [0, 1].

    Example:
        >>> evaluator = PairClassificationEvaluator.from_jsonl(
        ...     "data/snli/test.jsonl", text_columns=("premise", "hypothesis"), name="snli_test")
        >>> evaluator(siamese)  # {"snli_test_accuracy": ..., "snli_test_f1_macro": ...}
    """

    def __init__(
        self,
        texts1: Sequence[str],
        texts2: Sequence[str],
        labels: Sequence[int | str],
        batch_size: int = 32,
        name: str = "",
        max_length: int | None = None,
        label2id: Mapping[str, int] | None = None,
    ):
        if not len(texts1) == len(texts2) == len(labels):
            raise ValueError(
                "texts1, texts2 and labels must have the same length, got "
                f"{len(texts1)}, {len(texts2)} and {len(labels)}."
            )
        if not labels:
            raise ValueError("PairClassificationEvaluator needs at least one pair.")
        self.texts1 = [str(t) for t in texts1]
        self.texts2 = [str(t) for t in texts2]
        self.labels = list(labels)
        self.batch_size = batch_size
        self.name = name
        self.max_length = max_length
        self.label2id = dict(label2id) if label2id is not None else None

    @classmethod
    def from_jsonl(
        cls,
        path: str | Path,
        text_columns: tuple[str, str] = ("sentence1", "sentence2"),
        label_column: str = "label",
        **kwargs: Any,
    ) -> "PairClassificationEvaluator":
        """Build from a jsonl; `text_columns` names the pair, e.g. ("premise", "hypothesis") for NLI."""
        rows = _read_jsonl(Path(path))
        first, second = text_columns
        return cls([r[first] for r in rows], [r[second] for r in rows], [r[label_column] for r in rows], **kwargs)

    def __call__(self, model: Any) -> dict[str, float]:
        """Predict every pair's class and compare with the gold labels."""
        logits = self.predict_logits(model)
        if logits.ndim != 2 or logits.shape[0] != len(self.labels) or logits.shape[1] < 2:
            raise ValueError(f"expected logits of shape ({len(self.labels)}, num_labels >= 2), got {logits.shape}.")
        predictions = logits.argmax(axis=1)
        golds = self._label_ids(model)
        prefix = f"{self.name}_" if self.name else ""
        if logits.shape[1] == 2:
            return {f"{prefix}accuracy": accuracy(predictions, golds), f"{prefix}f1": f1(predictions, golds)}
        return {
            f"{prefix}accuracy": accuracy(predictions, golds),
            f"{prefix}f1_macro": f1(predictions, golds, average="macro"),
        }

    def predict_logits(self, model: Any) -> np.ndarray:
        """(N, num_labels) logits of the model on every pair, in order."""
        pairs = list(zip(self.texts1, self.texts2))
        if hasattr(model, "predict"):
            kwargs: dict[str, Any] = {"batch_size": self.batch_size}
            if self.max_length is not None:
                kwargs["max_length"] = self.max_length
            return _as_numpy(model.predict(pairs, **kwargs))
        if hasattr(model, "encode_side") and getattr(model, "tokenizer", None) is not None:
            return self._siamese_logits(model)
        if callable(model) and not _is_module(model):
            return np.concatenate(
                [_as_numpy(model(pairs[s : s + self.batch_size])) for s in range(0, len(pairs), self.batch_size)]
            )
        raise TypeError(
            f"{type(model).__name__} cannot classify pairs: pass a model with .predict(pairs), a SiameseModel "
            "with a tokenizer, or a predict_fn(list[(a, b)]) -> logits."
        )

    def _siamese_logits(self, model: Any) -> np.ndarray:
        import torch

        tokenize: Callable = lambda texts: model.tokenizer(  # noqa: E731
            texts, padding=True, truncation=True, max_length=self.max_length, return_tensors="pt"
        )
        was_training = model.training
        model.eval()
        chunks = []
        with torch.inference_mode():
            for start in range(0, len(self.texts1), self.batch_size):
                a = tokenize(self.texts1[start : start + self.batch_size])
                b = tokenize(self.texts2[start : start + self.batch_size])
                inputs = {f"{k}_a": v.to(model.device) for k, v in a.items()}
                inputs.update({f"{k}_b": v.to(model.device) for k, v in b.items()})
                logits = model(**inputs).logits
                if logits is None:
                    raise ValueError("this SiameseModel has head='none': it gives no class logits.")
                chunks.append(logits.float().cpu().numpy())
        model.train(was_training)
        return np.concatenate(chunks)

    def _label_ids(self, model: Any) -> np.ndarray:
        if all(isinstance(label, (int, np.integer)) and not isinstance(label, bool) for label in self.labels):
            return np.asarray(self.labels, dtype=np.int64)
        label2id = self.label2id
        if label2id is None:
            label2id = getattr(getattr(model, "config", None), "label2id", None)
        unknown = sorted({str(label) for label in self.labels} - set(label2id or {}))
        if unknown:
            raise ValueError(
                f"labels {unknown} are not in label2id={label2id}; set the model config's label2id or pass label2id=."
            )
        return np.asarray([label2id[str(label)] for label in self.labels], dtype=np.int64)
