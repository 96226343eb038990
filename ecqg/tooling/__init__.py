"""The repository's own machinery, not research code: the DVC DAG and its stages, code dependencies, the cost
model, the environment doctor and the notebook runner."""
