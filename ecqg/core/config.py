"""Parameters: load ``params.yaml``, overlay profile presets, validate every value at load time.

``params/mini.yaml`` is the complete base; ``params/<profile>.yaml`` lists only what a profile changes.
``python -m ecqg.core.config use smoke`` (``make profile P=smoke``) writes ``params.yaml`` = base + overlay, keeping the
base file's comments, so DVC sees exactly which values changed and reruns only what depends on them.

Size: one module, because its bulk is one table (``RULES``, a line per parameter): the params schema in one place.
"""

from __future__ import annotations

import copy
import math
import difflib
import io
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any, Callable

import yaml

from ecqg.core import cli
from ecqg.core import settings
from ecqg.core.errors import ConfigError
from ecqg.core.io import write_text
from ecqg.core.choices import INDEX_KINDS
from ecqg.core.train_config import Rule
from ecqg.core.variants import ALL as VARIANTS_ALL

PARAMS_FILE = Path("params.yaml")
PRESETS_DIR = Path("params")
BASE_PROFILE = "mini"
# The profiles are the presets in params/ (a new one is one file: its overlay of mini); argparse's choices.
PROFILES = settings.PROFILES
# dotted key -> (allowed types, check or None, what a valid value looks like): the rules the typed settings blocks
# declare on their fields (ecqg.core.settings), one schema for validation and the typed tree.
RULES: dict[str, Rule] = settings.Params.rules()


def _stride_below_window(flat: dict) -> str | None:
    if flat["mrc.stride"] >= flat["mrc.max_length"]:
        return (f"'mrc.stride' ({flat['mrc.stride']}) must be below 'mrc.max_length' ({flat['mrc.max_length']}): "
                "the reader's windows overlap by the stride")
    return None


def _heldout_leaves_training_data(flat: dict) -> str | None:
    limit, held = flat["dpr.finetune.max_examples"], flat["dpr.finetune.heldout"]
    if limit is not None and held >= limit:
        return (f"'dpr.finetune.heldout' ({held}) must be below 'dpr.finetune.max_examples' ({limit}), or no gold "
                "record is left to train on")
    return None


def _index_params_fit_kind(flat: dict) -> str | None:
    kind, given = flat["dpr.index.kind"], flat["dpr.index.params"]
    unknown = sorted(set(given) - set(INDEX_KINDS[kind]))
    if unknown:
        allowed = sorted(INDEX_KINDS[kind]) or "none"
        return f"'dpr.index.params' has {unknown}, which a '{kind}' index does not take (allowed: {allowed})"
    return None


def _hybrid_depth_within_runs(flat: dict) -> str | None:
    if flat["hybrid.depth"] > flat["retrieval.depth"]:
        return (f"'hybrid.depth' ({flat['hybrid.depth']}) must not exceed 'retrieval.depth' "
                f"({flat['retrieval.depth']}): the fused runs hold only that many passages per question")
    return None


def _hybrids_trained(flat: dict) -> str | None:
    chosen = flat["dpr.variants"]
    untrained = [v for v in flat["hybrid.variants"] if chosen != VARIANTS_ALL and v not in chosen]
    if untrained:
        return f"'hybrid.variants' fuses {untrained}, which 'dpr.variants' ({chosen}) does not train"
    return None


def _doses_below_the_sets(flat: dict) -> str | None:
    above = [n for n in flat["mixing.doses"] if n >= flat["mixing.total"]]
    if above:
        return (f"'mixing.doses' {above} must be below 'mixing.total' ({flat['mixing.total']}): the doses are cuts "
                "of the sets, whose full size is the fine-tuned variants' dose")
    return None


def expected_pools(flat: dict) -> dict[str, float]:
    """The unconditioned and conditioned questions stages 02-04 are expected to keep, from the sampling counts and
    the measured ``yields``: sampled x parsed x stage 1 x stage 2 (``filtering.keep_fraction``; the ``rank`` rule's
    share is not known in advance, so it counts as 1) x distinct."""
    stage1 = {"roundtrip": flat["yields.roundtrip"], "answer_in_passage": flat["yields.answer_in_passage"],
              "none": 1.0}[flat["filtering.stage1"]]
    hard = flat["filtering.keep_fraction"] if flat["filtering.hardness"] == "lowest_score" else 1.0
    after = stage1 * hard * flat["yields.distinct"]
    samples = flat["qg.generate.samples"]
    conditioned = flat["attention.condition_passages"] or flat["attention.sample_passages"]
    return {"uncon": flat["qg.generate.uncon_passages"] * samples * flat["yields.parsed_uncon"] * after,
            "con": conditioned * flat["yields.entity_passages"] * flat["attention.lowest_entities"] * samples
            * flat["yields.parsed_con"] * after}


