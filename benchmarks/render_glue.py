"""Tables of the GLUE-style benchmarks, from their results JSON: kd_glue, dvbert, emd_glue, emd_summary,
emd_fixed_point, virt_glue.

Each function takes the payload a script saved in benchmarks/results/NAME.json (its `settings` are the
script's options) and returns the markdown table the script writes beside it. The scripts call the same
functions while they run, so a table rendered again from the JSON is the table the run wrote.
"""

from __future__ import annotations

from types import SimpleNamespace

from glue_tasks import GLUE_TASKS
from render import mean_std


def _opts(payload: dict) -> SimpleNamespace:
    return SimpleNamespace(**payload["settings"])


def kd_glue(payload: dict) -> str:
    """Every finished arm: mean ± std over seeds of the task's metric (and F1 for binary tasks)."""
    opts = _opts(payload)
    lines = [
        f"{opts.student_layers}-layer student (`from_teacher`, strategy `{opts.strategy}`) of a fine-tuned 6-layer "
        f"MiniLM cross-encoder; {opts.epochs:g} epoch(s), lr {opts.lr:g}, batch 16, max_length 128, seeds {opts.seeds}; "
        "validation split; mean ± std over seeds (x100).",
        "",
        "| task | model | metric | mean | std | runs |",
        "| --- | --- | --- | ---: | ---: | --- |",
    ]
    for task, task_results in payload["tasks"].items():
        _, _, _, num_labels, _, metric = GLUE_TASKS[task]
        teacher_metrics = task_results["teacher"]
        for name in [metric] + (["f1"] if num_labels == 2 else []):
            lines.append(f"| {task} | teacher (6 layers) | {name} | {100 * teacher_metrics[name]:.2f} | – | 1 |")
            for arm, runs in task_results["arms"].items():
                values = [100 * r[name] for r in runs]
                mean, std = mean_std(values)
                lines.append(f"| {task} | student: {arm} | {name} | {mean:.2f} | {std:.2f} | {', '.join(f'{v:.1f}' for v in values)} |")
    return "\n".join(lines)


def dvbert_seeds(payload: dict) -> list[int]:
    """Every seed that has a run in the results."""
    return sorted({run["seed"] for task in payload["tasks"].values() for runs in task["arms"].values() for run in runs})


def dvbert(payload: dict) -> str:
    """Per task: each teacher's own score, then every arm's STS-B test Spearman (x100) and, for SNLI, test accuracy."""
    opts = _opts(payload)
    lines = [
        f"Siamese students: all-MiniLM-L6-v2 keeping {opts.student_layers} of its 6 layers (uniform), mean pooling; "
        f"{opts.epochs:g} epoch(s), lr {opts.lr:g}, batch 16, max_length 128; teachers {', '.join(opts.teachers)} "
        f"(K = 1: {opts.teachers[0]}); seeds {dvbert_seeds(payload)}; mean ± std over seeds. STS-B: Spearman x100 of cosine(u, v) "
        "on STS-B test (after SNLI training: transfer); SNLI: accuracy x100 on SNLI test.",
        "",
        "| task (train -> eval) | model | STS-B test Spearman | SNLI test accuracy | runs | train s (mean) |",
        "| --- | --- | ---: | ---: | --- | ---: |",
    ]
    for task, task_results in payload["tasks"].items():
        splits = f"{task} ({task_results['splits']['train']} -> {task_results['splits']['eval']})"
        for name, metrics in task_results["teachers"].items():
            sts = f"{100 * metrics['spearman']:.2f}" if "spearman" in metrics else "–"
            acc = f"{100 * metrics['accuracy']:.2f}" if "accuracy" in metrics else "–"
            lines.append(f"| {splits} | teacher cross-encoder: {name} | {sts} | {acc} | 1 | – |")
        for arm, runs in task_results["arms"].items():
            sts_values = [r["stsb_test_spearman_cosine"] for r in runs]
            mean, std = mean_std(sts_values)
            acc = "–"
            if "accuracy" in runs[0]:
                acc_mean, acc_std = mean_std([100 * r["accuracy"] for r in runs])
                acc = f"{acc_mean:.2f} ± {acc_std:.2f}"
            seconds = mean_std([r["train_seconds"] for r in runs])[0]
            lines.append(
                f"| {splits} | {arm} | {mean:.2f} ± {std:.2f} | {acc} | {', '.join(f'{v:.1f}' for v in sts_values)} | {seconds:.0f} |"
            )
    lines += ["", *dvbert_targets(payload)]
    return "\n".join(lines)


