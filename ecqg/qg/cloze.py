"""A rule-based cloze-translation question generator (Lewis et al., ACL 2019, "Unsupervised Question Answering by
Cloze Translation", their rule-based baseline): pick an answer span in a sentence of the passage, cut out the clause
that holds it, replace the answer by a wh-phrase of its named-entity type, and move the wh-phrase to the front when
the answer opens the clause.

Why it exists: on 2 CPU cores the neural generators the repository can train (a MiniLM prefix LM, a few hundred
steps) write questions that are mostly not about their passage (few of their answers occur in it; many repeat a
word back to back), so a pre-training verdict on them measures noise. A cloze question is answerable from its
passage by construction (its answer is a span of it), never repeats a word the passage does not, and a conditioned
one asks about its entity by construction (the entity stays in the question; the answer is another span of a
sentence that mentions it). What it is not: fluent or abstractive. It copies the passage's wording (its
passage-word rate is near 1, above real questions'), which makes a question easier to match lexically than a real one.

Conditioning is the paper's: an unconditioned question may ask about any span of the passage; a conditioned one
must keep its conditioning entity (the passage's least-attended, stage 01) in the question. Both sample answers and
sentences with a seeded generator, so a replicate's seed draws its own set.

Registered as the generator architecture ``cloze`` (``qg.architecture: cloze``): it needs no ``qg.model`` and no
training, and saves as a one-file "checkpoint" (``cloze.json``: the rules' settings) so that stage 02's outputs,
loading and sampling stay those of every other generator.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar, Mapping, Sequence

from tqdm.auto import tqdm

from ecqg.qg.entities import find_mention, reference_key
from ecqg.qg.generators import Generator, register
from ecqg.runtime.models import load_spacy

CONFIG_FILE = "cloze.json"
VERSION = 1   # bump when a rule changes what a question looks like (it names the sampling journal)

# OntoNotes NER label -> wh-phrase (Lewis et al.'s type mapping, spelt out per label). "where" / "when" only open a
# clause; in place they read as the phrase after the bar.
WH = {
    "PERSON": ("who", "whom"), "NORP": ("what group", "what group"), "ORG": ("what organization", "what organization"),
    "GPE": ("where", "what place"), "LOC": ("where", "what place"), "FAC": ("what place", "what place"),
    "DATE": ("when", "what date"), "TIME": ("when", "what time"),
    "CARDINAL": ("how many", "how many"), "QUANTITY": ("how much", "how much"), "MONEY": ("how much", "how much"),
    "PERCENT": ("what percentage", "what percentage"), "ORDINAL": ("which", "which"),
    "EVENT": ("what event", "what event"), "WORK_OF_ART": ("what work", "what work"), "LAW": ("what law", "what law"),
    "LANGUAGE": ("what language", "what language"), "PRODUCT": ("what", "what"),
}
NOUN_PHRASE_WH = ("what", "what")          # an answer that is a noun chunk with no entity label
_YEAR = re.compile(r"^(in\s+)?\d{3,4}s?$", re.IGNORECASE)
_SENTENCE_END = re.compile(r"[.!?][\"'\u201d)\]]*$")
DROP_REASONS = ("no_answer_candidate",)


@dataclass(frozen=True)
class ClozeRules:
    """The rules' settings (what ``cloze.json`` keeps)."""

    min_clause_words: int = 5        # a clause shorter than this (answer included) asks too little
    max_clause_words: int = 28       # longer clauses are cut to the answer's verb phrase
    noun_chunks: bool = True         # noun chunks as answers where a sentence has no usable named entity
    version: int = VERSION

    @property
    def digest(self) -> str:
        return hashlib.sha1(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:16]