def _sets_reach_their_size(flat: dict) -> str | None:
    """With ``mixing.require_total``: UnCon needs ``total`` unconditioned questions after filtering (Mixed's half
    is taken from them) and Mixed ``total / 2`` conditioned ones, even when the keep rates come out ``yields.margin``
    below the measured yields (a share: the pools x (1 - margin) must reach the sizes); refuse, naming the keys,
    when the sampling counts fall short. The mixing stage refuses a short pool at run time too
    (:func:`ecqg.filtering.mixing.build_sets`)."""
    if not flat["mixing.require_total"]:
        return None
    pools, total, margin = expected_pools(flat), flat["mixing.total"], flat["yields.margin"]
    planned = {k: v * (1 - margin) for k, v in pools.items()}
    short = []
    if planned["uncon"] < total:
        need = math.ceil(flat["qg.generate.uncon_passages"] * total / planned["uncon"])
        short.append(f"UnCon needs {total:,} unconditioned questions, but 'qg.generate.uncon_passages' "
                     f"({flat['qg.generate.uncon_passages']:,}) x 'qg.generate.samples' ({flat['qg.generate.samples']}) "
                     f"x the yields gives ~{pools['uncon']:,.0f}, ~{planned['uncon']:,.0f} with the margin: raise it "
                     f"to {need:,}")
    if planned["con"] < total / 2:
        key = "attention.condition_passages" if flat["attention.condition_passages"] else "attention.sample_passages"
        need = math.ceil(flat[key] * (total / 2) / planned["con"])
        short.append(f"Mixed needs {total // 2:,} conditioned questions, but '{key}' ({flat[key]:,}) x "
                     f"'yields.entity_passages' x 'attention.lowest_entities' x 'qg.generate.samples' x the yields "
                     f"gives ~{pools['con']:,.0f}, ~{planned['con']:,.0f} with the margin: raise it to {need:,}")
    if short:
        return ("'mixing.total' cannot be reached ('mixing.require_total' is true; 'yields.margin' "
                f"{margin:g}: the keep rates may come out {margin:.0%} below the measured yields): " + "; ".join(short)
                + f" (stage 1 '{flat['filtering.stage1']}', keep_fraction {flat['filtering.keep_fraction']})")
    return None


def _related_seeds_lead_seeds(flat: dict) -> str | None:
    seeds, related = flat["dpr.seeds"], flat["dpr.related_seeds"]
    if related != seeds[:len(related)]:
        return (f"'dpr.related_seeds' ({related}) must be a leading part of 'dpr.seeds' ({seeds}), e.g. "
                f"{seeds[:1]} or {seeds}: the first seed's models of every system feed the same analyses")
    return None


def _curve_needs_corpus_validation(flat: dict) -> str | None:
    if flat["dpr.finetune.curve_runs"] and flat["dpr.finetune.validation"] != "corpus":
        return "'dpr.finetune.curve_runs' needs 'dpr.finetune.validation: corpus' (the curve reuses its encoding)"
    return None


def _processes_on_one_gpu(flat: dict) -> str | None:
    if flat["processes"] != "auto" and flat["processes"] > 1 and flat["device"].startswith("cuda:"):
        return (f"'processes' is {flat['processes']} but 'device' is {flat['device']!r}: every process would use "
                "that one GPU; use device: auto (each process takes the GPU of its local rank)")
    return None


def _lowest_below_min_entities(flat: dict) -> str | None:
    if flat["attention.min_entities"] <= flat["attention.lowest_entities"]:
        return (f"'attention.min_entities' ({flat['attention.min_entities']}) must exceed "
                f"'attention.lowest_entities' ({flat['attention.lowest_entities']}) so the lowest- and "
                "highest-attended entities differ")
    return None


