"""`hf-distill train` on query groups, and dense retrieval at the end of a run.

With `ranking_group_size: n`, the training split (answer-selection rows grouped by
`ranking_qid_column`) and the TREC folders of `ranking_train_dirs` become query groups
(`hf_distill.ranking_groups.query_groups`): the teachers score every candidate once (cached),
each group holds a positive and n - 1 negatives drawn from the query's candidates, and the
student trains on them through a `GroupCollator` with the group losses (`margin_mse_weight`,
`listwise_kl_weight`, `group_ce_weight`, `in_batch_weight`); no teacher runs during training. The validation split
stays pairs (the collator hands them to a `PairCollator`). `retrieval_eval_dirs` adds dense
retrieval of TREC folders' passage pools (`hf_distill.retrieval`) to the test phase. Without
`ranking_group_size`, the ranking_train_dirs folders' candidate pairs join as transfer pairs instead
(`training_set.extend_training_set`).
"""

from __future__ import annotations

import logging
from pathlib import Path

from .errors import ConfigError

logger = logging.getLogger(__name__)

TREC_FILES = ("queries.jsonl", "corpus.jsonl", "qrels.jsonl", "candidates.jsonl")
POSITIVES = ("gold", "teacher")


def check_group_arguments(data_args) -> None:
    """The query-group and retrieval settings of `DataArguments` (values only: a recipe parses without its data)."""
    for name in ("ranking_train_dirs", "retrieval_eval_dirs"):
        if isinstance(getattr(data_args, name), str):
            setattr(data_args, name, [getattr(data_args, name)])
    size, depth = data_args.ranking_group_size, data_args.ranking_negative_depth
    if size is not None and size < 1:
        raise ConfigError(f"ranking_group_size={size} is not valid; give the passages per group (>= 1), or null for pairs.")
    if depth is not None and depth < 1:
        raise ConfigError(f"ranking_negative_depth={depth} is not valid; give a number of candidates >= 1, or null for all.")
    if data_args.ranking_positives not in POSITIVES:
        raise ConfigError(
            f"ranking_positives={data_args.ranking_positives!r} is not valid; choose one of {', '.join(POSITIVES)}."
        )


def check_trec_folders(data_args) -> None:
    """Every ranking_train_dirs / ranking_eval_dirs / retrieval_eval_dirs folder has the TREC files (checked once,
    before any loading: `train.check_inputs`, `label`)."""
    for name in ("ranking_train_dirs", "ranking_eval_dirs", "retrieval_eval_dirs"):
        for folder in getattr(data_args, name) or []:
            missing = [f for f in TREC_FILES if not (Path(folder) / f).is_file()]
            if missing:
                raise ConfigError(
                    f"{name}: {folder!r} lacks {', '.join(missing)}; a TREC-layout folder has {', '.join(TREC_FILES)}."
                )


def _check_can_group(train, teachers: list, data_args, training_args) -> None:
    if not teachers:
        raise ConfigError("ranking_group_size needs teacher_name_or_path: the teachers score every candidate once.")
    if data_args.precompute_teacher_logits:
        raise ConfigError("ranking_group_size scores the candidates itself; drop precompute_teacher_logits.")
    if training_args.prediction_weights(None)[0] > 0:
        raise ConfigError(
            "ranking_group_size trains on query groups, which hold no pointwise labels: set hard_weight: 0 (the gold "
            "labels choose each group's positive) and a group loss (margin_mse_weight, listwise_kl_weight, group_ce_weight)."
        )
    qid = data_args.ranking_qid_column
    if not qid or qid not in train.column_names:
        raise ConfigError(
            f"ranking_group_size needs ranking_qid_column naming the training split's query ids (columns {train.column_names})."
        )


def _sources(train, text_columns: list[str], data_args, training_args) -> list:
    """(RankingData, relevance threshold) of the training split and of each ranking_train_dirs folder."""
    from ..ranking import RankingData, load_trec_run

    gold = data_args.ranking_positives == "gold"
    split = RankingData.from_pairs(
        train, only_answerable=gold, qid_column=data_args.ranking_qid_column, query_column=text_columns[0],
        passage_column=text_columns[1], label_column=training_args.label_column, name="train",
    )
    trec = [(load_trec_run(folder), data_args.trec_relevance_threshold) for folder in data_args.ranking_train_dirs or []]
    return [(split, 1), *trec]


def group_training_set(splits, student, teachers: list, data_args, training_args):
    """(train, teachers, data_collator): query groups scored once by the teachers, no online teacher, and their
    collator; the split, the teachers and None as they were without ranking_group_size."""
    from ..modeling import SiameseModel

    siamese = isinstance(student, SiameseModel)
    if data_args.retrieval_eval_dirs and not siamese:
        raise ConfigError("retrieval_eval_dirs needs student_type: siamese; a cross-encoder embeds no passage alone.")
    if not data_args.ranking_group_size or splits.train is None:
        return splits.train, teachers, None
    from datasets import concatenate_datasets

    from ..data import PairCollator
    from ..group_collator import GroupCollator
    from ..ranking_groups import query_groups

    _check_can_group(splits.train, teachers, data_args, training_args)
    # every process makes these calls at once: the teachers' labelling is split between them (add_teacher_logits)
    parts = [
        query_groups(
            data, teachers, data_args.ranking_group_size, seed=training_args.seed, positives=data_args.ranking_positives,
            relevance_threshold=threshold, negative_depth=data_args.ranking_negative_depth,
            batch_size=data_args.teacher_batch_size, max_length=training_args.max_length, device=training_args.device,
        )
        for data, threshold in _sources(splits.train, splits.text_columns, data_args, training_args)
    ]
    groups = concatenate_datasets(parts)
    logger.info("training set: %d query groups of up to %d passages", len(groups), data_args.ranking_group_size)
    pairs = PairCollator(
        tokenizer=student.tokenizer, siamese=siamese, text_columns=splits.text_columns,
        label_column=training_args.label_column, label2id=student.config.label2id,
        regression=student.config.num_labels == 1, label_scale=training_args.label_scale, max_length=training_args.max_length,
    )
    return groups, [], GroupCollator.for_student(student, training_args.max_length, pair_collator=pairs)


def retrieval_evaluators(data_args, training_args) -> list:
    """Dense retrieval of each retrieval_eval_dirs folder's passage pool (Siamese students): test_<folder>_dense_*."""
    from ..retrieval import DenseRetrievalEvaluator

    return [
        DenseRetrievalEvaluator.from_trec(
            folder, batch_size=training_args.per_device_eval_batch_size, max_length=training_args.max_length,
            relevance_threshold=data_args.trec_relevance_threshold, show_progress_bar=not training_args.disable_tqdm,
        )
        for folder in data_args.retrieval_eval_dirs or []
    ]
