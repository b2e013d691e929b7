#!/usr/bin/env python3
"""Plots bench/cpu_scaling.sh's scaling.csv: samples/s against processes, one panel per model,
one line per mode (hogwild, private copies, dataparallel, torch), and the ideal line (one
worker's rate times the processes). Plain SVG, no dependencies.

    python3 bench/plot_scaling.py bench/out/cpu_scaling/scaling.csv bench/plots/cpu-scaling.svg [TITLE]
"""
import csv
import sys
from collections import defaultdict

COLORS = {"hogwild": "#d62728", "private": "#2ca02c", "dataparallel": "#1f77b4", "torch": "#9467bd",
          "ideal": "#999999"}
LABELS = {"hogwild": "hogwild (shared weights)", "private": "private copies (no sharing)",
          "dataparallel": "dataparallel", "torch": "PyTorch mnist_hogwild", "ideal": "ideal (1 worker x N)"}
W, H, PAD_L, PAD_R, PAD_T, PAD_B = 460, 340, 70, 20, 40, 50


def nice_max(v):
    step = 10 ** (len(str(int(v))) - 1)
    for m in (1, 2, 2.5, 5, 10):
        if m * step >= v:
            return m * step
    return 10 * step


def esc(text):
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def panel(out, x0, model, series):
    counts = sorted({k for s in series.values() for k in s})
    top = nice_max(max(max(s.values()) for s in series.values()))
    pw, ph = W - PAD_L - PAD_R, H - PAD_T - PAD_B
    xmax = max(counts)

    def px(k):
        return x0 + PAD_L + pw * k / xmax

    def py(v):
        return PAD_T + ph * (1 - v / top)

    out.append(f'<text x="{x0 + W / 2}" y="22" text-anchor="middle" font-weight="bold">{esc(model)}, 1 epoch</text>')
    out.append(f'<rect x="{x0 + PAD_L}" y="{PAD_T}" width="{pw}" height="{ph}" fill="none" stroke="#333"/>')
    for i in range(6):
        v = top * i / 5
        out.append(f'<line x1="{x0 + PAD_L}" x2="{x0 + PAD_L + pw}" y1="{py(v):.1f}" y2="{py(v):.1f}" stroke="#eee"/>')
        out.append(f'<text x="{x0 + PAD_L - 6}" y="{py(v) + 4:.1f}" text-anchor="end" font-size="11">{v / 1000:g}k</text>')
    for k in counts:
        out.append(f'<text x="{px(k):.1f}" y="{PAD_T + ph + 16}" text-anchor="middle" font-size="11">{k}</text>')
    out.append(f'<text x="{x0 + PAD_L + pw / 2}" y="{H - 12}" text-anchor="middle" font-size="12">processes</text>')
    out.append(f'<text x="{x0 + 16}" y="{PAD_T + ph / 2}" text-anchor="middle" font-size="12" '
               f'transform="rotate(-90 {x0 + 16} {PAD_T + ph / 2})">training samples/s</text>')
    for mode, points in series.items():
        ks = sorted(points)
        path = " ".join(f"{px(k):.1f},{py(min(points[k], top)):.1f}" for k in ks)
        dash = ' stroke-dasharray="5,4"' if mode == "ideal" else ""
        out.append(f'<polyline points="{path}" fill="none" stroke="{COLORS[mode]}" stroke-width="2"{dash}/>')
        for k in ks:
            out.append(f'<circle cx="{px(k):.1f}" cy="{py(min(points[k], top)):.1f}" r="3" fill="{COLORS[mode]}"/>')


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    rows = defaultdict(lambda: defaultdict(dict))
    with open(sys.argv[1]) as f:
        for r in csv.DictReader(f):
            rows[r["model"]][r["mode"]][int(r["processes"])] = float(r["samples_per_second"])
    models = list(rows)
    for model in models:
        one = rows[model]["hogwild"].get(1)
        if one:
            rows[model]["ideal"] = {k: one * k for k in rows[model]["hogwild"]}
    title = sys.argv[3] if len(sys.argv) > 3 else ""
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W * len(models)}" height="{H + 70}" '
           f'font-family="sans-serif" font-size="12">', '<rect width="100%" height="100%" fill="white"/>']
    for i, model in enumerate(models):
        panel(out, i * W, model, rows[model])
    modes = [m for m in LABELS if any(m in rows[model] for model in models)]
    for i, mode in enumerate(modes):
        x = 20 + i * 215
        out.append(f'<line x1="{x}" x2="{x + 24}" y1="{H + 20}" y2="{H + 20}" stroke="{COLORS[mode]}" stroke-width="2"/>')
        out.append(f'<text x="{x + 30}" y="{H + 24}">{esc(LABELS[mode])}</text>')
    if title:
        out.append(f'<text x="20" y="{H + 55}" font-size="11" fill="#555">{esc(title)}</text>')
    out.append("</svg>")
    with open(sys.argv[2], "w") as f:
        f.write("\n".join(out) + "\n")
    print(f"plot: {sys.argv[2]}")


if __name__ == "__main__":
    main()
