"""Crash and resume: a run SIGKILLed after a checkpoint resumes to the uninterrupted run's weights and state.

For the annealing (DvBERT, Siamese student, lambda), Simplified TinyBERT (projections) and BERT-EMD
(projections, EMD layer weights, cost-attention history) setups, `tests/crash_resume_script.py`
trains in a subprocess: first uninterrupted (the reference), then again until one step past its
first checkpoint, where it blocks and is killed with SIGKILL. A new process resumes with
`resume_from_checkpoint=True`. The student has dropout and the runs span three epochs, so the
RNG state and the data order across an epoch boundary must be restored too.

Then a crash *while saving* a checkpoint (simulated in-process): the checkpoint folder never holds
`trainer_state.json` without a complete `distillation_state.safetensors`, resuming picks the last
complete checkpoint, and naming the half-written one is a clear error.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

import tests.crash_resume_script as script
from hf_distill.callbacks import CostAttentionCallback
from hf_distill.trainer import DISTILLATION_STATE_NAME, DistillationTrainer, last_complete_checkpoint

SCRIPT = Path(script.__file__)
ROOT = SCRIPT.parent.parent
TIMEOUT = 300  # seconds for one process (slow, shared CI machines)


def _env() -> dict[str, str]:
    env = dict(os.environ, HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false", OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return env


def _log(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")[-4000:] if path.exists() else ""


def _crash(method: str, out: Path) -> dict:
    """Run the reference and the blocking run; SIGKILL the latter once its checkpoint is on disk."""
    ready = out / method / script.READY
    log = out / f"crash_{method}.log"
    with open(log, "wb") as handle:
        process = subprocess.Popen(
            [sys.executable, str(SCRIPT), "crash", method, str(out)], cwd=ROOT, env=_env(), stdout=handle, stderr=subprocess.STDOUT
        )
    deadline = time.monotonic() + TIMEOUT
    try:
        while not ready.exists():
            if process.poll() is not None:
                pytest.fail(f"{method}: the training process exited ({process.returncode}) before blocking:\n{_log(log)}")
            if time.monotonic() > deadline:
                pytest.fail(f"{method}: no checkpoint after {TIMEOUT}s:\n{_log(log)}")
            time.sleep(0.2)
        os.kill(process.pid, signal.SIGKILL)
        returncode = process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    run = out / method / "run"
    return {"returncode": returncode, "checkpoints": sorted(p.name for p in run.iterdir() if p.name.startswith("checkpoint-"))}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    out = tmp_path_factory.mktemp("crash_resume")
    killed = {method: _crash(method, out) for method in script.METHODS}
    log = out / "resume.log"
    with open(log, "wb") as handle:
        done = subprocess.run(
            [sys.executable, str(SCRIPT), "resume", *script.METHODS, str(out)],
            cwd=ROOT, env=_env(), stdout=handle, stderr=subprocess.STDOUT, timeout=TIMEOUT,
        )
    assert done.returncode == 0, f"resume failed:\n{_log(log)}"
    return out, killed


def _result(folder: Path) -> tuple[dict, dict, dict]:
    return (
        load_file(str(folder / "student.safetensors")),
        load_file(str(folder / "components.safetensors")),
        json.loads((folder / "result.json").read_text(encoding="utf-8")),
    )


def _assert_same_tensors(expected: dict, actual: dict, what: str) -> None:
    assert expected.keys() == actual.keys(), what
    for name in expected:
        torch.testing.assert_close(actual[name], expected[name], atol=1e-5, rtol=0, msg=lambda m: f"{what} {name}: {m}")


@pytest.mark.parametrize("method", script.METHODS)
def test_sigkill_then_resume_matches_the_uninterrupted_run(runs, method):
    out, killed = runs
    save_steps = script.SAVE_STEPS[method]
    assert killed[method]["returncode"] == -signal.SIGKILL
    assert killed[method]["checkpoints"] == [f"checkpoint-{save_steps}"]  # killed at step save_steps + 1
    reference_student, reference_components, reference = _result(out / method / "reference")
    resumed_student, resumed_components, resumed = _result(out / method / "run")

    total = script.EPOCHS * script.ROWS // script.BATCH
    assert reference["global_step"] == resumed["global_step"] == total
    _assert_same_tensors(reference_student, resumed_student, "student")
    _assert_same_tensors(reference_components, resumed_components, "loss-component state")
    # Every step after the checkpoint saw the same batch, dropout mask and weights: the same loss.
    after = {e["step"]: e for e in resumed["logs"] if e["step"] > save_steps}
    assert sorted(after) == list(range(save_steps + 1, total + 1))
    for entry in reference["logs"]:
        if entry["step"] in after:
            for term in ("loss", "hard", "soft", "lambda", "hidden", "attention", "embedding", "emd_hidden"):
                if term in entry:
                    assert after[entry["step"]][term] == pytest.approx(entry[term], rel=1e-4, abs=1e-6), (entry["step"], term)

    if method == "annealing":
        assert resumed["lambda"] == pytest.approx(reference["lambda"]) == pytest.approx((total - 1) / total)
    if method == "simplified_tinybert":
        assert any("projection" in key for key in resumed_components)
    if method == "bert_emd":
        assert any(key.endswith("teacher_weights") for key in resumed_components)
        assert [e["step"] for e in resumed["history"]] == list(range(1, total + 1))
        assert resumed["history"] == reference["history"]  # cost-attention trajectory: restored, then extended


# ------------------------------------------------------------------------------ a crash while saving
class SimulatedCrash(BaseException):
    """Stands for the process dying: a BaseException, so no `except Exception` on the way catches it."""


def _bert_emd(tmp_path: Path, output_dir: Path) -> DistillationTrainer:
    return script.build("bert_emd", str(tmp_path), str(output_dir), save_steps=3, save_total_limit=1)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("uninterrupted")
    trainer = _bert_emd(tmp_path, tmp_path / "out")
    trainer.train()
    return trainer.model.state_dict(), trainer.distillation_state()


def _resume_last(tmp_path: Path, output_dir: Path, monkeypatch) -> tuple[DistillationTrainer, list[str]]:
    loaded: list[str] = []
    original = DistillationTrainer._load_from_checkpoint

    def spy(self, checkpoint, model=None):
        loaded.append(os.path.basename(checkpoint))
        return original(self, checkpoint, model)

    monkeypatch.setattr(DistillationTrainer, "_load_from_checkpoint", spy)
    trainer = _bert_emd(tmp_path, output_dir)
    trainer.train(resume_from_checkpoint=True)
    return trainer, loaded


def _assert_matches(trainer: DistillationTrainer, uninterrupted) -> None:
    student, components = uninterrupted
    _assert_same_tensors(student, trainer.model.state_dict(), "student")
    _assert_same_tensors(components, trainer.distillation_state(), "loss-component state")


def test_crash_after_extra_state_before_trainer_state(tmp_path, monkeypatch, uninterrupted):
    """Killed between the extra state and trainer_state.json of checkpoint-6: resume uses checkpoint-3."""
    from transformers import TrainerState

    original = TrainerState.save_to_json

    def crash_at_six(self, path):
        if os.path.basename(os.path.dirname(path)) == "checkpoint-6":
            raise SimulatedCrash("simulated crash while saving checkpoint-6")
        return original(self, path)

    output_dir = tmp_path / "out"
    with monkeypatch.context() as patch:
        patch.setattr(TrainerState, "save_to_json", crash_at_six)
        with pytest.raises(SimulatedCrash, match="simulated crash"):
            _bert_emd(tmp_path, output_dir).train()
    half = output_dir / "checkpoint-6"
    # The extra state is complete in the half-written folder (it went in first), trainer_state.json is not.
    assert (half / DISTILLATION_STATE_NAME).is_file() and not (half / "trainer_state.json").exists()
    assert not list(half.glob("*.tmp"))
    assert load_file(str(half / DISTILLATION_STATE_NAME)).keys() == uninterrupted[1].keys()
    # Rotation (save_total_limit=1) only runs after a checkpoint is complete: checkpoint-3 survives.
    assert (output_dir / "checkpoint-3" / "trainer_state.json").is_file()
    assert last_complete_checkpoint(str(output_dir)) == str(output_dir / "checkpoint-3")

    # Naming the half-written checkpoint is a clear error, raised before any weight is loaded.
    with pytest.raises(ValueError, match=r"checkpoint-6' is incomplete: it has no trainer_state.json.*checkpoint-3"):
        _bert_emd(tmp_path, output_dir).train(resume_from_checkpoint=str(half))
    # resume_from_checkpoint=True skips it and resumes from checkpoint-3, to the uninterrupted result.
    trainer, loaded = _resume_last(tmp_path, output_dir, monkeypatch)
    assert loaded == ["checkpoint-3"]
    _assert_matches(trainer, uninterrupted)
    history = next(c for c in trainer.callback_handler.callbacks if isinstance(c, CostAttentionCallback)).history
    assert [entry["step"] for entry in history] == list(range(1, 10))


def test_crash_while_writing_the_extra_state(tmp_path, monkeypatch, uninterrupted):
    """Killed half way through writing distillation_state: no checkpoint ever shows a partial file."""
    import hf_distill.checkpointing as trainer_module

    original = trainer_module.save_file

    def half_write(tensors, filename, *args, **kwargs):
        if "checkpoint-6" in filename:
            Path(filename).write_bytes(b"\x00" * 10)  # a torn write of the temporary file
            raise SimulatedCrash("simulated crash while writing the distillation state")
        return original(tensors, filename, *args, **kwargs)

    output_dir = tmp_path / "out"
    with monkeypatch.context() as patch:
        patch.setattr(trainer_module, "save_file", half_write)
        with pytest.raises(SimulatedCrash, match="simulated crash"):
            _bert_emd(tmp_path, output_dir).train()
    half = output_dir / "checkpoint-6"
    assert not (half / DISTILLATION_STATE_NAME).exists() and not (half / "trainer_state.json").exists()
    assert not (half / "model.safetensors").exists()  # nothing of the Trainer's checkpoint was written yet
    trainer, loaded = _resume_last(tmp_path, output_dir, monkeypatch)
    assert loaded == ["checkpoint-3"]
    _assert_matches(trainer, uninterrupted)


def test_resume_true_without_a_complete_checkpoint_is_an_error(tmp_path):
    output_dir = tmp_path / "out"
    (output_dir / "checkpoint-3").mkdir(parents=True)  # a crash during the very first save
    with pytest.raises(ValueError, match=r"resume_from_checkpoint=True but output_dir=.* holds no complete checkpoint"):
        _bert_emd(tmp_path, output_dir).train(resume_from_checkpoint=True)


def test_checkpoint_without_its_distillation_state_is_an_error(tmp_path):
    """A checkpoint copied without `distillation_state.safetensors` would silently reset the projections."""
    output_dir = tmp_path / "out"
    script.build("bert_emd", str(tmp_path), str(output_dir), save_steps=2, max_steps=2).train()
    (output_dir / "checkpoint-2" / DISTILLATION_STATE_NAME).unlink()
    with pytest.raises(FileNotFoundError, match=r"distillation_state.safetensors is missing: the checkpoint has no distillation state"):
        script.build("bert_emd", str(tmp_path), str(output_dir), save_steps=2, max_steps=4).train(resume_from_checkpoint=True)
