"""`add_teacher_logits` under torchrun (2 gloo processes on CPU): each process labels its share of the
batches and both end with exactly the column one process computes (bit for bit: the batch plan is
global, so every batch is padded and computed exactly as in one process). Called the way
`main_process_first` calls it (the others waiting at a barrier), it does not hang: the first process
labels alone after the rendezvous times out and the others read the cached column."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import torch

from tests.labelling_distributed_script import BATCH, RENDEZVOUS_SECONDS, ROWS, label

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "tests" / "labelling_distributed_script.py"
WORLD = 2
LAUNCH_TIMEOUT = 240  # seconds; a launch takes ~20 s on 2 busy cores


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _torchrun(out: Path) -> list[dict]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACCELERATE_", "MASTER_")) and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env.update(HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false", HF_HOME=str(out / "hf_home"))
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(WORLD), "--master_port", str(_free_port()),
               str(SCRIPT), str(out)]
    result = subprocess.run(command, cwd=REPO, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=LAUNCH_TIMEOUT)
    assert result.returncode == 0, f"$ {' '.join(command)}\n{result.stdout[-3000:]}\n{result.stderr[-6000:]}"
    return [torch.load(out / f"rank{r}.pt", weights_only=False) for r in range(WORLD)]


def test_two_processes_label_their_shards_and_end_with_the_one_process_column(tmp_path):
    (tmp_path / "one").mkdir()
    reference = label(tmp_path / "one")
    assert reference["rows_seen"] == ROWS and len(reference["column"]) == ROWS
    first, second = _torchrun(tmp_path)
    assert [r["rank"] for r in (first, second)] == [0, 1]
    assert first["world_size"] == WORLD and first["backend"] == "gloo"

    # (1) all at once: the 10 batches of 4 split 5 / 5 (round robin over the longest-first plan), same full column
    together = [first["together"], second["together"]]
    assert [r["rows_seen"] for r in together] == [5 * BATCH, 4 * BATCH + ROWS % BATCH]
    for record in together:
        assert record["column"] == reference["column"]  # exactly, float for float

    # (2) main-process-first: rank 0 labels alone once nobody joins in time; rank 1 reads its cached column
    main_first = [first["main_first"], second["main_first"]]
    assert [r["rows_seen"] for r in main_first] == [ROWS, 0]
    assert main_first[0]["seconds"] >= RENDEZVOUS_SECONDS
    for record in main_first:
        assert record["column"] == reference["column"]
