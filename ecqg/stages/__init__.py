"""The pipeline's stages, one module per DVC stage and named after it, each holding its ``python -m`` entry point
(``main()``) or the functions its notebook calls, and what it does with the library rooms (which passages, models,
seeds and files it uses; its figures).

Stage modules: ``input_test_set``, ``prepare``, ``index_bm25``, ``index_tfidf``, ``tokenize_corpus``, ``retrieve``,
``training_data``, ``attention_bias`` (notebook 01), ``question_generation`` (02), ``filtering`` (03), ``mixing``
(04), ``pseudo_queries``, ``tempqg`` (08), ``dpr_training`` (05: every ``pretrain_*`` / ``finetune_*`` stage),
``retrieve_dense`` (every ``retrieve_*`` stage of a dense model), ``hybrid``, ``results`` (06), ``mechanism`` (07),
``report``; and ``premise`` (``results/premise/``, run by hand after a profile's baseline runs).
Shared by several stages: ``common`` (seeds, fingerprints, passages), ``finetune_validation`` (05's held-out search
and snapshots), ``finetune_curve`` (06, 07), ``evidence`` (06's and 07's per-run files), ``located`` (the probe's
located answers), ``stage_plots`` (the figures of the stages that train or build data), ``real_questions`` (issue
67's real-question arm; not yet a stage).

Every stage records its wall time, the day it finished (UTC) and its figures in ``results/<profile>/stage_<name>.json``
(:func:`ecqg.core.stage_record.timed_stage`); notebooks run through :mod:`ecqg.tooling.notebook`. The package imports
nothing, so a stage depends only on the modules it imports (``dvc.yaml``'s code dependencies).
"""
