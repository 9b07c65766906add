"""The README.md of an exported student: how to load each format in the folder, measured parity and speed.

Filled from what `export_student` wrote and measured (never typed by hand); paths in it are
relative, so the card stays true after the folder is copied or pushed to the Hub.
"""

from __future__ import annotations

import os
import platform

import torch

from .. import __version__
from .onnx_export import FP32_FILE, INT8_FILE, ONNX_DIR
from .sentence_transformers_checkpoint import dropped_head
from .student import CROSS_ENCODER

__all__ = ["render_card", "write_card"]

FOLDER = "path/to/this/folder"  # or the Hub id it was pushed to


def _front_matter(result) -> str:
    cross = result.kind == CROSS_ENCODER
    tags = ["hf_distill", "knowledge-distillation", "cross-encoder" if cross else "sentence-transformers"]
    tags += ["onnx"] if result.format == "onnx" else []
    library = "sentence-transformers" if not cross else "transformers"
    pipeline = "text-classification" if cross else "sentence-similarity"
    lines = ["---", f"library_name: {library}", f"pipeline_tag: {pipeline}", "tags:"] + [f"- {t}" for t in tags] + ["---"]
    return "\n".join(lines)


def _summary(model, result) -> str:
    encoder = model.config.encoder
    params = sum(p.numel() for p in model.parameters()) / 1e6
    what = "cross-encoder (scores a text pair read jointly)" if result.kind == CROSS_ENCODER else "bi-encoder (embeds each text alone)"
    labels = ", ".join(f"{i}: {name}" for i, name in sorted(model.config.id2label.items()))
    lines = [
        "# Exported hf_distill student",
        "",
        (
            f"A {encoder.num_hidden_layers}-layer {encoder.model_type} {what}: hidden size {encoder.hidden_size}, "
            f"{params:.3g}M parameters, exported by `hf-distill export` (hf_distill {__version__}) in the "
            f"`{result.format}` format{' with an int8 graph' if result.quantize else ''}."
        ),
    ]
    if result.kind == CROSS_ENCODER:
        kind = "one regression score" if model.config.num_labels == 1 else f"{model.config.num_labels} class logits ({labels})"
        lines += ["", f"Output: {kind}, raw (no sigmoid or softmax), exactly as the student's `predict(pairs)`."]
    return "\n".join(lines)


def _has_standard(result) -> bool:
    return not any(note.startswith("No standard checkpoint") for note in result.notes)


def _load_standard(result) -> list[str]:
    if result.kind == CROSS_ENCODER:
        return [
            "### transformers",
            "```python",
            "from transformers import AutoModelForSequenceClassification, AutoTokenizer",
            f'tokenizer = AutoTokenizer.from_pretrained("{FOLDER}")',
            f'model = AutoModelForSequenceClassification.from_pretrained("{FOLDER}").eval()',
            'inputs = tokenizer(["A man plays a guitar."], ["Someone makes music."], padding=True, truncation=True, return_tensors="pt")',
            "logits = model(**inputs).logits",
            "```",
            "### sentence-transformers",
            "```python",
            "from sentence_transformers import CrossEncoder",
            f'model = CrossEncoder("{FOLDER}")  # config.json sets activation_fn to Identity: raw logits, like the student',
            'scores = model.predict([("A man plays a guitar.", "Someone makes music.")])',
            "```",
        ]
    normalized = " (unit length: the folder has a Normalize module)" if result.normalize else ""
    return [
        "### sentence-transformers",
        "```python",
        "from sentence_transformers import SentenceTransformer",
        f'model = SentenceTransformer("{FOLDER}")',
        f'embeddings = model.encode(["A man plays a guitar.", "Someone makes music."])  # the student\'s encode(){normalized}',
        "```",
        "The folder's root is also a plain `AutoModel` checkpoint (token states; pool them as `1_Pooling/config.json` says).",
    ]


