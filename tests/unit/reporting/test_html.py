"""report.html of `calib diagnose`: complete, self-contained, rendered in a real headless browser
(Chromium from Debian's packages; .ci/run installs it, the browser tests skip only where no
Chromium can be found), and recommendations that show trade-offs and fold noise."""

import json
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
from conftest import SAMPLE, data_file

from calib.diagnose import compare_methods
from calib.io import predictions_from_arrays
from calib.metrics.definitions import metric_badness

BROWSER = next((shutil.which(name) for name in ("chromium", "chromium-browser", "google-chrome") if shutil.which(name)), None)
NEEDS_BROWSER = pytest.mark.skipif(BROWSER is None, reason="no Chromium here (apt-get install chromium)")
#: No network at all: every request goes to a proxy on a closed local port.
OFFLINE = ["--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>"]


def _browser(*args, timeout=90):
    command = [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", *OFFLINE, *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout)


def _diagnose_cifar100(folder):
    """CIFAR-100 validation logits with --compare ts,mr,isotonic,cmce-ts (3 folds) into ``folder``."""
    data = data_file("cifar100_resnet110_val.npz")
    command = [
        sys.executable,
        "-m",
        "calib",
        "diagnose",
        data,
        "--compare",
        "ts,mr,isotonic,cmce-ts",
        "--folds",
        "3",
        "--out",
        folder,
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return folder


@pytest.fixture(scope="module")
def compare_report(tmp_path_factory):
    return _diagnose_cifar100(tmp_path_factory.mktemp("report") / "cifar100")


def test_page_holds_everything_a_reader_needs(compare_report):
    page = (compare_report / "report.html").read_text()
    report = json.loads((compare_report / "report.json").read_text())
    assert "cifar100_resnet110_val.npz" in page and "5000 x 100" in page and report["source"]["calib_version"] in page
    for section in ("findings", "metrics", "calibration", "classes", "comparison"):
        assert f'id="{section}' in page or f"id='{section}" in page, section
    for method in ("ts", "mr", "isotonic", "cmce-ts", "uncalibrated"):
        assert f"<td>{method}</td>" in page, method
    for key in ("accuracy", "nll", "brier", "ece", "mce", "cw_ece", "cmce"):  # every default metric is compared
        assert all(row[key] is not None for row in report["comparison"])
    assert page.count("<svg") == 4 and "paper 000" not in page
    assert "Telling right answers from wrong ones" in page and "E-AURC" in page
    assert "★" in page and "Recommendation:" in page


def test_page_shows_every_metric_evaluate_shows_the_vece_split_included(compare_report):
    """The metric table is calib evaluate's own report: its default keys, V-ECE and its
    over/under-confidence split among them, each in the page and in report.json."""
    from calib.metrics import DEFAULT_METRICS, VECE_METRICS

    page = (compare_report / "report.html").read_text()
    metrics = json.loads((compare_report / "report.json").read_text())["report"]["metrics"]
    for key in (*DEFAULT_METRICS, *VECE_METRICS):
        assert key in metrics and f"<td>{key}</td>" in page, key
    assert metrics["vece_top_l1"]["value"] == pytest.approx(
        metrics["vece_over"]["value"] + metrics["vece_under"]["value"], abs=1e-15
    )


def test_page_has_no_external_reference(compare_report):
    """No script, stylesheet, image, font or link to fetch: the page works offline and from an
    archive (the SVG namespace URI is a name, not a request)."""
    page = (compare_report / "report.html").read_text()
    assert "<script" not in page and "<link" not in page and "@import" not in page
    references = re.findall(r"""(?:src|href)\s*=\s*["']?([^"' >]+)""", page) + re.findall(r"url\(([^)]*)\)", page)
    assert [r for r in references if not r.startswith("#")] == []


def test_the_report_is_reproducible(compare_report, tmp_path):
    again = _diagnose_cifar100(tmp_path / "again")
    for name in ("report.html", "report.json", "reliability.svg"):
        assert (again / name).read_bytes() == (compare_report / name).read_bytes(), name


@NEEDS_BROWSER
def test_report_renders_in_a_headless_browser(compare_report, tmp_path):
    shot = tmp_path / "shot.png"
    done = _browser("--window-size=1280,3000", f"--screenshot={shot}", (compare_report / "report.html").as_uri())
    assert shot.exists(), done.stderr[-2000:]
    import matplotlib.image

    pixels = matplotlib.image.imread(shot)
    assert pixels.shape[:2] == (3000, 1280)
    grey = pixels[..., :3].mean(axis=2)
    assert grey.std() > 0.05 and (grey < 0.5).mean() > 0.005  # text and figures drawn, not a blank page
    assert (grey[:1200] < 0.5).mean() > 0.005  # the top of the page (title, findings, metrics) is not empty


@NEEDS_BROWSER
def test_rendered_dom_holds_the_tables_and_input_offline(compare_report):
    """--dump-dom is the document after parsing and layout, with every request refused."""
    done = _browser("--dump-dom", (compare_report / "report.html").as_uri())
    assert done.returncode == 0, done.stderr[-2000:]
    dom = done.stdout
    assert 'id="comparison"' in dom and 'id="metrics"' in dom and "cifar100_resnet110_val.npz" in dom
    assert dom.count("<svg") == 4 and "<tr>" in dom


@NEEDS_BROWSER
def test_conformal_bundle_report_renders(tmp_path):
    bundle, folder = tmp_path / "mr", tmp_path / "r"
    subprocess.run(
        [sys.executable, "-m", "calib", "fit", SAMPLE / "cifar10_val.npz", "-m", "mr", "--alpha", "0.1", "--out", bundle],
        check=True,
        capture_output=True,
    )
    done = subprocess.run(
        [sys.executable, "-m", "calib", "diagnose", SAMPLE / "cifar10_test.npz", "--bundle", bundle, "--out", folder],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    page = (folder / "report.html").read_text()
    assert (
        "mr (score=msp, alpha=0.1" in page
        and "raps_lambda" not in page
        and "Conformal sets against alpha" in page
        and page.count("<svg") == 5
    )
    dom = _browser("--dump-dom", (folder / "report.html").as_uri()).stdout
    assert 'id="conformal-sets"' in dom and "set_coverage" in dom


def test_recommendation_names_trade_offs_and_noise():
    """CIFAR-10 validation logits: ts lowers ECE beyond the fold noise; ranked by CMCE no method
    improves beyond noise, and the recommendation says so instead of naming a winner."""
    data = np.load(SAMPLE / "cifar10_val.npz")
    preds = predictions_from_arrays(data["logits"], data["labels"])
    table, advice, tradeoffs = compare_methods(preds, ["ts", "isotonic"], folds=5, rank_by="cmce")
    ts = next(row for row in table if row["method"] == "ts")
    assert ts["change"]["ece"]["beyond_noise"] and ts["change"]["ece"]["mean"] < 0
    assert advice.startswith("no method improves cmce beyond the noise of 5-fold cross-validation")
    line = next(line for line in tradeoffs if line.startswith("ts: "))
    assert re.search(r"ece -0\.00\d+", line)
    table, advice, _ = compare_methods(preds, ["ts", "isotonic"], folds=5, rank_by="ece")
    assert advice.startswith("use ") and "beyond the noise" in advice


def test_a_difference_inside_the_fold_noise_is_not_a_winner():
    """Calibrated data (log of the true probabilities): TS lowers the mean NLL over the folds by
    4e-4 with a fold-to-fold std of 8e-4. Ranking by the mean alone named ts; now no winner."""
    rng = np.random.default_rng(0)
    truth = rng.dirichlet(np.ones(4), 2000)
    labels = np.array([rng.choice(4, p=p) for p in truth])
    preds = predictions_from_arrays(np.log(truth), labels)  # already calibrated: TS finds T close to 1
    table, advice, tradeoffs = compare_methods(preds, ["ts"], folds=5, rank_by="nll")
    ts = next(row for row in table if row["method"] == "ts")
    assert table[0]["method"] == "ts" and ts["change"]["nll"]["mean"] < 0  # lowest mean NLL ...
    assert not ts["change"]["nll"]["beyond_noise"]  # ... inside the fold noise
    assert advice.startswith("no method improves nll") and "ts: no change beyond the fold noise" in tradeoffs
    assert metric_badness("accuracy", 0.9) < metric_badness("accuracy", 0.8)
    assert metric_badness("coverage_0.9_0.92", 0.91) < metric_badness("coverage_0.9_0.92", 0.95)