def dvbert_targets(payload: dict) -> list[str]:
    """The paper's claims per task and K: each teacher beats the SBERT baseline on the task's own metric
    (else it has nothing to teach); annealing beats the baseline by >= 0.5 STS-B Spearman points and
    beats loss weighting (on SNLI also checked on accuracy)."""
    lines = ["| task | check | measured | holds |", "| --- | --- | ---: | --- |"]
    for task, task_results in payload["tasks"].items():
        arms_ = task_results["arms"]
        if "SBERT baseline" not in arms_:
            continue
        metrics = {"STS-B Spearman": ("stsb_test_spearman_cosine", 1)}
        if task == "snli":
            metrics["SNLI accuracy"] = ("accuracy", 100)

        def mean_of(arm: str, metric: str, metrics: dict = metrics, arms_: dict = arms_) -> float:
            key, scale = metrics[metric]
            return mean_std([scale * r[key] for r in arms_[arm]])[0]

        own = "SNLI accuracy" if task == "snli" else "STS-B Spearman"
        baseline = mean_of("SBERT baseline", own)
        for name, scores in task_results["teachers"].items():
            value = 100 * scores["accuracy" if task == "snli" else "spearman"]
            lines.append(f"| {task} | teacher {name} > SBERT baseline on {own} ({baseline:.2f}) | {value:.2f} | "
                         f"{'yes' if value > baseline else 'no'} |")
        for k in range(1, len(task_results["teachers"]) + 1):
            annealing, weighting = f"DvBERT annealing K={k}", f"DvBERT weighting K={k}"
            if annealing not in arms_ or weighting not in arms_:
                continue
            for metric in metrics:
                gain = mean_of(annealing, metric) - mean_of("SBERT baseline", metric)
                margin = mean_of(annealing, metric) - mean_of(weighting, metric)
                if metric == "STS-B Spearman":
                    lines.append(f"| {task} | annealing K={k} - SBERT baseline, {metric} >= 0.5 | {gain:+.2f} | "
                                 f"{'yes' if gain >= 0.5 else 'no'} |")
                else:
                    lines.append(f"| {task} | annealing K={k} - SBERT baseline, {metric} > 0 | {gain:+.2f} | "
                                 f"{'yes' if gain > 0 else 'no'} |")
                lines.append(f"| {task} | annealing K={k} - weighting K={k}, {metric} > 0 | {margin:+.2f} | "
                             f"{'yes' if margin > 0 else 'no'} |")
    return lines


def emd_glue(payload: dict) -> str:
    """Quality per task and arm, the three-task average, and the wall-time ratio EMD / uniform."""
    opts = _opts(payload)
    one_stage = getattr(opts, "stages", 1) == 1
    lines = [
        f"{opts.student_layers}-layer cross-encoder student (`from_teacher`, strategy `{opts.strategy}`) of the fine-tuned "
        f"6-layer MiniLM teacher; {opts.epochs:g} epoch(s), lr {opts.lr:g}, batch 16, max_length 128; "
        + (f"beta {opts.beta:g}, " if one_stage else "")
        + f"alpha {opts.alpha:g}, T 1; seeds {opts.seeds}; validation split; mean ± std over seeds (x100)."
        + ("" if one_stage else
           f" Two stages of {opts.epochs:g} epoch(s) each: layer terms alone (weight 1), then the prediction loss alone."),
        "",
        "| task | model | metric | mean | std | runs | train s (mean) |",
        "| --- | --- | --- | ---: | ---: | --- | ---: |",
    ]
    averages: dict[str, list[float]] = {}
    for task, task_results in payload["tasks"].items():
        metric = GLUE_TASKS[task][5]
        lines.append(f"| {task} | teacher (6 layers) | {metric} | {100 * task_results['teacher'][metric]:.2f} | – | 1 | – |")
        for arm, runs in task_results["arms"].items():
            values = [100 * r[metric] for r in runs]
            mean, std = mean_std(values)
            averages.setdefault(arm, []).append(mean)
            seconds = mean_std([r["train_seconds"] for r in runs])[0]
            lines.append(
                f"| {task} | student: {arm} | {metric} | {mean:.2f} | {std:.2f} | {', '.join(f'{v:.1f}' for v in values)} | {seconds:.0f} |"
            )
    lines += ["", "| arm | average of the tasks' main metric |", "| --- | ---: |"]
    lines += [f"| {arm} | {sum(v) / len(v):.2f} |" for arm, v in averages.items()]
    for emd_arm, ratios in emd_time_ratios(payload).items():
        lines += ["", f"Train time per step, {emd_arm} / uniform (same run): {', '.join(f'{r:.3f}' for r in ratios)} (per task)."]
    return "\n".join(lines)


