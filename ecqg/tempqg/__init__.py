"""TempQG (Luo et al., AAAI 2022, §4): the related system's template-conditioned question generator.

``templates`` (blank the specific entities of the training questions, cluster near duplicates, one template per
cluster), ``selector`` (a retriever trained on (passage -> template) pairs picks a new passage's template),
``generation`` (the generator's template-conditioned inputs, on :mod:`ecqg.qg`'s code). A package of its own, apart
from ``ecqg.qg``: the paper's generators (UnCon, ECQG) do not depend on it; stage tempqg runs it
(:mod:`ecqg.stages.tempqg`, notebook 08).
"""
