"""Embedding-distillation recipes: a sentence-embedding teacher into a smaller Siamese student, from sentences.

    hf-distill train recipes/embedding/minilm_l3.yaml [--field value ...]
    python -m hf_distill.embedding_recipe recipes/embedding/minilm_l3.yaml [--field value ...]   (the same)

A recipe is a flat YAML mapping of the fields of `EmbeddingRecipeArguments` (models, sentences,
loss options) and `DistillationArguments` (the weights `embedding_mse_weight` and
`similarity_structure_weight`, and every `TrainingArguments` field), with `task: embedding` so that
`hf-distill train` runs it here; the command line wins. The run:
collect every distinct sentence under `sentence_dir` (none of the `exclude_files`), load the
teacher (`load_embedding_teacher`), cut the student (k layers of a backbone, cosine head), embed
the sentences with the teacher once (`add_teacher_embeddings`, cached) or run it online, train,
save the student and its card, and score the STS files (Spearman x100 of cosine).
"""

from __future__ import annotations

import difflib
import hashlib
import json
import logging
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .cli.errors import ConfigError
from .cli.recipes import load_recipe, parse_overrides

__all__ = ["EmbeddingRecipeArguments", "main", "parse_embedding_recipe", "run_embedding_recipe"]

logger = logging.getLogger(__name__)

HELD_OUT = ["stsb/test.jsonl", "wikiqa/test.jsonl", "msmarco_trec_dl/*"]  # test splits of the evaluation sets


@dataclass
class EmbeddingRecipeArguments:
    """What an embedding-distillation recipe says besides `DistillationArguments`."""

    teacher_name_or_path: str = field(metadata={"help": "The embedding teacher: a sentence-transformers folder or Hub id, "
                                                        "any AutoModel backbone, or a saved hf_distill Siamese model."})
    model_name_or_path: str = field(metadata={"help": "The student's backbone (Hub id or folder); cut to num_student_layers."})
    teacher_pooling: str | None = field(default=None, metadata={"help": "Teacher pooling 'mean'/'cls'/'max' (default: "
                                                                         "the sentence-transformers folder's, else mean)."})
    num_student_layers: int | None = field(default=None, metadata={"help": "Keep this many of the backbone's layers."})
    layer_strategy: str = field(default="first", metadata={"help": "Which: 'first', 'uniform' or 0-based indices '0,2,5'."})
    pooling: str = field(default="mean", metadata={"help": "Student pooling: 'mean', 'cls' or 'max'."})
    sentence_dir: str = field(default="../shared/data", metadata={"help": "Folder whose *.jsonl text columns give the sentences."})
    exclude_files: list[str] = field(default_factory=lambda: list(HELD_OUT),
                                     metadata={"help": "Held-out files (globs relative to sentence_dir): never trained on."})
    max_train_sentences: int | None = field(default=None, metadata={"help": "Keep only the first N sentences."})
    precompute_teacher_embeddings: bool = field(default=True, metadata={"help": "Embed the sentences once (cached) instead "
                                                                                "of running the teacher every step."})
    teacher_batch_size: int = field(default=64, metadata={"help": "Teacher batch size when precomputing."})
    embedding_dtype: str = field(default="float16", metadata={"help": "Storage of precomputed embeddings: float16 or float32."})
    keep_projection: bool = field(default=False, metadata={"help": "Keep the projection as the student's output layer "
                                                                   "(embeddings of the teacher's width) instead of dropping it."})
    normalize_embeddings: bool = field(default=False, metadata={"help": "embedding_mse compares L2-normalised embeddings."})
    similarity_kind: str = field(default="kl", metadata={"help": "similarity_structure: 'kl' (row-wise) or 'mse'."})
    similarity_temperature: float = field(default=0.05, metadata={"help": "Temperature of the row-wise KL (> 0)."})
    sts_eval_files: list[str] | None = field(default=None, metadata={"help": "STS jsonl files scored at every evaluation "
                                                                            "and at the end (sentence1, sentence2, score)."})
    early_stopping_patience: int | None = field(
        default=None, metadata={"help": "Stop after this many evaluations without a better metric_for_best_model (an STS "
                                        "file's <folder>_<stem>_spearman_cosine, e.g. stsb_validation_spearman_cosine); "
                                        "the best checkpoint is kept (load_best_model_at_end)."})
    cache_dir: str | None = field(default=None, metadata={"help": "Where the sentence file and its embeddings are cached "
                                                                  "(default: the datasets cache)."})
    task: str = field(default="embedding", metadata={"help": "The recipe's pipeline: 'embedding' (this one; "
                                                             "`hf-distill train` dispatches on it)."})

    def __post_init__(self):
        if self.task != "embedding":
            raise ConfigError(f"task={self.task!r} is not valid here; an embedding recipe says task: embedding "
                              "(pair recipes run with `hf-distill train RECIPE.yaml`).")
        if self.num_student_layers is not None and self.num_student_layers < 1:
            raise ConfigError(f"num_student_layers={self.num_student_layers} is not valid; give a positive number of layers.")
        if self.max_train_sentences is not None and self.max_train_sentences < 1:
            raise ConfigError(f"max_train_sentences={self.max_train_sentences} is not valid; give a positive number.")
        if self.early_stopping_patience is not None and self.early_stopping_patience < 1:
            raise ConfigError(f"early_stopping_patience={self.early_stopping_patience} is not valid; give a positive number "
                              "of evaluations.")
        if isinstance(self.exclude_files, str):
            self.exclude_files = [self.exclude_files]
        if isinstance(self.sts_eval_files, str):
            self.sts_eval_files = [self.sts_eval_files]
        strategy = self.layer_strategy
        if isinstance(strategy, str) and strategy not in ("first", "uniform"):
            try:
                self.layer_strategy = [int(x) for x in strategy.strip("[] ").replace(" ", ",").split(",") if x]
            except ValueError:
                raise ConfigError(f"layer_strategy={strategy!r} is not valid; give 'first', 'uniform' or indices like '0,2,5'.") from None


