"""Training step time of a Siamese student encoding each batch in groups of similar length
(`student_length_buckets`), measured in one run on the same batches.

The embedding recipes batch blocks of 8 neighbouring sentences (`train_block_size: 8`): a batch then mixes
a question and its answers, or a short and a long side, and padding every row to the batch's longest
row computes far more tokens than the batch holds. Each arm trains the recipes' 3-layer MiniLM student
(layers 1, 3 and 6 of all-MiniLM-L6-v2) with the similarity-structure loss on the recipes' sentences,
batch 64, blocks of 8 grouped by length, `student_length_buckets` 1 (the whole batch at once), 2, 4 or 8.
The teacher's embeddings are random 768-d vectors (the student's step does not depend on their values).
Arms run in alternating rounds on the same batches; the median step time of each is reported, with the
tokens the arm computes over the real tokens of the batches.

Usage: python benchmarks/length_buckets.py [--steps 20 --rounds 3 --sentences 20000]
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import sys

import torch
from common import DATA, RESULTS, SCRATCH, minilm_dir, smoke_option, timing_arguments, write_results
from datasets import Dataset
from render import render_results, table
from step_time import StepTimer

from hf_distill import SiameseModel
from hf_distill.block_sampling import BlockSampler
from hf_distill.length_batching import token_lengths
from hf_distill.modeling.modeling_common import keep_layers
from hf_distill.sentences import collect_sentences
from hf_distill.trainer import DistillationTrainer

BUCKETS = (1, 2, 4, 8)
LAYERS = [0, 2, 5]  # the embedding recipe's 3-layer student
HELD_OUT = ["stsb/test.jsonl", "wikiqa/test.jsonl", "msmarco_trec_dl/*"]  # as the recipes


def student() -> SiameseModel:
    model = SiameseModel.from_backbone(minilm_dir(), pooling="mean", head="none")
    keep_layers(model.backbone, LAYERS if model.config.encoder.num_hidden_layers > max(LAYERS) else [0])
    return model


def sentences_set(count: int, width: int) -> Dataset:
    """The first `count` of the recipes' sentences (in file order: neighbours stay together), with random teacher
    embeddings."""
    held_out = [p for p in HELD_OUT if any(DATA.glob(p))]
    texts = collect_sentences(DATA, held_out)[:count]
    generator = torch.Generator().manual_seed(0)
    return Dataset.from_dict({"sentence": texts, "teacher_embeddings_0_a": torch.randn(len(texts), width, generator=generator).tolist()})


def run_arm(data: Dataset, steps: int, batch: int, seq: int, buckets: int) -> list[float]:
    torch.manual_seed(0)
    args = timing_arguments(str(SCRATCH / "hf_distill_length_buckets"), steps, batch, seq, train_block_size=8,
                            train_sampling_strategy="group_by_length", similarity_structure_weight=1.0,
                            hard_weight=0.0, soft_weight=0.0, student_length_buckets=buckets, seed=0)
    timer = StepTimer()
    DistillationTrainer(model=student(), args=args, train_dataset=data, callbacks=[timer]).train()
    return timer.times[3:]  # drop warm-up steps


def computed_tokens(data: Dataset, tokenizer, steps: int, batch: int, seq: int) -> dict[int, float]:
    """Tokens each arm computes over the batches' real tokens: every group padded to its own longest row (a batch
    of fewer than two rows per group padded whole, as `in_length_buckets` does)."""
    lengths = token_lengths(tokenizer, [data["sentence"]], seq)
    order = list(BlockSampler(len(data), 8, 0, lengths.tolist(), batch))
    batches = [torch.as_tensor(lengths[order[i: i + batch]]) for i in range(0, steps * batch, batch)]
    real = sum(int(b.sum()) for b in batches)
    padded = {k: sum(int(g.max()) * len(g) for b in batches
                     for g in torch.tensor_split(b.sort().values, k if len(b) >= 2 * k else 1)) for k in BUCKETS}
    return {k: padded[k] / real for k in BUCKETS}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--sentences", type=int, default=20000)
    parser.add_argument("--name", default="length_buckets")
    parser.add_argument("--render", action="store_true", help="only rewrite results/NAME.md from results/NAME.json")
    smoke_option(parser, steps=5, rounds=1, batch=8, seq=32, sentences=64)
    opts = parser.parse_args()
    if opts.render:
        return render_results(opts.name, RESULTS)
    command = "python benchmarks/length_buckets.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    model = student()
    data = sentences_set(opts.sentences, 768)
    samples: dict[int, list[float]] = {k: [] for k in BUCKETS}
    for _ in range(opts.rounds):
        for k in BUCKETS:
            samples[k] += run_arm(data, opts.steps, opts.batch, opts.seq, k)
    median = {k: statistics.median(times) * 1000 for k, times in samples.items()}
    payload = {"median_ms": median, "speed_up": {k: median[1] / median[k] for k in BUCKETS},
               "computed_over_real_tokens": computed_tokens(data, model.tokenizer, opts.steps, opts.batch, opts.seq),
               "samples_ms": {k: [t * 1000 for t in v] for k, v in samples.items()}, "settings": vars(opts)}
    write_results(opts.name, payload, table("length_buckets", payload), command)


if __name__ == "__main__":
    main()
