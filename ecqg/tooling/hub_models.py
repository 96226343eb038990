"""The Hugging Face hub models a profile names, checked before a run and pinned to the revision first used:
``python -m ecqg.tooling.hub_models check`` (``make repro`` runs it) and ``fetch`` (on a machine with internet).

Why: ``params/paper.yaml`` names ``bert-base-uncased``, ``facebook/bart-large`` and ``deepset/roberta-base-squad2`` by
hub id, and a hub id is not a version: the weights behind ``main`` can change, neither DVC nor a reader could see
which a run used, and a node without internet found out at its first ``from_pretrained``, hours into ``dvc repro``.
Here every model reference of :data:`MODEL_KEYS` that is a hub id (not ``bundled:...``, not a directory) must be in
the local cache (``HF_HOME`` / ``HF_HUB_CACHE``) when the hub is off (``HF_HUB_OFFLINE=1``, the Makefile's default)
at its pinned commit. The presets' models are pinned in the committed :data:`PRESET_PINS`; any other hub id a
params file names is pinned to the snapshot ``main`` resolves to the first time it is checked, in
``downloads/HUB_REVISIONS`` (like ``downloads/SHA256SUMS`` for the input files, :mod:`ecqg.tooling.inputs`; share
it). Every later check refuses a cache whose ``main`` is not the pin. ``fetch`` downloads the pinned commit and
points the cache's ``main`` at it, because the stages load a hub id as ``main`` (``from_pretrained(ref)``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import huggingface_hub
import yaml
from huggingface_hub import constants
from huggingface_hub.file_download import repo_folder_name

from ecqg.core import cli, config, settings

MODEL_KEYS = ("dpr.base_model", "qg.model", "mrc.model")
PINS = Path("downloads") / "HUB_REVISIONS"
PRESET_PINS = Path("params") / "hub_revisions.txt"
WEIGHT_FILES = ("*.safetensors", "pytorch_model.bin")      # safetensors where the commit has them


def hub_models(dpr: settings.Dpr, qg: settings.Qg, mrc: settings.Mrc) -> dict[str, str]:
    """``params key -> hub id`` for the model references (:data:`MODEL_KEYS`) that name the hub."""
    refs = dict(zip(MODEL_KEYS, (dpr.base_model, qg.model, mrc.model)))
    return {key: ref for key, ref in refs.items()
            if isinstance(ref, str) and not ref.startswith("bundled:") and not os.path.isdir(ref)}


def read_pins(path: Path = PINS) -> dict[str, str]:
    pins = {}
    if path.is_file():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if line.strip() and not line.startswith("#"):
                parts = line.split()
                if len(parts) != 2:
                    raise ValueError(f"{path}, line {number}: expected '<hub id> <revision>', got {line!r}")
                pins[parts[0]] = parts[1]
    return pins


def write_pins(pins: Mapping[str, str], path: Path = PINS) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["# hub id and the revision (commit) first used; python -m ecqg.tooling.hub_models checks every run"]
    path.write_text("\n".join(lines + [f"{ref} {rev}" for ref, rev in sorted(pins.items())]) + "\n", encoding="utf-8")


def cached_revision(ref: str, cache_dir: str | None = None) -> str | None:
    """The commit of the snapshot ``main`` resolves to in the local cache, or None when the model is not there."""
    found = huggingface_hub.try_to_load_from_cache(ref, "config.json", cache_dir=cache_dir)
    return Path(found).parent.name if isinstance(found, str) else None


def hub_cache() -> str:
    return constants.HF_HUB_CACHE


def offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes", "on")


def point_main(ref: str, revision: str, cache_dir: str | None = None) -> None:
    """Make the cache's ``main`` of ``ref`` the snapshot ``revision`` (what an offline ``from_pretrained`` loads)."""
    refs = Path(cache_dir or hub_cache()) / repo_folder_name(repo_id=ref, repo_type="model") / "refs"
    refs.mkdir(parents=True, exist_ok=True)
    (refs / "main").write_text(revision)


def pin_of(ref: str, fixed: Mapping[str, str], pins: Mapping[str, str], preset_pins: Path,
           pins_path: Path) -> tuple[str | None, Path]:
    """The revision ``ref`` is pinned to and the file that pins it: a preset's pin wins over one recorded here."""
    return (fixed[ref], preset_pins) if ref in fixed else (pins.get(ref), pins_path)


