// The dashboard page's data functions (tools/dashboard/dashboard.js exports them to node):
// what the charts are given from the server's JSON, checked without a browser.
//   node tests/browser/dashboard_functions_test.mjs tools/dashboard/dashboard.js
import { createRequire } from "node:module";
import test from "node:test";
import assert from "node:assert/strict";
import path from "node:path";

const require = createRequire(import.meta.url);
const page = require(path.resolve(process.argv[2]));

test("a plain BERT job has no loss parts to chart", () => {
  const { series, data } = page.lossPartsChartData([{ step: 1, loss: 3 }, { step: 2, loss: 2.5 }]);
  assert.equal(series.length, 0);
  assert.deepEqual(data, [[1, 2]]);
});

test("distillation charts the four parts its lines carry", () => {
  const windows = [
    { step: 4, loss_parts: { ce: 1.5, mlm: 4.0, cos: 0.25, mse: 0 } },
    { step: 5, loss_parts: { ce: 1.25, mlm: 3.5, cos: 0.2, mse: 0 } },
  ];
  const { series, data } = page.lossPartsChartData(windows);
  assert.deepEqual(series.map((s) => s.label), ["soft-target KL", "masked-LM", "cosine", "logit MSE"]);
  assert.deepEqual(data, [[4, 5], [1.5, 1.25], [4.0, 3.5], [0.25, 0.2], [0, 0]]);
});

test("ALBERT's sentence order and fp16's loss scale get their own axes, gaps stay null", () => {
  const windows = [
    { step: 1, sop: { loss: 0.69, accuracy: 0.5, mlm_loss: 9.5 }, fp16: { loss_scale: 65536, skipped_step: true } },
    { step: 2, sop: { loss: 0.6, accuracy: 0.75, mlm_loss: 9.0 } },
  ];
  const { series, data } = page.lossPartsChartData(windows);
  assert.deepEqual(series.map((s) => [s.label, s.axis]),
                   [["masked-LM", "loss"], ["sentence order", "loss"], ["SOP accuracy", "share"],
                    ["fp16 loss scale", "scale"]]);
  assert.deepEqual(data, [[1, 2], [9.5, 9.0], [0.69, 0.6], [0.5, 0.75], [65536, null]]);
});

test("a fine-tuning job charts its task accuracy as a share", () => {
  const windows = [{ step: 1, loss: 0.69, task: { accuracy: 0.5 } }, { step: 2, loss: 0.6, task: { accuracy: 0.625 } }];
  const { series, data } = page.lossPartsChartData(windows);
  assert.deepEqual(series.map((s) => [s.label, s.axis]), [["task accuracy", "share"]]);
  assert.deepEqual(data, [[1, 2], [0.5, 0.625]]);
});

test("a fine-tuning job's held-out accuracy is its newest periodic evaluation's, however old", () => {
  assert.equal(page.heldOutAccuracy(page.emptySeries()), null);
  // The whole-run series from /api/series holds every evaluation, also one taken long before the
  // recent windows (eval_every_windows above their count); a live window with one appends it.
  const series = page.seriesFromApi({
    step: [1000, 2000], loss: [0.7, 0.6], perplexity: [2, 1.8], samples_per_s: [9, 9], tokens_per_s: [90, 90],
    eval_task_step: [1000], eval_accuracy: [0.625], eval_loss: [0.7],
  });
  assert.equal(page.heldOutAccuracy(series), 0.625);
  page.appendWindow(series, { step: 2001, loss: 0.5, task: { accuracy: 0.75 } });
  assert.equal(page.heldOutAccuracy(series), 0.625);
  page.appendWindow(series, { step: 3000, loss: 0.5, eval_accuracy: 0.8125, eval_loss: 0.5 });
  assert.equal(page.heldOutAccuracy(series), 0.8125);
  assert.deepEqual(series.eval_task_step, [1000, 3000]);
  assert.deepEqual(series.eval_loss, [0.7, 0.5]);
});

