"""Every pipeline output path, defined once. dvc.yaml repeats them (it is YAML); a test checks the two agree."""

from pathlib import Path

OUTPUTS = Path("outputs")

# Stages `input_test_set@<name>`: the digest of each test-set file params names (prepare depends on them).
INPUTS = OUTPUTS / "inputs"

# Stage `prepare`: the bundle (or the paper's files) in one schema, sub-sampled per profile.
PREPARED = OUTPUTS / "data"
CORPUS = PREPARED / "corpus.jsonl"
QUESTIONS = PREPARED / "questions"          # <set>.jsonl per test set
TRAIN_GOLD = PREPARED / "train_gold.jsonl"  # annotated triples (bundle), or...
TRAIN_GOLD_DPR = PREPARED / "train_gold_dpr.json"  # ...DPR retriever-json given as input (paper: nq-train.json)
NQ_DEV = PREPARED / "nq_dev.jsonl"
# Passages outside the searched corpus that synthetic questions may still be written about (data.synthetic_pool: all):
# the rest of data.corpus after the max_corpus_passages cut; empty otherwise.
POOL_EXTRA = PREPARED / "pool_extra.jsonl"

# Stages `index_bm25`, `index_tfidf`.
BM25_INDEX = OUTPUTS / "indexes" / "bm25"
TFIDF_INDEX = OUTPUTS / "indexes" / "tfidf"

# Stage `tokenize_corpus`: the corpus in the base model's word pieces, read by every dense encoding (Arrow).
TOKENIZED_CORPUS = OUTPUTS / "tokenized" / "corpus"

# Stage `training_data`: the gold DPR training set in DPR retriever-json format (BM25 hard negatives):
# annotated triples, and NQ dev questions with BM25-mined positives (distant supervision).
GOLD_DPR = OUTPUTS / "train" / "gold_dpr.json"
NQ_DEV_DISTANT = OUTPUTS / "train" / "nq_dev_distant.json"

# Retrieval runs (TREC format): outputs/runs/<system>/<set>.trec
RUNS = OUTPUTS / "runs"

# Stage 05 (DPR training, one per variant) and `retrieve_dense`.
MODELS = OUTPUTS / "models"                 # dpr_<variant>_s<seed>/: bi-encoder (safetensors) + history.jsonl
CHECKPOINTS = OUTPUTS / "checkpoints"       # dpr_<variant>_s<seed>/<fingerprint>/: resumable; no DVC output
DENSE_INDEXES = OUTPUTS / "indexes" / "dense"

# Stage 01 (attention-bias study): per-passage lowest-attended entities, the input of conditioned QG.
ATTENTION = OUTPUTS / "attention"
QG_ENTITIES = ATTENTION / "low_attention_entities.jsonl"
ATTENTION_PASSAGES = ATTENTION / "passages.jsonl"        # per passage and encoder: entropy, sentence shares
ATTENTION_ENTITIES = ATTENTION / "entities.jsonl"        # per entity and encoder: attention, position

# Stage 02 (question generation): the two generators, their questions, and the Table 1 probe questions
# (conditioned questions about each studied passage's highest- and lowest-attended entities).
QG = OUTPUTS / "qg"
QG_MODELS = QG / "models"                   # <generator>/: an ordinary transformers seq2seq checkpoint
QG_CHECKPOINTS = CHECKPOINTS / "qg"         # <generator>/<fingerprint>/: resumable Trainer state
QG_PROBES = QG / "probe_questions.jsonl"

# Stage 03 (filtering): the MRC model, every generated question's decision, the survivors per generator.
FILTERING = OUTPUTS / "filtering"
MRC_MODEL = FILTERING / "mrc_model"
MRC_CHECKPOINTS = CHECKPOINTS / "mrc"
FILTER_DECISIONS = FILTERING / "decisions.jsonl"
FILTERED_PROBES = FILTERING / "probes.jsonl"   # probe questions that pass stage 1 (Table 1, notebook 06)

