"""Trade-R1 §3.5.1 stage 1: retrieval-augmented evidence extraction.

For each selected asset, hard string matching finds the context chunks that mention it; those
chunks are then ranked by similarity to the model's output and the top-k kept as evidence E.
Similarity: a sentence-transformers model when a *local* path is given (the paper uses BGE-M3),
else BM25+ (rank-bm25 ``BM25Plus``) over lower-cased word tokens, the deterministic offline
default (Okapi BM25 gives every term idf 0 when a candidate set has 2 chunks and one matches,
which is common after hard matching; BM25+ keeps idf positive).
Choice: if no chunk mentions any selected asset, all chunks are ranked (so macro/sector evidence
can still support a decision on an asset the context names only indirectly).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol

import numpy as np

_TOKEN = re.compile(r"[a-z0-9]+(?:\.[0-9]+)?%?")


def tokenize(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


def chunk(context: str, max_words: int = 60) -> list[str]:
    """Non-empty lines, long lines split into pieces of at most ``max_words`` words."""
    out = []
    for line in context.splitlines():
        w = line.split()
        out += [" ".join(w[i:i + max_words]) for i in range(0, len(w), max_words)]
    return out


def mentions(chunks: Sequence[str], assets: Sequence[str]) -> list[int]:
    """Indices of chunks naming any asset as a whole word (case-insensitive)."""
    if not assets:
        return []
    pat = re.compile("|".join(rf"(?<![\w$]){re.escape(a)}(?!\w)" for a in assets), re.I)
    return [i for i, c in enumerate(chunks) if pat.search(c)]


class Embedder(Protocol):
    def encode(self, texts: list[str]) -> np.ndarray: ...  # [n, d]


class SentenceTransformerEmbedder:
    """A local sentence-transformers model (e.g. a downloaded BGE-M3 directory); never the hub."""

    def __init__(self, path: str):
        from sentence_transformers import SentenceTransformer

        self.model = SentenceTransformer(path, local_files_only=True)

    def encode(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self.model.encode(texts, normalize_embeddings=True))


def similarity(query: str, docs: Sequence[str], embedder: Embedder | None = None) -> np.ndarray:
    """[len(docs)] similarity of each doc to the query (BM25 scores, or cosine with an embedder)."""
    if not docs:
        return np.zeros(0)
    if embedder is not None:
        e = embedder.encode([query, *docs])
        e = e / np.linalg.norm(e, axis=1, keepdims=True).clip(1e-12)
        return e[1:] @ e[0]
    from rank_bm25 import BM25Plus

    toks = [tokenize(d) or ["<empty>"] for d in docs]
    return np.asarray(BM25Plus(toks).get_scores(tokenize(query)))


def retrieve(context: str, assets: Sequence[str], output: str, k: int = 5,
             embedder: Embedder | None = None) -> list[str]:
    """Top-k evidence chunks for the selected ``assets``, ranked by similarity to ``output``.
    Ties keep context order (stable sort), so the result is deterministic."""
    chunks = chunk(context)
    cand = mentions(chunks, assets) or list(range(len(chunks)))
    docs = [chunks[i] for i in cand]
    scores = similarity(output, docs, embedder)
    order = np.argsort(-scores, kind="stable")[:k]
    return [docs[i] for i in order]
