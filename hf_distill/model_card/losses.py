"""What the card says about the loss: methods, the formula, one row per term, layer mappings.

Everything comes from the loss components' own declarations (`LossComponent.terms`, `method`,
`citation`) and from `resolve_weights`, the function the trainer weights its terms with, so the
card and the training cannot disagree.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass

from ..citations import CITATIONS, METHODS, Method
from ..losses.base import Term, declared_terms, resolve_weights
from .models import num_layers

__all__ = ["ActiveTerm", "active_terms", "citations", "detect_methods", "emd_pictures", "loss_rows", "mappings"]

EMD_PICTURES = (("emd_flow.png", "BERT-EMD flow matrix"), ("emd_layer_weights.png", "BERT-EMD layer weights"))
_PREDICTION_ARGUMENTS = ("hard_weight", "soft_weight")


@dataclass(frozen=True)
class ActiveTerm:
    """A term that is in the loss: its declaration, its component and its weight (as text)."""

    term: Term
    component: object
    weight: str


def has_teachers(trainer) -> bool:
    return bool(getattr(trainer, "teachers", None) or getattr(trainer, "offline_columns", None))


def _annealed(trainer) -> bool:
    return trainer.args.annealing == "linear" and has_teachers(trainer)


def active_terms(trainer) -> list[ActiveTerm]:
    """The terms with a weight > 0 (annealed hard/soft terms always), in component order."""
    teachers, annealed = has_teachers(trainer), _annealed(trainer)
    labels = getattr(trainer, "_has_labels", True)
    explicit = getattr(trainer, "term_weights", {})
    weights = resolve_weights(trainer.loss_components, trainer.args, explicit, None, teachers)
    at_start = resolve_weights(trainer.loss_components, trainer.args, explicit, 0.0, teachers)  # lambda = 0: soft shares
    active = []
    for name, (term, component) in declared_terms(trainer.loss_components).items():
        if name == "hard" and not labels:  # teachers only, or query groups: no gold label reaches the hard loss
            continue
        if annealed and term.weight_argument in _PREDICTION_ARGUMENTS and name not in explicit:
            share = at_start[name]
            text = "λ" if name == "hard" else "1 − λ" if abs(share - 1.0) < 1e-9 else f"{share:g}·(1 − λ)"
            active.append(ActiveTerm(term, component, text))
        elif weights[name] > 0:
            active.append(ActiveTerm(term, component, f"{weights[name]:g}"))
    return active


def detect_methods(trainer) -> list[Method]:
    """The methods this trainer runs: those its active terms' components belong to, and annealing (DvBERT)."""
    active = active_terms(trainer)
    found = {a.component.method for a in active if a.component.method and a.term.name != "hard"}
    if _annealed(trainer):
        found |= {"logit_kd", "dvbert"}
    # BERT-EMD transfers embeddings with TinyBERT's loss: next to EMD alone, that loss is part of BERT-EMD.
    layer_terms = {a.term.name for a in active if a.component.method == "tinybert"}
    if "bert_emd" in found and layer_terms <= {"embedding"}:
        found.discard("tinybert")
    return [method for key, method in METHODS.items() if key in found]


def citations(trainer, methods: list[Method]) -> list[dict[str, str]]:
    """BibTeX entries of the methods run, plus any a component carries itself (`citation`)."""
    entries = [CITATIONS[key] for method in methods for key in method.citations]
    for component in trainer.loss_components:
        own = getattr(component, "citation", None)
        if own and own not in [e["bibtex"] for e in entries]:
            entries.append({"title": type(component).__name__, "bibtex": own})
    return entries


def loss_rows(trainer) -> tuple[str, str, list[dict[str, str]]]:
    """The total loss as a formula, a note on its schedule, and one row per active term (name, weight, description)."""
    active = active_terms(trainer)
    rows = [{"name": a.term.name, "weight": a.weight, "description": _description(trainer, a)} for a in active]
    parts = [
        a.term.name if a.weight == "1" and not has_teachers(trainer)
        else f"({a.weight})·{a.term.name}" if " " in a.weight else f"{a.weight}·{a.term.name}"
        for a in active
    ]
    note = ", with `λ = global_step / max_steps` rising linearly from 0 to 1" if _annealed(trainer) else ""
    return "L = " + " + ".join(parts), note, rows


def _description(trainer, active: ActiveTerm) -> str:
    if active.term.name == "hard" and not has_teachers(trainer):
        return "task loss on the gold labels (no teacher: fine-tuning)"
    if active.term.weight_argument == "soft_weight":
        count = len(trainer.teachers) or len(trainer.offline_columns)
        combine = f", {trainer.args.teacher_reduction} over {count} teachers" if count > 1 else ""
        return active.term.description + combine
    return active.term.description


def mappings(trainer) -> list[str]:
    """One line per layer loss: which student layer learns from which teacher layer (or the EMD weights)."""
    student_layers = num_layers(trainer.model)
    teacher = trainer.teachers[0] if getattr(trainer, "teachers", None) else None
    teacher_layers = num_layers(teacher) if teacher is not None else None
    if student_layers is None or teacher_layers is None:
        return []
    lines: list[str] = []
    seen: set[int] = set()
    for active in active_terms(trainer):
        component = active.component
        if id(component) in seen or not getattr(component, "layer_outputs", False):
            continue
        seen.add(id(component))
        line = _mapping_line(component, active.term.name, student_layers, teacher_layers)
        if line:
            lines.append(line)
    return lines


def _mapping_line(component, term: str, student_layers: int, teacher_layers: int) -> str | None:
    if hasattr(component, "layer_weights"):
        weights = {k: ", ".join(f"{float(x):.3f}" for x in v) for k, v in component.layer_weights().items()}
        detail = "; ".join(f"{k.replace('_', ' ')} weights [{v}]" for k, v in weights.items())
        terms = ", ".join(t.name for t in component.declared_terms())
        return (
            f"BERT-EMD ({terms}): all {student_layers} × {teacher_layers} student × teacher layer pairs, "
            f"weighted by the EMD flow; final {detail}."
        )
    if term == "embedding":
        return "embedding: student embedding output (layer 0) → teacher embedding output (layer 0)."
    mapping = getattr(component, "mapping", None)
    if mapping is None:
        return None
    try:
        pairs = mapping.pairs(student_layers, teacher_layers)
    except ValueError as error:
        return f"{term}: {error}"
    text = ", ".join(f"{i} → {j}" for i, j in pairs)
    label = getattr(mapping, "name", type(mapping).__name__)
    return f"{term} ({label}; student layer → teacher layer, 1-based): {text}."


def emd_pictures(trainer, output_dir: str) -> list[dict[str, str]]:
    """The EMD pictures in the output folder (copied there from `args.output_dir` when saving elsewhere)."""
    pictures = []
    for filename, alt in EMD_PICTURES:
        target = os.path.join(output_dir, filename)
        source = os.path.join(trainer.args.output_dir, filename)
        if not os.path.exists(target) and os.path.exists(source) and os.path.abspath(source) != os.path.abspath(target):
            os.makedirs(output_dir, exist_ok=True)
            shutil.copyfile(source, target)
        if os.path.exists(target):
            pictures.append({"alt": alt, "path": filename})
    return pictures
