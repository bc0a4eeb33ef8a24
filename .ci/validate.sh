#!/bin/sh
# Accuracy regression check: every entry of corpus/validate/manifest.txt (a pipeline's output
# against its input) is compared with corpus/validate/baseline.json. Run from the repository
# root with the irtool binary as $1; writes out/validate.xml (JUnit). Entries whose models are
# missing (../shared absent) are skipped. Exit status: irtool's (0 pass, 1 regression, 2 error).
set -eu
IRTOOL=${1:?usage: .ci/validate.sh PATH/TO/irtool}
mkdir -p out
exec "$IRTOOL" validate --corpus corpus/validate --baseline corpus/validate/baseline.json \
    --junit out/validate.xml --jobs "${VALIDATE_JOBS:-2}"
