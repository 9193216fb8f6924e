#!/usr/bin/env bash
# Install the pinned scapy wheel (from PyPI, through pip) into a directory of its own, for
# the PRM command oracle: rdma-core's tests/mlx5_prm_structs.py (in the rdma-core source
# that scripts/rdma-core.sh unpacks) serializes CREATE_CQ / CREATE_QP with it.
#
# Result: target/scapy/2.6.1/site/scapy/, and a `.stamp` written last. The last line printed
# on success is the site directory.
#
# Idempotent: with a complete install it only checks the stamp and prints the path.
# Environment:
#   IBGDA_SCAPY_DIR   where to install the site directory (default <repo>/target/scapy/2.6.1/site)
#   CARGO_TARGET_DIR  honoured for the default location
#   PYTHON            the interpreter whose pip is used (default python3)
set -euo pipefail

SCAPY="scapy==2.6.1"

script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo_root=$(cd "$script_dir/.." && pwd)
target_dir=${CARGO_TARGET_DIR:-$repo_root/target}
case "$target_dir" in
    /*) ;;
    *) target_dir="$repo_root/$target_dir" ;;
esac
site=${IBGDA_SCAPY_DIR:-$target_dir/scapy/2.6.1/site}
python=${PYTHON:-python3}

if [[ -f "$site/.stamp" && "$(cat "$site/.stamp")" == "$SCAPY" ]]; then
    echo "$site"
    exit 0
fi

echo "scapy.sh: installing $SCAPY into $site" >&2
rm -rf "$site"
mkdir -p "$site"
"$python" -m pip install --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
    --no-compile --root-user-action=ignore --target "$site" "$SCAPY"
[[ -f "$site/scapy/__init__.py" ]] || { echo "scapy.sh: error: scapy missing after install" >&2; exit 1; }
PYTHONPATH="$site" "$python" -c 'import scapy.packet, scapy.fields' \
    || { echo "scapy.sh: error: $SCAPY does not import with $python" >&2; exit 1; }
echo "$SCAPY" > "$site/.stamp"
echo "$site"