@dataclass
class ClozeModel:
    """The "model" of the cloze architecture: its rules and the spaCy pipeline it parses with."""

    rules: ClozeRules
    spacy_ref: str = "bundled:en_core_web_sm"
    config: ClassVar[None] = None         # no transformers config (the other architectures' ``handles`` read one)

    def nlp(self):
        return load_spacy(self.spacy_ref)

    def save_pretrained(self, out: str | Path) -> None:
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        (out / CONFIG_FILE).write_text(json.dumps({"architecture": "cloze", "spacy": self.spacy_ref,
                                                   "rules": asdict(self.rules)}, indent=1) + "\n", encoding="utf-8")

    @classmethod
    def from_pretrained(cls, path: str | Path) -> "ClozeModel":
        file = Path(path) / CONFIG_FILE
        try:
            saved = json.loads(file.read_text(encoding="utf-8"))
            return cls(ClozeRules(**saved["rules"]), saved["spacy"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{file}: not a cloze generator's settings ({exc})") from None


def is_cloze_checkpoint(path: str | Path) -> bool:
    return (Path(path) / CONFIG_FILE).is_file()


# ------------------------------------------------------------------------------------------------ the rules


def _wh_phrase(label: str | None, text: str, fronted: bool) -> str:
    front, in_place = WH.get(label, NOUN_PHRASE_WH) if label else NOUN_PHRASE_WH
    if label == "DATE" and _YEAR.match(text.strip()):
        return "when" if fronted else "what year"
    return front if fronted else in_place


def _clause(span, rules: ClozeRules):
    """The tokens a question is built from: the answer's sentence, or where that is long, the subtree of the verb
    that governs the answer (the nearest verb or auxiliary above it); None where both are far too long."""
    sent = span.sent
    if len(sent) <= rules.max_clause_words:
        return sent
    head = span.root
    while head.head.i != head.i and head.pos_ not in ("VERB", "AUX"):     # spaCy makes a new Token per access
        head = head.head
    lo, hi = head.left_edge.i, head.right_edge.i + 1
    lo, hi = min(lo, span.start), max(hi, span.end)
    if hi - lo > rules.max_clause_words:           # still long: the sentence, if it is not far longer
        return sent if len(sent) <= 2 * rules.max_clause_words else None
    return span.doc[lo:hi]


def _question(span, label: str | None, rules: ClozeRules) -> str | None:
    """The cloze question for answer ``span`` (a spaCy span), or None when its clause asks too little."""
    clause = _clause(span, rules)
    if clause is None:
        return None
    tokens = [t for t in clause]
    while tokens and (tokens[-1].is_punct or tokens[-1].is_space):
        tokens.pop()
    while tokens and tokens[0].i < span.start and (tokens[0].is_punct or tokens[0].tag_ in ("CC",)):
        tokens.pop(0)
    if not tokens or len(tokens) < rules.min_clause_words:
        return None
    before = [t for t in tokens if t.i < span.start]
    after = [t for t in tokens if t.i >= span.end]
    fronted = not before
    # a determiner right before the answer belongs to it ("the 1990s" -> "what year", not "the what year")
    if before and before[-1].tag_ == "DT" and before[-1].head.i >= span.start:
        before = before[:-1]
        fronted = not before
    wh = _wh_phrase(label, span.text, fronted)
    words = [t.text_with_ws for t in before] + [wh + (" " if after else "")] + [t.text_with_ws for t in after]
    text = re.sub(r"\s+", " ", "".join(words)).strip()
    text = re.sub(r"\s+([,.;:!?)]|'s\b)", r"\1", text).rstrip(",;: ")
    if len(text.split()) < rules.min_clause_words:
        return None
    return text[0].upper() + text[1:] + "?"


def whole_sentence(sent) -> bool:
    """A sentence the passage holds whole: it opens with a capital or a digit and closes with end punctuation
    (a 100-word passage usually starts and ends mid-sentence: a question cut from there lacks its subject)."""
    text = sent.text.strip()
    return bool(text) and (text[0].isupper() or text[0].isdigit()) and bool(_SENTENCE_END.search(text))


def _usable(span) -> bool:
    """An answer span in a whole sentence, not inside parentheses (a bracketed conversion or gloss asks nothing)."""
    doc = span.doc
    before = doc[span.start - 1].text if span.start > 0 else ""
    after = doc[span.end].text if span.end < len(doc) else ""
    return whole_sentence(span.sent) and before != "(" and after != ")"


def _candidates(doc, rules: ClozeRules, avoid: tuple[int, int] | None = None) -> list[tuple[Any, str | None]]:
    """Answer spans of a parsed passage: its named entities, and (``rules.noun_chunks``) the noun chunks of
    sentences that have none, never overlapping ``avoid`` (the conditioning entity's characters), never a pronoun."""
    def clear(span) -> bool:
        if avoid is None:
            return True
        return span.end_char <= avoid[0] or span.start_char >= avoid[1]

    out = [(e, e.label_) for e in doc.ents if clear(e) and e.text.strip() and _usable(e)]
    if rules.noun_chunks:
        with_entity = {e.sent.start for e, _ in out}
        for chunk in doc.noun_chunks:
            if chunk.sent.start in with_entity or not clear(chunk):
                continue
            if all(t.is_stop or t.pos_ == "PRON" or t.is_punct for t in chunk) or not _usable(chunk):
                continue
            out.append((chunk, None))
    return out


def questions_for(doc, entity: str | None, entity_start: int | None, rng: random.Random, samples: int,
                  rules: ClozeRules) -> list[dict]:
    """Up to ``samples`` distinct (question, answer, answer_start) for one parsed passage; conditioned on ``entity``
    (at character ``entity_start``, or its first mention) when given: the answer is a span of a sentence that
    mentions the entity, and the question keeps the entity."""
    avoid = None
    if entity:
        start = entity_start if entity_start is not None else find_mention(doc.text, entity)
        if start is None:
            return []
        avoid = (start, start + len(entity))
    candidates = _candidates(doc, rules, avoid)
    if entity:
        sentence = next((s for s in doc.sents if s.start_char <= avoid[0] < s.end_char), None)
        candidates = [(c, label) for c, label in candidates if sentence is not None and c.sent == sentence]
    rng.shuffle(candidates)
    out, seen = [], set()
    for span, label in candidates:
        question = _question(span, label, rules)
        if question is None or question.casefold() in seen:
            continue
        if entity and find_mention(question, entity) is None:
            continue                      # the clause cut lost the entity
        seen.add(question.casefold())
        out.append({"question": question, "answer": span.text.strip(), "answer_start": span.start_char,
                    "answer_label": label})
        if len(out) == samples:
            break
    return out


# ------------------------------------------------------------------------------------------------ the architecture


@register
class Cloze(Generator):
    """Rule-based cloze translation: no weights, no training; ``sample_records`` writes the questions."""

    kind: ClassVar[str] = "cloze"
    builds_from_encoder: ClassVar[bool] = False
    rule_based: ClassVar[bool] = True
    description: ClassVar[str] = (
        "rule-based cloze translation, Lewis et al. (2019)'s identity-mapping baseline: a sentence of the passage "
        "with its answer span replaced in place by a wh-phrase of the span's spaCy type (no clause movement, no "
        "paraphrase), the conditioning entity kept in a conditioned question")
    # the answer is a span of the passage; a conditioned question is a sentence holding its entity; a sentence of
    # the passage repeats a word back to back only where the passage does
    by_construction: ClassVar[frozenset[str]] = frozenset({"answer_in_passage", "about_entity", "repeated_word"})
    construction_note: ClassVar[str] = (
        "wh-type agreement only weakly: the generator itself chose the wh-phrase from spaCy's label of the answer in "
        "context, the check reads spaCy's label of the answer alone")

    @classmethod
    def recognises(cls, config) -> bool:
        return False                      # no transformers config: :func:`is_cloze_checkpoint` finds it

    @classmethod
    def handles(cls, model) -> bool:
        return isinstance(model, ClozeModel)

    @classmethod
    def build(cls, spacy_ref: str = "bundled:en_core_web_sm") -> ClozeModel:
        return ClozeModel(ClozeRules(), spacy_ref)

    @classmethod
    def sample_records(cls, model: ClozeModel, inputs: Sequence[Mapping[str, Any]], *, seed: int, samples: int,
                       conditioned: bool, progress: bool = True, batch_size: int = 64) -> tuple[list[dict], Counter]:
        """Records in the neural sampler's schema (:func:`ecqg.qg.sampling.generate_questions`) plus
        ``answer_start``; ``sample_score`` is None (no model scores them). Seeded per input (its passage and
        entity), so a record does not depend on which other inputs are in the batch."""
        generator = "con" if conditioned else "uncon"
        nlp = model.nlp()
        records: list[dict] = []
        drops: Counter = Counter()
        texts = [inp["text"] for inp in inputs]
        bar = tqdm(total=len(inputs), desc=f"QG cloze ({generator})", disable=not progress)
        for inp, doc in zip(inputs, nlp.pipe(texts, batch_size=batch_size)):
            if conditioned and not inp.get("entity"):
                raise ValueError(f"input for passage {inp.get('passage_id')!r} has no entity for the con generator")
            key = reference_key(inp["passage_id"], inp.get("entity") if conditioned else None)
            rng = random.Random(f"{seed}-{model.rules.digest}-{key}")
            found = questions_for(doc, inp.get("entity") if conditioned else None,
                                  inp.get("entity_start") if conditioned else None, rng, samples, model.rules)
            drops["generated"] += samples
            drops["no_answer_candidate"] += samples - len(found)
            tag = hashlib.sha1(key.encode()).hexdigest()[:10]
            for s, q in enumerate(found):
                records.append({"id": f"qg-{generator}-{tag}-{s}", "passage_id": inp["passage_id"],
                                "entity": inp.get("entity") if conditioned else None,
                                "entity_label": inp.get("entity_label") if conditioned else None,
                                "question": q["question"], "answer": q["answer"], "answer_start": q["answer_start"],
                                "generator": generator, "sample_score": None, "sample": s})
            bar.update(1)
        bar.close()
        return records, drops
