"""`hf-distill quickstart` end to end: the wall time of the whole command and its three models' accuracy, per seed.

For each seed, `hf-distill quickstart --output_dir <CACHE>/quickstart/seed-<s> --seed <s>` runs as a subprocess
with HF_HUB_OFFLINE=1 and an empty `--cache_dir` of its own, so it trains on the demo set shipped in the
package (hf_distill/demo/demo_pairs.jsonl) as a first run without the Hub does; the wall-clock time is taken
around the whole command (Python start and imports included, install excluded). Its quickstart_results.json
gives the validation accuracy and inference pairs/s of the teacher, of the 2-layer KD student ("student, KD + layers";
"student, KD" with `--layer_weight 0`; "+ augmentation" after either with `--augment_n`) and of the same student
without KD. One row per seed goes to benchmarks/results/quickstart.json as it finishes, with the quickstart's
settings; seeds already there under the same settings and options are skipped, so a run cut short goes on.
Options the script does not know go to the quickstart (`--augment_n 2`); each set of settings gets its own table.

Targets (issue #40 item 8): the KD student within 3 points of its teacher on the demo validation split (mean
of the seeds); the whole command under 3 minutes on 2 cores.

    python benchmarks/quickstart.py            # the real run: results/quickstart.json, docs/results/quickstart.md
    python benchmarks/quickstart.py --smoke    # the smoke world's tiny MiniLM, a few steps, one seed (smoke folder)
    python benchmarks/quickstart.py --render   # docs/results/quickstart.md again from results/quickstart.json
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

from common import (
    CACHE,
    REPO,
    RESULTS,
    SMOKE,
    machine,
    mean_std,
    minilm_dir,
    smoke_option,
)

from hf_distill.cli.quickstart_command import SPEED_SETTINGS, kd_student_name, settings_of

DOCS = REPO / "docs" / "results"
MODELS = {"teacher": "teacher", "student_kd": "student, KD", "student_no_kd": "student, no KD"}  # the KD row: kd_student_name
# Rows written before the quickstart recorded its settings ran its defaults of then: KD with 2 augmented pairs per pair.
FIRST_SETTINGS = dict(teacher_epochs=2, student_steps=400, augment_n=2, augment_p=0.1, layer_weight=0.0, student_layers=2,
                      teacher_lr=2e-4, student_lr=3e-4, alpha=0.5, temperature=2.0, max_train_samples=1000)
GAP_TARGET = 3.0  # accuracy points between the KD student and its teacher, at most (mean of the seeds)
MINUTES_TARGET = 3.0  # the whole command, on 2 cores
TARGET_CORES = 2
OWN_OPTIONS = ("--output_dir", "--seed")  # set by this script, per seed


def smoke_options() -> list[str]:
    """The quickstart's options in smoke mode: the smoke world's random MiniLM, a few steps on a few pairs."""
    return ["--model", minilm_dir(), "--student_steps", "2", "--teacher_epochs", "0.05", "--max_train_samples", "16",
            "--max_eval_samples", "16"]


def hf_distill_command() -> list[str]:
    """`hf-distill` as installed beside this Python (the console script a user types), else `python -m hf_distill.cli`."""
    script = Path(sys.executable).with_name("hf-distill")
    return [str(script)] if script.exists() else [sys.executable, "-m", "hf_distill.cli"]


def run_seed(seed: int, options: list[str]) -> tuple[dict, float, list[str]]:
    """One quickstart in a fresh folder: its quickstart_results.json, the wall seconds, the command line."""
    folder = CACHE / "quickstart" / f"seed-{seed}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    cache = [] if any(o.split("=")[0] == "--cache_dir" for o in options) else ["--cache_dir", str(folder / "hf_cache")]
    command = [*hf_distill_command(), "quickstart", "--output_dir", str(folder), "--seed", str(seed), *cache, *options]
    print(f"[seed {seed}] {shlex.join(command)}", flush=True)
    log = folder / "quickstart.log"
    with open(log, "w") as out:
        start = time.perf_counter()
        done = subprocess.run(command, env={**os.environ, "HF_HUB_OFFLINE": "1"}, cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
                              check=False)
        seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"the quickstart (seed {seed}) exited {done.returncode}; its log, {log}, ends:\n{log.read_text()[-4000:]}")
    return json.loads((folder / "quickstart_results.json").read_text()), seconds, command


def make_row(seed: int, summary: dict, seconds: float, command: list[str], options: list[str]) -> dict:
    """The row of one seed: accuracy x100 and pairs/s of the three models, the gaps, the times, the machine."""
    by_name = {row["model"]: row for row in summary["models"]}
    kd_name = kd_student_name(summary["settings"]["augment_n"], summary["settings"]["layer_weight"])
    by_name[MODELS["student_kd"]] = by_name.get(kd_name, {})
    missing = [name for name in MODELS.values() if "accuracy" not in by_name.get(name, {})]
    if missing:
        sys.exit(f"quickstart_results.json of seed {seed} has no accuracy for {missing}")
    row = {"seed": seed, "data": summary["data"], "teacher_backbone": summary["teacher_backbone"], "minutes_wall": seconds / 60,
           "minutes_in_command": summary["minutes"]}
    row.update({key: 100 * by_name[name]["accuracy"] for key, name in MODELS.items()})
    row.update(gap_teacher_kd=row["teacher"] - row["student_kd"], gain_kd_over_no_kd=row["student_kd"] - row["student_no_kd"])
    row.update({f"pairs_per_s_{key.removeprefix('student_')}": by_name[name]["pairs_per_s"] for key, name in MODELS.items()})
    row.update(layers={key: by_name[name]["layers"] for key, name in MODELS.items()}, options=options, kd_student=kd_name,
               settings=summary["settings"],
               speed_batch=SPEED_SETTINGS["batch_size"], speed_max_length=SPEED_SETTINGS["max_length"],
               quickstart_command=shlex.join(command), cores=os.cpu_count(), machine=machine())
    return row


def load(path: Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {"rows": []}


def with_settings(row: dict) -> dict:
    """`row` in the current layout. The first rows (no settings recorded) name their KD student `student_kd_aug`
    whatever its augment_n; they ran FIRST_SETTINGS as their options changed them. Rows from before
    `--layer_weight` existed distilled the teacher's logits alone (layer_weight 0)."""
    if "student_kd_aug" in row:
        settings = settings_of(row["options"], defaults=FIRST_SETTINGS)
        return {**row, "student_kd": row["student_kd_aug"], "pairs_per_s_kd": row["pairs_per_s_kd_aug"],
                "kd_student": kd_student_name(settings["augment_n"], settings["layer_weight"]), "settings": settings}
    if "layer_weight" not in row["settings"]:
        return {**row, "settings": {**row["settings"], "layer_weight": 0.0}}
    return row


