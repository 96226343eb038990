"""The corpus tokenised once for every dense encoding of a profile: a memory-mapped Arrow dataset (Hugging Face
``datasets``), written by stage ``tokenize_corpus`` and read by every ``retrieve_*`` stage.

Why: a profile encodes its corpus once per trained retriever, replicate and dose, always with the base model's
tokenizer and passage length, and at 21M passages each tokenisation on one thread is slow. Here it is done once, by ``datasets.map`` over the host's cores (as Tevatron
pre-tokenises), into Arrow files that are memory-mapped, not loaded: an encoder reads its chunk as a zero-copy
slice, and a torchrun worker starts at its first row instead of reading the corpus up to it.

Beside the dataset, ``tokenized.json`` records the tokenizer's fingerprint (:func:`ecqg.retrieval.tokens.
tokenizer_fingerprint`) and the passage length; a retriever whose tokenizer or length differs, or whose class
tokenises passages its own way, is refused by name instead of being fed another model's ids.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from ecqg.core.io import atomic_path
from ecqg.data.records import read_corpus
from ecqg.retrieval.tokens import ATTENTION_MASK, passage_features, tokenizer_fingerprint

log = logging.getLogger(__name__)

CARD, DATASET = "tokenized.json", "dataset"


def _corpus_rows(path: str):
    for p in read_corpus(path):
        yield {"id": str(p["id"]), "title": p.get("title") or "", "text": p["text"]}


def _tokenize_batch(batch: dict, tokenizer, max_length: int) -> dict:
    features = passage_features(tokenizer, batch["title"], batch["text"], max_length)
    return {k: [f[k] for f in features] for k in (features[0] if features else {}) if k != ATTENTION_MASK}


def tokenize_corpus(corpus: str | Path, tokenizer, max_length: int, out_dir: str | Path,
                    num_proc: int | None = None, progress: bool = True) -> dict:
    """Write ``out_dir/dataset`` (columns ``id``, ``input_ids``, and ``token_type_ids`` where the tokenizer gives
    them) and ``out_dir/tokenized.json``, atomically; returns the figures of the run."""
    # datasets and pyarrow are not on the torch+transformers-only GPU image (gpu_check then tokenises in memory)
    import datasets
    import pyarrow.compute as pc

    if not progress:
        datasets.disable_progress_bars()
    # config builds the params schema at import; only the core count is wanted here
    from ecqg.core.config import host_cores

    num_proc = max(1, num_proc or host_cores())
    keys = list(passage_features(tokenizer, ["t"], ["x"], max_length)[0])
    columns = datasets.Features({"id": datasets.Value("string"), **{
        k: datasets.Sequence(datasets.Value("int32" if k == "input_ids" else "int8"))
        for k in keys if k != ATTENTION_MASK}})
    start = time.perf_counter()
    with atomic_path(out_dir) as tmp:
        tmp.mkdir()
        cache = tmp.parent / "cache"            # the generator's and map's Arrow files; gone with the temporary
        raw = datasets.Dataset.from_generator(
            _corpus_rows, gen_kwargs={"path": str(corpus)}, cache_dir=str(cache),
            features=datasets.Features({k: datasets.Value("string") for k in ("id", "title", "text")}))
        tokenized = raw.map(_tokenize_batch, batched=True, batch_size=1000,
                            num_proc=num_proc if num_proc > 1 and len(raw) > 10_000 else None,
                            remove_columns=["title", "text"], features=columns, desc="tokenize corpus",
                            fn_kwargs={"tokenizer": tokenizer, "max_length": max_length},
                            cache_file_name=str(cache / "tokenized.arrow"))
        tokenized.save_to_disk(str(tmp / DATASET))
        rows = len(tokenized)
        tokens = int(pc.sum(pc.list_value_length(tokenized.data.column("input_ids"))).as_py() or 0)
        card = {"rows": rows, "tokens": tokens, "max_length": int(max_length),
                "tokenizer": tokenizer_fingerprint(tokenizer), "tokenizer_name": tokenizer.name_or_path,
                "keys": keys, "corpus": str(corpus)}
        (tmp / CARD).write_text(json.dumps(card, indent=2) + "\n", encoding="utf-8")
        del raw, tokenized
    seconds = time.perf_counter() - start
    log.info("tokenised %d passages (%d tokens) in %.1f s, %d processes", rows, tokens, seconds, num_proc)
    return {"passages": rows, "tokens": tokens, "mean_tokens": round(tokens / max(rows, 1), 1),
            "seconds": round(seconds, 1), "passages_per_s": round(rows / max(seconds, 1e-9), 1),
            "processes": num_proc}


class TokenizedCorpus:
    """A tokenised corpus opened for one retriever (checked against it); rows in corpus order."""

    def __init__(self, directory: str | Path, model):
        # datasets is not on the torch+transformers-only GPU image
        import datasets

        self.directory = Path(directory)
        card_file = self.directory / CARD
        if not card_file.is_file():
            raise FileNotFoundError(f"{card_file}: no tokenised corpus here (stage tokenize_corpus writes it)")
        self.card = json.loads(card_file.read_text(encoding="utf-8"))
        self._check(model)
        self.dataset = datasets.load_from_disk(str(self.directory / DATASET)).with_format("arrow")
        if len(self.dataset) != self.card["rows"]:
            raise ValueError(f"{self.directory / DATASET}: {len(self.dataset)} rows, {CARD} says {self.card['rows']}")

    def _check(self, model) -> None:
        # retriever brings torch: tokenising the corpus runs without it
        from ecqg.retrieval.retriever import Retriever

        where = self.directory / CARD
        if type(model).passage_features is not Retriever.passage_features:
            raise ValueError(f"{type(model).__name__} tokenises passages its own way; {where} holds the base "
                             "retriever's features: encode it from the corpus text instead")
        theirs, mine = self.card["tokenizer"], tokenizer_fingerprint(model.tokenizer)
        if theirs != mine:
            raise ValueError(f"{where}: field 'tokenizer' is {theirs} ({self.card.get('tokenizer_name')}), the "
                             f"model's tokenizer is {mine} ({model.tokenizer.name_or_path}); rerun tokenize_corpus")
        if self.card["max_length"] != model.config.passage_max_length:
            raise ValueError(f"{where}: field 'max_length' is {self.card['max_length']}, the model's "
                             f"passage_max_length is {model.config.passage_max_length}")

    def __len__(self) -> int:
        return int(self.card["rows"])

    def chunks(self, start: int, end: int, chunk_size: int) -> Iterator[tuple[list[str], list[dict]]]:
        """``(passage ids, unpadded features)`` of rows ``[start, end)``, ``chunk_size`` rows at a time, sliced
        from the memory-mapped columns without copying the ids arrays."""
        if not 0 <= start <= end <= len(self):
            raise ValueError(f"rows [{start}, {end}) outside the {len(self)} rows of {self.directory}")
        stored = [k for k in self.card["keys"] if k != ATTENTION_MASK]
        for lo in range(start, end, chunk_size):
            table = self.dataset[lo:min(end, lo + chunk_size)]
            ids = table.column("id").to_pylist()
            columns = {}
            for key in stored:
                column = table.column(key).combine_chunks()
                offsets = column.offsets.to_numpy()
                columns[key] = (column.flatten().to_numpy(zero_copy_only=False), offsets - offsets[0])
            offsets = columns["input_ids"][1]
            features = []
            for row in range(len(ids)):
                a, b = int(offsets[row]), int(offsets[row + 1])
                feature = {k: values[a:b] for k, (values, _) in columns.items()}
                if ATTENTION_MASK in self.card["keys"]:
                    feature[ATTENTION_MASK] = np.ones(b - a, dtype=np.int32)
                features.append(feature)
            yield ids, features
