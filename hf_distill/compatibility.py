"""Checks that a teacher and a student can be distilled layer to layer, before any training.

Layer-level losses (hidden, attention, EMD, VIRT) compare token positions and attention
heads, so both models must tokenise identically and expose attention scores the same way.
Each mismatch is a `ValueError` naming what differs and what would be valid.
"""

from __future__ import annotations

from .modeling.modeling_common import attention_implementation

# Backbones whose attention scores are exactly Q K^T / sqrt(d): no relative-position bias.
QUERY_KEY_BACKBONES = ("bert", "roberta", "xlm-roberta", "electra", "camembert")


_PROBE_TEXTS = ("Hello, World! A man PLAYS the guitar; naïve café 42.", "someone plays music")
_SETTINGS = ("padding_side", "truncation_side", "model_input_names")


def same_tokenizer(a, b, settings: bool = False) -> bool:
    """Whether two tokenizers give the same ids: vocabulary, special tokens and normalisation (a probe pair).

    With `settings=True` they must also pad, truncate and name their inputs alike, so that any
    batch comes out as the same tensors (then one tokenisation can serve both).
    """
    if a is b:
        return True
    if settings and any(getattr(a, name, None) != getattr(b, name, None) for name in _SETTINGS):
        return False
    try:
        return (
            a.get_vocab() == b.get_vocab()
            and list(a.all_special_ids) == list(b.all_special_ids)
            and a(*_PROBE_TEXTS)["input_ids"] == b(*_PROBE_TEXTS)["input_ids"]
        )
    except (AttributeError, TypeError):
        return False


def check_layer_distillation(student, teacher, requires: set[str], index: int = 0, head_reduction: bool = False) -> None:
    """Refuse teacher/student pairs that layer losses cannot compare, with the reason."""
    if not requires:
        return
    student_tok, teacher_tok = getattr(student, "tokenizer", None), getattr(teacher, "tokenizer", None)
    if student_tok is not None and teacher_tok is not None and not same_tokenizer(student_tok, teacher_tok):
        raise ValueError(
            f"teachers[{index}] uses another tokenizer ({type(teacher_tok).__name__}, vocab {len(teacher_tok)}) than the "
            f"student ({type(student_tok).__name__}, vocab {len(student_tok)}); layer losses ({sorted(requires)}) compare "
            "token positions and need the same tokenizer (vocabulary and special tokens). Use logit distillation "
            "only, or a student built from this teacher."
        )
    if "query_key" in requires or "attentions" in requires:
        for who, model in (("student", student), (f"teachers[{index}]", teacher)):
            backbone = model.backbone
            implementation = attention_implementation(backbone)
            if implementation != "eager":
                raise ValueError(
                    f"{who} uses attn_implementation={implementation!r}; attention losses need 'eager' "
                    "(load it with attn_implementation=\"eager\")."
                )
            if backbone.config.model_type not in QUERY_KEY_BACKBONES:
                raise ValueError(
                    f"{who} backbone model_type={backbone.config.model_type!r} adds position terms to its attention "
                    f"scores, so they cannot be captured exactly; attention losses support {QUERY_KEY_BACKBONES}."
                )
        student_heads = student.backbone.config.num_attention_heads
        teacher_heads = teacher.backbone.config.num_attention_heads
        if student_heads != teacher_heads and not head_reduction:
            raise ValueError(
                f"student num_attention_heads={student_heads} differs from teachers[{index}] num_attention_heads="
                f"{teacher_heads}; attention losses need equal head counts (or an AttentionLoss/EMDLayerLoss with "
                "head_reduction='mean')."
            )