def setting_key(row: dict) -> str:
    """Rows compare only under one KD student, one set of settings and one set of options."""
    return json.dumps([row["kd_student"], row["settings"], row["options"]], sort_keys=True)


def run(opts, options: list[str], command: str, path: Path) -> None:
    """Every seed not yet in the JSON, its row appended (and the file written) as it finishes."""
    settings = settings_of(options)
    done = {row["seed"] for row in map(with_settings, load(path)["rows"])
            if row["settings"] == settings and row["options"] == options}
    for seed in opts.seeds:
        if seed in done:
            print(f"[seed {seed}] in {path} already, under these settings: skipped", flush=True)
            continue
        summary, seconds, quickstart_command = run_seed(seed, options)
        row = make_row(seed, summary, seconds, quickstart_command, options)
        payload = load(path)  # read again: another process may have added rows
        payload["rows"].append(row)
        payload["commands"] = sorted(set(payload.get("commands", [])) | {command})
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(payload, indent=2) + "\n")
        print(f"[seed {seed}] {row['minutes_wall']:.2f} min; teacher {row['teacher']:.1f}, {row['kd_student']} "
              f"{row['student_kd']:.1f}, no KD {row['student_no_kd']:.1f}", flush=True)


# ---------------------------------------------------------------------------- the page
def _cell(values: list[float], digits: int = 1, sign: str = "") -> str:
    mean, std = mean_std(values)
    return f"{mean:{sign}.{digits}f} ± {std:.{digits}f}" if len(values) > 1 else f"{mean:{sign}.{digits}f}"


COLUMNS = (  # (header, row key, digits)
    ("minutes (wall)", "minutes_wall", 2), ("teacher", "teacher", 1), ("KD student", "student_kd", 1),
    ("student, no KD", "student_no_kd", 1), ("teacher − KD", "gap_teacher_kd", 1), ("KD − no KD", "gain_kd_over_no_kd", 1),
    ("pairs/s teacher", "pairs_per_s_teacher", 0), ("pairs/s KD", "pairs_per_s_kd", 0),
    ("pairs/s no KD", "pairs_per_s_no_kd", 0),
)


def _table(rows: list[dict]) -> list[str]:
    lines = ["| seed | " + " | ".join(title for title, _, _ in COLUMNS) + " |", "| ---: | " + " | ".join("---:" for _ in COLUMNS) + " |"]
    for row in sorted(rows, key=lambda r: r["seed"]):
        lines.append(f"| {row['seed']} | " + " | ".join(f"{row[key]:.{digits}f}" for _, key, digits in COLUMNS) + " |")
    if len(rows) > 1:
        cells = [_cell([row[key] for row in rows], digits) for _, key, digits in COLUMNS]
        lines.append(f"| mean ± std ({len(rows)} seeds) | " + " | ".join(cells) + " |")
    return lines


