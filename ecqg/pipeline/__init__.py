"""The pipeline layer: what each stage does with the library (which passages, models, seeds and files a stage
uses; its figures), one module per stage or pair of stages. Entry points (``ecqg/stages/``, the notebooks,
``ecqg/report/``) import it; it imports the library. The layers and the module list: docs/design.md, "Code layout";
``tests/test_layers.py`` checks that nothing below imports from above.
"""
