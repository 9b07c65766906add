"""Run an exported ONNX student with the same calls as the PyTorch students.

`OnnxCrossEncoder.predict(pairs)` returns what `CrossEncoderModel.predict` returns (one score per
pair for one output, else (N, num_labels) logits) and `OnnxBiEncoder.encode(texts)` what
`SiameseModel.encode` returns, as NumPy arrays. So `STSEvaluator`, `PairClassificationEvaluator`
and `RankingEvaluator` score an ONNX (fp32 or int8) student exactly as they score the PyTorch one.
Each class has only its own method: the evaluators choose the scoring by `predict` or `encode`.

Example:
    >>> model = load_onnx_student("exported/", quantized=True)
    >>> model.predict([("A man plays a guitar.", "Someone makes music.")])
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace

import numpy as np
from transformers import AutoTokenizer

from .errors import ExportError, require_extra
from .onnx_export import METADATA_FILE, ONNX_DIR
from .student import BI_ENCODER, CROSS_ENCODER

__all__ = ["OnnxBiEncoder", "OnnxCrossEncoder", "load_onnx_student"]


def _read_metadata(folder: Path) -> dict:
    path = folder / ONNX_DIR / METADATA_FILE
    if not path.is_file():
        raise ExportError(
            f"{str(folder)!r} holds no ONNX student ({ONNX_DIR}/{METADATA_FILE} is missing): "
            "export one with `hf-distill export STUDENT_DIR OUT_DIR --format onnx`."
        )
    return json.loads(path.read_text(encoding="utf-8"))


class _OnnxStudent:
    """An onnxruntime session over an exported graph, with its tokenizer and labels."""

    kind = ""

    def __init__(self, path: str | Path, quantized: bool = False, threads: int | None = None, providers=None):
        ort = require_extra("onnxruntime", "running an ONNX student")
        folder = Path(path)
        self.metadata = _read_metadata(folder)
        if self.metadata["kind"] != self.kind:
            raise ExportError(f"{str(folder)!r} holds a {self.metadata['kind']} graph, not a {self.kind}; use load_onnx_student().")
        precision = "int8" if quantized else "fp32"
        if precision not in self.metadata["files"]:
            raise ExportError(f"{str(folder)!r} has no {precision} graph: export it again with --quantize int8.")
        options = ort.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
        graph = folder / ONNX_DIR / self.metadata["files"][precision]
        self.session = ort.InferenceSession(str(graph), options, providers=providers or ["CPUExecutionProvider"])
        self.precision = precision
        self.tokenizer = AutoTokenizer.from_pretrained(folder)
        self.config = SimpleNamespace(
            num_labels=self.metadata["num_labels"],
            id2label={int(i): label for i, label in self.metadata["id2label"].items()},
            label2id=dict(self.metadata["label2id"]),
        )

    def run(self, encoded: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        """One forward pass on tokenised inputs (the graph's input names; extra keys are ignored)."""
        return self.session.run(None, {name: np.asarray(encoded[name], dtype=np.int64) for name in self.metadata["inputs"]})

    def _tokenize(self, first: list[str], second: list[str] | None, max_length: int | None) -> dict[str, np.ndarray]:
        return self.tokenizer(first, second, padding=True, truncation=True, max_length=max_length, return_tensors="np")

    @staticmethod
    def _starts(count: int, batch_size: int, show_progress_bar: bool, desc: str) -> Iterable[int]:
        if batch_size < 1:
            raise ValueError(f"batch_size={batch_size!r} must be >= 1.")
        starts = range(0, count, batch_size)
        if show_progress_bar:
            from tqdm.auto import tqdm

            return tqdm(starts, desc=desc, unit="batch")
        return starts

    def __repr__(self) -> str:
        return f"{type(self).__name__}(precision={self.precision!r}, inputs={self.metadata['inputs']})"


class OnnxCrossEncoder(_OnnxStudent):
    """An exported cross-encoder: `predict(pairs)` like `CrossEncoderModel.predict`."""

    kind = CROSS_ENCODER

    def predict(
        self,
        pairs: Sequence[tuple[str, str]],
        batch_size: int = 32,
        max_length: int | None = None,
        show_progress_bar: bool = False,
    ) -> np.ndarray:
        """Score (a, b) pairs: (N,) scores for one output, else (N, num_labels) logits."""
        chunks = []
        for start in self._starts(len(pairs), batch_size, show_progress_bar, "Scoring"):
            first, second = zip(*pairs[start : start + batch_size])
            chunks.append(self.run(self._tokenize(list(first), list(second), max_length))[0])
        logits = np.concatenate(chunks) if chunks else np.empty((0, self.config.num_labels), dtype=np.float32)
        return logits[:, 0] if self.config.num_labels == 1 else logits


class OnnxBiEncoder(_OnnxStudent):
    """An exported bi-encoder: `encode(texts)` like `SiameseModel.encode` (the pooled embedding)."""

    kind = BI_ENCODER

    def encode(
        self,
        texts: str | Sequence[str],
        batch_size: int = 32,
        show_progress_bar: bool = False,
        normalize: bool = False,
        max_length: int | None = None,
        convert_to_numpy: bool = True,
    ) -> np.ndarray:
        """Embed sentences in batches (longest first, order restored); always NumPy."""
        single = isinstance(texts, str)
        texts = [texts] if single else list(texts)
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        chunks = []
        for start in self._starts(len(texts), batch_size, show_progress_bar, "Encoding"):
            batch = [texts[i] for i in order[start : start + batch_size]]
            chunks.append(self.run(self._tokenize(batch, None, max_length))[1])
        stacked = np.concatenate(chunks) if chunks else np.empty((0, self.session.get_outputs()[1].shape[-1]), np.float32)
        embeddings = np.empty_like(stacked)
        embeddings[np.asarray(order, dtype=np.int64)] = stacked
        if normalize:
            embeddings = embeddings / np.maximum(np.linalg.norm(embeddings, axis=1, keepdims=True), 1e-12)
        return embeddings[0] if single else embeddings


def load_onnx_student(path: str | Path, quantized: bool = False, **kwargs) -> OnnxCrossEncoder | OnnxBiEncoder:
    """The runtime class that matches the exported student (`threads=`, `providers=` go to onnxruntime)."""
    kind = _read_metadata(Path(path))["kind"]
    return (OnnxCrossEncoder if kind == CROSS_ENCODER else OnnxBiEncoder)(path, quantized=quantized, **kwargs)