def _targets(rows: list[dict]) -> list[str]:
    """The two targets of issue #40 item 8, and what the KD student buys over no KD."""
    seeds = f"mean of {len(rows)} seed{'s' if len(rows) > 1 else ''}"
    gap = mean_std([row["gap_teacher_kd"] for row in rows])[0]
    verdict = "met" if gap <= GAP_TARGET else f"missed by {gap - GAP_TARGET:.1f} points"
    where = f"{gap:.1f} points below its teacher" if gap >= 0 else f"{-gap:.1f} points above its teacher"
    slowest, mean_minutes = max(row["minutes_wall"] for row in rows), mean_std([row["minutes_wall"] for row in rows])[0]
    cores = sorted({row["cores"] for row in rows})
    on = ", ".join(map(str, cores)) + f" core{'s' if cores != [1] else ''}"
    note = "" if cores == [TARGET_CORES] else f" (the target is for {TARGET_CORES} cores)"
    gains = [row["gain_kd_over_no_kd"] for row in sorted(rows, key=lambda r: r["seed"])]
    return [
        f"- The KD student within {GAP_TARGET:g} points of its teacher (validation accuracy, {seeds}): {where}: {verdict}.",
        (f"- The whole command under {MINUTES_TARGET:g} minutes on {TARGET_CORES} cores: slowest seed {slowest:.2f} min, "
         f"mean {mean_minutes:.2f} min, on {on}{note}: {'met' if slowest < MINUTES_TARGET else 'missed'}."),
        (f"- What {rows[0]['kd_student'].removeprefix('student, ')} buys: {_cell(gains, sign='+')} accuracy points over the same student without KD "
         f"(per seed: {', '.join(f'{g:+.1f}' for g in gains)})."),
    ]


NO_RESULTS_PAGE = """# The quickstart, end to end

No results yet. `benchmarks/quickstart.py` writes this page from `benchmarks/results/quickstart.json`:

    python benchmarks/quickstart.py            # the real run
    python benchmarks/quickstart.py --render   # the page again from the JSON

It runs `hf-distill quickstart` offline (the demo set shipped in the package) once per seed, timing the
whole command, and compares the teacher, the KD student and the student without KD against
the targets of issue #40 item 8.
"""


def _settings_title(rows: list[dict]) -> str:
    """A group's heading: its KD student, and where its settings and options differ from today's defaults."""
    row, defaults = rows[0], settings_of([])
    changed = [f"{name} {value:g}" if isinstance(value, float) else f"{name} {value}"
               for name, value in row["settings"].items() if defaults.get(name) != value]
    options = f"; options `{shlex.join(row['options'])}`" if row["options"] else ""
    which = "the current defaults" if not changed and not row["options"] else "settings differing from today's defaults: " + (
        ", ".join(changed) or "none")
    return f"## {row['kd_student']} ({which}{options})"


def render(payload: dict) -> str:
    """docs/results/quickstart.md from the JSON payload (the note and the command while it has no rows): one table
    and its targets per set of settings, today's defaults first."""
    rows = [with_settings(row) for row in payload["rows"]]
    if not rows:
        return NO_RESULTS_PAGE
    groups: dict[str, list[dict]] = {}
    for row in rows:
        groups.setdefault(setting_key(row), []).append(row)
    current = {"settings": settings_of([]), "options": []}
    ordered = sorted(groups.values(), key=lambda g: (g[0]["settings"] != current["settings"] or g[0]["options"] != []))
    speed = " / ".join(sorted({f"batch {row['speed_batch']}, max_length {row['speed_max_length']}" for row in rows}))
    lines = [
        "# The quickstart, end to end", "",
        "`hf-distill quickstart` run once per seed the way a first run without the Hub goes (HF_HUB_OFFLINE=1, an empty cache); "
        "minutes: the wall-clock time of the whole command, Python start and imports included, install excluded. "
        "Accuracy x100 on the validation split of " + " / ".join(sorted({row["data"] for row in rows})) + "; "
        f"pairs/s: inference at {speed}, measured by the quickstart.", "",
        "Commands: " + ", ".join(f"`{command}`" for command in payload.get("commands", [])), "",
        "Machine: " + "; ".join(sorted({row["machine"] for row in rows})), "",
    ]
    for group in ordered:
        lines += [_settings_title(group), "", *_table(group), "", "Targets (issue #40 item 8):", "", *_targets(group), ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--seeds", nargs="+", type=int, default=[42, 43, 44])
    parser.add_argument("--render", action="store_true", help="only write quickstart.md from an existing quickstart.json")
    smoke_option(parser, seeds=[42])
    opts, options = parser.parse_known_args()
    options = [o for o in options if o != "--"]
    if any(o.split("=")[0] in OWN_OPTIONS for o in options):
        parser.error(f"{' and '.join(OWN_OPTIONS)} are set per seed by this script")
    command = "python benchmarks/quickstart.py " + shlex.join(sys.argv[1:])
    path, docs = RESULTS / "quickstart.json", (RESULTS if SMOKE else DOCS)
    if not opts.render:
        run(opts, (smoke_options() if SMOKE else []) + options, command.strip(), path)
    text = render(load(path))
    docs.mkdir(parents=True, exist_ok=True)
    (docs / "quickstart.md").write_text(text)
    print(text)
    print(f"wrote {docs / 'quickstart.md'}" + ("" if opts.render else f" and {path}"))


if __name__ == "__main__":
    main()
