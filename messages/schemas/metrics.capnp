@0xc6a1d4e2f08b3a51;
# Metrics that a node's metrics actor forwards to the head's metrics hub (actors/metrics_hub).
# Field numbers are the wire contract: add fields at the end, never renumber. Each WindowReport
# field has its row in messages/window_report_fields.hpp, through which the codec reads and writes it.

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("troupe::schema");

struct WindowReport {
  step @0 :Int64;              # optimizer steps completed, counting this one
  rank @1 :Int32;              # worker that measured it
  loss @2 :Float64;            # the window's loss: cross-entropy over all its masked tokens ÷ their count
  lr @3 :Float64;              # learning rate this step used
  gradNorm @4 :Float64;        # global gradient norm before clipping
  samples @5 :Int64;           # samples in the window (all ranks)
  tokens @6 :Int64;            # real tokens in the window (this rank)
  maskedTokens @7 :Int64;      # predicted tokens in the window (this rank)
  windowSeconds @8 :Float64;   # wall time from the previous step to this one
  dataWaitSeconds @9 :Float64; # time blocked waiting for micro-batches
  forwardSeconds @10 :Float64;
  backwardSeconds @11 :Float64;
  optimizerSeconds @12 :Float64;
  epoch @13 :UInt64;
  nextPosition @14 :UInt64;    # global data cursor after this window
  checkpointStallSeconds @15 :Float64;  # staging copies and waits for a busy checkpoint writer
  checkpointsSkipped @16 :Int64;        # checkpoints skipped so far (when_busy = "skip")
  parameterHash @17 :UInt64;            # xxh64 of the parameters before this window's step
  worldSize @18 :Int32;                 # workers whose samples the window's numbers cover
  allreduceSeconds @19 :Float64;        # waiting for the reducers (transfer, sums, skew between ranks)
  stragglerRank @20 :Int32;             # the rank that finished the window's compute last
  stragglerLatenessSeconds @21 :Float64;  # how long after the first rank it did
  latenessSeconds @22 :Float64;         # how long after the first rank this rank finished its compute
  ringSeconds @23 :List(Float64);       # per ring: from handing the reducer its slice to its reply
  ringBytes @24 :List(Int64);           # per ring: gradient bytes this rank's slice held (0: statistics only)
  evalLossSum @25 :Float64;             # periodic held-out evaluation (eval_every_windows): this rank's
  evalTokens @26 :Int64;                #   share of the fixed subset, summed NLL and predicted tokens
  evalSeconds @27 :Float64;             #   and the time it took (0, 0, 0 in windows without one)
  distilled @28 :Bool;                  # a distillation window: the loss parts below are set
  lossCe @29 :Float64;                  # soft-target KL · T² (per-sample mean over all ranks)
  lossMlm @30 :Float64;                 # masked-LM cross-entropy
  lossCos @31 :Float64;                 # cosine embedding loss of the last hidden states
  lossMse @32 :Float64;                 # squared error of the logits
  teacherSeconds @33 :Float64;          # this rank's teacher forwards (not in forwardSeconds)
  sentenceOrder @34 :Bool;              # an ALBERT window with SOP: loss = lossMlm + lossSop
  lossSop @35 :Float64;                 # sentence-order cross-entropy (per-sample mean over all ranks)
  sopAccuracy @36 :Float64;             # share of the window's samples whose order was guessed right
  lossScale @37 :Float64;               # fp16: the loss scale the window's backward passes used (0: none)
  skippedStep @38 :Bool;                # fp16: the gradient overflowed on some rank; no optimizer step
  ringLinkUnits @39 :List(Int64);       # per ring: chunks sent to the ring successor in the gradient's sum
  ringSendPostedUnix @40 :List(Float64);   # their mean post time (unix s, this host's clock)
  ringReceiveDoneUnix @41 :List(Float64);  # mean time the predecessor's chunks were in place
  ringReceivePostedUnix @42 :List(Float64);  # mean time this rank posted the receives for them
  exposedCommSeconds @43 :Float64;  # of allreduceSeconds, what the worker waited after its backward pass
  task @44 :Bool;                   # a fine-tuning window: loss is the task head's (per-example mean)
  taskAccuracy @45 :Float64;        # share of the window's examples whose label (QA: start and end) was right
  diloco @46 :Bool;                 # a DiLoCo inner step (sync.mode "diloco")
  outerStep @47 :Bool;              # DiLoCo: the window ended with an outer step
  outerBytes @48 :Int64;            # DiLoCo: bytes this rank sent for the outer step's pseudo-gradient
  outerSteps @49 :Int64;            # DiLoCo: outer steps so far (a resumed run counts ceil(step / H) for its start)
  outerBytesTotal @50 :Int64;       # DiLoCo: bytes this rank sent for outer steps since its process started
  outerBytesPerHour @51 :Float64;   # DiLoCo: outerBytesTotal over the hours since the rank's first window began
  ringSentBytes @52 :List(Int64);   # per ring: bytes this rank sent its ring successor for the window's gradient sums, as they travelled
  evalExamples @53 :Int64;          # fine-tuning's periodic evaluation: this rank's share of the held-out examples (evalLossSum: their task loss)
  evalCorrect @54 :Int64;           #   and how many of them the head got right
}

