"""benchmarks/embedding.py: its --smoke mode runs every step on tiny models (zero-shot rows, recipe runs,
scores, speed) into the smoke folder only; --render reads the rows and states the issue's targets."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BENCHMARKS = REPO / "benchmarks"


def _module():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        return importlib.import_module("embedding")
    finally:
        sys.path.remove(str(BENCHMARKS))


def test_smoke_mode_runs_every_step_into_the_smoke_folder(tmp_path):
    env = {**os.environ, "HF_DISTILL_SMOKE_DIR": str(tmp_path), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    command = [sys.executable, "embedding.py", "--smoke", "--students", "l3", "--losses", "mse", "both"]
    done = subprocess.run(command, cwd=BENCHMARKS, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    rows = json.loads((tmp_path / "results" / "embedding.json").read_text())["rows"]
    names = [(r["model"], r.get("loss")) for r in rows]
    assert names == [("teacher all-mpnet-base-v2", None), ("all-MiniLM-L6-v2", None), ("all-MiniLM-L6-v2 first 3 layers", None),
                     ("student start l3 (layers [0, 2, 5])", None), ("distilled l3", "mse"), ("distilled l3", "both")]
    for row in rows:
        assert {"stsb_spearman", "wikiqa_mrr@10", "sentences_per_s", "teacher_sentences_per_s", "speedup"} <= set(row)
    assert [r["layers"] for r in rows[1:]] == [6, 3, 3, 3, 3]
    assert all(r["resumed"] is False and r["steps"] == 2 for r in rows[4:])
    runs = tmp_path / "cache" / "embedding_runs"
    assert {p.name for p in runs.iterdir()} == {"l3-mse-1", "l3-both-1"} and not list(runs.glob("*/checkpoint-*"))
    table = (tmp_path / "results" / "embedding.md").read_text()
    assert "| distilled l3 | 3 | both | 1 |" in table and "## Targets" in table
    assert not (REPO / "docs" / "results" / "embedding.md").exists() or "smoke" not in (REPO / "docs" / "results" / "embedding.md").read_text()


def test_targets_name_the_best_loss_its_distance_and_the_teacher_gap():
    embedding = _module()
    l3, l2 = embedding.recipe_model("l3"), embedding.recipe_model("l2")  # the rows of the recipes as they are now
    rows = [dict(model="teacher all-mpnet-base-v2", layers=12, stsb_spearman=83.4, speedup=1.0)]
    rows += [dict(model=l3, layers=3, loss=loss, seed=s, stsb_spearman=score + s, speedup=9.0)
             for loss, score in (("mse", 80.0), ("both", 81.0)) for s in (0, 1, 2)]
    rows += [dict(model=l2, layers=2, loss="mse", seed=0, stsb_spearman=80.5, speedup=12.0)]
    rows += [dict(model="distilled l3, lr 1e-05", layers=3, loss="mse", seed=0, stsb_spearman=90.0, speedup=9.0)]  # not the recipe's
    lines = embedding._targets(embedding._groups(rows))
    assert lines[0] == (f"- {l3} (the recipe's settings; best loss `both`, 3 seeds): STS-B 82.00 vs target 82.0: met; teacher 83.40, gap 1.40 (within 2); "
                        "speed-up 9.0x (met: >= 8x).")
    assert lines[1] == f"- {l2} (the recipe's settings; best loss `mse`, 1 seed): STS-B 80.50 vs target 80.0: met."
    rows[1:7] = [dict(r, stsb_spearman=r["stsb_spearman"] - 5) for r in rows[1:7]]
    assert "missed by 5.00" in embedding._targets(embedding._groups(rows))[0]


def test_the_trained_projection_comes_from_the_best_checkpoint(tmp_path):
    import torch
    from safetensors.torch import save_file

    from hf_distill.checkpointing import DISTILLATION_STATE_NAME

    embedding = _module()
    assert embedding.trained_projection(tmp_path, {"best_model_checkpoint": None}) is None  # no evaluation, no best
    for step, scale in ((4, 1.0), (8, 2.0)):  # the best is checkpoint-4, not the last one
        (tmp_path / f"checkpoint-{step}").mkdir()
        weight, bias = scale * torch.arange(6.0).reshape(3, 2), scale * torch.ones(3)
        save_file({"0.projection.weight": weight, "0.projection.bias": bias},
                  str(tmp_path / f"checkpoint-{step}" / DISTILLATION_STATE_NAME))
    layer = embedding.trained_projection(tmp_path, {"best_model_checkpoint": "/elsewhere/out/checkpoint-4"})
    assert (layer.in_features, layer.out_features) == (2, 3)
    torch.testing.assert_close(layer(torch.tensor([[1.0, 0.0]])), torch.tensor([[1.0, 3.0, 5.0]]))
    save_file({"0.weights": torch.ones(2)}, str(tmp_path / "checkpoint-4" / DISTILLATION_STATE_NAME))
    assert embedding.trained_projection(tmp_path, {"best_model_checkpoint": "checkpoint-4"}) is None  # no projection


def test_rows_are_named_by_how_their_settings_differ_from_the_first_recipes(tmp_path, monkeypatch):
    from types import SimpleNamespace

    embedding = _module()
    names = sys.modules["embedding_names"]
    shipped = embedding.variant("l3", SimpleNamespace())  # the recipe as shipped, whatever it sets
    assert embedding.variant("l3", SimpleNamespace(sampler="group_by_length", lr=1e-4)) == shipped
    assert names.recipe_model("l3") == f"distilled l3{shipped}"
    assert embedding.variant("l2", SimpleNamespace(sampler="random")).startswith(", random batches")
    assert embedding.variant("l3", SimpleNamespace(sampler="random", lr=3e-5, batch=64, epochs=2.0, train_block_size=8)) == \
        ", random batches, lr 3e-05, 2 epochs, blocks of 8"
    assert embedding.variant("l3", SimpleNamespace(train_block_size=8, patience=8, temperature=0.02)).endswith(
        ", patience 8, temperature 0.02")
    # a recipe whose default moves away from the base names its own rows by the change: old rows keep their name
    (tmp_path / "minilm_l3.yaml").write_text("train_sampling_strategy: group_by_length\nlearning_rate: 1.0e-4\n"
                                             "per_device_train_batch_size: 64\nnum_train_epochs: 5\ntrain_block_size: 8\n")
    monkeypatch.setattr(names, "RECIPES", tmp_path)
    assert names.recipe_model("l3") == "distilled l3, blocks of 8"
    assert embedding.variant("l3", SimpleNamespace(train_block_size=4)) == ", blocks of 4"
    assert embedding.variant("l3", SimpleNamespace(smoke=True, train_block_size=4)) == ""  # smoke rows name nothing
    (tmp_path / "minilm_l3.yaml").write_text("train_sampling_strategy: group_by_length\n")
    assert names.recipe_model("l3") == "distilled l3"
