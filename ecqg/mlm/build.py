"""Build the retrieval-naive base: a WordPiece vocabulary and a small BERT pre-trained by masked-language modelling on
the bundle's passages, then saved (safetensors, float16) where ``from_pretrained`` and every base-model parameter
of ``params.yaml`` accept it (``bundled:naive`` or the folder's path).

Resumable: the vocabulary, the tokenised text and the Trainer's checkpoints (optimizer, scheduler, RNG, data
position) live in ``--work``; stop the command at any point (Ctrl-C, SIGTERM, a lost session) and run it again with
the same arguments to go on from the last complete checkpoint. A different recipe or text in the same ``--work`` is
refused, naming what differs. The finished folder holds the weights, the tokenizer, ``build.json`` (architecture,
recipe, text digest, steps, hours, hosts, the loss history) and ``loss_curve.png``.
"""

from __future__ import annotations

import logging
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from transformers import BertForMaskedLM, BertTokenizerFast, DataCollatorForLanguageModeling

from ecqg.core.cli import parser
from ecqg.core.device import host
from ecqg.core.env import configure_environment
from ecqg.core.io import atomic_path, read_json, write_json
from ecqg.core.logs import setup_logging
from ecqg.mlm.model import Architecture, new_model
from ecqg.mlm.plots import loss_curve
from ecqg.mlm.text import load_text
from ecqg.mlm.vocab import train_wordpiece
from ecqg.runtime.hf_training import train_with_checkpoints

log = logging.getLogger(__name__)

DEFAULT_OUT = Path("bases") / "naive-bert"
DEFAULT_WORK = Path("outputs") / "mlm" / "naive-bert"
DEFAULT_CORPUS = Path("data") / "corpus.jsonl.gz"


@dataclass(frozen=True)
class Recipe:
    """How the base is trained: BERT's masking (15%, 80/10/10), AdamW with linear warm-up and decay, dynamic masking
    (each epoch masks anew), batches of passages of similar length."""

    steps: int = 8000
    batch_size: int = 64
    lr: float = 5e-4
    warmup_ratio: float = 0.06
    weight_decay: float = 0.01
    mask_probability: float = 0.15
    checkpoint_every: int = 250
    held_out_fraction: float = 0.02
    mixed_precision: str = "auto"
    seed: int = 2022

    def __post_init__(self):
        if self.steps < 1 or self.batch_size < 1 or self.checkpoint_every < 1:
            raise ValueError(f"steps, batch_size and checkpoint_every must be >= 1: {asdict(self)}")
        if not 0.0 < self.mask_probability < 1.0:
            raise ValueError(f"mask_probability must be in (0, 1), got {self.mask_probability}")

    def trainer_settings(self) -> dict:
        return {"lr": self.lr, "epochs": 1, "batch_size": self.batch_size, "warmup_ratio": self.warmup_ratio,
                "weight_decay": self.weight_decay, "max_steps": self.steps, "checkpoint_every": self.checkpoint_every,
                "mixed_precision": self.mixed_precision}


class MaskingCollator:
    """Dynamic masking for training rows; rows that already carry ``labels`` (the held-out rows, masked once with a
    fixed seed so that every evaluation scores the same positions) are only padded."""

    def __init__(self, tokenizer, probability: float):
        self.pad_id = tokenizer.pad_token_id
        self.mlm = DataCollatorForLanguageModeling(tokenizer, mlm_probability=probability, pad_to_multiple_of=8)

    def __call__(self, features):
        features = [{k: v for k, v in f.items() if k != "length"} for f in features]
        if "labels" not in features[0]:
            return self.mlm(features)
        width = max(len(f["input_ids"]) for f in features)
        width += -width % 8
        pad = {"input_ids": self.pad_id, "token_type_ids": 0, "attention_mask": 0, "labels": -100}
        return {key: torch.tensor([list(f[key]) + [value] * (width - len(f[key])) for f in features])
                for key, value in pad.items()}


def _features(tokenizer, text, rows: list[int], max_length: int) -> dict[str, list]:
    encoded = tokenizer([text.titles[i] for i in rows], [text.texts[i] for i in rows], truncation="only_second",
                        max_length=max_length)
    columns = {k: encoded[k] for k in ("input_ids", "token_type_ids", "attention_mask")}
    columns["length"] = [len(x) for x in columns["input_ids"]]
    return columns


def _masked_once(tokenizer, columns: dict[str, list], probability: float, seed: int) -> dict[str, list]:
    """The held-out rows masked once, reproducibly (the loss curve compares like with like)."""
    collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=probability)
    out = {k: [] for k in ("input_ids", "token_type_ids", "attention_mask", "labels", "length")}
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        for i, ids in enumerate(columns["input_ids"]):
            batch = collator([{"input_ids": ids}])
            out["input_ids"].append(batch["input_ids"][0].tolist())
            out["labels"].append(batch["labels"][0].tolist())
            for key in ("token_type_ids", "attention_mask", "length"):
                out[key].append(columns[key][i])
    return out


def _identity(architecture: Architecture, recipe: Recipe, digest: str) -> dict:
    return {"architecture": asdict(architecture), "recipe": asdict(recipe), "text_digest": digest}


def _check_work(work: Path, identity: dict) -> None:
    """Refuse to resume another build's checkpoints: name the settings that differ."""
    path = work / "identity.json"
    if not path.is_file():
        work.mkdir(parents=True, exist_ok=True)
        write_json(path, identity)
        return
    old = read_json(path, dict, "the build's identity")
    if old != identity:
        differ = [f"{part}.{k}" for part in identity for k in (identity[part] if isinstance(identity[part], dict)
                                                                else [None])
                  if (old.get(part, {}).get(k) if k is not None else old.get(part))
                  != (identity[part].get(k) if k is not None else identity[part])]
        raise SystemExit(f"{work} holds a build with other settings ({', '.join(differ)}): give another --work, or "
                         f"delete it to start again")