def emd_time_ratios(payload: dict) -> dict[str, list[float]]:
    """EMD arm -> seconds per step over the uniform arm's, per task (of the layer stage when there were two)."""

    def per_step(runs: list[dict]) -> float:
        timed = [r.get("stage1", r) for r in runs]
        return mean_std([t["train_seconds"] / t["steps"] for t in timed])[0]

    tasks = payload["tasks"].values()
    emd_arms = sorted({a for t in tasks for a in t["arms"] if a.startswith("EMD")})
    ratios = {
        arm: [per_step(t["arms"][arm]) / per_step(t["arms"]["uniform"]) for t in tasks if arm in t["arms"] and "uniform" in t["arms"]]
        for arm in emd_arms
    }
    return {arm: r for arm, r in ratios.items() if r}


EMD_SUMMARY_TASKS = {"stsb": "STS-B", "mrpc": "MRPC", "rte": "RTE"}


def emd_summary_table(rows: list[dict]) -> str:
    head = ["file", "start", "budget", "beta", "EMD arm"] + [f"{name}: EMD - uniform (seeds EMD >=)" for name in EMD_SUMMARY_TASKS.values()]
    lines = ["| " + " | ".join(head + ["average EMD / uniform", "EMD >= uniform"]) + " |",
             "| " + " | ".join(["---"] * 5 + ["---:"] * (len(EMD_SUMMARY_TASKS) + 1) + ["---"]) + " |"]
    for row in rows:
        cells = [f"[{row['file']}]({row['file']}.md)", row["start"], row["budget"], row["beta"], row["arm"]]
        for task in EMD_SUMMARY_TASKS:
            c = row["tasks"].get(task)
            if c is None:
                cells.append("–")
                continue
            constant = c["majority_class_runs"]
            flag = "" if not (constant["emd"] or constant["uniform"]) else f"; majority class {constant['emd']} / {constant['uniform']}"
            cells.append(f"{round(c['difference'], 2) + 0.0:+.2f} ({c['seeds_emd_at_least_uniform']}/{c['seeds']}{flag})")
        average = row.get("average")
        cells.append("–" if average is None else f"{average['emd']:.2f} / {average['uniform']:.2f}")
        cells.append("–" if average is None else ("yes" if row["target_holds"] else "no"))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def emd_summary(payload: dict) -> str:
    """The whole of results/emd_summary.md (it has no machine of its own: it reads the other files)."""
    return (
        f"Command: `{payload['command']}` (reads the `emd_glue*.json` results; each file's own command and machine are in its .md)\n\n"
        "Differences are x100 in the task's main metric (STS-B Spearman, MRPC and RTE accuracy), EMD arm mean minus "
        "uniform-mapping mean over the file's seeds; in brackets, on how many paired seeds EMD >= uniform. A file with "
        "one seed is a probe, not a comparison. \"majority class E / U\": how many of the EMD / uniform runs "
        "score exactly the majority-class share (one class predicted throughout).\n\n" + emd_summary_table(payload["rows"])
    )


def _origin_share(flow: list[list[float]], origins: list[int]) -> float:
    return sum(flow[i][origin - 1] for i, origin in enumerate(origins))


