#!/usr/bin/env bash
# Takes the screenshot of Prometheus's graph page that docs/dev.md shows: one
# of the monitoring dashboard's queries during the drills, from the Prometheus
# that `stratus dev --prometheus` runs, with headless Chromium (the Debian
# package chromium) and a fresh profile that talks to nothing but that page.
#
# Usage: hack/screenshot-prometheus.sh [STATE_DIR] [OUTPUT]
#   STATE_DIR  of the running `stratus dev --prometheus` (default .stratus/dev)
#   OUTPUT     the PNG to write (default docs/dev-prometheus.png)
# Environment: QUERY (default: the load balancers by state), RANGE (default 5m).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
state=${1:-$root/.stratus/dev}
out=${2:-$root/docs/dev-prometheus.png}
query=${QUERY:-sum by (provider, state) (stratus_service_load_balancers)}
range=${RANGE:-5m}

browser=$(command -v chromium || true)
if [[ -z $browser ]]; then
	echo "chromium not found: install the Debian package chromium" >&2
	exit 1
fi
url_file=$state/prometheus/url
if [[ ! -s $url_file ]]; then
	echo "no $url_file: is \`stratus dev --prometheus --state-dir $state\` running?" >&2
	exit 1
fi
base=$(<"$url_file")
encoded=$(python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$query")
page="$base/graph?g0.expr=$encoded&g0.tab=0&g0.range_input=$range&g0.stacked=0&g0.show_exemplars=0"

profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
# --virtual-time-budget lets the page's scripts fetch and draw the graph
# before the screenshot is taken.
"$browser" --headless --no-sandbox --disable-gpu --disable-background-networking \
	--disable-component-update --disable-sync --no-first-run --user-data-dir="$profile" \
	--hide-scrollbars --window-size=1280,960 --virtual-time-budget=15000 \
	--screenshot="$out" "$page" 2>/dev/null
echo "wrote $out ($query over $range)"
