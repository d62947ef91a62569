"""The detection benchmark's report: the node's stage breakdown, the JSON file and the plot.

Read by ``bench_detect.py``. The JSON has one shape for every reader::

    {"machine": {...}, "configs": {"<name>": {"bare_ms": m, "pipeline_ms": m, "node_ms": m,
     "stages_ms": {...}, "backend": "...", "precision": "..."}}, "ultralytics_pt_ms": m,
     "ratios": {"<label>": {"median": r, "low": a, "high": b}},
     "skipped": {"<name>": "why this machine cannot run it"}}

``stages_ms`` holds the node's own stage medians (its diagnostics values, see
``vision_nodes/stage_times.py``) and ``outside``: the node path's median less their sum, the
time no node timer sees (the sender's ``publish()`` before DDS took the image, and the
answer's way back).
"""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path
from typing import Any, Mapping

from vision_nodes.stage_times import STAGES, stage_key


def stages_from_status(values: Mapping[str, str]) -> dict[str, float] | None:
    """Return a node's stage medians (ms) from its diagnostics values; None without numbers."""
    try:
        return {stage: float(values[stage_key(stage)]) for stage in STAGES}
    except (KeyError, ValueError):
        return None


def with_outside(stages: Mapping[str, float], node_ms: float) -> dict[str, float]:
    """``stages`` plus ``outside``: the node path's time no node timer counted (>= 0)."""
    return {**stages, 'outside': max(0.0, node_ms - sum(stages.values()))}


def breakdown_lines(configs: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Return the stage table, one line per configuration, in ms."""
    columns = list(STAGES) + ['outside']
    width = max([len(name) for name in configs] + [13])
    lines = [f"{'configuration':<{width}} " + ' '.join(f'{c[:11]:>11}' for c in columns)
             + f" {'node path':>10}"]
    for name, row in configs.items():
        stages = row.get('stages_ms')
        if not stages:
            lines.append(f'{name:<{width}} (no stage times from the node)')
            continue
        lines.append(f'{name:<{width}} ' + ' '.join(f'{stages[c]:11.2f}' for c in columns)
                     + f" {row['node_ms']:10.2f}")
    return lines


def machine_facts() -> dict[str, Any]:
    """CPU, cores and instruction sets of this machine, and the Python that ran."""
    from vision_nodes.platform.cpu import cpu_info

    return {**cpu_info().describe(), 'cpu_count': os.cpu_count(),
            'python': platform.python_version(), 'system': platform.platform()}


def write_json(path: Path, machine: Mapping[str, Any], configs: Mapping[str, Any],
               ultralytics_pt_ms: float | None, ratios: Mapping[str, Any],
               skipped: Mapping[str, str] | None = None,
               extra: Mapping[str, Any] | None = None) -> None:
    """Write the report in the shape above; ``extra``: a benchmark's own further keys."""
    Path(path).write_text(json.dumps({
        'machine': dict(machine), 'configs': dict(configs),
        'ultralytics_pt_ms': ultralytics_pt_ms, 'ratios': dict(ratios),
        'skipped': dict(skipped or {}), **dict(extra or {})}, indent=2) + '\n')


def write_plot(path: Path, configs: Mapping[str, Mapping[str, Any]],
               ultralytics_pt_ms: float | None, title: str) -> None:
    """Write a PNG: the node path's stages, and node vs pipeline vs bare vs Ultralytics.

    Per configuration, the stages but inference (what the node adds to the network), and the
    node path, pipeline and bare runner medians beside Ultralytics' predict.
    """
    import matplotlib

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    names = list(configs)
    fig, (stacked, compared) = plt.subplots(1, 2, figsize=(14, 5.5))
    bottom = [0.0] * len(names)
    for stage in [s for s in STAGES if s != 'inference'] + ['outside']:
        heights = [(configs[n].get('stages_ms') or {}).get(stage, 0.0) for n in names]
        stacked.bar(names, heights, bottom=bottom, label=stage)
        bottom = [b + h for b, h in zip(bottom, heights)]
    stacked.set_ylabel('ms per frame (medians)')
    stacked.set_title('node path outside the network, by stage')
    stacked.legend(fontsize=8)
    stacked.tick_params(axis='x', rotation=30)
    kinds = [('bare_ms', 'bare runner'), ('pipeline_ms', 'pipeline'), ('node_ms', 'node path')]
    step = 0.8 / len(kinds)
    for index, (key, label) in enumerate(kinds):
        compared.bar([i + (index - 1) * step for i in range(len(names))],
                     [configs[n].get(key) or 0.0 for n in names], width=step, label=label)
    if ultralytics_pt_ms:
        compared.axhline(ultralytics_pt_ms, color='black', linestyle='--',
                         label="Ultralytics YOLO('yolov8n.pt').predict")
    compared.set_xticks(range(len(names)), names, rotation=30)
    compared.set_ylabel('ms per frame (medians)')
    compared.set_title('node vs bare runner vs Ultralytics')
    compared.legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
