"""Multi-process data parallel on CPU (gloo): torchrun and accelerate launch run a distillation unchanged.

Each launch runs `tests/distributed_script.py` in 2 processes with per-device batch B = 4: an online
teacher, linear teacher annealing, a hidden-state loss and BERT-EMD (loss components with their own
parameters and state, outside the DDP-wrapped student). The reference is the same script in this
process with one process and batch 2B = 8, so both see the same 8 examples per optimizer step.

Tolerance: the script uses plain SGD (the update is linear in the gradient), no dropout, and pairs
of one fixed length (equal real-token counts per rank, so token-averaged losses and EMD costs
average over ranks exactly like over the global batch; one student layer fixes the EMD flow).
The two runs then differ only in float32 summation order (DDP averages two half-batch gradient
means; one process takes one mean over the full batch): measured |Δ| ≈ 1e-7 on weights and logged
losses after 3 steps. We assert rel 1e-5 on losses and abs 1e-5 on weights: 100x above that noise,
and far below what a real fault gives (a loss logged x2, a loss component whose gradients are not
all-reduced or whose initialisation differs per rank: differences of 1e-3 to 1e-1).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from huggingface_hub import ModelCard

from tests.distributed_script import fixed_length_rows, run

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "tests" / "distributed_script.py"
BATCH, STEPS, WORLD = 4, 3, 2
LAUNCH_TIMEOUT = 240  # seconds; a launch takes ~30 s on 2 busy cores
LOSS_RTOL, WEIGHT_ATOL = 1e-5, 1e-5
# emd_weight=0.5, hidden_weight=1 in the script; lambda weights hard, 1 - lambda soft.
TERM_WEIGHTS = {"hidden": 1.0, "emd_hidden": 0.5, "emd_attention": 0.5}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _launch(launcher: list[str], out: Path, *extra: str) -> list[dict]:
    """Run the script under a launcher; returns what each rank recorded."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACCELERATE_", "MASTER_")) and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env.update(HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false", HF_HOME=str(out / "hf_home"))
    command = [*launcher, str(SCRIPT), str(out), "--batch", str(BATCH), "--steps", str(STEPS), *extra]
    result = subprocess.run(
        command, cwd=REPO, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=LAUNCH_TIMEOUT
    )
    log = f"$ {' '.join(command)}\n{result.stdout[-4000:]}\n{result.stderr[-6000:]}"
    assert result.returncode == 0, log
    files = sorted(out.glob("rank*.pt"))
    assert [f.name for f in files] == [f"rank{r}.pt" for r in range(WORLD)], f"expected one file per rank\n{log}"
    return [torch.load(f, weights_only=False) for f in files]


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict:
    """One process, batch 2B: the same global batch as 2 processes with batch B."""
    out = tmp_path_factory.mktemp("one_process")
    run(out, batch=WORLD * BATCH, steps=STEPS)
    return torch.load(out / "rank0.pt", weights_only=False)


def _train_logs(record: dict) -> list[dict]:
    return [entry for entry in record["log_history"] if "loss" in entry]


def _check_two_process_run(ranks: list[dict], reference: dict, out: Path) -> None:
    # ---- it really ran 2 gloo processes, the student in DDP, the teacher outside it
    for rank, record in enumerate(ranks):
        assert record["rank"] == rank and record["world_size"] == WORLD and record["num_processes"] == WORLD
        assert record["backend"] == "gloo" and record["wrapped"] == "DistributedDataParallel"
        assert record["teacher_type"] == "CrossEncoderModel" and not record["teacher_requires_grad"]
    first, second = ranks

    # ---- the ranks agree on the distillation state
    assert first["lambdas"] == second["lambdas"] == pytest.approx([step / STEPS for step in range(STEPS)])
    assert not torch.equal(first["projection_before"], second["projection_before"]), "test premise: per-rank init"
    assert first["components"].keys() == second["components"].keys() and first["components"]
    for name in first["components"]:  # projections of both components, EMD layer weights: broadcast, then in sync
        assert torch.equal(first["components"][name], second["components"][name]), name
    assert first["emd_weights"] and all(torch.equal(first["emd_weights"][k], second["emd_weights"][k]) for k in first["emd_weights"])
    teacher_side = first["emd_weights"]["hidden_teacher"]
    assert not torch.allclose(teacher_side, torch.full_like(teacher_side, 1 / 3)), "cost attention never updated"
    for name in first["student"]:
        assert torch.equal(first["student"][name], second["student"][name]), name
    assert _train_logs(first) == _train_logs(second)  # logs are reduced across ranks: both print the same

    # ---- logged losses are means, not multiplied by the world size
    logs, expected_logs = _train_logs(first), _train_logs(reference)
    assert len(logs) == len(expected_logs) == STEPS
    for entry in logs:
        lam = entry["lambda"]
        mixed = lam * entry["hard"] + (1 - lam) * entry["soft"] + sum(w * entry[t] for t, w in TERM_WEIGHTS.items())
        assert entry["loss"] == pytest.approx(mixed, rel=1e-4)

    # ---- and match one process with the same global batch
    for entry, expected in zip(logs, expected_logs):
        for key in ("loss", "hard", "soft", "hidden", "emd_hidden", "emd_attention", "lambda"):
            assert entry[key] == pytest.approx(expected[key], rel=LOSS_RTOL, abs=2e-6), (key, entry, expected)
    final = next(e for e in first["log_history"] if "train_loss" in e)["train_loss"]
    expected_final = next(e for e in reference["log_history"] if "train_loss" in e)["train_loss"]
    assert final == pytest.approx(expected_final, rel=LOSS_RTOL)
    for name, expected in reference["student"].items():
        torch.testing.assert_close(first["student"][name], expected, atol=WEIGHT_ATOL, rtol=0, msg=name)
    for name, expected in reference["components"].items():
        torch.testing.assert_close(first["components"][name], expected, atol=WEIGHT_ATOL, rtol=0, msg=name)
    for name, expected in reference["emd_weights"].items():
        torch.testing.assert_close(first["emd_weights"][name], expected, atol=WEIGHT_ATOL, rtol=0, msg=name)

    # ---- the final save wrote one complete student with its card (main process only)
    folder = out / "student"
    assert {"model.safetensors", "config.json", "README.md"} <= set(os.listdir(folder))
    card = ModelCard.load(folder / "README.md")
    assert {"knowledge-distillation", "dvbert", "tinybert", "bert-emd"} <= set(card.data.tags)
    assert "| `processes` | 2 |" in card.text and "| `total_train_batch_size` | 8 |" in card.text


def test_torchrun_two_processes_match_one_process(tmp_path, reference):
    rows = fixed_length_rows(16, seed=5)
    (tmp_path / "offline.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    launcher = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(WORLD), "--master_port", str(_free_port())]
    ranks = _launch(launcher, tmp_path, "--offline-check")
    _check_two_process_run(ranks, reference, tmp_path)
    # offline teacher logits under main_process_first: computed by rank 0 only, read from the cache by rank 1
    assert ranks[0]["teacher_forwards"] > 0 and ranks[1]["teacher_forwards"] == 0
    assert ranks[0]["offline_logits"] == ranks[1]["offline_logits"]


def test_accelerate_launch_multi_gpu_two_processes_match_one_process(tmp_path, reference):
    # `--cpu --num_processes 2` would silently run one process; --multi_gpu on a CPU-only machine
    # starts 2 gloo processes (checked: one record per rank, world size 2, backend gloo). The shipped
    # config file is used too, so this also checks recipes/accelerate/multi_gpu.yaml.
    launcher = [
        sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(REPO / "recipes/accelerate/multi_gpu.yaml"),
        "--multi_gpu", "--num_processes", str(WORLD), "--num_machines", "1", "--dynamo_backend", "no",
        "--main_process_port", str(_free_port()),
    ]
    _check_two_process_run(_launch(launcher, tmp_path), reference, tmp_path)
