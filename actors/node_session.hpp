#pragma once
/// One node of a multi-node job (`troupe node`): rendezvous with the head, then training.

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>

#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "actors/early_silence_vote.hpp"
#include "actors/metrics_hub.hpp"
#include "actors/node_startup.hpp"
#include "actors/training_session.hpp"
#include "cluster/manifest.hpp"
#include "cluster/plan.hpp"
#include "io/config/job_config.hpp"
#include "messages/error.hpp"

namespace troupe::cluster {
class head_lease;
struct head_holder;
struct head_record_keys;
struct head_lease_settings;
struct head_term;
struct stored_membership;
}

namespace troupe::io {
struct etcd_settings;
class ucx_context;
class ucx_transport;
class link_probe_responder;
}

namespace troupe::actors {

class node_heartbeats;

/// Thrown by a node that finds in etcd that its job is already over (head failover): there is
/// nothing to rejoin and no role to take. `stopped`: its head stopped it with an error; else it
/// ended well. `troupe node` exits with cluster::job_stopped_status, or 0.
class job_over : public error {
 public:
  job_over(const std::string& what, bool stopped) : error(what), stopped(stopped) {}
  bool stopped;
};

struct node_identity {
  cluster::cluster_manifest manifest;  ///< from cluster::load_manifest (file_hash set)
  std::string name;            ///< this node's name in the manifest
  /// Restarted by the launcher after it was lost (`troupe node --rejoin`): it joins the running
  /// job's next generation and copies its state from a live replica.
  bool restarted = false;
};

/// This process's membership in a job: steps 1–3 below in the constructor, a new generation's
/// in rejoin(), step 4 in finish(). Members are declared so that the UCX context outlives the
/// actor system, whose reducers use its transports.
class cluster_membership {
 public:
  /// `job_hash` must be equal on every node (the head refuses joins that differ).
  /// `events`: RUN_DIR/events.jsonl, where the head's coordinator records membership changes.
  /// `hub`: the job's metrics hub, started on the head (ignored elsewhere).
  cluster_membership(const node_identity& node, uint64_t job_hash, const std::filesystem::path& events,
                     std::optional<metrics_hub_settings> hub = std::nullopt);
  ~cluster_membership();
  cluster_membership(const cluster_membership&) = delete;
  cluster_membership& operator=(const cluster_membership&) = delete;

  caf::actor_system& system() { return *system_; }
  caf::scoped_actor& self() { return *self_; }
  const cluster_role& role() const { return role_; }
  /// Goes on as membership generation `generation` (after the coordinator lost a node): with
  /// `plan`, its plan for this node that came with the news, on the standby transports; else by
  /// joining it with the steps this node's workers completed. The role becomes the new plan's.
  void rejoin(uint64_t generation, int64_t committed_steps, const std::string& plan = "");
  /// After the head's coordinator went down, with failover (docs/faults.md#head-failover):
  /// finds the node that holds the head's role now, or takes it, and joins the generation that
  /// head forms with the steps this node's workers completed. The role becomes the new plan's.
  void follow_head_role(int64_t committed_steps, const std::string& why);
  /// After only the control connection to the head closed, the head still echoing this node's
  /// heartbeats (docs/faults.md#a-control-connection-that-breaks): connects to the same head
  /// again and joins the generation it forms with the steps this node's workers completed, in one
  /// request. The role becomes the new plan's. Throws when the head does not take it back.
  void reconnect_to_head(int64_t committed_steps, const std::string& why);
  /// The injected fault kill:NODE@W:takeover (cluster/fault_injection.hpp): this process kills
  /// itself right after it takes the head's role over from window W on, before writing anything.
  void kill_when_taking_over(int64_t window) { takeover_kill_window_ = window; }
  /// Tells the coordinator this node stops with an error (so the job stops, whatever the
  /// policy); waits at most a second for it to hear.
  void report_error(const std::string& reason);
  /// On the head: the metrics hub writes every window it holds (a job stopping with an error
  /// keeps the lines of the windows some ranks finished). Waits at most 3 s.
  void flush_metrics();
  /// Reports this node finished and waits for the coordinator's release.
  void finish();

