"""Option declarations shared by several commands (one copy of each help text)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

Labels = Annotated[
    Optional[str],
    typer.Option("--labels", "-l", help="Labels file (.npy of ints, or text, one label a line); overrides labels in PRED."),
]


InputKind = Annotated[
    str,
    typer.Option(
        "--input-kind",
        help="auto | logits | probs | log-probs. auto decides from the data and says what it decided.",
    ),
]
ScorePrefix = Annotated[
    Optional[str], typer.Option("--score-prefix", help="Parquet: read wide score columns with this name prefix (e.g. logit_).")
]
Pred = Annotated[
    str, typer.Argument(help="Predictions: .npy, .npz or .parquet; - reads a .npy stream from stdin.", show_default=False)
]
Features = Annotated[
    Optional[str],
    typer.Option(
        "--features",
        help="Per-row features (.npy, or the features/points array of a .npz) that adaptive thresholds condition on instead of the logits.",
        show_default=False,
    ),
]