# Stage 04 (mixing): the UnCon and Mixed synthetic training sets, DPR retriever-json.
SYNTHETIC = OUTPUTS / "synthetic"
# Stage pseudo_queries: the generator-free ETM and RSM sets (Luo et al. 2022), DPR retriever-json.
PSEUDO = OUTPUTS / "pseudo"
PSEUDO_KINDS = ("etm", "rsm")
# Stage tempqg (notebook 08): TempQG's templates, template selector, template-conditioned generator, its questions
# and its DPR retriever-json set (Luo et al. 2022).
TEMPQG = OUTPUTS / "tempqg"
TEMPQG_CHECKPOINTS = CHECKPOINTS / "tempqg"

# Notebooks, figures.
NOTEBOOKS_SRC = Path("notebooks")
NOTEBOOKS_OUT = OUTPUTS / "notebooks"
FIGURES = OUTPUTS / "figures"

# Metrics: committed JSON (dvc `cache: false`), one folder per profile, so running another profile never
# overwrites a profile's committed results: results/<profile>/<name>.json.
RESULTS = Path("results")


def questions_file(test_set: str) -> Path:
    return QUESTIONS / f"{test_set}.jsonl"


def run_file(system: str, test_set: str) -> Path:
    return RUNS / system / f"{test_set}.trec"


def dense_run_name(variant: str, seed: int) -> str:
    """One trained dense model: a DPR variant and its training seed (``dpr_baseline_s2022``)."""
    return f"dpr_{variant}_s{seed}"


def model_dir(variant: str, seed: int) -> Path:
    return MODELS / dense_run_name(variant, seed)


def checkpoint_dir(variant: str, seed: int) -> Path:
    return CHECKPOINTS / dense_run_name(variant, seed)


def dense_index_dir(variant: str, seed: int | None = None) -> Path:
    """FAISS index of a trained model, or of the base checkpoint (``untrained``, no seed)."""
    return DENSE_INDEXES / (variant if seed is None else f"{variant}_s{seed}")




def generator_dir(generator: str) -> Path:
    return QG_MODELS / generator


def _replicate(folder: Path, seed: int | None) -> Path:
    return folder if seed is None else folder / f"s{seed}"


def generated_file(generator: str, seed: int | None = None) -> Path:
    """Sampled questions of a generator (``uncon`` or ``con``), before filtering; replicate ``seed``'s own where
    stages 02-04 run per replicate (``ecqg.core.variants.generation_seeds``)."""
    return _replicate(QG, seed) / f"generated_{generator}.jsonl"


def kept_file(generator: str, seed: int | None = None) -> Path:
    """Generated questions of a generator that passed both filters (replicate ``seed``'s, as above)."""
    return _replicate(FILTERING, seed) / f"kept_{generator}.jsonl"


def metrics_dir(profile: str) -> Path:
    """The committed metrics of one profile (``results/mini``)."""
    if not profile or "/" in profile or profile.startswith("."):
        raise ValueError(f"not a profile name: {profile!r}")
    return RESULTS / profile


def evidence_file(profile: str, name: str) -> Path:
    """Per-run evidence (first-hit ranks, per-passage values; ``ecqg.analysis.run_evidence``), committed like the
    metrics: ``results/<profile>/evidence/<name>``."""
    return metrics_dir(profile) / "evidence" / name


def published_notebook(profile: str, name: str) -> Path:
    """The last run's executed notebook as committed (progress output stripped): ``results/<profile>/notebooks/``."""
    return metrics_dir(profile) / "notebooks" / f"{name}.ipynb"


def plot_data(profile: str, name: str) -> Path:
    """Data behind a DVC plot (``dvc plots show``), committed like the metrics: ``results/<profile>/plots/<name>``."""
    return metrics_dir(profile) / "plots" / name


def stage_metrics(stage: str, profile: str) -> Path:
    """Wall time and figures of one stage run (``results/<profile>/stage_<stage>.json``)."""
    return metrics_dir(profile) / f"stage_{stage}.json"


def figures_dir(notebook: str) -> Path:
    """Figures of a notebook stage, e.g. ``outputs/figures/06``."""
    return FIGURES / notebook
