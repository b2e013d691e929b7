#!/usr/bin/env python3
"""The trade-off of Hogwild's coupling across ranks: bench/couple_rules.sh sweep's rows of
runs.csv drawn against --sync-every (log scale), one panel for the final accuracy after the run's
samples (every run a dot, the median a line) and one for training samples/s (median), one colour
per rule and one line style per link. Also prints the markdown table of the same numbers (median
and range of every cell). Plain SVG, no dependencies.

    python3 bench/plot_couple.py bench/out/couple/runs.csv bench/plots/couple-tradeoff.svg [TITLE]
    python3 bench/plot_couple.py bench/out/couple/runs.csv --tables   (the accuracy and hosts parts)
"""
import csv
import math
import statistics
import sys
from collections import defaultdict

COLORS = {"momentum": "#d62728", "sum": "#1f77b4"}
LABELS = {"momentum": "block momentum (kept)", "sum": "sum (the rule before)"}
DASH = {"full": "", "100mbit": "6,3", "10mbit": "2,3"}
LINK_LABELS = {"full": "full speed", "100mbit": "100 Mbit/s", "10mbit": "10 Mbit/s"}
W, H, PAD_L, PAD_R, PAD_T, PAD_B = 480, 340, 70, 20, 40, 50


def ms(every):
    return float(every.rstrip("ms"))


def esc(text):
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def panel(out, x0, title, ylabel, lo, hi, ticks, fmt, data, everies, dots, reference=None):
    pw, ph = W - PAD_L - PAD_R, H - PAD_T - PAD_B
    lx0, lx1 = math.log10(min(everies)), math.log10(max(everies))

    def px(e):
        return x0 + PAD_L + pw * (math.log10(e) - lx0) / (lx1 - lx0)

    def py(v):
        return PAD_T + ph * (1 - (min(max(v, lo), hi) - lo) / (hi - lo))

    out.append(f'<text x="{x0 + W / 2}" y="22" text-anchor="middle" font-weight="bold">{esc(title)}</text>')
    out.append(f'<rect x="{x0 + PAD_L}" y="{PAD_T}" width="{pw}" height="{ph}" fill="none" stroke="#333"/>')
    for v in ticks:
        out.append(f'<line x1="{x0 + PAD_L}" x2="{x0 + PAD_L + pw}" y1="{py(v):.1f}" y2="{py(v):.1f}" stroke="#eee"/>')
        out.append(f'<text x="{x0 + PAD_L - 6}" y="{py(v) + 4:.1f}" text-anchor="end" font-size="11">{fmt(v)}</text>')
    for e in everies:
        out.append(f'<text x="{px(e):.1f}" y="{PAD_T + ph + 16}" text-anchor="middle" font-size="11">{e:g}</text>')
    out.append(f'<text x="{x0 + PAD_L + pw / 2}" y="{H - 12}" text-anchor="middle" font-size="12">'
               f'--sync-every (ms, log scale)</text>')
    out.append(f'<text x="{x0 + 16}" y="{PAD_T + ph / 2}" text-anchor="middle" font-size="12" '
               f'transform="rotate(-90 {x0 + 16} {PAD_T + ph / 2})">{esc(ylabel)}</text>')
    if reference is not None:
        out.append(f'<line x1="{x0 + PAD_L}" x2="{x0 + PAD_L + pw}" y1="{py(reference):.1f}" y2="{py(reference):.1f}" '
                   f'stroke="#555" stroke-dasharray="1,3" stroke-width="2"/>')
        out.append(f'<text x="{x0 + PAD_L + 6}" y="{py(reference) - 5:.1f}" font-size="11" fill="#555">one node, '
                   f'4 workers: {reference:.2f}% (median)</text>')
    for (rule, link), points in sorted(data.items()):
        es = sorted(points)
        path = " ".join(f"{px(e):.1f},{py(statistics.median(points[e])):.1f}" for e in es)
        dash = f' stroke-dasharray="{DASH.get(link, "")}"' if DASH.get(link) else ""
        out.append(f'<polyline points="{path}" fill="none" stroke="{COLORS[rule]}" stroke-width="2"{dash}/>')
        for e in es:
            for v in points[e] if dots else [statistics.median(points[e])]:
                out.append(f'<circle cx="{px(e):.1f}" cy="{py(v):.1f}" r="2.5" fill="{COLORS[rule]}" '
                           f'fill-opacity="0.6"/>')