def _hardness_after_the_round_trip(flat: dict) -> str | None:
    """The paper keeps the hard questions only among those a reader answered from their passage; without the round
    trip, "hardest" selects the questions least related to their passage. Refused unless the profile says it is an
    ablation of the chain."""
    selects = flat["filtering.hardness"] == "rank" or flat["filtering.keep_fraction"] < 1
    if flat["filtering.stage1"] == "none" and selects and not flat.get("filtering.ablation", False):
        return ("'filtering.stage1' is none while the hardness stage selects ('filtering.hardness' "
                f"{flat['filtering.hardness']}, 'filtering.keep_fraction' {flat['filtering.keep_fraction']}): the "
                "paper's filter chain keeps hard questions only among those the round trip passed, so without it "
                "'hardest' means least related to the passage. Set 'filtering.stage1' to roundtrip, or say the "
                "profile is an ablation with 'filtering.ablation: true'")
    return None


# Rules that relate several keys: each returns a message naming the keys, or None when the values agree.
CROSS_RULES: tuple[Callable[[dict], str | None], ...] = (
    _doses_below_the_sets,
    _sets_reach_their_size,
    _stride_below_window, _heldout_leaves_training_data, _index_params_fit_kind,
    _lowest_below_min_entities, _hybrid_depth_within_runs, _hybrids_trained, _processes_on_one_gpu,
    _curve_needs_corpus_validation, _related_seeds_lead_seeds, _hardness_after_the_round_trip)
# Input files named in params (dotted key -> path), checked to exist by `check_inputs` before a run starts.
INPUT_KEYS = ("data.corpus", "data.train_gold", "data.nq_dev", "data.mrc_unanswerable")
# Keys whose value is a mapping checked as a whole (their children are not separate rules).
_LEAF_MAPPINGS = settings.Params.leaf_mappings()


def _flatten(tree: dict, prefix: str = "") -> dict[str, Any]:
    flat = {}
    for key, value in tree.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and dotted not in _LEAF_MAPPINGS:
            flat.update(_flatten(value, dotted + "."))
        else:
            flat[dotted] = value
    return flat


def validate(params: dict, source: str = "params") -> dict:
    """Raise ConfigError naming the file and dotted key of the first problem; return ``params`` unchanged."""
    if not isinstance(params, dict):
        raise ConfigError(f"{source}: expected a mapping at the top level")
    flat = _flatten(params)
    for key in flat:
        if key not in RULES:
            hint = difflib.get_close_matches(key, RULES, n=1)
            raise ConfigError(f"{source}: unknown key '{key}'" + (f" (did you mean '{hint[0]}'?)" if hint else ""))
    for key, (types, check, expected) in RULES.items():
        if key not in flat:
            raise ConfigError(f"{source}: missing key '{key}' ({expected})")
        value = flat[key]
        if isinstance(value, bool) and bool not in types:
            ok = False
        else:   # an integer is a fine value for a real-valued setting (lr: 1)
            ok = isinstance(value, types) or (float in types and isinstance(value, int))
        if not ok and isinstance(value, str) and (int in types or float in types) and _is_number(value):
            raise ConfigError(f"{source}: '{key}' is the string {value!r}, not a number: YAML reads an exponent "
                              f"without a decimal point as text; write it as {_yaml_number(value)}")
        if not ok:
            raise ConfigError(f"{source}: '{key}' is {value!r} ({type(value).__name__}); expected {expected}")
        if check is not None and not check(value):
            raise ConfigError(f"{source}: '{key}' is {value!r}, out of range; expected {expected}")
    for rule in CROSS_RULES:
        problem = rule(flat)
        if problem:
            raise ConfigError(f"{source}: {problem}")
    return params


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _yaml_number(text: str) -> str:
    """``1e-4`` -> ``1.0e-4``: the spelling YAML 1.1 (PyYAML, DVC) reads as a float."""
    mantissa, _, exponent = text.lower().partition("e")
    if exponent and "." not in mantissa:
        mantissa += ".0"
    return f"{mantissa}e{exponent}" if exponent else mantissa


def _yaml_float(value: float) -> str:
    """A float as text that YAML 1.1 (PyYAML, DVC) reads back as the same float: ``2e-05`` -> ``2.0e-05`` (ruamel
    writes the former, which PyYAML reads as a string)."""
    text = repr(float(value))
    if text in ("inf", "-inf", "nan"):
        return {"inf": ".inf", "-inf": "-.inf", "nan": ".nan"}[text]
    return _yaml_number(text)