 private:
  /// The head's part in this process: hub, heartbeat receiver, coordinator (going on from
  /// `takeover` when given), published on the manifest's head port.
  void start_head(const cluster::stored_membership* takeover, const std::string& why);
  void start_heartbeats();
  /// The coordinator published at HOST:PORT, tried until `limit`; none when it does not answer
  /// (`last_error`, when given, says why the last try failed).
  caf::actor reach_coordinator_at(const std::string& host, int64_t port, std::chrono::milliseconds limit,
                                  std::string* last_error);
  // Failover (actors/node_failover.cpp).
  io::etcd_settings failover_etcd() const;
  cluster::head_record_keys failover_keys() const;
  cluster::head_lease_settings taking_settings(const cluster::head_record_keys& keys, const cluster::head_holder& me) const;
  /// The job's first head takes the role in etcd before it starts coordinating.
  void take_head_role_at_start();
  /// A restarted node: the manifest's head becomes the holder etcd names, and coordinator_ its
  /// coordinator (etcd asked again while a holder does not answer, until timeouts.join).
  void follow_holder_at_start();
  /// The first join; a restarted node's, with failover, made again to the role's next holder
  /// while the head it joined loses the role (actors/followed_head_watch.hpp).
  void join_following_the_role(bool restarted, startup_timeline* startup);
  /// Who holds the role after `lost`, the head this node followed, was lost; this node when it
  /// took it. `process_ended`: the head's connection closed (its lease may be revoked).
  cluster::head_holder holder_after_loss(const std::string& lost, bool process_ended, const std::string& why);
  /// The manifest's head fields name `holder` from now on (messages, heartbeats, the plan's rules).
  void follow(const cluster::head_holder& holder);
  /// Takes the role if it is free, and becomes the head; false when another node took it first
  /// (`*holder` says who).
  bool try_take_head_role(const std::string& why, cluster::head_term* holder);
  /// What the head's lease calls when the role is lost: the coordinator is killed, the process
  /// ends 3 s later (head_fenced in events.jsonl).
  std::function<void(const std::string&)> head_role_lost_handler() const;
  /// Opens this node's transports, joins the coordinator with their addresses and takes its
  /// place in the plan it answers with; stamps the steps in `startup` when given. `generation`
  /// none: whichever the head forms (a node that followed the head's role to a new holder).
  void join(std::optional<uint64_t> generation, int64_t committed_steps, bool restarted,
            startup_timeline* startup = nullptr);
  /// transports[w][r]: local worker w's transport for ring r.
  using local_transports = std::vector<std::vector<std::shared_ptr<io::ucx_transport>>>;
  /// A join's fields but the transports' addresses (`generation` as for join()).
  cluster::join_request join_basics(std::optional<uint64_t> generation, int64_t committed_steps, bool restarted) const;
  cluster::join_request join_request_for(std::optional<uint64_t> generation, int64_t committed_steps, bool restarted,
                                         local_transports& transports);
  cluster::cluster_plan request_plan(const cluster::join_request& join, bool reconnecting = false);
  /// Throws unless `plan` answers a join of `generation` (or later) with this node's workers.
  void check_plan_answers(const cluster::cluster_plan& plan, uint64_t generation) const;
  /// Takes `plan_bytes` (generation `generation`'s plan, from the news) on the standby
  /// transports, opens the next standby and tells the coordinator (`standby_atom`).
  void take_announced_plan(uint64_t generation, int64_t committed_steps, const std::string& plan_bytes);
  /// The standby transports, leaving none.
  local_transports take_standby();
  /// Opens transports for the generation after the next plan (or takes those opened ahead);
  /// returns their addresses.
  cluster::worker_endpoints open_standby();
  /// One transport per local worker per ring, newly opened.
  local_transports open_transports() const;
  /// Starts opening, on a thread of its own, the standby set the next join will carry, while this
  /// node waits for the head's role to settle (the join then does not wait for UCX's workers).
  void open_standby_ahead();
  void take_place_in(const cluster::cluster_plan& plan, local_transports& transports);
  void report_links(const cluster::cluster_plan& plan);
  void watch_for_cut_links(const cluster::cluster_plan& plan);
  uint64_t probe_token() const;

