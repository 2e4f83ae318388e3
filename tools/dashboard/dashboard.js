// troupe training dashboard: a single page that follows one job through the server's JSON API.
//
//   GET /api/state            job, progress, nodes, workers, checkpoints, events, log
//   GET /api/series           the whole run, downsampled (loss, perplexity, throughput, evaluations)
//   GET /api/windows?last=N   the most recent windows with per-rank detail
//   GET /api/stream           Server-Sent Events: "window", "state", "end"
//
// Charts use uPlot (vendor/, see tools/dashboard/fetch-assets); without it the page still shows
// its tables. The pure data functions at the top are exported for node when `module` exists.
"use strict";

(function () {
  // ---------------------------------------------------------------------------------------------
  // Constants

  const MAX_SERIES_POINTS = 5000;   // whole-run points kept in the browser before thinning
  const RECENT_WINDOWS = 300;       // windows with per-rank detail kept in the browser
  const TIME_SPLIT_WINDOWS = 20;    // the time-split chart averages this many windows
  const ETA_WINDOWS = 50;           // windows used for the step-rate estimate
  const RENDER_INTERVAL_MS = 250;   // at most 4 redraws a second
  const CHART_HEIGHT = 230;
  const MAX_RETRY_MS = 15000;
  const STATE_POLL_MS = 5000;       // refetch /api/state when the stream sent none for this long

  const MAIN_COLUMNS = ["step", "loss", "perplexity", "samples_per_s", "tokens_per_s"];
  const EVAL_COLUMNS = ["eval_step", "eval_perplexity"];
  const TASK_EVAL_COLUMNS = ["eval_task_step", "eval_accuracy", "eval_loss"];  // fine-tuning's held-out scores
  const TIME_PARTS = ["data_wait", "forward", "backward", "allreduce", "optimizer", "checkpoint", "eval", "teacher"];
  const PART_COLORS = {
    data_wait: "#9aa0a6", forward: "#1f77b4", backward: "#ff7f0e",
    allreduce: "#2ca02c", optimizer: "#9467bd", checkpoint: "#8c564b", eval: "#17becf",
    teacher: "#e377c2",
  };
  // Line colours for ranks and rings; red is kept for the straggler.
  const PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2",
                   "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#637939", "#7b4173"];
  const STRAGGLER_COLOR = "#d62728";
  const WARNING_LEVELS = new Set(["warning", "warn", "error", "err", "critical", "fatal"]);

  // ---------------------------------------------------------------------------------------------
  // Pure data functions (no DOM; unit-checked under node)

  /** A finite number, or null for anything else (null, NaN, strings). */
  function toNumber(v) {
    return typeof v === "number" && Number.isFinite(v) ? v : null;
  }

  /** A positive number (plottable on a log scale), or null. */
  function positiveOrNull(v) {
    const n = toNumber(v);
    return n !== null && n > 0 ? n : null;
  }

  /** An empty whole-run series: parallel arrays named like /api/series. */
  function emptySeries() {
    const s = {};
    for (const c of MAIN_COLUMNS.concat(EVAL_COLUMNS, TASK_EVAL_COLUMNS)) s[c] = [];
    return s;
  }

  /** Copies one group of parallel columns from `src` into `dst`, keyed and sorted by the first
   *  column; rows without a finite key are dropped, short or missing columns padded with null. */
  function normalizeGroup(src, dst, columns) {
    const arrays = columns.map((c) => (Array.isArray(src && src[c]) ? src[c] : []));
    const keys = arrays[0];
    const rows = [];
    for (let i = 0; i < keys.length; i++) if (toNumber(keys[i]) !== null) rows.push(i);
    rows.sort((a, b) => keys[a] - keys[b]);
    columns.forEach((c, j) => {
      dst[c] = rows.map((i) => (i < arrays[j].length ? toNumber(arrays[j][i]) : null));
    });
  }

  /** Drops every other point from the older part of a group of columns once it holds more than
   *  `max` points; the newest max/2 points stay at full resolution. Returns whether it thinned. */
  function thinColumns(obj, columns, max) {
    const n = obj[columns[0]].length;
    if (n <= max) return false;
    const keepFrom = n - Math.floor(max / 2);
    for (const c of columns) obj[c] = obj[c].filter((_, i) => i >= keepFrom || i % 2 === 0);
    return true;
  }

  /** Thins every group of a whole-run series until each is within `max` points. */
  function thinSeries(series, max = MAX_SERIES_POINTS) {
    while (thinColumns(series, MAIN_COLUMNS, max));
    while (thinColumns(series, EVAL_COLUMNS, max));
    while (thinColumns(series, TASK_EVAL_COLUMNS, max));
    return series;
  }

  /** A whole-run series from a /api/series response, normalized and within the point cap. */
  function seriesFromApi(json) {
    const s = emptySeries();
    normalizeGroup(json, s, MAIN_COLUMNS);
    normalizeGroup(json, s, EVAL_COLUMNS);
    normalizeGroup(json, s, TASK_EVAL_COLUMNS);
    return thinSeries(s);
  }

  /** The last element of an array, or undefined. */
  function last(arr) {
    return arr.length ? arr[arr.length - 1] : undefined;
  }

  /** Appends one live WINDOW to the whole-run series when it is newer than what is there (and its
   *  evaluation, if one ran); thins old points past the cap. Returns whether anything was added. */
  function appendWindow(series, w) {
    const step = toNumber(w && w.step);
    if (step === null) return false;
    let added = false;
    const lastStep = last(series.step);
    if (lastStep === undefined || step > lastStep) {
      series.step.push(step);
      series.loss.push(toNumber(w.loss));
      series.perplexity.push(toNumber(w.perplexity));
      series.samples_per_s.push(toNumber(w.samples_per_s));
      series.tokens_per_s.push(toNumber(w.tokens_per_s));
      added = true;
    }
    const evalPpl = toNumber(w.eval_perplexity);
    const lastEval = last(series.eval_step);
    if (evalPpl !== null && (lastEval === undefined || step > lastEval)) {
      series.eval_step.push(step);
      series.eval_perplexity.push(evalPpl);
      added = true;
    }
    const accuracy = toNumber(w.eval_accuracy);
    const lastTaskEval = last(series.eval_task_step);
    if (accuracy !== null && (lastTaskEval === undefined || step > lastTaskEval)) {
      series.eval_task_step.push(step);
      series.eval_accuracy.push(accuracy);
      series.eval_loss.push(toNumber(w.eval_loss));
      added = true;
    }
    if (added) thinSeries(series);
    return added;
  }

  /** Adds a WINDOW to the list of recent windows (sorted by step, at most `cap`): a newer step is
   *  appended, the same step replaces the last one, an older one is ignored. Returns whether it changed. */
  function pushRecentWindow(list, w, cap = RECENT_WINDOWS) {
    const step = toNumber(w && w.step);
    if (step === null) return false;
    const tail = last(list);
    if (tail && step < tail.step) return false;
    if (tail && step === tail.step) list[list.length - 1] = w;
    else list.push(w);
    if (list.length > cap) list.splice(0, list.length - cap);
    return true;
  }

  /** The recent windows from a /api/windows response, sorted by step, within `cap`. */
  function windowsFromApi(json, cap = RECENT_WINDOWS) {
    const list = [];
    const input = (json && Array.isArray(json.windows) ? json.windows : [])
      .filter((w) => w && toNumber(w.step) !== null)
      .sort((a, b) => a.step - b.step);
    for (const w of input) pushRecentWindow(list, w, cap);
    return list;
  }

  /** uPlot data for the loss chart: [x, loss, perplexity, eval perplexity], the training steps and
   *  evaluation steps merged into one sorted x axis (null where a series has no point). */
  function lossChartData(s) {
    const x = [], loss = [], ppl = [], evalPpl = [];
    const n = s.step.length, m = s.eval_step.length;
    let i = 0, j = 0;
    while (i < n || j < m) {
      const a = i < n ? s.step[i] : Infinity;
      const b = j < m ? s.eval_step[j] : Infinity;
      x.push(Math.min(a, b));
      if (a <= b) {
        loss.push(s.loss[i]);
        ppl.push(positiveOrNull(s.perplexity[i]));
        i++;
      } else {
        loss.push(null);
        ppl.push(null);
      }
      if (b <= a) evalPpl.push(positiveOrNull(s.eval_perplexity[j++]));
      else evalPpl.push(null);
    }
    return [x, loss, ppl, evalPpl];
  }

  /** uPlot data for the throughput chart: [step, samples/s, tokens/s]. */
  function throughputChartData(s) {
    return [s.step.slice(), s.samples_per_s.slice(), s.tokens_per_s.slice()];
  }

  /** How many values of an array are not null. */
  function countValues(arr) {
    let n = 0;
    for (const v of arr) if (v !== null && v !== undefined) n++;
    return n;
  }

  /** Per-rank mean of each part of the window time over the last `lastN` windows:
   *  {ranks: [r...], nodes: [name...], parts: {data_wait: [s per rank], ...}, windows: count}.
   *  A rank is averaged over the windows it appears in; a missing part counts as 0. */
  function averageTimeSplit(windows, lastN = TIME_SPLIT_WINDOWS) {
    const recent = (windows || []).slice(-lastN);
    // A large job's windows list only some ranks (isBounded): those of the newest window.
    const newest = recent.length ? recent[recent.length - 1] : null;
    const shown = isBounded(newest) ? new Set((newest.ranks || []).map((r) => toNumber(r && r.rank))) : null;
    const acc = new Map();
    for (const w of recent) {
      for (const r of (w && w.ranks) || []) {
        const rank = toNumber(r && r.rank);
        if (rank === null || (shown && !shown.has(rank))) continue;
        let a = acc.get(rank);
        if (!a) {
          a = { count: 0, node: "", sums: Object.fromEntries(TIME_PARTS.map((p) => [p, 0])) };
          acc.set(rank, a);
        }
        a.count++;
        if (r.node) a.node = r.node;
        for (const p of TIME_PARTS) a.sums[p] += toNumber(r.time && r.time[p]) || 0;
      }
    }
    const ranks = [...acc.keys()].sort((a, b) => a - b);
    const parts = {};
    for (const p of TIME_PARTS) parts[p] = ranks.map((r) => acc.get(r).sums[p] / acc.get(r).count);
    return { ranks, nodes: ranks.map((r) => acc.get(r).node), parts, windows: recent.length };
  }

  /** Running sums of the parts in TIME_PARTS order: element k is the top of stack k, so the
   *  last array is each rank's total window time. */
  function stackParts(split) {
    const stacked = [];
    let below = split.ranks.map(() => 0);
    for (const p of TIME_PARTS) {
      below = below.map((v, i) => v + split.parts[p][i]);
      stacked.push(below);
    }
    return stacked;
  }

  /** Columns of values by id over windows: for each window, `items(w)` lists its entries, `id(e)`
   *  names an entry's column and `value(e)` its value; null where a window lacks an id. One pass
   *  over the entries, so large worlds stay cheap. Returns {ids: sorted ids, columns: [[...]...]}. */
  function columnsById(windows, items, id, value) {
    const ids = new Set();
    for (const w of windows) for (const e of items(w) || []) if (e && toNumber(id(e)) !== null) ids.add(id(e));
    const sorted = [...ids].sort((a, b) => a - b);
    const index = new Map(sorted.map((k, i) => [k, i]));
    const columns = sorted.map(() => new Array(windows.length).fill(null));
    windows.forEach((w, j) => {
      for (const e of items(w) || []) {
        const i = e ? index.get(id(e)) : undefined;
        if (i !== undefined) columns[i][j] = toNumber(value(e));
      }
    });
    return { ids: sorted, columns };
  }

  /** uPlot data for the ring chart: {rings: [id...], data: [step, seconds(ring0), GB/s(ring0),
   *  seconds(ring1), ...]} over the given windows, null where a window lacks a ring. */
  function ringChartData(windows) {
    const rings = (w) => w.rings;
    const seconds = columnsById(windows, rings, (r) => r.ring, (r) => r.seconds);
    const gbps = columnsById(windows, rings, (r) => r.ring, (r) => r.bus_gb_per_s);
    const data = [windows.map((w) => w.step)];
    seconds.ids.forEach((_, i) => data.push(seconds.columns[i], gbps.columns[i]));
    return { rings: seconds.ids, data };
  }

  /** Whether a window lists only some of its ranks: a large job's (metrics.every_rank_up_to),
   *  whose `rank_stats` hold min, p50, p99, max and mean over all of them. */
  function isBounded(w) {
    return Boolean(w && w.rank_stats && typeof w.rank_stats === "object");
  }

  /** Which panels that only some jobs fill apply to these windows: the ring chart needs ring sums
   *  (a job of one worker has none), the lateness chart two ranks or more to compare. */
  function panelsThatApply(windows) {
    const ranks = new Set();
    windows.forEach((w) => (w.ranks || []).forEach((r) => ranks.add(r.rank)));
    return { rings: windows.some((w) => Array.isArray(w.rings) && w.rings.length > 0),
             lateness: ranks.size > 1 || windows.some(isBounded) };
  }

  /** The lateness statistics a large job's chart draws instead of a line per rank, with the
   *  share of the ranks each stands above (nearest rank, as rank_stats computes them). */
  const LATENESS_STATS = [["p50", "median rank", 0.5], ["p99", "p99 rank", 0.99], ["max", "latest rank", 1]];

  /** Above this many ranks a line per rank is a tangle: the chart draws the statistics. */
  const LATENESS_LINES_UP_TO = 16;

  /** The nearest-rank percentile of the numbers among `values` (the smallest value at least a
   *  share `p` of them do not exceed); null when there are none. */
  function nearestRank(values, p) {
    const known = values.map(toNumber).filter((v) => v !== null).sort((a, b) => a - b);
    return known.length ? known[Math.max(0, Math.ceil(p * known.length) - 1)] : null;
  }

  /** uPlot data for the lateness chart: {ranks: [r...], labels: [...], data: [step, column per
   *  label]}: a line per rank up to LATENESS_LINES_UP_TO ranks; above, or for a large job
   *  (isBounded), the median, p99 and latest rank's lateness over all ranks (ranks then empty):
   *  from `rank_stats`, or from the window's ranks when it lists every one. */
  function latenessChartData(windows) {
    const steps = windows.map((w) => w.step);
    const listed = new Set();
    windows.forEach((w) => (w.ranks || []).forEach((r) => listed.add(r.rank)));
    if (windows.some(isBounded) || listed.size > LATENESS_LINES_UP_TO) {
      const stat = (w, key, share) => isBounded(w)
        ? toNumber(w.rank_stats.lateness_s && w.rank_stats.lateness_s[key])
        : nearestRank((w.ranks || []).map((r) => r.lateness_s), share);
      return { ranks: [], labels: LATENESS_STATS.map(([, label]) => label),
               data: [steps, ...LATENESS_STATS.map(([key, , share]) => windows.map((w) => stat(w, key, share)))] };
    }
    const { ids, columns } = columnsById(windows, (w) => w.ranks, (r) => r.rank, (r) => r.lateness_s);
    return { ranks: ids, labels: ids.map((r) => `rank ${r}`), data: [steps, ...columns] };
  }

  /** The parts of the loss a window line may carry beyond the total (metrics.jsonl): distillation's
   *  `loss_parts`, ALBERT's `sop`, fine-tuning's `task` and fp16's `fp16`. Each entry: label, the value from a line
   *  (undefined when the line lacks it), and its axis ("loss", "share" 0–1, or "scale" log). */
  const LOSS_PART_SERIES = [
    { label: "soft-target KL", axis: "loss", get: (w) => w.loss_parts && w.loss_parts.ce },
    { label: "masked-LM", axis: "loss", get: (w) => (w.loss_parts ? w.loss_parts.mlm : w.sop && w.sop.mlm_loss) },
    { label: "cosine", axis: "loss", get: (w) => w.loss_parts && w.loss_parts.cos },
    { label: "logit MSE", axis: "loss", get: (w) => w.loss_parts && w.loss_parts.mse },
    { label: "sentence order", axis: "loss", get: (w) => w.sop && w.sop.loss },
    { label: "SOP accuracy", axis: "share", get: (w) => w.sop && w.sop.accuracy },
    { label: "task accuracy", axis: "share", get: (w) => w.task && w.task.accuracy },
    { label: "fp16 loss scale", axis: "scale", get: (w) => w.fp16 && w.fp16.loss_scale },
  ];

  /** uPlot data for the loss-parts chart over the recent windows: {series: [the LOSS_PART_SERIES
   *  entries some window has], data: [step, column per series]} (null where a window lacks it);
   *  no series when the job reports none (plain BERT in fp32 or bf16). */
  function lossPartsChartData(windows) {
    const list = windows || [];
    const present = LOSS_PART_SERIES.filter((s) => list.some((w) => toNumber(s.get(w)) !== null));
    const data = [list.map((w) => w.step)];
    for (const s of present) data.push(list.map((w) => toNumber(s.get(w))));
    return { series: present, data };
  }

  /** A fine-tuning job's newest held-out accuracy (eval_every_windows) in the whole-run series,
   *  however long ago it was taken, or null before the first. */
  function heldOutAccuracy(series) {
    const accuracy = last((series && series.eval_accuracy) || []);
    return accuracy === undefined ? null : accuracy;
  }

  /** A DiLoCo job's headline numbers (sync.mode "diloco": its lines carry `diloco`): the step
   *  of the last outer step among `windows` and what rank 0 sent for its pseudo-gradient, then
   *  the newest line's counters where it has them (outer steps so far, rank 0's outer-step
   *  bytes per hour); none for other jobs. */
  function outerStepKpis(windows) {
    const list = (windows || []).filter((w) => w && w.diloco);
    if (list.length === 0) return [];
    const counters = [];
    const newest = list[list.length - 1].diloco;
    if (toNumber(newest.outer_steps) !== null) counters.push(["outer steps", String(newest.outer_steps)]);
    const perHour = toNumber(newest.outer_bytes_per_hour);
    if (perHour) counters.push(["outer bytes / hour", `${fmtMiB(perHour)} MiB`]);
    const outer = list.filter((w) => w.diloco.outer_step);
    if (outer.length === 0) return [["last outer step", "none yet"], ...counters];
    const latest = outer[outer.length - 1];
    const bytes = toNumber(latest.diloco.outer_bytes);
    return [["last outer step", `step ${latest.step}`],
            ["outer exchange", bytes ? `${fmtMiB(bytes)} MiB` : "alone"], ...counters];
  }

  /** At most about `max` evenly spaced entries of a sorted list (axis ticks for many ranks). */
  function thinTicks(values, max) {
    const every = Math.max(1, Math.ceil(values.length / max));
    return values.filter((_, i) => i % every === 0);
  }

  /** The rank the server flags as the straggler now (state.straggler, else a worker marked
   *  straggler), or null. */
  function currentStraggler(state) {
    if (!state) return null;
    if (state.straggler && toNumber(state.straggler.rank) !== null) return state.straggler.rank;
    const w = (state.workers || []).find((x) => x && x.straggler);
    return w && toNumber(w.rank) !== null ? w.rank : null;
  }

  /** A rank's ring links as UCX reported them: each distinct "transport/device" once
   *  ("tcp/eth0", "sysv/memory"); "" when none were reported. */
  function linksText(links) {
    const routes = [];
    for (const link of Array.isArray(links) ? links : []) {
      const route = (link && link.transport ? link.transport : "?") + (link && link.device ? "/" + link.device : "");
      if (!routes.includes(route)) routes.push(route);
    }
    return routes.join(", ");
  }

  /** Why the server named the straggler: " (its links)" or " (compute)"; "" when it did not say. */
  function stragglerReason(state) {
    const reason = state && state.straggler && state.straggler.reason;
    return reason === "link" ? " (its links)" : reason === "compute" ? " (compute)" : "";
  }

  /** A cluster job's heartbeat round trips to the head (the worst node's p99, and which node),
   *  for the headline row; nothing for a job of one process. */
  function heartbeatKpis(w) {
    const rtt = w && w.heartbeat_rtt_ms;
    if (!rtt || toNumber(rtt.p99) === null) return [];
    return [["heartbeat p99", `${fmtSig(rtt.p99)} ms${rtt.worst_node ? ` (${rtt.worst_node})` : ""}`]];
  }

  /** Worker table rows, sorted by rank: the state's workers, their numbers refreshed from the
   *  latest window's per-rank detail (which streams more often than state), plus any rank only
   *  the window knows. `straggler` marks the straggler's row. */
  function mergeWorkers(stateWorkers, latestWindow, straggler) {
    const rows = new Map();
    // A large job's state and window each list some ranks: the newest window's alone.
    const workers = isBounded(latestWindow) ? [] : stateWorkers;
    for (const w of workers || []) {
      if (toNumber(w && w.rank) === null) continue;
      rows.set(w.rank, { rank: w.rank, node: w.node || "", samples_per_s: toNumber(w.samples_per_s),
                         window_s: toNumber(w.window_s), lateness_s: toNumber(w.lateness_s),
                         links: linksText(w.links) });
    }
    for (const r of (latestWindow && latestWindow.ranks) || []) {
      if (toNumber(r && r.rank) === null) continue;
      const row = rows.get(r.rank) || { rank: r.rank, node: "" };
      row.node = r.node || row.node;
      row.samples_per_s = toNumber(r.samples_per_s);
      row.window_s = toNumber(r.window_s);
      row.lateness_s = toNumber(r.lateness_s);
      if (Array.isArray(r.links) && r.links.length) row.links = linksText(r.links);
      rows.set(r.rank, row);
    }
    return [...rows.values()]
      .sort((a, b) => a.rank - b.rank)
      .map((row) => Object.assign(row, { straggler: straggler !== null && row.rank === straggler }));
  }

  /** Seconds left at the step rate of the recent windows (by their unix_s), or null when there
   *  are too few windows to tell. */
  function estimateEta(windows, step, total) {
    if (!(total > 0) || step === null) return null;
    if (step >= total) return 0;
    const recent = windows.slice(-ETA_WINDOWS);
    if (recent.length < 2) return null;
    const a = recent[0], b = last(recent);
    const dt = toNumber(b.unix_s) - toNumber(a.unix_s);
    const ds = b.step - a.step;
    if (!(dt > 0) || !(ds > 0)) return null;
    return (total - step) * dt / ds;
  }

  /** The last `n` warning-or-worse log lines, newest first. */
  function recentWarnings(log, n = 50) {
    return (log || [])
      .filter((l) => l && WARNING_LEVELS.has(String(l.level || "").toLowerCase()))
      .slice(-n)
      .reverse();
  }

  /** Whether a state object is newer than (or as new as) the current one, by elapsed time. */
  function isNewerState(next, current) {
    if (!current) return true;
    const a = toNumber(next && next.progress && next.progress.elapsed_s);
    const b = toNumber(current.progress && current.progress.elapsed_s);
    return a === null || b === null || a >= b || Boolean(next.job && next.job.finished);
  }

  // ---------------------------------------------------------------------------------------------
  // Formatting

  /** A number with `digits` decimals, thousands grouped; "–" for no value. */
  function fmtFixed(v, digits = 2) {
    const n = toNumber(v);
    if (n === null) return "–";
    return n.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits });
  }

  /** A number with about 4 significant digits, exponent form for tiny or huge values. */
  function fmtSig(v) {
    const n = toNumber(v);
    if (n === null) return "–";
    const a = Math.abs(n);
    if (a !== 0 && (a < 1e-3 || a >= 1e9)) return n.toExponential(2);
    if (a >= 1000) return fmtFixed(n, 0);
    if (a >= 100) return fmtFixed(n, 1);
    if (a >= 1) return fmtFixed(n, 2);
    return n.toPrecision(3);
  }

  /** A duration in seconds as "1h 02m", "4m 05s" or "12.3s"; "–" for no value. */
  function fmtDuration(v) {
    const s = toNumber(v);
    if (s === null || s < 0) return "–";
    if (s < 60) return `${s < 10 ? s.toFixed(1) : Math.round(s)}s`;
    const total = Math.round(s);
    const h = Math.floor(total / 3600), m = Math.floor((total % 3600) / 60), sec = total % 60;
    const pad = (x) => String(x).padStart(2, "0");
    return h > 0 ? `${h}h ${pad(m)}m` : `${m}m ${pad(sec)}s`;
  }

  /** Bytes as MiB with one decimal. */
  function fmtMiB(bytes) {
    const b = toNumber(bytes);
    return b === null ? "–" : fmtFixed(b / (1024 * 1024), 1);
  }

  /** A unix time as local HH:MM:SS (with the date when not today). */
  function fmtClock(unix) {
    const t = toNumber(unix);
    if (t === null) return "–";
    const d = new Date(t * 1000);
    const time = d.toLocaleTimeString("en-GB", { hour12: false });
    return d.toDateString() === new Date().toDateString() ? time : `${d.toISOString().slice(0, 10)} ${time}`;
  }

  // ---------------------------------------------------------------------------------------------
  // Exports for node (unit checks); everything below runs only in a browser.

  const pure = {
    toNumber, emptySeries, seriesFromApi, thinColumns, thinSeries, appendWindow, pushRecentWindow,
    windowsFromApi, lossChartData, throughputChartData, countValues, averageTimeSplit, stackParts,
    columnsById, ringChartData, latenessChartData, panelsThatApply, isBounded, workersCaption, nodesCaption, heartbeatKpis, linksText, stragglerReason, lossPartsChartData, outerStepKpis, heldOutAccuracy, thinTicks, currentStraggler, mergeWorkers, estimateEta, recentWarnings,
    isNewerState, fmtFixed, fmtSig, fmtDuration, fmtMiB, fmtClock,
    MAX_SERIES_POINTS, TIME_PARTS,
  };
  if (typeof module !== "undefined" && module.exports) module.exports = pure;
  if (typeof window === "undefined" || typeof document === "undefined") return;

  // ---------------------------------------------------------------------------------------------
  // Model: what the page knows about the job

  const model = {
    state: null,            // the latest /api/state object
    stateReceivedAt: 0,     // Date.now() when it came
    serverOffset: 0,        // server clock minus browser clock, in seconds (estimated)
    series: emptySeries(),  // whole run, downsampled
    windows: [],            // recent windows with per-rank detail
    loaded: false,          // the first full sync has completed
    fetchFailed: false,     // the last sync failed
    connected: false,       // the event stream is open
    finished: false,        // the job has finished (stream closed for good)
  };

  const $ = (id) => document.getElementById(id);

  /** The server's current time in unix seconds, from the browser clock and the estimated offset. */
  function serverNow() {
    return Date.now() / 1000 + model.serverOffset;
  }

  /** The newest window the page has, or null. */
  function latestWindow() {
    return last(model.windows) || null;
  }

  /** Takes in a state object (from /api/state or a "state" event). */
  function onState(state) {
    if (!state || typeof state !== "object" || !isNewerState(state, model.state)) return;
    model.state = state;
    model.stateReceivedAt = Date.now();
    const job = state.job || {};
    const progress = state.progress || {};
    if (!job.finished && toNumber(job.started_unix_s) !== null && toNumber(progress.elapsed_s) !== null) {
      model.serverOffset = job.started_unix_s + progress.elapsed_s - Date.now() / 1000;
    }
    if (state.latest) onWindow(state.latest);
    markDirty("tables", "charts");
    if (job.finished) finish(false);
  }

  /** Takes in one WINDOW (from /api/state's latest or a "window" event). */
  function onWindow(w) {
    const a = appendWindow(model.series, w);
    const b = pushRecentWindow(model.windows, w);
    if (a || b) markDirty("charts", "tables");
  }

  // ---------------------------------------------------------------------------------------------
  // Server connection: a full sync over fetch, then live updates over EventSource

  let source = null;        // the EventSource, while open or reconnecting
  let retryTimer = null;    // pending reopen of a stream the browser gave up on
  let retryDelay = 1000;
  let syncing = false;      // a full sync is in flight; live events are buffered meanwhile
  let syncAgain = false;    // another sync was asked for while one was in flight
  let needResync = false;   // the stream dropped: windows may have been missed
  const buffered = [];      // [kind, payload] events received while syncing

  /** GETs a JSON document relative to the page. */
  async function getJSON(url) {
    const res = await fetch(url, { cache: "no-store" });
    if (!res.ok) throw new Error(`${url}: HTTP ${res.status}`);
    return res.json();
  }

  /** Replaces everything with a fresh copy from the server, then applies events that came
   *  meanwhile. Retries every 2 s while the server cannot be reached. */
  async function resync() {
    if (syncing) { syncAgain = true; return; }
    syncing = true;
    try {
      const [state, series, windows] = await Promise.all([
        getJSON("api/state"), getJSON("api/series"), getJSON(`api/windows?last=${RECENT_WINDOWS}`),
      ]);
      model.series = seriesFromApi(series);
      model.windows = windowsFromApi(windows);
      model.state = null;
      onState(state);
      model.loaded = true;
      model.fetchFailed = false;
    } catch (err) {
      console.warn("troupe dashboard: sync failed:", err);
      model.fetchFailed = true;
      if (!model.finished || !model.loaded) setTimeout(resync, 2000);
    } finally {
      syncing = false;
      for (const [kind, payload] of buffered.splice(0)) applyEvent(kind, payload);
      markDirty("status", "tables", "charts");
      if (syncAgain) { syncAgain = false; resync(); }
    }
  }

  /** Opens the event stream (EventSource reconnects by itself after most errors). */
  function openStream() {
    retryTimer = null;
    if (model.finished || typeof EventSource === "undefined") return;
    source = new EventSource("api/stream");
    source.addEventListener("open", onStreamOpen);
    source.addEventListener("error", onStreamError);
    source.addEventListener("window", (e) => onStreamEvent("window", e.data));
    source.addEventListener("state", (e) => onStreamEvent("state", e.data));
    source.addEventListener("end", () => finish(true));
  }

  /** Closes the event stream for good and cancels any pending reopen. */
  function closeStream() {
    if (source) source.close();
    source = null;
    if (retryTimer) clearTimeout(retryTimer);
    retryTimer = null;
  }

  /** The stream is (re)connected: catch up on whatever was missed while it was down. */
  function onStreamOpen() {
    model.connected = true;
    retryDelay = 1000;
    if (needResync) { needResync = false; resync(); }
    markDirty("status");
  }

  /** The stream dropped: show "lost contact"; reopen it ourselves if the browser gave up. */
  function onStreamError() {
    if (model.finished) { closeStream(); return; }
    model.connected = false;
    needResync = true;
    if (source && source.readyState === EventSource.CLOSED) {
      source = null;
      retryTimer = setTimeout(openStream, retryDelay);
      retryDelay = Math.min(retryDelay * 2, MAX_RETRY_MS);
    }
    markDirty("status");
  }

  /** Parses one stream event; buffers it while a sync is in flight. */
  function onStreamEvent(kind, data) {
    let payload;
    try { payload = JSON.parse(data); } catch (err) {
      console.warn(`troupe dashboard: bad ${kind} event:`, err);
      return;
    }
    if (syncing || !model.loaded) {
      buffered.push([kind, payload]);
      if (buffered.length > 4 * RECENT_WINDOWS) buffered.shift();  // a sync replaces these anyway
    }
    else applyEvent(kind, payload);
  }

  /** Applies one parsed stream event. */
  function applyEvent(kind, payload) {
    if (kind === "window") onWindow(payload);
    else if (kind === "state") onState(payload);
  }

  /** The job is over: close the stream, show "finished", and (after an "end" event) fetch the
   *  final state once. */
  function finish(refetch) {
    if (model.finished) return;
    model.finished = true;
    closeStream();
    markDirty("status", "tables", "charts");
    if (refetch && model.loaded) resync();
  }

  /** Refreshes the state when the stream has been quiet about it (it only sends state on changes),
   *  so heartbeat ages and elapsed time stay current. */
  async function pollState() {
    if (model.finished || !model.loaded || syncing || Date.now() - model.stateReceivedAt < STATE_POLL_MS) return;
    try {
      onState(await getJSON("api/state"));
    } catch (err) {
      // The stream's error handler reports lost contact; nothing more to do here.
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Rendering: batched, at most every RENDER_INTERVAL_MS

  const dirty = new Set();
  let renderTimer = null;
  let lastRender = 0;

  /** Notes what needs redrawing and schedules a redraw. */
  function markDirty(...parts) {
    for (const p of parts) dirty.add(p);
    if (renderTimer) return;
    const wait = Math.max(0, RENDER_INTERVAL_MS - (performance.now() - lastRender));
    renderTimer = setTimeout(render, wait);
  }

  /** Redraws what is dirty; the header and progress are cheap and always redrawn. */
  function render() {
    renderTimer = null;
    lastRender = performance.now();
    const parts = new Set(dirty);
    dirty.clear();
    renderHeader();
    renderProgress();
    renderKpis();
    if (parts.has("tables") || parts.has("clock")) renderTables();
    if (parts.has("charts")) renderCharts();
  }

  /** Creates an element with properties/attributes and children (strings become text). */
  function el(tag, props = {}, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(props)) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "className") node.className = v;
      else if (k === "dataset") Object.assign(node.dataset, v);
      else node.setAttribute(k, v === true ? "" : String(v));
    }
    for (const c of children.flat()) {
      if (c === null || c === undefined || c === false) continue;
      node.append(c instanceof Node ? c : String(c));
    }
    return node;
  }

  /** Sets an element's text only when it changed (keeps selections and avoids layout work). */
  function setText(id, text) {
    const node = $(id);
    if (node && node.textContent !== text) node.textContent = text;
  }

  /** The status shown in the badge: "finished", "running", "lost contact" or "connecting". */
  function jobStatus() {
    if (model.finished) return "finished";
    if (!model.loaded) return model.fetchFailed ? "lost contact" : "connecting";
    return model.connected ? "running" : "lost contact";
  }

  /** Job name, run directory, world size, start time and status badge. */
  function renderHeader() {
    const job = (model.state && model.state.job) || {};
    const name = job.name || "…";
    setText("job-name", name);
    if (job.name && document.title !== `troupe · ${job.name}`) document.title = `troupe · ${job.name}`;
    const meta = [];
    if (job.run_dir) meta.push(job.run_dir);
    if (toNumber(job.world_size) !== null) meta.push(`world size ${job.world_size}`);
    if (toNumber(job.started_unix_s) !== null) meta.push(`started ${fmtClock(job.started_unix_s)}`);
    setText("job-meta", meta.join(" · "));
    const status = jobStatus();
    const badge = $("job-status");
    setText("job-status", status);
    badge.className = `badge status status-${status.replace(/\s+/g, "-")}`;
  }

  /** The current step: the newest of the state's progress and the streamed windows. */
  function currentStep() {
    const progress = (model.state && model.state.progress) || {};
    const candidates = [toNumber(progress.step), toNumber(last(model.series.step)),
                        toNumber((latestWindow() || {}).step)].filter((v) => v !== null);
    return candidates.length ? Math.max(...candidates) : null;
  }

  /** Step / total, progress bar, elapsed time and ETA. */
  function renderProgress() {
    const state = model.state || {};
    const progress = state.progress || {};
    const job = state.job || {};
    const total = toNumber(progress.total_steps) ?? toNumber(job.total_steps);
    const step = currentStep();
    setText("progress-step", step === null ? "0" : String(step));
    setText("progress-total", total === null ? "?" : String(total));
    const pct = total > 0 && step !== null ? Math.min(100, (100 * step) / total) : 0;
    setText("progress-percent", total > 0 ? `${pct.toFixed(1)}%` : "");
    const fill = $("progress-fill");
    fill.style.width = `${pct}%`;
    fill.classList.toggle("done", model.finished);
    fill.parentElement.setAttribute("aria-valuenow", pct.toFixed(1));

    let elapsed = toNumber(progress.elapsed_s);
    if (elapsed !== null && !model.finished) elapsed += (Date.now() - model.stateReceivedAt) / 1000;
    setText("progress-elapsed", fmtDuration(elapsed));
    let eta;
    if (model.finished) eta = "done";
    else {
      const local = estimateEta(model.windows, step, total);
      eta = fmtDuration(local !== null ? local : toNumber(progress.eta_s));
    }
    setText("progress-eta", eta);
  }

  /** The row of headline numbers from the latest window. */
  function renderKpis() {
    const w = latestWindow() || {};
    const evalPpl = last(model.series.eval_perplexity);
    const straggler = currentStraggler(model.state);
    const items = [
      ["loss", fmtSig(w.loss)],
      // A fine-tuning window's loss is the task's: its accuracy, not a perplexity, says how it goes.
      w.task ? ["task accuracy", fmtSig(w.task.accuracy)] : ["perplexity", fmtSig(w.perplexity)],
      w.task ? ["held-out accuracy", fmtSig(heldOutAccuracy(model.series))] : ["eval perplexity", fmtSig(evalPpl)],
      ["learning rate", fmtSig(w.lr)],
      ["grad norm", fmtSig(w.grad_norm)],
      ["samples/s", fmtSig(w.samples_per_s ?? ((model.state || {}).progress || {}).samples_per_s)],
      ["tokens/s", fmtSig(w.tokens_per_s)],
      ["window", w.window_s == null ? "–" : `${fmtSig(w.window_s)} s`],
      ["straggler", straggler === null ? "none" : `rank ${straggler}${stragglerReason(model.state)}`],
      ...outerStepKpis(model.windows),
      ...heartbeatKpis(w),
    ];
    const key = JSON.stringify(items);
    const box = $("kpis");
    if (box.dataset.key === key) return;
    box.dataset.key = key;
    box.replaceChildren(...items.map(([label, value]) =>
      el("div", { className: "kpi" }, el("span", { className: "kpi-label" }, label),
         el("span", { className: "kpi-value" }, value))));
  }

  /** Replaces the body rows of a table. */
  function fillTable(id, rows) {
    const tbody = $(id).tBodies[0];
    tbody.replaceChildren(...rows);
  }

  /** A row spanning the whole table with a muted note, for empty tables. */
  function emptyRow(columns, text) {
    return el("tr", { className: "empty" }, el("td", { colspan: columns }, text));
  }

  /** All tables, the config block and the footer. */
  function renderTables() {
    const state = model.state || {};
    renderWorkers(state);
    renderNodes(state);
    renderCheckpoints(state);
    renderEvents(state);
    renderLog(state);
    renderConfig(state);
    const m = state.metrics || {};
    setText("metrics-counters", `metrics dropped ${m.dropped ?? 0} · malformed ${m.malformed ?? 0}`);
    setText("last-update", model.stateReceivedAt ? `state at ${fmtClock(model.stateReceivedAt / 1000)}` : "");
  }

  /** What a large job's workers table leaves out ("" when it lists every worker). */
  function workersCaption(rows, total) {
    const all = toNumber(total);
    return all !== null && all > rows ? `${rows} of ${all}: the lowest rank, the straggler and the latest` : "";
  }

  /** What a large job's nodes table leaves out, and how many nodes are in each state. */
  function nodesCaption(shown, total, states) {
    const all = toNumber(total);
    if (all === null || all <= shown) return "";
    const counts = Object.entries(states || {}).filter(([, n]) => n > 0).map(([s, n]) => `${n} ${s}`).join(", ");
    return `${shown} of ${all} (${counts}): lost first, then those heard from longest ago`;
  }

  /** Workers: one row per rank, the straggler's row highlighted and badged. */
  function renderWorkers(state) {
    const straggler = currentStraggler(state);
    const latest = latestWindow();
    const rows = mergeWorkers(state.workers, latest, straggler);
    setText("workers-caption", workersCaption(rows.length, isBounded(latest) ? latest.reported_ranks : state.workers_total));
    $("workers-table").dataset.straggler = straggler === null ? "" : String(straggler);
    fillTable("workers-table", rows.length ? rows.map((r) =>
      el("tr", { dataset: { rank: String(r.rank) }, className: r.straggler ? "straggler" : null },
         el("td", {}, String(r.rank), r.straggler ? el("span", { className: "badge badge-straggler" }, "straggler") : null),
         el("td", {}, r.node),
         el("td", { className: "num" }, fmtFixed(r.samples_per_s, 1)),
         el("td", { className: "num" }, fmtFixed(r.window_s, 3)),
         el("td", { className: "num" }, fmtFixed(r.lateness_s, 3)),
         el("td", {}, r.links || ""))) : [emptyRow(6, "no workers yet")]);
  }

  /** Nodes: state badge, generation, ranks, memory, dropped metrics, last heartbeat. */
  function renderNodes(state) {
    const nodes = state.nodes || [];
    const now = serverNow();
    setText("nodes-caption", nodesCaption(nodes.length, state.nodes_total, state.node_states));
    fillTable("nodes-table", nodes.length ? nodes.map((n) => {
      const seen = toNumber(n.last_seen_unix_s);
      const age = seen === null ? "–" : `${fmtDuration(Math.max(0, now - seen))} ago`;
      return el("tr", { dataset: { node: String(n.name) }, className: `node-${n.state}` },
        el("td", {}, n.name),
        el("td", {}, el("span", { className: `badge state-${n.state}` }, n.state)),
        el("td", { className: "num" }, n.generation ?? "–"),
        el("td", {}, (n.ranks || []).join(", ")),
        el("td", { className: "num" }, fmtMiB(n.rss_bytes)),
        el("td", { className: "num" }, n.metrics_dropped ?? 0),
        el("td", { className: "num" }, n.heartbeat_p99_ms == null ? "–" : fmtSig(n.heartbeat_p99_ms)),
        el("td", { title: fmtClock(seen) }, model.finished ? fmtClock(seen) : age));
    }) : [emptyRow(8, "no nodes yet")]);
  }

  /** The last 10 checkpoints, newest first. */
  function renderCheckpoints(state) {
    const cps = (state.checkpoints || []).slice(-10).reverse();
    fillTable("checkpoints-table", cps.length ? cps.map((c) =>
      el("tr", {},
         el("td", { className: "num" }, c.step),
         el("td", {}, fmtClock(c.unix_s)),
         el("td", { className: "num" }, fmtFixed(c.seconds, 2)),
         el("td", { className: "num" }, fmtMiB(c.bytes)),
         el("td", {}, c.skipped ? el("span", { className: "badge badge-muted" }, "skipped") : ""))) :
      [emptyRow(5, "no checkpoints yet")]);
  }

  /** Membership events, newest first. */
  function renderEvents(state) {
    const events = (state.events || []).slice(-50).reverse();
    fillTable("events-table", events.length ? events.map((e) =>
      el("tr", {},
         el("td", {}, fmtClock(e.unix_s)),
         el("td", {}, el("span", { className: `badge event-${e.event}` }, e.event)),
         el("td", {}, e.text))) : [emptyRow(3, "no membership changes")]);
  }

  /** Recent warning and error log lines, newest first. */
  function renderLog(state) {
    const lines = recentWarnings(state.log, 50);
    fillTable("log-table", lines.length ? lines.map((l) => {
      const level = String(l.level).toLowerCase();
      return el("tr", { className: `level-${level}` },
        el("td", {}, fmtClock(l.unix_s)),
        el("td", {}, el("span", { className: `badge level-${level}` }, level)),
        el("td", { className: "msg" }, l.text));
    }) : [emptyRow(3, "no warnings")]);
  }

  /** The job config, pretty-printed (only rewritten when it changes, so <details> stays as is). */
  function renderConfig(state) {
    const config = state.job && state.job.config;
    setText("config-json", config === undefined ? "" : JSON.stringify(config, null, 2));
  }

  // ---------------------------------------------------------------------------------------------
  // Charts (uPlot)

  const charts = {};  // element id → {plot, signature, fullX}
  let timeSplitRaw = { ranks: [], nodes: [], parts: {} };  // read by the time-split legend

  /** Whether vendor/uPlot.iife.min.js loaded. */
  function chartsAvailable() {
    return typeof uPlot !== "undefined";
  }

  /** Width and height for a chart in its container. */
  function chartSize(node) {
    return { width: Math.max(240, Math.floor(node.clientWidth)), height: CHART_HEIGHT };
  }

  /** A uPlot legend value formatter with about 4 significant digits. */
  function legendValue(u, v) {
    return v == null ? "–" : fmtSig(v);
  }

  /** The x series (steps) shared by the step-based charts. */
  function stepSeries() {
    return { label: "step", value: (u, v) => (v == null ? "–" : String(v)) };
  }

  /** Returns the chart for an element, (re)creating it when its series layout (`signature`)
   *  changed, e.g. a rank or ring appeared or the straggler moved. */
  function ensureChart(id, signature, makeOptions) {
    const existing = charts[id];
    if (existing && existing.signature === signature) return existing;
    if (existing) existing.plot.destroy();
    const node = $(id);
    const opts = Object.assign(makeOptions(), chartSize(node));
    const empty = opts.series.map(() => []);
    const chart = { plot: new uPlot(opts, empty, node), signature, fullX: null };
    charts[id] = chart;
    return chart;
  }

  /** Gives a chart new data, keeping the user's x zoom if they zoomed in. */
  function setChartData(chart, data) {
    const u = chart.plot;
    const x = data[0];
    const sx = u.scales.x;
    const zoomed = chart.fullX !== null && sx.min != null &&
      (sx.min > chart.fullX[0] || sx.max < chart.fullX[1]);
    if (zoomed) {
      const { min, max } = sx;
      u.setData(data, false);
      u.setScale("x", { min, max });
    } else {
      u.setData(data);
    }
    chart.fullX = x.length ? [x[0], x[x.length - 1]] : null;
  }

  /** An x axis of whole steps (or ranks): ticks never fall between two. */
  function stepAxis() {
    return { incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000, 200000] };
  }

  /** Loss (left axis) and perplexity (right, log scale) vs step; evaluations as points. */
  function lossChartOptions() {
    return {
      scales: { x: { time: false }, loss: {}, ppl: { distr: 3 } },
      series: [
        stepSeries(),
        { label: "loss", scale: "loss", stroke: "#1f77b4", width: 1.5, spanGaps: true, value: legendValue },
        { label: "perplexity", scale: "ppl", stroke: "#ff7f0e", width: 1.25, spanGaps: true, value: legendValue },
        { label: "eval perplexity", scale: "ppl", stroke: "#2ca02c", width: 1.5, paths: () => null,
          points: { show: true, size: 7, fill: "#2ca02c" }, value: legendValue },
      ],
      axes: [
        stepAxis(),
        { scale: "loss", label: "loss", size: 55 },
        { scale: "ppl", label: "perplexity (log)", side: 1, size: 60, grid: { show: false } },
      ],
    };
  }

  /** Samples/s (left axis) and tokens/s (right axis) vs step. */
  function throughputChartOptions() {
    return {
      scales: { x: { time: false }, sps: { range: (u, min, max) => [0, max > 0 ? max * 1.1 : 1] },
                tps: { range: (u, min, max) => [0, max > 0 ? max * 1.1 : 1] } },
      series: [
        stepSeries(),
        { label: "samples/s", scale: "sps", stroke: "#1f77b4", width: 1.5, value: legendValue },
        { label: "tokens/s", scale: "tps", stroke: "#17becf", width: 1.25, dash: [4, 3], value: legendValue },
      ],
      axes: [
        stepAxis(),
        { scale: "sps", label: "samples/s", size: 55 },
        { scale: "tps", label: "tokens/s", side: 1, size: 65, grid: { show: false } },
      ],
    };
  }

  /** uPlot path builder for one layer of the stacked bars: series k holds the running sum up to
   *  part k, and its bar spans from series k-1's value (0 for the first) to its own. */
  function stackedBarsPath(u, seriesIdx, idx0, idx1) {
    const xs = u.data[0], top = u.data[seriesIdx];
    const bottom = seriesIdx > 1 ? u.data[seriesIdx - 1] : null;
    const span = u.scales.x.max - u.scales.x.min;
    const width = (span > 0 ? u.bbox.width / span : u.bbox.width) * 0.6;
    const path = new Path2D();
    for (let i = idx0; i <= idx1; i++) {
      if (top[i] == null) continue;
      const cx = u.valToPos(xs[i], "x", true);
      const y1 = u.valToPos(top[i], "s", true);
      const y0 = u.valToPos(bottom ? bottom[i] || 0 : 0, "s", true);
      path.rect(cx - width / 2, y1, width, y0 - y1);
    }
    return { stroke: path, fill: path, clip: null, flags: 0 };
  }

  /** One bar per rank, stacked by part of the window time (averaged over recent windows). */
  function timeSplitChartOptions() {
    const partSeries = TIME_PARTS.map((p, k) => ({
      label: p.replace("_", " "), scale: "s", stroke: PART_COLORS[p], fill: PART_COLORS[p], width: 0,
      paths: stackedBarsPath, points: { show: false },
      value: (u, v, si, idx) => {
        const raw = idx == null ? null : timeSplitRaw.parts[TIME_PARTS[k]][idx];
        return raw == null ? "–" : `${fmtSig(raw * 1000)} ms`;
      },
    }));
    return {
      scales: {
        x: { time: false, range: (u, min, max) => (min == null ? [-0.5, 0.5] : [min - 0.5, max + 0.5]) },
        s: { range: (u, min, max) => [0, max > 0 ? max * 1.1 : 1] },
      },
      // One bar per listed rank, side by side (a large job lists ranks far apart), named by rank.
      series: [{ label: "rank", value: (u, v) => (v == null ? "–" : String(timeSplitRaw.ranks[v] ?? v)) }, ...partSeries],
      axes: [
        { label: "rank", splits: () => thinTicks(timeSplitRaw.ranks.map((_, i) => i), 32),
          values: (u, splits) => splits.map((i) => String(timeSplitRaw.ranks[i] ?? "")), grid: { show: false } },
        { scale: "s", label: "seconds per window", size: 55 },
      ],
      cursor: { points: { show: false }, drag: { x: false, y: false } },
    };
  }

  /** Allreduce seconds (solid, left) and bus bandwidth (dashed, right) per ring vs step. */
  function ringChartOptions(rings) {
    const series = [stepSeries()];
    rings.forEach((id, k) => {
      const color = PALETTE[k % PALETTE.length];
      series.push({ label: `ring ${id} s`, scale: "s", stroke: color, width: 1.5, value: legendValue });
      series.push({ label: `ring ${id} GB/s`, scale: "gbps", stroke: color, width: 1, dash: [4, 3],
                    value: legendValue });
    });
    return {
      scales: { x: { time: false }, s: { range: (u, min, max) => [0, max > 0 ? max * 1.1 : 1] },
                gbps: { range: (u, min, max) => [0, max > 0 ? max * 1.1 : 1] } },
      series,
      legend: { show: rings.length <= 8 },
      axes: [
        stepAxis(),
        { scale: "s", label: "allreduce s", size: 55 },
        { scale: "gbps", label: "bus GB/s", side: 1, size: 55, grid: { show: false } },
      ],
    };
  }

  /** Lateness per rank vs step, the straggler's line thick and red; a large job's statistics
   *  lines (`labels` without ranks). */
  function latenessChartOptions(ranks, labels, straggler) {
    const series = [stepSeries()];
    labels.forEach((label, k) => {
      const isStraggler = ranks.length > 0 && ranks[k] === straggler;
      series.push({ label: isStraggler ? `${label} (straggler)` : label, scale: "s",
                    stroke: isStraggler ? STRAGGLER_COLOR : PALETTE[k % PALETTE.length],
                    width: isStraggler ? 3 : 1.25, value: legendValue });
    });
    return {
      scales: { x: { time: false }, s: { range: (u, min, max) => [0, max > 0 ? max * 1.1 : 0.01] } },
      series,
      legend: { show: labels.length <= 16 },
      axes: [stepAxis(), { scale: "s", label: "lateness s", size: 55 }],
    };
  }

  /** The loss parts (left), SOP accuracy (right, 0–1) and the fp16 loss scale (right, log), as
   *  far as the job reports them. */
  function lossPartsChartOptions(series) {
    const scales = { x: { time: false }, loss: {}, share: { range: [0, 1] }, scale: { distr: 3 } };
    const axes = [stepAxis(), { scale: "loss", label: "loss", size: 55 }];
    if (series.some((s) => s.axis === "share")) axes.push({ scale: "share", label: "accuracy", side: 1, size: 50, grid: { show: false } });
    if (series.some((s) => s.axis === "scale")) axes.push({ scale: "scale", label: "loss scale (log)", side: 1, size: 60, grid: { show: false } });
    return {
      scales,
      series: [stepSeries(), ...series.map((s, k) => ({ label: s.label, scale: s.axis, stroke: PALETTE[k % PALETTE.length],
                                                         width: 1.5, spanGaps: true, value: legendValue }))],
      axes,
    };
  }

  /** Redraws every chart from the model (each on its own, so one failure spares the rest), and
   *  records the number of loss points plotted on #loss-chart. */
  function renderCharts() {
    const lossData = lossChartData(model.series);
    const recent = model.windows;
    const split = averageTimeSplit(recent, TIME_SPLIT_WINDOWS);
    const straggler = currentStraggler(model.state);
    const newest = recent.length ? recent[recent.length - 1] : null;
    setText("time-split-caption", !split.windows ? "" : isBounded(newest)
      ? `the latest window's listed ranks of ${newest.reported_ranks}, mean of last ${split.windows} windows`
      : `mean of last ${split.windows} windows`);
    const st = model.state && model.state.straggler;
    setText("lateness-caption", straggler === null ? "no straggler" :
      `straggler: rank ${straggler}${stragglerReason(model.state)}${st && st.windows ? ` (${st.windows} windows)` : ""}`);

    const applies = panelsThatApply(recent);
    $("ring-card").hidden = !applies.rings;
    $("lateness-card").hidden = !applies.lateness;
    if (chartsAvailable()) {
      const draw = (name, fn) => {
        try { fn(); } catch (err) { console.error(`troupe dashboard: ${name} chart:`, err); }
      };
      draw("loss", () => setChartData(ensureChart("loss-chart", "loss", lossChartOptions), lossData));
      draw("throughput", () => setChartData(ensureChart("throughput-chart", "tp", throughputChartOptions),
                                            throughputChartData(model.series)));
      draw("time split", () => {
        timeSplitRaw = split;
        const chart = ensureChart("time-split-chart", "split", timeSplitChartOptions);
        chart.plot.setData([split.ranks.map((_, i) => i), ...stackParts(split)]);
      });
      draw("ring", () => {
        if (!applies.rings) return;
        const { rings, data } = ringChartData(recent);
        setChartData(ensureChart("ring-chart", rings.join(","), () => ringChartOptions(rings)), data);
      });
      draw("loss parts", () => {
        const { series, data } = lossPartsChartData(recent);
        $("loss-parts-card").hidden = series.length === 0;
        if (series.length === 0) return;
        const signature = series.map((s) => s.label).join(",");
        setChartData(ensureChart("loss-parts-chart", signature, () => lossPartsChartOptions(series)), data);
      });
      draw("lateness", () => {
        if (!applies.lateness) return;
        const { ranks, labels, data } = latenessChartData(recent);
        const signature = `${labels.join(",")}|${straggler}`;
        setChartData(ensureChart("lateness-chart", signature, () => latenessChartOptions(ranks, labels, straggler)), data);
      });
    }
    $("loss-chart").dataset.points = String(countValues(lossData[1]));
  }

  /** Keeps every chart as wide as its card. */
  function watchChartSizes() {
    if (typeof ResizeObserver === "undefined") return;
    const observer = new ResizeObserver(() => {
      for (const [id, chart] of Object.entries(charts)) {
        const size = chartSize($(id));
        if (chart.plot.width !== size.width) chart.plot.setSize(size);
      }
    });
    for (const id of ["loss-chart", "throughput-chart", "time-split-chart", "ring-chart", "loss-parts-chart",
                      "lateness-chart"]) {
      observer.observe($(id));
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Start

  /** Shows the no-charts note if uPlot is missing, opens the stream, syncs, and ticks the clock. */
  function main() {
    if (!chartsAvailable()) $("charts-note").hidden = false;
    else watchChartSizes();
    openStream();
    resync();
    setInterval(() => {
      if (model.finished) return;
      markDirty("clock");
      pollState();
    }, 1000);
    markDirty("status");
  }

  main();
})();
