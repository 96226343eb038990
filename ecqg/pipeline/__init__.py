"""The pipeline layer: what each stage does with the library, one module per stage (or pair of stages).

Layers, each importing only from the ones below it::

    notebooks/ and ecqg/stages/ (python -m entry points), ecqg/report.py
      -> ecqg/pipeline/   which passages, models, seeds and files a stage uses; its figures
        -> the library    ecqg/retrieval/, qg/, filtering/, attention.py, mechanism.py, evaluation.py, data/, ...
          -> ecqg/paths.py, io.py, config.py, errors.py

Modules: ``common`` (seeds, fingerprints, the test gold passages, corpus look-ups), ``attention_bias`` (01),
``question_generation`` (02), ``synthetic`` (03 filtering, 04 mixing), ``dense`` (05 training, dense retrieval),
``results`` (06), ``mechanism`` (07). ``tests/test_layers.py`` checks that nothing below imports from above.
"""