def runs_tables(path):
    """The accuracy and hosts parts: per model, ranks and link, one row per setup with every run's
    final and best accuracy, the most it ended below the one-node run of its round (the one-node
    run just before it), and the median samples/s with the median of its ratio to that run's."""
    groups = defaultdict(lambda: defaultdict(dict))  # (part, model, epochs, ranks, workers, link) -> setup -> run
    last_one = None
    with open(path) as f:
        for r in csv.DictReader(f):
            if r["part"] == "sweep":
                continue
            if r["setup"] == "one-node":
                last_one = r
                continue
            key = (r["part"], r["model"], r["epochs"], r["ranks"], r["workers"], r["link"])
            groups[key]["one node"][int(r["run"])] = (last_one, last_one)
            groups[key][r["setup"]][int(r["run"])] = (r, last_one)

    def fl(x):
        try:
            return float(x)
        except ValueError:
            return float("nan")

    for (part, model, epochs, ranks, workers, link), setups in groups.items():
        runs = sorted(setups["one node"])
        total = int(ranks) * int(workers)
        link_text = "" if link == "local" else f", link {link}"
        print(f"\n{part}: {model}, {epochs} epoch(s), {ranks} ranks x {workers} workers{link_text}; "
              f"one node: {total} workers\n")
        print("| setup | final % (runs " + ", ".join(map(str, runs)) + ") | best % | most below one node | "
              "samples/s (median) | samples/s / one node's (median) |")
        print("|---|---|---|---|---|---|")
        for name, byrun in setups.items():
            finals = [byrun[k][0]["final"] if k in byrun else "-" for k in runs]
            bests = [byrun[k][0]["best"] if k in byrun else "-" for k in runs]
            gaps = [fl(one["final"]) - fl(r["final"]) for r, one in byrun.values()]
            rates = [x for x in (fl(r["samples_per_s"]) for r, _ in byrun.values()) if x == x]
            ratios = [x for x in (fl(r["samples_per_s"]) / fl(one["samples_per_s"]) for r, one in byrun.values())
                      if x == x]
            gap = "-" if name == "one node" else (f"{max(gaps):.2f}" if all(g == g for g in gaps) else "failed")
            ratio = f"{statistics.median(ratios):.2f}" if ratios and name != "one node" else "-"
            print(f"| {name} | {' / '.join(finals)} | {' / '.join(bests)} | {gap} | "
                  f"{statistics.median(rates):.0f} | {ratio} |")


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    if sys.argv[2] == "--tables":
        runs_tables(sys.argv[1])
        return
    acc = defaultdict(lambda: defaultdict(list))
    rate = defaultdict(lambda: defaultdict(list))
    one_node = []  # the hosts part's one-node runs (the MLP, 4 workers): the reference line
    with open(sys.argv[1]) as f:
        for r in csv.DictReader(f):
            if r["part"] == "hosts" and r["setup"] == "one-node":
                one_node.append(float(r["final"]))
            if r["part"] != "sweep":
                continue
            key, e = (r["rule"], r["link"]), ms(r["sync_every"])
            try:
                acc[key][e].append(float(r["final"]))
                rate[key][e].append(float(r["samples_per_s"]))
            except ValueError:  # a failed run: no accuracy, shown in the table
                acc[key][e].append(float("nan"))
    everies = sorted({e for d in acc.values() for e in d})
    finite = [v for d in acc.values() for vs in d.values() for v in vs if v == v]
    lo = math.floor(min(finite))
    acc_ticks = list(range(lo, 97))
    top = max(v for d in rate.values() for vs in d.values() for v in vs)
    step = 10 ** math.floor(math.log10(top / 4))
    top = math.ceil(top / step / 2) * step * 2
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{2 * W}" height="{H + 90}" font-family="sans-serif" '
           f'font-size="12">', '<rect width="100%" height="100%" fill="white"/>']
    panel(out, 0, "final accuracy after 3 epochs (every run)", "test accuracy %", lo, 96,
          acc_ticks, lambda v: f"{v:g}", acc, everies, True, statistics.median(one_node) if one_node else None)
    panel(out, W, "training samples/s (median)", "samples/s", 0, top, [top * i / 5 for i in range(6)],
          lambda v: f"{v / 1000:g}k", rate, everies, False)
    x = 20
    for rule in COLORS:
        out.append(f'<circle cx="{x + 12}" cy="{H + 20}" r="4" fill="{COLORS[rule]}"/>')
        out.append(f'<text x="{x + 24}" y="{H + 24}">{esc(LABELS[rule])}</text>')
        x += 230
    x = 20
    for link in [l for l in LINK_LABELS if any(k[1] == l for k in acc)]:
        dash = f' stroke-dasharray="{DASH[link]}"' if DASH[link] else ""
        out.append(f'<line x1="{x}" x2="{x + 24}" y1="{H + 45}" y2="{H + 45}" stroke="#333" stroke-width="2"{dash}/>')
        out.append(f'<text x="{x + 30}" y="{H + 49}">{esc(LINK_LABELS[link])}</text>')
        x += 160
    if len(sys.argv) > 3:
        out.append(f'<text x="20" y="{H + 75}" font-size="11" fill="#555">{esc(sys.argv[3])}</text>')
    out.append("</svg>")
    with open(sys.argv[2], "w") as f:
        f.write("\n".join(out) + "\n")

    def cell(vs, digits):
        ok = [v for v in vs if v == v]
        failed = len(vs) - len(ok)
        text = f"{statistics.median(ok):.{digits}f} ({min(ok):.{digits}f}-{max(ok):.{digits}f})" if ok else "-"
        return text + (f", {failed} failed" if failed else "")

    links = [l for l in LINK_LABELS if any(k[1] == l for k in acc)]
    print("| link | --sync-every | " + " | ".join(f"{r}: final % | {r}: samples/s" for r in COLORS) + " |")
    print("|---|---|" + "---|---|" * len(COLORS))
    for link in links:
        for e in everies:
            cells = []
            for rule in COLORS:
                cells += [cell(acc[(rule, link)].get(e, []), 2), cell(rate[(rule, link)].get(e, []), 0)]
            print(f"| {LINK_LABELS[link]} | {e:g} ms | " + " | ".join(cells) + " |")
    print(f"plot: {sys.argv[2]}")


if __name__ == "__main__":
    main()