def _plain_str(text: str) -> bool:
    """Whether ``text`` written unquoted reads back as the same string in YAML 1.1 (PyYAML, DVC): ``auto`` does,
    ``no`` does not (ruamel, writing YAML 1.2, leaves it bare and PyYAML reads False; ``mixed_precision: "no"``)."""
    try:
        return yaml.safe_load(text) == text
    except yaml.YAMLError:
        return False


def _input_problem(path: str) -> tuple[str, bool] | None:
    """Why ``path`` cannot be read as an input, and whether that is only its absence; None when it is a readable
    file. No input is a folder: every reader of :mod:`ecqg.data` (``records.read_corpus`` included) reads one file, so
    a pyserini JsonCollection folder must be given as one .jsonl file, not as the folder."""
    where = Path(path)
    if not where.exists():
        return "which does not exist", True
    if where.is_dir():
        return ("which is a folder, not a file (no input is read from a folder; for a pyserini JsonCollection, "
                "concatenate its .jsonl files into one and name that)"), False
    if not where.is_file():
        return "which is not a regular file", False
    try:
        with open(where, "rb") as handle:
            head = handle.read(2)
    except OSError as exc:
        return f"which cannot be read ({exc.strerror})", False
    if where.name.endswith(".gz") and head and head != b"\x1f\x8b":
        return "which ends in .gz but is not gzip data", False
    return None


def input_problems(params: dict, keys: tuple[str, ...] = INPUT_KEYS) -> list[tuple[str, bool]]:
    """Every input that is not a readable file, as ``("'data.corpus' names X, which ...", missing)``: all of them at
    once, so one run of `config inputs` lists everything left to download or fix. ``keys``: the inputs to check
    besides the test sets (a stage checks those it reads)."""
    flat = _flatten(params)
    named = [(key, flat[key]) for key in keys]
    named += [(f"data.test_sets.{name}", path) for name, path in flat["data.test_sets"].items()]
    problems = []
    for key, path in named:
        found = _input_problem(path)
        if found is not None:
            problems.append((f"'{key}' names {path}, {found[0]}", found[1]))
    return problems


def _listed(problems: list[str]) -> str:
    """One problem on the line, several as an indented list (to follow a colon)."""
    return f" {problems[0]}" if len(problems) == 1 else "".join(f"\n  {problem}" for problem in problems)


def _problems_error(source: str, problems: list[str]) -> ConfigError:
    count = "" if len(problems) == 1 else f" {len(problems)} inputs are missing or wrong:"
    return ConfigError(f"{source}:{count}{_listed(problems)}\n(paths relative to {Path.cwd()})")


def check_inputs(params: dict, source: str = "params", keys: tuple[str, ...] = INPUT_KEYS) -> dict:
    """Raise ConfigError naming the dotted key of every input that does not exist or is not a readable file
    (``data.corpus``, ``data.test_sets.<name>``, ...): before a run, not minutes into it as a bare FileNotFoundError
    or IsADirectoryError. ``keys``: the inputs to check besides the test sets (a stage checks those it reads)."""
    problems = [message for message, _ in input_problems(params, keys)]
    if problems:
        raise _problems_error(source, problems)
    return params


def _read_yaml(path: Path) -> dict:
    try:
        with open(path, encoding="utf-8") as handle:
            data = yaml.safe_load(handle)
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found in {Path.cwd()} (run from the repository root, the folder "
                          "that holds dvc.yaml and params.yaml)") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML ({exc})") from None
    return _bare_no(data or {})


def _bare_no(node):
    """``mixed_precision: no`` back to the string it means. YAML 1.1 (PyYAML, and DVC reading params) takes a bare
    ``no`` for false, and ``dvc exp run -S`` rewrites params.yaml with ruamel (YAML 1.2), which drops the quotes of
    ``"no"``: the one string a params file holds that YAML 1.1 reads as a boolean."""
    if isinstance(node, dict):
        return {k: "no" if k == "mixed_precision" and node[k] is False else _bare_no(node[k]) for k in node}
    return node


def load(path: str | Path = PARAMS_FILE) -> dict:
    """Load and validate a params file (normally ``params.yaml``); host-dependent values (``auto``) resolved."""
    path = Path(path)
    return resolve_host(validate(_read_yaml(path), str(path)))


