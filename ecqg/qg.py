"""Question generation (DESIGN.md §1 step 2): training examples, generator build, training, sampling, evaluation.

Two generators share one code path and differ only in the source text:

* unconditioned (``uncon``): ``title <sep> passage`` -> ``answer <sep> question``;
* entity-conditioned (``con``): the same, with the conditioning entity marked in the source.

Why these choices:

* The conditioning entity of a gold triple is a spaCy noun chunk of its question that also occurs in the passage
  (case-insensitive, whole words): objects / prepositional objects first, then other non-subject chunks, then subjects;
  the wh-phrase ("which team"), pronouns and stop-word-only chunks never. Triples without one are counted by reason
  (``no_noun_chunk``, ``only_wh_or_pronoun``, ``not_in_passage``) and train only the unconditioned generator.
* Entity marking: ``markers`` puts ``<hl>`` around the entity's occurrence in the passage (the highlight convention
  of answer-aware QG); ``segment`` prepends ``entity <sep>`` to the source (first, so truncation never cuts it).
  Measured on the mini data (bundled MiniLM BERT2BERT, source 128 tokens / 80-word window, 30 steps x 8, lr 3e-4,
  32 held-out inputs x 3 samples): markers BLEU-4 1.09 / ROUGE-L 19.6 / kept 58%, segment 0.76 / 19.8 / 49%, entity
  mention 0% for both -- a tie at this (tiny) budget, so ``markers`` is the default: it marks the very occurrence the
  attention study picked and does not repeat the entity text. Tying encoder and decoder weights gave the same loss
  (6.13 vs 6.15) and breaks ``save_pretrained`` in transformers 5 (shared tensors), so weights are not tied.
* Target = ``answer <sep> question`` (answer-aware, as in the paper); :func:`parse_target` reads it back and drops
  malformed outputs with a counted reason, never an exception.
* Entity placeholder (``qg.entity_placeholder``, the offline default; off in the paper profile): in the conditioned
  targets the entity's mention in the gold question is replaced by one new token ``[ENT]``, and a generated ``[ENT]``
  is replaced by the entity again (delexicalisation, as in slot-filling NLG). Why: a BART learns to copy the marked
  entity; the MiniLM BERT2BERT does not in a CPU budget (held-out entity mention 0.7% after 200 steps, 0.66% after
  600; a decoder-only MiniLM prefix LM 2.7%). Emitting one learned token is easy to learn; the records say which
  mentions came through the placeholder (``entity_via_placeholder``), so the mention rate is never mistaken for
  copying.
* Offline there are no seq2seq weights, so an encoder-only checkpoint (``bundled:minilm``, ``bert-base-uncased``)
  becomes a generator of ``qg.architecture``: ``prefix_lm`` (the default; :mod:`ecqg.prefix_lm`: source and target
  in one pre-trained BERT, UniLM-style) or ``bert2bert`` (an ``EncoderDecoderModel`` warm start, Rothe et al. 2020,
  whose cross-attention starts untrained). Measured on the mini data (batch 8, lr 3e-4, same held-out inputs, 2
  samples each; share of the question's content words found in the passage, gold questions 0.60): at 200 steps the
  BERT2BERT's conditioned questions reach 0.08 and its answers occur in the passage 0.4% of the time, the prefix LM's
  0.19 and 7.7%; at 1,000 steps 0.09 / 2.4% vs 0.20 / 21% (a sweep on a GPU; on this CPU a prefix-LM step of 8
  takes 0.71 s against the BERT2BERT's 0.85 s in float32). A seq2seq hub id
  (``facebook/bart-large``, ``t5-base``) loads through ``AutoModelForSeq2SeqLM``. All save as ordinary HF
  checkpoints (``save_generator`` / ``load_generator``).
* Sampling is seeded per batch from the seed and the batch's input keys, so a batch gives the same samples wherever
  it sits in the run. The sample score is the mean log-probability (under the model, before top-k/top-p) of the
  sampled tokens.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections import Counter
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from ecqg.text import entity_key

log = logging.getLogger(__name__)

SEPARATOR = "<sep>"          # between answer and question in targets, and between source segments
HIGHLIGHT = "<hl>"           # around the conditioning entity in the passage (``markers``)
MARKINGS = ("markers", "segment")
ARCHITECTURES = ("prefix_lm", "bert2bert")      # for encoder-only checkpoints
DEFAULT_MARKING = "markers"
GENERATORS = ("uncon", "con")
NO_ENTITY_REASONS = ("no_noun_chunk", "only_wh_or_pronoun", "not_in_passage")
DROP_REASONS = ("no_separator", "extra_separator", "empty_answer", "empty_question", "no_question_mark",
                "question_too_short", "entity_not_mentioned")

_SEP_RE = re.compile(r"\s*<\s*sep\s*>\s*", re.IGNORECASE)
_WH_TAGS = frozenset({"WDT", "WP", "WP$", "WRB"})
_STRIP_LEADING_TAGS = frozenset({"DT", "PDT", "PRP$", "WDT", "WP", "WP$"})
_OBJECT_DEPS = frozenset({"pobj", "dobj"})
_SUBJECT_DEPS = frozenset({"nsubj", "nsubjpass", "csubj", "csubjpass", "expl"})


# ================================================================================================ entity selection
def _find_mention(text: str, surface: str) -> int | None:
    """Start of the first case-insensitive, whole-word occurrence of ``surface`` in ``text`` (None if absent)."""
    if not surface.strip():
        return None
    pattern = r"(?<!\w)" + r"\s+".join(re.escape(w) for w in surface.split()) + r"(?!\w)"
    match = re.search(pattern, text, flags=re.IGNORECASE)
    return match.start() if match else None


def _chunk_candidates(doc) -> tuple[list[tuple[tuple, str, str | None]], int]:
    """Usable noun chunks of a parsed question as ``(sort key, surface, NER label)``, and the number of chunks.

    Each chunk (leading determiners / possessives dropped) comes with fall-backs inside it, tried after it: its
    named entities and its runs of proper nouns ("the Norman religion" -> "Norman"), for chunks whose exact wording
    is not in the passage.
    """
    chunks = list(doc.noun_chunks)
    out = []
    for chunk in chunks:
        if any(t.tag_ in _WH_TAGS for t in chunk):
            continue                                   # the wh-phrase asks for the answer: never the entity
        tokens = list(chunk)
        while tokens and (tokens[0].tag_ in _STRIP_LEADING_TAGS or tokens[0].is_punct):
            tokens = tokens[1:]
        if not tokens or all(t.is_stop or t.pos_ == "PRON" or t.is_punct for t in tokens):
            continue
        dep = chunk.root.dep_
        tier = 0 if dep in _OBJECT_DEPS else 2 if dep in _SUBJECT_DEPS else 1
        spans = [doc[tokens[0].i : tokens[-1].i + 1]]
        spans += [e for e in doc.ents if spans[0].start <= e.start and e.end <= spans[0].end]
        run: list = []
        for t in [*tokens, None]:
            if t is not None and t.pos_ == "PROPN":
                run.append(t)
            elif run:
                spans.append(doc[run[0].i : run[-1].i + 1])
                run = []
        seen = set()
        for variant, span in enumerate(spans):
            if span.text.casefold() in seen or all(t.is_stop or t.is_punct for t in span):
                continue
            seen.add(span.text.casefold())
            label = next((e.label_ for e in doc.ents if e.start <= span.start and span.end <= e.end), None)
            out.append(((tier, variant > 0, label is None, -len(span.text), span.start), span.text, label))
    out.sort(key=lambda c: c[0])
    return out, len(chunks)


def select_entities(triples: Sequence[Mapping[str, Any]], passages: Mapping[str, Mapping[str, str]], *,
                    batch_size: int = 256, progress: bool = True) -> tuple[list[dict | None], Counter]:
    """The conditioning entity of each gold triple, or None; plus counts (``found`` and the no-entity reasons).

    Each result is ``{"entity", "entity_start", "entity_label"}`` (start in the passage text, label from the
    question's NER or None). ``passages`` maps passage id -> ``{"title", "text"}``. Questions go through one
    ``nlp.pipe`` (the lemmatizer is off: noun chunks need the parser and tagger only, labels need NER).
    """
    from tqdm.auto import tqdm

    from ecqg.models import load_spacy

    nlp = load_spacy(disable=("lemmatizer",))
    results: list[dict | None] = []
    counts: Counter = Counter()
    docs = nlp.pipe((t["question"] for t in triples), batch_size=batch_size)
    for triple, doc in tqdm(zip(triples, docs), total=len(triples), desc="QG entities", disable=not progress):
        text = passages[triple["passage_id"]]["text"]
        candidates, n_chunks = _chunk_candidates(doc)
        chosen = None
        for _, surface, label in candidates:
            start = _find_mention(text, surface)
            if start is not None:
                chosen = {"entity": surface, "entity_start": start, "entity_label": label}
                break
        if chosen is None:
            reason = "no_noun_chunk" if n_chunks == 0 else "not_in_passage" if candidates else "only_wh_or_pronoun"
            counts[reason] += 1
        else:
            counts["found"] += 1
        results.append(chosen)
    return results, counts


def split_heldout(triples: Sequence[Mapping[str, Any]], n: int, *, seed: int) -> tuple[list, list]:
    """``(train, heldout)``: whole passages drawn at random until ``n`` triples are held out, so no held-out passage
    is seen in training (SQuAD has several questions per paragraph)."""
    import random

    by_passage: dict[str, list] = {}
    for t in triples:
        by_passage.setdefault(t["passage_id"], []).append(t)
    order = sorted(by_passage)
    random.Random(seed).shuffle(order)
    held: set[str] = set()
    count = 0
    for pid in order:
        if count >= n:
            break
        held.add(pid)
        count += len(by_passage[pid])
    return ([t for t in triples if t["passage_id"] not in held], [t for t in triples if t["passage_id"] in held])


def heldout_inputs(triples: Sequence[Mapping[str, Any]], passages: Mapping[str, Mapping[str, str]],
                   entities: Sequence[dict | None] | None = None) -> tuple[list[dict], dict[str, list[str]]]:
    """Generation inputs and references for held-out triples: one input per passage (``entities`` None, uncon) or
    per (passage, entity) (con; triples without an entity skipped); references = their gold questions."""
    inputs: dict[str, dict] = {}
    refs: dict[str, list[str]] = {}
    for i, t in enumerate(triples):
        ent = entities[i] if entities is not None else None
        if entities is not None and ent is None:
            continue
        passage = passages[t["passage_id"]]
        key = reference_key(t["passage_id"], ent and ent["entity"])
        inputs.setdefault(key, {"passage_id": t["passage_id"], "title": passage["title"], "text": passage["text"],
                                "entity": ent and ent["entity"], "entity_start": ent and ent["entity_start"],
                                "entity_label": ent and ent["entity_label"]})
        refs.setdefault(key, []).append(t["question"])
    return list(inputs.values()), refs


# ================================================================================================ source / target
def crop_passage(text: str, focus: int | None, window_words: int | None) -> tuple[str, int]:
    """``(window, offset)``: at most ``window_words`` whitespace words of ``text`` around the character ``focus``
    (a third of the window before it; the opening words when ``focus`` is None). Why: on CPU the source must stay
    short (128 tokens), and a plain truncation would cut off the marked entity or the answer of most passages."""
    if window_words is None:
        return text, 0
    words = [m.span() for m in re.finditer(r"\S+", text)]
    if len(words) <= window_words:
        return text, 0
    at = 0 if focus is None else next((i for i, (_, end) in enumerate(words) if end > focus), len(words) - 1)
    lo = max(0, min(at - window_words // 3, len(words) - window_words))
    start, end = words[lo][0], words[lo + window_words - 1][1]
    return text[start:end], start


def format_source(title: str, text: str, entity: str | None = None, entity_start: int | None = None,
                  marking: str | None = None, *, window_words: int | None = None, focus: int | None = None) -> str:
    """The generator's source text; ``marking`` None (or no entity) gives the unconditioned form.

    ``markers``: ``<hl>`` around the entity's occurrence at ``entity_start`` (found case-insensitively when None;
    a ValueError when the passage does not contain it). ``segment``: ``entity <sep>`` in front. ``window_words``
    crops the passage (:func:`crop_passage`) around ``focus`` (default: the entity), always keeping the entity.
    """
    head = f"{title} {SEPARATOR} " if title else ""
    conditioned = marking is not None and entity is not None
    if conditioned and marking not in MARKINGS:
        raise ValueError(f"unknown entity marking {marking!r}; known: {MARKINGS}")
    start = entity_start
    if conditioned and (start is None or text[start : start + len(entity)].casefold() != entity.casefold()):
        start = _find_mention(text, entity)
        if start is None:
            raise ValueError(f"entity {entity!r} does not occur in the passage {title!r}, so it cannot be marked")
    crop, offset = crop_passage(text, focus if focus is not None else start, window_words)
    if conditioned and not offset <= start <= start + len(entity) <= offset + len(crop):
        crop, offset = crop_passage(text, start, window_words)      # the entity always stays in the window
    if not conditioned:
        return head + crop
    if marking == "segment":
        return f"{entity} {SEPARATOR} {head}{crop}"
    start -= offset
    end = start + len(entity)
    return f"{head}{crop[:start]}{HIGHLIGHT} {crop[start:end]} {HIGHLIGHT}{crop[end:]}"


def format_target(answer: str, question: str) -> str:
    return f"{answer} {SEPARATOR} {question}"


def parse_target(generated: str) -> tuple[dict[str, str] | None, str | None]:
    """``(answer, question)`` read back from a decoded target, or ``(None, reason)`` with a reason of DROP_REASONS."""
    parts = _SEP_RE.split(generated.strip())
    if len(parts) < 2:
        return None, "no_separator"
    if len(parts) > 2:
        return None, "extra_separator"
    answer, question = (" ".join(p.split()) for p in parts)
    if not answer:
        return None, "empty_answer"
    if not question.rstrip("?").strip():
        return None, "empty_question"
    if not question.endswith("?"):
        return None, "no_question_mark"
    if len(re.findall(r"\w+", question)) < 3:
        return None, "question_too_short"
    return {"answer": answer, "question": question}, None


def build_examples(triples: Sequence[Mapping[str, Any]], passages: Mapping[str, Mapping[str, str]],
                   generator: str, *, marking: str = DEFAULT_MARKING, entities: Sequence[dict | None] | None = None,
                   window_words: int | None = None, placeholder: str | None = None,
                   progress: bool = True) -> tuple[list[dict], Counter]:
    """``[{"id", "source", "target", "passage_id", "entity"}]`` for one generator, plus counts.

    ``uncon`` uses every triple. ``con`` uses the triples with a conditioning entity (``entities`` from
    :func:`select_entities`, computed here when None) and reports the no-entity reasons in the counts.
    ``window_words`` crops each passage around the answer (and the entity; see :func:`crop_passage`).
    ``placeholder`` (con only): the entity's mention in the target question becomes this token (:func:`delexicalise`).
    """
    if generator not in GENERATORS:
        raise ValueError(f"unknown generator {generator!r}; known: {GENERATORS}")
    counts: Counter = Counter()
    if generator == "con" and entities is None:
        entities, counts = select_entities(triples, passages, progress=progress)
    examples = []
    for i, triple in enumerate(triples):
        passage = passages.get(triple["passage_id"])
        if passage is None:
            raise KeyError(f"gold triple {triple['id']!r}: passage_id {triple['passage_id']!r} is not in the corpus")
        ent = entities[i] if generator == "con" else None
        if generator == "con" and ent is None:
            continue
        focus = triple["answer_start"]
        if ent is not None and ent["entity_start"] is not None:
            focus = (focus + ent["entity_start"]) // 2
        source = format_source(passage["title"], passage["text"], ent and ent["entity"],
                               ent and ent["entity_start"], marking if generator == "con" else None,
                               window_words=window_words, focus=focus)
        question = triple["question"]
        if ent is not None and placeholder:
            question = delexicalise(question, ent["entity"], placeholder,
                                    where=f"gold triple {triple['id']!r}, field 'question'")
        examples.append({"id": triple["id"], "source": source, "target": format_target(triple["answer"], question),
                         "passage_id": triple["passage_id"], "entity": ent and ent["entity"]})
    counts["examples"] = len(examples)
    return examples, counts


def delexicalise(question: str, entity: str, placeholder: str, *, where: str = "question") -> str:
    """``question`` with its first mention of ``entity`` (case-insensitive, whole words) replaced by ``placeholder``.
    The conditioning entity is a noun chunk of the question by construction, so a miss is a data error."""
    start = _find_mention(question, entity)
    if start is None:
        raise ValueError(f"{where}: the conditioning entity {entity!r} does not occur in {question!r}")
    return f"{question[:start]}{placeholder}{question[start + len(entity):]}"


def relexicalise(text: str, entity: str, placeholder: str) -> tuple[str, bool]:
    """``(text with every placeholder replaced by the entity, whether there was one)``."""
    if placeholder not in text:
        return text, False

    def spaced(match: re.Match) -> str:  # a space only where the entity would touch a word ("the[ENT]'s" stays)
        before = text[match.start() - 1] if match.start() else " "
        after = text[match.end()] if match.end() < len(text) else " "
        return f"{' ' if before.isalnum() else ''}{entity}{' ' if after.isalnum() else ''}"

    return " ".join(re.sub(re.escape(placeholder), spaced, text).split()), True


# ================================================================================================ generator model
def _is_seq2seq(config) -> bool:
    return bool(getattr(config, "is_encoder_decoder", False))


def build_generator(ref: str, placeholder: str | None = None, architecture: str = "prefix_lm",
                    seed: int | None = None, **overrides):
    """``(model, tokenizer)`` for a model reference (``bundled:minilm``, a hub id, a local directory).

    A seq2seq checkpoint (BART, T5, a saved BERT2BERT) or a saved prefix LM loads as is; an encoder-only one becomes
    a generator of ``architecture`` (``prefix_lm``, or ``bert2bert``, whose decoder starts with [CLS] and stops at
    [SEP]). ``placeholder``: a token added to the vocabulary (and the embeddings) unless the tokenizer has it
    already. ``seed`` seeds torch before the model is built: the weights a warm start adds (the LM head's transform,
    a BERT2BERT's cross-attention, the placeholder's embedding) are drawn from torch's generator, whose own seed
    differs in every process. ``overrides`` go to the model config (e.g. dropout).
    """
    import torch
    from transformers import AutoConfig, AutoModelForSeq2SeqLM, AutoTokenizer, EncoderDecoderModel

    from ecqg import prefix_lm
    from ecqg.models import from_pretrained, resolve_model

    if architecture not in ARCHITECTURES:
        raise ValueError(f"unknown generator architecture {architecture!r}; known: {ARCHITECTURES}")
    config = from_pretrained(AutoConfig, ref)
    tokenizer = from_pretrained(AutoTokenizer, ref)
    if seed is not None:
        torch.manual_seed(seed)
    if _is_seq2seq(config):
        loader = EncoderDecoderModel if config.model_type == "encoder-decoder" else AutoModelForSeq2SeqLM
        model = from_pretrained(loader, ref, **overrides)
    elif prefix_lm.ARCHITECTURE in (config.architectures or []):
        model = from_pretrained(prefix_lm.BertPrefixLM, ref, **overrides)
    elif architecture == "prefix_lm":
        model = prefix_lm.from_encoder(resolve_model(ref), **overrides)
    else:
        path = resolve_model(ref)
        kwargs = {f"{part}_{k}": v for k, v in overrides.items() for part in ("encoder", "decoder")}
        model = EncoderDecoderModel.from_encoder_decoder_pretrained(path, path, **kwargs)
        configure_bert2bert(model, tokenizer)
    if placeholder:
        add_placeholder_token(model, tokenizer, placeholder)
    _ensure_generation_ids(model, tokenizer)
    return model, tokenizer


def set_dropout(model, p: float) -> None:
    """Dropout probability ``p`` in every dropout layer of a generator built from a BERT-family encoder (prefix LM or
    BERT2BERT) and in its config. Why: the mini generators see each example fewer than two times; measured on the
    mini data (prefix LM, 800 steps per generator, a sweep on a GPU): dropout 0 instead of BERT's 0.1 takes the conditioned questions'
    content words found in the passage from 0.33 to 0.41 and their answers found in it from 27% to 38%, about what
    1,200 steps with dropout reach."""
    import torch

    if _prefix_lm(model):
        configs = [model.config]
    elif _bert2bert(model):
        configs = [model.encoder.config, model.decoder.config]
    else:
        raise ValueError(f"qg.dropout applies to generators built from a BERT-family encoder, not to "
                         f"{model.config.model_type!r}: set it to null (the checkpoint's own dropout)")
    if not 0 <= p < 1:
        raise ValueError(f"dropout must be in [0, 1), got {p!r}")
    for config in configs:
        config.hidden_dropout_prob = config.attention_probs_dropout_prob = p
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = p


def add_placeholder_token(model, tokenizer, placeholder: str) -> None:
    """Make ``placeholder`` one token (kept when decoding) and give it an embedding row, in every embedding the
    model has (a BERT2BERT's encoder and decoder are resized separately)."""
    from transformers import AddedToken

    if placeholder not in tokenizer.get_vocab():
        tokenizer.add_tokens([AddedToken(placeholder, normalized=False, special=False)])
    parts = (model.encoder, model.decoder) if _bert2bert(model) else (model,)
    for part in parts:
        if part.get_input_embeddings().num_embeddings < len(tokenizer):
            part.resize_token_embeddings(len(tokenizer))  # updates the part's config, which is the model's


def configure_bert2bert(model, tokenizer) -> None:
    """Set a BERT2BERT's special ids: decoder starts with [CLS], stops at [SEP], pads with [PAD] (model config,
    decoder config and generation config), as Rothe et al. / the HF BERT2BERT recipe do."""
    start = tokenizer.cls_token_id if tokenizer.cls_token_id is not None else tokenizer.bos_token_id
    stop = tokenizer.sep_token_id if tokenizer.sep_token_id is not None else tokenizer.eos_token_id
    if start is None or stop is None or tokenizer.pad_token_id is None:
        raise ValueError(f"tokenizer {type(tokenizer).__name__} has no [CLS]/[SEP]/[PAD] (or bos/eos/pad) tokens: "
                         "cannot build a BERT2BERT generator from it")
    for cfg in (model.config, model.config.decoder):
        cfg.decoder_start_token_id, cfg.bos_token_id = start, start
        cfg.eos_token_id, cfg.pad_token_id = stop, tokenizer.pad_token_id
    _ensure_generation_ids(model, tokenizer)


def _ensure_generation_ids(model, tokenizer) -> None:
    gen, cfg = model.generation_config, model.config
    for name in ("decoder_start_token_id", "eos_token_id", "pad_token_id", "bos_token_id"):
        value = getattr(cfg, name, None)
        if value is not None:
            setattr(gen, name, value)
    if gen.pad_token_id is None:
        gen.pad_token_id = tokenizer.pad_token_id
    gen.max_length = None  # callers pass max_new_tokens


def _bert2bert(model) -> bool:
    return getattr(model.config, "model_type", None) == "encoder-decoder"


def _prefix_lm(model) -> bool:
    from ecqg.prefix_lm import BertPrefixLM

    return isinstance(model, BertPrefixLM)


def save_generator(model, tokenizer, path: str | Path) -> Path:
    """An ordinary HF checkpoint + tokenizer, written atomically (a killed save leaves no complete-looking dir)."""
    from ecqg.io import atomic_path

    with atomic_path(path) as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
    return Path(path)


def load_generator(path: str | Path):
    """``(model, tokenizer)`` from :func:`save_generator` output (or any seq2seq checkpoint); a placeholder token
    saved with the tokenizer comes back with it."""
    return build_generator(str(path))


# ================================================================================================ dataset
class QGDataset:
    """Tokenised examples for HF Trainer: ``input_ids``, ``attention_mask``, ``labels`` (unpadded lists).

    A prefix LM gets one sequence per example (source, then target; :func:`ecqg.prefix_lm.example_features`). Labels
    of a BERT2BERT are ``target [SEP]`` (the model prepends [CLS] as decoder start); other seq2seq models use their
    tokenizer's own target format.
    """

    def __init__(self, examples: Sequence[Mapping[str, str]], tokenizer, model, *, source_max_length: int = 256,
                 target_max_length: int = 64):
        sources = [e["source"] for e in examples]
        targets = [e["target"] for e in examples]
        enc = tokenizer(sources, max_length=source_max_length, truncation=True)
        self.truncated_sources = sum(len(i) >= source_max_length for i in enc["input_ids"])
        if _prefix_lm(model) or _bert2bert(model):
            raw = tokenizer(targets, add_special_tokens=False, max_length=target_max_length - 1,
                            truncation=True)["input_ids"]
        if _prefix_lm(model):
            from ecqg.prefix_lm import example_features

            self.items = [example_features(src, tgt, tokenizer.cls_token_id, tokenizer.sep_token_id)
                          for src, tgt in zip(enc["input_ids"], raw)]
            return
        if _bert2bert(model):
            eos = model.config.eos_token_id
            labels = [ids + [eos] for ids in raw]
        else:
            labels = tokenizer(text_target=targets, max_length=target_max_length, truncation=True)["input_ids"]
        self.items = [{"input_ids": i, "attention_mask": m, "labels": lab}
                      for i, m, lab in zip(enc["input_ids"], enc["attention_mask"], labels)]

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, idx: int) -> dict[str, list[int]]:
        return self.items[idx]


