"""Shared fixtures: tiny random BERT backbones, an offline tokenizer, tiny student models.

Nothing here touches the network: the tokenizer is built from a vocabulary file written to a
temporary directory, and every model is a randomly initialised BERT with hidden size 32.
"""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import random  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from transformers import BertConfig, BertModel, BertTokenizerFast  # noqa: E402

torch.set_num_threads(1)

SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = (
    "a the an is are was of to and in on at with for by it this that man woman person dog cat "
    "plays playing play guitar music piano sings song eats eating food bread apple car drives "
    "road street sits sitting chair table runs running park child children ball kick kicks red blue "
    "green big small happy sad quickly slowly someone something rain sun sunny sky water river boat "
    "house city day night . , ? !"
).split()
LETTERS = list("abcdefghijklmnopqrstuvwxyz")
TINY_VOCAB = list(dict.fromkeys(SPECIAL_TOKENS + WORDS + LETTERS + [f"##{c}" for c in LETTERS]))

# Different lengths on purpose: batches of them need padding.
SENTENCES = [
    "a man plays the guitar .",
    "the dog runs in the park",
    "a woman is eating bread",
    "children kick a red ball on the street at night",
    "it is a sunny day",
    "someone sings",
    "the cat sits on the chair",
]
PAIRS = [
    ("a man plays the guitar .", "someone plays music"),
    ("the dog runs in the park", "a cat sits on a chair at night"),
    ("a woman is eating bread", "the woman eats food"),
]
# TrainingArguments every tiny training test shares: CPU, seeded, a log line per step, nothing saved or reported.
QUIET_CPU_TRAINING = dict(
    per_device_train_batch_size=8,
    logging_steps=1,
    save_strategy="no",
    report_to="none",
    use_cpu=True,
    disable_tqdm=True,
    seed=0,
)


