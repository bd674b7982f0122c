"""Markdown report of the per-step start benchmark (``step_start.md``)."""

from __future__ import annotations


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def summary(results: dict) -> dict:
    """Means over the steps and the before/after figures of register_model."""
    stock = [row["stock"] for row in results["steps"]]
    prebuilt = [row["prebuilt"] for row in results["steps"]]
    by_step = {row["step"]: row for row in results["steps"]}
    found = {
        "steps": len(stock),
        "stock_start_s": round(_mean([s["start_s"] for s in stock]), 1),
        "stock_install_s": round(_mean([s["install_s"] for s in stock]), 1),
        "stock_downloaded_mb": round(_mean([s["downloaded_mb"] for s in stock]), 1),
        "prebuilt_start_s": round(_mean([p["start_s"] for p in prebuilt]), 2),
        "noop_install_s": round(_mean([p["stock_install_noop_s"] for p in prebuilt]), 1),
    }
    before = results.get("register_model_before")
    if before and "register_model" in by_step:
        found["register_model_before_install_s"] = before["stock"]["install_s"]
        found["register_model_before_downloaded_mb"] = before["stock"]["downloaded_mb"]
        found["register_model_before_installed_mb"] = before["stock"]["installed_mb"]
        found["register_model_install_s"] = by_step["register_model"]["stock"]["install_s"]
        found["register_model_downloaded_mb"] = by_step["register_model"]["stock"]["downloaded_mb"]
        found["register_model_installed_mb"] = by_step["register_model"]["stock"]["installed_mb"]
    return found


def markdown(results: dict) -> str:
    """The report: the machine, the date, a row per step for both cases, and the summary."""
    totals = summary(results)
    image = results["prebuilt_image"]
    lines = [
        "# Per-step start: stock image with pip installs vs the prebuilt step image",
        "",
        "`nice -n 10 python -m benchmarks.step_start.run` (all numbers: `step_start.json`).",
        "",
        f"- machine: {results['machine']}",
        f"- date: {results['date']}",
        "- stock: a fresh venv, the template's install stage (empty pip cache, public index), "
        "then the program load; prebuilt: the environment `image/Dockerfile` builds "
        f"(lock {image['lock_install_s']} s, wheel {image['wheel_build_install_s']} s, "
        f"{image['installed_mb']} MB over the base, paid once per image build), the template "
        "from `vsp compile --base-image` (no install stage) loading its program.",
        "- `noop install` is the stock template's install stage run inside the prebuilt "
        "environment: pip finds every requirement satisfied and fetches nothing.",
        "",
        "## Per step",
        "",
    ]
    rows = []
    for row in results["steps"]:
        s, p = row["stock"], row["prebuilt"]
        rows.append(
            [
                row["step"],
                f"{s['venv_s']:.1f}",
                f"{s['install_s']:.1f}",
                f"{s['load_s']:.2f}",
                f"**{s['start_s']:.1f}**",
                f"{s['downloaded_mb']:.1f}",
                f"{s['installed_mb']:.1f}",
                f"{p['stock_install_noop_s']:.1f}",
                f"**{p['start_s']:.2f}**",
            ]
        )
    header = [
        "step",
        "stock venv s",
        "stock pip s",
        "stock load s",
        "stock start s",
        "downloaded MB",
        "installed MB",
        "prebuilt noop install s",
        "prebuilt start s",
    ]
    lines += _table(header, rows)
    lines += [
        "",
        "## Summary",
        "",
        f"- mean start over {totals['steps']} steps: stock {totals['stock_start_s']} s "
        f"(pip {totals['stock_install_s']} s, {totals['stock_downloaded_mb']} MB downloaded "
        f"per step), prebuilt {totals['prebuilt_start_s']} s; the stock template in the "
        f"prebuilt image: {totals['noop_install_s']} s of pip finding everything installed.",
    ]
    if "register_model_before_install_s" in totals:
        before = results["register_model_before"]["revision"]
        lines.append(
            f"- register_model pip install: {totals['register_model_before_install_s']} s, "
            f"{totals['register_model_before_downloaded_mb']} MB downloaded and "
            f"{totals['register_model_before_installed_mb']} MB installed with "
            f"google-cloud-pipeline-components (as of {before}); "
            f"{totals['register_model_install_s']} s, "
            f"{totals['register_model_downloaded_mb']} MB and "
            f"{totals['register_model_installed_mb']} MB with the embedded type."
        )
    return "\n".join(lines) + "\n"
