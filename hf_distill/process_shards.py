"""Work split across the processes of `torchrun` / `accelerate launch`, and the rows gathered back.

Each process takes every world-th batch of a global plan and all of them end with every row.
Sharding needs every process inside the same call: under `main_process_first` the other
processes wait at a barrier instead, and a collective there would hang. So by default the
processes first meet through the process group's key-value store (no collective); when they
have not all arrived within `RENDEZVOUS_SECONDS`, the call runs in each process alone (the
others then usually find the result in the `datasets` cache).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Sequence

import numpy as np
import torch
import torch.distributed as dist

__all__ = ["RENDEZVOUS_SECONDS", "distributed_world", "gather_rows", "shard_plan"]

logger = logging.getLogger(__name__)

RENDEZVOUS_SECONDS = 10.0
_calls: Counter[str] = Counter()  # how often this process met each key: the n-th calls of all processes pair up


def distributed_world() -> tuple[int, int]:
    """(rank, world size) of the initialised default process group, else (0, 1)."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def _all_arrived(key: str, world: int, timeout: float) -> bool:
    """Whether every process reached this call within `timeout` (one decision, the same for all)."""
    _calls[key] += 1
    base = f"hf_distill/shards/{key}/{_calls[key]}"
    try:
        store = dist.distributed_c10d._get_default_store()
    except (AttributeError, RuntimeError, ValueError):  # a private API: without it, never risk a collective
        return False
    store.add(f"{base}/arrived", 1)
    deadline = time.monotonic() + timeout
    arrived = False
    while not arrived and time.monotonic() < deadline:
        arrived = store.add(f"{base}/arrived", 0) >= world
        if not arrived:
            time.sleep(0.02)
    # the first process to decide writes the decision; every process reads that one
    return store.compare_set(f"{base}/decision", "", "shard" if arrived else "alone") == b"shard"


def _check_same_call(key: str, world: int) -> None:
    keys: list = [None] * world
    dist.all_gather_object(keys, key)
    if len(set(keys)) > 1:
        raise ValueError(
            f"shard: the processes are labelling different things (keys {keys}); call with the same dataset, "
            "teacher, tokenizer and settings on every process, or pass shard=False."
        )


def shard_plan(shard: bool | None, key: str, timeout: float | None = None) -> tuple[int, int]:
    """(rank, world) to split the work by: (0, 1) means this process does all of it.

    `shard=False`: never split. `True`: split whenever a process group of several processes is
    initialised (every process must make the call). `None`: split when every process arrives
    within `timeout` seconds (default `RENDEZVOUS_SECONDS`). `key` names the call; it must be the same
    on every process (checked).
    """
    if shard not in (None, True, False):
        raise ValueError(f"shard={shard!r} is not valid; give True, False or None (automatic).")
    rank, world = distributed_world()
    if world == 1 or shard is False:
        return 0, 1
    if shard is None and not _all_arrived(key, world, RENDEZVOUS_SECONDS if timeout is None else timeout):
        logger.warning(
            "Process %d labels alone: not every process reached this call within %.0f s (inside main_process_first?). "
            "Call it on every process at once to split the work.", rank, RENDEZVOUS_SECONDS if timeout is None else timeout,
        )
        return 0, 1
    _check_same_call(key, world)
    return rank, world


def gather_rows(indices: Sequence[np.ndarray], values: Sequence[torch.Tensor], total: int, world: int) -> torch.Tensor:
    """Every process's rows (`values[i]` belongs to rows `indices[i]`) as one (total, ...) tensor on every process."""
    mine = (np.concatenate(indices) if indices else np.zeros(0, np.int64),
            torch.cat(list(values)).cpu() if values else None)
    shards = [mine]
    if world > 1:
        shards = [None] * world
        dist.all_gather_object(shards, mine)
    filled = [shard for shard in shards if shard[1] is not None]
    if not filled:
        raise ValueError(f"total={total}: no process labelled any row.")
    out = torch.empty((total, *filled[0][1].shape[1:]), dtype=filled[0][1].dtype)
    seen = np.zeros(total, dtype=bool)
    for rows, block in filled:
        out[torch.as_tensor(rows)] = block
        seen[rows] = True
    if not seen.all():
        raise ValueError(f"total={total}: rows {np.flatnonzero(~seen)[:5].tolist()}... were labelled by no process.")
    return out
