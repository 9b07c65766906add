"""Build the layer-level loss components that `DistillationArguments` asks for by weight.

`hidden_weight > 0` adds a `HiddenStateLoss`, `attention_weight > 0` an `AttentionLoss`,
`embedding_weight > 0` an `EmbeddingLoss`, `emd_weight > 0` an `EMDLayerLoss`, `virt_weight > 0` a
`VirtualInteractionLoss`, each sized from
the student and teacher configs, unless a component of that type was given explicitly.
"""

from __future__ import annotations

from collections.abc import Sequence

from torch import nn

from .emd import EMDLayerLoss
from .layers import AttentionLoss, EmbeddingLoss, HiddenStateLoss
from .virt import VirtualInteractionLoss


def parse_layer_mapping(value: str):
    """'uniform' | 'last' | '1:2,2:4' (student:teacher pairs, 1-based) -> what `get_mapping` takes."""
    if ":" not in value:
        return value
    try:
        return [tuple(int(x) for x in pair.split(":")) for pair in value.split(",")]
    except ValueError:
        raise ValueError(
            f"layer_mapping={value!r} is not valid; use 'uniform', 'last' or student:teacher pairs like '1:2,2:4'."
        ) from None


def components_from_arguments(args, student_config, teacher_config, given: Sequence[nn.Module]) -> list[nn.Module]:
    """The components the argument weights switch on, skipping types the caller already gave."""
    have = {type(component) for component in given}
    student_dim, teacher_dim = student_config.hidden_size, teacher_config.hidden_size
    student_layers, teacher_layers = student_config.num_hidden_layers, teacher_config.num_hidden_layers
    mapping = parse_layer_mapping(args.layer_mapping)
    built: list[nn.Module] = []
    if args.embedding_weight > 0 and EmbeddingLoss not in have:
        built.append(EmbeddingLoss(student_dim, teacher_dim))
    if args.hidden_weight > 0 and HiddenStateLoss not in have:
        built.append(HiddenStateLoss(student_dim, teacher_dim, student_layers, mapping, args.shared_projection))
    if args.attention_weight > 0 and AttentionLoss not in have:
        built.append(AttentionLoss(mapping, kind=args.attention_loss))
    if args.emd_weight > 0 and EMDLayerLoss not in have:
        built.append(EMDLayerLoss(student_layers, teacher_layers, student_dim, teacher_dim))
    if args.virt_weight > 0 and VirtualInteractionLoss not in have:
        built.append(VirtualInteractionLoss(mapping))
    return built
