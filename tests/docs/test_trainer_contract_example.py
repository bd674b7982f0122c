"""The minimal trainer of docs/trainer-contract.md, run as written: it trains to the end and
writes its model, saves at a notice and exits 143, resumes from that save, and keeps its notice
handler through the final save and the model write."""

from __future__ import annotations

import ast
import os
import pathlib
import re
import signal
import subprocess
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "trainer-contract.md"


def documented_trainer() -> str:
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(), flags=re.S)
    [trainer] = [b for b in blocks if "def main()" in b and "PreemptionNotice" in b]
    return trainer


def test_the_final_save_and_the_model_write_are_inside_the_notice_block():
    tree = ast.parse(documented_trainer())
    [block] = [n for n in ast.walk(tree) if isinstance(n, ast.With)]
    inside = {id(n) for n in ast.walk(block)}
    writes = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and n.func.attr in ("save", "write_model_dir")
    ]
    final = [n for n in writes if n.func.attr == "write_model_dir" or "final" in ast.unparse(n)]
    assert len(final) == 2 and all(id(n) in inside for n in final)


def test_the_documented_trainer_saves_at_a_notice_and_resumes_to_its_model(tmp_path):
    script = tmp_path / "train.py"
    # 1000 steps with a pause each, so a notice lands mid-run.
    source = documented_trainer().replace(
        "        step += 1\n", "        step += 1\n            time.sleep(0.005)\n", 1
    )
    source = source.replace("import sys\n", "import sys\nimport time\n", 1)
    script.write_text(source)
    env = {
        **os.environ,
        "VSP_CHECKPOINT_DIR": str(tmp_path / "ckpt"),
        "VSP_MODEL_DIR": str(tmp_path / "model"),
    }
    first = subprocess.Popen([sys.executable, str(script)], env=env)
    deadline = time.monotonic() + 60
    while not list((tmp_path / "ckpt").glob("ckpt-*")):  # the first periodic save
        assert first.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    first.send_signal(signal.SIGTERM)
    assert first.wait(timeout=60) == 143
    history = (tmp_path / "ckpt" / "history.jsonl").read_text()
    assert '"reason": "notice"' in history
    second = subprocess.run([sys.executable, str(script)], env=env, timeout=120)
    assert second.returncode == 0
    assert '"event": "resume"' in (tmp_path / "ckpt" / "history.jsonl").read_text()
    assert (tmp_path / "model" / "metadata.json").exists()
