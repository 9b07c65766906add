"""A local data file that `datasets` cannot read, said in one line: the file and its first bad line.

`datasets` reports a broken JSON line as "JSON parse error ... in row 1" of a block (not of the file)
and a CSV row with too many fields deep inside a traceback; the file is read again here, line by
line, to name the line to fix.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

from .errors import ConfigError, first_line


def _first_bad_json_line(path: Path) -> tuple[int, str] | None:
    """(line number, why) of the first line of a JSON Lines file that is not a JSON object; for a
    file holding one JSON document (starting with '['), where that document breaks."""
    text = path.read_text(encoding="utf-8", errors="replace")
    if text.lstrip().startswith("["):
        try:
            json.loads(text)
        except json.JSONDecodeError as error:
            return error.lineno, f"is not valid JSON ({error.msg}, column {error.colno})"
        return None
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            return number, f"is not valid JSON ({error.msg}, column {error.colno})"
        if not isinstance(row, dict):
            return number, f"is a JSON {type(row).__name__}, not an object of column: value"
    return None


def _first_bad_csv_line(path: Path, delimiter: str) -> tuple[int, str] | None:
    """(line number, why) of the first CSV/TSV row whose number of fields differs from the header's."""
    with path.open(encoding="utf-8", errors="replace", newline="") as handle:
        reader = csv.reader(handle, delimiter=delimiter)
        header = next(reader, None)
        if header is None:
            return None
        for row in reader:
            if row and len(row) != len(header):
                return reader.line_num, f"has {len(row)} fields where the header has {len(header)}"
    return None


def first_bad_line(path: str) -> tuple[int, str] | None:
    """(line number, why) of the first line of a JSON Lines / JSON / CSV / TSV file that does not parse."""
    file = Path(path)
    suffix = file.suffix.lower()
    try:
        if suffix in (".jsonl", ".json"):
            return _first_bad_json_line(file)
        if suffix in (".csv", ".tsv"):
            return _first_bad_csv_line(file, "\t" if suffix == ".tsv" else ",")
    except (OSError, csv.Error):
        return None
    return None


def _innermost(error: BaseException) -> BaseException:
    """The original error under `datasets`' wrappers (DatasetGenerationError -> ArrowInvalid)."""
    seen = {id(error)}
    while (error.__cause__ or error.__context__) is not None and id(error.__cause__ or error.__context__) not in seen:
        error = error.__cause__ or error.__context__
        seen.add(id(error))
    return error


def unreadable_file(what: str, path: str, error: BaseException) -> ConfigError:
    """The one-line `ConfigError` for a data file `datasets` could not read (`what`: e.g. "train file")."""
    bad = first_bad_line(path)
    if bad:
        number, why = bad
        return ConfigError(f"{what} {path!r} line {number} {why}: fix or remove that line")
    cause = _innermost(error)
    return ConfigError(f"{what} {path!r} could not be read ({first_line(cause)})")
