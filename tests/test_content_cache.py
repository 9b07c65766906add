"""Datasets kept by content: a fresh copy of a data file finds the maps cached on the old one."""

import os
import shutil
import time

import datasets
import pytest

from hf_distill.cli.splits import _load_file
from hf_distill.content_cache import file_digest, saved_by_content
from hf_distill.transfer import load_pairs

ROWS = '{"sentence1": "a cat sat", "sentence2": "a dog ran", "label": 1}\n{"sentence1": "x", "sentence2": "y", "label": 0}\n'


def _write(path, text=ROWS):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _folder(dataset):
    return os.path.dirname(dataset.cache_files[0]["filename"])


def test_a_copied_and_touched_file_reads_the_same_saved_rows(tmp_path):
    first = _write(tmp_path / "a" / "train.jsonl")
    loaded = _load_file("train", str(first), str(tmp_path / "cache"))
    copy = tmp_path / "b" / "train.jsonl"
    copy.parent.mkdir()
    shutil.copy(first, copy)
    later = time.time() + 100
    os.utime(copy, (later, later))  # another path and another age: `datasets` alone would make a new cache folder
    again = _load_file("train", str(copy), str(tmp_path / "cache"))
    assert _folder(again) == _folder(loaded)
    assert "hf_distill_files" in _folder(again)
    assert again._fingerprint == loaded._fingerprint
    assert again.to_list() == loaded.to_list()


def test_a_map_cached_on_the_first_copy_is_not_run_again_on_the_second(tmp_path):
    calls = []

    def upper(batch):
        calls.append(len(batch["sentence1"]))
        return {"sentence1": [s.upper() for s in batch["sentence1"]]}

    first = _write(tmp_path / "a" / "train.jsonl")
    _load_file("train", str(first), str(tmp_path / "cache")).map(upper, batched=True, new_fingerprint="upper-v1")
    copy = _write(tmp_path / "b" / "train.jsonl")
    mapped = _load_file("train", str(copy), str(tmp_path / "cache")).map(upper, batched=True, new_fingerprint="upper-v1")
    assert calls == [2]  # the second map read the first one's cache file
    assert mapped["sentence1"] == ["A CAT SAT", "X"]


def test_other_content_or_another_reading_is_another_folder(tmp_path):
    path = _write(tmp_path / "train.jsonl")
    before = file_digest([path], "json")
    assert file_digest([path], "csv") != before
    _write(path, ROWS.replace("cat", "cow"))
    assert file_digest([path], "json") != before
    loaded = _load_file("train", str(path), str(tmp_path / "cache"))
    assert loaded["sentence1"][0] == "a cow sat"


def _rewrite_keeping_the_time(path, text):
    """New bytes under the old path and modification time (a coarse clock, `cp -p`, `rsync -t`, tar)."""
    before = os.stat(path)
    path.write_text(text)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


def test_a_file_rewritten_with_its_old_time_is_read_anew_and_its_copies_too(tmp_path):
    path, cache = _write(tmp_path / "a" / "train.jsonl"), str(tmp_path / "cache")
    assert _load_file("train", str(path), cache)["sentence1"][0] == "a cat sat"
    _rewrite_keeping_the_time(path, ROWS.replace("cat", "cow"))  # `datasets` alone keeps the old rows for it
    assert _load_file("train", str(path), cache)["sentence1"][0] == "a cow sat"
    copy = _write(tmp_path / "b" / "train.jsonl", ROWS.replace("cat", "cow"))  # the new bytes' saved rows are new
    assert _load_file("train", str(copy), cache)["sentence1"][0] == "a cow sat"
    pairs = _write(tmp_path / "transfer.jsonl", ROWS.replace("cat", "cow"))
    assert load_pairs([str(pairs)], ["sentence1", "sentence2"], cache_dir=cache)["sentence1"][0] == "a cow sat"
    _rewrite_keeping_the_time(pairs, ROWS.replace("cat", "hen"))
    assert load_pairs([str(pairs)], ["sentence1", "sentence2"], cache_dir=cache)["sentence1"][0] == "a hen sat"


def test_saved_bytes_are_not_read_again(tmp_path, monkeypatch):
    path, cache = _write(tmp_path / "train.jsonl"), str(tmp_path / "cache")
    loaded = _load_file("train", str(path), cache)
    monkeypatch.setattr(datasets, "load_dataset", lambda *a, **k: pytest.fail("the saved rows were read anew"))
    assert _load_file("train", str(path), cache).to_list() == loaded.to_list()


def test_transfer_files_are_saved_by_content_too(tmp_path):
    path = _write(tmp_path / "transfer.jsonl")
    pairs = load_pairs([str(path)], ["sentence1", "sentence2"], cache_dir=str(tmp_path / "cache"))
    assert pairs.column_names == ["sentence1", "sentence2"]
    assert any("hf_distill_files" in f["filename"] for f in pairs.cache_files)


@pytest.mark.parametrize("case", ["caching disabled", "no rows"])
def test_nothing_is_saved_without_caching_or_rows(tmp_path, case):
    rows = datasets.Dataset.from_dict({"text": [] if case == "no rows" else ["a"]})
    if case == "caching disabled":
        datasets.disable_caching()
    try:
        kept = saved_by_content(rows, "digest", "files", tmp_path)
    finally:
        datasets.enable_caching()
    assert kept is rows
    assert not (tmp_path / "hf_distill_files").exists()


def test_writers_never_share_a_half_written_folder(tmp_path):
    # what a crashed writer left, or a writer on another machine with the same process id is writing
    other = tmp_path / "hf_distill_files" / f"digest.partial-{os.getpid()}"
    other.mkdir(parents=True)
    (other / "data-00001-of-00002.arrow").write_text("not this dataset's")
    kept = saved_by_content(datasets.Dataset.from_dict({"text": ["a"]}), "digest", "files", tmp_path)
    assert sorted(os.listdir(tmp_path / "hf_distill_files" / "digest")) == [
        "data-00000-of-00001.arrow", "dataset_info.json", "state.json"]
    assert kept["text"] == ["a"]