def _load_onnx(result) -> list[str]:
    cross = result.kind == CROSS_ENCODER
    call = 'predict([("A man plays a guitar.", "Someone makes music.")])' if cross else 'encode(["A man plays a guitar."])'
    output, index = ("logits", 0) if cross else ("sentence_embedding", 1)
    second = ', ["Someone makes music."]' if cross else ""
    lines = [
        "### ONNX Runtime (with hf_distill: `pip install 'hf_distill[onnx]'`)",
        "```python",
        "from hf_distill.export import load_onnx_student",
        f'model = load_onnx_student("{FOLDER}"{", quantized=True" if result.quantize else ""})  # same calls as the PyTorch student',
        f"{'scores' if cross else 'embeddings'} = model.{call}",
        "```",
        "### ONNX Runtime (plain)",
        "```python",
        "import onnxruntime",
        "from transformers import AutoTokenizer",
        f'tokenizer = AutoTokenizer.from_pretrained("{FOLDER}")',
        f'session = onnxruntime.InferenceSession("{FOLDER}/{ONNX_DIR}/{INT8_FILE if result.quantize else FP32_FILE}")',
        f'inputs = tokenizer(["A man plays a guitar."]{second}, padding=True, truncation=True, return_tensors="np")',
        f"{output} = session.run(None, {{i.name: inputs[i.name] for i in session.get_inputs()}})[{index}]",
        "```",
        f"Graphs: `{ONNX_DIR}/{FP32_FILE}` (fp32)" + (f", `{ONNX_DIR}/{INT8_FILE}` (dynamic int8)" if result.quantize else "")
        + "; dynamic batch and sequence axes; inputs as the tokenizer names them.",
    ]
    return lines


def _table_head(title: str, intro: str, columns: list[str], numeric: int) -> list[str]:
    """A section title, a sentence, and a table header whose last `numeric` columns align right."""
    align = ["---"] * (len(columns) - numeric) + ["---:"] * numeric
    return [f"## {title}", "", intro, "", f"| {' | '.join(columns)} |", f"| {' | '.join(align)} |"]


def _parity(result) -> list[str]:
    what = "scores/logits" if result.kind == CROSS_ENCODER else "embeddings"
    lines = _table_head(
        "Parity with the hf_distill student",
        f"Largest absolute difference of the {what} from the student's, on the same sample pairs:",
        ["runtime", "read with", "max abs difference"],
        numeric=1,
    )
    lines += [f"| {label} | {entry['read_with']} | {entry['max_abs_diff']:.2e} |" for label, entry in result.parity.items()]
    return lines


def _machine() -> str:
    try:
        import onnxruntime

        runtime = f", onnxruntime {onnxruntime.__version__}"
    except ImportError:
        runtime = ""
    cpu = platform.processor() or platform.machine()
    return f"{cpu}, {os.cpu_count()} cores, {torch.get_num_threads()} threads, torch {torch.__version__}{runtime}"


def _speed(result) -> list[str]:
    if not result.speed:
        return []
    first = next(iter(result.speed.values()))
    rows = "pairs" if result.kind == CROSS_ENCODER else "texts"
    lines = _table_head(
        "Speed",
        f"Sequence length {first['seq']}, measured at export on {_machine()}.",
        ["runtime", "batch 1 p50 (ms)", "batch 1 p95 (ms)", f"batch {first['throughput_batch']} ({rows}/s)"],
        numeric=3,
    )
    for label, speed in result.speed.items():
        lines.append(
            f"| {label} | {speed['batch1_p50_ms']:.2f} | {speed['batch1_p95_ms']:.2f} | {speed['throughput_rows_per_s']:.1f} |"
        )
    return lines


def render_card(model, result) -> str:
    """The card's Markdown."""
    sections = [_front_matter(result), _summary(model, result), "## Load it"]
    if _has_standard(result):
        sections.append("\n".join(_load_standard(result)))
    if result.format == "onnx":
        sections.append("\n".join(_load_onnx(result)))
    sections += ["\n".join(_parity(result)), "\n".join(_speed(result))]
    notes = list(result.notes)
    dropped = dropped_head(model) if result.kind != CROSS_ENCODER else None
    notes += [f"Not exported: {dropped}."] if dropped else []
    if notes:
        sections.append("\n".join(["## Notes", ""] + [f"- {note}" for note in notes]))
    return "\n\n".join(s for s in sections if s) + "\n"


def write_card(model, result) -> None:
    (result.path / "README.md").write_text(render_card(model, result), encoding="utf-8")
