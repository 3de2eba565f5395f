"""Arithmetic of the benchmark scripts under ``benchmarks/`` that turns probes into estimates."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_scale_probe_counts_each_subscriber_once() -> None:
    scale = _script("pubsub_scale")
    subscriber = {"n_publishers": 10, "score": 0.9}
    records = [
        {**subscriber, "method": "PubSub-ML", "subscriber": "s0"},
        {**subscriber, "method": "Own (M^s)", "subscriber": "s0", "customize_s": 1.0},
        {**subscriber, "method": "PubSub-ML", "subscriber": "s1"},
        {**subscriber, "method": "Own (M^s)", "subscriber": "s1", "customize_s": 3.0},
        {
            "n_publishers": 10,
            "method": "run",
            "subscriber": "",
            "n_subscribers": 2,
            "customize_s": 2.5,  # the wall time of both, on two workers: not a third subscriber
            "load_s": 1.0,
            "generate_s": 0.5,
            "publishers_s": 4.0,
            "total_s": 7.0,
            "parent_peak_gib": 1.0,
            "worker_peak_gib": 1.0,
        },
    ]
    probe = scale._estimate(records, n=10, jobs=2)
    assert probe["per_subscriber"] == pytest.approx(2.0)
    # 10 subscribers at 2 s over 2 workers, plus one load per batch (4 batches a worker at most)
    assert probe["customize"] == pytest.approx(2.0 * 10 / 2 + 0.5 * 8 / 2)
    assert probe["total"] == pytest.approx(4.5 + probe["customize"])
    assert probe["measured"] == 7.0 and probe["k"] == 2


@pytest.mark.slow
def test_the_registry_against_mlflow_benchmark_runs_ours_alone(tmp_path: Path) -> None:
    """A 10-publish smoke of benchmarks/registry_vs_mlflow.py without MLflow: our server with
    the database artifact store publishes, fetches and reports every figure."""
    import json
    import subprocess
    import sys

    out = tmp_path / "figures.json"
    args = "--skip-mlflow --sizes 10 --levels 1 --seconds 1 --repeats 1 --backends sqlite"
    args += " --our-stores database --payloads 20k --no-unchecked --max-publishes 10"
    script = ROOT / "benchmarks" / "registry_vs_mlflow.py"
    done = subprocess.run(
        [sys.executable, str(script), *args.split(), "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    rows = json.loads(out.read_text())["rows"]
    by_op = {(r["system"], r["op"]): r for r in rows}
    assert set(by_op) == {("ours-database", "publish"), ("ours-database", "fetch")}
    assert by_op["ours-database", "publish"]["n"] == 10
    assert all(r["errors"] == 0 and r["rps"] > 0 and not r["first_failure"] for r in rows)
