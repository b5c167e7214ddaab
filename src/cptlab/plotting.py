"""Matplotlib without a display, and the one way figures are saved (PNG + PDF, reproducible)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

FORMATS = ("png", "pdf")


def save_figure(fig, out_dir: Path, stem: str) -> list[str]:
    """Save `fig` as <stem>.png and .pdf (no timestamps: same figure, same bytes); close it."""
    names = []
    for fmt in FORMATS:
        path = out_dir / f"{stem}.{fmt}"
        metadata = {"CreationDate": None} if fmt == "pdf" else {"Software": None}
        fig.savefig(path, format=fmt, dpi=120, bbox_inches="tight", metadata=metadata)
        names.append(path.name)
    plt.close(fig)
    return names