# A checkpoint the node's checkpointer wrote (or skipped because the writer was busy).
struct CheckpointReport {
  step @0 :Int64;
  unixSeconds @1 :Float64;     # when it was on disk
  seconds @2 :Float64;         # writing it, from the request to the rename
  bytes @3 :Int64;             # files of the checkpoint directory
  skipped @4 :Bool;            # checkpoint.when_busy = "skip" dropped it
}

# A warning or error a node logged.
struct LogLine {
  unixSeconds @0 :Float64;
  level @1 :Text;              # "warning", "error", "critical"
  text @2 :Text;
}

# What one node's metrics actor forwards to the hub: every report its workers and checkpointer
# made since the last batch, and the node process's own numbers.
struct RingLink {
  ring @0 :Int32;
  rank @1 :Int32;              # the sending rank (global)
  peer @2 :Int32;              # its successor in the ring
  transport @3 :Text;          # what UCX reports the endpoint's lanes use: "tcp", "sysv", ...
  device @4 :Text;             # "eth0", "memory", ...
}

struct MetricsBatch {
  node @0 :Text;               # the node's name in the manifest
  generation @1 :UInt64;       # membership generation the node was in (docs/faults.md)
  sequence @2 :UInt64;         # counts this process's batches from 0
  unixSeconds @3 :Float64;     # when the batch left the node
  residentBytes @4 :Int64;     # RSS of the node process
  dropped @5 :Int64;           # reports the node's bounded queue dropped so far (oldest first)
  windows @6 :List(WindowReport);
  checkpoints @7 :List(CheckpointReport);
  log @8 :List(LogLine);
  final @9 :Bool;              # the node's run ended: no more batches from this process
  writtenThrough @10 :Int64;   # a checkpoint of this step follows: write every window up to it
                               # (waiting briefly for missing ranks) before answering; 0: none
  links @11 :List(RingLink);   # the node's ring links in its current generation
  heartbeats @12 :HeartbeatRoundTrips;  # the node's heartbeats echoed since its previous batch
  resent @13 :Bool;            # windows an earlier generation's metrics actor reported and no hub
                               # confirmed writing (a head lost before its hub wrote them): the hub
                               # writes those it has no line for, never replaces one
}

# Round trips of a node's heartbeat datagrams to the head (docs/cluster.md#heartbeats).
struct HeartbeatRoundTrips {
  count @0 :UInt32;            # beats echoed; 0: none (the rest is then 0)
  p50Ms @1 :Float64;
  p99Ms @2 :Float64;
  maxMs @3 :Float64;
}