test("a DiLoCo job shows its last outer step and what it sent; other jobs show nothing", () => {
  assert.deepEqual(page.outerStepKpis([{ step: 1, loss: 3 }]), []);
  const windows = [
    { step: 49, diloco: { outer_step: false, outer_bytes: 0 } },
    { step: 50, diloco: { outer_step: true, outer_bytes: 3 * 1024 * 1024 } },
    { step: 51, diloco: { outer_step: false, outer_bytes: 0 } },
  ];
  assert.deepEqual(page.outerStepKpis(windows), [["last outer step", "step 50"], ["outer exchange", "3.0 MiB"]]);
  assert.deepEqual(page.outerStepKpis(windows.slice(0, 1)), [["last outer step", "none yet"]]);
  assert.deepEqual(page.outerStepKpis([{ step: 3, diloco: { outer_step: true, outer_bytes: 0 } }]),
                   [["last outer step", "step 3"], ["outer exchange", "alone"]]);
  // Lines with the counters: the newest line's count and rate follow.
  const counted = [
    { step: 50, diloco: { outer_step: true, outer_bytes: 1024 * 1024, outer_steps: 1, outer_bytes_per_hour: 0 } },
    { step: 51, diloco: { outer_step: false, outer_bytes: 0, outer_steps: 1, outer_bytes_per_hour: 36 * 1024 * 1024 } },
  ];
  assert.deepEqual(page.outerStepKpis(counted), [["last outer step", "step 50"], ["outer exchange", "1.0 MiB"],
                                                 ["outer steps", "1"], ["outer bytes / hour", "36.0 MiB"]]);
});

test("the loss chart merges training and evaluation steps on one axis", () => {
  const series = { step: [1, 2, 4], loss: [3, 2, 1], perplexity: [20, 7.4, 2.7], eval_step: [2, 3],
                   eval_perplexity: [8, 6] };
  const [x, loss, ppl, evalPpl] = page.lossChartData(series);
  assert.deepEqual(x, [1, 2, 3, 4]);
  assert.deepEqual(loss, [3, 2, null, 1]);
  assert.deepEqual(ppl, [20, 7.4, null, 2.7]);
  assert.deepEqual(evalPpl, [null, 8, 6, null]);
});

test("a worker's links show each transport and device once, as UCX reported them", () => {
  assert.equal(page.linksText([{ ring: 0, peer: 1, transport: "tcp", device: "eth0" },
                            { ring: 1, peer: 2, transport: "tcp", device: "eth0" }]), "tcp/eth0");
  assert.equal(page.linksText([{ transport: "sysv", device: "memory" }, { transport: "tcp", device: "eth0" }]),
               "sysv/memory, tcp/eth0");
  assert.equal(page.linksText(undefined), "");
  const rows = page.mergeWorkers([{ rank: 0, node: "a", links: [{ transport: "tcp", device: "eth0" }] }], null, null);
  assert.equal(rows[0].links, "tcp/eth0");
});

test("the straggler's reason is shown as the server gives it", () => {
  assert.equal(page.stragglerReason({ straggler: { rank: 2, reason: "link" } }), " (its links)");
  assert.equal(page.stragglerReason({ straggler: { rank: 1, reason: "compute" } }), " (compute)");
  assert.equal(page.stragglerReason({ straggler: null }), "");
});

test("a job of one worker shows neither the ring chart nor the lateness chart; two ranks show both", () => {
  const alone = [{ step: 1, ranks: [{ rank: 0, lateness_s: 0 }], rings: [] }, { step: 2, ranks: [{ rank: 0 }] }];
  assert.deepEqual(page.panelsThatApply(alone), { rings: false, lateness: false });
  const two = [{ step: 1, ranks: [{ rank: 0 }, { rank: 1 }], rings: [{ ring: 0, seconds: 0.1, bus_gb_per_s: 1 }] }];
  assert.deepEqual(page.panelsThatApply(two), { rings: true, lateness: true });
  assert.deepEqual(page.panelsThatApply([]), { rings: false, lateness: false });
});

