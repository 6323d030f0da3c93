#!/bin/sh
# layers.sh SOURCE_DIR BUILD_DIR: every call between the files of src/ runs down the floors
# (scripts/check-layers.sh, read from this build's object files); a call that runs up or
# sideways, and is not one of the edges declared there and in docs/design.md §1, fails.
# prd-test-labels: unit
exec sh "$1/scripts/check-layers.sh" "$2"
