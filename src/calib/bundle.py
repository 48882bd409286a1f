"""Bundle directories: a fitted calibrator as manifest.json plus the files it names (docs/cli.md).

manifest.json = {"format": "calib-bundle", "format_version": 1, "calib_version", "method",
"options", "n_classes", "input_kind", "fitted_on": {"n", "sha256"}, "files": {name: sha256},
"fit_report": {...}}. Fitted scalars live in ``params.json``; arrays in ``<name>.npy`` (saved and
loaded without pickle); opaque model files (e.g. CatBoost ``.cbm``) as raw bytes. No timestamps:
the same fit gives byte-identical bundles. Loading verifies every hash and refuses names that
leave the directory, unknown methods and newer format versions.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
from dataclasses import dataclass, field

import numpy as np

from .errors import BundleError
from .io.atomic import atomic_directory
from .io.formats.npy import npy_bytes

FORMAT = "calib-bundle"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
PARAMS = "params.json"
#: Names a bundle may hold: plain file names, no separators, not hidden.
SAFE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
#: The manifest's key of the record of the rows the calibrator was fitted on, which an estimate
#: without labels reads (calib.estimation.reference); the arrays it lists sit beside the calibrator's.
RECORD_KEY = "reference"
#: Largest manifest or params file read (a bundle is parameters, not data).
MAX_JSON_BYTES = 64 << 20


@dataclass
class State:
    """What a calibrator saves: JSON-able parameters, named numeric arrays and opaque files."""

    params: dict = field(default_factory=dict)
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    blobs: dict[str, bytes] = field(default_factory=dict)


@dataclass
class Bundle:
    manifest: dict
    state: State
    #: sha256 of manifest.json, which lists the sha256 of every other file: the bundle's hash.
    sha256: str = ""

    @property
    def method(self) -> str:
        return self.manifest["method"]

    @property
    def n_classes(self) -> int:
        return int(self.manifest["n_classes"])

    @property
    def input_kind(self) -> str:
        return self.manifest["input_kind"]


def dumps(obj) -> bytes:
    """Canonical JSON: sorted keys, fixed indentation, no NaN; the same object gives the same bytes."""
    try:
        return (json.dumps(obj, sort_keys=True, indent=2, allow_nan=False) + "\n").encode()
    except ValueError as exc:
        raise BundleError(f"cannot save a non-finite number in a bundle ({exc})") from None


def write_bundle(path: str, *, manifest: dict, state: State, force: bool = False) -> str:
    """Write ``state`` and ``manifest`` (its "files" filled in here) to the directory ``path``;
    returns the bundle's sha256 (:func:`bundle_contents`)."""
    files, manifest_bytes = bundle_contents(manifest, state)
    with atomic_directory(path, force=force) as tmp:
        for name, data in files.items():
            with open(os.path.join(tmp, name), "wb") as handle:
                handle.write(data)
        with open(os.path.join(tmp, MANIFEST), "wb") as handle:
            handle.write(manifest_bytes)
    return hashlib.sha256(manifest_bytes).hexdigest()


def bundle_sha256(manifest: dict, state: State) -> str:
    """The sha256 a bundle of ``manifest`` and ``state`` has once written: that of its manifest.json."""
    return hashlib.sha256(bundle_contents(manifest, state)[1]).hexdigest()


def bundle_contents(manifest: dict, state: State) -> tuple[dict[str, bytes], bytes]:
    """({file name: bytes} of ``state``, the manifest.json bytes listing their sha256)."""
    files: dict[str, bytes] = {PARAMS: dumps(state.params)}
    for name, array in state.arrays.items():
        array = np.asarray(array)
        if array.dtype == object:
            raise BundleError(f"array {name!r} holds Python objects; bundles store numbers only")
        files[f"{name}.npy"] = npy_bytes(array)
    files.update(state.blobs)
    for name in files:
        if not SAFE_NAME.match(name) or name == MANIFEST:
            raise BundleError(f"bundle file name {name!r} is not a plain file name")
    manifest = dict(
        manifest,
        format=FORMAT,
        format_version=FORMAT_VERSION,
        files={name: hashlib.sha256(data).hexdigest() for name, data in files.items()},
    )
    return files, dumps(manifest)


def read_bundle(path: str, known_methods) -> Bundle:
    """Load and verify a bundle directory; every problem is a :class:`BundleError` naming it."""
    if not os.path.isdir(path):
        raise BundleError(f"{path}: not a bundle directory (no such directory)")
    manifest_bytes = _read_bytes(path, MANIFEST)
    manifest = _parse_json(manifest_bytes, path, MANIFEST)
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise BundleError(f"{path}: manifest.json is not a calib bundle manifest")
    version = manifest.get("format_version")
    if not isinstance(version, int):
        raise BundleError(f"{path}: manifest format_version must be an integer; got {version!r}")
    if version > FORMAT_VERSION:
        raise BundleError(
            f"{path}: bundle format version {version} is newer than this calib reads ({FORMAT_VERSION}); upgrade calib"
        )
    for key in ("method", "n_classes", "input_kind", "files", "options"):
        if key not in manifest:
            raise BundleError(f"{path}: manifest.json has no {key!r}")
    if manifest["method"] not in known_methods:
        raise BundleError(f"{path}: unknown method {manifest['method']!r}; this calib knows {', '.join(sorted(known_methods))}")
    files = manifest["files"]
    if not isinstance(files, dict) or PARAMS not in files:
        raise BundleError(f"{path}: manifest.json lists no {PARAMS}")
    state = State()
    root = os.path.realpath(path)
    for name, digest in files.items():
        data = _read_verified(path, root, name, digest)
        if name == PARAMS:
            state.params = _parse_json(data, path, name)
        elif name.endswith(".npy"):
            try:
                state.arrays[name[:-4]] = np.load(io.BytesIO(data), allow_pickle=False)
            except ValueError as exc:
                raise BundleError(f"{path}/{name}: not a plain numeric .npy ({exc})") from None
        else:
            state.blobs[name] = data
    return Bundle(manifest, state, hashlib.sha256(manifest_bytes).hexdigest())


def _read_verified(path: str, root: str, name: str, digest: str) -> bytes:
    if not isinstance(name, str) or not SAFE_NAME.match(name) or name == MANIFEST:
        raise BundleError(f"{path}: manifest names {name!r}, which is not a plain file inside the bundle")
    target = os.path.realpath(os.path.join(path, name))
    if os.path.dirname(target) != root:
        raise BundleError(f"{path}: {name} points outside the bundle directory")
    if not os.path.isfile(target):
        raise BundleError(f"{path}: {name} is listed in the manifest but missing")
    with open(target, "rb") as handle:
        data = handle.read()
    if hashlib.sha256(data).hexdigest() != digest:
        raise BundleError(f"{path}: {name} does not match its sha256 in the manifest (modified or corrupt)")
    return data


def _read_bytes(path: str, name: str) -> bytes:
    target = os.path.join(path, name)
    if not os.path.isfile(target):
        raise BundleError(f"{path}: not a bundle directory (no {name})")
    if os.path.getsize(target) > MAX_JSON_BYTES:
        raise BundleError(f"{path}: {name} is implausibly large")
    with open(target, "rb") as handle:
        return handle.read()


def _parse_json(data: bytes, path: str, name: str):
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BundleError(f"{path}/{name}: not valid JSON ({exc})") from None
