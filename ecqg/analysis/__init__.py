"""The analysis room: what the results, attention and mechanism stages measure and how they test it.

Statistics (``stats``, ``tables``), the [CLS] attention study (``attention``), the encoders compared on it
(``encoder_comparison``), the mechanism slices (``mechanism``), Poly-DPR's codes (``poly_codes``) and the figures of
the analysis notebooks (``plots``, ``seed_plots``). Why a room of its own: a stage's DVC dependencies are the modules
it imports, so if training code imported any of these, an edit to a statistic or a plot would rerun every training.
Training, generation, filtering and data code never import from here (``tests/test_layers.py``); the analysis
stages, the pipeline's analysis steps and the report may.
"""
