#!/bin/sh
# Loads an `irtool viz ... -o X.html` page in headless Chromium and takes a screenshot, to check
# that the self-contained viewer renders (no network is used: the page has no external links).
# usage: scripts/check_html.sh PAGE.html [OUT.png [QUERY]]   (Debian: apt-get install chromium)
# With QUERY the page opens as PAGE.html#search=QUERY: the viewer searches for that node name
# and zooms to the first hit, so the screenshot shows the search working.
set -eu
page=${1:?usage: check_html.sh PAGE.html [OUT.png [QUERY]]}
out=${2:-${page%.html}.png}
query=${3:-}
browser=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
if [ -z "$browser" ]; then
    echo "check_html.sh: chromium not found (apt-get install chromium)" >&2
    exit 2
fi
case $page in /*) abs=$page ;; *) abs=$(pwd)/$page ;; esac
case $out in /*) ;; *) out=$(pwd)/$out ;; esac
# the page must not reference the network
if grep -Eq '(src|href)="https?:' "$page"; then
    echo "check_html.sh: $page references the network" >&2
    exit 1
fi
rm -f "$out"
"$browser" --headless --disable-gpu --no-sandbox --hide-scrollbars --virtual-time-budget=2000 \
    --screenshot="$out" --window-size=1200,800 "file://$abs${query:+#search=$query}" >/dev/null 2>&1 || true
if [ ! -s "$out" ]; then
    echo "check_html.sh: no screenshot produced for $page" >&2
    exit 1
fi
echo "$out"
