"""Write the parameter and backend tables of the docs, and config/detect.yaml, from the code.

    python -m vision_nodes.tools.docs           # rewrite what is out of date
    python -m vision_nodes.tools.docs --check   # exit 1, naming the files, if any is

Each fact has one source: parameters are the :class:`~vision_nodes.param_spec.ParamSpec`
tables (the node's in :mod:`vision_nodes.ros.params.specs`, each task's ``params`` and its
outputs' switches), backends the
runner tables (:func:`backend_facts`). In ``README.md`` and ``docs/*.md`` the text between
``<!-- BEGIN generated: NAME -->`` and ``<!-- END generated: NAME -->`` is this module's
``NAME`` block; ``config/detect.yaml`` is written whole.
``test/unit/project/test_generated_docs.py`` fails when the committed text differs from what
this module makes.
"""

from __future__ import annotations

import argparse
import re
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import yaml

from ..param_spec import ParamSpec

ROOT = Path(__file__).resolve().parent.parent.parent
COMMAND = 'python -m vision_nodes.tools.docs'
APPLIES_TEXT = {'reload': 'reload', 'activate': 'activate', 'live': 'live'}


def parameter_groups() -> list[tuple[str, tuple[ParamSpec, ...]]]:
    """(label, specs): the node's parameters, each task's (with its outputs'), the reports."""
    from ..ros.params.policy import output_switches
    from ..ros.params.specs import PARAMS, REPORTS
    from ..tasks import task_class

    return [('', PARAMS),
            ('Detection models', task_class('detect').params + output_switches('detect')),
            ('Classification models',
             task_class('classify').params + output_switches('classify')),
            ('Depth models', task_class('depth').params + output_switches('depth')),
            ('', REPORTS)]


@dataclass(frozen=True)
class BackendFacts:
    """One row of the backend table."""

    name: str
    runtime: str
    runner: str
    precisions: tuple[str, ...]
    architectures: tuple[str, ...]
    auto_rank: int | None


def backend_facts() -> list[BackendFacts]:
    """Read the backend facts from the backend table (:mod:`vision_nodes.backends`)."""
    from ..backends import AUTO_ORDER, BACKENDS

    rows = []
    for row in BACKENDS.values():
        module, cls = row.runner or ('', '')
        rank = AUTO_ORDER.index(row.name) + 1 if row.name in AUTO_ORDER else None
        rows.append(BackendFacts(row.name, row.runtime, f'{module.rsplit(".", 1)[-1]}.{cls}',
                                 row.precisions, row.architectures, rank))
    return sorted(rows, key=lambda r: (r.auto_rank is None, r.auto_rank or 0))


def provider_facts() -> list[tuple[str, str, int | None, bool, bool]]:
    """ONNX Runtime providers: (value, provider, auto rank, takes a GPU index, runs fp16)."""
    from ..runners.onnx_providers import (AUTO_ORDER, DEVICE_ID_PROVIDERS, EXECUTION_PROVIDERS,
                                          FP16_PROVIDERS)

    rows = [(value, full, AUTO_ORDER.index(full) + 1 if full in AUTO_ORDER else None,
             full in DEVICE_ID_PROVIDERS, full in FP16_PROVIDERS)
            for value, full in EXECUTION_PROVIDERS.items() if value != 'auto']
    return sorted(rows, key=lambda r: (r[2] is None, r[2] or 0))


def _code(value: Any) -> str:
    return f'`{value}`'


def _constraint(spec: ParamSpec) -> str:
    if spec.choices:
        return ', '.join(_code(c) if c else "`''`" for c in spec.choices)
    if spec.float_range:
        return f'{spec.float_range[0]} … {spec.float_range[1]}'
    if spec.int_range:
        return f'{spec.int_range[0]} … {spec.int_range[1]}'
    return ''


def _cell(text: str) -> str:
    return text.replace('|', '\\|').replace('<', '&lt;')


def parameters_block() -> str:
    """Return the parameter table: name, default, range or choices, when it applies, meaning."""
    from ..ros.params.specs import REPORTS

    lines = ['| name | default | range / choices | applies | meaning |', '|---|---|---|---|---|']
    for label, specs in parameter_groups():
        for spec in specs:
            applies = 'read only' if spec in REPORTS else APPLIES_TEXT[spec.applies]
            meaning = f'{label}: {spec.description}' if label else spec.description
            lines.append(f'| `{spec.name}` | `{spec.default!r}` | {_constraint(spec)} | '
                         f'{applies} | {_cell(meaning)} |')
    return '\n'.join(lines)


def backends_block() -> str:
    """Return the backend table: runtime, precisions, weights it runs, place in ``auto``."""
    lines = ['| backend | runtime | precisions | architectures it runs | `auto` order | runner |',
             '|---|---|---|---|---|---|']
    for row in backend_facts():
        lines.append(f'| `{row.name}` | {row.runtime} | {", ".join(row.precisions)} | '
                     f'{", ".join(row.architectures)} | {row.auto_rank or "not tried"} | '
                     f'`{row.runner}` |')
    return '\n'.join(lines)


