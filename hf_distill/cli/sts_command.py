"""`hf-distill sts-eval MODEL FILE.jsonl`: Spearman / Pearson x100 of a model's pair scores on an STS file."""

from __future__ import annotations

import argparse
import json

from .models import saved_model_type


def sts_eval(argv: list[str]) -> dict[str, float]:
    """Spearman / Pearson x100 of a model's pair scores on an STS jsonl (cosine for bi-encoders)."""
    parser = argparse.ArgumentParser(prog="hf-distill sts-eval", description=sts_eval.__doc__)
    parser.add_argument("model", help="hf_distill model or plain backbone (Hub id or folder; a backbone is mean-pooled)")
    parser.add_argument("file", help="jsonl with sentence1, sentence2 and a score")
    parser.add_argument("--score_column", default=None, help="default: 'score', else 'label'")
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--max_length", type=int, default=None)
    parser.add_argument("--name", default="", help="prefix of the metric names")
    args = parser.parse_args(argv)

    from transformers import AutoModel

    from ..evaluation import STSEvaluator
    from ..modeling import CrossEncoderConfig, SiameseConfig, SiameseModel

    score_column = args.score_column
    if score_column is None:
        with open(args.file, encoding="utf-8") as handle:
            first = json.loads(handle.readline())
        score_column = next((c for c in ("score", "label") if c in first), "score")
    evaluator = STSEvaluator.from_jsonl(
        args.file, score_column=score_column, batch_size=args.batch_size, max_length=args.max_length, name=args.name
    )
    if saved_model_type(args.model, {}) in (CrossEncoderConfig.model_type, SiameseConfig.model_type):
        model = AutoModel.from_pretrained(args.model)
    else:
        model = SiameseModel.from_pretrained(args.model, head="none")
    model.eval()
    scores = evaluator(model)
    print(json.dumps({k: round(v, 2) for k, v in scores.items()}, indent=2))
    return scores
