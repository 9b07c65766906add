"""`DistillationTrainer`: the `Trainer` with teachers, loss components and distillation state.

The training step reads top to bottom:
batch -> student forward -> teacher forward (or cached logits) -> each loss term -> weighted sum -> log.

Every loss component and callback is built here from `DistillationArguments` (presets only set
arguments), so overriding an argument changes the training, and two trainers share no state.
"""

from __future__ import annotations

import copy
import os
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn
from transformers import PreTrainedModel, Trainer, TrainerCallback
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from .batch_keys import logits_columns, student_view, teacher_view
from .callbacks import CostAttentionCallback, TeacherAnnealingCallback
from .checkpointing import (
    DISTILLATION_STATE_NAME,
    check_complete,
    distillation_state,
    last_complete_checkpoint,
    load_distillation_state,
    resolve_resume,
    save_distillation_state,
)
from .compatibility import check_layer_distillation
from .data import PairCollator, infer_text_columns
from .embedding_teachers import embedding_columns, embeds
from .length_grouping import LengthGroupedSampling, groups_by_length
from .loss_parameters import LossParameterSync
from .losses.base import check_returned_terms, declared_terms, resolve_weights
from .losses.logits import PredictionLoss
from .losses.registry import build_components, requested_components
from .model_card import DistillationModelCardData, ModelCardCallback, write_card_on_save, write_model_card
from .modeling import CrossEncoderModel, SiameseModel
from .teacher_embeddings import precomputed_teacher_config
from .teachers import TeacherLogits, freeze_teacher, load_teacher
from .trainer_checks import (
    check_arguments, check_columns, check_length_buckets, check_teacher_labels, check_term_weights,
)
from .training_args import DistillationArguments
from .wrappers import is_peft, unwrap_model

__all__ = ["DISTILLATION_STATE_NAME", "DistillationTrainer", "last_complete_checkpoint", "unwrap_student"]

unwrap_student = unwrap_model  # the name earlier releases exported
_ATTENTION_NEEDS = {"query_key", "attentions"}


def _backbone_config(model: nn.Module):
    config = unwrap_model(model).config
    return getattr(config, "encoder", None) or config


