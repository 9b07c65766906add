"""`hf-distill label` (hf_distill/cli/label_command.py): its arguments, and under torchrun (2 gloo processes
on CPU) each process labels its share and the saved set equals the one-process set."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from datasets import load_from_disk

from hf_distill.cli import main

from .conftest import FAST, error_line, write_recipe

REPO = Path(__file__).resolve().parents[2]
LAUNCH_TIMEOUT = 240  # seconds; a 2-process launch takes ~30 s on 2 busy cores


def _recipe(cli_assets, tmp_path, **extra) -> str:
    settings = dict(teacher_name_or_path=cli_assets["teacher"], num_student_layers=1, data_dir=cli_assets["data"],
                    output_dir=str(tmp_path / "unused"), augment_n=3, teacher_batch_size=4)
    return write_recipe(tmp_path / "recipe.yaml", **{**settings, **extra})


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--output"], "--output needs a folder."),
        ([], "--output DIR is missing: the folder the labelled set is saved to."),
        (["--output", "x", "--teacher_name_or_path", "null", "--augment_n", "0", "--model_name_or_path", "m"],
         "label needs teachers: teacher_name_or_path is not set"),
        (["--output", "x", "--task", "embedding"], "hf-distill label labels the pairs of a task: pairs recipe"),
    ],
)
def test_label_arguments_fail_in_one_line(cli_assets, tmp_path, capsys, argv, message):
    with pytest.raises(SystemExit) as exit_info:
        main(["label", _recipe(cli_assets, tmp_path), *argv])
    assert exit_info.value.code == 2
    assert error_line(capsys.readouterr().err).startswith("hf-distill: error: " + message)


def test_label_prints_how_to_train_on_the_saved_set(cli_assets, tmp_path, capsys):
    recipe = _recipe(cli_assets, tmp_path, augment_n=0)
    assert main(["label", recipe, "--output", str(tmp_path / "set"), "--seed", "3", *FAST[:2]]) == 0
    out = capsys.readouterr().out
    assert "[label] 12 rows labelled by 1 teacher(s)" in out
    assert f"hf-distill train {recipe} --seed 3 {' '.join(FAST[:2])} --train_dataset_dir {tmp_path / 'set'}" in out


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_two_processes_label_their_shares_and_save_the_one_process_set(cli_assets, tmp_path):
    recipe = _recipe(cli_assets, tmp_path)
    assert main(["label", recipe, "--output", str(tmp_path / "one"), *FAST]) == 0
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ACCELERATE_", "MASTER_")) and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env.update(HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false", HF_HOME=str(tmp_path / "hf_home"))
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(_free_port()),
               "-m", "hf_distill.cli", "label", recipe, "--output", str(tmp_path / "two"), *FAST]
    done = subprocess.run(command, cwd=REPO, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=LAUNCH_TIMEOUT)
    assert done.returncode == 0, f"$ {' '.join(command)}\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
    one, two = load_from_disk(str(tmp_path / "one")), load_from_disk(str(tmp_path / "two"))
    assert one["sentence1"] == two["sentence1"] and one["origin"] == two["origin"]  # the same augmented set
    assert two["teacher_logits_0"][:] == one["teacher_logits_0"][:]  # float for float: one global batch plan
    # rank 0's progress bar counts only its share of the rows (batches of 4, round robin over 2 processes)
    totals = {int(total) for total in re.findall(r"teacher_logits_0: +\d+%\|[^|]*\| *\d+/(\d+)", done.stderr)}
    assert totals and max(totals) < len(one) and "labels alone" not in done.stdout + done.stderr
