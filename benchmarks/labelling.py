"""Labelling throughput: `add_teacher_logits` against the bare teacher forward, length-batched against unsorted.

Arms, on the same pairs (STS-B train, 5,749 pairs) and the same teacher (the real MiniLM-L6 backbone
under a cross-encoder head), batch 64, max_length 128, run in alternating rounds so that drift of
the machine hits all arms alike; the median of the rounds is reported:

    bare forward, length-sorted   teacher forward only, on pre-tokenised batches of add_teacher_logits's plan
    bare forward, unsorted        teacher forward only, on pre-tokenised batches in row order
    add_teacher_logits            everything: tokenising, length sorting, forward, writing the column
    add_teacher_logits, unsorted  the same with sort_by_length=False

Targets (issue #40): add_teacher_logits >= 0.9x the pairs/s of the bare forward on the same
(length-sorted) batches; length batching >= 1.3x the pairs/s of unsorted labelling.

    python benchmarks/labelling.py            # the real run: results/labelling.json, docs/results/labelling.md
    python benchmarks/labelling.py --smoke    # a tiny random model on 128 pairs, written to a temporary folder
    python benchmarks/labelling.py --render   # docs/results/labelling.md again from results/labelling.json
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path

import datasets
import torch
from common import REPO, RESULTS, load_task, machine, minilm_dir
from transformers import AutoTokenizer, BertConfig

from hf_distill import CrossEncoderConfig, CrossEncoderModel
from hf_distill.length_batching import length_batches, token_lengths
from hf_distill.teachers import add_teacher_logits

COLUMNS = ["sentence1", "sentence2"]
DOCS = REPO / "docs" / "results"
TARGETS = {"labelling / bare forward": 0.9, "sorted / unsorted labelling": 1.3}


def make_teacher(smoke: bool) -> CrossEncoderModel:
    """The real MiniLM-L6 backbone with a (random) 1-output head; for --smoke a random 2-layer, hidden-32 model."""
    torch.manual_seed(0)
    if not smoke:
        return CrossEncoderModel.from_backbone(minilm_dir(), num_labels=1).eval()
    tokenizer = AutoTokenizer.from_pretrained(minilm_dir())
    encoder = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=37, max_position_embeddings=512)
    teacher = CrossEncoderModel(CrossEncoderConfig(encoder=encoder.to_dict(), num_labels=1)).eval()
    teacher.tokenizer = tokenizer
    return teacher


def bare_forward(teacher, data, batch: int, max_length: int, sort: bool) -> float:
    """Seconds of the teacher forward alone over pre-tokenised batches (sorted plan or row order)."""
    texts = [data[c][:] for c in COLUMNS]
    lengths = token_lengths(teacher.tokenizer, texts, max_length)
    encoded = [teacher.tokenizer(*[[t[i] for i in rows] for t in texts], padding=True, truncation=True, max_length=max_length,
                                 return_tensors="pt") for rows in length_batches(lengths, batch, sort=sort)]
    start = time.perf_counter()
    with torch.inference_mode():
        for enc in encoded:
            teacher(**enc)
    return time.perf_counter() - start


def labelling(teacher, data, batch: int, max_length: int, sort: bool) -> float:
    """Seconds of one uncached `add_teacher_logits` call."""
    start = time.perf_counter()
    add_teacher_logits(data, teacher, COLUMNS, batch_size=batch, max_length=max_length, sort_by_length=sort, progress=False)
    return time.perf_counter() - start


ARMS = {
    "bare forward, length-sorted": lambda *a: bare_forward(*a, sort=True),
    "bare forward, unsorted": lambda *a: bare_forward(*a, sort=False),
    "add_teacher_logits": lambda *a: labelling(*a, sort=True),
    "add_teacher_logits, unsorted": lambda *a: labelling(*a, sort=False),
}


def measure(opts) -> dict:
    datasets.disable_caching()  # every labelling call computes and writes its column (to a temporary file)
    data = load_task("stsb", ("train",))["train"].select_columns(COLUMNS)
    data = data.select(range(min(opts.rows, len(data)))) if opts.rows else data
    teacher = make_teacher(opts.smoke)
    labelling(teacher, data.select(range(min(2 * opts.batch, len(data)))), opts.batch, opts.max_length, True)  # warm-up
    seconds: dict[str, list[float]] = {arm: [] for arm in ARMS}
    for _ in range(opts.rounds):
        for arm, run in ARMS.items():
            seconds[arm].append(run(teacher, data, opts.batch, opts.max_length))
    rate = {arm: len(data) / statistics.median(times) for arm, times in seconds.items()}
    ratios = {
        "labelling / bare forward": rate["add_teacher_logits"] / rate["bare forward, length-sorted"],
        "sorted / unsorted labelling": rate["add_teacher_logits"] / rate["add_teacher_logits, unsorted"],
        "sorted / unsorted bare forward": rate["bare forward, length-sorted"] / rate["bare forward, unsorted"],
    }
    teacher_name = "random 2-layer hidden-32 BERT (smoke)" if opts.smoke else "all-MiniLM-L6-v2 backbone, 1-output head"
    return {"pairs": len(data), "teacher": teacher_name, "seconds": seconds, "pairs_per_s": rate, "ratios": ratios,
            "targets": TARGETS, "threads": torch.get_num_threads()}


def render(payload: dict) -> str:
    """docs/results/labelling.md from the JSON payload."""
    s = payload["settings"]
    lines = [
        "# Labelling throughput", "",
        f"Command: `{payload['command']}`", "", f"Machine: {payload['machine']}", "",
        f"{payload['pairs']} STS-B train pairs, teacher: {payload['teacher']}, batch {s['batch']}, max_length "
        f"{s['max_length']}, {s['rounds']} rounds (arms alternate), median of the rounds.", "",
        "| arm | pairs/s | seconds per round |", "| --- | ---: | --- |",
        *(f"| {arm} | {payload['pairs_per_s'][arm]:.1f} | {', '.join(f'{t:.2f}' for t in times)} |"
          for arm, times in payload["seconds"].items()),
        "", "| ratio | measured | target | holds |", "| --- | ---: | ---: | --- |",
    ]
    for name, value in payload["ratios"].items():
        target = payload["targets"].get(name)
        verdict = "" if target is None else ("yes" if value >= target else "no")
        lines.append(f"| {name} | {value:.2f}x | {'' if target is None else f'>= {target:.1f}x'} | {verdict} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="a tiny random teacher on --rows pairs (default 128), 1 round")
    parser.add_argument("--rows", type=int, default=None, help="the first N pairs of STS-B train (default: all)")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--max_length", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    parser.add_argument("--results", default=None, help="folder of labelling.json (default benchmarks/results; --smoke: a temporary one)")
    parser.add_argument("--docs", default=None, help="folder of labelling.md (default docs/results; --smoke: with the JSON)")
    parser.add_argument("--render", action="store_true", help="only render the markdown from an existing labelling.json")
    opts = parser.parse_args()
    command = "python benchmarks/labelling.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    if opts.smoke:
        opts.rows, opts.rounds = opts.rows or 128, 1
    if opts.threads:
        torch.set_num_threads(opts.threads)
    default_results = Path(tempfile.mkdtemp(prefix="labelling_smoke_")) if opts.smoke else RESULTS
    results = Path(opts.results) if opts.results else default_results
    docs = Path(opts.docs) if opts.docs else (results if opts.smoke else DOCS)
    if opts.render:
        payload = json.loads((results / "labelling.json").read_text())
    else:
        payload = {"command": command, "machine": machine(), "settings": vars(opts), **measure(opts)}
        results.mkdir(parents=True, exist_ok=True)
        (results / "labelling.json").write_text(json.dumps(payload, indent=2) + "\n")
    docs.mkdir(parents=True, exist_ok=True)
    (docs / "labelling.md").write_text(render(payload))
    print(render(payload))
    print(f"wrote {results / 'labelling.json'} and {docs / 'labelling.md'}")


if __name__ == "__main__":
    main()