def make_collator(tokenizer, model):
    """Pads a batch; labels padded with -100 (a seq2seq model makes ``decoder_input_ids`` from them; a prefix LM's
    labels are as long as its inputs and padded with them)."""
    from transformers import DataCollatorForSeq2Seq, DataCollatorForTokenClassification

    if _prefix_lm(model):
        return DataCollatorForTokenClassification(tokenizer, label_pad_token_id=-100, padding=True)
    return DataCollatorForSeq2Seq(tokenizer, model=model, label_pad_token_id=-100, padding=True)


def train_generator(model, tokenizer, examples: Sequence[Mapping[str, str]], output_dir: str | Path,
                    settings: Mapping[str, Any], *, seed: int, source_max_length: int = 256,
                    target_max_length: int = 64, progress: bool = True) -> dict:
    """Train in place through :func:`ecqg.hf_training.train_with_checkpoints` (checkpoints, resume)."""
    from ecqg.hf_training import train_with_checkpoints

    dataset = QGDataset(examples, tokenizer, model, source_max_length=source_max_length,
                        target_max_length=target_max_length)
    log.info("QG training: %d examples (%d sources truncated at %d tokens)", len(dataset),
             dataset.truncated_sources, source_max_length)
    result = train_with_checkpoints(model, dataset, output_dir, settings, seed=seed,
                                    data_collator=make_collator(tokenizer, model), progress=progress)
    result = dict(result)
    result["truncated_sources"] = dataset.truncated_sources
    return result


