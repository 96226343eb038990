"""The masked-LM text: the bundle's passages (title and text, as the retriever reads them), a held-out share for
the loss curve, and a digest that names exactly which text a base was built from.

Why the bundle's corpus alone: it already holds all the Wikipedia text available offline (the Vital-Articles leads,
the psgs_w100 / wiki-2018 samples, the NQ gold passages, the SQuAD / XQuAD paragraphs); questions of any split are
never part of it, so no test question is seen. Like BERT's Wikipedia, it contains the passages the retrievers are
later tested on: masked-LM training on a passage teaches no question about it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ecqg.data.records import read_corpus


@dataclass(frozen=True)
class MlmText:
    """Passages split into the rows the model trains on and the rows its held-out loss is measured on."""

    titles: tuple[str, ...]
    texts: tuple[str, ...]
    held_out: tuple[int, ...]           # row numbers of the held-out passages, sorted
    digest: str                         # sha256 over the (title, text) rows in order
    source: str

    @property
    def train_rows(self) -> list[int]:
        out = set(self.held_out)
        return [i for i in range(len(self.texts)) if i not in out]

    def words(self) -> int:
        return sum(len(t.split()) + len(x.split()) for t, x in zip(self.titles, self.texts))


def text_digest(titles: Sequence[str], texts: Sequence[str]) -> str:
    h = hashlib.sha256()
    for title, text in zip(titles, texts):
        h.update(title.encode("utf-8") + b"\x1f" + text.encode("utf-8") + b"\x1e")
    return h.hexdigest()


def load_text(corpus: str | Path, held_out_fraction: float, seed: int, limit: int | None = None) -> MlmText:
    """The corpus file's passages (``ecqg.data.records.read_corpus``: validated, named errors), the first ``limit``
    when given (tests), with ``held_out_fraction`` of them drawn for the held-out loss by ``seed``."""
    if not 0.0 <= held_out_fraction < 1.0:
        raise ValueError(f"held_out_fraction must be in [0, 1), got {held_out_fraction}")
    titles, texts = [], []
    for passage in read_corpus(corpus):
        titles.append(passage["title"] or "")
        texts.append(passage["text"])
        if limit is not None and len(texts) >= limit:
            break
    if not texts:
        raise ValueError(f"{corpus}: no passages to pre-train on")
    n_held = int(round(held_out_fraction * len(texts)))
    held = np.sort(np.random.default_rng(seed).choice(len(texts), size=n_held, replace=False)) if n_held else []
    return MlmText(tuple(titles), tuple(texts), tuple(int(i) for i in held), text_digest(titles, texts),
                   str(corpus))
