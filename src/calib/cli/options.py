"""Option declarations shared by several commands (one copy of each help text), and the one call
that reads a command's predictions with them."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Annotated, Optional

import typer
from typer.core import TyperCommand

from .. import operations
from ..operations import choices_text


def library_default(owner, name: str):
    """The library's default of setting ``name``: a field of the dataclass ``owner``, or a keyword
    of the function ``owner`` (so a flag's default is the notebook's, from one source)."""
    if dataclasses.is_dataclass(owner):
        found = {field.name: field for field in dataclasses.fields(owner)}[name]
        if found.default is dataclasses.MISSING and callable(found.default_factory):
            return found.default_factory()
        return found.default
    return inspect.signature(owner).parameters[name].default


Labels = Annotated[
    Optional[str],
    typer.Option(
        "--labels",
        "-l",
        help=f"Labels file: {choices_text('formats')} (the label/labels array or column, or the only one), or .txt/.csv (one label a line, optional header); overrides labels in PRED.",
        show_default=False,
    ),
]
LabelColumn = Annotated[
    Optional[str],
    typer.Option(
        "--label-column",
        "--correct-column",
        help="The array (.npz) or column (.parquet, .csv) holding the labels, in --labels if given, else in PRED (default: label or labels; with --confidence-column: correct, else label or labels).",
        show_default=False,
    ),
]


Scores = Annotated[
    Optional[str],
    typer.Option(
        "--scores",
        help="The array (.npz) or list column (.parquet, .arrow) holding the scores (default: logits, log_probs or probs; in a .npz of one 2-D floating array, that one); a harness log's reading (acc, acc_norm); an Inspect log's scorer.",
        show_default=False,
    ),
]


InputKind = Annotated[
    str,
    typer.Option(
        "--input-kind",
        help="auto | logits | probs | log-probs. auto decides from the data and says what it decided.",
    ),
]
Renormalise = Annotated[
    bool,
    typer.Option(
        "--renormalise",
        help="Read probabilities whose rows sum to less than 1 (e.g. only the top k classes kept), each row divided by its sum.",
    ),
]


def _json_help(what: str) -> str:
    """The help of the ``--json PATH`` option of a command whose result is ``what``."""
    return f"Write {what} as JSON to PATH; - prints it instead of the table."


FitSummaryJson = Annotated[Optional[str], typer.Option("--json", help=_json_help("the fit summary"), show_default=False)]
ComparisonJson = Annotated[Optional[str], typer.Option("--json", help=_json_help("the comparison"), show_default=False)]


InputFormat = Annotated[
    Optional[str],
    typer.Option(
        "--input-format",
        help="Read PRED as this format, named by its suffix (csv, tsv, jsonl, npz, parquet, ...), whatever its name; "
        "stdin (-) is otherwise told by its first bytes (JSON lines when it starts with {, else CSV, TSV when the header has tabs).",
        show_default=False,
    ),
]
MissingConfidence = Annotated[
    Optional[str],
    typer.Option(
        "--missing-confidence",
        help="An evaluation log's sample without a stated confidence is refused; browsecomp sets it to 1.0 as "
        "BrowseComp's grader does (the input-kind line counts them).",
        show_default=False,
    ),
]
ConfidenceColumn = Annotated[
    Optional[str],
    typer.Option(
        "--confidence-column",
        help="A column of one confidence per row in [0, 1] (stated, verbalised, a judge's or a router's), read as "
        "P(correct) against the 0/1 column --correct-column (default: correct): a binary problem.",
        show_default=False,
    ),
]
ScorePrefix = Annotated[
    Optional[str], typer.Option("--score-prefix", help="Parquet: read wide score columns with this name prefix (e.g. logit_).")
]
Task = Annotated[
    str,
    typer.Option(
        "--task",
        help="auto | multiclass | binary | multilabel. auto decides from the labels: a (N, L) 0/1 matrix is multi-label.",
    ),
]
Engine = Annotated[
    str,
    typer.Option(
        "--engine",
        help="For a directory of shard files: local (in this process), or dask, spark or ray (one task per file on a cluster).",
    ),
]
Scheduler = Annotated[
    Optional[str],
    typer.Option(
        "--scheduler",
        "--spark-master",
        "--ray-address",
        help="The engine's cluster: a Dask scheduler address, a Spark master URL (spark://...) or a Ray address "
        "(default: a local two-worker cluster, or the Spark or Ray session already running).",
        show_default=False,
    ),
]
Pred = Annotated[
    str,
    typer.Argument(
        metavar="PRED", help=f"Predictions: {choices_text('formats')}; - reads any of them from stdin.", show_default=False
    ),
]
GroupBy = Annotated[
    Optional[str],
    typer.Option(
        "--group-by",
        help="Evaluate per group of rows: a column of PRED (parquet column beside the scores, .npz array, or the label column), or the column of --groups.",
        show_default=False,
    ),
]
GroupsFile = Annotated[
    Optional[str],
    typer.Option(
        "--groups",
        help=f"One group value per row: {choices_text('formats')} (--group-by or the only array or column), .txt (one a line), .csv (header, then --group-by or the only column).",
        show_default=False,
    ),
]
MinGroupRows = Annotated[
    int, typer.Option("--min-group-rows", min=1, help="Groups with fewer rows are listed but not gated (a note says which).")
]
TableFormat = Annotated[
    str,
    typer.Option(
        "--format",
        help="How the table prints: auto (table on a terminal, aligned plain text otherwise, as in a CI log) | table | text | md (markdown).",
    ),
]
Features = Annotated[
    Optional[str],
    typer.Option(
        "--features",
        help="Per-row features (.npy, or the features/points array of a .npz) that adaptive thresholds condition on instead of the logits.",
        show_default=False,
    ),
]


class Command(TyperCommand):
    """A command whose usage line names its arguments plainly (``calib fit [OPTIONS] PRED``; typer
    writes required arguments as ``{PRED}``)."""

    def collect_usage_pieces(self, ctx) -> list[str]:
        pieces = super().collect_usage_pieces(ctx)
        return [p[1:-1] if p.startswith("{") and p.endswith("}") else p for p in pieces]


def reading(flags: dict, *, require_labels: bool = False) -> operations.Reading:
    """How a command's predictions are read (calib.io.readers.Reading), from its input flags:
    ``flags`` the command's parameters (its ``locals()``), named as the shared options name them."""
    return operations.Reading(
        labels_path=flags.get("labels"),
        input_kind=flags.get("input_kind", "auto"),
        score_prefix=flags.get("score_prefix"),
        label_column=flags.get("label_column"),
        require_labels=require_labels,
        renormalise=flags.get("renormalise", False),
        scores=flags.get("scores"),
        task=flags.get("task", "auto"),
        input_format=flags.get("input_format"),
        confidence_column=flags.get("confidence_column"),
        missing_confidence=flags.get("missing_confidence"),
    )


def source(flags: dict, *, require_labels: bool = False) -> operations.Source:
    """Where a command's rows come from (calib.operations.Source), from its flags (its
    ``locals()``): PRED read as :func:`reading` says, with the bundle, features, true
    probabilities, groups and engine the command takes."""
    return operations.Source(
        flags["pred"],
        reading(flags, require_labels=require_labels),
        bundle=flags.get("bundle"),
        features=flags.get("features"),
        true_probs=flags.get("true_probs"),
        group_by=flags.get("group_by"),
        groups_file=flags.get("groups_file"),
        engine=flags.get("engine", "local"),
        scheduler=flags.get("scheduler"),
    )
