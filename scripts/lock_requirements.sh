#!/usr/bin/env bash
# Refresh requirements/constraints.txt, the exact versions a fresh machine installs.
#
# scripts/setup_env.sh installs requirements/*.txt under these constraints, so a new release
# of any dependency (direct or transitive) reaches CI only through a commit that changes this
# file. To move to newer versions:
#
#   scripts/lock_requirements.sh          # resolves requirements/*.txt afresh in a scratch venv
#   git diff requirements/constraints.txt # read what moved
#   rm -rf .venv && scripts/dev test      # the whole suite on exactly those versions
#
# and commit the file with the test result. Bump a direct dependency by editing its
# requirements/*.txt line first.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3.11}"
SCRATCH="$(mktemp -d)"
trap 'rm -rf "$SCRATCH"' EXIT
cd "$ROOT"

"$PYTHON" -m venv "$SCRATCH/venv"
py="$SCRATCH/venv/bin/python"
"$py" -m pip install --disable-pip-version-check -q --upgrade pip setuptools wheel
args=()
for req in requirements/ros.txt requirements/runtime.txt requirements/openvino.txt \
           requirements/torch.txt requirements/validation.txt requirements/test.txt; do
  args+=(-r "$req")
done
# One resolution over every file, so the versions agree with each other.
"$py" -m pip install --disable-pip-version-check -q "${args[@]}"
{
  echo "# Exact versions scripts/setup_env.sh installs (pip constraints). Made by"
  echo "# scripts/lock_requirements.sh with $("$py" --version); refresh as it says."
  "$py" -m pip freeze --all --exclude-editable | LC_ALL=C sort -f
} > requirements/constraints.txt
echo "lock_requirements: wrote requirements/constraints.txt ($(grep -vc '^#' requirements/constraints.txt) packages)"
