"""`DistillationTrainer`: the `Trainer` with teachers, loss components and distillation state.

The training step reads top to bottom:
batch -> student forward -> teacher forward (or cached logits) -> each loss term -> weighted sum -> log.
"""

from __future__ import annotations

import copy
import math
import os
import re
from collections.abc import Callable, Sequence
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from torch import nn
from transformers import PreTrainedModel, Trainer, TrainerCallback
from transformers.trainer import TRAINER_STATE_NAME
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from .callbacks import CostAttentionCallback, TeacherAnnealingCallback
from .compatibility import check_layer_distillation
from .data import PairCollator, check_labels, infer_text_columns
from .losses.from_arguments import components_from_arguments
from .losses.logits import PredictionLoss
from .model_card import DistillationModelCardData, ModelCardCallback, write_card_on_save, write_model_card
from .modeling import CrossEncoderModel, SiameseModel
from .teachers import TeacherLogits, freeze_teacher, load_teacher, teacher_logit_columns
from .training_args import DistillationArguments

DISTILLATION_STATE_NAME = "distillation_state.safetensors"
TEACHER_PREFIX = "teacher_"
# Which DistillationArguments weight scales which loss term; other terms default to 1.
TERM_WEIGHT_FIELDS = {
    "hidden": "hidden_weight",
    "attention": "attention_weight",
    "embedding": "embedding_weight",
    "emd_hidden": "emd_weight",
    "emd_attention": "emd_weight",
    "emd_embedding": "emd_weight",
    "virt": "virt_weight",
}


def last_complete_checkpoint(folder: str) -> str | None:
    """The highest-numbered `checkpoint-N` in `folder` that holds `trainer_state.json` (written last), or None."""
    if not os.path.isdir(folder):
        return None
    steps = []
    for name in os.listdir(folder):
        match = re.fullmatch(rf"{PREFIX_CHECKPOINT_DIR}-(\d+)", name)
        if match and os.path.isfile(os.path.join(folder, name, TRAINER_STATE_NAME)):
            steps.append((int(match.group(1)), name))
    return os.path.join(folder, max(steps)[1]) if steps else None


def _layer_weights_requested(args: DistillationArguments) -> bool:
    return any(
        getattr(args, name) > 0 for name in ("hidden_weight", "attention_weight", "embedding_weight", "emd_weight", "virt_weight")
    )


def unwrap_student(model: nn.Module) -> nn.Module:
    """The hf_distill model under PEFT / DDP wrappers."""
    while True:
        if hasattr(model, "module") and isinstance(model.module, nn.Module):
            model = model.module
        elif hasattr(model, "get_base_model"):
            model = model.get_base_model()
        else:
            return model


class _LossParameterGradients(TrainerCallback):
    """Gradients of loss-component parameters (projections): averaged across processes, cleared after each step.

    They live outside the DDP-wrapped student, so DDP does not all-reduce them, and the Trainer
    only zeroes the student's gradients.
    """

    def __init__(self, trainer: "DistillationTrainer"):
        self.trainer = trainer

    def on_train_begin(self, args, state, control, **kwargs):
        """Start every rank from rank 0's component parameters and buffers: DDP broadcasts only the student's,
        and a projection initialised from each rank's RNG would otherwise differ from rank to rank."""
        if self.trainer.accelerator.num_processes <= 1:
            return
        for tensor in [*self.trainer.loss_components.parameters(), *self.trainer.loss_components.buffers()]:
            torch.distributed.broadcast(tensor.data, src=0)

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        if self.trainer.accelerator.num_processes <= 1:
            return
        for parameter in self.trainer.loss_components.parameters():
            if parameter.grad is not None:
                torch.distributed.all_reduce(parameter.grad, op=torch.distributed.ReduceOp.AVG)

    def on_optimizer_step(self, args, state, control, **kwargs):
        self.trainer.loss_components.zero_grad(set_to_none=True)


