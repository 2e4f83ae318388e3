@0xd2b7e64a91c03f15;
# The manifest of a checkpoint directory (manifest.bin), written last: a checkpoint without a
# complete manifest whose files match their sizes and hashes is never trusted.
# Field numbers are the on-disk contract: add fields at the end, never renumber.

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("troupe::schema");

struct CheckpointManifest {
  formatVersion @0 :UInt32;
  step @1 :Int64;                # optimizer steps completed
  window @2 :Int64;              # accumulation windows completed
  consumedSamples @3 :UInt64;    # samples consumed since the start of training
  cursor @4 :DataCursor;         # where the global sample stream continues
  rng @5 :List(RngState);        # every random stream training draws from
  scheduler @6 :SchedulerState;
  lossScaler @7 :LossScalerState;
  worldSize @8 :Int32;
  jobConfig @9 :Text;            # the job config as JSON
  jobConfigHash @10 :Text;       # xxh64 (hex) of jobConfig
  vocabHash @11 :Text;           # xxh64 (hex) of the tokenizer file the model was trained with
  datasetSize @12 :UInt64;       # training sequences in an epoch
  files @13 :List(FileEntry);
  createdUnixMs @14 :Int64;
  dataIdentity @15 :Text;        # the training data: xxh64 (hex) of its manifest.json and its train
                                 # shards' payload checksums ("" in older checkpoints)
  sequenceLength @16 :UInt32;    # the data's max_seq_length (0 before format 2.1)
}

struct DataCursor {
  seed @0 :UInt64;
  epoch @1 :UInt64;
  nextPosition @2 :UInt64;       # global position: epoch × datasetSize + index in the epoch
}

struct RngState {
  name @0 :Text;                 # e.g. "dropout/rank0"
  seed @1 :UInt64;
  counter @2 :UInt64;            # draws taken (counter-based generators)
}

struct SchedulerState {
  kind @0 :Text;
  step @1 :Int64;
  lastLr @2 :Float64;
}

struct LossScalerState {
  enabled @0 :Bool;              # fp16 only; bf16 needs no scaling
  scale @1 :Float64;
  goodSteps @2 :Int64;           # windows since the last overflow (informational)
  hysteresis @3 :Int32;          # overflows still tolerated before the scale drops
  iteration @4 :Int64;           # windows the scaler has seen (DeepSpeed's cur_iter)
  lastOverflowIteration @5 :Int64;
  skippedSteps @6 :Int64;        # windows whose optimizer step an overflow skipped
}

struct FileEntry {
  name @0 :Text;
  size @1 :UInt64;
  xxh64 @2 :UInt64;
}
