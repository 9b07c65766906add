"""The most similar pair among N sentences: a cross-encoder scores every pair, a bi-encoder encodes each sentence once.

The DvBERT argument in numbers. Finding the most similar pair among N sentences takes a
cross-encoder N(N-1)/2 forward passes (one per pair), but a Siamese bi-encoder only N (one per
sentence) plus one cheap similarity matrix.

- Cross-encoder (MiniLM 6 layers, num_labels=1, backbone weights; fine-tuning does not change the
  cost): a random sample of pairs is scored (batch 64, dynamic padding, max_length 128, after one
  warm-up batch) and the pairs/s are extrapolated linearly to N(N-1)/2 pairs.
- Siamese (the same MiniLM as a bi-encoder, mean pooling; optionally k-layer students): measured
  directly for every N: encode the N sentences (batch 64, dynamic padding, max_length 128, longest
  first as `SiameseModel.encode` does), L2-normalise, one cosine-similarity matrix in row blocks
  (bounded memory), diagonal masked, argmax. Encoding and search are timed separately.

Sentences: the unique sentences of STS-B train + validation + test (MRPC added if too few), shuffled
with seed 0; N takes the first N, so the sets are nested.

Usage: python benchmarks/similarity_search.py [--ns 1000 10000 --pair_sample 2048 --student_layers 2]
"""

from __future__ import annotations

import argparse
import random
import shlex
import sys
import time

import torch
from common import RESULTS, PeakMemory, device, minilm_dir, siamese_form, smoke_option, text_pairs, timed, write_results
from render import render_results, table

from hf_distill import CrossEncoderModel, SiameseModel

SPLITS = ("train", "validation", "test")
BATCH = 64
MAX_LENGTH = 128


def unique_sentences(minimum: int) -> list[str]:
    """Unique STS-B sentences (both columns, all splits), topped up with MRPC's when fewer than `minimum`."""
    sentences = dict.fromkeys(s for pair in text_pairs(("stsb",), SPLITS) for s in pair)
    if len(sentences) < minimum:
        sentences.update(dict.fromkeys(s for pair in text_pairs(("mrpc",), SPLITS) for s in pair))
    if len(sentences) < minimum:
        sys.exit(f"only {len(sentences)} unique STS-B + MRPC sentences; --ns asks for {minimum}")
    return list(sentences)


@torch.inference_mode()
def most_similar_pair(embeddings: torch.Tensor, block: int) -> tuple[int, int, float]:
    """(i, j, cosine) of the most similar pair i != j of L2-normalised embeddings, one row block at a time."""
    n = embeddings.size(0)
    best, best_i, best_j = -float("inf"), -1, -1
    for start in range(0, n, block):
        sims = embeddings[start : start + block] @ embeddings.T
        rows = torch.arange(sims.size(0), device=sims.device)
        sims[rows, rows + start] = -float("inf")  # a sentence is not its own pair
        value, flat = sims.flatten().max(0)
        if value.item() > best:
            best, best_i, best_j = value.item(), start + flat.item() // n, flat.item() % n
    return best_i, best_j, best


def cross_encoder_rate(cross: CrossEncoderModel, pairs: list[tuple[str, str]]) -> tuple[float, float]:
    """Pairs/s of the cross-encoder on `pairs` (after one warm-up batch) and the seconds it took."""
    cross.predict(pairs[:BATCH], batch_size=BATCH, max_length=MAX_LENGTH)
    _, seconds = timed(lambda: cross.predict(pairs, batch_size=BATCH, max_length=MAX_LENGTH))
    return len(pairs) / seconds, seconds


def siamese_search(model: SiameseModel, sentences: list[str], block: int, on: torch.device) -> dict:
    """Encode the sentences, then find the most similar pair; each step timed on its own."""
    embeddings, encode_s = timed(lambda: model.encode(sentences, batch_size=BATCH, normalize=True, max_length=MAX_LENGTH))
    with PeakMemory(on) as memory:
        (i, j, cosine), search_s = timed(lambda: most_similar_pair(embeddings, block))
    return {
        "encode_s": encode_s,
        "search_s": search_s,
        "total_s": encode_s + search_s,
        "search_mb": memory.increase_mb,
        "pair": {"i": i, "j": j, "a": sentences[i], "b": sentences[j], "cosine": cosine},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ns", nargs="+", type=int, default=[1000, 10000], help="numbers of sentences")
    parser.add_argument("--pair_sample", type=int, default=2048, help="random pairs the cross-encoder scores")
    parser.add_argument("--student_layers", nargs="*", type=int, default=[2], help="k-layer Siamese students also measured")
    parser.add_argument("--block", type=int, default=2048, help="rows of the similarity matrix computed at once")
    parser.add_argument("--name", default="similarity_search")
    parser.add_argument("--render", action="store_true", help="only rewrite results/NAME.md (and the pages showing it) from results/NAME.json")
    smoke_option(parser, ns=[20, 40], pair_sample=16, block=8)
    opts = parser.parse_args()
    if opts.render:  # nothing runs: the table again from the JSON
        return render_results(opts.name, RESULTS)
    command = "python benchmarks/similarity_search.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    torch.manual_seed(0)
    on = device()
    start = time.perf_counter()

    sentences = unique_sentences(max(opts.ns))
    available = len(sentences)
    random.Random(0).shuffle(sentences)
    sentences = sentences[: max(opts.ns)]
    rng = random.Random(1)
    pairs = [tuple(sentences[i] for i in rng.sample(range(len(sentences)), 2)) for _ in range(opts.pair_sample)]

    cross = CrossEncoderModel.from_backbone(minilm_dir(), num_labels=1).eval().to(on)
    pairs_per_s, sample_s = cross_encoder_rate(cross, pairs)
    cross_result = {"pairs_per_s": pairs_per_s, "sample_s": sample_s, "pairs_timed": len(pairs),
                    "total_s": {n: n * (n - 1) / 2 / pairs_per_s for n in opts.ns}}
    print(f"[{time.perf_counter() - start:5.0f}s] cross-encoder: {pairs_per_s:.1f} pairs/s", file=sys.stderr, flush=True)

    depth = cross.config.encoder.num_hidden_layers
    encoders = {f"MiniLM-L{depth} bi-encoder": siamese_form(cross)}
    for k in opts.student_layers:
        encoders[f"{k}-layer bi-encoder student"] = siamese_form(CrossEncoderModel.from_teacher(cross, k, "uniform"))
    siamese: dict[str, dict[int, dict]] = {}
    for name, model in encoders.items():
        model.encode(sentences[:BATCH], batch_size=BATCH, max_length=MAX_LENGTH)  # warm-up
        siamese[name] = {n: siamese_search(model, sentences[:n], opts.block, on) for n in opts.ns}
        print(f"[{time.perf_counter() - start:5.0f}s] {name}: done", file=sys.stderr, flush=True)

    payload = {"cross_encoder": cross_result, "siamese": siamese, "device": on.type, "sentences_available": available,
               "wall_s": time.perf_counter() - start, "settings": vars(opts)}
    write_results(opts.name, payload, table("similarity_search", payload), command)


if __name__ == "__main__":
    main()