  node_identity node_;
  uint64_t job_hash_ = 0;
  uint64_t incarnation_ = 0;  ///< this process's, in its joins and heartbeats (io/comm/heartbeat_datagram.hpp)
  std::shared_ptr<std::atomic<int64_t>> heartbeats_to_drop_ = std::make_shared<std::atomic<int64_t>>(0);
  std::shared_ptr<std::atomic<bool>> partitioned_ = std::make_shared<std::atomic<bool>>(false);
  /// The head stopped answering heartbeats: this node fenced itself and tells the head nothing more.
  std::shared_ptr<std::atomic<bool>> head_silent_ = std::make_shared<std::atomic<bool>>(false);
  bool is_head_ = false;
  std::filesystem::path events_;  ///< RUN_DIR/events.jsonl, or empty
  /// The metrics hub's settings: the head starts it, and so does a node that takes the role over.
  std::optional<metrics_hub_settings> hub_settings_;
  /// The coordinator this process spawned, for the head's lease's thread (its lost handler).
  struct coordinator_slot {
    std::mutex mutex;
    caf::actor actor;
  };
  std::shared_ptr<coordinator_slot> local_coordinator_ = std::make_shared<coordinator_slot>();
  /// The head's role in etcd, while this process holds it (failover only). Released first when
  /// the process ends, before anything its lost handler might reach.
  std::unique_ptr<cluster::head_lease> head_lease_;
  /// The etcd term of the head this node follows; 0 until it is known (the first head's).
  int64_t followed_term_ = 0;
  /// With failover: what the last plan said of this node's vote (cluster_plan::electors), and
  /// the vote cast when its heartbeats find the head silent; else null.
  std::shared_ptr<early_silence_vote> early_vote_;
  /// What the heartbeats call when the head falls silent (early_vote_); empty without failover.
  std::function<void()> silence_vote_callback() const;
  int64_t steps_at_head_loss_ = 0;    ///< the committed steps when this node last followed a lost head
  int64_t takeover_kill_window_ = 0;  ///< an injected kill:NODE@W:takeover (0: none)
  std::string etcd_answered_;  ///< the etcd endpoint that answered last (asked first next time)
  double role_taken_unix_s_ = 0;  ///< when this node's take of the head's role was answered (0: it took none)
  bool finished_ = false;  ///< finish() returned: the job ended well here (the teardown watchdog's exit status)
  std::unique_ptr<io::ucx_context> ucx_;
  /// Answers the other nodes' link probes (io/comm/link_probe.hpp) for as long as the node runs.
  std::unique_ptr<io::link_probe_responder> probe_responder_;
  std::unique_ptr<caf::actor_system_config> system_config_;
  std::unique_ptr<caf::actor_system> system_;
  std::unique_ptr<caf::scoped_actor> self_;
  caf::actor coordinator_;
  cluster_role role_;
  /// Transports opened for the next generation, their addresses already with the coordinator.
  local_transports standby_;
  /// The set after standby_, being opened ahead (open_standby_ahead), or none.
  std::future<local_transports> standby_ahead_;
  /// An actor that runs until told to stop (a timer loop); declared after the actor system, so
  /// it is stopped first, before the system (which waits for every actor) goes, even when the
  /// constructor throws.
  struct stopped_on_destruction {
    caf::actor actor;
    ~stopped_on_destruction();
  };
  stopped_on_destruction hub_;        ///< the head's metrics hub
  std::unique_ptr<node_heartbeats> heartbeats_;  ///< this node's heartbeats (stopped before the actor system goes)
};

/// xxh64 of the job config as given (what the head compares).
uint64_t job_config_hash(const io::job_config& config);

/// Runs this node's part of the job:
///  1. the head node publishes the coordinator on head.port (CAF middleman);
///  2. the node opens one transport per local worker per ring and joins the coordinator with
///     their addresses, retrying until timeouts.join (a head that cannot be reached is an
///     error naming host:port);
///  3. with the plan, it connects each transport to its ring neighbours and trains
///     (run_generation with a cluster_role); when the coordinator lost another node
///     (faults.policy "elastic"), the node keeps its trainers, joins the next generation and
///     trains on from the steps its workers completed (docs/faults.md);
///  4. it reports finished and waits for the coordinator's release, so no node exits while
///     another may still need it.
/// `config` must have been parsed for the manifest's world size. Throws troupe::error on any
/// failure; the caller should exit the process (a reducer may still be blocked in a transport
/// until its collective timeout).
training_summary run_node(const node_identity& node, io::job_config config, const session_options& options);

}  // namespace troupe::actors
