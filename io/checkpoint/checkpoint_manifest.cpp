#include "io/checkpoint/checkpoint_manifest.hpp"

#include <nlohmann/json.hpp>

#include "io/os/file_util.hpp"
#include "messages/capnp_message.hpp"
#include "messages/error.hpp"
#include "messages/schemas/checkpoint.capnp.h"

namespace troupe::io {

std::vector<std::byte> encode_manifest(const checkpoint_manifest& m) {
  capnp::MallocMessageBuilder message;
  auto out = message.initRoot<schema::CheckpointManifest>();
  out.setFormatVersion(m.format_version);
  out.setStep(m.step);
  out.setWindow(m.window);
  out.setConsumedSamples(m.consumed_samples);
  auto cursor = out.initCursor();
  cursor.setSeed(m.seed);
  cursor.setEpoch(m.epoch);
  cursor.setNextPosition(m.next_position);
  auto rng = out.initRng(static_cast<unsigned>(m.rng.size()));
  for (unsigned i = 0; i < m.rng.size(); ++i) {
    rng[i].setName(m.rng[i].name);
    rng[i].setSeed(m.rng[i].seed);
    rng[i].setCounter(m.rng[i].counter);
  }
  auto scheduler = out.initScheduler();
  scheduler.setKind(m.scheduler_kind);
  scheduler.setStep(m.scheduler_step);
  scheduler.setLastLr(m.last_lr);
  auto scaler = out.initLossScaler();
  scaler.setEnabled(m.loss_scaler.has_value());
  if (m.loss_scaler) {
    const auto& l = *m.loss_scaler;
    scaler.setScale(l.scale);
    scaler.setGoodSteps(l.iteration - l.last_overflow_iteration - 1);
    scaler.setHysteresis(l.hysteresis_left);
    scaler.setIteration(l.iteration);
    scaler.setLastOverflowIteration(l.last_overflow_iteration);
    scaler.setSkippedSteps(l.skipped_steps);
  }
  out.setWorldSize(m.world_size);
  out.setJobConfig(m.job_config);
  out.setJobConfigHash(m.job_config_hash);
  out.setVocabHash(m.vocab_hash);
  out.setDatasetSize(m.dataset_size);
  out.setDataIdentity(m.data_identity);
  out.setSequenceLength(m.sequence_length);
  auto files = out.initFiles(static_cast<unsigned>(m.files.size()));
  for (unsigned i = 0; i < m.files.size(); ++i) {
    files[i].setName(m.files[i].name);
    files[i].setSize(m.files[i].size);
    files[i].setXxh64(m.files[i].xxh64);
  }
  out.setCreatedUnixMs(m.created_unix_ms);
  return messages::flat_message_bytes<std::vector<std::byte>>(message);
}

checkpoint_manifest decode_manifest(const std::byte* data, std::size_t size, const std::string& name) {
  // A manifest is kilobytes (the job config is its largest part): bound what hostile bytes can
  // make the reader visit, and the list lengths, before anything is copied out.
  capnp::ReaderOptions limits;
  limits.traversalLimitInWords = 1 << 20;
  limits.nestingLimit = 16;
  checkpoint_manifest m;
  messages::read_flat_message<schema::CheckpointManifest>(
      data, size, limits, name + ": checkpoint manifest", [&](schema::CheckpointManifest::Reader in) {
    m.format_version = in.getFormatVersion();
    m.step = in.getStep();
    m.window = in.getWindow();
    m.consumed_samples = in.getConsumedSamples();
    m.seed = in.getCursor().getSeed();
    m.epoch = in.getCursor().getEpoch();
    m.next_position = in.getCursor().getNextPosition();
    constexpr unsigned max_entries = 4096;
    if (in.getRng().size() > max_entries || in.getFiles().size() > max_entries)
      throw make_error(name, ": manifest lists ", in.getRng().size(), " RNG streams and ", in.getFiles().size(),
                       " files (at most ", max_entries, " each)");
    for (auto r : in.getRng()) m.rng.push_back({r.getName().cStr(), r.getSeed(), r.getCounter()});
    m.scheduler_kind = in.getScheduler().getKind().cStr();
    m.scheduler_step = in.getScheduler().getStep();
    m.last_lr = in.getScheduler().getLastLr();
    if (const auto l = in.getLossScaler(); l.getEnabled()) {
      compute::loss_scale_state state;
      state.scale = l.getScale();
      state.hysteresis_left = l.getHysteresis();
      state.iteration = l.getIteration();
      state.last_overflow_iteration = l.getLastOverflowIteration();
      state.skipped_steps = l.getSkippedSteps();
      if (!(state.scale > 0) || state.iteration < 0 || state.skipped_steps < 0 || state.skipped_steps > state.iteration ||
          state.last_overflow_iteration < -1 || state.last_overflow_iteration >= state.iteration || state.hysteresis_left < 1)
        throw make_error(name, ": the loss scaler's state is inconsistent (scale ", state.scale, ", iteration ",
                         state.iteration, ", last overflow ", state.last_overflow_iteration, ", skipped ",
                         state.skipped_steps, ", hysteresis ", state.hysteresis_left, ")");
      m.loss_scaler = state;
    }
    m.world_size = in.getWorldSize();
    m.job_config = in.getJobConfig().cStr();
    m.job_config_hash = in.getJobConfigHash().cStr();
    m.vocab_hash = in.getVocabHash().cStr();
    m.dataset_size = in.getDatasetSize();
    m.data_identity = in.getDataIdentity().cStr();
    m.sequence_length = in.getSequenceLength();
    for (auto f : in.getFiles()) m.files.push_back({f.getName().cStr(), f.getSize(), f.getXxh64()});
    m.created_unix_ms = in.getCreatedUnixMs();
  });
  if (m.format_version != checkpoint_manifest::current_format)
    throw make_error(name, ": checkpoint format ", m.format_version, ", this troupe reads format ",
                     checkpoint_manifest::current_format);
  if (m.files.empty()) throw make_error(name, ": manifest lists no files");
  for (const auto& f : m.files)
    if (!is_plain_file_name(f.name))
      throw make_error(name, ": manifest names an invalid file '", f.name, "'");
  if (m.step < 0 || m.world_size < 1) throw make_error(name, ": manifest has step ", m.step, " and world size ", m.world_size);
  return m;
}

nlohmann::json checkpoint_manifest::loss_scaler_json() const {
  if (!loss_scaler) return {{"enabled", false}};
  const auto& l = *loss_scaler;
  return {{"enabled", true},
          {"scale", l.scale},
          {"iteration", l.iteration},
          {"last_overflow_iteration", l.last_overflow_iteration},
          {"hysteresis", l.hysteresis_left},
          {"skipped_steps", l.skipped_steps}};
}

std::string checkpoint_manifest::to_json() const {
  nlohmann::json files_json = nlohmann::json::array();
  for (const auto& f : files) files_json.push_back({{"name", f.name}, {"size", f.size}, {"xxh64", hex64(f.xxh64)}});
  nlohmann::json rng_json = nlohmann::json::array();
  for (const auto& r : rng) rng_json.push_back({{"name", r.name}, {"seed", r.seed}, {"counter", r.counter}});
  nlohmann::json job = nlohmann::json::parse(job_config, nullptr, false);
  return nlohmann::json{{"format_version", format_version},
                        {"step", step},
                        {"window", window},
                        {"consumed_samples", consumed_samples},
                        {"data_cursor", {{"seed", seed}, {"epoch", epoch}, {"next_position", next_position}}},
                        {"rng", rng_json},
                        {"scheduler", {{"kind", scheduler_kind}, {"step", scheduler_step}, {"last_lr", last_lr}}},
                        {"loss_scaler", loss_scaler_json()},
                        {"world_size", world_size},
                        {"job_config", job.is_discarded() ? nlohmann::json(job_config) : job},
                        {"job_config_hash", job_config_hash},
                        {"vocab_hash", vocab_hash},
                        {"dataset_size", dataset_size},
                        {"data_identity", data_identity},
                        {"sequence_length", sequence_length},
                        {"files", files_json},
                        {"created_unix_ms", created_unix_ms}}
      .dump(2);
}

}  // namespace troupe::io
