"""The choices of a setting, as a command's help lists them: one source for the help text and
the checks, so a new format, score or recipe shows in the help as soon as it exists."""

from __future__ import annotations


def choices_text(setting: str) -> str:
    """The choices of ``setting``: an option of the calibration methods (``score``, ``threshold``,
    ``variant``, ``flow``, ``aggregate``, ``model``: "aps | raps | ..."), ``formats`` (the inputs:
    ".npy, .npz or .parquet"), ``outputs`` (the writable formats), ``shard formats``,
    ``recalibrators`` (V-ECE's recalibration maps) or ``recipes`` (WS-CatBoost's, each described)."""
    from ..io.formats import listed, shard_formats

    if setting == "formats":
        return listed()
    if setting == "shard formats":
        return listed(shard_formats())
    if setting == "outputs":
        from ..io.writers import WRITERS

        return listed(WRITERS.values())
    if setting in ("recalibrators", "recipes"):
        from ..estimators.recalibrators import RECALIBRATORS, RECIPES

        if setting == "recalibrators":
            return " | ".join(RECALIBRATORS)
        return " | ".join(f"{name} ({recipe.describe()})" for name, recipe in RECIPES.items())
    from ..registry import choices_text as option_choices

    return option_choices(setting)
