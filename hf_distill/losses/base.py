"""What every loss component says about itself, so that nothing else has to.

A loss component is an `nn.Module` whose `forward(student_out, teacher_outs, batch)` returns a
dict of named terms. It declares, as class attributes:

- `terms`: one `Term` per name it may return, with the `DistillationArguments` field that weighs
  it (`weight_argument`) and a one-line description (the model card prints it);
- `requires`: what it reads from the forwards (`hidden_states`, `attentions`, `query_key`);
- `layer_outputs`: True when it reads the first teacher's layers (the trainer then checks that
  teacher's tokenizer and heads, and asks only that teacher for them);
- `method`: the key of the method it belongs to in `hf_distill.citations.METHODS` (card tags and
  citations), or None;
- `switch`: for components in the registry, the argument whose value > 0 switches it on; with
  `from_arguments(args, student_config, teacher_config)` building it.

The trainer weights and sums exactly the declared terms (`resolve_weights`), so a term that is
logged but left out of the loss, or returned by two components, cannot happen silently.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import nn

__all__ = ["LossComponent", "Term", "check_returned_terms", "declared_terms", "resolve_weights"]


@dataclass(frozen=True)
class Term:
    """One named term of a loss component.

    Args:
        name: the key in the component's output dict (and in the training logs).
        weight_argument: the `DistillationArguments` field that weighs the term, or None (weight 1).
        description: one line for the model card.
        weight: optional rule `weight(args, annealing_lambda, has_teachers) -> float` used instead
            of reading `weight_argument` (the hard and soft terms follow alpha and annealing).
        group: a second `term_weights` key that also sets this term (the per-teacher `soft_k` terms
            answer to `soft`).
    """

    name: str
    weight_argument: str | None
    description: str
    weight: Callable[[Any, float | None, bool], float] | None = None
    group: str | None = None

    def weight_from(self, args, annealing_lambda: float | None = None, has_teachers: bool = True) -> float:
        """The term's weight from the arguments alone (no explicit `term_weights`)."""
        if self.weight is not None:
            return float(self.weight(args, annealing_lambda, has_teachers))
        if self.weight_argument is None:
            return 1.0
        return float(getattr(args, self.weight_argument))


class LossComponent(nn.Module):
    """Base class of loss components: declares terms, requirements, method and citation (see module doc)."""

    terms: ClassVar[tuple[Term, ...]] = ()
    requires: set[str] = set()
    requires_alignment: bool = False
    layer_outputs: bool = False
    method: ClassVar[str | None] = None
    switch: ClassVar[str | None] = None
    switch_help: ClassVar[str] = ""

    @classmethod
    def from_arguments(cls, args, student_config, teacher_config) -> "LossComponent":
        """The component as `DistillationArguments` configure it (registry components only)."""
        raise NotImplementedError(f"{cls.__name__} is not built from arguments; pass it in loss_components.")

    def declared_terms(self) -> tuple[Term, ...]:
        """The terms this instance may return (an instance may narrow the class's list)."""
        return type(self).terms

    def describe(self) -> dict[str, Any]:
        """What the component is, for logs and the model card."""
        return {
            "component": type(self).__name__,
            "method": self.method,
            "requires": sorted(self.requires),
            "terms": {t.name: {"weight_argument": t.weight_argument, "description": t.description} for t in self.declared_terms()},
        }


def declared_terms(components: Iterable[nn.Module]) -> dict[str, tuple[Term, nn.Module]]:
    """Every declared term by name, with its component; two components declaring one name is an error."""
    found: dict[str, tuple[Term, nn.Module]] = {}
    for component in components:
        if not isinstance(component, LossComponent):
            raise ValueError(
                f"loss component {type(component).__name__} is not valid; subclass hf_distill.losses.LossComponent "
                "and declare its terms."
            )
        for term in component.declared_terms():
            if term.name in found:
                other = type(found[term.name][1]).__name__
                raise ValueError(
                    f"loss term {term.name!r} is returned by both {other} and {type(component).__name__}; "
                    "every term needs one owner (rename one, or drop the duplicate component)."
                )
            found[term.name] = (term, component)
    return found


def check_returned_terms(component: nn.Module, returned: Mapping[str, torch.Tensor]) -> None:
    """A component may return only the terms it declared (so none is logged without being weighted)."""
    names = {t.name for t in component.declared_terms()}
    extra = sorted(set(returned) - names)
    if extra:
        raise ValueError(
            f"{type(component).__name__} returned the undeclared terms {extra}; declare them in its `terms` "
            f"(declared: {sorted(names)})."
        )


def resolve_weights(
    components: Iterable[nn.Module],
    args,
    term_weights: Mapping[str, float] | None = None,
    annealing_lambda: float | None = None,
    has_teachers: bool = True,
) -> dict[str, float]:
    """The weight of every declared term: explicit `term_weights` (by name, then group), then the arguments.

    The trainer calls it every step and the model card once: both read the same weights.
    """
    term_weights = term_weights or {}
    weights: dict[str, float] = {}
    for name, (term, _) in declared_terms(components).items():
        if name in term_weights:
            weights[name] = float(term_weights[name])
        elif term.group is not None and term.group in term_weights:
            weights[name] = float(term_weights[term.group])
        else:
            weights[name] = term.weight_from(args, annealing_lambda, has_teachers)
    return weights