# ---------------------------------------------------------------------------- parsing
def _parser():
    from transformers import HfArgumentParser

    from .training_args import DistillationArguments

    return HfArgumentParser((EmbeddingRecipeArguments, DistillationArguments))


def _tokens(value: Any, action) -> list[str]:
    """A YAML or command-line value as argparse tokens (a list for a one-value field is joined: '0,2,5')."""
    if isinstance(value, (list, tuple)) and action.nargs not in ("+", "*"):
        value = ",".join(map(str, value))
    values = value if isinstance(value, (list, tuple)) else [value]
    return ["true" if v is True else "false" if v is False else json.dumps(v) if isinstance(v, dict) else str(v) for v in values]


def parse_embedding_recipe(argv: list[str]):
    """`RECIPE.yaml [--field value ...]` -> (EmbeddingRecipeArguments, DistillationArguments); unknown keys refused,
    `--field null` resets a field to its default."""
    argv = list(argv)
    settings = load_recipe(argv.pop(0)) if argv and not argv[0].startswith("--") else {}
    settings.update(parse_overrides(argv))
    parser = _parser()
    actions = {a.dest: a for a in parser._actions if a.option_strings and a.dest != "help"}
    valid = list(actions)
    unknown = [key for key in settings if key not in actions]
    if unknown:
        hints = {key: difflib.get_close_matches(key, valid, n=2) for key in unknown}
        raise ConfigError("unknown key(s): " + ", ".join(f"{k!r}" + (f" (did you mean {' or '.join(map(repr, h))}?)" if h else "")
                                                       for k, h in hints.items()))
    given = {k: v for k, v in settings.items() if not (v is None or (isinstance(v, str) and v.strip().lower() in ("null", "~")))}
    tokens = [t for key, value in given.items() for t in (f"--{key}", *_tokens(value, actions[key]))]  # null: the default
    try:
        recipe, training = parser.parse_args_into_dataclasses(args=tokens, look_for_args_file=False)
    except ValueError as error:
        raise ConfigError(str(error)) from error
    return recipe, training


# ---------------------------------------------------------------------------- the run
def _sentence_data(recipe: EmbeddingRecipeArguments):
    """The distinct sentences as a file-backed `datasets.Dataset` (column `sentence`), so embeddings cache."""
    import datasets

    from .sentences import collect_sentences

    sentences = collect_sentences(recipe.sentence_dir, recipe.exclude_files)[: recipe.max_train_sentences]
    folder = Path(recipe.cache_dir or datasets.config.HF_DATASETS_CACHE) / "hf_distill_sentences"
    folder.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256("\n".join(sentences).encode()).hexdigest()[:16]
    path = folder / f"sentences-{digest}.jsonl"
    if not path.exists():  # named by content: rewriting it would change its fingerprint and miss the cache
        temporary = path.with_suffix(".tmp")
        temporary.write_text("".join(json.dumps({"sentence": s}) + "\n" for s in sentences), encoding="utf-8")
        os.replace(temporary, path)
    return datasets.load_dataset("json", data_files=str(path), split="train", cache_dir=str(folder / "datasets"))


def _student(recipe: EmbeddingRecipeArguments):
    from .modeling import SiameseModel, select_layers
    from .modeling.modeling_common import keep_layers

    student = SiameseModel.from_backbone(recipe.model_name_or_path, pooling=recipe.pooling, head="cosine")
    if recipe.num_student_layers:
        depth = student.backbone.config.num_hidden_layers
        keep_layers(student.backbone, select_layers(depth, recipe.num_student_layers, recipe.layer_strategy))
        student.config.encoder = student.backbone.config
    return student


def _components(recipe: EmbeddingRecipeArguments, training, student, teacher) -> list:
    """The embedding losses the weights switch on, configured as the recipe says."""
    from .embedding_teachers import embedding_dim
    from .losses.embedding_mse import EmbeddingMSELoss
    from .losses.similarity_structure import SimilarityStructureLoss

    components = []
    if training.embedding_mse_weight > 0:
        components.append(EmbeddingMSELoss(student.embedding_dim, embedding_dim(teacher), keep_projection=recipe.keep_projection,
                                           normalize=recipe.normalize_embeddings))
    if training.similarity_structure_weight > 0:
        components.append(SimilarityStructureLoss(recipe.similarity_kind, recipe.similarity_temperature))
    if not components:
        raise ConfigError("embedding_mse_weight and similarity_structure_weight are both 0: switch on at least one.")
    return components