def emd_fixed_point(payload: dict) -> str:
    def row(values) -> str:
        return " / ".join(f"{v:.3f}" for v in values)

    lines = []
    for task, r in payload["tasks"].items():
        origins = r["origins"]
        lines += [f"### {task}: student layers cut from teacher layers {origins}", ""]
        for kind, cost in r["costs"].items():
            cheapest = [min(range(len(c)), key=c.__getitem__) + 1 for c in cost]
            lines += [f"{kind} cost D (rows: student layers 1-2; columns: teacher layers 1-{len(cost[0])}); "
                      f"cheapest teacher layer per student layer: {cheapest} (origins {origins})", ""]
            lines += ["| student layer | " + " | ".join(f"T{j + 1}" for j in range(len(cost[0]))) + " |",
                      "| --- |" + " ---: |" * len(cost[0])]
            lines += [f"| S{i + 1} | " + " | ".join(f"{v:.4g}" for v in c) + " |" for i, c in enumerate(cost)]
            lines.append("")
        lines += ["| update | hidden masses: student; teacher | attention masses: student; teacher "
                  "| hidden flow on origin pairs | attention flow on origin pairs |",
                  "| --- | --- | --- | ---: | ---: |"]
        for rule in r["rules"]:
            name = (rule["mode"] + (f", T {rule['temperature']:g}" if rule["temperature"] else "")
                    + (", add_softmax" if rule["smooth"] else "") + (", separate" if rule["separate"] else ""))
            m = rule["masses"]
            hidden = f"{row(m['hidden_student'])}; {row(m['hidden_teacher'])}"
            attention = (f"{row(m['attention_student'])}; {row(m['attention_teacher'])}"
                         if rule["separate"] else "(= hidden)")
            shares = " | ".join(f"{_origin_share(rule['flows'][kind], origins):.3f}" for kind in ("hidden", "attention"))
            lines.append(f"| {name} | {hidden} | {attention} | {shares} |")
        lines.append("")
    lines.append("Uniform (TinyBERT) mapping puts all of its (equal) pair weights on the origin pairs: share 1.000. "
                 "Without `separate` (the default) the hidden and attention masses are averaged after every update, so "
                 "they are equal; with it each kind keeps its own.")
    return "\n".join(lines)


def virt_glue(payload: dict) -> str:
    opts = _opts(payload)
    lines = [
        f"Siamese students: the MiniLM bi-encoder keeping {opts.student_layers} of its 6 layers (`{opts.strategy}`), mean "
        f"pooling, softmax over (u, v, |u-v|); teacher: the fine-tuned 6-layer MiniLM cross-encoder. {opts.epochs:g} "
        f"epoch(s), lr {opts.lr:g}, batch 16, max_length 128 per side, VIRT alpha {opts.virt_weight:g}; seeds {opts.seeds}; "
        "mean ± std over seeds (x100).",
        "",
        "| task (train -> eval) | model | accuracy | std | runs | train s (mean) |",
        "| --- | --- | ---: | ---: | --- | ---: |",
    ]
    averages: dict[str, list[float]] = {}
    for task, r in payload["tasks"].items():
        where = f"{task} ({r['splits']['train']} -> {r['splits']['eval']}, {r['train_rows']} rows)"
        lines.append(f"| {where} | teacher cross-encoder (6 layers) | {100 * r['teacher']['accuracy']:.2f} | – | 1 | – |")
        averages.setdefault("teacher cross-encoder", []).append(100 * r["teacher"]["accuracy"])
        for arm, runs in r["arms"].items():
            values = [100 * run["accuracy"] for run in runs]
            mean, std = mean_std(values)
            averages.setdefault(arm, []).append(mean)
            seconds = mean_std([run["train_seconds"] for run in runs])[0]
            lines.append(f"| {where} | {arm} | {mean:.2f} | {std:.2f} | {', '.join(f'{v:.1f}' for v in values)} | {seconds:.0f} |")
    lines += ["", "| model | average accuracy over the tasks |", "| --- | ---: |"]
    lines += [f"| {arm} | {sum(v) / len(v):.2f} |" for arm, v in averages.items()]
    lines += ["", "Embedding throughput (`encode`, 512 eval sentences, batch 64, median of 3 alternating rounds, sentences/s):", "",
              "| task | seed | Siamese baseline | + VIRT loss | ratio |", "| --- | --- | ---: | ---: | ---: |"]
    for task, r in payload["tasks"].items():
        for speed in r.get("encode_sentences_per_s", []):
            base, virt = (value for key, value in speed.items() if key != "seed")  # baseline, then the VIRT-trained encoder
            lines.append(f"| {task} | {speed['seed']} | {base:.0f} | {virt:.0f} | {virt / base:.3f} |")
    return "\n".join(lines)
