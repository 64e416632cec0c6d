"""Print throughput ratios from a pytest-benchmark JSON file (one run, one machine).

Usage: python benchmarks/ratios.py benchmarks/results/latest.json
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict


def main(path: str) -> int:
    data = json.loads(open(path, encoding="utf-8").read())
    groups: dict[str, list[tuple[str, float, dict]]] = defaultdict(list)
    for b in data["benchmarks"]:
        info = b.get("extra_info", {})
        if "work" not in info:
            continue
        label = info["tool"] + (f" x{info['threads']}" if "threads" in info else "")
        rate = info["work"] / b["stats"]["median"]
        groups[b["group"]].append((label, rate, info))
    machine = data.get("machine_info", {})
    print(f"machine: {machine.get('cpu', {}).get('brand_raw', '?')}, {data.get('datetime', '')}")
    for group in sorted(groups):
        rows = sorted(groups[group], key=lambda r: -r[1])
        base = next(
            (r for r in rows if r[0].startswith("scipy") or r[0] == "numpy-lambdify"), rows[-1]
        )
        unit = rows[0][2].get("unit", "/s")
        print(f"\n{group}  ({unit}; ratio against {base[0]})")
        for label, rate, info in rows:
            extra = ""
            if "rhs_evals" in info:
                med = next(b for b in data["benchmarks"] if b.get("extra_info") is info)
                evals = info["rhs_evals"] / med["stats"]["median"]
                extra = f"   ({evals:.3g} lane-evaluations of f per second inside the integrator)"
            print(f"  {label:16s} {rate:14.4g}   x{rate / base[1]:10.1f}{extra}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "benchmarks/results/latest.json"))