class DistillationTrainer(Trainer):
    """A `Trainer` that distils one or several teachers into the student.

    Args:
        model: the student (`SiameseModel` or `CrossEncoderModel`, possibly PEFT-wrapped).
        args: `DistillationArguments`.
        teachers: one or several teachers (`PreTrainedModel`, PEFT model, or path). Omit them
            for plain fine-tuning, or when the datasets hold precomputed `teacher_logits_{k}`
            columns (`add_teacher_logits`): then no teacher runs.
        loss_components: extra loss components (hidden, attention, EMD, VIRT...): modules whose
            forward(student_out, teacher_outs, batch) returns named terms.
        term_weights: explicit weights by term name; they win over `DistillationArguments` (others default to 1).
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
        if args is None:
            args = DistillationArguments(output_dir="hf_distill_output")
        if not isinstance(args, DistillationArguments):
            raise ValueError(f"args={type(args).__name__} is not valid; give DistillationArguments.")
        if model is None:
            raise ValueError("model=None is not valid; give the student model.")
        for name, value in (term_weights or {}).items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise ValueError(f"term_weights[{name!r}]={value!r} is out of range; it must be >= 0 (a finite number).")
        student = unwrap_student(model)
        if not isinstance(student, (SiameseModel, CrossEncoderModel)):
            raise ValueError(f"model={type(student).__name__} is not valid; give a SiameseModel or CrossEncoderModel.")
        # ---- teachers: offline columns, online models, or none (plain fine-tuning)
        columns = train_dataset.column_names if train_dataset is not None else []
        self.offline_columns = teacher_logit_columns(columns) if columns else []
        teachers = [] if teachers is None else list(teachers) if isinstance(teachers, (list, tuple)) else [teachers]
        given_requires = set().union(*(getattr(c, "requires", set()) for c in loss_components))
        wants_attention = bool(given_requires & {"query_key", "attentions"}) or any(
            getattr(args, name) > 0 for name in ("attention_weight", "emd_weight", "virt_weight")
        )
        self.teachers = [load_teacher(t, "eager" if wants_attention else None) for t in teachers]

        # ---- loss components: prediction loss, the given ones, and those the argument weights ask for
        built = []
        if _layer_weights_requested(args):
            if not self.teachers:
                raise ValueError(
                    "hidden/attention/embedding/emd/virt weights > 0 need an online teacher (teachers=...): layer losses "
                    "read the teacher's hidden states and attention, which precomputed logits do not carry."
                )
            built = components_from_arguments(
                args, student.config.encoder, unwrap_student(self.teachers[0]).config.encoder, loss_components
            )
        self.loss_components = nn.ModuleList(
            [PredictionLoss(args.temperature, args.teacher_reduction), *loss_components, *built]
        )
        self.requires = set().union(*(getattr(c, "requires", set()) for c in self.loss_components))
        # Components with `requires_alignment = True` (VIRT) read the collator's token alignment.
        self.requires_alignment = any(getattr(c, "requires_alignment", False) for c in self.loss_components)
        self.term_weights = dict(term_weights or {})
        self.evaluators = list(evaluators)
        self.run_teachers_online = bool(self.teachers) and (not self.offline_columns or bool(self.requires))
        head_reduction = any(getattr(c, "head_reduction", None) for c in self.loss_components)
        for k, teacher in enumerate(self.teachers):
            check_layer_distillation(student, unwrap_student(teacher), self.requires, k, head_reduction)
        self._check_teachers(student)

        # ---- data: tokenise each view on the fly
        tokenizer = processing_class if processing_class is not None else student.tokenizer
        text_columns = tuple(args.text_columns) if args.text_columns else (infer_text_columns(columns) if columns else None)
        self._has_labels = train_dataset is None or args.label_column in columns
        hard, soft = args.prediction_weights(0.0 if args.annealing == "linear" else None)
        if (hard > 0 or args.annealing == "linear") and not self._has_labels:
            raise ValueError(
                f"label_column={args.label_column!r} is not in the training set (columns {columns}), but the hard "
                "loss needs gold labels; set alpha=1 / hard_weight=0 (no annealing) or give a labelled set."
            )
        if not self.teachers and not self.offline_columns and (args.soft_weight or 0) > 0:
            raise ValueError(f"soft_weight={args.soft_weight} but no teachers and no teacher_logits_* columns were given.")
        if data_collator is None:
            if tokenizer is None or text_columns is None:
                raise ValueError("the student carries no tokenizer and no data_collator was given; give processing_class.")
            data_collator = PairCollator(
                tokenizer=tokenizer,
                siamese=isinstance(student, SiameseModel),
                text_columns=text_columns,
                teacher_tokenizers=[self._teacher_tokenizer(t) for t in self.teachers] if self.run_teachers_online else [],
                label_column=args.label_column if self._has_labels else None,
                label2id=student.config.label2id,
                regression=student.config.num_labels == 1,
                label_scale=args.label_scale,
                max_length=args.max_length,
                teacher_logit_columns=self.offline_columns if not self.run_teachers_online else [],
                virt_alignment=self.requires_alignment,
            )
        for name, dataset in (("train", train_dataset), ("eval", eval_dataset)):
            self._check_columns(name, dataset, data_collator)

        callbacks = list(callbacks or [])
        if args.annealing == "linear":
            callbacks.append(TeacherAnnealingCallback(args.annealing))
        if any(hasattr(c, "update_weights") for c in self.loss_components) and not any(
            isinstance(c, CostAttentionCallback) for c in callbacks
        ):
            callbacks.append(CostAttentionCallback(
                args.emd_temperature, args.emd_update, args.emd_separate_weights, smooth=args.emd_smooth_weights
            ))
        super().__init__(
            model=model,
            args=args,
            data_collator=data_collator,
            train_dataset=train_dataset,
            eval_dataset=eval_dataset,
            processing_class=tokenizer,
            callbacks=callbacks,
            **kwargs,
        )
        # Our compute_loss returns a per-batch mean: the Trainer must scale it for accumulation.
        self.model_accepts_loss_kwargs = False
        if isinstance(data_collator, PairCollator):
            self._signature_columns = data_collator.columns()
        for teacher in self.teachers:
            freeze_teacher(teacher, self.args.device, self.args.teacher_dtype)
        self.loss_components.to(self.args.device)
        self.add_callback(_LossParameterGradients(self))
        self.model_card_data = DistillationModelCardData()  # what the card cannot infer (license, speed...)
        self.add_callback(ModelCardCallback(self))
        self._bind_callbacks()
        self._term_sums: dict[str, torch.Tensor] = {}
        self._term_count = 0

    def _bind_callbacks(self) -> None:
        """Give cost-attention callbacks the EMD components (again after a resume re-creates them)."""
        for callback in self.callback_handler.callbacks:
            if isinstance(callback, CostAttentionCallback):
                callback.bind(self.loss_components)

    def _load_callback_state(self) -> None:
        super()._load_callback_state()
        self._bind_callbacks()

    # ------------------------------------------------------------------ checks
    @staticmethod
    def _teacher_tokenizer(teacher: nn.Module):
        tokenizer = getattr(unwrap_student(teacher), "tokenizer", None)
        if tokenizer is None:
            raise ValueError(f"teacher {type(teacher).__name__} carries no tokenizer; set teacher.tokenizer.")
        return tokenizer

    def _check_teachers(self, student: nn.Module) -> None:
        for k, teacher in enumerate(self.teachers):
            config = unwrap_student(teacher).config
            if student.config.num_labels != config.num_labels:
                raise ValueError(
                    f"teachers[{k}].num_labels={config.num_labels} differs from the student's "
                    f"num_labels={student.config.num_labels}; they must predict the same labels."
                )
            if config.num_labels > 1 and student.config.label2id and config.label2id:
                if dict(student.config.label2id) != dict(config.label2id):
                    raise ValueError(
                        f"teachers[{k}].label2id={dict(config.label2id)} differs from the student's "
                        f"label2id={dict(student.config.label2id)}; align the label names and ids."
                    )

    @staticmethod
    def _check_columns(name: str, dataset, collator: PairCollator) -> None:
        if dataset is None:
            return
        datasets = dataset.items() if isinstance(dataset, dict) else [(None, dataset)]  # dict / DatasetDict: each part
        for key, part in datasets:
            where = f"{name}_dataset" + (f"[{key!r}]" if key is not None else "")
            if hasattr(part, "__len__") and len(part) == 0:
                raise ValueError(f"{where} is empty (0 rows); give at least one example.")
            if not isinstance(collator, PairCollator) or not hasattr(part, "column_names"):
                continue
            missing = [c for c in collator.text_columns if c not in part.column_names]
            if missing:
                raise ValueError(
                    f"text_columns={list(collator.text_columns)} not found in the {name} dataset: missing {missing}; "
                    f"its columns are {part.column_names}."
                )
            if collator.label_column:
                check_labels(name, part, collator.label_column, collator.label2id, collator.regression)

    # ------------------------------------------------------------------ the step
    def _annealing_lambda(self) -> float | None:
        for callback in self.callback_handler.callbacks:
            if isinstance(callback, TeacherAnnealingCallback):
                return callback.current_lambda
        return None

    def _teacher_outputs(self, inputs: dict[str, torch.Tensor]) -> list:
        """Teacher outputs for this batch: precomputed logits, or online forwards without autograd.

        `torch.no_grad`, not `inference_mode`: inference tensors cannot be saved for backward, so
        every output a loss reads would need a copy (151 MB of queries and keys per VIRT step at
        batch 16 and 2 x 128 tokens); frozen teacher outputs under no_grad are used as they are.
        """
        if not self.run_teachers_online:
            return [TeacherLogits(inputs[column]) for column in self.offline_columns if column in inputs]
        wants = dict(
            output_hidden_states="hidden_states" in self.requires,
            output_attentions="attentions" in self.requires,
        )
        if "query_key" in self.requires:
            wants["output_query_key"] = True
        outputs = []
        for k, teacher in enumerate(self.teachers):
            prefix = f"{TEACHER_PREFIX}{k}_"
            view = {key[len(prefix) :]: value for key, value in inputs.items() if key.startswith(prefix)}
            with torch.no_grad():
                outputs.append(teacher(**view, **wants))
        return outputs

    def loss_terms(self, model, inputs) -> tuple[dict[str, torch.Tensor], object, list]:
        """Every loss component's named terms for one batch, unweighted, with the student's and the
        teachers' outputs: what `compute_loss` weights and sums (and what a diagnostic can inspect)."""
        student_inputs = {k: v for k, v in inputs.items() if not k.startswith(TEACHER_PREFIX)}
        student_out = model(
            **student_inputs,
            output_hidden_states="hidden_states" in self.requires,
            output_attentions="attentions" in self.requires,
            output_query_key="query_key" in self.requires,
        )
        teacher_outs = self._teacher_outputs(inputs)
        terms: dict[str, torch.Tensor] = {}
        for component in self.loss_components:
            terms.update(component(student_out, teacher_outs, inputs))
        return terms, student_out, teacher_outs

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        terms, student_out, teacher_outs = self.loss_terms(model, inputs)
        weights = self._weights(terms, has_teachers=bool(teacher_outs))
        loss = sum(weights[name] * value for name, value in terms.items() if name in weights)
        self._check_finite(terms, loss)
        if model.training:
            self._record(terms, weights)
        return (loss, student_out) if return_outputs else loss

    def _weights(self, terms: dict[str, torch.Tensor], has_teachers: bool) -> dict[str, float]:
        """The weight of every term in the total (per-teacher `soft_k` terms are logged, not added)."""
        annealing_lambda = self._annealing_lambda()
        hard, soft = self.args.prediction_weights(annealing_lambda)
        if not has_teachers:
            hard, soft = 1.0, 0.0  # plain fine-tuning: the ordinary task loss
        weights = {"hard": hard, "soft": soft}
        for name in terms:
            if name in self.term_weights:
                weights[name] = self.term_weights[name]
            elif name in TERM_WEIGHT_FIELDS:
                weights[name] = getattr(self.args, TERM_WEIGHT_FIELDS[name])
            elif name not in weights and not name.startswith("soft_"):
                weights[name] = 1.0
        return weights

    def _check_finite(self, terms: dict[str, torch.Tensor], loss: torch.Tensor) -> None:
        if torch.isfinite(loss.detach()).all():
            return
        bad = [name for name, value in terms.items() if not torch.isfinite(value.detach()).all()]
        raise FloatingPointError(
            f"non-finite loss {loss.item()} at step {self.state.global_step}; non-finite terms: {bad or 'none (sum overflow)'}."
        )

    # ------------------------------------------------------------------ logging
    def _record(self, terms: dict[str, torch.Tensor], weights: dict[str, float]) -> None:
        for name, value in terms.items():
            self._term_sums[name] = self._term_sums.get(name, 0.0) + value.detach().float()
        annealing_lambda = self._annealing_lambda()
        if annealing_lambda is not None:
            self._term_sums["lambda"] = self._term_sums.get("lambda", 0.0) + torch.tensor(annealing_lambda)
        self._term_count += 1

    def log(self, logs: dict[str, float], *args, **kwargs) -> None:
        """Add the mean of every loss term since the last log (over steps and accumulation, across ranks)."""
        if "loss" in logs and self._term_count:
            names = sorted(self._term_sums)
            means = torch.stack([torch.as_tensor(self._term_sums[n], device=self.args.device) for n in names])
            means = means / self._term_count
            if self.accelerator.num_processes > 1:
                means = self.accelerator.reduce(means, reduction="mean")
            logs.update({name: round(float(value), 6) for name, value in zip(names, means)})
            self._term_sums, self._term_count = {}, 0
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
        return {k: v.detach().cpu().contiguous() for k, v in self.loss_components.state_dict().items()}

    def _save_checkpoint(self, model, trial):
        """The distillation state first (atomically), then the Trainer's checkpoint, `trainer_state.json` last.

        A checkpoint folder is complete once `trainer_state.json` is in it; by then its
        `distillation_state.safetensors` is complete too (temp file + `os.replace`), so a crash while
        saving never leaves a checkpoint whose extra state is missing or half written.
        """
        state = self.distillation_state()
        if state and self.args.should_save:
            folder = os.path.join(self._get_output_dir(trial=trial), f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}")
            os.makedirs(folder, exist_ok=True)
            temporary = os.path.join(folder, DISTILLATION_STATE_NAME + ".tmp")
            save_file(state, temporary)
            os.replace(temporary, os.path.join(folder, DISTILLATION_STATE_NAME))
        self._saving_checkpoint = True  # save_model: keep PEFT adapters unmerged, no model card
        try:
            super()._save_checkpoint(model, trial)
        finally:
            self._saving_checkpoint = False

    def train(self, resume_from_checkpoint: str | bool | None = None, *args, **kwargs):
        """`Trainer.train`; `resume_from_checkpoint=True` picks the last *complete* checkpoint (one with
        `trainer_state.json`), skipping a folder left half written by a crash while saving."""
        if resume_from_checkpoint is True:
            resume_from_checkpoint = last_complete_checkpoint(self.args.output_dir)
            if resume_from_checkpoint is None:
                raise ValueError(
                    f"resume_from_checkpoint=True but output_dir={self.args.output_dir!r} holds no complete checkpoint "
                    f"(a {PREFIX_CHECKPOINT_DIR}-N folder with {TRAINER_STATE_NAME}); give a checkpoint path or start afresh."
                )
        return super().train(resume_from_checkpoint, *args, **kwargs)

    def _load_from_checkpoint(self, resume_from_checkpoint, model=None):
        if not os.path.isfile(os.path.join(resume_from_checkpoint, TRAINER_STATE_NAME)):
            previous = last_complete_checkpoint(os.path.dirname(os.path.abspath(resume_from_checkpoint)))
            raise ValueError(
                f"resume_from_checkpoint={str(resume_from_checkpoint)!r} is incomplete: it has no {TRAINER_STATE_NAME} "
                "(the run stopped while saving it). Resume from a complete checkpoint"
                + (f", e.g. {previous!r}" if previous else "")
                + " (resume_from_checkpoint=True picks the last complete one)."
            )
        super()._load_from_checkpoint(resume_from_checkpoint, model)
        path = os.path.join(resume_from_checkpoint, DISTILLATION_STATE_NAME)
        if os.path.exists(path):
            self.loss_components.load_state_dict(load_file(path, device=str(self.args.device)))
        elif self.distillation_state():
            raise FileNotFoundError(
                f"{path} is missing: the checkpoint has no distillation state (projections, EMD weights) to resume."
            )

    # ------------------------------------------------------------------ final save, model card, Hub
    def save_model(self, output_dir: str | None = None, _internal_call: bool = False) -> None:
        """Save the student; a final save (not a checkpoint) also writes its model card, README.md.

        With `merge_adapters_on_save` a PEFT student is saved merged (`merge_and_unload` on a copy), so
        the folder is a complete student (weights, config with `auto_map`, modeling code, tokenizer).
        """
        output_dir = output_dir if output_dir is not None else self.args.output_dir
        final = not getattr(self, "_saving_checkpoint", False)
        merge = final and self.args.merge_adapters_on_save and _is_peft(self.accelerator.unwrap_model(self.model))
        if merge:
            self._save_merged_student(output_dir)
        else:
            super().save_model(output_dir, _internal_call=True)
        if final and self.args.should_save:
            adapter_only = _is_peft(self.accelerator.unwrap_model(self.model)) and not merge
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
        write_model_card(self, self.args.output_dir, adapter_only=_is_peft(self.accelerator.unwrap_model(self.model)) and not merged)

    # ------------------------------------------------------------------ evaluation
    def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None):
        """Student only: task loss and logits (teachers do not run during evaluation)."""
        inputs = self._prepare_inputs({k: v for k, v in inputs.items() if not k.startswith(TEACHER_PREFIX)})
        inputs = {k: v for k, v in inputs.items() if not k.startswith("teacher_logits_")}
        with torch.no_grad():
            out = model(**inputs)
        loss = out.loss.detach() if out.loss is not None else None
        if prediction_loss_only:
            return loss, None, None
        return loss, out.logits.detach() if out.logits is not None else None, inputs.get("labels")

    def evaluate(self, eval_dataset=None, ignore_keys=None, metric_key_prefix: str = "eval"):
        """`Trainer.evaluate` on the eval set (if any), then every evaluator (STS, ranking...)."""
        metrics: dict[str, float] = {}
        if eval_dataset is not None or self.eval_dataset is not None:
            metrics = super().evaluate(eval_dataset, ignore_keys, metric_key_prefix)
        if self.evaluators:
            student = unwrap_student(self.model)
            extra = {}
            for evaluator in self.evaluators:
                extra.update({f"{metric_key_prefix}_{k}": v for k, v in evaluator(student).items()})
            extra["epoch"] = self.state.epoch
            self.log(extra)
            metrics.update(extra)
        return metrics


def _is_peft(model: nn.Module) -> bool:
    """A PEFT model (LoRA...) with adapters that can be merged."""
    return hasattr(model, "peft_config") and hasattr(model, "merge_and_unload")
