"""Smoke mode of the benchmarks: each script's real code path on tiny random models and a few rows, in seconds.

`--smoke` on any benchmark script (`lockstep.py` is a helper, not a script) makes `common` hand out
a tiny world instead of the real one: GLUE-style tasks, WikiQA and TREC DL files of a few rows
made of a small vocabulary, and random 32-wide "MiniLM" (BERT) and "MPNet" backbones built from
configs, each with its own tokenizer (the two vocabularies differ, as the real ones do). Every
file a script writes (results, cached teachers and logits, runs, `datasets` caches) goes to a
temporary folder, `$HF_DISTILL_SMOKE_DIR` or a fresh one; nothing in benchmarks/results/ or
docs/ is read or written. Each script also shrinks its grid (`common.smoke_defaults`); options
given on the command line still win. The numbers mean nothing; the point is that every step runs.

    python benchmarks/kd_glue.py --smoke
    HF_DISTILL_SMOKE_DIR=/tmp/smoke python benchmarks/emd_glue.py --smoke   # then, reading its results:
    HF_DISTILL_SMOKE_DIR=/tmp/smoke python benchmarks/emd_summary.py --smoke

`python benchmarks/smoke.py [SCRIPT ...] [--dir DIR]` runs the smoke mode of every script (or those
named) in one shared folder, each in a process of its own forked after the heavy libraries are
imported once, and writes DIR/smoke_report.json (exit code, seconds and log file per script).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
# every script with a smoke mode, in an order where the later ones reuse what the earlier ones cached
# (kd_glue's teachers, ranking's teacher) and read what they wrote (emd_summary reads emd_glue's results)
SCRIPTS = (
    "kd_glue.py", "emd_glue.py", "emd_summary.py", "emd_fixed_point.py", "virt_glue.py", "dvbert.py",
    "ranking.py", "term_gradients.py", "inference_speed.py", "similarity_search.py", "step_time.py", "step_breakdown.py", "frontier.py",
    "quickstart.py", "length_buckets.py",
)

WORDS = (
    "a the man woman person dog cat child children plays play guitar music piano sings song eats food bread apple "
    "car drives road street sits chair table runs park ball kicks red blue green big small happy sad quickly slowly "
    "someone something rain sun sky water river boat house city day night is are was on in at with of to and"
).split()
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
ROWS = {"train": 32, "validation": 16, "test": 16}
# task folder -> (text columns, label column, label kind, splits): the layout of ../shared/data
GLUE = {
    "mrpc": (("sentence1", "sentence2"), "label", "binary", ("train", "validation", "test")),
    "stsb": (("sentence1", "sentence2"), "score", "score", ("train", "validation", "test")),
    "rte": (("premise", "hypothesis"), "label", ["entailment", "not_entailment"], ("train", "validation")),
    "snli": (("premise", "hypothesis"), "label", ["entailment", "neutral", "contradiction"], ("validation", "test")),
}


@dataclass(frozen=True)
class SmokeWorld:
    """The folders a smoke run reads and writes, all under `root`."""

    root: Path

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def cache(self) -> Path:
        return self.root / "cache"

    @property
    def results(self) -> Path:
        return self.root / "results"

    @property
    def scratch(self) -> Path:
        return self.root / "scratch"

    @property
    def minilm(self) -> Path:
        return self.root / "models" / "minilm"

    @property
    def mpnet(self) -> Path:
        return self.root / "models" / "mpnet"


def _sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 10)))


def _related(sentence: str, rng: random.Random) -> str:
    """A near copy of `sentence`: its words with one replaced."""
    words = sentence.split()
    words[rng.randrange(len(words))] = rng.choice(WORDS)
    return " ".join(words)


def _write_jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def _glue_rows(kind, count: int, rng: random.Random) -> list[tuple[str, str, object]]:
    """(text a, text b, label): related pairs carry the first label / a high score, unrelated ones the others."""
    rows = []
    for i in range(count):
        first = _sentence(rng)
        related = i % 2 == 0
        second = _related(first, rng) if related else _sentence(rng)
        if kind == "binary":
            label = int(related)
        elif kind == "score":
            label = rng.choice([4.0, 4.5, 5.0]) if related else rng.choice([0.0, 0.75, 1.5, 2.25])
        else:  # label names: related -> the first name, else one of the others in turn
            label = kind[0] if related else kind[1 + (i // 2) % (len(kind) - 1)]
        rows.append((first, second, label))
    return rows


def _write_glue(data: Path, rng: random.Random) -> None:
    for task, (columns, label_column, kind, splits) in GLUE.items():
        for split in splits:
            rows = _glue_rows(kind, ROWS[split], rng)
            _write_jsonl(data / task / f"{split}.jsonl",
                         [{"idx": i, columns[0]: a, columns[1]: b, label_column: y} for i, (a, b, y) in enumerate(rows)])


def _write_wikiqa(data: Path, rng: random.Random) -> None:
    """Answer selection: questions with 4 candidate answers each, one correct (a near copy of the question)."""
    for split, questions in (("train", 8), ("validation", 4), ("test", 4)):
        rows = []
        for q in range(questions):
            question = _sentence(rng)
            correct = rng.randrange(4)
            for a in range(4):
                answer = _related(question, rng) if a == correct else _sentence(rng)
                rows.append({"qid": f"{split}{q}", "question": question, "doc_title": "smoke", "sid": f"{split}{q}-{a}",
                             "answer": answer, "label": int(a == correct)})
        _write_jsonl(data / "wikiqa" / f"{split}.jsonl", rows)


def _write_trec(data: Path, rng: random.Random) -> None:
    """TREC DL layout: 4 queries per year, 5 BM25-style candidates each, graded judgements 0-3."""
    for year in ("dl19", "dl20"):
        folder = data / "msmarco_trec_dl" / year
        queries, corpus, candidates, qrels = [], [], [], []
        for q in range(4):
            qid, query = f"{year}q{q}", _sentence(rng)
            queries.append({"qid": qid, "query": query})
            for rank in range(1, 6):
                pid = f"{qid}p{rank}"
                relevance = 3 if rank == 2 else rng.choice([0, 0, 1, 2])
                corpus.append({"pid": pid, "text": _related(query, rng) if relevance >= 2 else _sentence(rng)})
                candidates.append({"qid": qid, "pid": pid, "rank": rank, "score": 20.0 - rank})
                qrels.append({"qid": qid, "pid": pid, "relevance": relevance})
        for name, rows in (("queries", queries), ("corpus", corpus), ("candidates", candidates), ("qrels", qrels)):
            _write_jsonl(folder / f"{name}.jsonl", rows)


def _save_backbone(folder: Path, config, vocabulary: list[str], input_names: list[str]) -> None:
    """A randomly initialised backbone from `config` and a WordPiece tokenizer over `vocabulary`, saved to `folder`."""
    import torch
    from transformers import AutoModel, BertTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    vocab_file = folder / "vocab.txt"
    vocab_file.write_text("\n".join(vocabulary) + "\n")
    tokenizer = BertTokenizerFast(vocab_file=str(vocab_file), do_lower_case=True, model_max_length=512,
                                  model_input_names=input_names)
    torch.manual_seed(0)
    AutoModel.from_config(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def _save_models(world: SmokeWorld) -> None:
    from transformers import BertConfig, MPNetConfig

    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    vocabulary = SPECIAL + WORDS + letters + [f"##{c}" for c in letters]
    tiny = dict(hidden_size=32, num_attention_heads=2, intermediate_size=37, max_position_embeddings=512)
    # "MiniLM": 6 layers, as the real one (students keep 2-4 of them)
    _save_backbone(world.minilm, BertConfig(vocab_size=len(vocabulary), num_hidden_layers=6, **tiny), vocabulary,
                   ["input_ids", "token_type_ids", "attention_mask"])
    # "MPNet": another architecture and another tokenizer (the words in reverse order: other ids), no token types
    other = SPECIAL + list(reversed(vocabulary[len(SPECIAL):]))
    _save_backbone(world.mpnet, MPNetConfig(vocab_size=len(other), num_hidden_layers=4, pad_token_id=0, **tiny), other,
                   ["input_ids", "attention_mask"])


def smoke_world(root: str | os.PathLike | None = None) -> SmokeWorld:
    """The tiny world under `root` (default `$HF_DISTILL_SMOKE_DIR`, else a new temporary folder), built once:
    a folder that already holds it is reused as it is, so runs in one folder share caches and results."""
    root = root or os.environ.get("HF_DISTILL_SMOKE_DIR") or tempfile.mkdtemp(prefix="hf_distill_smoke_")
    world = SmokeWorld(Path(root).resolve())
    done = world.root / "world.json"
    if not done.exists():
        rng = random.Random(0)
        _write_glue(world.data, rng)
        _write_wikiqa(world.data, rng)
        _write_trec(world.data, rng)
        _save_models(world)
        done.write_text(json.dumps({"words": len(WORDS), "rows": ROWS}) + "\n")
    for folder in (world.cache, world.results, world.scratch):
        folder.mkdir(parents=True, exist_ok=True)
    return world


def _run_forked(script: str, args: list[str], world: SmokeWorld) -> tuple[int, float, Path]:
    """Run `script --smoke args` as __main__ in a forked child (its own process); exit code, seconds, log file."""
    import runpy
    import traceback

    log = world.root / "logs" / f"{Path(script).stem}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # the child: stdout and stderr to the log, the script as python would run it
        code = 1
        try:
            with open(log, "w") as out:
                os.dup2(out.fileno(), 1)
                os.dup2(out.fileno(), 2)
            sys.stdout = os.fdopen(1, "w", buffering=1)
            sys.stderr = os.fdopen(2, "w", buffering=1)
            sys.argv = [str(HERE / script), "--smoke", *args]
            sys.path.insert(0, str(HERE))
            runpy.run_path(str(HERE / script), run_name="__main__")
            code = 0
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
            if isinstance(stop.code, str):
                print(stop.code, file=sys.stderr)
        except BaseException:  # noqa: BLE001 - reported in the log, exit code 1
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), time.perf_counter() - start, log


def main() -> None:
    parser = argparse.ArgumentParser(description="Run the benchmarks' smoke modes (tiny random models, a few rows).")
    parser.add_argument("scripts", nargs="*", metavar="SCRIPT", help=f"any of {', '.join(SCRIPTS)} (default: all)")
    parser.add_argument("--dir", default=None, help="the shared smoke folder (default $HF_DISTILL_SMOKE_DIR or a new one)")
    opts = parser.parse_args()
    unknown = sorted(set(opts.scripts) - set(SCRIPTS))
    if unknown:
        parser.error(f"unknown scripts {unknown}; valid: {', '.join(SCRIPTS)}")
    world = smoke_world(opts.dir)
    os.environ["HF_DISTILL_SMOKE_DIR"] = str(world.root)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    # imported once here; every forked child starts with them loaded (nothing has run a torch op yet)
    import datasets  # noqa: F401
    import transformers  # noqa: F401

    import hf_distill.trainer  # noqa: F401

    report = {}
    for script in opts.scripts or SCRIPTS:
        code, seconds, log = _run_forked(script, [], world)
        report[script] = {"exit_code": code, "seconds": round(seconds, 2), "log": str(log)}
        print(f"{script}: {'ok' if code == 0 else f'FAILED (exit {code}), see {log}'} ({seconds:.1f} s)", flush=True)
    (world.root / "smoke_report.json").write_text(json.dumps(report, indent=2) + "\n")
    print(f"outputs in {world.results}")
    sys.exit(0 if all(r["exit_code"] == 0 for r in report.values()) else 1)


if __name__ == "__main__":
    main()
