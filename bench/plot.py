#!/usr/bin/python3
"""bench/plot.py: turns the JSON lines of prd-bench into PNGs, one function per benchmark kind.

  /usr/bin/python3 bench/plot.py out/            every out/*.json -> out/<name>.png
  /usr/bin/python3 bench/plot.py a.json -o dir   chosen files, PNGs into dir

`make bench` runs it after `prd-bench all --json --out out`.  Each benchmark writes one JSON
object per measured point (and a summary object, which the plots quote in their titles); a
kind with no function here is listed and skipped.  A benchmark added later gets its own
plot_<kind> function and an entry in PLOTTERS.  Needs matplotlib (Debian's
python3-matplotlib, hence /usr/bin/python3).
"""
import argparse
import glob
import json
import os
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def load(paths):
    """{bench kind: [objects]} from JSON-lines files; other lines are ignored."""
    kinds = {}
    for path in paths:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if not line.startswith("{"):
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if "bench" in obj:
                    kinds.setdefault(obj["bench"], []).append(obj)
    return kinds


def summary(objs):
    return next((o for o in objs if o.get("summary")), {})


def save(fig, outdir, name, written):
    path = os.path.join(outdir, name + ".png")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    written.append(path)


def plot_vmem(objs, outdir, written):
    """ns per alloc+free against free segments (fragmentation), one line per allocator."""
    pts = [o for o in objs if "allocator" in o]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for alloc in sorted({o["allocator"] for o in pts}):
        xs = sorted((o["free_segments"], o["ns_per_op"]) for o in pts if o["allocator"] == alloc)
        ax.plot([max(x, 1) for x, _ in xs], [y for _, y in xs], marker="o", label=alloc)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("free segments in the arena (0 plotted at 1)")
    ax.set_ylabel("ns per alloc+free (median)")
    s = summary(objs)
    ax.set_title("vmem: instant-fit x%.2f, best-fit x%.2f, linear map x%.0f from 0 to the most "
                 "fragmented" % (s.get("instantfit_ratio", 0), s.get("bestfit_ratio", 0),
                                 s.get("linear_ratio", 0)), fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    save(fig, outdir, "vmem", written)


def plot_slab(objs, outdir, written):
    """Three figures: alloc+free pair times by size, object caching, the worst case."""
    pair = sorted((o for o in objs if o.get("test") == "pair"), key=lambda o: o["size"])
    if pair:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        sizes = [o["size"] for o in pair]
        ax.plot(sizes, [o["slab_ns"] for o in pair], marker="o", label="prd_cache_alloc+free")
        ax.plot(sizes, [o["malloc_ns"] for o in pair], marker="s", label="glibc malloc+free")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("object size (bytes)")
        ax.set_ylabel("ns per pair (median)")
        ax.set_title("slab layer alone: alloc+free pair times")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
        save(fig, outdir, "slab_pair", written)
    oc = [o for o in objs if o.get("test") == "object_caching"]
    if oc:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        labels = [o["table"] for o in oc]
        x = range(len(oc))
        ax.bar([i - 0.2 for i in x], [o["cache_ns"] for o in oc], width=0.4,
               label="object cache (constructed state kept)")
        ax.bar([i + 0.2 for i in x], [o["malloc_init_ns"] for o in oc], width=0.4,
               label="malloc + construct + destroy + free")
        ax.set_xticks(list(x))
        ax.set_xticklabels(["%s table (x%.2f)" % (lab, o["speedup"]) for lab, o in zip(labels, oc)])
        ax.set_ylabel("ns per use (median)")
        ax.set_title("object caching (seed 002 5.1), %d-byte object" % oc[0]["object_bytes"])
        ax.legend()
        save(fig, outdir, "slab_object_caching", written)
    wc = sorted((o for o in objs if o.get("test") == "worst_case"), key=lambda o: o["size"])
    if wc:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        sizes = [o["size"] for o in wc]
        ax.plot(sizes, [o["fill_ratio"] for o in wc], marker="o", color="tab:blue",
                label="fill ratio (bytes reached / the 16 B cache's)")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("object size (bytes): a new cache per size, in one arena")
        ax.set_ylabel("fill ratio")
        ax.set_ylim(0, 1.05)
        ax2 = ax.twinx()
        ax2.plot(sizes, [o["alloc_ns"] for o in wc], marker="^", color="tab:red", label="ns/alloc")
        ax2.plot(sizes, [o["free_ns"] for o in wc], marker="v", color="tab:orange", label="ns/free")
        ax2.set_ylabel("ns")
        l1, t1 = ax.get_legend_handles_labels()
        l2, t2 = ax2.get_legend_handles_labels()
        ax.legend(l1 + l2, t1 + t2, loc="center left", fontsize=8)
        ok = summary(objs).get("worst_case_all_sizes_ok")
        ax.set_title("worst case (seed 003 4.3), %.0f MiB arena; all returned: %s"
                     % (wc[0]["arena_bytes"] / 1048576.0, ok), fontsize=10)
        save(fig, outdir, "slab_worst_case", written)


def plot_rcu(objs, outdir, written):
    """One panel per unit (ns, us, per_s): each measured point, a bar per implementation."""
    pts = [o for o in objs if "point" in o]
    units = []
    for o in pts:
        for u in ("ns", "us", "per_s"):
            if u in o and u not in units:
                units.append(u)
    if not units:
        return
    fig, axes = plt.subplots(1, len(units), figsize=(5 * len(units), 4.5), squeeze=False)
    titles = {"ns": "ns (lower is better)", "us": "grace-period latency, us (log)",
              "per_s": "call_rcu callbacks per second"}
    for ax, unit in zip(axes[0], units):
        upts = [o for o in pts if unit in o]
        names = list(dict.fromkeys(o["point"] for o in upts))
        impls = list(dict.fromkeys(o["impl"] for o in upts))
        w = 0.8 / max(1, len(impls))
        for k, impl in enumerate(impls):
            vals = [next((o[unit] for o in upts if o["point"] == n and o["impl"] == impl), 0)
                    for n in names]
            ax.bar([i + (k - (len(impls) - 1) / 2) * w for i in range(len(names))], vals,
                   width=w, label=impl)
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels(names, rotation=30, ha="right", fontsize=8)
        ax.set_title(titles.get(unit, unit), fontsize=10)
        if unit == "us":   # p99s under load sit orders of magnitude above the p50s
            ax.set_yscale("log")
        ax.legend(fontsize=8)
        ax.grid(True, axis="y", alpha=0.3)
    save(fig, outdir, "rcu", written)


def plot_cache(objs, outdir, written):
    """The magazine layer (prd-bench cache): pairs per second against threads, one line per
    mode (magazines, slab layer alone, malloc), and the depot visits per operation."""
    pts = [o for o in objs if "mode" in o and "threads" in o]
    visits = [o for o in objs if "pattern" in o]
    fig, axes = plt.subplots(1, 2 if visits else 1, figsize=(11 if visits else 7, 4.5),
                             squeeze=False)
    ax = axes[0][0]
    for mode in list(dict.fromkeys(o["mode"] for o in pts)):
        xs = sorted((o["threads"], o["pairs_per_s"]) for o in pts if o["mode"] == mode)
        ax.plot([x for x, _ in xs], [y / 1e6 for _, y in xs], marker="o", label=mode)
    ax.set_xlabel("threads")
    ax.set_ylabel("million alloc+free pairs per second (median)")
    s = summary(objs)
    ax.set_title("cache: magazines x%.2f the slab layer, x%.2f malloc (1 thread)"
                 % (s.get("mag_vs_slab_1t", 0), s.get("mag_vs_malloc_1t", 0)), fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend()
    if visits:
        ax2 = axes[0][1]
        ax2.bar([o["pattern"] for o in visits], [o["depot_visits_per_op"] for o in visits])
        m = next((o["mag_size"] for o in visits if "mag_size" in o), None)
        if m:
            ax2.axhline(1.0 / m, color="tab:red", linestyle="--", label="1/M (M = %d)" % m)
            ax2.legend()
        ax2.set_ylabel("depot visits per operation")
        ax2.set_title("depot visits by allocation pattern", fontsize=10)
    save(fig, outdir, "cache", written)


def plot_malloc(objs, outdir, written):
    """prd-bench malloc: seconds per workload, libc against prudence (in-process mode); and,
    from bench/compare-malloc.sh --json, seconds and peak RSS per workload and allocator."""
    inproc = [o for o in objs if "libc_s" in o]
    if inproc:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        x = range(len(inproc))
        ax.bar([i - 0.2 for i in x], [o["libc_s"] for o in inproc], width=0.4, label="libc malloc")
        ax.bar([i + 0.2 for i in x], [o["prudence_s"] for o in inproc], width=0.4,
               label="prd_malloc")
        ax.set_xticks(list(x))
        ax.set_xticklabels(["%s\nx%.2f" % (o["workload"], o["ratio"]) for o in inproc])
        ax.set_ylabel("seconds (median)")
        ax.set_title("malloc workloads in one process: prudence / libc")
        ax.legend()
        save(fig, outdir, "malloc", written)
    cmp_ = [o for o in objs if "allocator" in o and "seconds" in o]
    if cmp_:
        wls = list(dict.fromkeys(o["workload"] for o in cmp_))
        als = list(dict.fromkeys(o["allocator"] for o in cmp_))
        fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
        w = 0.8 / max(len(als), 1)
        for k, a in enumerate(als):
            val = {o["workload"]: o for o in cmp_ if o["allocator"] == a}
            xs = [i + (k - len(als) / 2) * w + w / 2 for i in range(len(wls))]
            axes[0].bar(xs, [val[wl]["seconds"] if wl in val else 0 for wl in wls], width=w, label=a)
            axes[1].bar(xs, [val[wl]["peak_rss_kb"] / 1024 if wl in val else 0 for wl in wls],
                        width=w, label=a)
        for ax, lab in ((axes[0], "seconds (median)"), (axes[1], "peak RSS (MiB, median)")):
            ax.set_xticks(list(range(len(wls))))
            ax.set_xticklabels(wls)
            ax.set_ylabel(lab)
        axes[0].legend(fontsize=8)
        s = summary(objs)
        axes[0].set_title("time: prudence / best other, geomean %.2f" % s.get("geomean_time_vs_best", 0),
                          fontsize=9)
        axes[1].set_title("peak RSS: prudence / best other, geomean %.2f" % s.get("geomean_rss_vs_best", 0),
                          fontsize=9)
        save(fig, outdir, "malloc_compare", written)


def _median(vals):
    vals = sorted(vals)
    n = len(vals)
    return 0 if n == 0 else (vals[n // 2] if n % 2 else (vals[n // 2 - 1] + vals[n // 2]) / 2)


def plot_deferred(objs, outdir, written):
    """Fig. 6: pairs/s by size, a bar per mode (medians of the rounds); Figs. 7-11: the
    object-cache hits, object-cache churns, slab churns, peak slabs and total fragmentation
    of the prudence and oblivious caches by size."""
    pts = [o for o in objs if "mode" in o]
    if not pts:
        return
    sizes = sorted({o["size"] for o in pts})
    modes = [m for m in ("prudence", "oblivious", "malloc", "urcu", "batch")
             if any(o["mode"] == m for o in pts)]
    s = summary(objs)
    fig, ax = plt.subplots(figsize=(9, 4.5))
    w = 0.8 / max(1, len(modes))
    for k, m in enumerate(modes):
        vals = [_median([o["pairs_s"] / 1e6 for o in pts if o["mode"] == m and o["size"] == z])
                for z in sizes]
        ax.bar([i + (k - (len(modes) - 1) / 2) * w for i in range(len(sizes))], vals, width=w,
               label=m)
    ax.set_xticks(range(len(sizes)))
    ax.set_xticklabels([str(z) for z in sizes])
    ax.set_xlabel("object size (bytes)")
    ax.set_ylabel("Mpairs/s (alloc + deferred free)")
    ax.set_title("deferred (seed 001 Fig. 6): min ratio vs oblivious %.2f, at 4096 %.2f, "
                 "vs malloc+call_rcu %.2f" % (s.get("min_ratio_vs_oblivious", 0),
                                              s.get("ratio_vs_oblivious_4096", 0),
                                              s.get("min_ratio_vs_malloc_callrcu", 0)),
                 fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(True, axis="y", alpha=0.3)
    save(fig, outdir, "deferred", written)
    metrics = [("oc_hit_pct", "object-cache hits % (Fig. 7)"),
               ("oc_churns", "object-cache churns (Fig. 8)"),
               ("slab_churns", "slab churns (Fig. 9)"),
               ("slabs_peak", "peak slabs (Fig. 10)"),
               ("total_frag", "total fragmentation (Fig. 11)")]
    fig, axes = plt.subplots(1, len(metrics), figsize=(4 * len(metrics), 4), squeeze=False)
    for ax, (key, title) in zip(axes[0], metrics):
        for k, m in enumerate(("prudence", "oblivious")):
            vals = [_median([o.get(key, 0) for o in pts if o["mode"] == m and o["size"] == z])
                    for z in sizes]
            ax.bar([i + (k - 0.5) * 0.4 for i in range(len(sizes))], vals, width=0.4, label=m)
        ax.set_xticks(range(len(sizes)))
        ax.set_xticklabels([str(z) for z in sizes], rotation=45, fontsize=7)
        ax.set_title(title, fontsize=9)
        ax.legend(fontsize=7)
        ax.grid(True, axis="y", alpha=0.3)
    save(fig, outdir, "deferred-metrics", written)


def plot_endurance(objs, outdir, written):
    """Fig. 3: RSS over time, one line per mode."""
    pts = [o for o in objs if "rss_kb" in o]
    if not pts:
        return
    s = summary(objs)
    fig, ax = plt.subplots(figsize=(9, 4.5))
    for o in pts:
        step = o.get("sample_step", 1) * o.get("interval_ms", 10) / 1000.0
        ax.plot([i * step for i in range(len(o["rss_kb"]))], [v / 1024 for v in o["rss_kb"]],
                label="%s (growth %.2f)" % (o["mode"], o.get("rss_growth", 0)))
    ax.set_xlabel("seconds")
    ax.set_ylabel("RSS (MiB)")
    ax.set_title("endurance (seed 001 Fig. 3): prudence growth %.3f, oblivious %.3f"
                 % (s.get("prudence_rss_growth", 0), s.get("oblivious_rss_growth", 0)),
                 fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(True, alpha=0.3)
    save(fig, outdir, "endurance", written)


def plot_rcuhash(objs, outdir, written):
    """Operations per second of the RCU hash table, a bar per mode (median of the rounds)."""
    pts = [o for o in objs if "mode" in o]
    if not pts:
        return
    modes = list(dict.fromkeys(o["mode"] for o in pts))
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.bar(modes, [_median([o["ops_s"] / 1e6 for o in pts if o["mode"] == m]) for m in modes])
    ax.set_ylabel("Mops/s (90% lookup, 5% insert, 5% deferred delete)")
    ax.set_title("rcuhash", fontsize=10)
    ax.grid(True, axis="y", alpha=0.3)
    save(fig, outdir, "rcuhash", written)


def _paired_bars(names, left, left_label, right, right_label, line, line_label, ylabel, name,
                 outdir, written):
    """Two bars per allocator (left and right values) and one dashed reference line."""
    fig, ax = plt.subplots(figsize=(6, 4))
    xs = range(len(names))
    ax.bar([x - 0.2 for x in xs], left, 0.4, label=left_label)
    ax.bar([x + 0.2 for x in xs], right, 0.4, label=right_label)
    ax.axhline(line, color="k", linestyle="--", label=line_label)
    ax.set_xticks(list(xs))
    ax.set_xticklabels(names)
    ax.set_ylabel(ylabel)
    ax.set_title(name, fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(True, axis="y", alpha=0.3)
    save(fig, outdir, name, written)


def plot_decay(objs, outdir, written):
    """RSS right after the free-all and after the wait, a pair of bars per allocator
    (bench/compare-decay.sh; one unnamed pair for a plain prd-bench decay), the goal a line."""
    pts = [o for o in objs if "rss_free_kb" in o]
    if not pts:
        return
    names = list(dict.fromkeys(o.get("allocator", "this run") for o in pts))
    sel = lambda n, k: _median([o[k] / 1024 for o in pts if o.get("allocator", "this run") == n])
    _paired_bars(names, [sel(n, "rss_free_kb") for n in names], "after the free-all",
                 [sel(n, "rss_wait_kb") for n in names], "after the wait",
                 _median([o["goal_kb"] / 1024 for o in pts]), "goal: 1.5 x live + floor",
                 "RSS, MiB", "decay", outdir, written)


def plot_kv(objs, outdir, written):
    """RSS / usable bytes at the end of phases A and B, a pair of bars per allocator
    (bench/compare-kv.sh; one unnamed pair for a plain prd-bench kv)."""
    pts = [o for o in objs if "ratio" in o and "phase" in o]
    if not pts:
        return
    names = list(dict.fromkeys(o.get("allocator", "this run") for o in pts))
    sel = lambda n, ph: _median([o["ratio"] for o in pts
                                 if o.get("allocator", "this run") == n and o["phase"] == ph]
                                or [0])
    _paired_bars(names, [sel(n, "A") for n in names], "A: fresh",
                 [sel(n, "B") for n in names], "B: after a phase", 1.0, "RSS = usable",
                 "RSS / usable bytes", "kv", outdir, written)


def plot_threads(objs, outdir, written):
    """Mops/s against threads, a panel per workload, a line per allocator: the median solid,
    the worst run dotted (prd-bench threads); the summary's scaling figures in the title."""
    pts = [o for o in objs if "median" in o and "threads" in o]
    if not pts:
        return
    works = list(dict.fromkeys(o["workload"] for o in pts))
    fig, axes = plt.subplots(1, len(works), figsize=(4.5 * len(works), 4), squeeze=False)
    for ax, w in zip(axes[0], works):
        for alloc in dict.fromkeys(o["allocator"] for o in pts if o["workload"] == w):
            xs = sorted((o["threads"], o["median"], o["worst"]) for o in pts
                        if o["workload"] == w and o["allocator"] == alloc)
            line, = ax.plot([x for x, _, _ in xs], [m for _, m, _ in xs], marker="o",
                            label=alloc)
            ax.plot([x for x, _, _ in xs], [v for _, _, v in xs], linestyle=":",
                    color=line.get_color())
        ax.set_xlabel("threads")
        ax.set_ylabel("Mops/s (median solid, worst dotted)")
        ax.set_title(w, fontsize=10)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    s = summary(objs)
    fmt = lambda k: "%.2f" % s[k] if isinstance(s.get(k), (int, float)) else "-"
    fig.suptitle("threads: 2-thread worst / 1-thread median %s, vs best peer %s"
                 % (fmt("min_scaling_2t"), fmt("ratio_vs_best_2t")), fontsize=10)
    save(fig, outdir, "threads", written)


PLOTTERS = {"vmem": plot_vmem, "slab": plot_slab, "rcu": plot_rcu, "cache": plot_cache,
            "malloc": plot_malloc, "deferred": plot_deferred, "endurance": plot_endurance,
            "rcuhash": plot_rcuhash, "decay": plot_decay, "kv": plot_kv,
            "threads": plot_threads}


def main(argv):
    ap = argparse.ArgumentParser(description="prd-bench JSON lines -> PNG")
    ap.add_argument("inputs", nargs="+", help="a directory of *.json, or JSON files")
    ap.add_argument("-o", "--outdir", help="where the PNGs go (default: beside the input)")
    args = ap.parse_args(argv)
    paths = []
    for p in args.inputs:
        paths.extend(sorted(glob.glob(os.path.join(p, "*.json"))) if os.path.isdir(p) else [p])
    outdir = args.outdir or (args.inputs[0] if os.path.isdir(args.inputs[0])
                             else os.path.dirname(args.inputs[0]) or ".")
    os.makedirs(outdir, exist_ok=True)
    kinds = load(paths)
    if not kinds:
        sys.stderr.write("plot.py: no prd-bench JSON in %s\n" % ", ".join(args.inputs))
        return 1
    written = []
    for kind, objs in sorted(kinds.items()):
        fn = PLOTTERS.get(kind)
        if fn is None:
            sys.stderr.write("plot.py: no plot for benchmark kind '%s' (add plot_%s)\n"
                             % (kind, kind))
            continue
        fn(objs, outdir, written)
    for w in written:
        print("wrote", w)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
