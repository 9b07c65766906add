"""What a recipe can say: `ModelArguments` and `DataArguments` (the third dataclass is
`hf_distill.DistillationArguments`, every `TrainingArguments` field plus the distillation ones).

Plain dataclasses, light to import; `recipes` turns a YAML file and a command line into them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import ConfigError

STUDENT_TYPES = ("cross_encoder", "siamese")


@dataclass
class ModelArguments:
    """Which models: the one to train (or cut a student from), and the teachers."""

    task: str = field(
        default="pairs",
        metadata={
            "help": "What the recipe trains: 'pairs' (a cross-encoder or Siamese student on text pairs: these keys) or "
            "'embedding' (sentence embeddings from unlabelled sentences: hf_distill.embedding_recipe's keys, "
            "recipes/embedding/). `hf-distill train` reads it first and runs the matching pipeline."
        },
    )
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
            "help": "One or several fine-tuned teachers (saved hf_distill cross-encoders: Hub ids or folders, or PEFT "
            "adapter folders on one, loaded onto its base model). None: plain fine-tuning (the teacher recipes)."
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
    # ---------------------------------------------------------------- LoRA (cli/lora.py; TRL's names)
    lora_r: int | None = field(
        default=None,
        metadata={
            "help": "Train LoRA adapters of this rank (>= 1) on the student instead of all its weights; its head "
            "(outside the backbone) is trained fully. The final save merges them (merge_adapters_on_save defaults to "
            "true with LoRA: output_dir loads with AutoModel.from_pretrained). 0 or null: no LoRA."
        },
    )
    lora_alpha: float | None = field(
        default=None, metadata={"help": "LoRA scaling numerator (> 0): updates scale by lora_alpha / lora_r. Null: 2 x lora_r."}
    )
    lora_dropout: float = field(default=0.05, metadata={"help": "Dropout in [0, 1) on the LoRA inputs."})
    lora_target_modules: list[str] | None = field(
        default=None,
        metadata={
            "help": "Student modules that get adapters, by name (e.g. query value key dense). Null: the backbone's "
            "attention query/value projections (query value for BERT/MiniLM, q v for MPNet)."
        },
    )

    def __post_init__(self):
        from .tasks import check_task

        if check_task(self.task) != "pairs":
            raise ConfigError(
                f"task={self.task!r} recipes have their own keys (hf_distill.embedding_recipe): run them with "
                "`hf-distill train RECIPE.yaml`."
            )
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
        from .lora import check_lora_arguments

        check_lora_arguments(self)
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
            "losses margin_mse_weight / listwise_kl_weight / group_ce_weight / in_batch_weight. Needs ranking_qid_column "
            "and hard_weight 0."
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
        metadata={
            "help": "TREC-layout folders (e.g. msmarco_trec_dl/dl20) whose queries join the training set: as query "
            "groups with ranking_group_size, else every (query, candidate) pair as a transfer pair the teachers label."
        },
    )
    retrieval_eval_dirs: list[str] | None = field(
        default=None,
        metadata={
            "help": "TREC-layout folders whose passage pool a Siamese student searches by cosine at the end (dense "
            "retrieval): test_<folder>_dense_recall@100 / _mrr@10 / _ndcg@10 / _map."
        },
    )
    # ---------------------------------------------------------------- data beyond the gold set (need teachers)
    train_dataset_dir: str | None = field(
        default=None,
        metadata={
            "help": "A training set saved by `hf-distill label` (datasets save_to_disk) instead of the recipe's train "
            "split. Holding teacher_logits_* columns, it is used as it is: no augmentation, transfer or labelling "
            "runs again, and no teacher runs during training unless layer losses need one."
        },
    )
    augment_n: int = field(
        default=0,
        metadata={
            "help": "TinyBERT-style augmentation (hf_distill.augment_pairs): up to N new pairs per training pair, "
            "each word replaced with probability augment_p by one of augment_k candidates; the new rows have no gold "
            "label and learn from the teachers only. 0: off. Needs teachers."
        },
    )
    augment_p: float = field(default=0.4, metadata={"help": "Augmentation: probability in [0, 1] that a word is replaced."})
    augment_k: int = field(default=15, metadata={"help": "Augmentation: candidates (>= 1) per word."})
    augment_masked_lm: str | None = field(
        default=None,
        metadata={
            "help": "Augmentation: a masked LM (Hub id or folder, AutoModelForMaskedLM) whose top augment_k words at a "
            "masked place are the candidates. Default: the nearest neighbours in the first teacher's input embeddings."
        },
    )
    augment_change: str = field(
        default="one",
        metadata={
            "help": "Augmentation: 'one' (TinyBERT: each new pair changes one of its two texts, alternating) or 'all' "
            "(every text of the pair in each new pair)."
        },
    )
    augment_seed: int = field(
        default=0,
        metadata={"help": "Augmentation: seed (>= 0) of the draws; fixed apart from `seed`, so every run reuses one labelled set."},
    )
    transfer_files: list[str] | None = field(
        default=None,
        metadata={
            "help": "Transfer sets: JSON Lines / CSV / TSV files of unlabelled pairs (one format) that join the training "
            "set without gold labels, for the teachers to label (hf_distill.add_transfer_pairs). Needs teachers."
        },
    )
    transfer_columns: list[str] | None = field(
        default=None,
        metadata={
            "help": "The transfer files' names for the two text columns, in the order of text_columns, when they differ "
            "(e.g. 'question answer'); default: the training set's names."
        },
    )
    # ---------------------------------------------------------------- stopping
    early_stopping_patience: int | None = field(
        default=None,
        metadata={
            "help": "Stop when metric_for_best_model has not improved for this many evaluations and keep the best "
            "checkpoint (transformers' EarlyStoppingCallback; load_best_model_at_end is switched on and save_strategy "
            "follows eval_strategy). metric_for_best_model defaults to the task's main metric: accuracy "
            "(classification), spearman (regression), rank_mrr@10 (ranking_qid_column). 0 or null: off."
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
        if not (self.data_dir or self.train_file or self.validation_file or self.test_file or self.dataset_name
                or self.train_dataset_dir):
            raise ConfigError("no data: give dataset_name (Hub) or data_dir (local train/validation/test files).")
        self._check_data_beyond_gold()
        if self.early_stopping_patience is not None and self.early_stopping_patience < 0:
            raise ConfigError(
                f"early_stopping_patience={self.early_stopping_patience} is not valid; give a number of evaluations "
                ">= 1 (0 or null: off)."
            )

    def _check_data_beyond_gold(self) -> None:
        """The saved set, the augmentation settings and the transfer files, before anything is loaded."""
        if self.train_dataset_dir:
            _check_saved_dataset("train_dataset_dir", self.train_dataset_dir)
        for name, value, valid, what in (
            ("augment_n", self.augment_n, self.augment_n >= 0, "a number of new pairs per pair >= 0 (0: off)"),
            ("augment_p", self.augment_p, 0.0 <= self.augment_p <= 1.0, "a probability in [0, 1]"),
            ("augment_k", self.augment_k, self.augment_k >= 1, "a number of candidates >= 1"),
            ("augment_seed", self.augment_seed, self.augment_seed >= 0, "a seed >= 0"),
            ("augment_change", repr(self.augment_change), self.augment_change in ("one", "all"), "'one' or 'all'"),
        ):
            if not valid:
                raise ConfigError(f"{name}={value} is not valid; give {what}.")
        if isinstance(self.transfer_files, str):
            self.transfer_files = [self.transfer_files]
        if self.transfer_files:
            _check_transfer_files(self.transfer_files)
        if isinstance(self.transfer_columns, str):
            self.transfer_columns = self.transfer_columns.replace(",", " ").split()
        if self.transfer_columns is not None and len(self.transfer_columns) != 2:
            raise ConfigError(
                f"transfer_columns={self.transfer_columns!r} is not valid; give the transfer files' two text columns, "
                "in the order of text_columns."
            )


def _check_saved_dataset(name: str, folder: str) -> None:
    """`folder` holds one split written by `Dataset.save_to_disk` (what `hf-distill label` writes)."""
    path = Path(folder)
    if not (path / "state.json").is_file() or not (path / "dataset_info.json").is_file():
        what = "it lacks state.json / dataset_info.json" if path.is_dir() else "no such folder"
        raise ConfigError(
            f"{name}={folder!r} is not a dataset saved with save_to_disk ({what}); "
            "`hf-distill label RECIPE --output DIR` writes one."
        )


def _check_transfer_files(files: list[str]) -> None:
    """Every transfer file exists and all share one format `load_pairs` reads."""
    from ..transfer import PAIR_FILE_SUFFIXES

    missing = [f for f in files if not Path(f).is_file()]
    if missing:
        raise ConfigError(f"transfer_files: {missing[0]!r} is not a file; give files of unlabelled pairs.")
    suffixes = sorted({Path(f).suffix.lower() for f in files})
    if len(suffixes) != 1 or suffixes[0] not in PAIR_FILE_SUFFIXES:
        raise ConfigError(
            f"transfer_files={files!r} is not valid; give files of one format: {', '.join(PAIR_FILE_SUFFIXES)}."
        )


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
