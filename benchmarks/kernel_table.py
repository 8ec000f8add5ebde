"""Per-kernel comparison on real graphs: each halide-xpu kernel against the Triton kernel of the same node group.

The wrapper code Inductor generated for a model's graphs (forward, backward, optimizer) names each kernel and the FX
nodes it computes ("Topologically Sorted Source Nodes: [...]"). Both backends fuse with the same SIMD rules, so a node
group is the key that pairs a Triton kernel with ours; device time per kernel comes from one profiled call (Triton
kernels by name; ours by the GPU kernels each launched pipeline's PTX names, see ``device_times``).
"""
from __future__ import annotations

import ast
import json
import math
import re
from pathlib import Path
from typing import Any, Callable

import torch

_DEF = re.compile(r"^(\w+) = (async_compile\.triton\(|halide_xpu_load\(async_compile, (KernelMeta\(.*?\)), ''')",
                  re.M)
_NODES = re.compile(r"Topologically Sorted Source Nodes: \[([^\]]*)\]")
# a call site: the node comment Inductor writes before a kernel's call, then the call (``k.run(`` for Triton)
_CALL = re.compile(r"^[ \t]*# Topologically Sorted Source Nodes: \[([^\]]*)\].*\n[ \t]*(\w+)(?:\.run)?\(", re.M)


def _group(nodes: str) -> tuple[str, ...]:
    return tuple(n.strip() for n in nodes.split(",") if n.strip())


def call_groups(code: str) -> dict[str, list[tuple[str, ...]]]:
    """{kernel variable: the node group of each of its call sites} in one graph's wrapper code."""
    calls: dict[str, list[tuple[str, ...]]] = {}
    for m in _CALL.finditer(code):
        calls.setdefault(m.group(2), []).append(_group(m.group(1)))
    return calls


def kernel_groups(codes: list[str]) -> dict[str, dict[str, Any]]:
    """{profiler key: {"nodes": first node group, "graph": index of its graph's code, "defs": definitions, "groups":
    the node group of each call site (of each definition where the wrapper names no call sites)}} for every kernel
    defined in ``codes``. Triton kernels are keyed by name; ours by ``hx:<cache key[:12]>`` (computed from the
    metadata and source), so one kernel of ours that two graphs define (GPT-2's transposed-weight copy, in the
    forward and the backward graph) is one key with two groups; one definition called for several node groups
    (GPT-2's identical residual LayerNorms, where Triton's sources differ) has a group per call."""
    from halide_xpu import compiler
    from halide_xpu.meta import ArgSpec, KernelMeta, LoopVar, ScheduleSpec

    names = {"KernelMeta": KernelMeta, "ArgSpec": ArgSpec, "LoopVar": LoopVar, "ScheduleSpec": ScheduleSpec}
    found: dict[str, dict[str, Any]] = {}
    for graph, code in enumerate(codes):
        calls = call_groups(code)
        for m in _DEF.finditer(code):
            comments = code[max(0, code.rfind("\n\n", 0, m.start())):m.start()]
            nodes = _NODES.findall(comments)
            if not nodes:
                continue
            key = var = m.group(1)
            if m.group(3):  # ours: the launcher's cache key, as the profiler range names it
                end = code.index("''')", m.end())
                meta = eval(m.group(3), names)  # noqa: S307 - our own generated repr
                source = ast.literal_eval(code[m.end() - 3:end + 3])  # the string the launcher got
                key = "hx:" + compiler.kernel_key(meta, source)[:12]
            group = _group(nodes[0])
            entry = found.setdefault(key, {"nodes": group, "graph": graph, "defs": 0, "groups": []})
            entry["defs"] += 1
            entry["groups"].extend(calls.get(var) or [group])
    return found


def _entry_kernels(entry: Path) -> list[str]:
    """Names of the GPU kernels in a cache entry's CUDA object (its PTX ``.entry`` names)."""
    from halide_xpu.target import ptx

    try:
        return re.findall(r"\.entry\s+(\w+)\(", ptx.extract((entry / "kernel.o").read_bytes()))
    except (OSError, ValueError):
        return []


def device_times(fn: Callable[[], Any]) -> dict[str, list[Any]]:
    """{kernel or hx key: [device µs in one call, launches, our schedule variant]} for one profiled call on CUDA.

    Our kernels' time is the self time of the GPU kernels named in each launched pipeline's PTX: the profiler range
    around a launch (``hx:<key>:<variant>``) is kept only to learn which pipelines ran. Its device time is not used;
    with Halide's driver-API launches it was inflated in model steps (ResNet-18 batch norms: ~300 µs per range, 18-48 µs
    for the same kernels profiled alone)."""
    from torch.profiler import ProfilerActivity, profile

    from real_models import _named_launches

    with _named_launches() as entries, profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return attribute(prof, entries)