# ================================================================================================ generation
def _batch_seed(seed: int, keys: Iterable[str]) -> int:
    digest = hashlib.sha256(("\x00".join([str(seed), *keys])).encode()).digest()
    return int.from_bytes(digest[:8], "big") % (2**63)


def _input_key(inp: Mapping[str, Any]) -> str:
    return f"{inp['passage_id']}\x01{entity_key(inp['entity']) if inp.get('entity') else ''}"


def generate_questions(model, tokenizer, inputs: Sequence[Mapping[str, Any]], *, marking: str | None = None,
                       top_k: int = 10, top_p: float = 0.9, samples: int = 1, batch_size: int = 32,
                       max_new_tokens: int = 48, source_max_length: int = 256, window_words: int | None = None,
                       placeholder: str | None = None, require_entity: bool = False, seed: int = 0,
                       progress: bool = True) -> tuple[list[dict], Counter]:
    """Sample ``samples`` (answer, question) pairs per input with top-k / top-p; returns ``(records, drop_counts)``.

    ``inputs``: ``{"passage_id", "title", "text", "entity", "entity_start", "entity_label"}``. The generator is
    ``con`` when ``marking`` is given (each input then needs an entity), else ``uncon``. Records:
    ``{"id", "passage_id", "entity", "entity_label", "question", "answer", "generator", "sample_score", "sample"}``;
    unparsable outputs are dropped and counted by reason (``drop_counts``; ``generated`` counts every sample).
    ``require_entity`` also drops con questions that do not mention their entity (``entity_not_mentioned``): off for
    evaluation (which reports the raw mention rate), on where the pipeline needs questions about the entity.
    ``placeholder`` (con): a generated placeholder is replaced by the input's entity (:func:`relexicalise`); con
    records then carry ``entity_via_placeholder``.
    """
    import torch
    from tqdm.auto import tqdm

    from ecqg.models import inference

    generator = "con" if marking else "uncon"
    if samples < 1 or batch_size < 1:
        raise ValueError(f"samples and batch_size must be >= 1, got {samples} and {batch_size}")
    sources = []
    keys: dict[str, int] = {}
    for n, inp in enumerate(inputs):
        if marking and not inp.get("entity"):
            raise ValueError(f"input {n} (passage {inp.get('passage_id')!r}) has no entity for the con generator")
        if keys.setdefault(_input_key(inp), n) != n:
            raise ValueError(f"input {n} repeats input {keys[_input_key(inp)]} (passage {inp['passage_id']!r}, "
                             f"entity {inp.get('entity')!r}): ask for more samples instead")
        sources.append(format_source(inp.get("title", ""), inp["text"], inp.get("entity"), inp.get("entity_start"),
                                     marking, window_words=window_words))
    records: list[dict] = []
    drops: Counter = Counter()
    pad = tokenizer.pad_token_id if _prefix_lm(model) else model.generation_config.pad_token_id
    bar = tqdm(total=len(inputs), desc=f"QG generate ({generator})", disable=not progress)
    with inference(model) as device:
        for lo in range(0, len(inputs), batch_size):
            batch = inputs[lo : lo + batch_size]
            enc = tokenizer(sources[lo : lo + batch_size], max_length=source_max_length, truncation=True,
                            padding=True, return_tensors="pt").to(device)
            enc.pop("token_type_ids", None)
            tokens, scores = _sample_batch(model, tokenizer, enc, _batch_seed(seed, (_input_key(i) for i in batch)),
                                           top_k=top_k, top_p=top_p, samples=samples, max_new_tokens=max_new_tokens)
            keep = (tokens != pad) & torch.isfinite(scores)
            mean_lp = (scores.masked_fill(~keep, 0).sum(1) / keep.sum(1).clamp(min=1)).tolist()
            texts = tokenizer.batch_decode(tokens, skip_special_tokens=True, clean_up_tokenization_spaces=True)
            for j, text in enumerate(texts):
                inp, s = batch[j // samples], j % samples
                drops["generated"] += 1
                parsed, reason = parse_target(text)
                if parsed is None:
                    drops[reason] += 1
                    continue
                via_placeholder = None
                if placeholder and marking:
                    parsed["question"], via_placeholder = relexicalise(parsed["question"], inp["entity"], placeholder)
                    parsed["answer"] = relexicalise(parsed["answer"], inp["entity"], placeholder)[0]
                if require_entity and marking and not mentions(parsed["question"], inp["entity"]):
                    drops["entity_not_mentioned"] += 1
                    continue
                key = hashlib.sha1(_input_key(inp).encode()).hexdigest()[:10]
                records.append({"id": f"qg-{generator}-{key}-{s}", "passage_id": inp["passage_id"],
                                "entity": inp.get("entity"), "entity_label": inp.get("entity_label"),
                                "question": parsed["question"], "answer": parsed["answer"], "generator": generator,
                                "sample_score": round(float(mean_lp[j]), 6), "sample": s,
                                **({} if via_placeholder is None else {"entity_via_placeholder": via_placeholder})})
            bar.update(len(batch))
    bar.close()
    return records, drops


def _sample_batch(model, tokenizer, enc, seed: int, *, top_k: int, top_p: float, samples: int,
                  max_new_tokens: int):
    """``(tokens, log_probs)`` of ``samples`` top-k / top-p samples per source, consecutive per source: generated
    tokens and their log-probabilities under the model before top-k / top-p (padding after a sample ends)."""
    import torch

    if _prefix_lm(model):
        from ecqg.prefix_lm import sample

        generator = torch.Generator(device=enc["input_ids"].device).manual_seed(seed)
        return sample(model, enc["input_ids"], enc["attention_mask"], start_id=tokenizer.cls_token_id,
                      stop_id=tokenizer.sep_token_id, pad_id=tokenizer.pad_token_id, samples=samples, top_k=top_k,
                      top_p=top_p, max_new_tokens=max_new_tokens, generator=generator)
    torch.manual_seed(seed)
    out = model.generate(**enc, do_sample=True, top_k=top_k, top_p=top_p, num_return_sequences=samples,
                         max_new_tokens=max_new_tokens, output_logits=True, return_dict_in_generate=True)
    scores = model.compute_transition_scores(out.sequences, out.logits, normalize_logits=True)
    return out.sequences[:, -scores.shape[1]:], scores


# ================================================================================================ evaluation
def _norm(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.casefold()))


