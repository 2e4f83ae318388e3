@0xc6a1d4e2f08b3a51;
# Metrics that a node's metrics actor forwards to the head's metrics hub, one per window.
# Field numbers are the wire contract: add fields at the end, never renumber.

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("troupe::schema");

struct WindowReport {
  step @0 :Int64;              # optimizer steps completed, counting this one
  rank @1 :Int32;              # worker that measured it
  loss @2 :Float64;            # sample-weighted mean masked-LM loss of the window
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
}
