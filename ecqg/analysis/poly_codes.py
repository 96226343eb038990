"""What Poly-DPR's K code vectors do (Luo et al. 2022, issue 17 item 5): where each code attends, which code wins at
retrieval, and whether the codes collapsed into one.

* ``code_attention_table``: per passage and code, the entropy (nats) of the code's attention over the text pieces and
  the share of it on sentences 2.. (the measures notebook 06 takes of DPR's [CLS] attention), and the same for the
  mean of the K codes' attention (code ``"mean"``);
* ``code_wins``: for each question and its gold passage, the code whose passage vector scores highest (the one the
  inference score max_k q . v_k uses), counted per code;
* ``code_similarity``: mean pairwise cosine of the K learned codes, and of the K pooled vectors within a passage; near
  1 means the codes collapsed (K vectors that say the same thing).

Library code: notebooks and the pipeline call it; nothing here reads params or files.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import torch

from ecqg.analysis.attention import TEXT, attention_entropy, sentence_shares
from ecqg.runtime.models import inference
from ecqg.retrieval import dense


def _passage_batches(model, passages: Sequence[Mapping], batch_size: int):
    """Tokenised passages with offsets and sequence ids, as the retriever reads them (title, text; text cut)."""
    for start in range(0, len(passages), batch_size):
        chunk = passages[start:start + batch_size]
        enc = model.tokenizer([p.get("title") or "" for p in chunk], [p["text"] for p in chunk], padding=True,
                              truncation="only_second", max_length=model.config.passage_max_length,
                              return_offsets_mapping=True, return_tensors="pt")
        offsets = enc.pop("offset_mapping").numpy()
        seq_ids = [np.array([-1 if s is None else s for s in enc.sequence_ids(i)]) for i in range(len(chunk))]
        yield chunk, dict(enc), offsets, seq_ids


def code_attention(model, passages: Sequence[Mapping], batch_size: int = 32):
    """Per passage: (the codes' attention ``(K, n)``, offsets ``(n, 2)``, sequence ids ``(n,)``), padding dropped."""
    out = []
    with inference(model) as device:
        for chunk, batch, offsets, seq_ids in _passage_batches(model, passages, batch_size):
            batch = {k: v.to(device) for k, v in batch.items()}
            hidden = model.passage_encoder(**batch).last_hidden_state
            attn = model.code_attention(hidden, model.attended_mask(batch)).float().cpu().numpy()
            lengths = batch["attention_mask"].sum(1).tolist()
            for i in range(len(chunk)):
                n = int(lengths[i])
                out.append((attn[i, :, :n], offsets[i, :n], seq_ids[i][:n]))
    return out


def code_attention_table(model, passages: Sequence[Mapping], batch_size: int = 32) -> pd.DataFrame:
    """One row per passage and code (0..K-1, and ``"mean"`` for the codes' mean attention): ``entropy`` over the
    text pieces and ``later_sentence_share`` (attention on sentences 2..; needs ``sentences``, a list of (start, end)
    character spans of the passage's text, else NaN)."""
    rows = []
    for passage, (attn, offsets, seq_ids) in zip(passages, code_attention(model, passages, batch_size)):
        text_mask = seq_ids == TEXT
        sentences = [tuple(s) for s in passage.get("sentences") or []]
        for code, weights in [*enumerate(attn), ("mean", attn.mean(axis=0))]:
            shares = sentence_shares(weights, offsets, seq_ids, sentences)
            rows.append({"passage_id": passage.get("id"), "code": code,
                         "entropy": attention_entropy(weights, text_mask),
                         "later_sentence_share": 1.0 - shares.first_sentence_share if sentences else float("nan")})
    return pd.DataFrame(rows)


def code_wins(model, questions: Sequence[str], passages: Sequence[Mapping], batch_size: int = 32) -> np.ndarray:
    """How often each code gives the best score of a question against its passage (``questions[i]`` with
    ``passages[i]``, each with an ``id``): counts of length K."""
    if len(questions) != len(passages):
        raise ValueError(f"{len(questions)} questions for {len(passages)} passages; pair them one to one")
    q = dense.encode_queries(model, list(questions), batch_size=batch_size, progress=False)
    unique = list({str(p["id"]): p for p in passages}.values())         # a passage asked about twice: encoded once
    ids, vectors = dense.encode_passages(model, unique, batch_size=batch_size, progress=False)
    row = {pid: i for i, pid in enumerate(ids)}
    p = vectors[[row[str(x["id"])] for x in passages]].reshape(len(passages), model.vectors_per_passage, -1)
    best = np.einsum("bd,bkd->bk", q, p).argmax(axis=-1)
    return np.bincount(best, minlength=model.vectors_per_passage).astype(np.int64)


def _mean_offdiagonal_cosine(vectors: torch.Tensor) -> float:
    unit = torch.nn.functional.normalize(vectors.float(), dim=-1)
    sim = unit @ unit.transpose(-1, -2)
    k = sim.shape[-1]
    if k < 2:
        return float("nan")
    return float(((sim.sum(dim=(-1, -2)) - sim.diagonal(dim1=-2, dim2=-1).sum(-1)) / (k * (k - 1))).mean())


def code_similarity(model, passages: Sequence[Mapping], batch_size: int = 32) -> dict[str, float]:
    """``codes``: mean pairwise cosine of the learned codes; ``passage_vectors``: of the K pooled vectors within a
    passage, averaged over passages (NaN for K = 1)."""
    _, vectors = dense.encode_passages(model, passages, batch_size=batch_size, progress=False)
    vectors = torch.from_numpy(vectors).reshape(len(vectors), model.vectors_per_passage, -1)
    return {"codes": _mean_offdiagonal_cosine(model.codes.detach()),
            "passage_vectors": _mean_offdiagonal_cosine(vectors) if len(vectors) else float("nan")}
