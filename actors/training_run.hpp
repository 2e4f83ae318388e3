#pragma once
/// One run of run_training (actors/training_session.hpp), as named steps over the state they
/// share: check the inputs, prepare the trainers, take the run directory, resume, spawn the
/// actors, wait, and stop (or hand the trainers over to the next membership generation).
/// Private to actors/: training_run.cpp spawns, training_run_inputs.cpp checks and prepares,
/// training_run_ending.cpp waits and ends.

#include <caf/all.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "actors/data_loader.hpp"
#include "actors/training_session.hpp"
#include "actors/worker.hpp"
#include "cluster/fault_injection.hpp"
#include "cluster/node_machine.hpp"
#include "io/comm/collective.hpp"
#include "io/checkpoint/checkpoint_store.hpp"
#include "io/checkpoint/run_directory.hpp"
#include "io/data/token_dataset.hpp"

namespace troupe::actors {

/// What resuming prepared: the checkpoint's contents and every local worker's trainer holding it.
struct resumed_run {
  std::shared_ptr<io::checkpoint_contents> contents;
  std::vector<std::shared_ptr<compute::mlm_trainer>> trainers;  ///< by local worker
};

/// Builds the local workers' trainers and reads the checkpoint of `options.resume` into them,
/// after checking it fits the data and the config (training_session.cpp); empty without resume.
/// `world`: the job's ranks now (streaming DiLoCo restarts its rounds when the checkpoint had
/// another number).
resumed_run resume_trainers(const io::job_config& config, const session_options& options, const io::token_dataset& data,
                            const std::vector<compute::trainer_options>& workers, int world);

/// The trainer options a config gives every worker (before its rank and device).
compute::trainer_options trainer_options_of(const io::job_config& config,
                                            std::shared_ptr<const compute::teacher_setup> teacher);

class training_run {
 public:
  training_run(caf::actor_system& system, caf::scoped_actor& supervisor, io::job_config config,
               const session_options& options, const cluster_role& role, carried_state* carried);

  generation_outcome execute();

 private:
  // Before any actor starts (training_run_inputs.cpp).
  void check_inputs();
  void prepare_trainers();
  std::optional<compute::task_head> task_head() const;  ///< the config's fine-tuning head, if any
  int64_t gradient_elements() const;
  int64_t outer_carrier_elements() const;
  at::Tensor outer_carrier(int local, const std::string& device) const;
  void check_staging_fits() const;
  void hold_run_directory();
  void set_start_state();
  void log_teacher() const;

  // Spawning (training_run.cpp).
  void spawn_reporters();
  void spawn_rank(int local);
  std::vector<caf::actor> spawn_reducers(int local, int rank);
  std::function<std::unique_ptr<io::collective>()> collective_opener(int local, int rank, int ring) const;
  data_loader_settings loader_settings(int rank) const;

  // Waiting and ending (training_run_ending.cpp).
  std::optional<training_summary> await_summaries();
  /// Hands `event` to this generation's node machine and carries out its effects; an event its
  /// table has no row for becomes the run's failure.
  void apply(const cluster::node_event& event);
  /// The head announced a generation: the machine decides whether this one ends.
  void on_membership_news(uint64_t generation, const std::string& reason, const std::string& plan);
  void note_losses(const messages::window_report& report);
  std::chrono::milliseconds next_wait() const;
  bool handing_over() const;
  /// The coordinator went down: whether only its connection closed and the head still echoes
  /// this node's heartbeats (waits up to three heartbeat periods for one).
  bool head_answers_after(const caf::down_msg& down) const;
  void hand_over();
  void abort_transports(const std::string& reason);
  void stop();

  bool nccl() const { return !role_.nccl_ids.empty(); }
  bool later_generation() const { return role_.generation > 0; }
  /// A process alone (`troupe train`) runs its own metrics hub; a cluster's is on the head.
  bool own_hub() const { return !role_.coordinator; }
  // Under faults.policy "elastic" a ring that fails because a peer died is not yet the job's
  // failure: the head declares the node lost within its heartbeat timeout and announces the
  // next generation. The session waits that long (twice, plus slack) before it gives up
  // (the node machine's awaiting_verdict).
  std::chrono::milliseconds lost_peer_wait() const { return 2 * role_.heartbeat + std::chrono::seconds(5); }

  carried_state* carried_;  ///< between generations of a cluster job; null for one process
  const bool continuing_;   ///< carried_ holds a previous generation's trainers
  caf::actor_system& system_;
  caf::scoped_actor& supervisor_;
  io::job_config config_;
  const session_options& options_;
  const cluster_role& role_;  ///< a world of one (cluster_role::alone()) for `troupe train`
  const int world_;
  const int first_rank_;
  const int local_workers_;
  const bool writes_checkpoints_;  ///< this process holds global rank 0, which writes checkpoints

  std::shared_ptr<const io::token_dataset> dataset_;
  std::shared_ptr<const io::token_dataset> validation_;        ///< eval_every_windows' held-out data
  std::shared_ptr<const io::mlm_batch_builder> eval_batches_;  ///< (uses validation_)
  fault_trigger faults_;  ///< the fault seam every actor of the run is given
  std::vector<compute::trainer_options> trainers_;
  std::vector<std::shared_ptr<io::shared_region>> regions_;
  std::shared_ptr<const compute::teacher_setup> teacher_;  ///< distillation's, read by check_inputs
  std::shared_ptr<const compute::named_tensors> pretrained_;  ///< fine-tuning's starting model, or null
  std::shared_ptr<const std::vector<double>> masking_weights_;  ///< data.mlm_smoothing's, or null
  std::shared_ptr<const std::vector<bool>> word_continuations_;  ///< data.whole_word_masking's, or null
  std::optional<io::run_directory_lock> run_directory_;
  resumed_run resumed_;
  io::training_state start_;
  int64_t run_start_steps_ = 0;  ///< the step this process's run began at (before any generation)
  int64_t windows_ = 0;
  caf::actor metrics_actor_, checkpoint_actor_;
  /// Where this generation's metrics actor leaves the windows no hub confirmed writing.
  std::shared_ptr<std::vector<messages::window_report>> unwritten_windows_;
  caf::actor hub_;  ///< a single-process run's own metrics hub (a cluster's is on the head)
  std::vector<caf::actor> spawned_;  ///< every actor of the run: monitored, and stopped at the end
  std::vector<std::shared_ptr<std::shared_ptr<compute::mlm_trainer>>> handoffs_;  ///< by local worker
  std::vector<double> losses_;  ///< of this process's first worker's windows
  std::string failure_;
  /// The newest generation announced with this node's plan, and that plan (encoded).
  std::pair<uint64_t, std::string> announced_plan_;
  /// The node's side of membership while the generation trains (cluster/node_machine.hpp).
  std::unique_ptr<cluster::node_machine> membership_;
  std::set<caf::actor_addr> gone_;  ///< actors whose down message the session has read
  std::set<caf::actor_addr> reducers_;  ///< this generation's reducers (whose suspicions count)
  std::chrono::steady_clock::time_point verdict_deadline_;  ///< awaiting verdict: when to give up
};

}  // namespace troupe::actors