class DistillationTrainer(LengthGroupedSampling, Trainer):
    """A `Trainer` that distils one or several teachers into the student.

    Args:
        model: the student (`SiameseModel` or `CrossEncoderModel`, possibly PEFT-wrapped).
        args: `DistillationArguments`; its weights switch the registered loss components on
            (`hf_distill.losses.registry`) and configure the annealing and cost-attention callbacks.
        teachers: one or several teachers (`PreTrainedModel`, PEFT model, or path). Omit them
            for plain fine-tuning, or when the datasets hold precomputed `teacher_logits_{k}`
            columns (`add_teacher_logits`): then no teacher runs. Layer losses read the first teacher.
        loss_components: extra `LossComponent`s (your own, or a registered one configured by hand,
            which then replaces the one its weight argument would build).
        term_weights: explicit weights by term name; they win over `DistillationArguments`.
        evaluators: callables `evaluator(model) -> dict[str, float]` run by `evaluate()` (STS, ranking).
        Everything else is passed to `Trainer`.
    """

    def __init__(
        self,
        model: PreTrainedModel | nn.Module | None = None,
        args: DistillationArguments | None = None,
        teachers: Any = None,
        loss_components: Sequence[nn.Module] = (),
        term_weights: dict[str, float] | None = None,
        evaluators: Sequence[Callable[[nn.Module], dict[str, float]]] = (),
        data_collator: Callable | None = None,
        train_dataset=None,
        eval_dataset=None,
        processing_class=None,
        callbacks: list[TrainerCallback] | None = None,
        **kwargs,
    ):
        args = check_arguments(args, model)
        self.term_weights = check_term_weights(term_weights)
        student = unwrap_model(model)
        if not isinstance(student, (SiameseModel, CrossEncoderModel)):
            raise ValueError(f"model={type(student).__name__} is not valid; give a SiameseModel or CrossEncoderModel.")
        check_length_buckets(args, student)  # the student's kind now, before any teacher loads; its losses below
        columns = train_dataset.column_names if train_dataset is not None else []
        self.offline_columns = logits_columns(columns)
        self.offline_embeddings = embedding_columns(columns)  # precomputed embeddings: read by the embedding losses
        self.teachers = self._load_teachers(teachers, args, loss_components)
        self._build_loss_components(args, student, loss_components, train_dataset)
        self._has_labels = train_dataset is None or args.label_column in columns
        self._check_prediction_inputs(args, columns)
        check_length_buckets(args, student, self.requires)
        tokenizer = processing_class if processing_class is not None else student.tokenizer
        if data_collator is None:
            data_collator = self._default_collator(args, student, tokenizer, columns)
        for name, dataset in (("train", train_dataset), ("eval", eval_dataset)):
            check_columns(name, dataset, data_collator)
        self.evaluators = list(evaluators)
        super().__init__(
            model=model, args=args, data_collator=data_collator, train_dataset=train_dataset, eval_dataset=eval_dataset,
            processing_class=tokenizer, callbacks=self._distillation_callbacks(args, callbacks), **kwargs,
        )
        # Our compute_loss returns a per-batch mean: the Trainer must scale it for accumulation.
        self.model_accepts_loss_kwargs = False
        if callable(getattr(data_collator, "columns", None)):  # PairCollator, GroupCollator: keep what they read
            self._signature_columns = data_collator.columns() + ([args.length_column_name] if groups_by_length(args) else [])
        for teacher in self.teachers:
            freeze_teacher(teacher, self.args.device, self.args.teacher_dtype)
        self.loss_components.to(self.args.device)
        self.add_callback(LossParameterSync(self))
        self.model_card_data = DistillationModelCardData()  # what the card cannot infer (license, speed...)
        self.add_callback(ModelCardCallback(self))
        self._bind_callbacks()
        self._term_sums: dict[str, torch.Tensor] = {}
        self._term_counts: dict[str, int] = {}

    # ------------------------------------------------------------------ building
    def _load_teachers(self, teachers, args: DistillationArguments, given: Sequence[nn.Module]) -> list:
        """Teachers as models; the first one (which layer losses read) eager when attention is compared."""
        teachers = [] if teachers is None else list(teachers) if isinstance(teachers, (list, tuple)) else [teachers]
        wanted = [*given, *requested_components(args, self.term_weights)]
        needs = set().union(*(getattr(c, "requires", set()) for c in wanted))
        eager = "eager" if needs & _ATTENTION_NEEDS else None
        return [load_teacher(t, eager if k == 0 else None) for k, t in enumerate(teachers)]

    def _build_loss_components(
        self, args: DistillationArguments, student: nn.Module, given: Sequence[nn.Module], train_dataset=None
    ) -> None:
        """The prediction loss, the given components and those the argument weights switch on; their needs.
        A component with `prepare_student` (a projection kept as the student's output layer) sets the student up."""
        teacher_config = _backbone_config(self.teachers[0]) if self.teachers else precomputed_teacher_config(train_dataset)
        built = build_components(args, student.config.encoder, teacher_config, given, self.term_weights)
        layer_losses = [c for c in [*given, *built] if getattr(c, "layer_outputs", False)]
        self.run_teachers_online = bool(self.teachers) and (not self.offline_columns or bool(layer_losses))
        if self.offline_columns and self.teachers and layer_losses:
            warnings.warn(
                f"train_dataset has precomputed {', '.join(self.offline_columns)}, but the layer losses "
                f"({', '.join(type(c).__name__ for c in layer_losses)}) need the teachers online: the columns are "
                "ignored and the teachers run every step (drop the columns, or the layer weights, to silence this).",
                UserWarning, stacklevel=3,
            )
        count = len(self.teachers) if self.run_teachers_online else len(self.offline_columns)
        prediction = PredictionLoss(args.temperature, args.teacher_reduction, num_teachers=max(count, 1))
        self.loss_components = nn.ModuleList([prediction, *given, *built])
        for component in self.loss_components:
            if hasattr(component, "prepare_student"):
                component.prepare_student(student)
        declared = declared_terms(self.loss_components)  # also refuses a term name owned by two components
        groups = {term.group for term, _ in declared.values() if term.group}
        check_term_weights(self.term_weights, [*declared, *groups])
        self.requires = set().union(*(c.requires for c in self.loss_components))
        self.requires_alignment = any(c.requires_alignment for c in self.loss_components)
        if layer_losses and self.teachers:
            head_reduction = any(getattr(c, "head_reduction", None) for c in self.loss_components)
            check_layer_distillation(student, unwrap_model(self.teachers[0]), self.requires, 0, head_reduction)
        check_teacher_labels(student, self.teachers)

    def _check_prediction_inputs(self, args: DistillationArguments, columns: list[str]) -> None:
        hard, _ = args.prediction_weights(0.0 if args.annealing == "linear" else None)
        if (hard > 0 or args.annealing == "linear") and not self._has_labels:
            raise ValueError(
                f"label_column={args.label_column!r} is not in the training set (columns {columns}), but the hard "
                "loss needs gold labels; set alpha=1 / hard_weight=0 (no annealing) or give a labelled set."
            )
        if not self.teachers and not self.offline_columns and (args.soft_weight or 0) > 0:
            raise ValueError(f"soft_weight={args.soft_weight} but no teachers and no teacher_logits_* columns were given.")

    def _default_collator(self, args: DistillationArguments, student: nn.Module, tokenizer, columns: list[str]):
        """A `PairCollator` tokenising the student's view and each online teacher's own view on the fly."""
        text_columns = tuple(args.text_columns) if args.text_columns else (infer_text_columns(columns) if columns else None)
        if tokenizer is None or text_columns is None:
            raise ValueError("the student carries no tokenizer and no data_collator was given; give processing_class.")
        online = self.run_teachers_online
        return PairCollator(
            tokenizer=tokenizer,
            siamese=isinstance(student, SiameseModel),
            text_columns=text_columns,
            teacher_tokenizers=[self._teacher_tokenizer(t) for t in self.teachers] if online else [],
            teacher_embeds=[embeds(t) for t in self.teachers] if online else [],
            label_column=args.label_column if self._has_labels else None,
            label2id=student.config.label2id,
            regression=student.config.num_labels == 1,
            label_scale=args.label_scale,
            max_length=args.max_length,
            teacher_logit_columns=self.offline_columns if not online else [],
            teacher_embedding_columns=self.offline_embeddings,
            virt_alignment=self.requires_alignment,
        )

    def _distillation_callbacks(self, args: DistillationArguments, callbacks) -> list[TrainerCallback]:
        """The given callbacks plus annealing and cost attention, built from the arguments."""
        callbacks = list(callbacks or [])
        for callback in callbacks:
            if isinstance(callback, (TeacherAnnealingCallback, CostAttentionCallback)):
                raise ValueError(
                    f"callbacks=[{type(callback).__name__}(...)] is not valid: the trainer builds it from the arguments "
                    "(annealing; emd_temperature, emd_update, emd_separate_weights, emd_smooth_weights); set those instead."
                )
        if args.annealing == "linear":
            callbacks.append(TeacherAnnealingCallback(args.annealing))
        if any(hasattr(c, "update_weights") for c in self.loss_components):
            callbacks.append(CostAttentionCallback(
                args.emd_temperature, args.emd_update, args.emd_separate_weights, smooth=args.emd_smooth_weights
            ))
        return callbacks

    def _bind_callbacks(self) -> None:
        """Give cost-attention callbacks the EMD components (again after a resume re-creates them)."""
        for callback in self.callback_handler.callbacks:
            if isinstance(callback, CostAttentionCallback):
                callback.bind(self.loss_components)

    def _load_callback_state(self) -> None:
        super()._load_callback_state()
        self._bind_callbacks()

    @staticmethod
    def _teacher_tokenizer(teacher: nn.Module):
        tokenizer = getattr(unwrap_model(teacher), "tokenizer", None)
        if tokenizer is None:
            raise ValueError(f"teacher {type(teacher).__name__} carries no tokenizer; set teacher.tokenizer.")
        return tokenizer

    # ------------------------------------------------------------------ the step
    def _annealing_lambda(self) -> float | None:
        for callback in self.callback_handler.callbacks:
            if isinstance(callback, TeacherAnnealingCallback):
                return callback.current_lambda
        return None

    def _teacher_outputs(self, inputs: dict[str, torch.Tensor]) -> list:
        """Teacher outputs for this batch: precomputed logits, or online forwards without autograd.

        Only the first teacher returns layer outputs (hidden states, queries/keys): layer losses
        read it alone. `torch.no_grad`, not `inference_mode`: inference tensors cannot be saved for
        backward, so every output a loss reads would need a copy; frozen outputs are used as they are.
        """
        if not self.run_teachers_online:
            return [TeacherLogits(inputs[column]) for column in self.offline_columns if column in inputs]
        layers = dict(
            output_hidden_states="hidden_states" in self.requires,
            output_attentions="attentions" in self.requires,
        )
        if "query_key" in self.requires:
            layers["output_query_key"] = True
        outputs = []
        for k, teacher in enumerate(self.teachers):
            with torch.no_grad():
                outputs.append(teacher(**teacher_view(inputs, k), **(layers if k == 0 else {})))
        return outputs

    def loss_terms(self, model, inputs) -> tuple[dict[str, torch.Tensor], object, list]:
        """Every loss component's named terms for one batch, unweighted, with the student's and the
        teachers' outputs: what `compute_loss` weights and sums (and what a diagnostic can inspect)."""
        buckets = self.args.student_length_buckets
        student_out = model(
            **student_view(inputs, labels=False),
            output_hidden_states="hidden_states" in self.requires,
            output_attentions="attentions" in self.requires,
            output_query_key="query_key" in self.requires,
            **({"length_buckets": buckets} if buckets > 1 and model.training else {}),
        )
        teacher_outs = self._teacher_outputs(inputs)
        terms: dict[str, torch.Tensor] = {}
        for component in self.loss_components:
            returned = component(student_out, teacher_outs, inputs)
            check_returned_terms(component, returned)
            terms.update(returned)
        return terms, student_out, teacher_outs

    def term_weights_now(self, has_teachers: bool = True) -> dict[str, float]:
        """The weight of every declared term at this step (`resolve_weights`: the card reads the same)."""
        return resolve_weights(self.loss_components, self.args, self.term_weights, self._annealing_lambda(), has_teachers)

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        terms, student_out, teacher_outs = self.loss_terms(model, inputs)
        weights = self.term_weights_now(has_teachers=bool(teacher_outs) or bool(self.offline_embeddings))
        loss = sum(weights[name] * value for name, value in terms.items())
        self._check_finite(terms, loss)
        if model.training:
            self._record(terms)
        return (loss, student_out) if return_outputs else loss

    def _check_finite(self, terms: dict[str, torch.Tensor], loss) -> None:
        if torch.isfinite(torch.as_tensor(loss).detach()).all():
            return
        bad = [name for name, value in terms.items() if not torch.isfinite(value.detach()).all()]
        raise FloatingPointError(
            f"non-finite loss {float(torch.as_tensor(loss).detach())} at step {self.state.global_step}; non-finite terms: {bad or 'none (sum overflow)'}."
        )

    # ------------------------------------------------------------------ logging
    def _record(self, terms: dict[str, torch.Tensor]) -> None:
        values = {name: value.detach().float() for name, value in terms.items()}
        annealing_lambda = self._annealing_lambda()
        if annealing_lambda is not None:
            values["lambda"] = torch.tensor(annealing_lambda)
        for name, value in values.items():
            self._term_sums[name] = self._term_sums.get(name, 0.0) + value
            self._term_counts[name] = self._term_counts.get(name, 0) + 1

    def log(self, logs: dict[str, float], *args, **kwargs) -> None:
        """Add the mean of every loss term since the last log (over the steps that had it, pooled across ranks)."""
        if "loss" in logs and self._term_counts:
            names = sorted({*declared_terms(self.loss_components), *self._term_sums})  # the same list on every rank
            sums = torch.stack([torch.as_tensor(self._term_sums.get(n, 0.0), device=self.args.device).float() for n in names])
            counts = torch.tensor([float(self._term_counts.get(n, 0)) for n in names], device=self.args.device)
            if self.accelerator.num_processes > 1:
                sums, counts = self.accelerator.reduce(sums, reduction="sum"), self.accelerator.reduce(counts, reduction="sum")
            logs.update({n: round(float(s / c), 6) for n, s, c in zip(names, sums, counts) if c > 0})
            self._term_sums, self._term_counts = {}, {}
            for component in self.loss_components:
                if hasattr(component, "layer_weights"):
                    for key, weights in component.layer_weights().items():
                        logs.update({f"w_{key}_{i + 1}": round(float(w), 6) for i, w in enumerate(weights)})
        super().log(logs, *args, **kwargs)

    # ------------------------------------------------------------------ optimizer and state
    def create_optimizer(self, model=None):
        """The student's optimizer, plus a group for loss-component parameters (projections)."""
        optimizer = super().create_optimizer(model)
        extra = [p for p in self.loss_components.parameters() if p.requires_grad]
        in_optimizer = {id(p) for group in optimizer.param_groups for p in group["params"]}
        if extra and id(extra[0]) not in in_optimizer:
            optimizer.add_param_group({"params": extra, "weight_decay": 0.0})
        return optimizer

    def distillation_state(self) -> dict[str, torch.Tensor]:
        """Parameters and buffers of every loss component (projections, EMD layer weights)."""
        return distillation_state(self.loss_components)

    def _save_checkpoint(self, model, trial):
        """The distillation state first (atomically), then the Trainer's checkpoint, `trainer_state.json` last
        (see `hf_distill.checkpointing`)."""
        if self.args.should_save:
            folder = os.path.join(self._get_output_dir(trial=trial), f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}")
            save_distillation_state(self.loss_components, folder)
        self._saving_checkpoint = True  # save_model: keep PEFT adapters unmerged, no model card
        try:
            super()._save_checkpoint(model, trial)
        finally:
            self._saving_checkpoint = False

    def train(self, resume_from_checkpoint: str | bool | None = None, *args, **kwargs):
        """`Trainer.train`; `resume_from_checkpoint=True` picks the last *complete* checkpoint (one with
        `trainer_state.json`), skipping a folder left half written by a crash while saving."""
        return super().train(resolve_resume(resume_from_checkpoint, self.args.output_dir), *args, **kwargs)

    def _load_from_checkpoint(self, resume_from_checkpoint, model=None):
        check_complete(resume_from_checkpoint)
        super()._load_from_checkpoint(resume_from_checkpoint, model)
        load_distillation_state(self.loss_components, resume_from_checkpoint, str(self.args.device))

    # ------------------------------------------------------------------ final save, model card, Hub
    def save_model(self, output_dir: str | None = None, _internal_call: bool = False) -> None:
        """Save the student; a final save (not a checkpoint) also writes its model card, README.md.

        With `merge_adapters_on_save` a PEFT student is saved merged (`merge_and_unload` on a copy), so
        the folder is a complete student (weights, config with `auto_map`, modeling code, tokenizer).
        """
        output_dir = output_dir if output_dir is not None else self.args.output_dir
        final = not getattr(self, "_saving_checkpoint", False)
        merge = final and self.args.merge_adapters_on_save and is_peft(self.accelerator.unwrap_model(self.model))
        if merge:
            self._save_merged_student(output_dir)
        else:
            super().save_model(output_dir, _internal_call=True)
        if final and self.args.should_save:
            adapter_only = is_peft(self.accelerator.unwrap_model(self.model)) and not merge
            write_card_on_save(self, output_dir, adapter_only)  # README.md (+ speed when asked), refreshed by later evals
        if self.args.push_to_hub and not _internal_call:
            self.push_to_hub(commit_message="Model save", revision=self.args.hub_revision)

    def _save_merged_student(self, output_dir: str) -> None:
        """The PEFT student with its adapters merged, as a plain hf_distill model (main process)."""
        deepspeed_stage = self.accelerator.state.deepspeed_plugin.zero_stage if self.is_deepspeed_enabled else 0
        if self.is_fsdp_enabled or deepspeed_stage == 3:
            raise ValueError(
                "merge_adapters_on_save=True needs the full student on one process, but it is sharded (FSDP or DeepSpeed "
                "ZeRO-3); save the adapter (merge_adapters_on_save=False) and merge it afterwards with merge_and_unload()."
            )
        if not self.args.should_save:
            return
        os.makedirs(output_dir, exist_ok=True)
        merged = copy.deepcopy(self.accelerator.unwrap_model(self.model)).merge_and_unload()
        merged.save_pretrained(output_dir)
        for stale in ("adapter_config.json", "adapter_model.safetensors", "adapter_model.bin"):
            # an adapter file next to the merged weights would make from_pretrained load it as an adapter
            if os.path.exists(os.path.join(output_dir, stale)):
                os.remove(os.path.join(output_dir, stale))
        if self.processing_class is not None:
            self.processing_class.save_pretrained(output_dir)
        torch.save(self.args, os.path.join(output_dir, "training_args.bin"))

    def create_model_card(
        self,
        language: str | None = None,
        license: str | None = None,
        tags: str | list[str] | None = None,
        model_name: str | None = None,
        finetuned_from: str | None = None,
        tasks: str | list[str] | None = None,
        dataset_tags: str | list[str] | None = None,
        dataset: str | list[str] | None = None,
        dataset_args: str | list[str] | None = None,
        **card_fields,
    ) -> None:
        """The distillation model card in `output_dir` (README.md), used by `push_to_hub` (see `hf_distill.model_card`).

        The arguments are remembered in `self.model_card_data` (`finetuned_from` -> base_model,
        `dataset` -> datasets); `card_fields` sets any other `DistillationModelCardData` field.
        """
        if not self.is_world_process_zero():
            return
        self.model_card_data.update(
            language=language, license=license, tags=tags, model_name=model_name, base_model=finetuned_from,
            datasets=dataset if dataset is not None else dataset_tags, **card_fields,
        )
        merged = self.args.merge_adapters_on_save
        write_model_card(self, self.args.output_dir, adapter_only=is_peft(self.accelerator.unwrap_model(self.model)) and not merged)

    # ------------------------------------------------------------------ evaluation
    def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None):
        """Student only: task loss and logits (teachers do not run during evaluation)."""
        inputs = self._prepare_inputs(student_view(inputs))
        with torch.no_grad():
            out = model(**inputs)
        loss = out.loss.detach() if out.loss is not None else None
        if prediction_loss_only:
            return loss, None, None
        return loss, out.logits.detach() if out.logits is not None else None, inputs.get("labels")

    def _validate_args(self):
        """`Trainer._validate_args`, except that evaluators alone may evaluate: a run from sentences (no labelled
        eval set) can still evaluate every `eval_steps` and stop on an STS evaluator's metric."""
        stand_in = self.eval_dataset is None and bool(self.evaluators)
        if stand_in:
            self.eval_dataset = ()  # not None: the check for an eval set passes; evaluate() still sees none
        try:
            super()._validate_args()
        finally:
            if stand_in:
                self.eval_dataset = None

    def evaluate(self, eval_dataset=None, ignore_keys=None, metric_key_prefix: str = "eval"):
        """`Trainer.evaluate` on the eval set (if any), then every evaluator (STS, ranking...). The callbacks'
        `on_evaluate` (early stopping) runs once, with every metric: an evaluator's metric can be the one to stop on,
        with or without an eval set."""
        metrics: dict[str, float] = {}
        if eval_dataset is not None or self.eval_dataset is not None:
            if not self.evaluators:
                return super().evaluate(eval_dataset, ignore_keys, metric_key_prefix)
            handler = self.callback_handler
            outermost = "on_evaluate" not in vars(handler)  # a dict of eval sets comes back here for each
            if outermost:
                handler.on_evaluate = lambda args, state, control, *rest, **kwargs: control  # deferred to the end
            try:
                metrics = super().evaluate(eval_dataset, ignore_keys, metric_key_prefix)
            finally:
                if outermost:
                    del handler.on_evaluate
        if self.evaluators:
            student = unwrap_model(self.model)
            extra = {}
            for evaluator in self.evaluators:
                extra.update({f"{metric_key_prefix}_{k}": v for k, v in evaluator(student).items()})
            extra["epoch"] = self.state.epoch
            self.log(extra)
            metrics.update(extra)
            self.control = self.callback_handler.on_evaluate(self.args, self.state, self.control, metrics)
        return metrics

