"""`hf-distill train` / `evaluate`: the pipeline, one named step after another.

`run` checks the inputs, loads the data, builds the models, extends the training set (augmented and
transfer pairs) and labels it with the teachers when asked, settles the early-stopping metric, builds
the trainer, then trains, evaluates and tests. Every step uses only `Trainer` machinery, so the
pipeline runs unchanged under `torchrun` / `accelerate launch`.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .arguments import DataArguments, ModelArguments
from .early_stopping import early_stopping_callbacks, settle_best_metric
from .errors import ConfigError
from .labels import check_finite_labels, find_label_column, is_labelled, labels_for
from .lora import check_lora_student, wrap_lora_student
from .models import build_student, check_head, count_parameters, load_teacher_model
from .query_groups import check_trec_folders, group_training_set, retrieval_evaluators
from .sources import check_model_sources, loading
from .splits import load_raw_datasets, split_sources, trim_splits
from .training_set import extend_training_set, label_training_set

if TYPE_CHECKING:
    from ..training_args import DistillationArguments

logger = logging.getLogger(__name__)



@dataclass
class Splits:
    """The data of a run: each split (None where absent) and the two text columns the collator reads."""

    train: Any
    validation: Any
    test: Any
    text_columns: list[str]


def run(
    model_args: ModelArguments, data_args: DataArguments, training_args: DistillationArguments, do_train: bool = True,
    recipe: str | None = None,
) -> dict[str, Any]:
    """Train (or only evaluate) as the three dataclasses say; returns every metric (also in all_results.json).
    `recipe`: the YAML file they come from, whose recipes/ folder names what writes a missing model folder."""
    from transformers import set_seed

    check_inputs(data_args)
    check_model_sources(model_args, data_args, recipe, teachers=do_train)
    setup_logging(training_args)
    set_seed(training_args.seed)
    splits = load_data(model_args, data_args, training_args, do_train)
    validation = _labelled(splits.validation, training_args.label_column)
    settle_best_metric(data_args, training_args, validation, model_args.num_labels, do_train)
    student, teachers = build_models(model_args, splits, training_args.label_column, do_train)
    if do_train:
        check_lora_student(student, model_args)  # before augmentation and labelling, which take long
        splits.train = extend_training_set(splits.train, teachers, splits.text_columns, data_args, training_args)
    splits.train, teachers = label_training_set(splits.train, teachers, splits.text_columns, data_args, training_args)
    splits.train, teachers, collator = group_training_set(splits, student, teachers, data_args, training_args)
    trained = wrap_lora_student(student, model_args) if do_train else student  # adapters injected in place
    trainer = build_trainer(trained, teachers, splits, data_args, training_args, do_train, collator)
    results: dict[str, Any] = {}
    if do_train:
        results.update(train_model(trainer, splits.train, student))
    results.update(evaluate_validation(trainer, validation))
    results.update(evaluate_test(trainer, splits, data_args, student))
    return results


def setup_logging(training_args) -> None:
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
    if training_args.disable_tqdm:  # no progress bars: datasets' (loading, map) neither; a later run may want them
        datasets.disable_progress_bars()
    else:
        datasets.enable_progress_bars()
    logging.getLogger(__package__).setLevel(logging.INFO if training_args.should_log else logging.WARNING)


def check_inputs(data_args: DataArguments) -> None:
    """The evaluation folders and files and the TREC training folders exist, before any loading: a typo should
    not cost a training run (nor model loading and augmentation)."""
    check_trec_folders(data_args)
    for path in data_args.sts_eval_files or []:
        if not Path(path).is_file():
            raise ConfigError(f"sts_eval_files: {path!r} is not a file; give jsonl files with sentence1, sentence2, score.")


def load_data(model_args: ModelArguments, data_args: DataArguments, training_args, do_train: bool) -> Splits:
    """The splits, trimmed, loaded on the main process first (the others reuse the cache); the text columns."""
    from ..data import infer_text_columns

    label_column = training_args.label_column
    with training_args.main_process_first(desc="loading the datasets"):
        raw = trim_splits(load_raw_datasets(data_args, model_args.cache_dir), data_args)
        check_finite_labels(raw, label_column, split_sources(data_args))
        raw = find_label_column(raw, label_column)
    train = raw.get("train") if do_train else None
    if do_train and train is None:
        raise ConfigError(f"no training split: the data has {list(raw)}; give a train file or a dataset with one.")
    validation, test = raw.get("validation"), raw.get("test")
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
    return Splits(train, validation, test, text_columns)


def load_teachers(model_args: ModelArguments, splits: Splits, label_column: str):
    """(teachers, labels): the teachers, each checked against the head the data's labels need."""
    paths = model_args.teacher_name_or_path or []
    teachers = []
    for path in paths:
        with loading("teacher_name_or_path", path):
            teachers.append(load_teacher_model(path, model_args))
    labels = labels_for([splits.train, splits.validation, splits.test], label_column, model_args.num_labels, teachers)
    for index, teacher in enumerate(teachers):
        check_head(teacher, labels, f"teacher_name_or_path[{index}]={paths[index]!r}")
    return teachers, labels


def build_models(model_args: ModelArguments, splits: Splits, label_column: str, do_train: bool):
    """(student, teachers): the teachers (training only), checked against the labels, and the student."""
    if do_train:
        teachers, labels = load_teachers(model_args, splits, label_column)
    else:
        teachers = []
        labels = labels_for([splits.train, splits.validation, splits.test], label_column, model_args.num_labels, [])
    with loading("model_name_or_path", model_args.model_name_or_path):
        student = build_student(model_args, labels, teachers, do_train)
    logger.info(
        "student: %s, %d layers, %.1fM parameters; teachers: %s",
        type(student).__name__, student.backbone.config.num_hidden_layers, count_parameters(student) / 1e6,
        model_args.teacher_name_or_path or "none (plain fine-tuning)",
    )
    return student, teachers


