"""Students that deploy anywhere: standard transformers / sentence-transformers checkpoints, ONNX, int8.

`export_student(student_dir, out_dir, format=..., quantize=...)` (the Python side of
`hf-distill export`) writes a folder that loads without hf_distill; `load_onnx_student` runs an
exported ONNX graph with the PyTorch students' `predict(pairs)` / `encode(texts)` calls.
onnx and onnxruntime (`pip install 'hf_distill[onnx]'`) are imported only when an ONNX graph
is written or run.
"""

from .api import FORMATS, ExportResult, default_format, export_student
from .errors import ExportError
from .runtime import OnnxBiEncoder, OnnxCrossEncoder, load_onnx_student

__all__ = [
    "FORMATS",
    "ExportError",
    "ExportResult",
    "OnnxBiEncoder",
    "OnnxCrossEncoder",
    "default_format",
    "export_student",
    "load_onnx_student",
]
