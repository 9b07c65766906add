"""Deployment: the same student in PyTorch fp32, ONNX fp32 and ONNX int8 (speed and quality, one run).

Students (trained once, cached in .cache/students):

- cross-encoder: 2 layers cut (uniform) from the fine-tuned MiniLM-L6 MRPC teacher (`kd_glue.teacher_for`),
  distilled on MRPC train (alpha 0.5, T 1, 3 epochs, lr 1e-4: kd_glue's "KD a=0.5 T=1" arm, seed 0);
  quality: MRPC test accuracy and F1 (x100) through `PairClassificationEvaluator`;
- bi-encoder: all-MiniLM-L6-v2 keeping 3 of its 6 layers, mean pooling, cosine head, DvBERT teacher
  annealing with the MiniLM STS-B teacher on STS-B train (1 epoch, lr 1e-4: dvbert's arm, seed 0);
  quality: STS-B test Spearman x100 of cosine(u, v) through `STSEvaluator`.

Each is exported with `export_student(format="onnx", quantize="int8")` and run through
`hf_distill.export.load_onnx_student`, so the evaluators call the ONNX graphs exactly as they call the
PyTorch student. Speed (`hf_distill.export.measure.speed_profile`): inputs padded to --seq tokens,
batch-1 latency p50/p95 over --latency_runs calls and batch --batch throughput (pairs or texts per
second, timed for at least --min_seconds); torch and onnxruntime both get --threads threads.
Writes benchmarks/results/deployment.json and renders docs/results/deployment.md from it.

Targets (issue 44): int8 >= 2x PyTorch fp32 throughput at batch 32, lower batch-1 p50 latency, and
quality within 0.5 points of fp32.

Usage: python benchmarks/deployment.py [--threads 2 --seq 128 --batch 32]
       python benchmarks/deployment.py --render          (only rewrite the Markdown from the JSON)
       python benchmarks/deployment.py --smoke --output_dir /tmp/deployment   (tiny random students, seconds)
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import sys
import tempfile
from pathlib import Path

import torch
from common import CACHE, DATA, GLUE_TASKS, REPO, RESULTS, load_task, machine

from hf_distill import CrossEncoderConfig, CrossEncoderModel, SiameseConfig, SiameseModel
from hf_distill.evaluation import PairClassificationEvaluator, STSEvaluator
from hf_distill.export import export_student, load_onnx_student
from hf_distill.export.measure import speed_profile

NAME = "deployment"
DOC = REPO / "docs" / "results" / f"{NAME}.md"
RUNTIMES = ("PyTorch fp32", "ONNX fp32", "ONNX int8")
FILES = {"PyTorch fp32": "model.safetensors", "ONNX fp32": "onnx/model.onnx", "ONNX int8": "onnx/model_qint8.onnx"}
QUALITY_POINTS = 0.5
TARGET_SPEEDUP = 2.0


# ---------------------------------------------------------------------------- real students
def cross_student() -> CrossEncoderModel:
    """The 2-layer MRPC cross-encoder, distilled once and cached."""
    folder = CACHE / "students" / "deployment-cross-mrpc"
    if not (folder / "config.json").exists():
        from kd_glue import teacher_for, training_args

        from hf_distill.teachers import add_teacher_logits
        from hf_distill.trainer import DistillationTrainer

        data = load_task("mrpc")
        teacher, _, _ = teacher_for("mrpc", data)
        train = add_teacher_logits(data["train"], teacher, list(GLUE_TASKS["mrpc"][1]), batch_size=64, max_length=128)
        student = CrossEncoderModel.from_teacher(teacher, 2, "uniform")
        args = training_args(str(folder / "run"), "mrpc", 3, 1e-4, 0, alpha=0.5, temperature=1.0)
        DistillationTrainer(model=student, args=args, train_dataset=train).train()
        student.save_pretrained(folder)
        shutil.rmtree(folder / "run", ignore_errors=True)
    return CrossEncoderModel.from_pretrained(folder).eval()


def siamese_student() -> SiameseModel:
    """The 3-layer MiniLM bi-encoder distilled on STS-B (DvBERT annealing, K = 1), once and cached."""
    folder = CACHE / "students" / "deployment-siamese-stsb"
    if not (folder / "config.json").exists():
        from dvbert import labelled_train
        from dvbert import siamese_student as dvbert_student
        from kd_glue import teacher_for, training_args

        from hf_distill.trainer import DistillationTrainer

        data = load_task("stsb", files={"train": "train", "validation": "test"})
        teacher, _, _ = teacher_for("stsb", data)
        train = labelled_train("stsb", data["train"], {"minilm": teacher.eval()})
        student = dvbert_student("stsb", teacher, 3, seed=0)
        args = training_args(str(folder / "run"), "stsb", 1, 1e-4, 0, annealing="linear", teacher_reduction="sum")
        DistillationTrainer(model=student, args=args, train_dataset=train).train()
        student.save_pretrained(folder)
        shutil.rmtree(folder / "run", ignore_errors=True)
    return SiameseModel.from_pretrained(folder).eval()


def real_students() -> dict[str, tuple]:
    """name -> (description, student, evaluator, timing pairs)."""
    mrpc = PairClassificationEvaluator.from_jsonl(DATA / "mrpc" / "test.jsonl", name="mrpc_test", max_length=128)
    sts = STSEvaluator.from_jsonl(DATA / "stsb" / "test.jsonl", name="stsb_test", max_length=128)
    return {
        "cross-encoder": (
            "2-layer MiniLM cross-encoder distilled from the MiniLM-L6 MRPC teacher (MRPC test)",
            cross_student(), mrpc, list(zip(mrpc.texts1, mrpc.texts2))[:64],
        ),
        "bi-encoder": (
            "3-layer MiniLM Siamese bi-encoder (DvBERT annealing, STS-B; STS-B test)",
            siamese_student(), sts, list(zip(sts.sentences1, sts.sentences2))[:64],
        ),
    }


# ---------------------------------------------------------------------------- smoke students
SMOKE_WORDS = ["a", "the", "man", "woman", "dog", "cat", "plays", "runs", "eats", "guitar", "park", "food", "music",
               "street", "is", "in", "on", "with", "someone"]


def smoke_students(folder: Path) -> dict[str, tuple]:
    """Tiny random students (hidden 32, 2 layers) and made-up labelled pairs: the pipeline, not the numbers."""
    from transformers import BertConfig, BertTokenizerFast

    vocab = folder / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + SMOKE_WORDS) + "\n")
    tokenizer = BertTokenizerFast(vocab=str(vocab), model_max_length=64)
    encoder = BertConfig(vocab_size=len(SMOKE_WORDS) + 5, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=37, max_position_embeddings=64).to_dict()
    torch.manual_seed(0)
    cross = CrossEncoderModel(CrossEncoderConfig(encoder=encoder, num_labels=2)).eval()
    siamese = SiameseModel(SiameseConfig(encoder=encoder, head="cosine", num_labels=1)).eval()
    cross.tokenizer = siamese.tokenizer = tokenizer
    words = SMOKE_WORDS
    pairs = [(" ".join(words[i : i + 3 + i % 5]), " ".join(words[i + 2 : i + 4 + i % 3])) for i in range(12)]
    first, second = zip(*pairs)
    return {
        "cross-encoder": ("tiny random cross-encoder (smoke)", cross,
                          PairClassificationEvaluator(first, second, [i % 2 for i in range(12)], name="smoke"), pairs),
        "bi-encoder": ("tiny random bi-encoder (smoke)", siamese,
                       STSEvaluator(first, second, [float(i % 5) for i in range(12)], name="smoke"), pairs),
    }


# ---------------------------------------------------------------------------- measuring
def quality(evaluator, runtime) -> dict[str, float]:
    """The evaluator's metrics on points (x100; STS is already x100)."""
    scale = 100.0 if isinstance(evaluator, PairClassificationEvaluator) else 1.0
    return {key: scale * value for key, value in evaluator(runtime).items()}


