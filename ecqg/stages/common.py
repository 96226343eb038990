"""What several stages share: the training seeds, fingerprints of settings, the test sets' gold passages (never a
source of synthetic questions) and corpus look-ups."""

from __future__ import annotations

import hashlib
import json
import random
from typing import Any, Iterator, Mapping, Sequence, TypeVar

from ecqg.core import paths, settings, variants
from ecqg.data.records import read_corpus
from ecqg.core.io import read_jsonl

T = TypeVar("T")


def seeds(dpr: settings.Dpr, variant: str | None = None) -> list[int]:
    """The training seeds of ``variant`` (one replicate each; ``ecqg.core.variants``): ``dpr.seeds`` for the paper's
    variants (and for no variant named), ``dpr.related_seeds`` for the related system's."""
    if variant is None:
        return list(dpr.seeds)
    return variants.seeds(variant, dpr)


def related_seeds(dpr: settings.Dpr) -> list[int]:
    """The training seeds of the related system's retrievers and of every BM25 hybrid (``dpr.related_seeds``)."""
    return list(dpr.related_seeds)


def primary_seed(dpr: settings.Dpr) -> int:
    """The first replicate's seed, whose models feed the analyses that need one model per variant (stages 01, 03,
    06's attention in depth)."""
    return dpr.seeds[0]


def fingerprint(*parts: Any) -> str:
    """A short, stable hash of JSON-able settings (names a run's checkpoint directory)."""
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:12]


def fingerprint_int(*parts: Any) -> int:
    """A stable integer seed from parts (so each generation call has its own, reproducible stream)."""
    return int(hashlib.sha256(repr(parts).encode()).hexdigest()[:12], 16)


def test_gold_ids(test_sets: Mapping[str, str]) -> set[str]:
    """Gold passage ids of every prepared test set (NQ carries them)."""
    return {pid for name in test_sets for _, q in read_jsonl(paths.questions_file(name)) for pid in q["gold_ids"]}


def pool_passages() -> Iterator[dict]:
    """Every passage synthetic questions may be about: the searched corpus, then (``data.synthetic_pool: all``) the
    passages the corpus cut left out. Test gold passages are in it; samplers exclude them."""
    yield from read_corpus(paths.CORPUS)
    yield from read_corpus(paths.POOL_EXTRA)


def passages_by_id(ids: set[str] | None = None) -> dict[str, dict]:
    """Passages of the pool (the corpus and any extra pool passages) ``id -> {title, text}`` (only ``ids`` when
    given)."""
    return {p["id"]: {"title": p["title"], "text": p["text"]} for p in pool_passages()
            if ids is None or p["id"] in ids}


def subset(items: Sequence[T], size: int | None, seed: int, purpose: str) -> list[T]:
    """A seeded random subset of ``size`` items in their original order (all of them when ``size`` is None or not
    smaller): an analysis capped for time keeps the sample random, not the sample's first rows."""
    if size is None or size >= len(items):
        return list(items)
    chosen = sorted(random.Random(f"{seed}-{purpose}").sample(range(len(items)), size))
    return [items[i] for i in chosen]
