"""A tiny distillation run for tests/test_distributed.py, launched with torchrun / accelerate launch.

    torchrun --nproc_per_node 2 tests/distributed_script.py OUT --batch 4 --steps 3 [--offline-check]
    accelerate launch --multi_gpu --num_processes 2 --num_machines 1 tests/distributed_script.py OUT --batch 4 --steps 3

Online cross-encoder teacher (hidden 48, 3 layers) -> 1-layer cross-encoder student (hidden 32):
linear teacher annealing (DvBERT), a hidden-state loss with a learned Linear(32, 48) projection and
BERT-EMD (its own projection and layer weights updated by cost attention): loss components with
parameters and state outside the DDP-wrapped student. Plain SGD, so the update is linear in the
gradient and a 2-process run can be compared with a 1-process run to float precision. Every rank writes
`rank{r}.pt` with what it saw: world size, backend, per-step annealing lambda, the student's and
the components' final weights, and the logged history. `run()` is also called in-process by the
test for the 1-process reference with the same global batch.

The projection is initialised from a rank-dependent seed on purpose: the ranks only agree on it
because the trainer broadcasts rank 0's loss-component state at the start of training.

Every pair has exactly 5 + 5 words (13 tokens with [CLS]/[SEP]), so every rank's batch has the
same number of real tokens: token-averaged losses (hidden-state MSE, EMD costs) then average across
ranks exactly like over the global batch. With one student layer the EMD flow is fixed by the layer
masses (F_1j = w_T,j), so it does not depend on which rank saw which examples either.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.conftest import TINY_VOCAB, WORDS, make_bert_config, seed_everything  # noqa: E402  (sets offline env, 1 thread)

import torch  # noqa: E402
from transformers import BertTokenizerFast, TrainerCallback  # noqa: E402

from hf_distill import CrossEncoderConfig, CrossEncoderModel  # noqa: E402
from hf_distill.callbacks import TeacherAnnealingCallback  # noqa: E402
from hf_distill.losses.layers import HiddenStateLoss  # noqa: E402
from hf_distill.trainer import DistillationTrainer, unwrap_student  # noqa: E402
from hf_distill.training_args import DistillationArguments  # noqa: E402

TEACHER_NAME = "hf-distill-tests/tiny-teacher"  # a Hub-style id, so the model card has a base_model


def tokenizer_in(folder: Path, rank: int) -> BertTokenizerFast:
    vocab = folder / f"vocab_rank{rank}.txt"
    vocab.write_text("\n".join(TINY_VOCAB) + "\n", encoding="utf-8")
    return BertTokenizerFast(vocab_file=str(vocab), do_lower_case=True, model_max_length=64)


def fixed_length_rows(n: int, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    return [
        {"sentence1": " ".join(rng.choices(WORDS[:60], k=5)), "sentence2": " ".join(rng.choices(WORDS[:60], k=5)),
         "label": rng.randint(0, 1)}
        for _ in range(n)
    ]


def make_teacher(tokenizer) -> CrossEncoderModel:
    seed_everything(1)
    encoder = make_bert_config(3, hidden_size=48, intermediate_size=50)
    config = CrossEncoderConfig(encoder=encoder.to_dict(), num_labels=2, classifier_dropout=0.0, attn_implementation="eager")
    teacher = CrossEncoderModel(config).eval()
    with torch.no_grad():  # confident, input-dependent teacher logits, so the soft loss is not ~0
        teacher.head.dense.weight.normal_(std=1.0)
        teacher.head.out_proj.weight.normal_(std=3.0)
    teacher.tokenizer = tokenizer
    teacher.config._name_or_path = TEACHER_NAME
    return teacher


def make_student(tokenizer) -> CrossEncoderModel:
    seed_everything(0)
    config = CrossEncoderConfig(
        encoder=make_bert_config(1).to_dict(), num_labels=2, classifier_dropout=0.0, attn_implementation="eager"
    )
    student = CrossEncoderModel(config)
    student.tokenizer = tokenizer
    return student


class _RecordLambda(TrainerCallback):
    """The annealing lambda this rank used at every step (before any cross-rank reduction)."""

    def __init__(self):
        self.values: list[float] = []
        self.annealing = None

    def on_step_end(self, args, state, control, **kwargs):
        self.values.append(self.annealing.current_lambda)


def offline_check(out: Path, args: DistillationArguments, teacher, rank: int) -> dict:
    """Offline teacher logits under `main_process_first`: rank 0 computes them, the others read the cache."""
    from datasets import load_dataset

    from hf_distill.teachers import add_teacher_logits

    calls = {"forwards": 0}
    handle = teacher.register_forward_hook(lambda *_: calls.__setitem__("forwards", calls["forwards"] + 1))
    with args.main_process_first(desc="teacher logits"):
        data = load_dataset("json", data_files=str(out / "offline.jsonl"), cache_dir=str(out / "datasets_cache"))["train"]
        data = add_teacher_logits(data, teacher, ["sentence1", "sentence2"], batch_size=8, max_length=32, device="cpu")
    handle.remove()
    return {"teacher_forwards": calls["forwards"], "offline_logits": data["teacher_logits_0"]}


def run(out: str | os.PathLike, batch: int, steps: int, offline: bool = False) -> DistillationTrainer:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rank = int(os.environ.get("RANK", "0"))
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    tokenizer = tokenizer_in(out, rank)
    teacher, student = make_teacher(tokenizer), make_student(tokenizer)
    torch.manual_seed(1000 + rank)  # different projections on each rank unless the trainer synchronises them
    hidden = HiddenStateLoss(student_dim=32, teacher_dim=48, num_student_layers=1, mapping="uniform")
    projection_before = hidden.projection.weight.detach().clone()
    args = DistillationArguments(
        output_dir=str(out / "student"),
        per_device_train_batch_size=batch,
        max_steps=steps,
        optim="sgd",
        learning_rate=0.5,
        lr_scheduler_type="constant",
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        seed=0,
        max_length=32,
        annealing="linear",
        temperature=2.0,
        hidden_weight=1.0,
        emd_weight=0.5,  # adds a BERT-EMD component (projection + layer weights) and the cost-attention callback
        use_cpu=True,
        dataloader_num_workers=0,
    )
    record = {}
    if offline:
        record.update(offline_check(out, args, teacher, rank))
    recorder = _RecordLambda()
    trainer = DistillationTrainer(
        model=student,
        args=args,
        teachers=teacher,
        loss_components=[hidden],
        train_dataset=__import__("datasets").Dataset.from_list(fixed_length_rows(batch * world_size * steps)),
        callbacks=[recorder],
    )
    recorder.annealing = next(cb for cb in trainer.callback_handler.callbacks if isinstance(cb, TeacherAnnealingCallback))
    trainer.train()
    trainer.save_model()
    backend = torch.distributed.get_backend() if torch.distributed.is_initialized() else None
    record.update(
        rank=rank,
        world_size=world_size,
        num_processes=trainer.accelerator.num_processes,
        distributed_type=str(trainer.accelerator.distributed_type),
        backend=backend,
        wrapped=type(trainer.model_wrapped).__name__,
        teacher_type=type(trainer.teachers[0]).__name__,
        teacher_requires_grad=any(p.requires_grad for p in trainer.teachers[0].parameters()),
        lambdas=recorder.values,
        emd_weights={k: v.clone() for c in trainer.loss_components if hasattr(c, "layer_weights") for k, v in c.layer_weights().items()},
        projection_before=projection_before,
        components=trainer.distillation_state(),
        student={k: v.detach().cpu().clone() for k, v in unwrap_student(trainer.model).state_dict().items()},
        log_history=trainer.state.log_history,
    )
    torch.save(record, out / f"rank{rank}.pt")
    return trainer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--batch", type=int, default=4, help="per-device batch size")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--offline-check", action="store_true")
    options = parser.parse_args()
    run(options.out, options.batch, options.steps, offline=options.offline_check)
    print(json.dumps({"rank": os.environ.get("RANK", "0"), "done": True}), flush=True)
    if torch.distributed.is_initialized():  # a clean teardown: gloo threads left at exit can abort the process
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