def measure_student(description: str, student, evaluator, pairs, folder: Path, opts) -> dict:
    """Export the student, then time and evaluate it in each runtime."""
    exported = export_student(student, folder, format="onnx", quantize="int8", measure_speed=False, pairs=pairs[:8])
    runtimes = {
        "PyTorch fp32": student,
        "ONNX fp32": load_onnx_student(folder, threads=opts.threads),
        "ONNX int8": load_onnx_student(folder, quantized=True, threads=opts.threads),
    }
    rows = {}
    for label, runtime in runtimes.items():
        speed = speed_profile(runtime, student, pairs, seq=opts.seq, batch=opts.batch,
                              latency_runs=opts.latency_runs, min_seconds=opts.min_seconds)
        rows[label] = {**speed, **quality(evaluator, runtime), "file_mb": (folder / FILES[label]).stat().st_size / 2**20}
        print(f"[{description}] {label}: {rows[label]}", flush=True)
    return {"description": description, "parity": exported.parity, "runtimes": rows}


def target_checks(student: dict) -> list[tuple[str, str, bool]]:
    """(check, measured, holds) for one student."""
    base, int8 = student["runtimes"]["PyTorch fp32"], student["runtimes"]["ONNX int8"]
    speedup = int8["throughput_rows_per_s"] / base["throughput_rows_per_s"]
    checks = [
        (f"int8 throughput >= {TARGET_SPEEDUP:g}x PyTorch fp32 (batch {base['throughput_batch']})", f"{speedup:.2f}x",
         speedup >= TARGET_SPEEDUP),
        ("int8 batch-1 p50 latency < PyTorch fp32", f"{int8['batch1_p50_ms']:.2f} vs {base['batch1_p50_ms']:.2f} ms",
         int8["batch1_p50_ms"] < base["batch1_p50_ms"]),
    ]
    for metric in _metrics(student):
        delta = int8[metric] - base[metric]
        checks.append((f"int8 {metric} within {QUALITY_POINTS} points of fp32", f"{delta:+.2f}", abs(delta) <= QUALITY_POINTS))
    return checks


