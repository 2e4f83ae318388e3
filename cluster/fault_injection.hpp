#pragma once
/// Faults injected on purpose, to watch the runtime survive them: `troupe launch --inject
/// KIND:NODE@WINDOW[:PHASE]` (repeatable), carried to the nodes in TROUPE_INJECT (also how a
/// node started by hand gets them), or `troupe train --inject KIND:local@WINDOW[:PHASE]` for a
/// single process. The session takes them as settings (session_options::injected_faults).
/// Compiled in; costs a comparison per micro-batch when unused.
///
///   kill:NODE@W[:PHASE]   the node SIGKILLs itself in its window W (1-based, this run)
///   hang:NODE@W[:PHASE]   the node SIGSTOPs itself there (a frozen node)
///   slow:MS:NODE@W[:PHASE] from window W on, each of the node's workers sleeps MS ms per micro-batch
///                         (with a PHASE: once per window, at that phase)
///   drop:N:NODE@W[:PHASE] the node drops its next N heartbeats to the head (control messages
///                         lost): fewer than timeouts.heartbeat_ms covers go unnoticed; more
///                         make the head declare a live node lost, and fence it
///   corrupt-checkpoint:NODE@W   the checkpoint of window W, written by NODE (global rank 0's),
///                         gets a byte of model.safetensors flipped after its checksum was taken
///   enospc:NODE@W         writing that checkpoint fails halfway with ENOSPC (a full disk)
///   stall-checkpoint:BYTES:NODE@W  writing that checkpoint stops for good once BYTES bytes of
///                         model.safetensors are written (a hung disk; kill the job to end it)
///   slow-checkpoint:MS:NODE@W  writing that checkpoint pauses MS ms after its first byte (a slow disk)
///   diverge:NODE@W        before window W's replica check, the node's replicas nudge their first
///                         parameter (a silently corrupted replica): the check must stop the job
///   partition:NODE@W[:PHASE]  from window W's allreduce on (from window W + 1's when PHASE is
///                         optimizer or checkpoint), one of the node's reducers drops what it sends
///                         to their ring successors (a broken data link; heartbeats still flow):
///                         the ranks that wait on it time out and report it (once per process)
///
/// PHASE, where in window W (default forward):
///   data       the data loader builds the window's first micro-batch (it runs ahead of the worker)
///   forward    the worker starts the window's first micro-batch
///   backward   between the forward and the backward pass of that micro-batch
///   allreduce  the reducer of ring 0 starts the window's gradient sum (the other ranks are in it)
///   optimizer  the window's allreduce has finished; the optimizer step has not run
///   checkpoint the window's checkpoint is being written: model.safetensors is, the rest not
///              (on the node of global rank 0, which writes checkpoints; when one is due)
///   takeover   kill only, with failover: the node has just taken the head's role over from a
///              lost head (in window W or later), in the normal case (the holder before it wrote
///              its state), and has written nothing yet: the gap a head that dies at once leaves

#include <cstdint>
#include <string>
#include <vector>

#include "cluster/manifest.hpp"

namespace troupe::cluster {

/// TROUPE_INJECT: the faults, `;`-separated, as `--inject` writes them.
inline constexpr const char* inject_variable = "TROUPE_INJECT";

enum class fault_kind { kill, hang, slow, drop, corrupt_checkpoint, enospc, partition, stall_checkpoint, slow_checkpoint, diverge };
enum class fault_phase { data, forward, backward, allreduce, optimizer, checkpoint, takeover };

/// "data", "forward", … as the spec writes it.
const char* to_string(fault_phase phase);
/// "kill", "hang", "slow", "drop", "corrupt-checkpoint", "enospc", "partition", "stall-checkpoint",
/// "slow-checkpoint", "diverge".
const char* to_string(fault_kind kind);

struct injected_fault {
  fault_kind kind = fault_kind::kill;
  std::string node;
  int64_t window = 1;
  int64_t slow_ms = 0;  ///< slow and slow-checkpoint only
  int64_t stall_bytes = 0;  ///< stall-checkpoint only
  int64_t drop_count = 0;  ///< drop only
  fault_phase phase = fault_phase::forward;  ///< where in the window it fires
  bool phase_given = false;  ///< slow: with a phase, one sleep there per window instead of one per micro-batch
};

/// Parses one `--inject` value; throws troupe::error naming `--inject`, the value and what was
/// expected, or the unknown node (when `manifest` is given).
injected_fault parse_fault(const std::string& spec, const cluster_manifest* manifest = nullptr);

/// `--inject` values checked against the manifest, joined as TROUPE_INJECT for the launcher's
/// local children (which inherit it). ssh and srun do not carry the environment, so a fault for
/// a node on another host is refused (set TROUPE_INJECT where that node starts).
std::string injection_for_local_nodes(const cluster_manifest& manifest, const std::vector<std::string>& specs);

/// The faults of `specs` (`;`-separated, as TROUPE_INJECT holds them) that concern `node`.
std::vector<injected_fault> faults_for_node(const std::string& specs, const std::string& node);

}  // namespace troupe::cluster
