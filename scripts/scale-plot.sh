#!/bin/sh
# Draws the scale matrix (`stellflow perf scale --csv FILE`) as an SVG image: for each
# broker and case, the client's records/s as a fraction of the raw ceiling of the same round
# (left) and its CPU time per record (right), against the partition count (log scale).
#
# Usage: scripts/scale-plot.sh [CSV] [SVG]
#   CSV  default docs/scale-matrix.csv   (columns: broker,partitions,case,records_per_s,
#        raw_records_per_s,ns_cpu_per_record,raw_ns_cpu_per_record,rss_mib)
#   SVG  default docs/scale-matrix.svg
#
# Needs only a POSIX shell and awk (nothing to install or build). To measure again first:
#   cargo build --release -p stellflow-cli
#   target/release/stellflow -b HOST:PORT perf scale --label real --csv docs/scale-matrix.csv
#   target/release/stellflow perf scale --label sim --csv docs/scale-matrix.csv   # embedded sim
# (remove the old CSV first: rows are appended).
set -eu
csv="${1:-docs/scale-matrix.csv}"
svg="${2:-docs/scale-matrix.svg}"
[ -r "$csv" ] || { echo "scale-plot.sh: cannot read $csv" >&2; exit 1; }

awk -F, '
function log2(x) { return log(x) / log(2) }
function esc(s) { gsub(/&/, "\\&amp;", s); gsub(/</, "\\&lt;", s); return s }
NR == 1 { next }
{
  key = $1 " " $3
  if (!(key in seen)) { seen[key] = 1; keys[++nk] = key }
  n = ++count[key]
  px[key, n] = $2 + 0
  ratio[key, n] = ($5 > 0) ? $4 / $5 : 0
  cpu[key, n] = $6 + 0
  if ($2 + 0 > maxp) maxp = $2 + 0
  if (ratio[key, n] > maxr) maxr = ratio[key, n]
  if ($6 + 0 > maxc) maxc = $6 + 0
}
END {
  if (nk == 0) { print "scale-plot.sh: no rows" > "/dev/stderr"; exit 1 }
  W = 860; H = 360; pw = 340; ph = 240; top = 50; lefts[1] = 70; lefts[2] = 500
  # Ratios past 2 (a ceiling run that stumbled) are drawn at the top of the panel.
  maxr = (maxr < 1.2) ? 1.2 : ((maxr > 2) ? 2 : maxr * 1.1)
  maxc = maxc * 1.1
  xmax = (maxp > 1) ? log2(maxp) : 1
  printf "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" font-size=\"12\">\n", W, H
  printf "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n", W, H
  title[1] = "records/s ÷ raw ceiling (same round)"; title[2] = "client CPU per record (ns)"
  ymax[1] = maxr; ymax[2] = maxc
  for (pnl = 1; pnl <= 2; pnl++) {
    x0 = lefts[pnl]
    printf "<text x=\"%d\" y=\"%d\" font-weight=\"bold\">%s</text>\n", x0, top - 15, title[pnl]
    printf "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"gray\"/>\n", x0, top, pw, ph
    for (t = 0; t <= 4; t++) {
      v = ymax[pnl] * t / 4; y = top + ph - ph * t / 4
      printf "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/>\n", x0, x0 + pw, y, y
      printf "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", x0 - 5, y + 4, (pnl == 1) ? sprintf("%.2f", v) : sprintf("%.0f", v)
    }
    if (pnl == 1) {
      y = top + ph - ph / ymax[1]
      printf "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#bbb\" stroke-dasharray=\"2,2\"/>\n", x0, x0 + pw, y, y
      y = top + ph - ph * 0.8 / ymax[1]
      printf "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#c33\" stroke-dasharray=\"4,3\"/>\n", x0, x0 + pw, y, y
      printf "<text x=\"%d\" y=\"%.1f\" fill=\"#c33\">0.8</text>\n", x0 + pw + 4, y + 4
    }
    for (p = 1; p <= maxp; p *= 4) {
      x = x0 + pw * log2(p) / xmax
      printf "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%d</text>\n", x, top + ph + 16, p
    }
    printf "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">partitions</text>\n", x0 + pw / 2, top + ph + 32
    for (k = 1; k <= nk; k++) {
      key = keys[k]
      color = (key ~ /consume/) ? "#1f77b4" : "#ff7f0e"
      dash = (key ~ /^sim /) ? " stroke-dasharray=\"6,4\"" : ""
      pts = ""
      for (i = 1; i <= count[key]; i++) {
        v = (pnl == 1) ? ratio[key, i] : cpu[key, i]
        if (v > ymax[pnl]) v = ymax[pnl]
        x = x0 + pw * ((px[key, i] > 1) ? log2(px[key, i]) : 0) / xmax
        y = top + ph - ph * v / ymax[pnl]
        pts = pts sprintf("%.1f,%.1f ", x, y)
        printf "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n", x, y, color
      }
      printf "<polyline points=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s/>\n", pts, color, dash
    }
  }
  for (k = 1; k <= nk; k++) {
    key = keys[k]
    color = (key ~ /consume/) ? "#1f77b4" : "#ff7f0e"
    dash = (key ~ /^sim /) ? " stroke-dasharray=\"6,4\"" : ""
    x = 70 + (k - 1) * 190; y = H - 18
    printf "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"2\"%s/>\n", x, x + 24, y, y, color, dash
    printf "<text x=\"%d\" y=\"%d\">%s</text>\n", x + 30, y + 4, esc(key)
  }
  print "</svg>"
}' "$csv" > "$svg"
echo "scale-plot.sh: wrote $svg" >&2
