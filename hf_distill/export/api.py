"""`export_student`: a saved hf_distill student -> a folder any serving stack loads, with its card.

Formats (one folder each):

- "transformers" (default for a cross-encoder): the backbone family's own
  `AutoModelForSequenceClassification` checkpoint, which sentence-transformers' `CrossEncoder`
  also loads (scores are the student's raw logits);
- "sentence-transformers" (default for a Siamese student): the Transformer + Pooling (+ Normalize)
  layout; for a cross-encoder it is the same folder as "transformers" (`CrossEncoder` reads it);
- "onnx": the standard folder (when the backbone family has one) plus `onnx/model.onnx`, and
  `onnx/model_qint8.onnx` with `quantize="int8"`, run by `load_onnx_student`.

Every written model is read back and compared with the student on sample pairs; the card
(README.md) reports those differences and the measured speed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from .card import write_card
from .errors import ExportError, require_extra
from .measure import max_abs_difference, outputs_of, speed_profile
from .onnx_export import export_onnx, quantize_int8
from .readback import read_back
from .runtime import load_onnx_student
from .sentence_transformers_checkpoint import save_sentence_transformer
from .student import BI_ENCODER, CROSS_ENCODER, load_student, sample_pairs, student_kind
from .transformers_checkpoint import save_sequence_classification

__all__ = ["FORMATS", "ExportResult", "default_format", "export_student"]

FORMATS = ("transformers", "sentence-transformers", "onnx")
QUANTIZATIONS = ("int8",)
STANDARD_TOLERANCE = 1e-4  # float32 round-off of the same operations in another module tree
ONNX_TOLERANCE = 1e-3  # fused kernels in onnxruntime; measured differences are ~1e-6


@dataclass
class ExportResult:
    """What `export_student` wrote and measured.

    parity: runtime -> {"max_abs_diff", "read_with"}; speed: runtime -> `measure.speed_profile` keys.
    """

    path: Path
    format: str
    kind: str
    quantize: str | None = None
    normalize: bool = False
    files: list[str] = field(default_factory=list)
    parity: dict[str, dict] = field(default_factory=dict)
    speed: dict[str, dict] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def default_format(kind: str) -> str:
    return "transformers" if kind == CROSS_ENCODER else "sentence-transformers"


def _check_options(format: str | None, quantize: str | None) -> str | None:
    if format is not None and format not in FORMATS:
        raise ExportError(f"format={format!r} is not valid; choose one of {', '.join(FORMATS)}.")
    if quantize is not None and quantize not in QUANTIZATIONS:
        raise ExportError(f"quantize={quantize!r} is not valid; choose 'int8' or leave it out.")
    if quantize and format not in (None, "onnx"):
        raise ExportError(f"--quantize {quantize} applies to ONNX graphs; use --format onnx (not {format}).")
    return "onnx" if quantize else format


def _prepare_out_dir(student, out_dir: str | Path) -> Path:
    out = Path(out_dir)
    if isinstance(student, (str, Path)) and out.resolve() == Path(student).resolve():
        raise ExportError(f"OUT_DIR {str(out_dir)!r} is the student folder; export into another folder.")
    if out.exists() and not out.is_dir():
        raise ExportError(f"OUT_DIR {str(out_dir)!r} is a file; give a folder.")
    out.mkdir(parents=True, exist_ok=True)
    return out


def _reference(model, kind: str, pairs, normalize: bool) -> np.ndarray:
    if kind == BI_ENCODER:
        return np.asarray(model.encode(_texts(pairs), normalize=normalize).float().numpy(), dtype=np.float64)
    return outputs_of(model, kind, pairs)


def _texts(pairs) -> list[str]:
    return list(dict.fromkeys(text for pair in pairs for text in pair))


def _write_standard(model, result: ExportResult, pairs, required: bool) -> None:
    """The transformers / sentence-transformers folder, read back and compared with the student."""
    try:
        if result.kind == CROSS_ENCODER:
            save_sequence_classification(model, result.path)
        else:
            save_sentence_transformer(model, result.path, normalize=result.normalize)
    except ExportError as error:
        if required:
            raise
        model.tokenizer.save_pretrained(result.path)  # the ONNX runtime reads it
        result.notes.append(f"No standard checkpoint in this folder: {error}")
        return
    reader = read_back(result.path, cross_encoder=result.kind == CROSS_ENCODER)
    difference = max_abs_difference(_reference(model, result.kind, pairs, result.normalize), outputs_of(reader, result.kind, pairs))
    if difference > STANDARD_TOLERANCE:
        raise ExportError(
            f"the written checkpoint differs from the student by {difference:.2e} (> {STANDARD_TOLERANCE:g}) "
            f"for model_type={model.config.encoder.model_type!r}; please report it."
        )
    label = "transformers / CrossEncoder" if result.kind == CROSS_ENCODER else "sentence-transformers"
    result.parity[label] = {"max_abs_diff": difference, "read_with": reader.reader}


def _write_onnx(model, result: ExportResult, pairs) -> dict:
    """The fp32 graph (and int8 with quantize), each compared with the student; returns label -> runtime."""
    export_onnx(model, result.path)
    reference = _reference(model, result.kind, pairs, normalize=False)
    threads = torch.get_num_threads()
    runtimes = {"ONNX fp32": load_onnx_student(result.path, threads=threads)}
    if result.quantize:
        quantize_int8(result.path)
        runtimes["ONNX int8"] = load_onnx_student(result.path, quantized=True, threads=threads)
    for label, runtime in runtimes.items():
        difference = max_abs_difference(reference, outputs_of(runtime, result.kind, pairs))
        if label == "ONNX fp32" and difference > ONNX_TOLERANCE:
            raise ExportError(f"the ONNX graph differs from the student by {difference:.2e} (> {ONNX_TOLERANCE:g}); please report it.")
        result.parity[label] = {"max_abs_diff": difference, "read_with": f"hf_distill.export.{type(runtime).__name__}"}
    return runtimes


def export_student(
    student,
    out_dir: str | Path,
    format: str | None = None,
    quantize: str | None = None,
    normalize: bool = False,
    measure_speed: bool = True,
    pairs: list[tuple[str, str]] | None = None,
) -> ExportResult:
    """Export a student (a saved student folder, or a `CrossEncoderModel`/`SiameseModel`) into `out_dir`.

    Args:
        format: "transformers", "sentence-transformers" or "onnx"; None picks the student's standard
            format (transformers for a cross-encoder, sentence-transformers for a Siamese student),
            or onnx when `quantize` is given.
        quantize: "int8" adds a dynamically quantised graph (ONNX only).
        normalize: add sentence-transformers' Normalize module (Siamese students): unit-length embeddings.
        measure_speed: time PyTorch and each ONNX graph for the card (a few seconds on a small student).
        pairs: the text pairs parity is measured on (default: a few built-in pairs).
    """
    format = _check_options(format, quantize)
    if format == "onnx":  # before any work: a missing extra is one line, not a half-written folder
        require_extra("onnx", "--format onnx")
        require_extra("onnxruntime", "--format onnx")
    was_training = bool(getattr(student, "training", False))  # a model handed in gets its mode back
    model = load_student(student)
    kind = student_kind(model)
    if normalize and kind == CROSS_ENCODER:
        raise ExportError("--normalize adds sentence-transformers' Normalize module: it applies to Siamese students only.")
    result = ExportResult(_prepare_out_dir(student, out_dir), format or default_format(kind), kind, quantize, normalize)
    try:
        _write_all(model, result, list(pairs or sample_pairs()), measure_speed)
    finally:
        model.train(was_training)
    return result


def _write_all(model, result: ExportResult, pairs: list[tuple[str, str]], measure_speed: bool) -> None:
    _write_standard(model, result, pairs, required=result.format != "onnx")
    runtimes = {"PyTorch fp32": model}
    if result.format == "onnx":
        runtimes.update(_write_onnx(model, result, pairs))
    if measure_speed:
        result.speed = {label: speed_profile(runtime, model, pairs) for label, runtime in runtimes.items()}
    write_card(model, result)
    result.files = sorted(str(p.relative_to(result.path)) for p in result.path.rglob("*") if p.is_file())
