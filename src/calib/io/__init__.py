"""Reading predictions and writing calibrated outputs, in the formats of :mod:`calib.io.formats`."""

from .formats.parquet import write_parquet
from .predictions import Predictions
from .readers import Reading, file_sha256, predictions_from_arrays, read_features, read_labels, read_predictions, read_true_probs
from .writers import check_not_an_input, check_output_path, write_matrix, write_npy_stream, write_sets

__all__ = [
    "Predictions",
    "check_not_an_input",
    "check_output_path",
    "file_sha256",
    "predictions_from_arrays",
    "read_features",
    "read_labels",
    "read_predictions",
    "Reading",
    "read_true_probs",
    "write_matrix",
    "write_npy_stream",
    "write_parquet",
    "write_sets",
]
