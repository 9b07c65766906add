"""`benchmarks/deployment.py --smoke` runs end to end on tiny random students and renders its table."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


import onnxruntime  # noqa: E402,F401  (a test dependency: the dev extra)
REPO = Path(__file__).resolve().parents[2]


def test_smoke_run_writes_json_and_markdown(tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    run = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "deployment.py"), "--smoke", "--output_dir", str(tmp_path), "--threads", "1"],
        capture_output=True, text=True, check=False, env=env, cwd=REPO, timeout=240,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    payload = json.loads((tmp_path / "deployment.json").read_text())
    for student in payload["students"].values():
        assert set(student["runtimes"]) == {"PyTorch fp32", "ONNX fp32", "ONNX int8"}
        assert student["parity"]["ONNX fp32"]["max_abs_diff"] <= 1e-4
    table = (tmp_path / "deployment.md").read_text()
    assert "| ONNX int8 |" in table and "## Targets" in table
