"""Configurations of the two student families: a Siamese bi-encoder and a cross-encoder.

Both wrap an arbitrary backbone configuration (BERT, RoBERTa, MiniLM, MPNet, ELECTRA...)
stored as the ``encoder`` sub-config, so a saved student is a normal Hub folder.
This file imports nothing from ``hf_distill`` so that it can travel with a saved model
for ``trust_remote_code=True`` loading.
"""

from __future__ import annotations

from transformers import AutoConfig, PretrainedConfig
from transformers.configuration_utils import SubConfigSpec

POOLING_MODES = ("mean", "cls", "max")
SIAMESE_HEADS = ("classification", "cosine", "none")
INTERACTIONS = ("none", "virt")


def _check_choice(field: str, value: object, valid: tuple[str, ...]) -> None:
    if value not in valid:
        raise ValueError(f"{field}={value!r} is not valid; choose one of {', '.join(map(repr, valid))}.")


class SiameseConfig(PretrainedConfig):
    r"""Configuration of [`SiameseModel`]: one shared backbone encodes each side of a pair.

    Args:
        encoder (`dict` or `PretrainedConfig`): configuration of the backbone (any `AutoModel`).
        pooling (`str`): how token states become a sentence embedding: `"mean"` (default), `"cls"` or `"max"`.
        head (`str`): `"classification"` (softmax over features of (u, v)), `"cosine"` (cosine
            similarity as a regression score) or `"none"` (embeddings only).
        use_product (`bool`): add u*v to the classifier features (u, v, |u-v|).
        interaction (`str`): `"none"` or `"virt"` (VIRT-adapted interaction layer at match time:
            X~ = mean over heads of softmax(Q_X K_Y^T / sqrt(d_head) + mask_Y) H_Y with the backbone's
            last-layer queries/keys, likewise Y~; the head reads u = pool([H_X; X~]), v = pool([H_Y; Y~])
            as [u; v; |u-v|; max(u, v)]; no extra parameters; `encode()` embeddings stay independent).
        classifier_dropout (`float`): dropout before the classification layer.
        output_dim (`int`, optional): width of a learned output layer Linear(hidden, output_dim) applied to
            the pooled embeddings (e.g. a distillation projection kept as part of the student); None: none.
    """

    model_type = "hf_distill_siamese"
    sub_configs_defaults = {"encoder": SubConfigSpec(config_class=AutoConfig, model_type="bert")}

    encoder: PretrainedConfig | dict | None = None
    pooling: str = "mean"
    head: str = "classification"
    use_product: bool = False
    interaction: str = "none"
    classifier_dropout: float = 0.0
    output_dim: int | None = None

    def __post_init__(self, **kwargs):
        super().__post_init__(**kwargs)
        _check_choice("pooling", self.pooling, POOLING_MODES)
        _check_choice("head", self.head, SIAMESE_HEADS)
        _check_choice("interaction", self.interaction, INTERACTIONS)
        if self.head == "cosine":
            self.problem_type = "regression"
        if not 0.0 <= float(self.classifier_dropout) < 1.0:
            raise ValueError(f"classifier_dropout={self.classifier_dropout!r} must be in [0, 1).")
        if self.output_dim is not None and (isinstance(self.output_dim, bool) or not isinstance(self.output_dim, int) or self.output_dim < 1):
            raise ValueError(f"output_dim={self.output_dim!r} is not valid; give a positive integer or None.")


class CrossEncoderConfig(PretrainedConfig):
    r"""Configuration of [`CrossEncoderModel`]: the backbone reads the joint pair `[CLS] a [SEP] b [SEP]`.

    Args:
        encoder (`dict` or `PretrainedConfig`): configuration of the backbone (any `AutoModel`).
        num_labels (`int`): classes of the head; 1 means regression (a single score).
        classifier_dropout (`float`): dropout before the output layer.
    """

    model_type = "hf_distill_cross_encoder"
    sub_configs_defaults = {"encoder": SubConfigSpec(config_class=AutoConfig, model_type="bert")}

    encoder: PretrainedConfig | dict | None = None
    classifier_dropout: float = 0.1

    def __post_init__(self, **kwargs):
        super().__post_init__(**kwargs)
        if self.num_labels == 1 and self.problem_type is None:
            self.problem_type = "regression"
        if not 0.0 <= float(self.classifier_dropout) < 1.0:
            raise ValueError(f"classifier_dropout={self.classifier_dropout!r} must be in [0, 1).")
