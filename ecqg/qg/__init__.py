"""Question generation (the paper's step 2): two generators, unconditioned (``uncon``: passage -> answer + question)
and entity-conditioned (``con``: passage + entity -> answer + question), sharing one code path.

One module per idea: ``entities`` (conditioning entities of the training triples, held-out split), ``format``
(source / target text, parsing generated targets, the entity placeholder), ``generators`` (one class per architecture
and their registry: ``prefix_lm`` (:mod:`ecqg.qg.prefix_lm`), ``bert2bert`` and ``seq2seq`` (:mod:`ecqg.qg.seq2seq`)),
``architectures`` (build, save and load a generator through the registry), ``training`` (dataset, collator, Trainer run), ``sampling`` (seeded top-k / top-p generation) and
``quality`` (BLEU / ROUGE, entity mention, passage-word rate, answers in the passage). The names below are the
package's public API, so ``from ecqg import qg; qg.generate_questions(...)`` reads as before. Why the choices and
what they measured: docs/design.md, "Question generation".
"""

from ecqg.qg import prefix_lm
from ecqg.qg.architectures import (ARCHITECTURES, add_placeholder_token, build_generator, load_generator,
                                   save_generator, set_dropout)
from ecqg.qg.generators import generator_class, generator_for, is_rule_based
from ecqg.qg.seq2seq import configure_bert2bert
from ecqg.qg.entities import (NO_ENTITY_REASONS, heldout_inputs, mentions, reference_key, select_entities,
                              split_heldout)
from ecqg.qg.format import (DEFAULT_MARKING, DROP_REASONS, HIGHLIGHT, MARKINGS, SEPARATOR, build_examples,
                            crop_passage, delexicalise, format_source, format_target, parse_target, relexicalise)
from ecqg.qg.quality import evaluate_generator, passage_word_rate, question_scores, side_by_side
from ecqg.qg.sampling import generate_questions
from ecqg.qg.training import QGDataset, make_collator, train_generator

__all__ = [
    "ARCHITECTURES", "DEFAULT_MARKING", "DROP_REASONS", "HIGHLIGHT", "MARKINGS", "NO_ENTITY_REASONS", "QGDataset",
    "SEPARATOR", "add_placeholder_token", "build_examples", "build_generator", "configure_bert2bert", "crop_passage",
    "delexicalise", "evaluate_generator", "format_source", "format_target", "generate_questions", "generator_class",
    "generator_for", "heldout_inputs", "is_rule_based", "load_generator", "make_collator", "mentions", "parse_target", "passage_word_rate",
    "prefix_lm", "question_scores", "reference_key", "relexicalise", "save_generator", "select_entities",
    "set_dropout", "side_by_side", "split_heldout", "train_generator",
]
