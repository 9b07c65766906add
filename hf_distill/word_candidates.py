"""Replacement candidates for words, as TinyBERT's augmentation draws them.

TinyBERT (Jiao et al., 2020) replaces a word by one of its K most likely words under BERT's masked
LM when the word is one wordpiece, and by one of its K nearest GloVe neighbours (cosine) otherwise;
only alphabetic words that are not stop words are replaced. Two sources here:

- `EmbeddingNeighbours` (default, offline, no extra model): the K nearest neighbours (cosine) of
  the word's row in the teacher's own input-embedding matrix, among the vocabulary's whole-word
  tokens. Only words that are one token have a row; words of several pieces stay as they are
  (TinyBERT uses GloVe for those, which this package does not ship).
- `MaskedLMCandidates`: a masked LM's K most likely whole-word tokens at the word's place, with the
  word masked in its sentence. A word of several pieces is masked as one mask token, so every
  word can be replaced.

Both return, per text, the replaceable words' character spans with their candidates.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import torch

from .fingerprints import fingerprint, tokenizer_digest, weights_digest

__all__ = ["STOP_WORDS", "EmbeddingNeighbours", "MaskedLMCandidates", "match_case", "whole_word_pool", "word_spans"]

# English stop words (NLTK's list, which TinyBERT's augmentation skips too)
STOP_WORDS = frozenset("""
i me my myself we our ours ourselves you your yours yourself yourselves he him his himself she her hers herself
it its itself they them their theirs themselves what which who whom this that these those am is are was were be
been being have has had having do does did doing a an the and but if or because as until while of at by for with
about against between into through during before after above below to from up down in out on off over under again
further then once here there when where why how all any both each few more most other some such no nor not only own
same so than too very s t can will just don should now d ll m o re ve y ain aren couldn didn doesn hadn hasn haven
isn ma mightn mustn needn shan shouldn wasn weren won wouldn
""".split())
_WORD = re.compile(r"(?<!\w)[A-Za-z]+(?!\w)")  # an ASCII-alphabetic word on its own (TinyBERT's valid words)

Spans = list[tuple[tuple[int, int], list[str]]]  # per text: ((start, end), candidates) of each replaceable word


def word_spans(text: str) -> list[tuple[int, int]]:
    """Character spans of the words that may be replaced: alphabetic, two letters or more, not stop words."""
    return [m.span() for m in _WORD.finditer(text) if len(m.group()) > 1 and m.group().lower() not in STOP_WORDS]


def match_case(word: str, candidate: str) -> str:
    """`candidate` in the case of `word` (UPPER, Title, or as the vocabulary spells it)."""
    if word.isupper() and len(word) > 1:
        return candidate.upper()
    return candidate[:1].upper() + candidate[1:] if word[:1].isupper() else candidate


def _word_ids(tokenizer, words: Sequence[str]) -> list[int]:
    """The one token id of each word as a word of its own (after a space), or -1 when it takes several."""
    encoded = tokenizer([" " + w for w in words], add_special_tokens=False)["input_ids"] if words else []
    return [ids[0] if len(ids) == 1 else -1 for ids in encoded]


def whole_word_pool(tokenizer) -> tuple[np.ndarray, list[str]]:
    """Ids and surface forms of the vocabulary's whole-word tokens: alphabetic, two letters or more, not a
    stop word, and the token the word is on its own (no `##` pieces, no mid-word BPE pieces)."""
    special = set(tokenizer.all_special_tokens)
    tokens = sorted((i, t) for t, i in tokenizer.get_vocab().items() if t not in special)
    surfaces = [tokenizer.convert_tokens_to_string([t]).strip() for _, t in tokens]
    keep = [j for j, s in enumerate(surfaces) if _WORD.fullmatch(s) and len(s) > 1 and s.lower() not in STOP_WORDS]
    ids = _word_ids(tokenizer, [surfaces[j] for j in keep])
    pool = [(tokens[j][0], surfaces[j]) for j, own in zip(keep, ids) if own == tokens[j][0]]
    return np.array([i for i, _ in pool], dtype=np.int64), [s for _, s in pool]


def _neighbour_table(matrix: torch.Tensor, k: int, batch_size: int) -> np.ndarray:
    """Row i: the pool positions of row i's k nearest rows by cosine (itself excluded), nearest first."""
    unit = torch.nn.functional.normalize(matrix.float(), dim=-1)
    k = min(k, len(unit) - 1)
    table = np.zeros((len(unit), max(k, 0)), dtype=np.int64)
    for start in range(0, len(unit), batch_size):
        sims = unit[start:start + batch_size] @ unit.T
        rows = torch.arange(len(sims))
        sims[rows, rows + start] = -float("inf")
        table[start:start + len(sims)] = sims.topk(k, dim=-1).indices.numpy()
    return table


def _input_embeddings(embeddings) -> torch.Tensor:
    if isinstance(embeddings, torch.Tensor):
        matrix = embeddings
    elif isinstance(embeddings, torch.nn.Embedding):
        matrix = embeddings.weight
    elif hasattr(embeddings, "get_input_embeddings"):
        matrix = embeddings.get_input_embeddings().weight
    else:
        raise ValueError(
            f"embeddings={type(embeddings).__name__} is not valid; give the teacher (a PreTrainedModel), "
            "an nn.Embedding or a (vocab, dim) tensor."
        )
    if matrix.dim() != 2:
        raise ValueError(f"embeddings has shape {tuple(matrix.shape)}; an input-embedding matrix is (vocab, dim).")
    return matrix.detach()