def passage_word_rate(question: str, passage: str, entity: str | None = None) -> float | None:
    """Share of the question's content words (spaCy's English stop words and the entity's own words left out) that
    occur in the passage; None when none is left. Why: BLEU against one or two references cannot tell a question
    about the passage from a fluent generic one; a question written from the passage reuses its words (the held-out
    gold questions: ~0.6 to 0.7 on the mini data), a passage-independent language model does not."""
    from spacy.lang.en.stop_words import STOP_WORDS

    skip = set(STOP_WORDS) | (set(_norm(entity).split()) if entity else set())
    words = [w for w in _norm(question).split() if w not in skip]
    if not words:
        return None
    in_passage = set(_norm(passage).split())
    return sum(w in in_passage for w in words) / len(words)


def _mean(values: Iterable[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return round(sum(kept) / len(kept), 4) if kept else None


def mentions(question: str, entity: str) -> bool:
    """Whether the question mentions the entity (case-insensitive, whole words)."""
    return _find_mention(question, entity) is not None


def question_scores(hypotheses: Sequence[str], references: Sequence[str | Sequence[str]]) -> dict[str, float]:
    """Corpus BLEU-4 (sacrebleu, lowercased: the bundled tokenizer is uncased) and mean ROUGE-L F (stemmed, best
    reference), both on a 0-100 scale. Each hypothesis has one reference or a list of them (any number)."""
    import sacrebleu
    from rouge_score import rouge_scorer

    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    if not hypotheses:
        return {"bleu4": float("nan"), "rougeL_f": float("nan")}
    refs = [[r] if isinstance(r, str) else list(r) for r in references]
    if any(not r for r in refs):
        raise ValueError("every hypothesis needs at least one reference")
    streams = [[r[i] if i < len(r) else None for r in refs] for i in range(max(map(len, refs)))]
    bleu = sacrebleu.corpus_bleu(list(hypotheses), streams, lowercase=True)
    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)
    rouge = [scorer.score_multi(r, h)["rougeL"].fmeasure for h, r in zip(hypotheses, refs)]
    return {"bleu4": round(bleu.score, 3), "rougeL_f": round(100 * sum(rouge) / len(rouge), 3)}


def evaluate_generator(records: Sequence[Mapping[str, Any]], references: Mapping[str, str | Sequence[str]],
                       passages: Mapping[str, Mapping[str, str]], *, generated: int | None = None) -> dict[str, Any]:
    """Quality of generated questions against held-out gold questions.

    ``references`` maps an input's :func:`reference_key` (passage id, plus the entity for con inputs) to its gold
    question(s): every gold question of that passage (uncon) or of that passage and entity (con). Every kept sample
    is scored (BLEU-4 / ROUGE-L vs its input's references); rates are shares of kept samples; ``kept_rate`` = kept /
    ``generated`` when given. ``duplicate_rate``: share of samples whose normalised question repeats an earlier
    sample of the same input. ``placeholder_rate``: share of con samples whose entity came from a generated
    placeholder (null when no record says). ``passage_word_rate``: mean :func:`passage_word_rate` of the kept
    questions, beside ``reference_passage_word_rate``, the same for the gold questions of the inputs they came from.
    """
    hyps, refs = [], []
    mention = with_entity = in_passage = dups = via_placeholder = 0
    placeholder_known = False
    seen: dict[str, set[str]] = {}
    for rec in records:
        key = reference_key(rec["passage_id"], rec.get("entity"))
        ref = references.get(key)
        if not ref:
            raise KeyError(f"generated record {rec['id']!r}: no reference question for input {key!r}")
        hyps.append(rec["question"])
        refs.append(ref)
        if rec.get("entity"):
            with_entity += 1
            mention += mentions(rec["question"], rec["entity"])
            if "entity_via_placeholder" in rec:
                placeholder_known = True
                via_placeholder += bool(rec["entity_via_placeholder"])
        in_passage += f" {_norm(rec['answer'])} " in f" {_norm(passages[rec['passage_id']]['text'])} "
        q = _norm(rec["question"])
        bucket = seen.setdefault(key, set())
        dups += q in bucket
        bucket.add(q)
    n = len(records)
    out: dict[str, Any] = {"kept": n, **question_scores(hyps, refs)}
    text = {r["passage_id"]: passages[r["passage_id"]]["text"] for r in records}
    gold = {reference_key(r["passage_id"], r.get("entity")): (r["passage_id"], r.get("entity")) for r in records}
    out["passage_word_rate"] = _mean(passage_word_rate(r["question"], text[r["passage_id"]], r.get("entity"))
                                     for r in records)
    out["reference_passage_word_rate"] = _mean(
        passage_word_rate(q, text[pid], entity) for key, (pid, entity) in gold.items()
        for q in ([references[key]] if isinstance(references[key], str) else references[key]))
    share = (lambda a, b: round(a / b, 4) if b else None)  # None (JSON null): not applicable, e.g. no entities
    out.update({"entity_mention_rate": share(mention, with_entity), "answer_in_passage_rate": share(in_passage, n),
                "duplicate_rate": share(dups, n), "inputs": len(seen),
                "placeholder_rate": share(via_placeholder, with_entity) if placeholder_known else None})
    if generated is not None:
        out["generated"] = generated
        out["kept_rate"] = share(n, generated)
    return out


def reference_key(passage_id: str, entity: str | None) -> str:
    """The key of a generation input (and of its references in :func:`evaluate_generator`)."""
    return f"{passage_id}\x01{entity_key(entity)}" if entity else passage_id


def side_by_side(uncon: Sequence[Mapping[str, Any]], con: Sequence[Mapping[str, Any]],
                 passages: Mapping[str, Mapping[str, str]], *, n: int = 10, seed: int = 0):
    """A table (pandas DataFrame) of up to ``n`` random passages with both generators' first kept sample."""
    import random

    import pandas as pd

    first_uncon: dict[str, Mapping] = {}
    for rec in uncon:
        first_uncon.setdefault(rec["passage_id"], rec)
    first_con: dict[str, Mapping] = {}
    for rec in con:
        first_con.setdefault(rec["passage_id"], rec)
    shared = sorted(set(first_uncon) & set(first_con))
    rows = []
    for pid in random.Random(seed).sample(shared, min(n, len(shared))):
        u, c = first_uncon[pid], first_con[pid]
        rows.append({"title": passages[pid]["title"], "entity": c["entity"], "uncon_question": u["question"],
                     "uncon_answer": u["answer"], "con_question": c["question"], "con_answer": c["answer"]})
    return pd.DataFrame(rows, columns=["title", "entity", "uncon_question", "uncon_answer", "con_question",
                                       "con_answer"])
