"""`DistillationModelCardData`: what the trainer cannot infer for the card (license, language, speed...)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

__all__ = ["DistillationModelCardData"]


@dataclass
class DistillationModelCardData:
    """What the trainer cannot infer; set fields on `trainer.model_card_data` before saving.

    Args:
        model_name: title of the card (default: `hub_model_id`, else the output folder's name).
        language, license: Hub metadata (e.g. "en", "apache-2.0").
        tags: extra Hub tags, added to the inferred ones.
        base_model: Hub id(s) of the model(s) the student derives from (default: the teachers'
            `name_or_path` when they are Hub ids, else the student backbone's).
        datasets: Hub id(s) of the training data (default: inferred from the datasets cache path).
        teachers: names (or `teacher_record` dicts) of teachers the trainer never saw (offline, precomputed
            logits); by default the record `add_teacher_logits` left in the training set.
        speed: filled by `measure_speed` (or by hand): {"rows": [{"name", "pairs_per_s"}...], ...}.
        template_path: another Jinja2 template (default: the packaged `distilled_student.md`).
    """

    model_name: str | None = None
    language: str | list[str] | None = None
    license: str | None = None
    tags: list[str] = field(default_factory=list)
    base_model: str | list[str] | None = None
    datasets: str | list[str] | None = None
    teachers: list[str] = field(default_factory=list)
    speed: dict[str, Any] | None = None
    template_path: str | None = None

    def update(self, **values: Any) -> None:
        """Set the given fields that are not None (tags are merged, not replaced)."""
        names = {f.name for f in fields(self)}
        for name, value in values.items():
            if value is None:
                continue
            if name not in names:
                raise ValueError(f"{name}={value!r} is not a model card field; valid: {', '.join(sorted(names))}.")
            if name == "tags":
                value = [value] if isinstance(value, str) else list(value)
                self.tags = list(dict.fromkeys([*self.tags, *value]))
            else:
                setattr(self, name, value)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
