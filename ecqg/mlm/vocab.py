"""A WordPiece vocabulary learned from the masked-LM text, saved as an ordinary ``BertTokenizerFast``.

Why a vocabulary of its own rather than MiniLM's 30,522 pieces: learned on this text, an entity name is more often one
piece (attention summed over an entity's pieces then ranks entities less by their length), and 16k rows keep the
committed weights small. The HF ``tokenizers`` trainer does the work (BERT's normaliser and pre-tokeniser: uncased,
accents stripped, as bert-base-uncased).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ecqg.core.io import atomic_path

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def train_wordpiece(lines: Iterable[str], vocab_size: int, out_dir: str | Path, min_frequency: int = 2):
    """Train an uncased WordPiece vocabulary on ``lines`` and save it as a ``BertTokenizerFast`` in ``out_dir``
    (atomically); returns the loaded tokenizer."""
    # tokenizers and transformers load only when a vocabulary is trained
    from tokenizers import BertWordPieceTokenizer
    from transformers import BertTokenizerFast

    options = {"clean_text": True, "handle_chinese_chars": True, "strip_accents": True, "lowercase": True}
    trainer = BertWordPieceTokenizer(**options)
    trainer.train_from_iterator(list(lines), vocab_size=vocab_size, min_frequency=min_frequency,
                                special_tokens=list(SPECIAL_TOKENS), limit_alphabet=1000, wordpieces_prefix="##",
                                show_progress=False)
    trainer = BertWordPieceTokenizer(vocab=_ordered(trainer.get_vocab()), **options)
    with atomic_path(out_dir) as tmp:
        tmp.mkdir(parents=True)
        trainer.save(str(tmp / "wordpiece.json"))        # the trained tokenizer, pipeline included
        tokenizer = BertTokenizerFast(tokenizer_file=str(tmp / "wordpiece.json"), do_lower_case=True,
                                      strip_accents=True)
        (tmp / "wordpiece.json").unlink()
        tokenizer.save_pretrained(str(tmp))
    return BertTokenizerFast.from_pretrained(str(out_dir))


def _ordered(vocab: dict[str, int]) -> dict[str, int]:
    """The vocabulary in a reproducible order: the trainer lists its alphabet (single characters, with and without
    ``##``) and the pieces learned at equal counts in hash order, which changes from run to run (WordPiece matches
    the longest piece whatever its id): specials first, then the alphabet, then the learned pieces, each sorted."""
    def single(piece: str) -> bool:
        return len(piece.removeprefix("##")) == 1

    pieces = sorted(vocab, key=vocab.get)
    specials = [p for p in pieces if p in SPECIAL_TOKENS]
    alphabet = sorted(p for p in pieces if p not in SPECIAL_TOKENS and single(p))
    learned = sorted(p for p in pieces if p not in SPECIAL_TOKENS and not single(p))
    return {piece: i for i, piece in enumerate(specials + alphabet + learned)}
