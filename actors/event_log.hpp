#pragma once
/// RUN_DIR/events.jsonl: what happened to a job's membership, one JSON object per line, written
/// by whichever process saw it (the injecting worker, the head's coordinator). `troupe bench
/// recovery` reads it; so can a person after a run. Each event carries "event" and "unix_s".
///
///   {"event": "fault", "kind": "kill", "node": "c", "window": 3, …}      a fault injected
///   {"event": "node_lost", "node": "c", "generation": 1, "reason": …}  the coordinator's decision
///   {"event": "node_restarted", "node": "c", "generation": 2}          a restarted node admitted
///   {"event": "generation", "generation": 1, "start_steps": 2, "world": 2, "nodes": […]}
///                                                                      a new generation's plan sent
///   {"event": "job_stopped", "generation": 1, "reason": …}            the coordinator stopped every node
///   {"event": "self_fenced", "node": "c", "reason": …}                 a node that lost the head stopped
///   {"event": "fence_deadline", "node": "c", "grace_s": 3}             a fenced node's teardown hung: it ended itself
///   {"event": "launch", "nodes": 64, "restart": 0}                      the launcher started the nodes
///   {"event": "node_startup", "node": "c", "exec_unix_s": …, …, "wired_unix_s": …}
///                                                                      a node's way into generation 0 (actors/node_startup.hpp)
///   {"event": "heartbeat_round_trips", "node": "c", "count": 3000, "p50_ms": 0.4, "p99_ms": 2.1, "max_ms": 9.8}
///                                                                      a node's heartbeats' round trips, as it stops

#include <filesystem>

#include <nlohmann/json.hpp>

namespace troupe::actors {

/// Appends `event` with "unix_s" (the wall clock, µs resolution) to `file`; does nothing when
/// `file` is empty. A failure to write is logged, never thrown: events are for people and
/// benchmarks, not worth stopping training for.
void record_event(const std::filesystem::path& file, nlohmann::json event);

/// The wall clock in seconds since the epoch (what "unix_s" holds).
double unix_seconds();

}  // namespace troupe::actors