def _seq(payload: dict) -> int:
    """The sequence length the timings used (--seq, capped by the students' longest input)."""
    return max(row["seq"] for student in payload["students"].values() for row in student["runtimes"].values())


def _metrics(student: dict) -> list[str]:
    return [k for k in student["runtimes"]["PyTorch fp32"] if k.startswith(("mrpc", "stsb", "smoke")) and "pearson" not in k]


# ---------------------------------------------------------------------------- rendering
def render(payload: dict) -> str:
    """docs/results/deployment.md from the JSON."""
    settings = payload["settings"]
    lines = [
        "# Deployment: PyTorch fp32 vs ONNX fp32 vs ONNX int8",
        "",
        f"Command: `{payload['command']}`",
        "",
        f"Machine: {payload['machine']}",
        "",
        (
            f"Inputs padded to {_seq(payload)} tokens; batch-1 latency over {settings['latency_runs']} calls, batch "
            f"{settings['batch']} throughput (pairs/s for the cross-encoder, texts/s for the bi-encoder) over at least "
            f"{settings['min_seconds']:g} s (`hf_distill.speed.time_batches`); torch and onnxruntime with "
            f"{settings['threads']} threads. ONNX graphs from `hf-distill export STUDENT OUT --format onnx --quantize int8` "
            "(dynamic int8: per-channel int8 weights, "
            "activations quantised on the fly); quality through the same hf_distill evaluators on every runtime."
        ),
    ]
    for student in payload["students"].values():
        metrics = _metrics(student)
        base = student["runtimes"]["PyTorch fp32"]["throughput_rows_per_s"]
        lines += ["", f"## {student['description']}", "",
                  "| runtime | file MB | batch 1 p50 ms | batch 1 p95 ms | batch throughput /s | x PyTorch | "
                  + " | ".join(metrics) + " | max abs diff vs student |",
                  "| --- | ---: | ---: | ---: | ---: | ---: | " + " | ".join("---:" for _ in metrics) + " | ---: |"]
        for label, row in student["runtimes"].items():
            diff = student["parity"].get(label, {}).get("max_abs_diff", 0.0)
            lines.append(
                f"| {label} | {row['file_mb']:.1f} | {row['batch1_p50_ms']:.2f} | {row['batch1_p95_ms']:.2f} | "
                f"{row['throughput_rows_per_s']:.1f} | {row['throughput_rows_per_s'] / base:.2f} | "
                + " | ".join(f"{row[m]:.2f}" for m in metrics) + f" | {diff:.1e} |"
            )
    lines += ["", "## Targets", "", "| student | check | measured | holds |", "| --- | --- | ---: | --- |"]
    for name, student in payload["students"].items():
        lines += [f"| {name} | {check} | {measured} | {'yes' if holds else 'no'} |" for check, measured, holds in target_checks(student)]
    return "\n".join(lines) + "\n"


def write(payload: dict, json_path: Path, doc_path: Path) -> None:
    json_path.parent.mkdir(parents=True, exist_ok=True)
    doc_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(payload, indent=2) + "\n")
    doc_path.write_text(render(payload))
    print(doc_path.read_text())


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--latency_runs", type=int, default=200)
    parser.add_argument("--min_seconds", type=float, default=10.0, help="time batch throughput for at least this long")
    parser.add_argument("--smoke", action="store_true", help="tiny random students and made-up pairs; writes into --output_dir")
    parser.add_argument("--output_dir", type=Path, default=None, help="with --smoke: where the JSON, Markdown and exports go")
    parser.add_argument("--render", action="store_true", help="only rewrite docs/results/deployment.md from the JSON")
    return parser.parse_args()


def main() -> None:
    opts = parse()
    json_path, doc_path = RESULTS / f"{NAME}.json", DOC
    if opts.render:
        write(json.loads(json_path.read_text()), json_path, doc_path)
        return
    if opts.smoke:
        opts.output_dir = opts.output_dir or Path(tempfile.mkdtemp(prefix="deployment-smoke-"))
        opts.output_dir.mkdir(parents=True, exist_ok=True)
        opts.latency_runs, opts.min_seconds = min(opts.latency_runs, 5), min(opts.min_seconds, 0.2)
        json_path, doc_path = opts.output_dir / f"{NAME}.json", opts.output_dir / f"{NAME}.md"
    exports = (opts.output_dir if opts.smoke else CACHE) / "exports"
    torch.set_num_threads(opts.threads)
    students = smoke_students(exports.parent) if opts.smoke else real_students()
    command = "python benchmarks/deployment.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    settings = {k: v for k, v in vars(opts).items() if k not in ("render", "output_dir")}
    payload = {"command": command.strip(), "machine": machine(), "settings": settings, "students": {}}
    for name, (description, student, evaluator, pairs) in students.items():
        payload["students"][name] = measure_student(description, student, evaluator, pairs, exports / name, opts)
    write(payload, json_path, doc_path)


if __name__ == "__main__":
    main()