_TABLES: dict[str, np.ndarray] = {}  # neighbour tables by embedding, tokenizer and k: one per vocabulary


class EmbeddingNeighbours:
    """The k nearest whole-word tokens (cosine) of a one-token word in an input-embedding matrix."""

    def __init__(self, embeddings, tokenizer, k: int = 15, batch_size: int = 1024):
        matrix = _input_embeddings(embeddings)
        if len(tokenizer) > len(matrix):
            raise ValueError(f"embeddings has {len(matrix)} rows but the tokenizer has {len(tokenizer)} tokens; "
                             "give the embeddings of the model this tokenizer belongs to.")
        self.tokenizer, self.k = tokenizer, k
        self.fingerprint = fingerprint("embedding", weights_digest(matrix), tokenizer_digest(tokenizer), k)
        self.pool_ids, self.surfaces = whole_word_pool(tokenizer)
        self._position = {int(i): j for j, i in enumerate(self.pool_ids)}
        if self.fingerprint not in _TABLES:
            _TABLES[self.fingerprint] = _neighbour_table(matrix[torch.as_tensor(self.pool_ids)], k, batch_size)
        self.table = _TABLES[self.fingerprint]
        self._cache: dict[str, list[str]] = {}

    def _lookup(self, words: set[str]) -> None:
        new = sorted(words - self._cache.keys())
        for word, token in zip(new, _word_ids(self.tokenizer, new)):
            position = self._position.get(token)
            found = [] if position is None else [self.surfaces[j] for j in self.table[position]]
            self._cache[word] = [c for c in found if c.lower() != word.lower()]

    def candidates(self, texts: Sequence[str]) -> list[Spans]:
        """For each text, its replaceable words' spans with their neighbours (words without any are left out)."""
        spans = [word_spans(text) for text in texts]
        self._lookup({text[s:e] for text, found in zip(texts, spans) for s, e in found})
        return [[((s, e), self._cache[text[s:e]]) for s, e in found if self._cache[text[s:e]]]
                for text, found in zip(texts, spans)]


class MaskedLMCandidates:
    """A masked LM's k most likely whole-word tokens at a word's place, the word masked in its sentence."""

    def __init__(self, model, tokenizer=None, k: int = 15, batch_size: int = 64, max_length: int = 128, device=None):
        from transformers import AutoModelForMaskedLM, AutoTokenizer

        if isinstance(model, str):
            tokenizer = tokenizer if tokenizer is not None else AutoTokenizer.from_pretrained(model)
            model = AutoModelForMaskedLM.from_pretrained(model)
        if tokenizer is None or tokenizer.mask_token_id is None:
            raise ValueError("tokenizer: the masked LM's tokenizer with a mask token is needed (pass it, or give the LM as a path).")
        self.model = model.eval().to(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self.tokenizer, self.k, self.batch_size, self.max_length = tokenizer, k, batch_size, max_length
        self.fingerprint = fingerprint("masked_lm", weights_digest(model), tokenizer_digest(tokenizer), k, max_length)
        pool_ids, self.surfaces = whole_word_pool(tokenizer)
        self.allowed = torch.full((model.config.vocab_size,), -float("inf"))
        self.allowed[torch.as_tensor(pool_ids)] = 0.0
        self._surface = dict(zip(pool_ids.tolist(), self.surfaces))

    def _top_k(self, masked: list[str], words: list[str]) -> list[list[str]]:
        enc = self.tokenizer(masked, padding=True, truncation=True, max_length=self.max_length, return_tensors="pt")
        with torch.inference_mode():
            logits = self.model(**{k: v.to(self.model.device) for k, v in enc.items()}).logits.float().cpu()
        found = []
        for row, word in enumerate(words):
            places = (enc["input_ids"][row] == self.tokenizer.mask_token_id).nonzero()
            if len(places) == 0:  # the word was truncated away
                found.append([])
                continue
            scores = logits[row, places[0, 0]] + self.allowed
            top = scores.topk(min(self.k + 1, len(self._surface))).indices.tolist()
            names = [self._surface[i] for i in top if scores[i] > -float("inf")]
            found.append([c for c in names if c.lower() != word.lower()][: self.k])
        return found

    def candidates(self, texts: Sequence[str]) -> list[Spans]:
        """For each text, its replaceable words' spans with the LM's candidates (words without any are left out)."""
        places = [(t, span) for t, text in enumerate(texts) for span in word_spans(text)]
        masked = [texts[t][:s] + self.tokenizer.mask_token + texts[t][e:] for t, (s, e) in places]
        words = [texts[t][s:e] for t, (s, e) in places]
        found: list[list[str]] = []
        for start in range(0, len(places), self.batch_size):
            found += self._top_k(masked[start:start + self.batch_size], words[start:start + self.batch_size])
        out: list[Spans] = [[] for _ in texts]
        for (t, span), names in zip(places, found):
            if names:
                out[t].append((span, names))
        return out
