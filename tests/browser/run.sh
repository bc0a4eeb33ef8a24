#!/bin/sh
# The HTML viewer in a real browser: draws ResNet-50 (../shared/onnx-tests/light, after
# default,fuse) as a page and runs viewer_test.py on it in headless Chromium. Skips, with a
# message and exit 0, when chromium, python3 or the shared models are missing.
# usage: tests/browser/run.sh PATH/TO/irtool [SHARED_DIR] [OUTDIR]   (OUTDIR default out/browser)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
irtool=${1:?usage: run.sh PATH/TO/irtool [SHARED_DIR] [OUTDIR]}
shared=${2:-$here/../../../shared}
out=${3:-out/browser}
model=$shared/onnx-tests/light/light_resnet50.onnx
if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
    echo "browser test: skipped (chromium not installed: apt-get install chromium)"; exit 0
fi
if ! command -v python3 >/dev/null 2>&1; then echo "browser test: skipped (python3 missing)"; exit 0; fi
if [ ! -f "$model" ]; then echo "browser test: skipped ($model not found)"; exit 0; fi
mkdir -p "$out"
"$irtool" viz "$model" -p default,fuse -o "$out/resnet50.html"
python3 "$here/viewer_test.py" "$out/resnet50.html" "$out"
