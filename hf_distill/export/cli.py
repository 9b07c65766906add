"""`hf-distill export STUDENT_DIR OUT_DIR [--format F] [--quantize int8]`: the command line of `export_student`.

Problems the user can fix (no such folder, not a student, a missing extra, a family without a
standard head) print one line and exit 2, without a traceback.
"""

from __future__ import annotations

import argparse
import sys

from transformers.utils import logging as transformers_logging

from .api import FORMATS, export_student
from .errors import ExportError

__all__ = ["build_parser", "main"]

PROG = "hf-distill export"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Export a distilled student so that it loads without hf_distill: the backbone's own "
        "transformers checkpoint, sentence-transformers' layout, or ONNX (optionally int8).",
    )
    parser.add_argument("student_dir", metavar="STUDENT_DIR", help="a student folder saved by hf_distill")
    parser.add_argument("out_dir", metavar="OUT_DIR", help="where the exported model and its README.md go")
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default=None,
        help="default: transformers for a cross-encoder, sentence-transformers for a Siamese student (onnx with --quantize)",
    )
    parser.add_argument("--quantize", choices=["int8"], default=None, help="add a dynamic int8 ONNX graph")
    parser.add_argument("--normalize", action="store_true", help="Siamese students: add a Normalize module (unit-length embeddings)")
    parser.add_argument("--no-speed", dest="measure_speed", action="store_false", help="skip the speed measurement for the card")
    return parser


def _report(result) -> str:
    lines = [f"exported the {result.kind} as {result.format} to {result.path}"]
    lines += [f"  {label}: max abs difference {entry['max_abs_diff']:.2e}" for label, entry in result.parity.items()]
    lines += [f"  note: {note}" for note in result.notes]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the export; 0 on success, 2 with one error line on a problem the user can fix."""
    try:
        opts = build_parser().parse_args(argv)
    except SystemExit as exit_:  # argparse already printed usage and the error
        return int(exit_.code or 0)
    bars = transformers_logging.is_progress_bar_enabled()
    transformers_logging.disable_progress_bar()  # load/save bars would bury the report
    try:
        result = export_student(
            opts.student_dir,
            opts.out_dir,
            format=opts.format,
            quantize=opts.quantize,
            normalize=opts.normalize,
            measure_speed=opts.measure_speed,
        )
    except ExportError as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 2
    finally:
        if bars:
            transformers_logging.enable_progress_bar()
    print(_report(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
