"""ecqg: Entity-Conditioned Question Generation for robust attention in dense retrieval (Reddy et al., SIGIR 2022).

The package is deliberately thin: notebooks in ``notebooks/`` call one function per step, and every function that is
longer than a few lines lives here so it can be tested.
"""

from ecqg.core.env import configure_environment, move_to_repository_root

configure_environment()
move_to_repository_root()

__version__ = "0.1.0"
