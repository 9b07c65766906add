"""The training set beyond the gold rows: augmented pairs, transfer pairs, and the teachers' logits.

`extend_training_set` adds TinyBERT-style augmented pairs (`augment_pairs`, candidates from the first
teacher's input embeddings or a masked LM) and the pairs of the transfer files (`add_transfer_pairs`);
the new rows carry no gold label. `label_training_set` then runs each teacher once over the set
(`add_teacher_logits`): on every process at once, so under `torchrun` / `accelerate launch` each
process labels its share and all end with the full columns. A set that already holds teacher logits
(saved by `hf-distill label`, read through train_dataset_dir) is used as it is.
"""

from __future__ import annotations

import logging
from collections import Counter

from .arguments import DataArguments, ModelArguments
from .errors import ConfigError

logger = logging.getLogger(__name__)


def check_needs_teachers(model_args: ModelArguments, data_args: DataArguments) -> None:
    """Augmented and transfer rows have no gold label: only teachers can teach them."""
    asked = [f"augment_n={data_args.augment_n}"] if data_args.augment_n else []
    asked += ["transfer_files"] if data_args.transfer_files else []
    asked += ["ranking_train_dirs"] if data_args.ranking_train_dirs and not data_args.ranking_group_size else []
    if asked and not model_args.teacher_name_or_path:
        raise ConfigError(
            f"{' and '.join(asked)} need{'s' if len(asked) == 1 else ''} teachers: the rows added have no gold labels "
            "and only teachers can label them; set teacher_name_or_path."
        )


def _logit_columns(dataset) -> list[str]:
    from ..batch_keys import logits_columns

    return logits_columns(dataset.column_names) if dataset is not None else []


def extend_training_set(train, teachers: list, text_columns: list[str], data_args: DataArguments, training_args):
    """`train` followed by its augmented pairs (data_args.augment_*) and the transfer pairs (transfer_files; for
    pointwise training, every (query, candidate) of the ranking_train_dirs folders too), computed on the main
    process first (the others read the `datasets` cache)."""
    trec_pairs = bool(data_args.ranking_train_dirs) and not data_args.ranking_group_size  # groups: query_groups
    if not (data_args.augment_n or data_args.transfer_files or trec_pairs):
        return train
    if _logit_columns(train):
        logger.info("the training set already holds %s: used as it is (no augmentation or transfer pairs added)",
                    ", ".join(_logit_columns(train)))
        return train
    if trec_pairs:  # before augmentation, which takes long
        _check_candidate_sources(text_columns, data_args)
    with training_args.main_process_first(desc="augmentation and transfer pairs"):
        if data_args.augment_n:
            train = _augment(train, teachers[0], text_columns, data_args, training_args)
        if data_args.transfer_files:
            from ..transfer import add_transfer_pairs

            try:
                train = add_transfer_pairs(train, data_args.transfer_files, text_columns, data_args.transfer_columns)
            except ValueError as error:  # a missing column: say which key to fix
                raise ConfigError(f"transfer_files / transfer_columns: {error}") from None
        if trec_pairs:
            train = _add_candidate_pairs(train, text_columns, data_args)
    logger.info("training set: %s", describe_origins(train))
    return train


def _add_candidate_pairs(train, text_columns: list[str], data_args: DataArguments):
    """Every (query, first-stage candidate) pair of each ranking_train_dirs folder as a transfer row under the
    training set's text columns: the teachers label them; the folder's judgements are not used."""
    from ..ranking import load_trec_run
    from ..ranking_groups import candidate_pairs
    from ..transfer import append_transfer_rows

    renaming = {k: v for k, v in zip(("query", "passage"), text_columns) if k != v}
    for folder in data_args.ranking_train_dirs:
        pairs = candidate_pairs(load_trec_run(folder)).select_columns(["query", "passage"])
        train = append_transfer_rows(train, pairs.rename_columns(renaming), text_columns)
    return train


def _check_candidate_sources(text_columns: list[str], data_args: DataArguments) -> None:
    """The training set has a (query, passage) pair of columns for the ranking_train_dirs candidate pairs (the
    folders themselves were checked before loading: `check_trec_folders`)."""
    if len(text_columns) != 2:
        raise ConfigError(
            f"ranking_train_dirs needs two text_columns (query, passage) for its candidate pairs; the training set's "
            f"text_columns are {list(text_columns)!r}: give the question and answer columns."
        )


def _augment(train, teacher, text_columns: list[str], data_args: DataArguments, training_args):
    from ..augmentation import augment_pairs

    source = (
        dict(masked_lm=data_args.augment_masked_lm, device=training_args.device)
        if data_args.augment_masked_lm
        else dict(embeddings=teacher)
    )
    tokenizer = None if data_args.augment_masked_lm else teacher.tokenizer
    return augment_pairs(
        train, text_columns, tokenizer, n=data_args.augment_n, p=data_args.augment_p, k=data_args.augment_k,
        seed=data_args.augment_seed, change=data_args.augment_change, label_column=training_args.label_column, **source,
    )


def describe_origins(dataset) -> str:
    """'480 gold + 3840 augmented rows' from the `origin` column ('N rows' without one)."""
    from ..origins import ORIGIN_COLUMN, ORIGINS

    if ORIGIN_COLUMN not in dataset.column_names:
        return f"{len(dataset)} rows"
    counts = Counter(dataset[ORIGIN_COLUMN])
    names = [*ORIGINS, *sorted(set(counts) - set(ORIGINS))]
    return " + ".join(f"{counts[name]} {name}" for name in names if counts[name]) + " rows"


def label_training_set(train, teachers: list, text_columns: list[str], data_args: DataArguments, training_args,
                       always: bool = False):
    """(train, online teachers). With precompute_teacher_logits (or `always`), each teacher k labels the set
    once (a `teacher_logits_{k}` column, cached) and no teacher runs during training. Every process makes this
    call at once, so the processes of a distributed run split the work. Columns already there are kept."""
    if not teachers or not (data_args.precompute_teacher_logits or always):
        return train, teachers
    from ..batch_keys import logits_column
    from ..teachers import add_teacher_logits

    for index, teacher in enumerate(teachers):
        if logits_column(index) in train.column_names:
            continue
        train = add_teacher_logits(
            train, teacher, text_columns, column=logits_column(index), batch_size=data_args.teacher_batch_size,
            max_length=training_args.max_length, device=training_args.device, shard=True,
        )
    return train, []