def _evaluators(recipe: EmbeddingRecipeArguments, training) -> list:
    from .evaluation import STSEvaluator

    return [STSEvaluator.from_jsonl(path, batch_size=training.per_device_eval_batch_size, max_length=training.max_length,
                                    name=_sts_name(path)) for path in recipe.sts_eval_files or []]


def _sts_name(path: str) -> str:
    return f"{Path(path).parent.name}_{Path(path).stem}"


def _early_stopping(recipe: EmbeddingRecipeArguments, training) -> list:
    """The early-stopping callback the recipe asks for ([] when off), after checking what evaluation needs: a run
    that evaluates scores STS files (it has no other eval set), and stops on and keeps the best checkpoint by a
    metric they report."""
    patience = recipe.early_stopping_patience
    what = f"early_stopping_patience={patience}"
    strategy = str(getattr(training.eval_strategy, "value", training.eval_strategy))
    if patience and strategy == "no":
        raise ConfigError(f"{what} needs evaluations: set eval_strategy to 'steps' or 'epoch' (it is 'no').")
    if patience and not training.load_best_model_at_end:
        raise ConfigError(f"{what} keeps the best checkpoint: set load_best_model_at_end to true (it is false).")
    if strategy != "no" and not recipe.sts_eval_files:
        raise ConfigError(f"eval_strategy={strategy!r} needs sts_eval_files to score (a run from sentences has no other "
                          "evaluation): list a validation file in sts_eval_files, or set eval_strategy to 'no' (with "
                          "load_best_model_at_end false and early_stopping_patience null).")
    reported = [f"{_sts_name(path)}_{kind}_cosine" for path in recipe.sts_eval_files or [] for kind in ("spearman", "pearson")]
    metric = (training.metric_for_best_model or "").removeprefix("eval_")
    if (patience or training.load_best_model_at_end) and metric not in reported:
        needs = "the best checkpoint and early stopping need" if patience else "the best checkpoint needs"
        raise ConfigError(f"metric_for_best_model={training.metric_for_best_model!r} is not valid: {needs} a metric the "
                          f"sts_eval_files report: {', '.join(reported)}.")
    if not patience:
        return []
    from transformers import EarlyStoppingCallback

    return [EarlyStoppingCallback(early_stopping_patience=patience)]


def run_embedding_recipe(recipe: EmbeddingRecipeArguments, training) -> dict[str, Any]:
    """Collect the sentences, distil, save the student (and card), score the STS files; every metric."""
    from transformers import set_seed

    from .embedding_teachers import load_embedding_teacher
    from .model_card.models import is_hub_id
    from .teacher_embeddings import add_teacher_embeddings
    from .trainer import DistillationTrainer

    set_seed(training.seed)
    for path in recipe.sts_eval_files or []:
        if not Path(path).is_file():
            raise ConfigError(f"sts_eval_files: {path!r} is not a file; give jsonl files with sentence1, sentence2, score.")
    callbacks = _early_stopping(recipe, training)
    data = _sentence_data(recipe)
    teacher = load_embedding_teacher(recipe.teacher_name_or_path, pooling=recipe.teacher_pooling)
    student = _student(recipe)
    components = _components(recipe, training, student, teacher)
    if recipe.precompute_teacher_embeddings:
        with training.main_process_first(desc="teacher embeddings"):
            data = add_teacher_embeddings(data, teacher, ["sentence"], batch_size=recipe.teacher_batch_size,
                                          max_length=training.max_length, device=training.device, dtype=recipe.embedding_dtype)
    online = not recipe.precompute_teacher_embeddings
    trainer = DistillationTrainer(model=student, args=training, teachers=teacher if online else None, train_dataset=data,
                                  loss_components=components, evaluators=_evaluators(recipe, training), callbacks=callbacks)
    if not online:  # the card names the teacher it never saw: a Hub id, or a local folder by its name only
        name = recipe.teacher_name_or_path
        trainer.model_card_data.teachers = [name if is_hub_id(name) else Path(name).name]
    result = trainer.train(resume_from_checkpoint=training.resume_from_checkpoint)  # 'last': the latest complete one
    trainer.save_model()
    metrics = {**result.metrics, "train_sentences": len(data)}
    if trainer.evaluators:
        metrics.update(trainer.evaluate())
    trainer.log_metrics("all", metrics)
    trainer.save_metrics("all", metrics, combined=False)
    trainer.save_state()
    return metrics


def main(argv: list[str] | None = None) -> int:
    """`python -m hf_distill.embedding_recipe RECIPE.yaml [--field value ...]`; a `ConfigError` exits with 2."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        _parser().print_help()
        return 0
    logging.basicConfig(format="%(asctime)s - %(levelname)s - %(name)s - %(message)s", level=logging.INFO)
    try:
        run_embedding_recipe(*parse_embedding_recipe(argv))
    except ConfigError as error:
        print(f"embedding_recipe: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
