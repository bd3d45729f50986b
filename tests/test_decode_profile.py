"""benchmarks.decode_profile on CPU at tiny width (the GPU run's code path), and its README section."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.accelerator.readme import decode_section
from benchmarks.decode_profile import main


def test_decode_profile_times_each_phase_on_cpu(tmp_path: Path) -> None:
    assert main(["--device", "cpu", "--scale", "tiny", "--rows", "2", "1", "--new-tokens", "3", "--profile-steps", "2",
                 "--out", str(tmp_path)]) == 0
    d = json.loads((tmp_path / "decode_profile.json").read_text())
    assert [(p["rows"], p["adapter"]) for p in d["phases"]] == [(2, True), (2, False), (1, True), (1, False)]
    assert all(p["prefill_s"] > 0 and p["decode_step_s"] >= 0 and p["new"] == 3 for p in d["phases"])
    assert d["profile"]["steps"] == 2 and d["profile"]["top_host_ops"]


def test_decode_section_reads_the_ratios_off_the_file(tmp_path: Path) -> None:
    assert decode_section(tmp_path) == []  # not run: nothing said
    phases = [{"rows": r, "adapter": a, "prompt": 10, "new": 4, "prefill_s": 0.5, "decode_step_s": s}
              for r, a, s in ((64, True, 0.12), (64, False, 0.03), (8, True, 0.1), (8, False, 0.03))]
    prof = {"rows": 64, "steps": 8, "kernels": 5000, "top_host_ops": [{"op": "x", "self_cpu_s": 1.0}]}
    (tmp_path / "decode_profile.json").write_text(json.dumps({"device": "G", "scale": "4b", "phases": phases,
                                                               "profile": prof}))
    text = "\n".join(decode_section(tmp_path))
    assert "| 64 | on | 0.50 | 120 |" in text and "| 8 | off | 0.50 | 30 |" in text
    assert "for 8 rows as for 64 (100 and 120 ms)" in text and "4.0x as long as the base model alone" in text
    assert "5,000 device kernels over 10 forwards, about 500 a forward" in text


def test_decode_section_says_a_step_grows_with_rows_when_it_does(tmp_path: Path) -> None:
    phases = [{"rows": r, "adapter": a, "prompt": 10, "new": 4, "prefill_s": 0.5, "decode_step_s": s}
              for r, a, s in ((64, True, 0.12), (64, False, 0.06), (8, True, 0.03), (8, False, 0.02))]
    (tmp_path / "decode_profile.json").write_text(json.dumps({"device": "G", "scale": "4b", "phases": phases}))
    text = "\n".join(decode_section(tmp_path))
    assert "4.0x as long for 64 rows as for 8 (120 and 30 ms)" in text and "not bound by bytes" not in text
    assert "2.0x as long as the base model alone" in text and "kernels" not in text
