"""Exporting a bundle (calib.operations.exporting): its settings checked before the bundle is read."""

import pytest

from calib.errors import CalibError
from calib.operations import export_bundle


@pytest.mark.parametrize(
    "out, dtype, message",
    [
        ("m.onnx", "float16", "dtype must be one of float32, float64"),
        ("m.bin", "float32", "ends in .onnx"),
        ("m.onnx.tmp", "float32", "ends in .onnx"),
    ],
)
def test_settings_are_refused_before_the_bundle_is_read(tmp_path, out, dtype, message):
    with pytest.raises(CalibError, match=message):
        export_bundle(str(tmp_path / "absent"), str(tmp_path / out), dtype=dtype)
