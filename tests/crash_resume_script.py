"""Training process for tests/test_crash_resume.py: tiny deterministic distillation runs that can be SIGKILLed.

    python tests/crash_resume_script.py crash METHOD OUT    # uninterrupted reference run, then a run that
                                                            # blocks after step BLOCK_AT (the test kills it)
    python tests/crash_resume_script.py resume METHOD... OUT  # resume each killed run (resume_from_checkpoint=True)

Each finished run writes, in its output folder, `student.safetensors` (the student's weights),
`components.safetensors` (the trainer's loss-component state: projections, EMD layer weights)
and `result.json` (global step, per-step logs, callback state: annealing lambda, cost-attention history).

Every setup has dropout > 0 in the student (so the RNG state must be restored), several epochs
(so the data order must continue across an epoch boundary) and checkpoints at SAVE_STEPS.
"""

from __future__ import annotations

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import random  # noqa: E402

import torch  # noqa: E402

torch.set_num_threads(1)

from datasets import Dataset  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
from transformers import BertTokenizerFast, TrainerCallback  # noqa: E402

from hf_distill.callbacks import CostAttentionCallback, TeacherAnnealingCallback  # noqa: E402
from hf_distill.methods import bert_emd, dvbert, simplified_tinybert  # noqa: E402
from hf_distill.trainer import unwrap_student  # noqa: E402
from tests.conftest import TINY_VOCAB, WORDS, make_cross_encoder, make_siamese, seed_everything  # noqa: E402

METHODS = ("annealing", "simplified_tinybert", "bert_emd")
ROWS, BATCH, EPOCHS = 12, 4, 3  # 3 optimizer steps per epoch, 9 in all
# Where each setup checkpoints: mid-epoch (4, 5: resume skips batches of epoch 2, then crosses into
# epoch 3) and at an epoch boundary (3: resume restarts the sampler at epoch 2). The crashed run
# blocks one step after its first checkpoint and is killed there.
SAVE_STEPS = {"annealing": 4, "simplified_tinybert": 3, "bert_emd": 5}
READY = "READY"  # written by the blocked run; the test kills it once it sees this file


def tokenizer(out: str) -> BertTokenizerFast:
    path = os.path.join(out, "vocab.txt")
    if not os.path.exists(path):
        os.makedirs(out, exist_ok=True)
        with open(path + ".tmp", "w", encoding="utf-8") as handle:
            handle.write("\n".join(TINY_VOCAB) + "\n")
        os.replace(path + ".tmp", path)
    return BertTokenizerFast(vocab=path, do_lower_case=True, model_max_length=64)


def dataset() -> Dataset:
    rng = random.Random(0)
    words = WORDS[:60]
    return Dataset.from_list(
        [
            {
                "sentence1": " ".join(rng.choices(words, k=rng.randint(2, 9))),
                "sentence2": " ".join(rng.choices(words, k=rng.randint(2, 9))),
                "label": rng.randint(0, 1),
            }
            for _ in range(ROWS)
        ]
    )


def with_dropout(model: torch.nn.Module, p: float = 0.1) -> torch.nn.Module:
    """Dropout > 0 in every dropout of the student: the resumed run must restore the RNG to match."""
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = p
    unwrap_student(model).backbone.config.attention_probs_dropout_prob = p
    unwrap_student(model).backbone.config.hidden_dropout_prob = p
    return model.train()