def load_settings(path: str | Path = PARAMS_FILE) -> settings.Params:
    """:func:`load`, typed (``ecqg.core.settings``): what a stage or a notebook builds once and passes down by block."""
    return settings.of(load(path))


def host_cores() -> int:
    """The cores this process may run on (its affinity mask: a container's or a scheduler's share, not the box's)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def resolve_host(params: dict) -> dict:
    """``bm25.threads: auto`` -> the host's cores, at load time: params.yaml (and DVC's view of it) stays the same
    on every machine, while each stage asks Lucene for the threads its host has."""
    if params.get("bm25", {}).get("threads") == "auto":
        params = copy.deepcopy(params)
        params["bm25"]["threads"] = host_cores()
    return params


def deep_merge(base: dict, overlay: dict, where: str = "") -> dict:
    """Overlay values onto base; an overlay key the base lacks is an error (catches typos in presets)."""
    merged = copy.deepcopy(base)
    for key, value in overlay.items():
        dotted = f"{where}{key}"
        if key not in merged:
            raise ConfigError(f"preset sets '{dotted}', which the base profile does not define")
        if isinstance(value, dict) and isinstance(merged[key], dict) and dotted not in _LEAF_MAPPINGS:
            merged[key] = deep_merge(merged[key], value, dotted + ".")
        else:
            merged[key] = value
    return merged


EXTENDS = "extends"     # an overlay's key naming the profile it overlays (default: the base profile)


def lineage(profile: str, presets_dir: Path = PRESETS_DIR) -> list[str]:
    """The presets a profile is made of, base first (``mini``, ``paper``, ``paper_three``)."""
    chain = [profile]
    while chain[-1] != BASE_PROFILE:
        if chain[-1] not in PROFILES:
            raise ConfigError(f"unknown profile '{chain[-1]}'; choose one of {PROFILES}")
        parent = _read_yaml(presets_dir / f"{chain[-1]}.yaml").get(EXTENDS, BASE_PROFILE)
        if parent in chain:
            raise ConfigError(f"{presets_dir}/{chain[-1]}.yaml: '{EXTENDS}: {parent}' makes a cycle ({chain})")
        chain.append(parent)
    return chain[::-1]


def preset(profile: str, presets_dir: Path = PRESETS_DIR) -> dict:
    """The validated parameters of a profile: the base with each overlay of its lineage applied in turn."""
    if profile not in PROFILES:
        raise ConfigError(f"unknown profile '{profile}'; choose one of {PROFILES}")
    chain = lineage(profile, presets_dir)
    merged = _read_yaml(presets_dir / f"{BASE_PROFILE}.yaml")
    for name in chain[1:]:
        overlay = _read_yaml(presets_dir / f"{name}.yaml")
        overlay.pop(EXTENDS, None)
        merged = deep_merge(merged, overlay)
    return validate(merged, f"{presets_dir}/{profile}.yaml over {' over '.join(chain[-2::-1])}.yaml")


def render_profile(profile: str, presets_dir: Path = PRESETS_DIR) -> str:
    """The text ``make profile P=<profile>`` writes: base preset with the profile overlay, the base's comments kept."""
    # ruamel (round-trip YAML that keeps comments) serves `make profile` only, not every params load
    from ruamel.yaml import YAML

    merged = preset(profile, presets_dir)
    rt = YAML()
    rt.preserve_quotes = True
    rt.representer.add_representer(type(None), lambda r, _: r.represent_scalar("tag:yaml.org,2002:null", "null"))
    rt.representer.add_representer(float, lambda r, v: r.represent_scalar("tag:yaml.org,2002:float", _yaml_float(v)))
    rt.representer.add_representer(str, lambda r, v: r.represent_scalar("tag:yaml.org,2002:str", v,
                                                                        style=None if _plain_str(v) else '"'))
    with open(presets_dir / f"{BASE_PROFILE}.yaml", encoding="utf-8") as handle:
        doc = rt.load(handle)

    def assign(node, values):
        for key, value in values.items():
            if isinstance(value, dict) and key in node and isinstance(node[key], dict) and value:
                if set(node[key]) != set(value):  # a leaf mapping replaced wholesale (e.g. test_sets)
                    node[key] = value
                else:
                    assign(node[key], value)
            elif node.get(key) != value:  # untouched values keep their formatting
                node[key] = value

    assign(doc, merged)
    out = io.StringIO()
    out.write(f"# Generated by `make profile P={profile}` from "
              + " + ".join(f"params/{name}.yaml" for name in lineage(profile, presets_dir))
              + ". Edit freely to run variants.\n")
    rt.dump(doc, out)
    return out.getvalue()


