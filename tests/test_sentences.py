"""collect_sentences: every distinct sentence of a data tree, none from (or repeated in) the held-out files."""

from __future__ import annotations

import json

import pytest

from hf_distill.sentences import collect_sentences, read_sentences


def write(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


@pytest.fixture
def tree(tmp_path):
    write(tmp_path / "stsb" / "train.jsonl", [{"sentence1": " A dog runs. ", "sentence2": "A cat sits.", "score": 1.0},
                                              {"sentence1": "A dog runs.", "sentence2": "The test sentence.", "score": 2.0}])
    write(tmp_path / "stsb" / "test.jsonl", [{"sentence1": "The test sentence.", "sentence2": "Only in test.", "score": 3.0}])
    write(tmp_path / "snli" / "validation.jsonl", [{"premise": "A cat sits.", "hypothesis": "", "label": "neutral"}])
    write(tmp_path / "wikiqa" / "train.jsonl", [{"qid": "q1", "question": "who?", "doc_title": "Title", "answer": "Him.", "label": 1}])
    write(tmp_path / "trec" / "dl19" / "corpus.jsonl", [{"pid": "p1", "text": "A passage."}])
    return tmp_path


def test_distinct_stripped_sentences_in_first_seen_order_from_every_text_column(tree):
    # files in path order: snli, stsb/test, stsb/train, trec, wikiqa
    assert collect_sentences(tree) == ["A cat sits.", "The test sentence.", "Only in test.", "A dog runs.", "A passage.", "who?", "Him."]
    assert read_sentences(tree / "wikiqa" / "train.jsonl") == ["who?", "Him."]  # ids and titles are not text columns


def test_held_out_files_are_not_read_and_their_sentences_leave_every_other_file(tree):
    kept = collect_sentences(tree, exclude=["stsb/test.jsonl", "trec/*"])
    assert kept == ["A cat sits.", "A dog runs.", "who?", "Him."]  # "The test sentence." also stood in stsb/train


def test_bad_folders_patterns_and_files_are_refused(tree, tmp_path):
    with pytest.raises(ValueError, match="exclude patterns \\['stsb/tset.jsonl'\\] match no file"):
        collect_sentences(tree, exclude=["stsb/tset.jsonl"])
    with pytest.raises(ValueError, match="no \\*.jsonl files under"):
        collect_sentences(tmp_path / "nowhere")
    (tree / "broken.jsonl").write_text("{not json}\n", encoding="utf-8")
    with pytest.raises(ValueError, match="broken.jsonl:1 is not valid JSON"):
        collect_sentences(tree)
