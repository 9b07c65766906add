"""Find and load the student to export, and the facts about it that every format needs.

A student is a folder saved by `CrossEncoderModel`/`SiameseModel.save_pretrained` (or such a model
in memory). Anything else is refused with one line that names the folder and what it holds.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

from transformers import PretrainedConfig

from ..modeling import CrossEncoderConfig, CrossEncoderModel, SiameseConfig, SiameseModel
from ..modeling.modeling_common import drop_local_path
from .errors import ExportError

__all__ = [
    "BI_ENCODER",
    "CROSS_ENCODER",
    "load_student",
    "max_sequence_length",
    "portable_config",
    "sample_pairs",
    "student_kind",
]

CROSS_ENCODER = "cross-encoder"
BI_ENCODER = "bi-encoder"
_STUDENT_TYPES = {CrossEncoderConfig.model_type: CrossEncoderModel, SiameseConfig.model_type: SiameseModel}

# Pairs of different lengths (so a batch of them pads) for parity checks and the card.
_SAMPLE_PAIRS = [
    ("A man is playing a guitar.", "Someone plays music on a stage."),
    ("The cat sits on the mat.", "A dog runs through the park in the rain."),
    ("How do I reset my password?", "Click 'Forgot password' on the sign-in page and follow the link we e-mail you."),
    ("Stocks fell sharply on Monday.", "Markets dropped at the start of the week."),
    ("Water boils at 100 degrees Celsius at sea level.", "Ice melts."),
    ("Where is the train station?", "The station is two blocks north of the city hall, next to the river."),
    ("She won the race.", "She lost the race."),
]


def sample_pairs() -> list[tuple[str, str]]:
    """A few text pairs of different lengths: what parity is measured on."""
    return list(_SAMPLE_PAIRS)


def load_student(student) -> CrossEncoderModel | SiameseModel:
    """The student in eval mode: a loaded model as is, or a saved student folder (checked first)."""
    model = student if isinstance(student, (CrossEncoderModel, SiameseModel)) else _load_folder(student)
    if model.tokenizer is None:
        raise ExportError("the student has no tokenizer: save it with its tokenizer (or set model.tokenizer) first.")
    return model.eval()


def _load_folder(student) -> CrossEncoderModel | SiameseModel:
    folder = Path(student)
    if not folder.is_dir():
        raise ExportError(f"student folder {str(student)!r} does not exist.")
    model_type = _model_type(folder)
    if model_type not in _STUDENT_TYPES:
        raise ExportError(
            f"{str(student)!r} is not an hf_distill student: its config.json has model_type={model_type!r}; "
            f"expected one of {sorted(_STUDENT_TYPES)} (a folder saved by a student's save_pretrained)."
        )
    return _STUDENT_TYPES[model_type].from_pretrained(folder)


def _model_type(folder: Path) -> str | None:
    config_file = folder / "config.json"
    if not config_file.is_file():
        raise ExportError(f"{str(folder)!r} is not an hf_distill student: it has no config.json.")
    try:
        return json.loads(config_file.read_text(encoding="utf-8")).get("model_type")
    except (json.JSONDecodeError, AttributeError) as error:
        raise ExportError(f"{str(config_file)!r} is not a valid JSON configuration: {error}.") from error


def student_kind(student: CrossEncoderModel | SiameseModel) -> str:
    """"cross-encoder" (scores a joint pair) or "bi-encoder" (embeds each text)."""
    return CROSS_ENCODER if isinstance(student, CrossEncoderModel) else BI_ENCODER


def portable_config(config: PretrainedConfig) -> PretrainedConfig:
    """A copy of a backbone config without the machine-local `_name_or_path` (it would reach the Hub)."""
    config = copy.deepcopy(config)
    drop_local_path(config)
    return config


def max_sequence_length(student: CrossEncoderModel | SiameseModel) -> int:
    """The longest input the student's tokenizer produces (its `model_max_length`, else the backbone's positions)."""
    limit = getattr(student.tokenizer, "model_max_length", None)
    positions = int(getattr(student.config.encoder, "max_position_embeddings", 512))
    return int(limit) if limit and limit < 1_000_000 else positions