// A large job (metrics.every_rank_up_to): each window lists some ranks and carries statistics
// over all of them.
const boundedWindow = (step, listed) => ({
  step,
  reported_ranks: 1024,
  rank_stats: { ranks: 1024, lateness_s: { min: 0, p50: 0.01 * step, p99: 0.2, max: 0.9, max_rank: 37 } },
  ranks: listed.map((rank) => ({ rank, node: `n${rank}`, lateness_s: rank === 37 ? 0.9 : 0.1,
                                 time: { forward: 0.3, backward: 0.5 } })),
});

test("a large job's lateness chart draws the median, p99 and latest rank, not a line per rank", () => {
  const windows = [boundedWindow(1, [0, 37, 5]), boundedWindow(2, [0, 37, 6])];
  assert.equal(page.isBounded(windows[0]), true);
  assert.equal(page.isBounded({ step: 1, ranks: [] }), false);
  const { ranks, labels, data } = page.latenessChartData(windows);
  assert.deepEqual(ranks, []);
  assert.deepEqual(labels, ["median rank", "p99 rank", "latest rank"]);
  assert.deepEqual(data, [[1, 2], [0.01, 0.02], [0.2, 0.2], [0.9, 0.9]]);
  assert.equal(page.panelsThatApply(windows).lateness, true);
  const small = page.latenessChartData([{ step: 1, ranks: [{ rank: 0, lateness_s: 0 }, { rank: 1, lateness_s: 0.2 }] }]);
  assert.deepEqual(small.labels, ["rank 0", "rank 1"]);
});

test("above 16 ranks the lateness chart draws the statistics from the ranks each window lists", () => {
  const ranks = (late) => Array.from({ length: 64 }, (_, r) => ({ rank: r, lateness_s: r === late ? 2 : r / 100 }));
  const windows = [{ step: 1, ranks: ranks(63) }, { step: 2, ranks: ranks(5) }];
  const { ranks: lines, labels, data } = page.latenessChartData(windows);
  assert.deepEqual(lines, []);
  assert.deepEqual(labels, ["median rank", "p99 rank", "latest rank"]);
  // 64 ranks: the median is the 32nd smallest, p99 the 64th (ceil(0.99 × 64) = 64).
  assert.deepEqual(data, [[1, 2], [0.31, 0.32], [2, 2], [2, 2]]);
  const sixteen = page.latenessChartData([{ step: 1, ranks: ranks(3).slice(0, 16) }]);
  assert.equal(sixteen.labels.length, 16);
  assert.equal(sixteen.labels[0], "rank 0");
});

test("a large job's time split shows the newest window's listed ranks only", () => {
  const split = page.averageTimeSplit([boundedWindow(1, [0, 37, 5]), boundedWindow(2, [0, 37, 6])], 10);
  assert.deepEqual(split.ranks, [0, 6, 37]);
  assert.equal(split.parts.forward[0], 0.3);
});

test("a large job's tables say what they leave out", () => {
  const rows = page.mergeWorkers([{ rank: 5, node: "n5" }], boundedWindow(2, [0, 37, 6]), 37);
  assert.deepEqual(rows.map((r) => r.rank), [0, 6, 37], "the newest window's ranks, not the state's older ones");
  assert.equal(rows[2].straggler, true);
  assert.equal(page.workersCaption(3, 1024), "3 of 1024: the lowest rank, the straggler and the latest");
  assert.equal(page.workersCaption(3, 3), "");
  assert.equal(page.nodesCaption(64, 1024, { training: 1020, finished: 0, lost: 4 }),
               "64 of 1024 (1020 training, 4 lost): lost first, then those heard from longest ago");
  assert.equal(page.nodesCaption(2, 2, { training: 2 }), "");
});

test("a cluster job's headline shows the worst node's heartbeat p99; a single process none", () => {
  assert.deepEqual(page.heartbeatKpis({ heartbeat_rtt_ms: { nodes: 3, p50: 0.2, p99: 1.5, max: 9, worst_node: "c" } }),
                   [["heartbeat p99", "1.50 ms (c)"]]);
  assert.deepEqual(page.heartbeatKpis({ loss: 2 }), []);
});
