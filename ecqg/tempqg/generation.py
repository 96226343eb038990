"""TempQG's template-conditioned question generator (Luo et al., AAAI 2022, §4): it reads a template and a passage
and writes a question of the template's form about the passage.

The source is ``template <sep> title <sep> passage window``: the two-segment form of the entity-conditioned
generator's ``segment`` marking, with the template where the entity would be (first, so truncation never cuts it).
It is made by handing :mod:`ecqg.qg`'s own formatter a title that starts with the template (:func:`templated`), so
cropping around the answer, the target (``answer <sep> question``), training, sampling and parsing are the
unconditioned generator's code, unchanged; only the records are relabelled (``generator: tempqg``, the template in
``template``).
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Mapping, Sequence

from ecqg.core.schemes import TEMPQG
from ecqg.qg.format import SEPARATOR, build_examples


def templated(passage: Mapping[str, str], template: str) -> dict[str, str]:
    """The passage with the template in front of its title: what the unconditioned formatter turns into
    ``template <sep> title <sep> text``."""
    title = passage.get("title") or ""
    return {"title": f"{template} {SEPARATOR} {title}" if title else template, "text": passage["text"]}


def training_examples(triples: Sequence[Mapping[str, Any]], passages: Mapping[str, Mapping[str, str]],
                      templates: Sequence[str], window_words: int | None) -> tuple[list[dict], Counter]:
    """``[{"id", "source", "target", "passage_id", "template"}]``: each gold triple with its question's template
    (``templates[i]`` belongs to ``triples[i]``), the passage window cropped around the answer as for the
    unconditioned generator."""
    if len(templates) != len(triples):
        raise ValueError(f"{len(triples)} triples but {len(templates)} templates")
    keyed, rows = {}, []
    for i, (triple, template) in enumerate(zip(triples, templates)):
        pid = triple["passage_id"]
        if pid not in passages:
            raise KeyError(f"gold triple {triple['id']!r}: passage_id {pid!r} is not in the corpus")
        key = f"{pid}\x00{i}"             # one templated copy of the passage per triple
        keyed[key] = templated(passages[pid], template)
        rows.append({**triple, "passage_id": key})
    examples, counts = build_examples(rows, keyed, "uncon", window_words=window_words, progress=False)
    for example, triple, template in zip(examples, triples, templates):
        example.update(passage_id=triple["passage_id"], template=template)
    return examples, counts


def sampling_inputs(passages: Sequence[tuple[str, Mapping[str, str]]], templates: Sequence[str]) -> list[dict]:
    """One generation input per ``(passage id, passage)`` with its template. The template also stands in the input's
    ``entity`` field, which only keys the input (its sampling seed) for the unconditioned formatter."""
    if len(templates) != len(passages):
        raise ValueError(f"{len(passages)} passages but {len(templates)} templates")
    return [{"passage_id": pid, **templated(passage, template), "entity": template}
            for (pid, passage), template in zip(passages, templates)]


def as_tempqg(records: Sequence[Mapping[str, Any]]) -> list[dict]:
    """Sampled records relabelled: ``generator: tempqg``, the template moved from ``entity`` to ``template``, ids
    ``qg-tempqg-...``."""
    out = []
    for rec in records:
        rec = dict(rec)
        rec["template"] = rec.pop("entity")
        rec.update(entity=None, entity_label=None, generator=TEMPQG.name,
                   id=rec["id"].replace("qg-uncon-", f"qg-{TEMPQG.name}-", 1))
        out.append(rec)
    return out
