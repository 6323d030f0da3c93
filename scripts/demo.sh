#!/bin/sh
# make demo: the project's main job on its embedded default, printed as a readable table.
# Until the Prudence layer lands this is the vmem benchmark (instant-fit vs best-fit vs a
# linear resource map, as arenas fragment).
set -eu
cd "$(dirname "$0")/.."
mkdir -p out
exec ./build/bin/prd-bench vmem
