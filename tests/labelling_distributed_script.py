"""2-process labelling for tests/test_labelling_distributed.py, launched with torchrun on CPU (gloo).

    torchrun --nproc_per_node 2 tests/labelling_distributed_script.py OUT

Every rank labels the same 37 pairs (batch 4, so 10 batches: 5 and 5, the last of one row) twice:
(1) all ranks call `add_teacher_logits` at once, so they split the batches and gather the column;
(2) inside a `main_process_first`-style block (rank 0 first, the others wait at a barrier): rank 0
finds nobody at the rendezvous and labels alone, the others read its result from the cache.
Each rank writes `rank{r}.pt`: the columns, how many rows its teacher saw, and the wall times.
`label()` is also called in the test's own process for the one-process reference.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.conftest import SENTENCES, TINY_VOCAB, make_cross_encoder  # noqa: E402  (sets offline env, 1 thread)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from datasets import Dataset, load_dataset  # noqa: E402
from transformers import BertTokenizerFast  # noqa: E402

from hf_distill import process_shards  # noqa: E402
from hf_distill.teachers import add_teacher_logits  # noqa: E402

COLUMNS = ["sentence1", "sentence2"]
ROWS, BATCH = 37, 4
RENDEZVOUS_SECONDS = 3.0  # how long rank 0 waits for the others before labelling alone in (2)


def pair_rows(n: int = ROWS) -> list[dict]:
    """Pairs of many lengths (length batching reorders them)."""
    return [{"sentence1": SENTENCES[i % 7], "sentence2": " ".join(SENTENCES[(i * 3) % 7].split()[: 1 + i % 5])}
            for i in range(n)]


def make_teacher(folder: Path, rank: int):
    vocab = folder / f"vocab_rank{rank}.txt"
    vocab.write_text("\n".join(TINY_VOCAB) + "\n", encoding="utf-8")
    tokenizer = BertTokenizerFast(vocab_file=str(vocab), do_lower_case=True, model_max_length=64)
    teacher = make_cross_encoder(tokenizer, seed=3, num_labels=3)
    seen = {"rows": 0}
    teacher.register_forward_hook(
        lambda module, args, kwargs, out: seen.__setitem__("rows", seen["rows"] + len(kwargs["input_ids"])), with_kwargs=True
    )
    return teacher, seen


def label(out: Path, rank: int = 0) -> dict:
    """(1): every process at once, an in-memory dataset."""
    teacher, seen = make_teacher(out, rank)
    start = time.perf_counter()
    labelled = add_teacher_logits(Dataset.from_list(pair_rows()), teacher, COLUMNS, batch_size=BATCH, max_length=32, progress=False)
    return {"column": labelled["teacher_logits_0"][:], "rows_seen": seen["rows"], "seconds": time.perf_counter() - start}


def label_main_first(out: Path, rank: int) -> dict:
    """(2): rank 0 first, the others after a barrier (what `main_process_first` does), a file-backed dataset."""
    teacher, seen = make_teacher(out, rank)
    process_shards.RENDEZVOUS_SECONDS = RENDEZVOUS_SECONDS
    if rank != 0:
        dist.barrier()
    start = time.perf_counter()
    data = load_dataset("json", data_files=str(out / "pairs.jsonl"), cache_dir=str(out / "datasets_cache"))["train"]
    labelled = add_teacher_logits(data, teacher, COLUMNS, batch_size=BATCH, max_length=32, progress=False)
    seconds = time.perf_counter() - start
    if rank == 0:
        dist.barrier()
    return {"column": labelled["teacher_logits_0"][:], "rows_seen": seen["rows"], "seconds": seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    out = Path(parser.parse_args().out)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    if rank == 0:
        (out / "pairs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in pair_rows()), encoding="utf-8")
    dist.barrier()
    record = {"rank": rank, "world_size": dist.get_world_size(), "backend": dist.get_backend(),
              "together": label(out, rank), "main_first": label_main_first(out, rank)}
    torch.save(record, out / f"rank{rank}.pt")
    dist.destroy_process_group()
    print(json.dumps({"rank": os.environ.get("RANK"), "done": True}), flush=True)


if __name__ == "__main__":
    main()