def seed_everything(seed: int = 0) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def make_bert_config(num_layers: int = 2, **overrides) -> BertConfig:
    """A tiny BERT configuration: hidden 32, 2 heads, intermediate 37, no dropout."""
    values = dict(
        vocab_size=len(TINY_VOCAB),
        hidden_size=32,
        num_hidden_layers=num_layers,
        num_attention_heads=2,
        intermediate_size=37,
        max_position_embeddings=64,
        type_vocab_size=2,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    values.update(overrides)
    return BertConfig(**values)


def make_siamese(
    tokenizer=None, num_layers: int = 2, attn_implementation: str = "eager", seed: int = 0, **config_kwargs
):
    """A random Siamese student; `config_kwargs` go to `SiameseConfig` (pooling, head, num_labels...)."""
    from hf_distill import SiameseConfig, SiameseModel

    config_kwargs.setdefault("num_labels", 3)
    seed_everything(seed)
    config = SiameseConfig(
        encoder=make_bert_config(num_layers).to_dict(), attn_implementation=attn_implementation, **config_kwargs
    )
    model = SiameseModel(config)
    model.tokenizer = tokenizer
    return model.eval()


def make_cross_encoder(
    tokenizer=None, num_layers: int = 2, attn_implementation: str = "eager", seed: int = 0, **config_kwargs
):
    """A random cross-encoder; `config_kwargs` go to `CrossEncoderConfig` (num_labels, classifier_dropout...)."""
    from hf_distill import CrossEncoderConfig, CrossEncoderModel

    config_kwargs.setdefault("num_labels", 2)
    config_kwargs.setdefault("classifier_dropout", 0.0)
    seed_everything(seed)
    config = CrossEncoderConfig(
        encoder=make_bert_config(num_layers).to_dict(), attn_implementation=attn_implementation, **config_kwargs
    )
    model = CrossEncoderModel(config)
    model.tokenizer = tokenizer
    return model.eval()


def save_backbone_and_teacher(root, tokenizer, backbone_layers: int, teacher_layers: int):
    """Save a random tiny BERT backbone (pooler and tokenizer included) and a cross-encoder teacher under `root`.

    The two checkpoints a CLI run starts from; returns their folders (`root/backbone`, `root/teacher`).
    """
    seed_everything(0)
    backbone = root / "backbone"
    BertModel(make_bert_config(backbone_layers), add_pooling_layer=True).save_pretrained(backbone)
    tokenizer.save_pretrained(backbone)
    teacher = root / "teacher"
    make_cross_encoder(tokenizer, num_layers=teacher_layers, seed=1).save_pretrained(teacher)
    return backbone, teacher


@pytest.fixture(autouse=True)
def _seeded():
    seed_everything(0)
    yield


@pytest.fixture
def tiny_bert_config() -> BertConfig:
    return make_bert_config(num_layers=2)


@pytest.fixture(scope="session")
def tiny_vocab_file(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("tiny_vocab") / "vocab.txt"
    path.write_text("\n".join(TINY_VOCAB) + "\n", encoding="utf-8")
    return str(path)


@pytest.fixture(scope="session")
def tiny_tokenizer(tiny_vocab_file) -> BertTokenizerFast:
    """A lower-casing WordPiece tokenizer over `TINY_VOCAB`, built offline."""
    return BertTokenizerFast(vocab=tiny_vocab_file, do_lower_case=True, model_max_length=64)


@pytest.fixture
def sentences() -> list[str]:
    return list(SENTENCES)


@pytest.fixture
def pairs() -> list[tuple[str, str]]:
    return list(PAIRS)


@pytest.fixture
def tiny_siamese(tiny_tokenizer):
    """A random 2-layer Siamese student (mean pooling, 3-class head, eager attention) with the tiny tokenizer."""
    return make_siamese(tiny_tokenizer)


@pytest.fixture
def tiny_cross_encoder(tiny_tokenizer):
    """A random 2-layer cross-encoder (2 labels, eager attention) with the tiny tokenizer."""
    return make_cross_encoder(tiny_tokenizer)


@pytest.fixture
def tiny_teacher(tiny_tokenizer):
    """A random 6-layer cross-encoder teacher (eager attention) for layer-selection tests."""
    return make_cross_encoder(tiny_tokenizer, num_layers=6, seed=1)


@pytest.fixture
def siamese_batch(tiny_tokenizer):
    """Both sides of `PAIRS`, tokenised separately with padding, as `SiameseModel.forward` kwargs."""
    first, second = zip(*PAIRS)
    a = tiny_tokenizer(list(first), padding=True, return_tensors="pt")
    b = tiny_tokenizer(list(second), padding=True, return_tensors="pt")
    return {
        "input_ids_a": a["input_ids"],
        "attention_mask_a": a["attention_mask"],
        "token_type_ids_a": a["token_type_ids"],
        "input_ids_b": b["input_ids"],
        "attention_mask_b": b["attention_mask"],
        "token_type_ids_b": b["token_type_ids"],
    }


@pytest.fixture
def cross_batch(tiny_tokenizer):
    """`PAIRS` tokenised jointly ([CLS] a [SEP] b [SEP]) with padding."""
    first, second = zip(*PAIRS)
    return dict(tiny_tokenizer(list(first), list(second), padding=True, return_tensors="pt"))


@pytest.fixture
def no_loading(monkeypatch):
    """Fail the test if any dataset or model loads: a configuration error must come first."""
    import datasets
    from transformers import AutoConfig, AutoModel

    from hf_distill.modeling import CrossEncoderModel

    def refuse(*args, **kwargs):
        raise AssertionError("a dataset or model was loaded before the configuration was checked")

    monkeypatch.setattr(datasets, "load_dataset", refuse)
    for owner, name in ((AutoConfig, "from_pretrained"), (AutoModel, "from_pretrained"),
                        (CrossEncoderModel, "from_backbone"), (CrossEncoderModel, "from_pretrained")):
        monkeypatch.setattr(owner, name, refuse)