def providers_block() -> str:
    """Return the ONNX Runtime execution provider table (``execution_provider`` values)."""
    lines = ['| `execution_provider` | ONNX Runtime provider | `auto` order | `device` | '
             '`precision: fp16` |', '|---|---|---|---|---|']
    for value, full, rank, gpu_index, fp16 in provider_facts():
        device = 'a GPU index (`device_id`)' if gpu_index else (
            "empty or `cpu`" if value == 'cpu' else 'see below')
        lines.append(f'| `{value}` | `{full}` | {rank or "not tried"} | {device} | '
                     f'{"yes" if fp16 else "no"} |')
    return '\n'.join(lines)


BLOCKS: dict[str, Callable[[], str]] = {
    'parameters': parameters_block, 'backends': backends_block,
    'execution-providers': providers_block,
}

DETECT_YAML_HEADER = """\
# Parameters of vision_node for object detection, with their defaults.
# Written by `{command}` from the parameter specs: edit those.
#
# Edit a copy and pass it with `ros2 launch vision_nodes detect.launch.py
# params_file:=<copy>` or `ros2 run vision_nodes vision_node --ros-args --params-file <copy>`.
{overridable}
#
# `/**` applies the parameters to the node whatever its name or namespace.
#
# When a change applies (a node that is already running; `ros2 param set` / set_parameters):
#   reload   - refused while configured or active: deactivate and clean up, set it,
#              configure and activate.
#   activate - refused while active: deactivate, set it, activate again.
#   live     - takes effect on the next frame.
"""


def detect_yaml() -> str:
    """config/detect.yaml: every parameter a detection node can be given, at its default."""
    from ..ros.process.launch_arguments import OVERRIDABLE
    from ..ros.params.policy import output_switches
    from ..ros.params.specs import PARAMS
    from ..tasks import task_class

    overridable = textwrap.wrap(
        f"Launch arguments {', '.join(OVERRIDABLE)} override the values here when given "
        '(non-empty). A bad value here is one error line naming the parameter; the node then '
        'stays unconfigured until it is set right.', 91)
    out = [DETECT_YAML_HEADER.format(command=COMMAND,
                                     overridable='\n'.join(f'# {line}' for line in overridable)),
           '/**:\n  ros__parameters:\n']
    specs = PARAMS + task_class('detect').params + output_switches('detect')
    for i, spec in enumerate(specs):
        comment = spec.description
        constraint = _constraint(spec).replace('`', '')
        if constraint:
            comment += f' ({"one of: " if spec.choices else ""}{constraint}.)'
        comment += f' Applies: {spec.applies}.'
        out += [f'    # {line}\n' for line in textwrap.wrap(comment, 88)]
        value = yaml.safe_dump({spec.name: spec.default}, default_flow_style=True,
                               width=1000).strip()[1:-1]
        out.append(f'    {value}\n')
        if i < len(specs) - 1:
            out.append('\n')
    return ''.join(out)


def _replace_blocks(text: str, source: str) -> str:
    def fill(match: re.Match) -> str:
        name = match.group(1)
        if name not in BLOCKS:
            raise SystemExit(f'{source}: unknown generated block {name!r} '
                             f'(known: {", ".join(BLOCKS)})')
        return f'{match.group(0).split("-->", 1)[0]}-->\n{BLOCKS[name]()}\n' \
               f'<!-- END generated: {name} -->'

    return re.sub(r'<!-- BEGIN generated: ([\w-]+) -->.*?<!-- END generated: \1 -->',
                  fill, text, flags=re.S)


def expected(root: Path = ROOT) -> dict[Path, str]:
    """Every generated file's path and the text it should have."""
    files = {root / 'config' / 'detect.yaml': detect_yaml()}
    for path in [root / 'README.md', *sorted((root / 'docs').glob('*.md'))]:
        if path.is_file():
            files[path] = _replace_blocks(path.read_text(), str(path.relative_to(root)))
    return files


def stale(root: Path = ROOT) -> list[Path]:
    """Files whose committed text differs from what this module makes."""
    return [path for path, text in expected(root).items()
            if not path.is_file() or path.read_text() != text]


def main(argv: list[str] | None = None) -> int:
    """Rewrite the generated docs, or (``--check``) say which are out of date."""
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__.splitlines()[0])
    parser.add_argument('--check', action='store_true',
                        help='change nothing; exit 1 naming the files that are out of date')
    args = parser.parse_args(argv)
    if args.check:
        paths = stale()
        for path in paths:
            print(f'{path.relative_to(ROOT)} is out of date: run `{COMMAND}`', file=sys.stderr)
        return 1 if paths else 0
    for path, text in expected().items():
        if not path.is_file() or path.read_text() != text:
            path.write_text(text)
            print(f'wrote {path.relative_to(ROOT)}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