def check(models: Mapping[str, str], pins_path: Path = PINS, cache_dir: str | None = None,
          params_file: str = "params.yaml", hub_off: bool | None = None, preset_pins: Path = PRESET_PINS) -> list[str]:
    """Every hub model (``models``: :func:`hub_models`) cached (when the hub is off) and at its pinned revision;
    records first-seen revisions. Returns one line per model; raises with every problem named (params file, key, hub
    id)."""
    hub_off = offline() if hub_off is None else hub_off
    pins, fixed, problems, lines, recorded = read_pins(pins_path), read_pins(preset_pins), [], [], False
    for key, ref in models.items():
        revision = cached_revision(ref, cache_dir)
        if revision is None:
            if hub_off:
                where = cache_dir or hub_cache()
                problems.append(f"{params_file}: {key} = {ref}: not in the Hugging Face cache ({where}"
                                ") and the hub is off (HF_HUB_OFFLINE=1): run `python -m ecqg.tooling.hub_models "
                                "fetch` where there is internet, with the same HF_HOME, and copy the cache over; or "
                                f"set {key} to a local directory")
            else:
                lines.append(f"{key} = {ref}: not cached yet; from_pretrained downloads it (pin it after with `check`)")
            continue
        pinned, source = pin_of(ref, fixed, pins, preset_pins, pins_path)
        if pinned is None:
            pins[ref], recorded = revision, True
            lines.append(f"{key} = {ref}: revision {revision} (first use: pinned in {pins_path})")
        elif pinned != revision:
            problems.append(f"{params_file}: {key} = {ref}: the cache's main is {revision}, {source} pins {pinned}: "
                            f"fetch the pinned revision (`python -m ecqg.tooling.hub_models fetch`) or, to move on "
                            f"on purpose, change its line in {source}")
        else:
            lines.append(f"{key} = {ref}: revision {revision} (pinned)")
    if problems:
        raise RuntimeError("hub models not ready:\n  " + "\n  ".join(problems))
    if recorded:
        write_pins(pins, pins_path)
    return lines


def weight_patterns(files: Sequence[str]) -> list[str]:
    """The files a model needs: configs and vocabularies, and one copy of the weights (safetensors when there)."""
    weights = [WEIGHT_FILES[0]] if any(name.endswith(".safetensors") for name in files) else [WEIGHT_FILES[1]]
    return ["*.json", "*.txt", "*.model"] + weights


def fetch(models: Mapping[str, str], pins_path: Path = PINS, cache_dir: str | None = None,
          preset_pins: Path = PRESET_PINS) -> list[str]:
    """Download each hub model (``models``: :func:`hub_models`) at its pinned revision (``main`` when none) into the
    cache, point the cache's ``main`` at it, and pin what was not pinned."""
    pins, fixed, lines, recorded = read_pins(pins_path), read_pins(preset_pins), [], False
    for key, ref in models.items():
        revision, _ = pin_of(ref, fixed, pins, preset_pins, pins_path)
        patterns = weight_patterns(huggingface_hub.list_repo_files(ref, revision=revision))
        path = huggingface_hub.snapshot_download(ref, revision=revision, cache_dir=cache_dir,
                                                allow_patterns=patterns)
        point_main(ref, Path(path).name, cache_dir)
        if revision is None:
            pins[ref], recorded = Path(path).name, True
        lines.append(f"{key} = {ref}: revision {Path(path).name} in {path}")
    if recorded:
        write_pins(pins, pins_path)
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = cli.parser("ecqg.tooling.hub_models", __doc__)
    parser.add_argument("command", choices=("check", "fetch"))
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--profile", help="check a preset of params/ (e.g. paper) instead of --params")
    parser.add_argument("--pins", type=Path, default=PINS)
    args = parser.parse_args(argv)
    if args.profile:
        args.params = f"params/{args.profile}.yaml"
        tree = settings.of(yaml.safe_load(config.render_profile(args.profile, Path(config.PRESETS_DIR))))
    else:
        tree = config.load_settings(args.params)
    models = hub_models(tree.dpr, tree.qg, tree.mrc)
    if not models:
        print(f"{args.params} names no hub model ({', '.join(MODEL_KEYS)}: bundled or local)")
        return 0
    try:
        lines = (check(models, args.pins, params_file=args.params) if args.command == "check"
                 else fetch(models, args.pins))
    except RuntimeError as err:
        print(err, file=sys.stderr)
        return 1
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
