"""What a recipe can say: `ModelArguments` and `DataArguments` (the third dataclass is
`hf_distill.DistillationArguments`, every `TrainingArguments` field plus the distillation ones).

Plain dataclasses, light to import; `recipes` turns a YAML file and a command line into them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .errors import ConfigError

STUDENT_TYPES = ("cross_encoder", "siamese")


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
    # ---------------------------------------------------------------- query groups (cli/query_groups.py)
    ranking_group_size: int | None = field(
        default=None,
        metadata={
            "help": "Train on query groups of this many passages instead of pairs: a positive and n - 1 negatives drawn "
            "(seed) from each query's candidates, every candidate scored once by the teachers (cached); for the group "
            "losses margin_mse_weight / listwise_kl_weight / in_batch_weight. Needs ranking_qid_column and hard_weight 0."
        },
    )
    ranking_positives: str = field(
        default="gold",
        metadata={"help": "Query groups start from each gold-relevant candidate ('gold') or the teacher's top one ('teacher')."},
    )
    ranking_negative_depth: int | None = field(
        default=None, metadata={"help": "Draw negatives from each query's first N candidates (BM25's top N); null: all."}
    )
    ranking_train_dirs: list[str] | None = field(
        default=None,
        metadata={"help": "TREC-layout folders (e.g. msmarco_trec_dl/dl20) whose queries join the training query groups."},
    )
    retrieval_eval_dirs: list[str] | None = field(
        default=None,
        metadata={
            "help": "TREC-layout folders whose passage pool a Siamese student searches by cosine at the end (dense "
            "retrieval): test_<folder>_dense_recall@100 / _mrr@10 / _ndcg@10 / _map."
        },
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
        from .query_groups import check_group_arguments

        check_group_arguments(self)
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
