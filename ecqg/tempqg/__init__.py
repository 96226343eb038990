"""TempQG (Luo et al., AAAI 2022, §4): the related system's template-conditioned question generator.

``templates`` (blank the specific entities of the training questions, cluster near duplicates, one template per
cluster), ``selector`` (a retriever trained on (passage -> template) pairs picks a new passage's template). A package of its own, apart from ``ecqg.qg``: the paper's generators (UnCon, ECQG) do not depend on it.
"""