def attribute(prof: Any, entries: dict[str, Path]) -> dict[str, list[Any]]:
    """``device_times`` from a finished profile and ``_named_launches``' entries."""
    gpu: dict[str, list[float]] = {}
    ranges: dict[str, list[Any]] = {}
    for e in prof.key_averages():
        if e.key.startswith("hx:"):
            key, variant = ":".join(e.key.split(":")[:2]), e.key.split(":", 2)[-1]
            ranges[key] = [variant, e.count, entries.get(e.key)]
        elif e.self_device_time_total > 0:
            gpu[e.key] = [e.self_device_time_total, e.count]
    times: dict[str, list[Any]] = {k: [us, n, ""] for k, (us, n) in gpu.items()}
    owners: dict[str, list[str]] = {}
    for key, (_, _, entry) in ranges.items():
        for name in _entry_kernels(entry) if entry is not None else []:
            owners.setdefault(name, []).append(key)
    for key, (variant, count, _) in ranges.items():
        us = 0.0
        for name, keys in owners.items():
            if key in keys and name in gpu:
                us += gpu[name][0] / len(keys)  # a kernel name two pipelines share: split between them
        times[key] = [us, count, variant]
    return times


def _count(launches: float) -> float:
    """A launch count (a share of a kernel's launches, where several node groups define it): an int when whole."""
    return int(launches) if float(launches).is_integer() else round(launches, 2)


_OWN_PREFIX = {"triton": "triton_", "ours": "hx:"}


def compare(triton: tuple[list[str], dict], ours: tuple[list[str], dict], base: str = "Triton",
            base_prefix: str = _OWN_PREFIX["triton"]) -> dict[str, Any]:
    """Pairs kernels by node group: rows [nodes, triton µs, ours µs, ratio, launches] sorted by ratio, and the device
    time of kernels without a partner on either side. ``base`` names what the "triton" side is (another Triton
    configuration, or our own kernels with the default schedules), ``base_prefix`` its kernels' names."""
    groups = {}
    prefix = dict(_OWN_PREFIX, triton=base_prefix)
    for side, (codes, times) in (("triton", triton), ("ours", ours)):
        grouped = kernel_groups(codes)
        for key, info in grouped.items():
            if key not in times:
                continue  # defined but not launched in the profiled call (or no device time)
            us, calls, variant = times[key]
            share = info.get("groups") or [info["nodes"]]
            for nodes in share:  # a kernel that several graphs define: its time and launches split among them
                slot = groups.setdefault(nodes, {})
                prev = slot.get(side, [0.0, 0, [], variant])
                slot[side] = [prev[0] + us / len(share), prev[1] + calls / len(share), prev[2] + [key], prev[3]]
        # kernels of this backend whose definition names no node group (Triton's combo/foreach kernels): unpaired,
        # never dropped, or the optimizer step of one side would be missing from the comparison
        for key, (us, calls, variant) in times.items():
            if key.startswith(prefix[side]) and key not in grouped and us > 0:
                slot = groups.setdefault(("(no node list: " + key[:48] + ")",), {})
                slot[side] = [us, calls, [key], variant]
    rows, unmatched, unpaired = [], {"triton": 0.0, "ours": 0.0}, []
    for nodes, slot in groups.items():
        if "triton" in slot and "ours" in slot:
            t, o = slot["triton"][0], slot["ours"][0]
            rows.append({"nodes": list(nodes), "triton_us": round(t, 2), "ours_us": round(o, 2),
                         "ratio": round(o / t, 3) if t else float("nan"), "launches": _count(slot["ours"][1]),
                         "base_launches": _count(slot["triton"][1]),
                         "triton_kernel": slot["triton"][2][0], "ours_kernel": slot["ours"][2][0],
                         "variant": slot["ours"][3]})
        else:
            for side in slot:
                unmatched[side] += slot[side][0]
                unpaired.append({"side": side, "us": round(slot[side][0], 2), "launches": _count(slot[side][1]),
                                 "kernel": slot[side][2][0], "variant": slot[side][3], "nodes": list(nodes)})
    rows.sort(key=lambda r: -r["ratio"])
    ratios = [r["ratio"] for r in rows if r["ratio"] == r["ratio"] and r["ratio"] > 0]
    matched_t = sum(r["triton_us"] for r in rows)
    matched_o = sum(r["ours_us"] for r in rows)
    summary = {"kernels": len(rows), "geomean": round(math.exp(sum(map(math.log, ratios)) / len(ratios)), 3) if ratios else None,
               "above_1.5": sum(r > 1.5 for r in ratios), "matched_triton_us": round(matched_t, 1),
               "matched_ours_us": round(matched_o, 1), "unmatched_triton_us": round(unmatched["triton"], 1),
               "unmatched_ours_us": round(unmatched["ours"], 1)}
    unpaired.sort(key=lambda u: -u["us"])
    summary["base"] = base
    return {"summary": summary, "rows": rows, "unpaired": unpaired}