def build(out: Path, work: Path, corpus: Path, architecture: Architecture, recipe: Recipe,
          limit: int | None = None, progress: bool = True) -> dict:
    """Build (or resume) the base; write ``out`` atomically when training is complete; return its record."""
    # datasets (and its pyarrow) loads when a build runs, not for --help
    from datasets import Dataset

    started = time.time()
    text = load_text(corpus, recipe.held_out_fraction, recipe.seed, limit)
    _check_work(work, _identity(architecture, recipe, text.digest))
    vocab_dir = work / "tokenizer"
    if (vocab_dir / "tokenizer.json").is_file():
        tokenizer = BertTokenizerFast.from_pretrained(str(vocab_dir))
    else:
        log.info("learning a %d-piece WordPiece vocabulary from %d passages", architecture.vocab_size,
                 len(text.texts))
        lines = (f"{title}\n{body}" for title, body in zip(text.titles, text.texts))
        tokenizer = train_wordpiece(lines, architecture.vocab_size, vocab_dir)
    train = Dataset.from_dict(_features(tokenizer, text, text.train_rows, architecture.max_positions))
    held = Dataset.from_dict(_masked_once(tokenizer, _features(tokenizer, text, list(text.held_out),
                                                                architecture.max_positions),
                                          recipe.mask_probability, recipe.seed)) if text.held_out else None
    log.info("masked-LM text: %d passages (%d words), %d held out, %d word pieces a passage on average; digest %s",
             len(text.texts), text.words(), len(text.held_out), sum(train["length"]) // max(len(train), 1),
             text.digest[:12])
    model = new_model(architecture, tokenizer, recipe.seed)
    trained = train_with_checkpoints(model, train, work / "checkpoints", recipe.trainer_settings(), seed=recipe.seed,
                                     data_collator=MaskingCollator(tokenizer, recipe.mask_probability),
                                     eval_dataset=held, train_sampling_strategy="group_by_length",
                                     progress=progress)
    record = {**_identity(architecture, recipe, text.digest), "text": {
        "source": text.source, "passages": len(text.texts), "words": text.words(), "held_out": len(text.held_out),
        "mean_pieces": round(sum(train["length"]) / max(len(train), 1), 1)},
        "vocabulary": len(tokenizer), "parameters": sum(p.numel() for p in model.parameters()),
        "steps": trained["steps"], "mixed_precision": trained["mixed_precision"],
        "this_session": {"seconds": round(time.time() - started, 1), "resumed_from": trained["resumed_from"],
                         "examples_per_s": trained["examples_per_s"], "host": host()},
        "history": _history(trained["history"]),
        "command": "python -m ecqg.mlm.build " + " ".join(sys.argv[1:])}
    _save(model, tokenizer, out, record)
    return record


def _history(log_history: list[dict]) -> list[dict]:
    """Trainer's log, kept to the curve: step, training loss, held-out loss, learning rate."""
    keys = ("step", "loss", "eval_loss", "learning_rate", "epoch")
    return [{k: round(float(e[k]), 5) if isinstance(e[k], float) else e[k] for k in keys if k in e}
            for e in log_history if "loss" in e or "eval_loss" in e]


def _save(model, tokenizer, out: Path, record: dict) -> None:
    """Weights in float16 (half the bytes; the config says float32, so ``from_pretrained`` upcasts on load),
    the tokenizer, the record and its loss curve, renamed into place together."""
    with atomic_path(out) as tmp:
        tmp.mkdir(parents=True)
        plain = BertForMaskedLM(model.config)          # saved as the class every loader knows
        plain.load_state_dict(model.state_dict())
        plain.to(torch.float16).save_pretrained(str(tmp), safe_serialization=True)
        config = read_json(tmp / "config.json", dict, "the saved config")
        write_json(tmp / "config.json", {**config, "dtype": "float32"})
        tokenizer.save_pretrained(str(tmp))
        write_json(tmp / "build.json", record)
        loss_curve(record["history"], tmp / "loss_curve.png")


def main(argv: list[str] | None = None) -> None:
    ap = parser("ecqg.mlm.build", __doc__, paragraphs=2)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the finished base (default %(default)s)")
    ap.add_argument("--work", type=Path, default=DEFAULT_WORK,
                    help="vocabulary, checkpoints (git-ignored; default %(default)s)")
    ap.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="passages (default %(default)s)")
    ap.add_argument("--limit", type=int, default=None, help="the first N passages only (tests)")
    ap.add_argument("--quiet", action="store_true", help="no progress bar (the step log stays)")
    for name, value in {**asdict(Architecture()), **asdict(Recipe())}.items():
        ap.add_argument("--" + name.replace("_", "-"), type=type(value), default=value,
                        help=f"default {value}")
    args = ap.parse_args(argv)
    values = vars(args)
    architecture = Architecture(**{k: values[k] for k in asdict(Architecture())})
    recipe = Recipe(**{k: values[k] for k in asdict(Recipe())})

    configure_environment()
    setup_logging()
    record = build(args.out, args.work, args.corpus, architecture, recipe, args.limit, progress=not args.quiet)
    last = next((e for e in reversed(record["history"]) if "eval_loss" in e), {})
    print(f"{args.out}: {record['parameters'] / 1e6:.1f}M parameters, {record['steps']} steps, held-out masked-LM "
          f"loss {last.get('eval_loss', float('nan')):.3f}")


if __name__ == "__main__":
    main()
