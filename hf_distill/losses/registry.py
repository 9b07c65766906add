"""The loss components that `DistillationArguments` switch on by weight: one entry per component.

Each entry is a `LossComponent` class with a `switch` (the weight argument that turns it on,
which also becomes a `DistillationArguments` field, documented by `switch_help`) and a
`from_arguments` factory. A new method is one loss file, one `register_loss` line here, and a
preset in `hf_distill.methods`: the trainer, the arguments and the model card read only this.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from torch import nn

from .base import LossComponent
from .emd import EMDLayerLoss
from .embedding_mse import EmbeddingMSELoss
from .group_contrastive import GroupContrastiveLoss
from .in_batch_negatives import InBatchNegativesLoss
from .layers import AttentionLoss, EmbeddingLoss, HiddenStateLoss
from .listwise_kl import ListwiseKLLoss
from .margin_mse import MarginMSELoss
from .similarity_structure import SimilarityStructureLoss
from .virt import VirtualInteractionLoss

__all__ = ["LOSS_COMPONENTS", "build_components", "register_loss", "switch_arguments"]

LOSS_COMPONENTS: list[type[LossComponent]] = []


def register_loss(component: type[LossComponent]) -> type[LossComponent]:
    """Add a component class to the registry (usable as a decorator); its `switch` must be new."""
    if not (isinstance(component, type) and issubclass(component, LossComponent)) or not component.switch:
        raise ValueError(f"register_loss({component!r}) is not valid; give a LossComponent class with a `switch` argument.")
    if not component.terms:
        raise ValueError(f"register_loss({component.__name__}): declare its `terms` first.")
    taken = {entry.switch: entry for entry in LOSS_COMPONENTS}
    if component.switch in taken and taken[component.switch] is not component:
        raise ValueError(
            f"register_loss({component.__name__}): switch {component.switch!r} already belongs to {taken[component.switch].__name__}."
        )
    if component not in LOSS_COMPONENTS:
        LOSS_COMPONENTS.append(component)
    return component


for _component in (EmbeddingLoss, HiddenStateLoss, AttentionLoss, EMDLayerLoss, VirtualInteractionLoss):
    register_loss(_component)
for _component in (MarginMSELoss, ListwiseKLLoss, GroupContrastiveLoss, InBatchNegativesLoss):  # query groups (hf_distill.ranking_groups)
    register_loss(_component)
for _component in (EmbeddingMSELoss, SimilarityStructureLoss):  # embedding teachers (hf_distill.embedding_teachers)
    register_loss(_component)


def switch_arguments() -> dict[str, str]:
    """Every registered weight argument with its help text (the `DistillationArguments` weight fields)."""
    return {entry.switch: entry.switch_help or f"Weight (>= 0) of {entry.__name__}." for entry in LOSS_COMPONENTS}


def _requested(entry: type[LossComponent], args, term_weights: Mapping[str, float]) -> bool:
    """Switched on: an explicit term weight > 0, or else its weight argument > 0."""
    for term in entry.terms:
        if term.name in term_weights:
            if term_weights[term.name] > 0:
                return True
        elif term.weight_from(args) > 0:
            return True
    return False


def requested_components(args, term_weights: Mapping[str, float] | None = None) -> list[type[LossComponent]]:
    """The registered component classes that the arguments (and explicit term weights) switch on."""
    return [entry for entry in LOSS_COMPONENTS if _requested(entry, args, term_weights or {})]


def build_components(
    args, student_config, teacher_config, given: Sequence[nn.Module] = (), term_weights: Mapping[str, float] | None = None
) -> list[LossComponent]:
    """New components for every switched-on entry, skipping classes the caller already gave as objects."""
    have = {type(component) for component in given}
    wanted = [entry for entry in requested_components(args, term_weights) if entry not in have]
    online = [entry for entry in wanted if entry.layer_outputs]  # group losses read precomputed teacher scores
    if online and teacher_config is None:
        names = ", ".join(entry.switch for entry in online)
        raise ValueError(
            f"{names} > 0 need an online teacher (teachers=...): layer losses read the teacher's hidden states "
            "and attention, which precomputed logits do not carry."
        )
    return [entry.from_arguments(args, student_config, teacher_config) for entry in wanted]
