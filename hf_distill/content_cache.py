"""Datasets saved under a digest of their content, so that work cached on them survives a copied or touched file.

`datasets` keys a local file's cache folder on the file's path and modification time. A file copied
anew (a fresh checkout, a data folder mounted again, `touch`) gets a new folder, and every map cached on
the old one (augmentation, teacher logits, tokenisation) runs again: labelling 25,000 pairs with a
6-layer teacher takes about 15 minutes on 2 CPU cores. Here the rows are saved once under
`<cache>/hf_distill_<kind>/<digest>` and read from there: the same content finds the same folder, and
so the same cached maps, whatever its path or age. `files_by_content` reads local files that way: only
bytes never saved before are read, and then anew (not from the `datasets` cache kept for the path and age).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import uuid
from collections.abc import Iterable
from pathlib import Path

__all__ = ["file_digest", "files_by_content", "saved_by_content"]

_CHUNK = 1 << 20


def file_digest(paths: Iterable[str | os.PathLike], *settings: object) -> str:
    """A hex digest of the bytes of `paths` (in order) and of `settings` (their `repr`): how they are read."""
    digest = hashlib.sha256(repr(settings).encode())
    for path in paths:
        digest.update(b"\0file\0")
        with open(path, "rb") as handle:
            for chunk in iter(lambda: handle.read(_CHUNK), b""):
                digest.update(chunk)
    return digest.hexdigest()[:32]


def saved_by_content(dataset, digest: str, kind: str, cache_dir: str | os.PathLike | None = None):
    """`dataset` as saved in `<cache_dir>/hf_distill_<kind>/<digest>` (written the first time, atomically, so
    processes racing to write it agree), read back from there. `cache_dir` defaults to the `datasets` cache.
    `dataset` may be a function that makes it, called only when nothing is saved under `digest` yet.
    Returned as it is when `datasets` caching is disabled or it has no rows."""
    import datasets

    make = dataset if callable(dataset) else lambda: dataset
    if not datasets.is_caching_enabled():
        return make()
    root = Path(cache_dir) if cache_dir is not None else Path(datasets.config.HF_DATASETS_CACHE)
    folder = root / f"hf_distill_{kind}" / digest
    if not (folder / "state.json").is_file():
        dataset = make()
        if len(dataset) == 0:
            return dataset
        folder.parent.mkdir(parents=True, exist_ok=True)
        # a folder of its own (not named by the process id, which processes on other machines sharing the cache,
        # or a crashed one's successor, can have too): writers never share a half-written folder
        partial = folder.with_name(f"{folder.name}.partial-{uuid.uuid4().hex}")
        dataset.save_to_disk(str(partial))
        try:
            os.replace(partial, folder)  # atomic: a crash leaves no half-written folder behind
        except OSError:  # another process saved it first
            shutil.rmtree(partial, ignore_errors=True)
    return datasets.load_from_disk(str(folder))


def files_by_content(read, paths: Iterable[str | os.PathLike], settings: tuple, cache_dir: str | os.PathLike | None = None):
    """The dataset `read(download_mode)` makes of the local files `paths` (read as `settings` say: builder,
    options, split), saved by content (`saved_by_content` under `file_digest(paths, *settings)`). The files are
    read only when their bytes were never saved, and then with `download_mode="force_redownload"`: `datasets`
    would hand back the rows it cached for the same path and modification time, which a file rewritten within
    the clock's resolution or given its old time back (`cp -p`, `rsync -t`, tar) keeps, and those old rows,
    saved under the new bytes' digest, would be what every later copy of the new file reads."""
    import datasets

    if not datasets.is_caching_enabled():
        return read(None)
    return saved_by_content(lambda: read("force_redownload"), file_digest(list(paths), *settings), "files", cache_dir)