def build_trainer(student, teachers: list, splits: Splits, data_args: DataArguments, training_args, do_train: bool,
                  data_collator=None):
    """The `DistillationTrainer`: online teachers, the labelled validation split, its metrics and re-ranking."""
    from ..metrics import compute_metrics_for
    from ..trainer import DistillationTrainer

    label_column = training_args.label_column
    dataset = splits.train
    if do_train and dataset is not None and not is_labelled(dataset, label_column) and label_column in dataset.column_names:
        dataset = dataset.remove_columns(label_column)  # e.g. GLUE's -1 placeholders: distil from the teachers alone
    splits.train = dataset
    return DistillationTrainer(
        model=student,
        args=training_args,
        teachers=teachers or None,
        data_collator=data_collator,
        callbacks=early_stopping_callbacks(data_args) if do_train else None,
        train_dataset=dataset,
        eval_dataset=_labelled(splits.validation, label_column),
        compute_metrics=compute_metrics_for(student.config.num_labels) if student.config.num_labels else None,
        evaluators=_ranking_evaluators(splits.validation, data_args, splits.text_columns, label_column, training_args),
    )


def train_model(trainer, train_dataset, student) -> dict[str, Any]:
    """Train (resuming when asked), save the model and the state; the train metrics."""
    train_result = trainer.train(resume_from_checkpoint=trainer.args.resume_from_checkpoint)  # 'last' resolved there
    trainer.save_model()
    metrics = dict(train_result.metrics, train_samples=len(train_dataset), student_parameters=count_parameters(student))
    _record(trainer, "train", metrics)
    trainer.save_state()
    return metrics


def evaluate_validation(trainer, eval_dataset) -> dict[str, Any]:
    """Metrics on the labelled validation split (and its re-ranking), or nothing when there is none."""
    if eval_dataset is None:
        return {}
    metrics = trainer.evaluate(eval_dataset=eval_dataset)
    metrics["eval_samples"] = len(eval_dataset)
    return _record(trainer, "eval", metrics)


def evaluate_test(trainer, splits: Splits, data_args: DataArguments, student) -> dict[str, Any]:
    """The test phase: re-ranking of the test split's queries and of the TREC folders, the STS files
    (not the validation queries), then the labelled test split, or predictions for an unlabelled one."""
    from ..trainer import unwrap_student

    label_column = trainer.args.label_column
    test_split = splits.test
    trainer.evaluators = _test_evaluators(test_split, data_args, splits.text_columns, trainer.args)
    results: dict[str, Any] = {}
    if trainer.evaluators and _labelled(test_split, label_column) is None:
        model = unwrap_student(trainer.model)
        metrics = {f"test_{k}": v for evaluator in trainer.evaluators for k, v in evaluator(model).items()}
        results.update(_record(trainer, "test", metrics))
    if test_split is None:
        return results
    if is_labelled(test_split, label_column):
        metrics = trainer.evaluate(eval_dataset=test_split, metric_key_prefix="test")
        metrics["test_samples"] = len(test_split)
        results.update(_record(trainer, "test", metrics))
    elif trainer.args.do_predict:
        unlabelled = test_split.remove_columns([c for c in [label_column] if c in test_split.column_names])
        _write_predictions(trainer, unlabelled, student)
    return results


def _labelled(dataset, label_column: str):
    """`dataset` when it exists and holds gold labels, else None."""
    return dataset if dataset is not None and is_labelled(dataset, label_column) else None


def _record(trainer, split: str, metrics: dict[str, Any]) -> dict[str, Any]:
    """Log and save `metrics` under `split` (`{split}_results.json`, merged into all_results.json)."""
    trainer.log_metrics(split, metrics)
    trainer.save_metrics(split, metrics)
    return metrics


def _test_evaluators(test_split, data_args: DataArguments, text_columns, training_args) -> list:
    """Re-ranking of the test split's queries, of each TREC folder, the STS files, dense retrieval of TREC pools."""
    from ..evaluation import STSEvaluator
    from ..ranking import RankingEvaluator, load_trec_run

    batch_size, max_length = training_args.per_device_eval_batch_size, training_args.max_length
    evaluators = _ranking_evaluators(test_split, data_args, text_columns, training_args.label_column, training_args)
    evaluators += [
        RankingEvaluator(
            load_trec_run(folder), batch_size=batch_size, relevance_threshold=data_args.trec_relevance_threshold,
            name=Path(folder).name, max_length=max_length,
        )
        for folder in data_args.ranking_eval_dirs or []
    ]
    evaluators += [
        STSEvaluator.from_jsonl(
            path, batch_size=batch_size, max_length=max_length, name=f"{Path(path).parent.name}_{Path(path).stem}"
        )
        for path in data_args.sts_eval_files or []
    ]
    return evaluators + retrieval_evaluators(data_args, training_args)


def _ranking_evaluators(dataset, data_args: DataArguments, text_columns, label_column: str, training_args) -> list:
    """Re-ranking of `dataset`'s queries (rows grouped by `ranking_qid_column`), or nothing."""
    from ..ranking import RankingData, RankingEvaluator

    if not data_args.ranking_qid_column or dataset is None or not is_labelled(dataset, label_column):
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
