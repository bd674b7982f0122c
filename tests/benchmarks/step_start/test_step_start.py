"""The per-step start benchmark's parsing and report (the measuring itself needs PyPI and
minutes; it runs as ``python -m benchmarks.step_start.run``)."""

import pathlib

import pytest

from benchmarks.step_start import report, run

REPO = pathlib.Path(__file__).resolve().parents[3]


def _row(step, install, downloaded, noop, load):
    return {
        "step": step,
        "stock": {
            "venv_s": 3.0,
            "install_s": install,
            "load_s": 0.5,
            "start_s": 3.5 + install,
            "downloaded_mb": downloaded,
            "installed_mb": 2 * downloaded,
        },
        "prebuilt": {
            "stock_install_noop_s": noop,
            "stock_install_noop_downloaded_mb": 0.0,
            "load_s": load,
            "start_s": load,
        },
    }


RESULTS = {
    "benchmark": "step_start",
    "machine": "box x86_64 2 cpus",
    "date": "2026-12-04T14:00:00+00:00",
    "prebuilt_image": {"lock_install_s": 40.0, "wheel_build_install_s": 9.0, "installed_mb": 99.0},
    "steps": [
        _row("create_cluster", 16.0, 20.0, 2.0, 0.4),
        _row("register_model", 12.0, 18.0, 1.0, 0.6),
    ],
    "register_model_before": {
        "revision": "abc",
        "stock": {"install_s": 60.0, "downloaded_mb": 90.0, "installed_mb": 300.0},
    },
}


def test_summary_means_and_register_model_before_after():
    assert report.summary(RESULTS) == {
        "steps": 2,
        "stock_start_s": 17.5,
        "stock_install_s": 14.0,
        "stock_downloaded_mb": 19.0,
        "prebuilt_start_s": 0.5,
        "noop_install_s": 1.5,
        "register_model_before_install_s": 60.0,
        "register_model_before_downloaded_mb": 90.0,
        "register_model_before_installed_mb": 300.0,
        "register_model_install_s": 12.0,
        "register_model_downloaded_mb": 18.0,
        "register_model_installed_mb": 36.0,
    }


def test_report_has_machine_date_a_row_per_step_and_the_summary():
    text = report.markdown(RESULTS)
    assert "- machine: box x86_64 2 cpus" in text and "- date: 2026-12-04T14:00:00+00:00" in text
    assert (
        "| create_cluster | 3.0 | 16.0 | 0.50 | **19.5** | 20.0 | 40.0 | 2.0 | **0.40** |" in text
    )
    assert (
        "| register_model | 3.0 | 12.0 | 0.50 | **15.5** | 18.0 | 36.0 | 1.0 | **0.60** |" in text
    )
    assert "stock 17.5 s (pip 14.0 s, 19.0 MB downloaded per step), prebuilt 0.5 s" in text
    assert (
        "60.0 s, 90.0 MB downloaded and 300.0 MB installed with google-cloud-pipeline-components "
        "(as of abc); 12.0 s, 18.0 MB and 36.0 MB with the embedded type." in text
    )


def test_load_step_reads_the_install_stage_and_program_of_a_compiled_template():
    text = (REPO / "src" / "vsp" / "compiled" / "components" / "register_model.yaml").read_text()
    step = run.load_step("register_model", text)
    assert step["install"].rstrip().endswith('&& exec "$0" "$@"')
    assert "pip install" in step["install"]
    assert "def register_model(" in step["program"]


@pytest.mark.slow
def test_prebuilt_templates_have_no_install_stage():
    steps = run.prebuilt_steps()
    assert sorted(steps) == sorted(
        p.stem for p in (REPO / "src" / "vsp" / "compiled" / "components").glob("*.yaml")
    )
    assert all(s["install"] == "" and "pip install" not in s["program"] for s in steps.values())


def test_downloaded_mb_adds_up_pips_download_lines():
    output = (
        "Collecting six\n"
        "  Downloading six-1.17.0-py2.py3-none-any.whl (11 kB)\n"
        "  Downloading kfp-2.17.3.tar.gz (1.5 MB)\n"
        "  Using cached requests-2.33.0-py3-none-any.whl (64 kB)\n"
    )
    assert round(run.downloaded_mb(output), 4) == round((11e3 + 1.5e6) / 1024**2, 4)
