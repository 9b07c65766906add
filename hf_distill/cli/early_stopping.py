"""Early stopping from a recipe (`early_stopping_patience`): stop on the validation metric, keep the best.

Before anything loads, `early_stopping_settings` checks that the recipe evaluates and saves
consistently and completes it: `load_best_model_at_end` on, `save_strategy` (and `save_steps`) following
`eval_strategy` unless given. Once the labels are known, `settle_best_metric` picks the task's main metric
when the recipe names none (accuracy for classes, spearman for scores, rank_mrr@10 when validation is
re-ranked by query) and refuses a metric the evaluation does not report. `early_stopping_callbacks`
gives the trainer transformers' `EarlyStoppingCallback`.
"""

from __future__ import annotations

from typing import Any

from .errors import ConfigError

RANKING_METRICS = ("rank_mrr@10", "rank_ndcg@10", "rank_map")  # RankingEvaluator(name="rank") on validation


def early_stopping_settings(given: dict[str, Any], data_args, training_args) -> dict[str, Any]:
    """The settings early stopping adds to `given` (the recipe and command line, nulls left out); {} when off.

    `training_args` are those parsed from `given` with load_best_model_at_end off (so transformers has not
    checked the strategies yet): their strategies and steps are what the run would use."""
    patience = data_args.early_stopping_patience
    if not patience:
        return {}
    what = f"early_stopping_patience={patience}"
    evaluation = str(getattr(training_args.eval_strategy, "value", training_args.eval_strategy))
    if evaluation == "no":
        raise ConfigError(f"{what} needs evaluations: set eval_strategy to 'epoch' or 'steps' (it is 'no').")
    if str(given.get("load_best_model_at_end", True)).strip().lower() in ("false", "no", "0", "f", "n"):
        raise ConfigError(f"{what} keeps the best checkpoint: load_best_model_at_end must be true (it is false).")
    extra: dict[str, Any] = {"load_best_model_at_end": True}
    saving = str(getattr(training_args.save_strategy, "value", training_args.save_strategy))
    if "save_strategy" not in given:
        extra["save_strategy"] = saving = evaluation
    elif saving not in (evaluation, "best"):
        raise ConfigError(
            f"{what} needs a checkpoint at every evaluation: save_strategy={saving!r} must be eval_strategy="
            f"{evaluation!r} (or 'best')."
        )
    if saving == "steps":
        eval_steps = training_args.eval_steps  # transformers' default: logging_steps
        if "save_steps" not in given:
            extra["save_steps"] = eval_steps
        elif training_args.save_steps % eval_steps:
            raise ConfigError(
                f"{what} needs a checkpoint at every evaluation: save_steps={training_args.save_steps:g} must be a "
                f"multiple of eval_steps={eval_steps:g}."
            )
    return extra


def settle_best_metric(data_args, training_args, validation, num_labels: int | None, do_train: bool) -> None:
    """metric_for_best_model: the task's main metric when none was given; a named one must be reported.

    `validation`: the labelled validation split (None when there is none); `num_labels`: the recipe's, else
    inferred from the validation labels. Runs once the data is loaded, before any model."""
    patience = data_args.early_stopping_patience
    if not patience:
        return
    if validation is None:
        if do_train:
            raise ConfigError(
                f"early_stopping_patience={patience} needs a labelled validation split to stop on; the data has none "
                "(give validation_file, or a data_dir with a validation file)."
            )
        training_args.metric_for_best_model = training_args.metric_for_best_model or "loss"  # nothing evaluates
        return
    from .labels import infer_labels

    num_labels = num_labels or infer_labels(validation, training_args.label_column, None).num_labels
    reported = task_metrics(num_labels, bool(data_args.ranking_qid_column))
    if training_args.metric_for_best_model is None:
        training_args.metric_for_best_model = reported[0]
        if training_args.greater_is_better is None:
            training_args.greater_is_better = True
    name = training_args.metric_for_best_model
    if name.removeprefix("eval_") not in (*reported, "loss"):
        raise ConfigError(
            f"metric_for_best_model={name!r} is not reported on this task's validation split; choose one of "
            f"{', '.join(reported)}, loss."
        )


def task_metrics(num_labels: int, ranking: bool) -> list[str]:
    """The validation metrics of a head (its `compute_metrics` on a dummy batch), the main one first."""
    import numpy as np

    from ..metrics import compute_metrics_for

    if num_labels == 1:
        values = np.arange(3, dtype=np.float32)
        names = list(compute_metrics_for(1)((values, values)))
        main = "spearman"
    else:
        names = list(compute_metrics_for(num_labels)((np.eye(num_labels), np.arange(num_labels))))
        main = "accuracy"
    ordered = [main, *sorted(n for n in names if n != main)]
    return [*RANKING_METRICS, *ordered] if ranking else ordered


def early_stopping_callbacks(data_args) -> list:
    """[EarlyStoppingCallback(patience)] when early_stopping_patience is set, else []."""
    if not data_args.early_stopping_patience:
        return []
    from transformers import EarlyStoppingCallback

    return [EarlyStoppingCallback(early_stopping_patience=data_args.early_stopping_patience)]
