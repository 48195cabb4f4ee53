"""The memory benchmark's machinery (bench/memory.py): a cell measured in a fresh
process, the driver's table and JSON, and the goals judged from records. No
memory or time thresholds: those are the benchmark's to report, not a test's."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import memory_report


def _memory_py(*args: str) -> str:
    command = [sys.executable, str(BENCH / "memory.py"), *args]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_one_cell_prints_its_record():
    record = json.loads(_memory_py("--one", "chain", "primal").splitlines()[-1])
    assert record["status"] == "ok", record
    assert isinstance(record["peak_mib"], float)
    assert record["seconds"] > 0


def test_driver_prints_the_table_and_writes_json(tmp_path):
    path = tmp_path / "memory.json"
    methods = "primal,native,dualgen-python"
    out = _memory_py("--workloads", "chain", "--methods", methods, "--json", str(path))
    document = json.loads(path.read_text())
    records = document["records"]
    assert [r["method"] for r in records] == methods.split(",")
    assert all(r["status"] == "ok" for r in records), records
    assert "| chain |" in out and "dualgen (Python)" in out
    assert "≠" not in out  # the two forward modes agree
    (goal,) = document["goals"]
    assert goal["goal"] == memory_report.GOAL_NATIVE and goal["passed"] is not None


def _record(workload: str, method: str, peak: float, seconds: float = 1.0) -> dict:
    return {"workload": workload, "method": method, "status": "ok"} | {
        "peak_mib": peak,
        "seconds": seconds,
        "check": 1.0,
    }


def test_goals_from_records():
    records = [
        _record("attention-8192", "primal", 10.0, seconds=1.0),
        {"workload": "attention-8192", "method": "native", "status": "raises"},
        _record("attention-8192", "native-math", 500.0),
        _record("attention-8192", "dualgen", 30.0, seconds=3.0),
        _record("training-step", "backprop", 100.0),
        {"workload": "training-step", "method": "dualgen", "status": "timeout"},
    ]
    verdicts = {(v["goal"], v["workload"]): v for v in memory_report.evaluate(records)}
    native = verdicts[(memory_report.GOAL_NATIVE, "attention-8192")]
    assert native["passed"] and native["note"] == "vs native, math attention"
    assert verdicts[(memory_report.GOAL_PRIMAL, "attention-8192")]["passed"]
    assert verdicts[(memory_report.GOAL_TIME, "attention-8192")]["passed"] is False
    backprop = verdicts[(memory_report.GOAL_BACKPROP, "training-step")]
    assert backprop["passed"] is None and backprop["note"] == "dualgen timeout"
    text = memory_report.report(records, list(verdicts.values()))
    assert "**fail** (3.00x > 2x)" in text and "timeout" in text
