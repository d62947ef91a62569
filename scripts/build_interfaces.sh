#!/usr/bin/env bash
# Build the from-source interface packages of interfaces/ (vision_msgs, vision_nodes_msgs)
# against the ROS 2 PyPI wheels installed in a Python venv, and install them into that venv
# (the venv root is the ament prefix).
#
# Usage: scripts/build_interfaces.sh [VENV_DIR] [PACKAGE ...]
#        (default: <repo>/.venv; every package, vision_msgs first). A PACKAGE that is a
#        folder's path (it holds a '/') is built from there, under its folder's name
#        (scripts/install_launch_stack.sh builds composition_interfaces so).
#
# Only for machines without apt ROS. On a real ROS install use
# `apt install ros-$ROS_DISTRO-vision-msgs` and build vision_nodes_msgs with colcon.
#
# Re-runs are instant for a package whose interface sources are unchanged and whose
# `import <package>.msg` works in the venv.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
#: Every package, in build order (a package may depend on the ones before it).
ALL_PACKAGES=(vision_msgs vision_nodes_msgs)

VENV_ARG="${1:-$REPO_ROOT/.venv}"
shift || true
PACKAGES=("$@")
if [[ ${#PACKAGES[@]} -eq 0 ]]; then
  PACKAGES=("${ALL_PACKAGES[@]}")
fi
if [[ ! -d "$VENV_ARG" ]]; then
  echo "build_interfaces: venv not found: $VENV_ARG" >&2
  exit 2
fi
VENV="$(cd "$VENV_ARG" && pwd)"
PY="$VENV/bin/python"
if [[ ! -x "$PY" ]]; then
  echo "build_interfaces: no python at $PY" >&2
  exit 2
fi

# Build and install one package (runs in a subshell: its traps and exits stay its own).
build_one() (
PKG="$1"
SRC_DIR="$REPO_ROOT/interfaces/$PKG"
if [[ "$PKG" == */* ]]; then
  SRC_DIR="$(cd "$PKG" && pwd)"
  PKG="$(basename "$SRC_DIR")"
fi
BUILD_DIR="$REPO_ROOT/build/$PKG"
LOG="$BUILD_DIR/build.log"
if [[ ! -f "$SRC_DIR/package.xml" ]]; then
  echo "build_interfaces: no interface package '$PKG' in $(dirname "$SRC_DIR")" >&2
  exit 2
fi
STAMP="$VENV/share/$PKG/vision_nodes_source.sha256"

# Hash of everything that defines the package (names + contents).
src_hash() {
  (
    cd "$SRC_DIR"
    { printf '%s\n' CMakeLists.txt package.xml
      for kind in msg srv action; do
        if [[ -d "$kind" ]]; then find "$kind" -name "*.$kind"; fi
      done | LC_ALL=C sort; } |
      while IFS= read -r f; do
        printf '%s\n' "$f"
        sha256sum < "$f"
      done
  ) | sha256sum | cut -d' ' -f1
}

HASH="$(src_hash)"
# The module that proves the install: msg, else srv (composition_interfaces has services only).
KIND=msg
if [[ ! -d "$SRC_DIR/msg" ]]; then KIND=srv; fi

if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$HASH" ]] &&
   "$PY" -c "import $PKG.$KIND" >/dev/null 2>&1; then
  echo "$PKG: up to date in $VENV"
  exit 0
fi

for tool in cmake gcc g++; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "build_interfaces: '$tool' not found on PATH" >&2
    exit 2
  fi
done

mkdir -p "$BUILD_DIR"
: > "$LOG"

# fd 4 = the caller's stderr, so the failure report is not swallowed by the
# log redirection that is active when a build step fails.
exec 4>&2
on_fail() {
  local rc=$?
  {
    echo "build_interfaces: $PKG FAILED (exit $rc); last lines of $LOG:"
    tail -n 60 "$LOG" || true
  } >&4 2>&4
  exit "$rc"
}
trap on_fail ERR

# A build dir configured for another venv (or a stale cache) is discarded.
if [[ -f "$BUILD_DIR/CMakeCache.txt" ]] &&
   ! grep -qxF "CMAKE_INSTALL_PREFIX:PATH=$VENV" "$BUILD_DIR/CMakeCache.txt"; then
  find "$BUILD_DIR" -mindepth 1 -maxdepth 1 ! -name build.log -exec rm -rf {} +
fi

# Python / NumPy include dirs of the venv interpreter.
read -r PY_INC NP_INC < <("$PY" -c '
import sysconfig, numpy
print(sysconfig.get_paths()["include"], numpy.get_include())') || {
  echo "build_interfaces: could not query $PY for include dirs (is numpy installed?)" >&2
  exit 2
}
if [[ ! -f "$PY_INC/Python.h" ]]; then
  echo "build_interfaces: Python.h not found in $PY_INC (install the Python dev headers)" >&2
  exit 2
fi

# The kilted wheels' generator targets name the wheel builder's Python include dirs, which do
# not exist here: this CMake file, injected via CMAKE_PROJECT_INCLUDE, points them at the
# venv's (see the file). Nothing outside the build dir is touched.
FIXUP="$REPO_ROOT/scripts/wheel_include_redirect.cmake"

export AMENT_PREFIX_PATH="$VENV"
export CMAKE_PREFIX_PATH="$VENV"
export PATH="$VENV/bin:$PATH"
export LD_LIBRARY_PATH="$VENV/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
unset PYTHONHOME

JOBS="$(nproc 2>/dev/null || echo 4)"

{
  echo "== configure ($(date))"
  cmake -S "$SRC_DIR" -B "$BUILD_DIR" \
    -DCMAKE_BUILD_TYPE=Release \
    -DBUILD_TESTING=OFF \
    -DCMAKE_INSTALL_PREFIX="$VENV" \
    -DPython3_EXECUTABLE="$PY" \
    -DCMAKE_PROJECT_INCLUDE="$FIXUP" \
    -DVISION_MSGS_PYTHON_INCLUDE_DIR="$PY_INC" \
    -DVISION_MSGS_NUMPY_INCLUDE_DIR="$NP_INC"
  echo "== build"
  cmake --build "$BUILD_DIR" --parallel "$JOBS"
  echo "== install"
  cmake --install "$BUILD_DIR"
  echo "== check import"
  "$PY" -c "import $PKG.$KIND"
} >> "$LOG" 2>&1

mkdir -p "$(dirname "$STAMP")"
printf '%s\n' "$HASH" > "$STAMP"
trap - ERR
echo "$PKG: built and installed into $VENV"
)

for pkg in "${PACKAGES[@]}"; do
  build_one "$pkg"
done
