"""The base's loss curve: training and held-out masked-LM loss against steps, saved beside the weights."""

from __future__ import annotations

from collections.abc import Sequence, Mapping
from pathlib import Path


def loss_curve(history: Sequence[Mapping], path: str | Path) -> Path:
    # matplotlib loads only when a curve is drawn
    import matplotlib

    matplotlib.use("Agg")
    # pyplot only after the backend is set: no display where the base is built
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4), dpi=110)
    for key, label in (("loss", "training (running)"), ("eval_loss", "held-out passages (fixed masks)")):
        points = [(e["step"], e[key]) for e in history if key in e]
        if points:
            ax.plot(*zip(*points), label=label, marker="o" if key == "eval_loss" else None, markersize=3)
    ax.set_xlabel("step")
    ax.set_ylabel("masked-LM loss (nats per masked piece)")
    ax.set_title("Retrieval-naive base: masked-LM pre-training")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper right")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return Path(path)