_GENERATED = re.compile(r"^# Generated by `make profile P=([A-Za-z0-9_-]+)`")


def hand_edits(target: Path = PARAMS_FILE, presets_dir: Path = PRESETS_DIR) -> list[str]:
    """Dotted keys whose value in ``target`` differs from the profile it was generated from (all of them when it
    was not generated at all); empty when ``target`` is absent or untouched, or lacks only keys the preset has
    gained since it was written (a repository update adds settings; regenerating keeps every value of the user's)."""
    if not target.is_file():
        return []
    text = target.read_text(encoding="utf-8")
    match = _GENERATED.match(text)
    if match is None or match.group(1) not in PROFILES:
        return ["(the whole file: it was not written by `make profile`)"]
    if text == render_profile(match.group(1), presets_dir):
        return []
    mine, theirs = _flatten(yaml.safe_load(text) or {}), _flatten(preset(match.group(1), presets_dir))
    changed = sorted(k for k in set(mine) | set(theirs) if mine.get(k, "<absent>") != theirs.get(k, "<absent>"))
    gained = [k for k in changed if k not in mine]   # keys the preset gained since: nothing of the user's
    if changed and len(gained) == len(changed):
        return []
    return [k for k in changed if k not in gained] or ["(comments or formatting)"]


def write_profile(profile: str, target: Path = PARAMS_FILE, presets_dir: Path = PRESETS_DIR,
                  force: bool = False) -> Path:
    """Write ``target`` = base preset with the profile overlay, keeping the base file's comments. Refuses to
    overwrite hand edits unless ``force`` (then the edited file is kept as ``<target>.bak``)."""
    edits = hand_edits(target, presets_dir)
    if edits and not force:
        raise ConfigError(f"{target} has hand edits ({', '.join(edits[:8])}{', ...' if len(edits) > 8 else ''}); "
                          f"`make profile P={profile} FORCE=1` overwrites it and keeps your file as {target}.bak")
    if edits:
        backup = target.with_name(target.name + ".bak")
        shutil.copy2(target, backup)
        print(f"kept your edited {target} as {backup}", file=sys.stderr)
    return write_text(target, render_profile(profile, presets_dir))


def main(argv: list[str] | None = None) -> int:
    parser = cli.parser("ecqg.core.config", __doc__, paragraphs=2)
    sub = parser.add_subparsers(dest="command", required=True)
    use = sub.add_parser("use", help="write params.yaml for a profile")
    use.add_argument("profile", choices=PROFILES)
    use.add_argument("--force", action="store_true", help="overwrite hand edits (kept as params.yaml.bak)")
    sub.add_parser("check", help="validate params.yaml (values and cross-key rules); list every input file not "
                   "present yet, fail on one that is there but not a readable file")
    sub.add_parser("inputs", help="fail unless every input file params.yaml names exists and is a readable file, "
                   "listing every one that is not (make repro runs it)")
    args = parser.parse_args(argv)
    try:
        if args.command == "use":
            write_profile(args.profile, force=args.force)
            print(f"params.yaml now holds the '{args.profile}' profile; run `make repro` (dvc repro) to rebuild")
        elif args.command == "check":
            # a fresh clone of the paper profile has valid params and none of DPR's files yet: say so, do not fail;
            # an input that is there but wrong (a folder, not gzip) fails
            params = load()
            problems = input_problems(params)
            absent = [message for message, missing in problems if missing]
            wrong = [message for message, missing in problems if not missing]
            if not problems:
                print(f"params.yaml is valid (profile {params['profile']}); its input files exist")
            elif absent:
                print(f"params.yaml is valid (profile {params['profile']}); not present yet:{_listed(absent)}\n"
                      f"(paths relative to {Path.cwd()}; `make repro` stops until they are)")
            if wrong:
                raise _problems_error(str(PARAMS_FILE), wrong)
        else:
            check_inputs(load(), str(PARAMS_FILE))
            print("params.yaml: every input file exists and is a readable file")
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
