#!/usr/bin/env bash
# Install the ROS 2 launch stack into the project's venv from pinned source tarballs:
# launch, launch_xml, launch_yaml, launch_testing, launch_ros, launch_testing_ros, ros2launch,
# rosidl_runtime_py, ros2cli with its verbs (pkg, node, service, topic, param, lifecycle, run,
# interface) and composition_interfaces. None of them is on a package registry, so the launch
# tests (test/launch) and the `ros2` CLI need them from here; their sources are never part of
# this repository. The folder holds `git archive` snapshots of the upstream repositories and a
# README with the commits; CI has it as ../shared/ros2-launch-stack beside the clone.
#
# Usage: scripts/install_launch_stack.sh VENV STACK_DIR
#
# The ament_python packages install with pip (no dependencies, no build isolation: their
# registry dependencies, osrf-pycommon and argcomplete, come from requirements/test.txt);
# composition_interfaces, a rosidl package that launch_ros imports, builds with CMake like the
# project's own interface packages (scripts/build_interfaces.sh). Re-runs are instant while the
# tarballs and this script are unchanged (a stamp in the venv records their hash) and the
# packages still import.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$(cd "${1:?usage: $0 VENV STACK_DIR}" && pwd)"
STACK="$(cd "${2:?usage: $0 VENV STACK_DIR}" && pwd)"
PY="$VENV/bin/python"
STAMP="$VENV/share/vision_nodes_launch_stack.sha256"
SRC="$ROOT/build/launch_stack"
LOG="$ROOT/build/launch_stack.log"
TARBALLS=(launch launch_ros ros2cli rosidl_runtime_py rcl_interfaces)
#: The pip-installed packages in dependency order (folders inside the unpacked tarballs).
PYTHON_PACKAGES=(launch/launch launch/launch_xml launch/launch_yaml launch/launch_testing
                 launch_ros/launch_ros launch_ros/launch_testing_ros rosidl_runtime_py
                 ros2cli/ros2cli ros2cli/ros2pkg ros2cli/ros2node ros2cli/ros2service
                 ros2cli/ros2topic ros2cli/ros2param ros2cli/ros2lifecycle ros2cli/ros2run
                 ros2cli/ros2interface launch_ros/ros2launch)
#: What must import for the stack to count as installed.
IMPORTS='import launch, launch_xml, launch_yaml, launch_testing, launch_ros, launch_testing_ros
import ros2cli, ros2launch, ros2param, ros2lifecycle, rosidl_runtime_py
import composition_interfaces.srv'

for name in "${TARBALLS[@]}"; do
  if [[ ! -f "$STACK/$name.tar.gz" ]]; then
    echo "install_launch_stack: $STACK/$name.tar.gz is missing" >&2
    exit 2
  fi
done
want="$( { for name in "${TARBALLS[@]}"; do sha256sum < "$STACK/$name.tar.gz"; done
           sha256sum < "${BASH_SOURCE[0]}"; } | sha256sum | cut -d' ' -f1)"
if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$want" ]] && "$PY" -c "$IMPORTS" >/dev/null 2>&1
then
  echo "launch stack: up to date in $VENV"
  exit 0
fi

echo "launch stack: installing from $STACK (log: $LOG)"
mkdir -p "$ROOT/build"
rm -rf "$SRC"
mkdir -p "$SRC"
: > "$LOG"
for name in "${TARBALLS[@]}"; do
  tar -xzf "$STACK/$name.tar.gz" -C "$SRC"
done
fail() {
  echo "install_launch_stack: $1; last lines of $LOG:" >&2
  tail -n 40 "$LOG" >&2
  exit 1
}
"$PY" -m pip install --disable-pip-version-check -q --no-deps --no-build-isolation \
  "${PYTHON_PACKAGES[@]/#/$SRC/}" >>"$LOG" 2>&1 || fail "pip install failed"
# The interface package: its folder given as a path, built like interfaces/*.
"$ROOT/scripts/build_interfaces.sh" "$VENV" "$SRC/rcl_interfaces/composition_interfaces" \
  >>"$LOG" 2>&1 || fail "composition_interfaces did not build"
"$PY" -c "$IMPORTS" >>"$LOG" 2>&1 || fail "the launch stack does not import"
echo "$want" > "$STAMP"
echo "launch stack: installed into $VENV"