def build(method: str, out: str, output_dir: str, callbacks=(), **overrides):
    """The method's trainer, built from seed 0 only: the same models and components in every process."""
    seed_everything(0)
    tok = tokenizer(out)
    training = dict(
        output_dir=output_dir,
        per_device_train_batch_size=BATCH,
        num_train_epochs=EPOCHS,
        learning_rate=5e-3,
        logging_steps=1,
        save_strategy="steps",
        save_steps=SAVE_STEPS[method],
        report_to="none",
        use_cpu=True,
        disable_tqdm=True,
        seed=0,
        max_length=24,
        dataloader_num_workers=0,
    )
    training.update(overrides)
    if method == "annealing":  # DvBERT: Siamese student, online cross-encoder teacher, lambda = step / total
        teacher = make_cross_encoder(tok, num_layers=2, seed=1)
        with torch.no_grad():
            teacher.head.out_proj.weight.mul_(10.0)
        preset = dvbert(with_dropout(make_siamese(tok, num_labels=2)), [teacher], num_labels=2, annealing=True)
        args = preset.arguments(temperature=2.0, **training)
    elif method == "simplified_tinybert":  # hidden + attention + embedding, projections W_h / W_e
        teacher = make_cross_encoder(tok, num_layers=4, seed=1)
        preset = simplified_tinybert(teacher, num_layers=2, temperature=2.0)
        with_dropout(preset.student)
        args = preset.arguments(**training)
    elif method == "bert_emd":  # EMD layer weights updated by cost attention, projections
        teacher = make_cross_encoder(tok, num_layers=4, seed=1)
        preset = bert_emd(teacher, num_layers=2, beta=1.0, alpha=0.5)
        with_dropout(preset.student)
        args = preset.arguments(**training)
    else:
        raise ValueError(f"method={method!r} is not valid; choose one of {METHODS}.")
    return preset.trainer(args, train_dataset=dataset(), callbacks=list(callbacks))


def write_result(trainer, folder: str) -> None:
    student = unwrap_student(trainer.model)
    save_file({k: v.detach().cpu().contiguous() for k, v in student.state_dict().items()}, os.path.join(folder, "student.safetensors"))
    save_file(trainer.distillation_state(), os.path.join(folder, "components.safetensors"))
    callbacks = {}
    for callback in trainer.callback_handler.callbacks:
        if isinstance(callback, TeacherAnnealingCallback):
            callbacks["lambda"] = callback.current_lambda
        if isinstance(callback, CostAttentionCallback):
            callbacks["history"] = callback.history
    logs = [entry for entry in trainer.state.log_history if "loss" in entry and "step" in entry]
    result = {"global_step": trainer.state.global_step, "epoch": trainer.state.epoch, "logs": logs, **callbacks}
    with open(os.path.join(folder, "result.json"), "w", encoding="utf-8") as handle:
        json.dump(result, handle)


class BlockAfter(TrainerCallback):
    """After step `step` (its checkpoint `checkpoint` complete on disk), say so and wait to be killed."""

    def __init__(self, step: int, checkpoint: str, ready: str):
        self.step, self.checkpoint, self.ready = step, checkpoint, ready

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            assert os.path.isfile(os.path.join(self.checkpoint, "trainer_state.json")), self.checkpoint
            with open(self.ready, "w", encoding="utf-8") as handle:
                handle.write(str(os.getpid()))
            while True:  # SIGKILL ends this
                time.sleep(0.5)


def crash(method: str, out: str) -> None:
    root = os.path.join(out, method)
    reference = build(method, out, os.path.join(root, "reference"))
    reference.train()
    write_result(reference, reference.args.output_dir)
    run_dir = os.path.join(root, "run")
    checkpoint = os.path.join(run_dir, f"checkpoint-{SAVE_STEPS[method]}")
    blocker = BlockAfter(SAVE_STEPS[method] + 1, checkpoint, os.path.join(root, READY))
    build(method, out, run_dir, callbacks=[blocker]).train()
    raise SystemExit("the run was not blocked")  # never reached


def resume(method: str, out: str) -> None:
    trainer = build(method, out, os.path.join(out, method, "run"))
    trainer.train(resume_from_checkpoint=True)
    write_result(trainer, trainer.args.output_dir)


if __name__ == "__main__":
    mode, *methods, out = sys.argv[1:]
    for name in methods:
        crash(name, out) if mode == "crash" else resume(name, out)