def launches_cell(row: dict[str, Any]) -> str:
    """``ours / base`` launches; where they differ, also the ratio per launch: the node group ran more often on one
    side because the other grouped a launch under other nodes (GPT-2's logits copy: 2 launches to Triton's 1, 2.1x
    in total, about 1.05x per launch), which the total ratio mixes with the kernel's own speed."""
    ours, base = row["launches"], row.get("base_launches")
    cell = f"{ours} / {base if base is not None else '?'}"
    if isinstance(base, (int, float)) and base and ours and ours != base and row["triton_us"]:
        cell += f" ({row['ours_us'] / ours / (row['triton_us'] / base):.2f}× per launch)"
    return cell


def write(out: Path, tables: dict[str, dict[str, Any]], meta: dict[str, Any]) -> None:
    """``harvested_kernels.json`` + ``.md`` (every case's summary; the slowest 10 kernels of each, with their nodes)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "harvested_kernels.json").write_text(json.dumps({"meta": meta, "cases": tables}, indent=1))
    lines = [f"# Harvested kernels: halide-xpu vs Triton per node group ({meta.get('device')}, {meta.get('date')}, "
             f"commit {meta.get('commit')})", "",
             "Each kernel of the models' forward, backward and optimizer graphs, paired with Triton's kernel for the same "
             "FX node group, device time of one training step (torch.profiler). Ratio = ours / Triton.", "",
             "| case | kernels paired | geomean | > 1.5× | paired µs ours / base | unpaired µs ours / base |",
             "|---|---|---|---|---|---|"]
    by_base: dict[str, list[float]] = {}
    for case, t in tables.items():
        s = t["summary"]
        by_base.setdefault(t["summary"].get("base", "Triton"), []).extend(
            r["ratio"] for r in t["rows"] if r["ratio"] == r["ratio"] and r["ratio"] > 0)
        lines.append(f"| {case} | {s['kernels']} | {s['geomean']}× | {s['above_1.5']} | {s['matched_ours_us']} / "
                     f"{s['matched_triton_us']} | {s['unmatched_ours_us']} / {s['unmatched_triton_us']} |")
    lines.append("")
    for base, ratios in by_base.items():
        if ratios:
            lines.append(f"All cases against {base}: {len(ratios)} kernels, geomean "
                         f"{math.exp(sum(map(math.log, ratios)) / len(ratios)):.3f}×, {sum(r > 1.5 for r in ratios)} "
                         f"above 1.5×, {sum(r < 1 / 1.05 for r in ratios)} below 1/1.05.")
    for case, t in tables.items():
        lines += ["", f"## {case}: slowest 10 by ratio", "",
                  f"| ratio | ours µs | {t['summary'].get('base', 'Triton')} µs | launches (ours / base) | variant | nodes |",
                  "|---|---|---|---|---|---|"]
        for r in t["rows"][:10]:
            nodes = ", ".join(r["nodes"][:6]) + (" …" if len(r["nodes"]) > 6 else "")
            lines.append(f"| {r['ratio']}× | {r['ours_us']} | {r['triton_us']} | {launches_cell(r)} | "
                         f"{r.get('variant', '')} | {nodes} |")
        if t.get("unpaired"):
            lines += ["", f"Unpaired (node groups fused differently), most device time first:", "",
                      "| side | µs | launches | kernel | variant | nodes |", "|---|---|---|---|---|---|"]
            for u in t["unpaired"][:8]:
                nodes = ", ".join(u["nodes"][:6]) + (" …" if len(u["nodes"]) > 6 else "")
                lines.append(f"| {u['side']} | {u['us']} | {u['launches']} | {u['kernel'][:40]} | {u['variant']} | {nodes} |")
    (out / "harvested_kernels.md").write_text("\n".join(lines) + "\n")
