"""Layer mappings g: which teacher layer each student layer learns from.

Layers are numbered 1..L over the transformer blocks (``hidden_states[i]`` is the output of
block i); 0 is the embedding output, which the embedding loss handles on its own, so no
mapping here ever names layer 0.

- ``uniform`` (TinyBERT's "skip"): student layer i <-> teacher layer floor(i * L_T / L_S).
  With L_T a multiple of L_S this is exactly i * L_T / L_S (6 -> 2: 1<->3, 2<->6); otherwise
  the floor keeps the last student layer on the last teacher layer. It agrees with
  `CrossEncoderModel.from_teacher(..., strategy="uniform")`, which keeps those same teacher blocks.
- ``last``: the student's layers face the teacher's top L_S layers in order,
  student layer i <-> teacher layer L_T - L_S + i.
- explicit pairs: ``[(1, 2), (2, 4), (2, 6)]``; one student layer may face several teacher layers.

Example:
    >>> get_mapping("uniform").pairs(2, 6)
    [(1, 3), (2, 6)]
    >>> get_mapping([(1, 1), (2, 6)]).pairs(2, 6)
    [(1, 1), (2, 6)]
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

__all__ = ["ExplicitMapping", "LastMapping", "LayerMapping", "MAPPINGS", "UniformMapping", "get_mapping"]


def _check_depths(num_student_layers: int, num_teacher_layers: int) -> None:
    for name, value in (("num_student_layers", num_student_layers), ("num_teacher_layers", num_teacher_layers)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}={value!r} is not valid; it must be an integer >= 1.")


class LayerMapping:
    """Base class: `pairs(L_S, L_T)` lists the (student layer, teacher layer) pairs, 1-based."""

    name: str = "custom"

    def pairs(self, num_student_layers: int, num_teacher_layers: int) -> list[tuple[int, int]]:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class _OneToOneMapping(LayerMapping):
    """Shared check of the named strategies: every student layer gets one teacher layer."""

    def pairs(self, num_student_layers: int, num_teacher_layers: int) -> list[tuple[int, int]]:
        _check_depths(num_student_layers, num_teacher_layers)
        if num_student_layers > num_teacher_layers:
            raise ValueError(
                f"mapping={self.name!r} needs a student no deeper than the teacher, got num_student_layers="
                f"{num_student_layers} > num_teacher_layers={num_teacher_layers}; give explicit pairs instead."
            )
        return [(i, self._teacher_layer(i, num_student_layers, num_teacher_layers)) for i in range(1, num_student_layers + 1)]

    def _teacher_layer(self, i: int, num_student_layers: int, num_teacher_layers: int) -> int:
        raise NotImplementedError


class UniformMapping(_OneToOneMapping):
    """TinyBERT's "skip" mapping: student layer i <-> teacher layer floor(i * L_T / L_S)."""

    name = "uniform"

    def _teacher_layer(self, i: int, num_student_layers: int, num_teacher_layers: int) -> int:
        return i * num_teacher_layers // num_student_layers


class LastMapping(_OneToOneMapping):
    """The student's layers face the teacher's last L_S layers: i <-> L_T - L_S + i."""

    name = "last"

    def _teacher_layer(self, i: int, num_student_layers: int, num_teacher_layers: int) -> int:
        return num_teacher_layers - num_student_layers + i


class ExplicitMapping(LayerMapping):
    """A fixed list of (student layer, teacher layer) pairs, 1-based, checked against the depths.

    Args:
        pairs: non-empty sequence of (student, teacher) integer pairs; duplicates are refused.
    """

    name = "explicit"

    def __init__(self, pairs: Iterable[Sequence[int]]):
        checked: list[tuple[int, int]] = []
        for pair in pairs:
            if (
                not isinstance(pair, (tuple, list))
                or len(pair) != 2
                or any(isinstance(v, bool) or not isinstance(v, int) for v in pair)
            ):
                raise ValueError(f"mapping pair {pair!r} is not valid; give (student_layer, teacher_layer) integer pairs.")
            checked.append((int(pair[0]), int(pair[1])))
        if not checked:
            raise ValueError("mapping=[] is not valid; give at least one (student_layer, teacher_layer) pair.")
        if len(set(checked)) != len(checked):
            raise ValueError(f"mapping={checked!r} repeats a pair; give each (student_layer, teacher_layer) once.")
        self._pairs = checked

    def pairs(self, num_student_layers: int, num_teacher_layers: int) -> list[tuple[int, int]]:
        _check_depths(num_student_layers, num_teacher_layers)
        for student, teacher in self._pairs:
            if not (1 <= student <= num_student_layers and 1 <= teacher <= num_teacher_layers):
                raise ValueError(
                    f"mapping pair {(student, teacher)!r} is out of range: student layers are 1..{num_student_layers} "
                    f"and teacher layers 1..{num_teacher_layers} (0, the embeddings, is handled by the embedding loss)."
                )
        return list(self._pairs)

    def __repr__(self) -> str:
        return f"ExplicitMapping({self._pairs!r})"


MAPPINGS: dict[str, type[LayerMapping]] = {"uniform": UniformMapping, "last": LastMapping}


def get_mapping(name_or_pairs: str | Sequence[Sequence[int]] | LayerMapping) -> LayerMapping:
    """A mapping by name ("uniform", "last"), from explicit (student, teacher) pairs, or passed through."""
    if isinstance(name_or_pairs, LayerMapping):
        return name_or_pairs
    if isinstance(name_or_pairs, str):
        if name_or_pairs not in MAPPINGS:
            raise ValueError(
                f"mapping={name_or_pairs!r} is not valid; choose one of {', '.join(map(repr, MAPPINGS))} "
                "or a list of (student_layer, teacher_layer) pairs."
            )
        return MAPPINGS[name_or_pairs]()
    if isinstance(name_or_pairs, Iterable):
        return ExplicitMapping(name_or_pairs)
    raise ValueError(
        f"mapping={name_or_pairs!r} is not valid; choose one of {', '.join(map(repr, MAPPINGS))} "
        "or a list of (student_layer, teacher_layer) pairs."
    )


def parse_layer_mapping(value: str) -> LayerMapping:
    """The `layer_mapping` argument as a mapping: 'uniform' | 'last' | '1:2,2:4' (student:teacher pairs, 1-based)."""
    valid = "use 'uniform', 'last' or student:teacher pairs like '1:2,2:4'"
    if not isinstance(value, str):
        raise ValueError(f"layer_mapping={value!r} is not valid; {valid}.")
    if ":" not in value:
        if value not in MAPPINGS:
            raise ValueError(f"layer_mapping={value!r} is not valid; {valid}.")
        return MAPPINGS[value]()
    try:
        pairs = [tuple(int(x) for x in pair.split(":")) for pair in value.split(",")]
    except ValueError:
        pairs = []
    if not pairs or any(len(pair) != 2 or min(pair) < 1 for pair in pairs):
        raise ValueError(f"layer_mapping={value!r} is not valid; {valid} (each layer an integer >= 1).")
    try:
        return ExplicitMapping(pairs)
    except ValueError as error:
        raise ValueError(f"layer_mapping={value!r} is not valid: {error}") from None
