"""TempQG's template selector (Luo et al., AAAI 2022, §4): a retriever trained on (passage -> template) pairs picks
the template a new passage's question should follow. Luo et al. use Poly-DPR, which this repository has
(:mod:`ecqg.retrieval.polydpr`); any registered retriever works.

The passage is the query (``title text``; give the retriever a ``query_max_length`` that holds a passage) and each
cluster's template a document. Training is the pipeline's own contrastive loop (:mod:`ecqg.retrieval.train`,
in-batch negatives: the other pairs' templates), so the selector saves and loads like every retriever. Two passages
of one batch may share a template; their pairs then count each other's positive as a negative, as DPR's in-batch
training does for duplicate passages.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from ecqg.tempqg.templates import Templates

TEMPLATE_ID = "template-{}"


def passage_query(passage: Mapping) -> str:
    """The selector's query for a passage: its title and text."""
    return " ".join(part for part in (passage.get("title") or "", passage["text"]) if part)


def template_documents(templates: Sequence[str]) -> list[dict]:
    return [{"id": TEMPLATE_ID.format(c), "title": "", "text": t} for c, t in enumerate(templates)]


def training_pairs(questions: Sequence[Mapping], passages: Mapping[str, Mapping], templates: Templates) -> list[dict]:
    """One DPR-format record per training question: its passage as the query, its cluster's template as the
    positive (question ``i`` of ``templates`` is ``questions[i]``, which names its ``passage_id``)."""
    if len(questions) != len(templates.of_question):
        raise ValueError(f"{len(questions)} questions but templates for {len(templates.of_question)}")
    records = []
    for question, cluster in zip(questions, templates.of_question):
        passage = passages.get(str(question["passage_id"]))
        if passage is None:
            raise ValueError(f"question {question.get('id')!r}: passage {question['passage_id']!r} is not in the "
                             "passages given to the template selector")
        records.append({"id": question.get("id"), "question": passage_query(passage), "answers": [],
                        "template": cluster,
                        "positive_ctxs": [{"passage_id": TEMPLATE_ID.format(cluster), "title": "",
                                           "text": templates.representatives[cluster]}],
                        "hard_negative_ctxs": []})
    return records


def select(model, passages: Sequence[Mapping], templates: Sequence[str], k: int = 1, batch_size: int = 64,
           autocast: str | None = None) -> np.ndarray:
    """``(len(passages), k)``: the indices of the ``k`` best templates for each passage, best first (the
    retriever's own score: the best code for Poly-DPR)."""
    # torch loads when templates are selected; the template code imports without it
    import torch

    # dense brings FAISS, kept out for the same reason
    from ecqg.retrieval import dense

    _, vectors = dense.encode_passages(model, template_documents(templates), batch_size=batch_size, progress=False,
                                       autocast=autocast)
    queries = dense.encode_queries(model, [passage_query(p) for p in passages], batch_size=batch_size,
                                   progress=False, autocast=autocast)
    scores = model.scores(torch.from_numpy(queries), torch.from_numpy(vectors))
    return scores.topk(min(k, len(templates)), dim=1).indices.numpy()


def accuracy(model, records: Sequence[Mapping], templates: Sequence[str], ks: Sequence[int] = (1, 5),
             batch_size: int = 64, autocast: str | None = None) -> dict:
    """Share of held-out pairs (:func:`training_pairs` records) whose own template is among the ``k`` selected;
    ``autocast`` as :func:`select`'s, so the figure measures the selector as it is used."""
    if not records:
        raise ValueError("no held-out pairs to measure the template selector on")
    passages = [{"title": "", "text": r["question"]} for r in records]
    top = select(model, passages, templates, k=max(ks), batch_size=batch_size, autocast=autocast)
    gold = np.array([r["template"] for r in records])[:, None]
    hits = top == gold
    return {"n": len(records), "templates": len(templates),
            **{f"top{k}": round(float(hits[:, :k].any(axis=1).mean()), 4) for k in ks}}
