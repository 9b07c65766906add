"""Student -> ONNX graph with dynamic batch and sequence axes, and its dynamic int8 quantisation.

The graph is traced from the student itself (`torch.onnx.export`, TorchScript exporter), so it
computes exactly what the student computes for every backbone family, ELECTRA included:

- cross-encoder: inputs as the tokenizer gives them -> `logits` (batch, num_labels);
- bi-encoder: one text per row -> `last_hidden_state` (batch, sequence, hidden) and the pooled
  `sentence_embedding` (batch, hidden), the student's `encode()` before any normalisation.

`onnx/student.json` records what the runtime needs (kind, inputs, labels, pooling, files);
`quantize_int8` writes `onnx/model_qint8.onnx` with onnxruntime's dynamic quantisation
(int8 weights per output channel, activations quantised on the fly). onnx and onnxruntime
are imported only here, when an ONNX export is asked for.
"""

from __future__ import annotations

import copy
import json
import tempfile
import warnings
from pathlib import Path

import torch
from torch import nn

from .errors import require_extra
from .student import BI_ENCODER, max_sequence_length, sample_pairs, student_kind

__all__ = ["FP32_FILE", "INT8_FILE", "METADATA_FILE", "ONNX_DIR", "export_onnx", "quantize_int8"]

ONNX_DIR = "onnx"
FP32_FILE = "model.onnx"
INT8_FILE = "model_qint8.onnx"
METADATA_FILE = "student.json"
OPSET = 17  # LayerNormalization as one op
_DYNAMIC = {0: "batch", 1: "sequence"}


class _PairScores(nn.Module):
    """The cross-encoder's logits as a function of plain tensors."""

    def __init__(self, student: nn.Module):
        super().__init__()
        self.student = student

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        return self.student(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids).logits


class _TextEmbeddings(nn.Module):
    """The bi-encoder's token states and pooled embedding of one text per row."""

    def __init__(self, student: nn.Module):
        super().__init__()
        self.student = student

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        side = self.student.encode_side(input_ids, attention_mask, token_type_ids)
        return side.last_hidden_state, side.embeddings


def _graph_io(student) -> tuple[nn.Module, list[str], dict[str, dict[int, str]]]:
    if student_kind(student) == BI_ENCODER:
        graph, outputs = _TextEmbeddings(student), {"last_hidden_state": _DYNAMIC, "sentence_embedding": {0: "batch"}}
    else:
        graph, outputs = _PairScores(student), {"logits": {0: "batch"}}
    return graph.eval(), list(outputs), outputs


def _example_inputs(student, input_names: list[str]) -> dict[str, torch.Tensor]:
    """Two padded rows, so the trace sees padding."""
    first, second = zip(*sample_pairs()[:2])
    if student_kind(student) == BI_ENCODER:
        encoded = student.tokenizer(list(first), padding=True, truncation=True, return_tensors="pt")
    else:
        encoded = student.tokenizer(list(first), list(second), padding=True, truncation=True, return_tensors="pt")
    return {name: encoded[name] for name in input_names}


def _metadata(student, input_names: list[str], output_names: list[str]) -> dict:
    config = student.config
    return {
        "kind": student_kind(student),
        "inputs": input_names,
        "outputs": output_names,
        "num_labels": config.num_labels,
        "id2label": {str(i): label for i, label in config.id2label.items()},
        "label2id": dict(config.label2id),
        "pooling": getattr(config, "pooling", None),
        "max_length": max_sequence_length(student),
        "files": {"fp32": FP32_FILE},
        "opset": OPSET,
    }


def export_onnx(student, out_dir: str | Path) -> Path:
    """Write `out_dir/onnx/model.onnx` and `student.json`; return the graph's path."""
    require_extra("onnx", "--format onnx")
    folder = Path(out_dir) / ONNX_DIR
    folder.mkdir(parents=True, exist_ok=True)
    source = copy.deepcopy(student).float().eval()  # the caller's model keeps its dtype and mode
    input_names = [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in source.tokenizer.model_input_names]
    graph, output_names, output_axes = _graph_io(source)
    example = _example_inputs(source, input_names)
    path = folder / FP32_FILE
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # tracer and deprecation chatter; parity is checked after export
        torch.onnx.export(
            graph,
            tuple(example[name] for name in input_names),
            str(path),
            dynamo=False,
            input_names=input_names,
            output_names=output_names,
            dynamic_axes={**dict.fromkeys(input_names, _DYNAMIC), **output_axes},
            opset_version=OPSET,
            do_constant_folding=True,
        )
    _write_metadata(folder, _metadata(source, input_names, output_names))
    return path


def quantize_int8(out_dir: str | Path) -> Path:
    """Dynamic int8 quantisation of `onnx/model.onnx` into `onnx/model_qint8.onnx`; return its path."""
    quantization = require_extra("onnxruntime.quantization", "--quantize int8")
    from onnxruntime.quantization.shape_inference import quant_pre_process

    folder = Path(out_dir) / ONNX_DIR
    target = folder / INT8_FILE
    with tempfile.TemporaryDirectory() as scratch:
        prepared = Path(scratch) / FP32_FILE  # shapes inferred and constants folded, as onnxruntime recommends
        quant_pre_process(str(folder / FP32_FILE), str(prepared), skip_symbolic_shape=True)
        quantization.quantize_dynamic(str(prepared), str(target), weight_type=quantization.QuantType.QInt8, per_channel=True)
    metadata = json.loads((folder / METADATA_FILE).read_text(encoding="utf-8"))
    metadata["files"]["int8"] = INT8_FILE
    _write_metadata(folder, metadata)
    return target


def _write_metadata(folder: Path, metadata: dict) -> None:
    (folder / METADATA_FILE).write_text(json.dumps(metadata, indent=2) + "\n", encoding="utf-8")
