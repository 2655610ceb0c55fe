"""The GPT-2 example (examples/gpt2_kjv.py) run as a user runs it: its
validation loss falls below the bigram baseline of the same tokens, with
the state several times the device budget. A ctest entry of its own
(python_example): it takes about a minute and a half."""

import json
import os
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def test_the_example_beats_the_bigram_baseline(tmp_path):
    report = tmp_path / "result.json"
    run = subprocess.run(
        [sys.executable, os.path.join(ROOT, "examples", "gpt2_kjv.py"),
         "--nvme-dir", str(tmp_path), "--json", str(report)],
        capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr
    result = json.loads(report.read_text())
    assert result["offloaded"]
    assert result["state_bytes"] >= 4 * result["device_budget_bytes"]
    assert result["device_peak_bytes"] <= result["device_budget_bytes"]
    assert result["moved_bytes"]["nvme_write"] > 0
    assert result["validation_loss"] < result["bigram_baseline"], result
    assert "validation loss" in run.stdout and "moved (GB)" in run.stdout
