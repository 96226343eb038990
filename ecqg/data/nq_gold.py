"""The two published files of NQ-test gold passages, and the detokenizer that brings Power-of-Noise text to plain style.

* Power of Noise (florin-git/The-Power-of-Noise ``data/test_dataset.json``): a JSON list of ``{example_id, question,
  answers, text, idx_gold_in_corpus}``; ``text`` is the NQ long answer, *space-tokenized* the NQ way
  (``Röntgen , of Germany``, ``1940 -- 1942``, ``Skłodowska - Curie``, ``Rod Cameron 's``) and it has no title.
* Lost in the Middle (nelson-liu/lost-in-the-middle ``qa_data/nq-open-oracle.jsonl.gz``): one ``{question, answers,
  ctxs: [{title, text, hasanswer, isgold}], nq_annotated_gold: {title, long_answer, chunked_long_answer,
  short_answers}}`` per line; clean text. ``ctxs[0]`` is the gold passage as LitM used it (a <=100-word chunk of the
  long answer that contains the answer); ``nq_annotated_gold.long_answer`` is the whole long answer.

How they relate (checked on the real files): both are keyed by the NQ-open question text; 2,605 questions are in both.
For 1,513 of those the PoN text is the same passage as LitM's ``long_answer`` (equal up to tokenization spaces and
``--`` for en/em dashes, see :func:`ecqg.data.records.text_key`); for the rest PoN holds another chunk of the same NQ
annotated document. :func:`detokenize` is used only where no clean LitM text of the same passage exists.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterator

from ecqg.data.fields import require, require_nonempty_str, require_str_list
from ecqg.core.errors import DataFormatError
from ecqg.core.io import read_json, read_jsonl


def read_power_of_noise(path: str | Path) -> Iterator[dict[str, Any]]:
    """Yield ``{"question", "answers", "text", "example_id", "idx_gold_in_corpus"}`` from PoN's test_dataset.json."""
    data = read_json(path, list, "a JSON list")
    for i, rec in enumerate(data):
        yield {
            "question": require_nonempty_str(rec, "question", path, i).strip(),
            "answers": require_str_list(rec, "answers", path, i, nonempty=True),
            "text": require_nonempty_str(rec, "text", path, i),
            "example_id": str(require(rec, "example_id", (int, str), path, i)),
            "idx_gold_in_corpus": require(rec, "idx_gold_in_corpus", int, path, i),
        }


def read_lost_in_the_middle(path: str | Path) -> Iterator[dict[str, Any]]:
    """Yield ``{"question", "answers", "gold_title", "gold_text", "long_answer", "long_answer_title"}``.

    ``gold_*`` come from the ctx marked ``isgold`` (exactly one is required); ``long_answer*`` from
    ``nq_annotated_gold``.
    """
    for line_no, rec in read_jsonl(path):
        where = f"line {line_no}"
        question = require_nonempty_str(rec, "question", path, where).strip()
        answers = require_str_list(rec, "answers", path, where, nonempty=True)
        ctxs = require(rec, "ctxs", list, path, where)
        gold = []
        for j, ctx in enumerate(ctxs):
            cw = f"{where}, ctxs[{j}]"
            require(ctx, "title", str, path, cw)
            require_nonempty_str(ctx, "text", path, cw)
            if require(ctx, "isgold", bool, path, cw, optional=True, default=False):
                gold.append(ctx)
        if len(gold) != 1:
            raise DataFormatError(path, where, "ctxs", f"expected exactly one ctx with isgold=true, found {len(gold)}")
        ann = require(rec, "nq_annotated_gold", dict, path, where)
        aw = f"{where}, nq_annotated_gold"
        yield {
            "question": question,
            "answers": answers,
            "gold_title": gold[0]["title"],
            "gold_text": gold[0]["text"],
            "long_answer": require_nonempty_str(ann, "long_answer", path, aw),
            "long_answer_title": require(ann, "title", str, path, aw),
        }


# --------------------------------------------------------------------------------------------------------------------
# detokenizer for NQ's space-tokenized text

_NO_SPACE_BEFORE = re.compile(r" ([,.;:!?%)\]}]|'s\b|'S\b|n't\b|'re\b|'ve\b|'ll\b|'d\b|'m\b|’s\b)")
_NO_SPACE_AFTER = re.compile(r"([(\[{$£€]) ")


def detokenize(text: str) -> str:
    """Undo NQ/PTB-style tokenization spaces, conservatively.

    Rules, in order: ``a -- b`` becomes ``a–b`` between digits and ``a—b`` elsewhere (Wikipedia's dashes, which NQ
    wrote as ``--``); ``1902 - 03`` (digits) becomes ``1902–03`` (Wikipedia's range/score en dash); ``a - b`` between
    other letters/digits becomes ``a-b``; a plural possessive ``companies ' shares`` becomes ``companies' shares``; no space before ``, . ; : ! ? % ) ] }`` and
    the clitics ``'s n't 're 've 'll 'd 'm``; no space after ``( [ { $ £ €``; straight double quotes are paired left
    to right and lose the inner space (``" Foo "`` -> ``"Foo"``). Anything else is left as it is; the result is then
    brought to the bundle's text style. On the 1,513 PoN passages that have a clean LitM twin the rules reproduce
    the clean text exactly for most (the bundle manifest reports the rate).
    """
    t = " ".join(text.split())
    t = re.sub(r"(?<=\d) -- (?=\d)", "\u2013", t)
    t = t.replace(" -- ", "\u2014")
    t = re.sub(r"(?<=\d) - (?=\d)", "\u2013", t)
    t = re.sub(r"(?<=\w) - (?=\w)", "-", t)
    t = re.sub(r"(?<=s) ' (?=\w)", "' ", t)
    t = _NO_SPACE_BEFORE.sub(r"\1", t)
    t = _NO_SPACE_AFTER.sub(r"\1", t)
    # pair straight double quotes
    parts = t.split('"')
    if len(parts) > 1 and len(parts) % 2 == 1:
        out = [parts[0]]
        for k, part in enumerate(parts[1:], start=1):
            if k % 2 == 1:  # text inside the quotes follows an opening quote
                out.append('"' + part.lstrip(" "))
            else:  # text after a closing quote
                out[-1] = out[-1].rstrip(" ")
                out.append('"' + part)
        t = "".join(out)
    return " ".join(t.split())
