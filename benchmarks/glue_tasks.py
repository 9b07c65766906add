"""The GLUE-style tasks of ../shared/data: folder, text columns, label column, labels, main metric.

Plain data with no imports, so that the renderers (`render.py`) read it without loading torch.
"""

# task -> (folder, text columns, label column, num_labels, label_scale, main metric)
GLUE_TASKS = {
    "mrpc": ("mrpc", ("sentence1", "sentence2"), "label", 2, 1.0, "accuracy"),
    "stsb": ("stsb", ("sentence1", "sentence2"), "score", 1, 5.0, "spearman"),
    "rte": ("rte", ("premise", "hypothesis"), "label", 2, 1.0, "accuracy"),
    "snli": ("snli", ("premise", "hypothesis"), "label", 3, 1.0, "accuracy"),
}
# tasks whose files carry label names instead of ids (GLUE's id order)
LABEL_NAMES = {"rte": ["entailment", "not_entailment"], "snli": ["entailment", "neutral", "contradiction"]}
