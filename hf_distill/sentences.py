"""Unlabelled sentences from a tree of text-pair data sets: every distinct sentence, none of the held-out ones.

Embedding distillation needs only text. `collect_sentences` reads every JSON Lines file under a
folder (e.g. `../shared/data`), takes the values of its text columns (sentence1/sentence2,
premise/hypothesis, question/answer, query/text...), strips them and keeps each distinct sentence
once, in first-seen order. Files matching an `exclude` pattern (the test splits of the evaluation
sets) are not read for training, and any sentence they contain is dropped from the others too, so
no held-out sentence reaches the student even where another data set repeats it.
"""

from __future__ import annotations

import fnmatch
import json
import logging
from collections.abc import Iterable, Sequence
from pathlib import Path

__all__ = ["SENTENCE_COLUMNS", "collect_sentences", "read_sentences"]

logger = logging.getLogger(__name__)

SENTENCE_COLUMNS = ("sentence1", "sentence2", "premise", "hypothesis", "question", "answer", "query", "passage", "text",
                    "sentence")


def read_sentences(path: str | Path, columns: Sequence[str] = SENTENCE_COLUMNS) -> list[str]:
    """The stripped, non-empty string values of the text columns of one JSON Lines file, in file order."""
    found = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as error:
                raise ValueError(f"{path}:{number} is not valid JSON ({error.msg}); give JSON Lines files.") from None
            found += [row[c].strip() for c in columns if isinstance(row.get(c), str) and row[c].strip()]
    return found


def _matches(relative: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatch(relative, pattern) for pattern in patterns)


def collect_sentences(
    root: str | Path, exclude: Sequence[str] = (), columns: Sequence[str] = SENTENCE_COLUMNS
) -> list[str]:
    """Every distinct sentence of the `*.jsonl` files under `root`, none of those in excluded files.

    Args:
        root: the folder to read (recursively).
        exclude: glob patterns of paths relative to `root` ('stsb/test.jsonl', 'msmarco_trec_dl/*'): those
            files are held out, and their sentences are removed from every other file's.
        columns: the text columns to read.
    """
    root = Path(root)
    files = sorted(root.rglob("*.jsonl"))
    if not files:
        raise ValueError(f"no *.jsonl files under {str(root)!r}; give the folder of the data sets.")
    unmatched = [pattern for pattern in exclude if not any(_matches(f.relative_to(root).as_posix(), [pattern]) for f in files)]
    if unmatched:
        raise ValueError(f"exclude patterns {unmatched} match no file under {str(root)!r}; check the paths (relative to it).")
    held_out = [f for f in files if _matches(f.relative_to(root).as_posix(), exclude)]
    banned = {sentence for f in held_out for sentence in read_sentences(f, columns)}
    kept: dict[str, None] = {}
    for path in files:
        if path in held_out:
            continue
        before = len(kept)
        kept.update(dict.fromkeys(s for s in read_sentences(path, columns) if s not in banned))
        logger.info("%s: %d new sentences", path.relative_to(root).as_posix(), len(kept) - before)
    logger.info("%d distinct sentences from %d files (%d held out)", len(kept), len(files) - len(held_out), len(held_out))
    return list(kept)
