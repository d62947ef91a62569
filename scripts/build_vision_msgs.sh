#!/usr/bin/env bash
# Build interfaces/vision_msgs into a venv: scripts/build_interfaces.sh for that one package.
#
# Usage: scripts/build_vision_msgs.sh [VENV_DIR]     (default: <repo>/.venv)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
exec "$ROOT/scripts/build_interfaces.sh" "${1:-$ROOT/.venv}" vision_msgs
