"""Re-draw a results PNG from its kernels.json (for runs made where matplotlib is missing)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_cpu import plot  # noqa: E402

if __name__ == "__main__":
    path = Path(sys.argv[1])
    data = json.loads(path.read_text())
    anchor = "triton" if "triton" in data["rows"][0]["results"] else "cpp"
    backends = list(data["rows"][0]["results"])
    plot(data["rows"], backends, path.with_suffix(".png"), anchor=anchor,
         anchor_label="Inductor + Triton" if anchor == "triton" else "Inductor C++")
    print("wrote", path.with_suffix(".png"))
