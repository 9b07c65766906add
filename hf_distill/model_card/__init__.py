"""Model cards for distilled students, filled from what the trainer saw (sentence-transformers' way).

`build_model_card(trainer)` reads the teachers, the loss components' own declarations and the
weights the trainer uses (`hf_distill.losses.resolve_weights`), the data, the evaluation
results and the arguments; `write_model_card` saves it as README.md. The trainer writes it at
every final `save_model` and refreshes it when later evaluations log metrics.

    models.py           names (never an absolute path), sizes, shapes
    teacher_records.py  each teacher's name, size and saved results; offline ones via the labelled dataset
    losses.py           methods, the loss formula and its terms, layer mappings, citations
    training.py         data, evaluation, hyperparameters, versions
    render.py           the card itself (Jinja2 template `hf_distill/templates/distilled_student.md`)
    speed.py            the optional speed table
    callback.py         writing at save, refreshing after evaluation
"""

from ..citations import CITATIONS, METHODS, Method
from .callback import ModelCardCallback, write_card_on_save
from .card_data import DistillationModelCardData
from .losses import detect_methods
from .render import build_model_card, write_model_card
from .speed import measure_speed

__all__ = [
    "CITATIONS",
    "METHODS",
    "DistillationModelCardData",
    "Method",
    "ModelCardCallback",
    "build_model_card",
    "detect_methods",
    "measure_speed",
    "write_card_on_save",
    "write_model_card",
]
