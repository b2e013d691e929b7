#!/usr/bin/env python3
"""The simulated accuracy against the delay (bench/variants.sh, part 3): the MLP's --simulate runs
at --delay fixed:K, each K's mean final test accuracy over seeds with its 95% interval as a band,
and beside them the real Hogwild runs (lock-free, 1 and 2 workers) at their measured mean
staleness. Prints the markdown table of the same numbers. Plain SVG, no dependencies.

    python3 bench/plot_delay.py SIMULATE_SUMMARY.csv REAL_SUMMARY.csv REAL_MEASURE.txt OUT.svg [VIRTUAL_WORKERS]
"""
import csv
import math
import sys

W, H, PAD_L, PAD_R, PAD_T, PAD_B = 560, 360, 70, 20, 40, 56


def esc(text):
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def setting(row, key):
    for word in row["settings"].split():
        name, _, value = word.partition("=")
        if name == key:
            return value
    return None


def simulated(path):
    """{delay: (mean, ci_low, ci_high, best, runs)} of the rows whose settings name a fixed delay."""
    out = {}
    for row in csv.DictReader(open(path)):
        delay = setting(row, "delay") or "fixed:0"
        if not delay.startswith("fixed:"):
            continue
        out[int(delay.split(":")[1])] = tuple(float(row[k]) for k in (
            "final_accuracy_mean", "final_accuracy_ci_low", "final_accuracy_ci_high", "best_accuracy_mean")) + (
            int(row["runs"]),)
    return out


def real(summary, measure):
    """[(workers, staleness, mean, ci_low, ci_high)] of the lock-free rows; 2 workers at the measured mean."""
    staleness = None
    for line in open(measure):
        words = line.split()
        if words and words[0] == "all":
            staleness = float(words[2])
    out = []
    for row in csv.DictReader(open(summary)):
        if setting(row, "update") not in (None, "lockfree") or setting(row, "weights") or setting(row, "max-staleness"):
            continue
        workers = int(row["workers"])
        x = 0.0 if workers == 1 else staleness
        if x is None:
            continue
        out.append((workers, x, float(row["final_accuracy_mean"]), float(row["final_accuracy_ci_low"]),
                    float(row["final_accuracy_ci_high"])))
    return out


def main():
    if len(sys.argv) not in (5, 6):
        sys.exit(__doc__)
    sim = simulated(sys.argv[1])
    if not sim:
        sys.exit(f"{sys.argv[1]}: no --delay fixed:K groups")
    reals = real(sys.argv[2], sys.argv[3])
    print("| delay K | runs | final accuracy % (mean [95% interval]) | best accuracy % |")
    print("|---|---|---|---|")
    for k in sorted(sim):
        m, lo, hi, best, n = sim[k]
        print(f"| {k} | {n} | {m:.2f} [{lo:.2f}, {hi:.2f}] | {best:.2f} |")
    for workers, x, m, lo, hi in reals:
        print(f"| real, {workers} worker(s), measured mean staleness {x:.2f} | | {m:.2f} [{lo:.2f}, {hi:.2f}] | |")

    delays = sorted(sim)
    xmax = math.log2(1 + max(delays))
    values = [v for k in delays for v in sim[k][1:3]] + [v for r in reals for v in r[3:5]]
    values = [v for v in values if math.isfinite(v)]
    lo_y = math.floor(min(values) - 0.5)
    hi_y = math.ceil(max(values) + 0.5)
    pw, ph = W - PAD_L - PAD_R, H - PAD_T - PAD_B

    def px(k):
        return PAD_L + pw * math.log2(1 + k) / xmax

    def py(v):
        return PAD_T + ph * (1 - (min(max(v, lo_y), hi_y) - lo_y) / (hi_y - lo_y))

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{W / 2}" y="22" text-anchor="middle" font-weight="bold">'
           f'MLP: final test accuracy against the delay (mean, 95% band)</text>',
           f'<rect x="{PAD_L}" y="{PAD_T}" width="{pw}" height="{ph}" fill="none" stroke="#333"/>']
    step = next(t for t in (1, 2, 5, 10, 20, 25, 50) if (hi_y - lo_y) / t <= 8)
    lo_y = step * math.floor(lo_y / step)
    for v in range(lo_y, hi_y + 1, step):
        out.append(f'<line x1="{PAD_L}" x2="{PAD_L + pw}" y1="{py(v):.1f}" y2="{py(v):.1f}" stroke="#eee"/>')
        out.append(f'<text x="{PAD_L - 6}" y="{py(v) + 4:.1f}" text-anchor="end" font-size="11">{v}%</text>')
    for k in delays:
        out.append(f'<text x="{px(k):.1f}" y="{PAD_T + ph + 16}" text-anchor="middle" font-size="11">{k}</text>')
    out.append(f'<text x="{PAD_L + pw / 2}" y="{H - 20}" text-anchor="middle" font-size="12">'
               f'delay: updates between a gradient\'s read and its write (log scale of 1 + delay)</text>')
    band = [(px(k), py(sim[k][2])) for k in delays] + [(px(k), py(sim[k][1])) for k in reversed(delays)]
    out.append('<polygon fill="#1f77b4" fill-opacity="0.2" stroke="none" points="' +
               " ".join(f"{x:.1f},{y:.1f}" for x, y in band) + '"/>')
    out.append('<polyline fill="none" stroke="#1f77b4" stroke-width="2" points="' +
               " ".join(f"{px(k):.1f},{py(sim[k][0]):.1f}" for k in delays) + '"/>')
    for k in delays:
        out.append(f'<circle cx="{px(k):.1f}" cy="{py(sim[k][0]):.1f}" r="3" fill="#1f77b4"/>')
    for workers, x, m, lo, hi in reals:
        cx = px(x)
        out.append(f'<line x1="{cx:.1f}" x2="{cx:.1f}" y1="{py(lo):.1f}" y2="{py(hi):.1f}" stroke="#d62728" stroke-width="2"/>')
        out.append(f'<rect x="{cx - 4:.1f}" y="{py(m) - 4:.1f}" width="8" height="8" fill="#d62728"/>')
        out.append(f'<text x="{cx + 8:.1f}" y="{py(m) + 14:.1f}" font-size="11" fill="#d62728">real, {workers} w</text>')
    # The legend bottom left: accuracy is high at small delays (top left) and falls at the right.
    lx, ly = PAD_L + 12, PAD_T + ph - 34
    out.append(f'<line x1="{lx}" x2="{lx + 20}" y1="{ly}" y2="{ly}" stroke="#1f77b4" stroke-width="2"/>')
    out.append(f'<text x="{lx + 26}" y="{ly + 4}" font-size="11">--simulate {esc(sys.argv[5]) if len(sys.argv) > 5 else ""}'
               f' virtual workers, --delay fixed:K</text>')
    out.append(f'<rect x="{lx + 6}" y="{ly + 12}" width="8" height="8" fill="#d62728"/>')
    out.append(f'<text x="{lx + 26}" y="{ly + 20}" font-size="11">real lock-free runs, at their measured mean staleness</text>')
    out.append("</svg>")
    with open(sys.argv[4], "w") as f:
        f.write("\n".join(out) + "\n")


main()
